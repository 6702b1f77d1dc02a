/*
 * model.h - the models of gcx-train, built as train_net_t layer lists.
 */
#ifndef GCX_TRAIN_MODEL_H
#define GCX_TRAIN_MODEL_H

#include "nn/net.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRAIN_MODEL_MAX_WIDTHS 8

/** What to build; filled from the command line. */
typedef struct train_model_spec {
    char kind[8];                         /**< "mlp" or "cnn". */
    int nhidden;                          /**< Number of hidden FC layers. */
    int hidden[TRAIN_MODEL_MAX_WIDTHS];   /**< Their widths. */
    int nchannels;                        /**< CNN conv blocks. */
    int channels[TRAIN_MODEL_MAX_WIDTHS]; /**< Filters per conv block. */
    int ksize;                            /**< CNN kernel size (odd). */
} train_model_spec_t;

/**
 * MLP: [dense(h_i), relu] for every hidden width, then dense(classes).
 * Default 784-1024-1024-10.
 */
gcx_status_t train_model_mlp(const train_model_spec_t *spec, train_shape_t in,
                             int classes, int max_batch, train_net_t *net_p);

/**
 * Small CNN: [conv(c_i, k x k, same padding), relu, maxpool 2] per channel
 * count, then [dense(h_i), relu] per hidden width, then dense(classes).
 * Default 16,32 channels, 5x5 kernels, one hidden layer of 128.
 */
gcx_status_t train_model_cnn(const train_model_spec_t *spec, train_shape_t in,
                             int classes, int max_batch, train_net_t *net_p);

/** Build by spec->kind. */
gcx_status_t train_model_build(const train_model_spec_t *spec, train_shape_t in,
                               int classes, int max_batch, train_net_t *net_p);

#ifdef __cplusplus
}
#endif

#endif
