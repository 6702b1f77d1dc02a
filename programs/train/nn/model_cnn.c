/*
 * model_cnn.c - small convolutional network: per block a same-padded k x k
 * convolution, ReLU and 2x2 max-pool; then dense + ReLU layers and a dense
 * output layer.
 *
 * Default 28x28 -> conv16 -> pool -> conv32 -> pool (32x7x7) -> 128 -> 10:
 * 0.22 M parameters, ~6 Mflop forward per sample (the 2nd conv dominates);
 * memory is dominated by the im2col buffer of the 2nd conv
 * (16*25 x batch*14*14 floats: 20 MB at batch 64).
 */
#include "nn/model.h"

#include <stdio.h>
#include <string.h>

/*
 * Add a layer that was just built (its constructor returned @p built) and
 * advance the running shape. Returns the first error.
 */
static gcx_status_t cnn_push(train_net_t *net, gcx_status_t built,
                             train_layer_t *layer, train_shape_t *cur)
{
    if (built != GCX_OK) {
        return built;
    }
    built = train_net_add(net, layer);
    if (built == GCX_OK) {
        *cur = layer->out;
    }
    return built;
}

gcx_status_t train_model_cnn(const train_model_spec_t *spec, train_shape_t in,
                             int classes, int max_batch, train_net_t *net_p)
{
    int k = spec->ksize, i;
    train_shape_t cur = in;
    train_layer_t layer;
    gcx_status_t status;
    size_t len;

    if (k <= 0 || k % 2 == 0) {
        train_error("cnn: kernel size %d must be odd and positive", k);
        return GCX_ERR_INVALID;
    }
    train_net_init(net_p, in, max_batch);
    snprintf(net_p->desc, sizeof(net_p->desc), "cnn %dx%dx%d k%d", in.c, in.h,
             in.w, k);
    for (i = 0; i < spec->nchannels; i++) {
        status = cnn_push(net_p,
                          train_layer_conv(cur, spec->channels[i], k, k / 2,
                                           max_batch, &layer),
                          &layer, &cur);
        if (status == GCX_OK) {
            status = cnn_push(net_p, train_layer_relu(cur, max_batch, &layer),
                              &layer, &cur);
        }
        if (status == GCX_OK) {
            status =
                cnn_push(net_p, train_layer_maxpool(cur, 2, max_batch, &layer),
                         &layer, &cur);
        }
        if (status != GCX_OK) {
            goto err_destroy;
        }
        len = strlen(net_p->desc);
        snprintf(net_p->desc + len, sizeof(net_p->desc) - len, " c%d-p2",
                 spec->channels[i]);
    }
    for (i = 0; i <= spec->nhidden; i++) {
        int width = i < spec->nhidden ? spec->hidden[i] : classes;

        status =
            cnn_push(net_p, train_layer_dense(cur, width, max_batch, &layer),
                     &layer, &cur);
        if (status == GCX_OK && i < spec->nhidden) {
            status = cnn_push(net_p, train_layer_relu(cur, max_batch, &layer),
                              &layer, &cur);
        }
        if (status != GCX_OK) {
            goto err_destroy;
        }
        len = strlen(net_p->desc);
        snprintf(net_p->desc + len, sizeof(net_p->desc) - len, " fc%d", width);
    }
    status = train_net_finish(net_p);
    if (status != GCX_OK) {
        goto err_destroy;
    }
    return GCX_OK;

err_destroy:
    train_net_destroy(net_p);
    return status;
}
