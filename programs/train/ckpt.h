/*
 * ckpt.h - the byte buffer of gcx-train's checkpoints (--save/--resume).
 *
 * A checkpoint is one file per rank, written and read whole: the loop puts
 * its position, weights and optimizer state, then the sync mode appends its
 * own state (sync.h, save/load). Numbers are in the host's byte order (a
 * marker in the header refuses a file from a host of the other order);
 * reads are bounded: a read past the end, like a short file, leaves the
 * blob not ok and reads zeros, so callers check once at the end. Cost: one
 * pass over the bytes, one allocation that doubles as it grows.
 */
#ifndef GCX_TRAIN_CKPT_H
#define GCX_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes being written (len grows) or read (pos advances up to len). */
typedef struct train_blob {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t pos;
    int ok; /**< 0 after a failed allocation or a read past the end. */
} train_blob_t;

/** An empty, ok blob. */
void train_blob_init(train_blob_t *b);
void train_blob_free(train_blob_t *b);

void train_blob_put(train_blob_t *b, const void *p, size_t n);
void train_blob_put_u64(train_blob_t *b, uint64_t v);
void train_blob_put_f64(train_blob_t *b, double v);
/** A length (u64) followed by the bytes. */
void train_blob_put_str(train_blob_t *b, const char *s);

/** Copies n bytes to p (zeros past the end, which clears ok). */
void train_blob_get(train_blob_t *b, void *p, size_t n);
uint64_t train_blob_get_u64(train_blob_t *b);
double train_blob_get_f64(train_blob_t *b);
/** Reads a string written by train_blob_put_str(); 1 when it equals @p s. */
int train_blob_get_str_equal(train_blob_t *b, const char *s);

/** Write the blob to @p path (through a temporary file and rename, so a
 *  crash never leaves half a checkpoint). Errors name the path. */
gcx_status_t train_blob_write_file(const train_blob_t *b, const char *path);
/** Read the whole file at @p path into a fresh blob. */
gcx_status_t train_blob_read_file(train_blob_t *b, const char *path);

#ifdef __cplusplus
}
#endif

#endif
