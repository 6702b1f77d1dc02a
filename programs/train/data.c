/*
 * data.c - IDX files through zlib, normalisation, epoch permutation and
 * sharding.
 *
 * IDX (LeCun's MNIST format): a big-endian magic 0x000008TD (T = 08 for
 * unsigned bytes, D = number of dimensions), D big-endian uint32 sizes, then
 * the bytes. gzread() reads gzip and plain files alike, so "x.gz" or "x"
 * both work. Loading Fashion-MNIST costs one inflate of 26 MB (~0.3 s); the
 * rest is O(batch) per step: a gather of the permuted rows through a
 * 256-entry float table.
 */
#include "data.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_TYPE_U8 0x08

/* Largest image and sample count accepted (guards the allocations). */
#define IDX_MAX_DIM   (1u << 16)
#define IDX_MAX_COUNT (1u << 26)
#define IDX_MAX_BYTES ((size_t)1 << 34)

static gcx_status_t idx_read_exact(gzFile f, const char *path, void *buf,
                                   size_t len)
{
    uint8_t *p = buf;

    while (len > 0) {
        unsigned chunk = len > (1u << 30) ? (1u << 30) : (unsigned)len;
        int got = gzread(f, p, chunk);

        if (got <= 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);

            train_error("%s: truncated or unreadable (%s)", path,
                        (got == 0 || zerr == Z_OK) ? "unexpected end of file"
                                                   : msg);
            return GCX_ERR_IO;
        }
        p += got;
        len -= (size_t)got;
    }
    return GCX_OK;
}

/* Open path, or path without ".gz" if only that exists. */
static gcx_status_t idx_open(const char *path, gzFile *f_p, char *used,
                             size_t used_len)
{
    size_t len = strlen(path);
    gzFile f;

    snprintf(used, used_len, "%s", path);
    if (access(used, R_OK) != 0 && len > 3 &&
        strcmp(path + len - 3, ".gz") == 0) {
        snprintf(used, used_len, "%.*s", (int)(len - 3), path);
        if (access(used, R_OK) != 0) {
            snprintf(used, used_len, "%s", path);
        }
    }
    if (access(used, R_OK) != 0) {
        int err = errno;

        train_error("data file %s: %s (set GCX_DATA_DIR to the folder with "
                    "the Fashion-MNIST IDX files; Debian package "
                    "dataset-fashion-mnist installs them in %s)",
                    path, strerror(err), TRAIN_DATA_DEFAULT_DIR);
        return err == ENOENT || err == ENOTDIR ? GCX_ERR_NOT_FOUND : GCX_ERR_IO;
    }
    f = gzopen(used, "rb");
    if (f == NULL) {
        train_error("data file %s: cannot open: %s", used, strerror(errno));
        return GCX_ERR_IO;
    }
    *f_p = f;
    return GCX_OK;
}

/* Read the header of an unsigned-byte IDX file with @p ndims dimensions. */
static gcx_status_t idx_header(gzFile f, const char *path, int ndims,
                               uint32_t *dims)
{
    uint8_t hdr[4 + 4 * 3];
    gcx_status_t status;
    int d;

    status = idx_read_exact(f, path, hdr, 4 + 4 * (size_t)ndims);
    if (status != GCX_OK) {
        return status;
    }
    if (hdr[0] != 0 || hdr[1] != 0 || hdr[2] != IDX_TYPE_U8 ||
        hdr[3] != ndims) {
        train_error("%s: not an IDX file of unsigned bytes with %d "
                    "dimensions (magic %02x%02x%02x%02x)",
                    path, ndims, hdr[0], hdr[1], hdr[2], hdr[3]);
        return GCX_ERR_IO;
    }
    for (d = 0; d < ndims; d++) {
        const uint8_t *b = hdr + 4 + 4 * d;

        dims[d] = ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) |
                  ((uint32_t)b[2] << 8) | b[3];
        if (dims[d] == 0 || dims[d] > (d == 0 ? IDX_MAX_COUNT : IDX_MAX_DIM)) {
            train_error("%s: dimension %d has a bad size %u", path, d, dims[d]);
            return GCX_ERR_IO;
        }
    }
    return GCX_OK;
}

/* Read a whole IDX file of @p ndims dimensions into a new buffer. */
static gcx_status_t idx_load(const char *path, int ndims, uint32_t *dims,
                             uint8_t **data_p)
{
    char used[4096];
    gcx_status_t status;
    uint8_t *data, extra;
    size_t total = 1;
    gzFile f;
    int d;

    status = idx_open(path, &f, used, sizeof(used));
    if (status != GCX_OK) {
        return status;
    }
    status = idx_header(f, used, ndims, dims);
    if (status != GCX_OK) {
        goto out_close;
    }
    for (d = 0; d < ndims; d++) {
        total *= dims[d]; /* each dim < 2^26: three cannot overflow 64 bits */
    }
    if (total > IDX_MAX_BYTES) {
        train_error("%s: %zu data bytes is more than this reader takes", used,
                    total);
        status = GCX_ERR_IO;
        goto out_close;
    }
    data = malloc(total);
    if (data == NULL) {
        train_error("%s: cannot allocate %zu bytes", used, total);
        status = GCX_ERR_NOMEM;
        goto out_close;
    }
    status = idx_read_exact(f, used, data, total);
    if (status != GCX_OK) {
        goto err_free;
    }
    if (gzread(f, &extra, 1) != 0) {
        train_error("%s: trailing bytes after %zu data bytes", used, total);
        status = GCX_ERR_IO;
        goto err_free;
    }
    *data_p = data;
    goto out_close;

err_free:
    free(data);
out_close:
    gzclose(f);
    return status;
}

gcx_status_t train_dataset_load(const char *images_path,
                                const char *labels_path, train_dataset_t *set_p)
{
    uint32_t idims[3], ldims[1];
    uint8_t *pixels, *labels;
    gcx_status_t status;
    uint32_t i;
    int v;

    status = idx_load(images_path, 3, idims, &pixels);
    if (status != GCX_OK) {
        return status;
    }
    status = idx_load(labels_path, 1, ldims, &labels);
    if (status != GCX_OK) {
        goto err_free_pixels;
    }
    if (idims[0] != ldims[0]) {
        train_error("%s has %u images but %s has %u labels", images_path,
                    idims[0], labels_path, ldims[0]);
        status = GCX_ERR_MISMATCH;
        goto err_free_labels;
    }
    for (i = 0; i < ldims[0]; i++) {
        if (labels[i] >= TRAIN_NUM_CLASSES) {
            train_error("%s: label %u of sample %u is not a class 0..%d",
                        labels_path, labels[i], i, TRAIN_NUM_CLASSES - 1);
            status = GCX_ERR_IO;
            goto err_free_labels;
        }
    }
    memset(set_p, 0, sizeof(*set_p));
    set_p->n = idims[0];
    set_p->rows = (int)idims[1];
    set_p->cols = (int)idims[2];
    set_p->pixels = pixels;
    set_p->labels = labels;
    for (v = 0; v < 256; v++) {
        set_p->lut[v] = (float)v / 255.0f;
    }
    return GCX_OK;

err_free_labels:
    free(labels);
err_free_pixels:
    free(pixels);
    return status;
}

gcx_status_t train_dataset_load_named(const char *prefix,
                                      train_dataset_t *set_p)
{
    const char *dir = getenv("GCX_DATA_DIR");
    char images[4096], labels[4096];

    if (dir == NULL || dir[0] == '\0') {
        dir = TRAIN_DATA_DEFAULT_DIR;
    }
    snprintf(images, sizeof(images), "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(labels, sizeof(labels), "%s/%s-labels-idx1-ubyte.gz", dir, prefix);
    return train_dataset_load(images, labels, set_p);
}

void train_dataset_stats(const train_dataset_t *set, double *mean_p,
                         double *std_p)
{
    size_t total = set->n * (size_t)set->rows * (size_t)set->cols;
    uint64_t hist[256] = {0};
    double sum = 0, sumsq = 0, mean, var;
    size_t i;
    int v;

    for (i = 0; i < total; i++) {
        hist[set->pixels[i]]++;
    }
    for (v = 0; v < 256; v++) {
        double x = v / 255.0;

        sum += (double)hist[v] * x;
        sumsq += (double)hist[v] * x * x;
    }
    mean = total ? sum / (double)total : 0;
    var = total ? sumsq / (double)total - mean * mean : 0;
    *mean_p = mean;
    *std_p = var > 0 ? sqrt(var) : 1.0;
}

void train_dataset_set_norm(train_dataset_t *set, double mean, double std)
{
    int v;

    for (v = 0; v < 256; v++) {
        set->lut[v] = (float)((v / 255.0 - mean) / std);
    }
}

void train_dataset_free(train_dataset_t *set)
{
    free(set->pixels);
    free(set->labels);
    set->pixels = NULL;
    set->labels = NULL;
    set->n = 0;
}

void train_dataset_gather(const train_dataset_t *set, const uint32_t *idx,
                          size_t count, float *x, uint8_t *y)
{
    size_t dim = (size_t)set->rows * (size_t)set->cols;
    size_t i, j;

    for (i = 0; i < count; i++) {
        const uint8_t *src = set->pixels + (size_t)idx[i] * dim;
        float *dst = x + i * dim;

        for (j = 0; j < dim; j++) {
            dst[j] = set->lut[src[j]];
        }
        y[i] = set->labels[idx[i]];
    }
}

void train_epoch_permutation(uint64_t seed, int epoch, uint32_t *perm, size_t n)
{
    train_rng_t rng;
    size_t i;

    train_rng_seed(&rng, seed, 0x5045524dULL + (uint64_t)epoch);
    for (i = 0; i < n; i++) {
        perm[i] = (uint32_t)i;
    }
    for (i = n; i > 1; i--) {
        size_t j = (size_t)train_rng_below(&rng, i);
        uint32_t t = perm[i - 1];

        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

size_t train_steps_per_epoch(size_t n, int batch, int world)
{
    return n / ((size_t)batch * (size_t)world);
}

size_t train_shard_offset(int step, int batch, int rank, int world)
{
    return ((size_t)step * (size_t)world + (size_t)rank) * (size_t)batch;
}

void train_eval_range(size_t n, int rank, int world, size_t *begin_p,
                      size_t *end_p)
{
    *begin_p = n * (size_t)rank / (size_t)world;
    *end_p = n * (size_t)(rank + 1) / (size_t)world;
}
