/*
 * layer_dense.c - fully connected and ReLU layers.
 *
 * Dense: Y[B,out] = X[B,in] W[in,out] + b, with W row-major in the flat
 * vector followed by b. Forward is one sgemm (2*B*in*out flops); backward is
 * two: dW = X^T dY and dX = dY W^T (the second skipped for the first layer).
 * He-normal initial weights (std sqrt(2/in)), zero biases.
 * ReLU: one pass forward, one pass backward; no parameters.
 */
#include "nn/net.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static void dense_forward(train_layer_t *l, const float *params,
                          const float *in, float *out, int batch)
{
    int nin = (int)train_shape_size(l->in), nout = l->out.c;
    const float *w = params, *bias = params + (size_t)nin * nout;
    int b;

    for (b = 0; b < batch; b++) {
        memcpy(out + (size_t)b * nout, bias, (size_t)nout * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, nout, nin,
                1.0f, in, nin, w, nout, 1.0f, out, nout);
}

static void dense_backward(train_layer_t *l, const float *params,
                           const float *in, const float *out, const float *dout,
                           float *din, float *dparams, int batch)
{
    int nin = (int)train_shape_size(l->in), nout = l->out.c;
    float *dw = dparams, *db = dparams + (size_t)nin * nout;
    int b, j;

    (void)out;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nin, nout, batch, 1.0f,
                in, nin, dout, nout, 0.0f, dw, nout);
    for (j = 0; j < nout; j++) {
        db[j] = 0;
    }
    for (b = 0; b < batch; b++) {
        const float *d = dout + (size_t)b * nout;

        for (j = 0; j < nout; j++) {
            db[j] += d[j];
        }
    }
    if (din != NULL) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, nin, nout,
                    1.0f, dout, nout, params, nout, 0.0f, din, nin);
    }
}

static void dense_init(train_layer_t *l, float *params, train_rng_t *rng)
{
    size_t nin = train_shape_size(l->in), nw = nin * (size_t)l->out.c, i;
    double std = sqrt(2.0 / (double)nin);

    for (i = 0; i < nw; i++) {
        params[i] = (float)(std * train_rng_normal(rng));
    }
    for (; i < l->nparams; i++) {
        params[i] = 0;
    }
}

static void layer_nothing(train_layer_t *l)
{
    (void)l;
}

static const train_layer_ops_t dense_ops = {
    .name = "dense",
    .forward = dense_forward,
    .backward = dense_backward,
    .init = dense_init,
    .destroy = layer_nothing,
};

gcx_status_t train_layer_dense(train_shape_t in, int nout, int max_batch,
                               train_layer_t *layer_p)
{
    size_t nin = train_shape_size(in);

    if (nin == 0 || nout <= 0 || max_batch <= 0) {
        train_error("dense layer: bad sizes (in %zu, out %d)", nin, nout);
        return GCX_ERR_INVALID;
    }
    memset(layer_p, 0, sizeof(*layer_p));
    layer_p->ops = &dense_ops;
    layer_p->in = in;
    layer_p->out = (train_shape_t){nout, 1, 1};
    layer_p->nparams = nin * (size_t)nout + (size_t)nout;
    layer_p->max_batch = max_batch;
    return GCX_OK;
}

static void relu_forward(train_layer_t *l, const float *params, const float *in,
                         float *out, int batch)
{
    size_t n = (size_t)batch * train_shape_size(l->in), i;

    (void)params;
    for (i = 0; i < n; i++) {
        out[i] = in[i] > 0 ? in[i] : 0;
    }
}

static void relu_backward(train_layer_t *l, const float *params,
                          const float *in, const float *out, const float *dout,
                          float *din, float *dparams, int batch)
{
    size_t n = (size_t)batch * train_shape_size(l->in), i;

    (void)params;
    (void)out;
    (void)dparams;
    if (din == NULL) {
        return;
    }
    for (i = 0; i < n; i++) {
        din[i] = in[i] > 0 ? dout[i] : 0;
    }
}

static void relu_init(train_layer_t *l, float *params, train_rng_t *rng)
{
    (void)l;
    (void)params;
    (void)rng;
}

static const train_layer_ops_t relu_ops = {
    .name = "relu",
    .forward = relu_forward,
    .backward = relu_backward,
    .init = relu_init,
    .destroy = layer_nothing,
};

gcx_status_t train_layer_relu(train_shape_t in, int max_batch,
                              train_layer_t *layer_p)
{
    if (train_shape_size(in) == 0 || max_batch <= 0) {
        train_error("relu layer: empty input");
        return GCX_ERR_INVALID;
    }
    memset(layer_p, 0, sizeof(*layer_p));
    layer_p->ops = &relu_ops;
    layer_p->in = in;
    layer_p->out = in;
    layer_p->max_batch = max_batch;
    return GCX_OK;
}
