/*
 * net.h - a feed-forward network as a list of layers over ONE flat parameter
 * vector.
 *
 * Every layer owns a slice [param_off, param_off + nparams) of the network's
 * parameter vector and the same slice of the gradient vector, so the whole
 * model is exchanged between ranks as one contiguous float buffer. A layer is
 * a small hand-written vtable (forward, backward, init, destroy). Activations
 * are batch-major: sample b's features start at b * size; images are CHW.
 */
#ifndef GCX_TRAIN_NET_H
#define GCX_TRAIN_NET_H

#include <stddef.h>
#include <stdint.h>
#include <gcx/status.h>

#include "util.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Shape of one sample's features: channels x height x width. */
typedef struct train_shape {
    int c, h, w;
} train_shape_t;

/** Number of floats of one sample of shape @p s. */
static inline size_t train_shape_size(train_shape_t s)
{
    return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

typedef struct train_layer train_layer_t;

/** Operations of a layer; every entry is required. */
typedef struct train_layer_ops {
    const char *name;
    /**
     * out = f(in) for @p batch <= max_batch samples. May keep what backward
     * needs in the layer's workspace (valid until the next forward).
     */
    void (*forward)(train_layer_t *layer, const float *params, const float *in,
                    float *out, int batch);
    /**
     * Given dL/dout, write (not accumulate) dL/dparams into @p dparams and,
     * when @p din is not NULL, dL/din. @p in and @p out are the buffers of
     * the last forward. Must not modify dout.
     */
    void (*backward)(train_layer_t *layer, const float *params, const float *in,
                     const float *out, const float *dout, float *din,
                     float *dparams, int batch);
    /** Draw initial parameters (the layer's slice) from @p rng. */
    void (*init)(train_layer_t *layer, float *params, train_rng_t *rng);
    /** Free the layer's private state. */
    void (*destroy)(train_layer_t *layer);
} train_layer_ops_t;

/** A layer: its shapes, its slice of the parameters, private workspace. */
struct train_layer {
    const train_layer_ops_t *ops;
    train_shape_t in;  /**< Input shape of one sample. */
    train_shape_t out; /**< Output shape of one sample. */
    size_t nparams;    /**< Floats of parameters (0 for relu, pool). */
    size_t param_off;  /**< Offset of the slice in the flat vector. */
    int max_batch;     /**< Largest batch forward may be given. */
    void *priv;        /**< Layer-specific state and workspace. */
};

/* Layer constructors. On success *layer_p is filled; sizes must be > 0. */

/** Fully connected: out = in W + b, W stored [in][out] row-major. */
gcx_status_t train_layer_dense(train_shape_t in, int nout, int max_batch,
                               train_layer_t *layer_p);
/** Element-wise max(0, x). */
gcx_status_t train_layer_relu(train_shape_t in, int max_batch,
                              train_layer_t *layer_p);
/**
 * 2-D convolution, stride 1, zero padding @p pad, @p nfilters of
 * ksize x ksize, by im2col + one sgemm for the whole batch.
 */
gcx_status_t train_layer_conv(train_shape_t in, int nfilters, int ksize,
                              int pad, int max_batch, train_layer_t *layer_p);
/** Max pooling over size x size windows with stride size. */
gcx_status_t train_layer_maxpool(train_shape_t in, int size, int max_batch,
                                 train_layer_t *layer_p);

#define TRAIN_NET_MAX_LAYERS 32

/**
 * Called during the backward pass each time one layer's gradient slice
 * [off, off + len) of the flat vector is final: from the last layer to the
 * first, each layer with parameters once (so the slices come in descending
 * order, each ending where the previous one began).
 */
typedef void (*train_grad_ready_fn_t)(void *ctx, size_t off, size_t len);

/** A sequential network. */
typedef struct train_net {
    int nlayers;
    train_layer_t layers[TRAIN_NET_MAX_LAYERS];
    train_shape_t in; /**< Shape of one input sample. */
    size_t nparams;   /**< Length of the flat parameter vector. */
    int max_batch;
    float *act[TRAIN_NET_MAX_LAYERS]; /**< act[i]: output of layer i. */
    float *grad_buf[2]; /**< Ping-pong buffers for dL/dactivation. */
    char desc[256];     /**< e.g. "784-1024-1024-10". */
    train_grad_ready_fn_t grad_ready; /**< NULL: none (train_net_set_hook) */
    void *grad_ready_ctx;
} train_net_t;

/** Start an empty network for inputs of shape @p in. */
void train_net_init(train_net_t *net, train_shape_t in, int max_batch);

/**
 * Append a layer (taken over by the network). Its input shape must equal
 * the previous output shape. Frees the layer on failure.
 */
gcx_status_t train_net_add(train_net_t *net, train_layer_t *layer);

/** Assign parameter slices and allocate activation buffers. */
gcx_status_t train_net_finish(train_net_t *net);

/** Release everything of the network. */
void train_net_destroy(train_net_t *net);

/** Deterministic initial parameters from @p seed. */
void train_net_init_params(train_net_t *net, float *params, uint64_t seed);

/** Run forward on @p batch samples; returns the logits (batch x classes). */
const float *train_net_forward(train_net_t *net, const float *params,
                               const float *x, int batch);

/**
 * Have train_net_loss_grad() call @p fn(@p ctx, off, len) as each layer's
 * gradient becomes final (a sync mode starts exchanging it while the
 * layers below still compute); NULL removes the hook.
 */
void train_net_set_hook(train_net_t *net, train_grad_ready_fn_t fn,
                        void *ctx);

/**
 * Forward, softmax cross-entropy against @p y, backward: writes the gradient
 * of the MEAN loss over the batch into @p grads (nparams floats), calling
 * the hook (train_net_set_hook) after each layer's part.
 * @param[out] loss_p     Mean loss of the batch.
 * @param[out] correct_p  Number of samples whose arg-max is the label.
 */
void train_net_loss_grad(train_net_t *net, const float *params, const float *x,
                         const uint8_t *y, int batch, float *grads,
                         double *loss_p, int *correct_p);

/** Forward only: sum of losses and number correct (for evaluation). */
void train_net_evaluate(train_net_t *net, const float *params, const float *x,
                        const uint8_t *y, int batch, double *loss_sum_p,
                        int *correct_p);

/**
 * Softmax cross-entropy on @p batch rows of @p classes logits. Returns the
 * sum of the losses, counts arg-max hits, and if @p dlogits is not NULL
 * writes d(mean loss)/dlogits = (softmax - onehot) / batch.
 */
double train_softmax_xent(const float *logits, const uint8_t *y, int batch,
                          int classes, float *dlogits, int *correct_p);

#ifdef __cplusplus
}
#endif

#endif
