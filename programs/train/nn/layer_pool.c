/*
 * layer_pool.c - max pooling over size x size windows with stride size.
 *
 * Forward keeps the arg-max of every output (one int per output) so backward
 * is a scatter of dY into dX. Cost: one pass over the input forward, one over
 * the output plus a zeroing of dX backward. A trailing row or column that does
 * not fill a window is dropped (floor), as in the usual frameworks.
 */
#include "nn/net.h"

#include <stdlib.h>
#include <string.h>

typedef struct pool_priv {
    int size;
    uint32_t *argmax; /* per output value: index into the sample's input */
} pool_priv_t;

static void pool_forward(train_layer_t *l, const float *params, const float *in,
                         float *out, int batch)
{
    pool_priv_t *p = l->priv;
    int s = p->size, c, oh, ow, i, j, b;
    size_t isz = train_shape_size(l->in), osz = train_shape_size(l->out);

    (void)params;
    for (b = 0; b < batch; b++) {
        const float *x = in + (size_t)b * isz;
        float *y = out + (size_t)b * osz;
        uint32_t *am = p->argmax + (size_t)b * osz;

        for (c = 0; c < l->out.c; c++) {
            for (oh = 0; oh < l->out.h; oh++) {
                for (ow = 0; ow < l->out.w; ow++) {
                    size_t o = ((size_t)c * l->out.h + oh) * l->out.w + ow;
                    size_t best =
                        ((size_t)c * l->in.h + (size_t)oh * s) * l->in.w +
                        (size_t)ow * s;

                    for (i = 0; i < s; i++) {
                        for (j = 0; j < s; j++) {
                            size_t q =
                                ((size_t)c * l->in.h + oh * s + i) * l->in.w +
                                (size_t)ow * s + j;

                            if (x[q] > x[best]) {
                                best = q;
                            }
                        }
                    }
                    y[o] = x[best];
                    am[o] = (uint32_t)best;
                }
            }
        }
    }
}

static void pool_backward(train_layer_t *l, const float *params,
                          const float *in, const float *out, const float *dout,
                          float *din, float *dparams, int batch)
{
    pool_priv_t *p = l->priv;
    size_t isz = train_shape_size(l->in), osz = train_shape_size(l->out), o;
    int b;

    (void)params;
    (void)in;
    (void)out;
    (void)dparams;
    if (din == NULL) {
        return;
    }
    memset(din, 0, (size_t)batch * isz * sizeof(float));
    for (b = 0; b < batch; b++) {
        const uint32_t *am = p->argmax + (size_t)b * osz;

        for (o = 0; o < osz; o++) {
            din[(size_t)b * isz + am[o]] += dout[(size_t)b * osz + o];
        }
    }
}

static void pool_init(train_layer_t *l, float *params, train_rng_t *rng)
{
    (void)l;
    (void)params;
    (void)rng;
}

static void pool_destroy(train_layer_t *l)
{
    pool_priv_t *p = l->priv;

    if (p != NULL) {
        free(p->argmax);
        free(p);
        l->priv = NULL;
    }
}

static const train_layer_ops_t pool_ops = {
    .name = "maxpool",
    .forward = pool_forward,
    .backward = pool_backward,
    .init = pool_init,
    .destroy = pool_destroy,
};

gcx_status_t train_layer_maxpool(train_shape_t in, int size, int max_batch,
                                 train_layer_t *layer_p)
{
    train_shape_t out = {in.c, size > 0 ? in.h / size : 0,
                         size > 0 ? in.w / size : 0};
    pool_priv_t *p;

    if (size <= 0 || train_shape_size(out) == 0 || max_batch <= 0) {
        train_error("maxpool layer: window %d does not fit %dx%d", size, in.h,
                    in.w);
        return GCX_ERR_INVALID;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return GCX_ERR_NOMEM;
    }
    p->size = size;
    p->argmax =
        calloc((size_t)max_batch * train_shape_size(out), sizeof(uint32_t));
    if (p->argmax == NULL) {
        free(p);
        return GCX_ERR_NOMEM;
    }
    memset(layer_p, 0, sizeof(*layer_p));
    layer_p->ops = &pool_ops;
    layer_p->in = in;
    layer_p->out = out;
    layer_p->max_batch = max_batch;
    layer_p->priv = p;
    return GCX_OK;
}
