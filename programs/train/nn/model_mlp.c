/*
 * model_mlp.c - multi-layer perceptron: dense + ReLU per hidden width, then a
 * dense output layer (softmax is in the loss).
 *
 * Cost per sample: 2 * sum(w_i * w_{i+1}) flops forward, twice that backward;
 * 784-1024-1024-10 has 1.86 M parameters and ~3.7 Mflop forward per sample.
 */
#include "nn/model.h"

#include <stdio.h>
#include <string.h>

gcx_status_t train_model_mlp(const train_model_spec_t *spec, train_shape_t in,
                             int classes, int max_batch, train_net_t *net_p)
{
    train_shape_t cur = in;
    train_layer_t layer;
    gcx_status_t status;
    size_t len;
    int i;

    train_net_init(net_p, in, max_batch);
    snprintf(net_p->desc, sizeof(net_p->desc), "mlp %zu", train_shape_size(in));
    for (i = 0; i <= spec->nhidden; i++) {
        int width = i < spec->nhidden ? spec->hidden[i] : classes;

        status = train_layer_dense(cur, width, max_batch, &layer);
        if (status == GCX_OK) {
            status = train_net_add(net_p, &layer);
        }
        if (status == GCX_OK && i < spec->nhidden) {
            cur = layer.out;
            status = train_layer_relu(cur, max_batch, &layer);
            if (status == GCX_OK) {
                status = train_net_add(net_p, &layer);
            }
        }
        if (status != GCX_OK) {
            goto err_destroy;
        }
        cur = layer.out;
        len = strlen(net_p->desc);
        snprintf(net_p->desc + len, sizeof(net_p->desc) - len, "-%d", width);
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

gcx_status_t train_model_build(const train_model_spec_t *spec, train_shape_t in,
                               int classes, int max_batch, train_net_t *net_p)
{
    if (strcmp(spec->kind, "mlp") == 0) {
        return train_model_mlp(spec, in, classes, max_batch, net_p);
    }
    if (strcmp(spec->kind, "cnn") == 0) {
        return train_model_cnn(spec, in, classes, max_batch, net_p);
    }
    train_error("unknown model '%s' (mlp or cnn)", spec->kind);
    return GCX_ERR_INVALID;
}
