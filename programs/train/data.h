/*
 * data.h - the data set (Fashion-MNIST in IDX format) and how a rank takes
 * its share of each global batch.
 *
 * Images stay as bytes in memory (47 MB for the training set rather than
 * 188 MB as floats); a batch is gathered and normalised into floats when it
 * is used, which costs one pass over the batch and a 256-entry lookup table.
 */
#ifndef GCX_TRAIN_DATA_H
#define GCX_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Folder used when GCX_DATA_DIR is not set (Debian dataset-fashion-mnist). */
#define TRAIN_DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"

/** Same, for help texts. */
#define TRAIN_DATA_DIR_HELP TRAIN_DATA_DEFAULT_DIR

/** Number of classes of (Fashion-)MNIST. */
#define TRAIN_NUM_CLASSES 10

/** One labelled image set held in memory. */
typedef struct train_dataset {
    size_t n;        /**< Number of samples. */
    int rows;        /**< Image height. */
    int cols;        /**< Image width. */
    uint8_t *pixels; /**< n * rows * cols bytes, sample-major. */
    uint8_t *labels; /**< n bytes, each < TRAIN_NUM_CLASSES. */
    float lut[256];  /**< pixel byte -> normalised float. */
} train_dataset_t;

/**
 * Read an images file and a labels file (IDX, gzip or plain; zlib reads both).
 * Fails with GCX_ERR_NOT_FOUND naming the missing file, GCX_ERR_IO on a
 * truncated or malformed file, GCX_ERR_MISMATCH when the counts differ.
 * The normalisation table is set to the identity scaling x/255.
 */
gcx_status_t train_dataset_load(const char *images_path,
                                const char *labels_path,
                                train_dataset_t *set_p);

/**
 * Load "<dir>/<prefix>-images-idx3-ubyte.gz" and its labels, with @p dir the
 * value of GCX_DATA_DIR or TRAIN_DATA_DEFAULT_DIR, e.g. prefix "train" or
 * "t10k".
 */
gcx_status_t train_dataset_load_named(const char *prefix,
                                      train_dataset_t *set_p);

/** Mean and standard deviation of all pixels (scaled to [0, 1]). */
void train_dataset_stats(const train_dataset_t *set, double *mean_p,
                         double *std_p);

/** Normalise as (x/255 - mean) / std through the lookup table. */
void train_dataset_set_norm(train_dataset_t *set, double mean, double std);

/** Release the memory of a set (the struct itself is the caller's). */
void train_dataset_free(train_dataset_t *set);

/**
 * Copy samples idx[0..count) into @p x (count * rows * cols floats,
 * normalised) and @p y (count labels).
 */
void train_dataset_gather(const train_dataset_t *set, const uint32_t *idx,
                          size_t count, float *x, uint8_t *y);

/**
 * Seeded permutation of 0..n-1 for one epoch (Fisher-Yates). Every rank calls
 * it with the same seed and epoch and gets the same order.
 */
void train_epoch_permutation(uint64_t seed, int epoch, uint32_t *perm,
                             size_t n);

/**
 * Sharding of a global batch. Step s of an epoch uses perm[s*G, (s+1)*G) with
 * G = batch * world; rank r takes the slice [s*G + r*batch, s*G + (r+1)*batch)
 * so the ranks' shards are disjoint and their union is the same global batch
 * for any number of ranks. The tail of an epoch that does not fill a global
 * batch is dropped (it differs in the next epoch's permutation).
 * train_steps_per_epoch() counts the global batches of an epoch, i.e. its
 * steps when a step takes one global batch; with a sync mode that spends k
 * steps on each (steps_per_batch, sync.h) the loop multiplies it by k and
 * passes global batch u = step / k as @p step to train_shard_offset().
 */
size_t train_steps_per_epoch(size_t n, int batch, int world);

/** First index into perm of rank @p rank's part of step @p step. */
size_t train_shard_offset(int step, int batch, int rank, int world);

/** Contiguous part [begin, end) of n evaluation samples for rank @p rank. */
void train_eval_range(size_t n, int rank, int world, size_t *begin_p,
                      size_t *end_p);

#ifdef __cplusplus
}
#endif

#endif
