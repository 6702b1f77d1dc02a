/*
 * net.c - the sequential container: slices of the flat parameter vector,
 * activation buffers, and the forward/backward sweep.
 *
 * Memory: one activation buffer per layer (max_batch x output size) and two
 * ping-pong buffers for gradients with respect to activations. Cost: the sum
 * of the layers' costs; the container itself only moves pointers.
 */
#include "nn/net.h"

#include <stdio.h>
#include <string.h>

void train_net_init(train_net_t *net, train_shape_t in, int max_batch)
{
    memset(net, 0, sizeof(*net));
    net->in = in;
    net->max_batch = max_batch;
}

gcx_status_t train_net_add(train_net_t *net, train_layer_t *layer)
{
    train_shape_t prev =
        net->nlayers ? net->layers[net->nlayers - 1].out : net->in;

    if (net->nlayers == TRAIN_NET_MAX_LAYERS ||
        train_shape_size(prev) != train_shape_size(layer->in) ||
        layer->max_batch != net->max_batch) {
        train_error("network: cannot add a %s layer (%d layers, input "
                    "%dx%dx%d after %dx%dx%d)",
                    layer->ops->name, net->nlayers, layer->in.c, layer->in.h,
                    layer->in.w, prev.c, prev.h, prev.w);
        layer->ops->destroy(layer);
        return GCX_ERR_INVALID;
    }
    net->layers[net->nlayers++] = *layer;
    return GCX_OK;
}

gcx_status_t train_net_finish(train_net_t *net)
{
    size_t off = 0, gmax = train_shape_size(net->in);
    int i;

    for (i = 0; i < net->nlayers; i++) {
        train_layer_t *l = &net->layers[i];
        size_t osize = train_shape_size(l->out);

        l->param_off = off;
        off += l->nparams;
        if (osize > gmax) {
            gmax = osize;
        }
        net->act[i] = train_falloc((size_t)net->max_batch * osize);
        if (net->act[i] == NULL) {
            goto err_nomem;
        }
    }
    for (i = 0; i < 2; i++) {
        net->grad_buf[i] = train_falloc((size_t)net->max_batch * gmax);
        if (net->grad_buf[i] == NULL) {
            goto err_nomem;
        }
    }
    net->nparams = off;
    return GCX_OK;

err_nomem:
    train_error("network: out of memory for activations (batch %d)",
                net->max_batch);
    return GCX_ERR_NOMEM;
}

void train_net_destroy(train_net_t *net)
{
    int i;

    for (i = 0; i < net->nlayers; i++) {
        net->layers[i].ops->destroy(&net->layers[i]);
        train_ffree(net->act[i]);
    }
    train_ffree(net->grad_buf[0]);
    train_ffree(net->grad_buf[1]);
    memset(net, 0, sizeof(*net));
}

void train_net_init_params(train_net_t *net, float *params, uint64_t seed)
{
    int i;

    for (i = 0; i < net->nlayers; i++) {
        train_layer_t *l = &net->layers[i];
        train_rng_t rng;

        /* One stream per layer: a layer's init does not depend on others. */
        train_rng_seed(&rng, seed, 0x494e4954ULL + (uint64_t)i);
        l->ops->init(l, params + l->param_off, &rng);
    }
}

const float *train_net_forward(train_net_t *net, const float *params,
                               const float *x, int batch)
{
    const float *in = x;
    int i;

    for (i = 0; i < net->nlayers; i++) {
        train_layer_t *l = &net->layers[i];

        l->ops->forward(l, params + l->param_off, in, net->act[i], batch);
        in = net->act[i];
    }
    return in;
}

void train_net_set_hook(train_net_t *net, train_grad_ready_fn_t fn,
                        void *ctx)
{
    net->grad_ready = fn;
    net->grad_ready_ctx = ctx;
}

void train_net_loss_grad(train_net_t *net, const float *params, const float *x,
                         const uint8_t *y, int batch, float *grads,
                         double *loss_p, int *correct_p)
{
    train_layer_t *last = &net->layers[net->nlayers - 1];
    int classes = (int)train_shape_size(last->out);
    const float *logits = train_net_forward(net, params, x, batch);
    float *dout = net->grad_buf[0];
    double loss;
    int i;

    loss = train_softmax_xent(logits, y, batch, classes, dout, correct_p);
    for (i = net->nlayers - 1; i >= 0; i--) {
        train_layer_t *l = &net->layers[i];
        const float *in = i ? net->act[i - 1] : x;
        float *din = i ? net->grad_buf[(net->nlayers - i) & 1] : NULL;

        l->ops->backward(l, params + l->param_off, in, net->act[i], dout, din,
                         grads + l->param_off, batch);
        if (net->grad_ready != NULL && l->nparams > 0) {
            net->grad_ready(net->grad_ready_ctx, l->param_off, l->nparams);
        }
        dout = din;
    }
    *loss_p = loss / batch;
}

void train_net_evaluate(train_net_t *net, const float *params, const float *x,
                        const uint8_t *y, int batch, double *loss_sum_p,
                        int *correct_p)
{
    train_layer_t *last = &net->layers[net->nlayers - 1];
    int classes = (int)train_shape_size(last->out);
    const float *logits = train_net_forward(net, params, x, batch);

    *loss_sum_p =
        train_softmax_xent(logits, y, batch, classes, NULL, correct_p);
}
