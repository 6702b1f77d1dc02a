/*
 * masterless_int.h - the wire header of the master-less coded
 * allreduce (masterless.c), parsed by a pure function that the AM
 * handler calls and tests/fuzz/fuzz_coded.c fuzzes.
 */
#ifndef GCX_CODED_ALLREDUCE_INT_H
#define GCX_CODED_ALLREDUCE_INT_H

#include "coded_int.h"

enum {
    GCX_CAR_CHUNK   = 1, /* worker -> owner: one chunk of a coded message */
    GCX_CAR_DECODED = 2, /* owner -> rank: the decoded sum of a chunk */
    GCX_CAR_ACK     = 3, /* backup -> owner: your decoded chunk landed here */
    GCX_CAR_COMMIT  = 4, /* owner -> rank: every live backup has it */
    GCX_CAR_VOID    = 5, /* worker -> owner: abstains from the round */
    GCX_CAR_LOST    = 6, /* owner -> rank: the chunk's outcome is "round
                            lost" (lost_rounds; acknowledged and committed
                            as a DECODED chunk is) */
};

/* Wire header (starts with the communicator id: gcx_tl_am_prefix_t). */
typedef struct gcx_car_hdr {
    uint32_t comm_id;
    uint32_t instance;
    uint64_t round;
    uint16_t sender;
    uint16_t kind;
    uint32_t chunk;
    uint64_t used; /* DECODED: the workers the chunk was decoded from */
} gcx_car_hdr_t;

/**
 * A received header of @p len bytes with @p payload bytes into @p hdr,
 * for a communicator of @p size ranks, lines of @p line owners and vectors
 * of @p count floats: the sender and chunk are ranks, the kind is known,
 * the payload is the chunk's size (CHUNK, DECODED) or 0 (ACK, COMMIT,
 * VOID, LOST), and DECODED, LOST, COMMIT come from an owner of the chunk,
 * ACK from a later one.
 * Pure. @return GCX_ERR_INVALID otherwise.
 */
gcx_status_t gcx_car_hdr_parse(const void *bytes, size_t len, size_t payload,
                               int size, int line, size_t count,
                               gcx_car_hdr_t *hdr);

#endif
