/*
 * ckpt.c - the checkpoint byte buffer (ckpt.h): append, bounded reads,
 * whole-file write (temporary file + rename) and read. O(bytes).
 */
#include "ckpt.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void train_blob_init(train_blob_t *b)
{
    memset(b, 0, sizeof(*b));
    b->ok = 1;
}

void train_blob_free(train_blob_t *b)
{
    free(b->data);
    train_blob_init(b);
}

void train_blob_put(train_blob_t *b, const void *p, size_t n)
{
    if (!b->ok || n == 0) {
        return;
    }
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 4096;
        uint8_t *grown;

        while (cap - b->len < n) {
            cap *= 2;
        }
        grown = realloc(b->data, cap);
        if (grown == NULL) {
            b->ok = 0;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void train_blob_put_u64(train_blob_t *b, uint64_t v)
{
    train_blob_put(b, &v, sizeof(v));
}

void train_blob_put_f64(train_blob_t *b, double v)
{
    train_blob_put(b, &v, sizeof(v));
}

void train_blob_put_str(train_blob_t *b, const char *s)
{
    size_t n = strlen(s);

    train_blob_put_u64(b, n);
    train_blob_put(b, s, n);
}

void train_blob_get(train_blob_t *b, void *p, size_t n)
{
    if (!b->ok || b->len - b->pos < n) {
        b->ok = 0;
        memset(p, 0, n);
        return;
    }
    memcpy(p, b->data + b->pos, n);
    b->pos += n;
}

uint64_t train_blob_get_u64(train_blob_t *b)
{
    uint64_t v;

    train_blob_get(b, &v, sizeof(v));
    return v;
}

double train_blob_get_f64(train_blob_t *b)
{
    double v;

    train_blob_get(b, &v, sizeof(v));
    return v;
}

int train_blob_get_str_equal(train_blob_t *b, const char *s)
{
    uint64_t n = train_blob_get_u64(b);
    int same;

    if (!b->ok || n > b->len - b->pos) {
        b->ok = 0;
        return 0;
    }
    same = n == strlen(s) && memcmp(b->data + b->pos, s, n) == 0;
    b->pos += n;
    return same;
}

gcx_status_t train_blob_write_file(const train_blob_t *b, const char *path)
{
    char tmp[4200];
    FILE *f;
    int err = 0;

    if (!b->ok) {
        train_error("checkpoint %s: out of memory while building it", path);
        return GCX_ERR_NOMEM;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (f == NULL) {
        train_error("checkpoint: cannot write %s: %s", tmp, strerror(errno));
        return GCX_ERR_IO;
    }
    if (fwrite(b->data, 1, b->len, f) != b->len) {
        err = errno;
    }
    if (fclose(f) != 0 && err == 0) {
        err = errno;
    }
    if (err == 0 && rename(tmp, path) != 0) {
        err = errno;
    }
    if (err != 0) {
        train_error("checkpoint: cannot write %s: %s", path, strerror(err));
        remove(tmp);
        return GCX_ERR_IO;
    }
    return GCX_OK;
}

gcx_status_t train_blob_read_file(train_blob_t *b, const char *path)
{
    uint8_t chunk[65536];
    FILE *f;
    size_t n;
    int read_error;

    train_blob_init(b);
    f = fopen(path, "rb");
    if (f == NULL) {
        train_error("--resume: cannot read %s: %s", path, strerror(errno));
        return GCX_ERR_IO;
    }
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        train_blob_put(b, chunk, n);
    }
    read_error = ferror(f);
    fclose(f);
    if (read_error || !b->ok) {
        train_error("--resume: cannot read %s: %s", path,
                    read_error ? "read error" : "out of memory");
        train_blob_free(b);
        return read_error ? GCX_ERR_IO : GCX_ERR_NOMEM;
    }
    return GCX_OK;
}
