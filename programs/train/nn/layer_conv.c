/*
 * layer_conv.c - 2-D convolution (stride 1, zero padding) by im2col + sgemm.
 *
 * im2col lays the whole batch out as col[C*k*k][B*Ho*Wo] (one column per
 * output pixel of every sample), so forward is ONE sgemm
 * Y'[K][B*Ho*Wo] = W[K][C*k*k] col, and backward is two:
 * dW = dY' col^T and dcol = W^T dY', then col2im adds dcol back into dX.
 * Flops: 2*K*C*k*k*B*Ho*Wo per sgemm. Memory: col (reused for dcol: dW is
 * taken before col is overwritten) plus one K x B*Ho*Wo buffer for the
 * channel-major output. Parameters: W[K][C][k][k] then b[K]; He-normal init.
 */
#include "nn/net.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct conv_priv {
    int ksize, pad;
    float *col;  /* [C*k*k][max_batch*Ho*Wo] */
    float *ybuf; /* [K][max_batch*Ho*Wo] */
} conv_priv_t;

/* Output columns [lo, hi) of a kernel column j read inside the image. */
static void conv_valid_cols(const train_layer_t *l, int j, int *lo_p, int *hi_p)
{
    const conv_priv_t *p = l->priv;
    int lo = p->pad - j, hi = l->in.w + p->pad - j;

    *lo_p = lo < 0 ? 0 : (lo > l->out.w ? l->out.w : lo);
    *hi_p = hi > l->out.w ? l->out.w : (hi < *lo_p ? *lo_p : hi);
}

/*
 * col[(c*k+i)*k+j][b*HoWo + oh*Wo + ow] = in[b][c][oh+i-pad][ow+j-pad], or 0
 * outside the image: per output row, one contiguous copy and two zero fills.
 */
static void conv_im2col(const train_layer_t *l, const float *in, int batch,
                        float *col)
{
    const conv_priv_t *p = l->priv;
    int k = p->ksize, ho = l->out.h, wo = l->out.w;
    size_t how = (size_t)ho * wo, ncol = (size_t)batch * how;
    size_t plane = (size_t)l->in.h * l->in.w;
    int c, i, j, b, oh, lo, hi;

    for (c = 0; c < l->in.c; c++) {
        for (i = 0; i < k; i++) {
            for (j = 0; j < k; j++) {
                float *row = col + ((size_t)(c * k + i) * k + j) * ncol;

                conv_valid_cols(l, j, &lo, &hi);
                for (b = 0; b < batch; b++) {
                    const float *img = in + ((size_t)b * l->in.c + c) * plane;
                    float *dst = row + (size_t)b * how;

                    for (oh = 0; oh < ho; oh++, dst += wo) {
                        int ih = oh + i - p->pad;

                        if (ih < 0 || ih >= l->in.h) {
                            memset(dst, 0, (size_t)wo * sizeof(float));
                            continue;
                        }
                        memset(dst, 0, (size_t)lo * sizeof(float));
                        memcpy(dst + lo,
                               img + (size_t)ih * l->in.w + lo + j - p->pad,
                               (size_t)(hi - lo) * sizeof(float));
                        memset(dst + hi, 0, (size_t)(wo - hi) * sizeof(float));
                    }
                }
            }
        }
    }
}

/* Inverse scatter of conv_im2col: din = sum of the columns that read it. */
static void conv_col2im(const train_layer_t *l, const float *col, int batch,
                        float *din)
{
    const conv_priv_t *p = l->priv;
    int k = p->ksize, ho = l->out.h, wo = l->out.w;
    size_t how = (size_t)ho * wo, ncol = (size_t)batch * how;
    size_t plane = (size_t)l->in.h * l->in.w;
    int c, i, j, b, oh, q, lo, hi;

    memset(din, 0, (size_t)batch * train_shape_size(l->in) * sizeof(float));
    for (c = 0; c < l->in.c; c++) {
        for (i = 0; i < k; i++) {
            for (j = 0; j < k; j++) {
                const float *row = col + ((size_t)(c * k + i) * k + j) * ncol;

                conv_valid_cols(l, j, &lo, &hi);
                for (b = 0; b < batch; b++) {
                    float *img = din + ((size_t)b * l->in.c + c) * plane;
                    const float *src = row + (size_t)b * how;

                    for (oh = 0; oh < ho; oh++, src += wo) {
                        int ih = oh + i - p->pad;
                        float *dst;

                        if (ih < 0 || ih >= l->in.h) {
                            continue;
                        }
                        dst = img + (size_t)ih * l->in.w + lo + j - p->pad;
                        for (q = 0; q < hi - lo; q++) {
                            dst[q] += src[lo + q];
                        }
                    }
                }
            }
        }
    }
}

static void conv_forward(train_layer_t *l, const float *params, const float *in,
                         float *out, int batch)
{
    conv_priv_t *p = l->priv;
    int nk = l->out.c, ckk = l->in.c * p->ksize * p->ksize;
    size_t how = (size_t)l->out.h * l->out.w, ncol = (size_t)batch * how;
    const float *bias = params + (size_t)nk * ckk;
    int b, f;
    size_t q;

    conv_im2col(l, in, batch, p->col);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nk, (int)ncol, ckk,
                1.0f, params, ckk, p->col, (int)ncol, 0.0f, p->ybuf, (int)ncol);
    /* [K][B][HoWo] -> [B][K][HoWo] with the bias. */
    for (b = 0; b < batch; b++) {
        for (f = 0; f < nk; f++) {
            const float *src = p->ybuf + (size_t)f * ncol + (size_t)b * how;
            float *dst = out + ((size_t)b * nk + f) * how;

            for (q = 0; q < how; q++) {
                dst[q] = src[q] + bias[f];
            }
        }
    }
}

static void conv_backward(train_layer_t *l, const float *params,
                          const float *in, const float *out, const float *dout,
                          float *din, float *dparams, int batch)
{
    conv_priv_t *p = l->priv;
    int nk = l->out.c, ckk = l->in.c * p->ksize * p->ksize;
    size_t how = (size_t)l->out.h * l->out.w, ncol = (size_t)batch * how;
    float *db = dparams + (size_t)nk * ckk;
    int b, f;
    size_t q;

    (void)in;
    (void)out;
    /* dY' = dout as [K][B][HoWo]; db = its row sums. */
    for (f = 0; f < nk; f++) {
        double sum = 0;

        for (b = 0; b < batch; b++) {
            const float *src = dout + ((size_t)b * nk + f) * how;
            float *dst = p->ybuf + (size_t)f * ncol + (size_t)b * how;

            for (q = 0; q < how; q++) {
                dst[q] = src[q];
                sum += src[q];
            }
        }
        db[f] = (float)sum;
    }
    /* col still holds the forward's im2col of the same input. */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nk, ckk, (int)ncol,
                1.0f, p->ybuf, (int)ncol, p->col, (int)ncol, 0.0f, dparams,
                ckk);
    if (din != NULL) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, (int)ncol, nk,
                    1.0f, params, ckk, p->ybuf, (int)ncol, 0.0f, p->col,
                    (int)ncol);
        conv_col2im(l, p->col, batch, din);
    }
}

static void conv_init(train_layer_t *l, float *params, train_rng_t *rng)
{
    conv_priv_t *p = l->priv;
    size_t fan_in = (size_t)l->in.c * p->ksize * p->ksize;
    size_t nw = fan_in * (size_t)l->out.c, i;
    double std = sqrt(2.0 / (double)fan_in);

    for (i = 0; i < nw; i++) {
        params[i] = (float)(std * train_rng_normal(rng));
    }
    for (; i < l->nparams; i++) {
        params[i] = 0;
    }
}

static void conv_destroy(train_layer_t *l)
{
    conv_priv_t *p = l->priv;

    if (p != NULL) {
        train_ffree(p->col);
        train_ffree(p->ybuf);
        free(p);
        l->priv = NULL;
    }
}

static const train_layer_ops_t conv_ops = {
    .name = "conv",
    .forward = conv_forward,
    .backward = conv_backward,
    .init = conv_init,
    .destroy = conv_destroy,
};

gcx_status_t train_layer_conv(train_shape_t in, int nfilters, int ksize,
                              int pad, int max_batch, train_layer_t *layer_p)
{
    int ho = in.h + 2 * pad - ksize + 1, wo = in.w + 2 * pad - ksize + 1;
    size_t ckk, ncol;
    conv_priv_t *p;

    if (train_shape_size(in) == 0 || nfilters <= 0 || ksize <= 0 || pad < 0 ||
        ho <= 0 || wo <= 0 || max_batch <= 0) {
        train_error("conv layer: bad sizes (input %dx%dx%d, %d filters of "
                    "%dx%d, pad %d)",
                    in.c, in.h, in.w, nfilters, ksize, ksize, pad);
        return GCX_ERR_INVALID;
    }
    ckk = (size_t)in.c * ksize * ksize;
    ncol = (size_t)max_batch * ho * wo;
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return GCX_ERR_NOMEM;
    }
    p->ksize = ksize;
    p->pad = pad;
    p->col = train_falloc(ckk * ncol);
    p->ybuf = train_falloc((size_t)nfilters * ncol);
    memset(layer_p, 0, sizeof(*layer_p));
    layer_p->ops = &conv_ops;
    layer_p->in = in;
    layer_p->out = (train_shape_t){nfilters, ho, wo};
    layer_p->nparams = ckk * nfilters + (size_t)nfilters;
    layer_p->max_batch = max_batch;
    layer_p->priv = p;
    if (p->col == NULL || p->ybuf == NULL) {
        train_error("conv layer: out of memory for a %zu x %zu im2col buffer",
                    ckk, ncol);
        conv_destroy(layer_p);
        return GCX_ERR_NOMEM;
    }
    return GCX_OK;
}
