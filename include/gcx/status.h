/**
 * @file status.h
 * @brief The one status type of gcx, shared by every public header.
 *
 * Convention (as in UCX): GCX_OK is zero, GCX_INPROGRESS is the only positive
 * value, every error is negative. Functions set their output arguments only
 * when they return GCX_OK, with one exception: the constructors that talk
 * to other ranks (gcx_comm_split, gcx_comm_create_group, gcx_comm_shrink,
 * gcx_comm_shrink_ranks) set *newcomm_p to NULL once their arguments are
 * checked, so any later failure leaves NULL there.
 */
#ifndef GCX_STATUS_H
#define GCX_STATUS_H

/**
 * Marks a declaration of the public API. libgcx is built with hidden symbol
 * visibility: only what is declared with GCX_API is exported by libgcx.so
 * (tests/check_exports.sh checks it). Every public header includes this one.
 */
#if defined(__GNUC__) || defined(__clang__)
#define GCX_API __attribute__((visibility("default")))
#else
#define GCX_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Result of every gcx call. */
typedef enum gcx_status {
    GCX_OK              = 0,   /**< Success. */
    GCX_INPROGRESS      = 1,   /**< Non-blocking operation not finished yet. */
    GCX_ERR_INVALID     = -1,  /**< Bad argument or bad environment value. */
    GCX_ERR_NOMEM       = -2,  /**< Out of memory. */
    GCX_ERR_TIMEOUT     = -3,  /**< Did not complete within GCX_TIMEOUT. */
    GCX_ERR_PEER        = -4,  /**< A peer died or its connection was lost. */
    GCX_ERR_MISMATCH    = -5,  /**< Ranks disagree on counts, types or roots. */
    GCX_ERR_TRANSPORT   = -6,  /**< The transport (UCX, verbs) failed. */
    GCX_ERR_UNSUPPORTED = -7,  /**< Valid request that this build cannot do. */
    GCX_ERR_NOT_FOUND   = -8,  /**< A file, device or entry does not exist. */
    GCX_ERR_IO          = -9,  /**< Reading or writing a file or socket failed. */
    GCX_ERR_RANGE       = -10, /**< A value (index, NaN/Inf, capacity) is out of range. */
    GCX_ERR_UNDECODABLE = -11, /**< The arrived set cannot be decoded (coding). */
    GCX_ERR_CANCELED    = -12, /**< The operation was canceled. */
    GCX_ERR_REVOKED     = -13, /**< The communicator was revoked (gcx_comm_revoke). */
} gcx_status_t;

/** Short human-readable text for a status; never NULL. */
GCX_API
const char *gcx_strerror(gcx_status_t status);

#ifdef __cplusplus
}
#endif

#endif /* GCX_STATUS_H */
