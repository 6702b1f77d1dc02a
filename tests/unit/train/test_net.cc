// Models: layer forwards against naive loops, softmax cross-entropy against
// hand values, and every parameter's gradient against central finite
// differences, for the MLP and the CNN (conv, relu, max-pool, dense).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "nn/model.h"
#include "nn/net.h"
#include "util.h"

namespace {

std::vector<float> random_vec(size_t n, uint64_t seed, double scale = 1.0)
{
    std::vector<float> v(n);
    train_rng_t rng;
    train_rng_seed(&rng, seed, 1);
    for (auto &x : v) {
        x = (float)(scale * train_rng_normal(&rng));
    }
    return v;
}

std::vector<uint8_t> random_labels(size_t n, uint64_t seed)
{
    std::vector<uint8_t> y(n);
    train_rng_t rng;
    train_rng_seed(&rng, seed, 2);
    for (auto &c : y) {
        c = (uint8_t)train_rng_below(&rng, 10);
    }
    return y;
}

double mean_loss(train_net_t *net, const std::vector<float> &p,
                 const std::vector<float> &x, const std::vector<uint8_t> &y,
                 int batch)
{
    double sum;
    int hits;
    train_net_evaluate(net, p.data(), x.data(), y.data(), batch, &sum, &hits);
    return sum / batch;
}

// Compare backprop with central differences for every parameter. Per layer,
// at least 99% of parameters must agree (a ReLU or max-pool kink inside
// the finite-difference step can spoil a rare one); a wrong backward of a
// layer fails nearly all of its parameters.
void check_gradients(train_net_t *net, int batch, uint64_t seed)
{
    size_t in = train_shape_size(net->in);
    std::vector<float> p(net->nparams), g(net->nparams);
    train_net_init_params(net, p.data(), seed);
    // Non-zero biases so that their gradients matter.
    train_rng_t rng;
    train_rng_seed(&rng, seed, 9);
    for (auto &v : p) {
        v += (float)(0.05 * train_rng_normal(&rng));
    }
    auto x = random_vec((size_t)batch * in, seed + 1);
    auto y = random_labels((size_t)batch, seed + 2);
    double loss;
    int hits;
    train_net_loss_grad(net, p.data(), x.data(), y.data(), batch, g.data(),
                        &loss, &hits);
    EXPECT_NEAR(loss, mean_loss(net, p, x, y, batch), 1e-6);

    for (int li = 0; li < net->nlayers; li++) {
        const train_layer_t *l = &net->layers[li];
        size_t bad = 0;
        double worst = 0;
        for (size_t k = l->param_off; k < l->param_off + l->nparams; k++) {
            bool ok = false;
            double num = 0;
            for (float eps : {1e-2f, 2e-3f}) {
                float save = p[k];
                p[k] = save + eps;
                double lp = mean_loss(net, p, x, y, batch);
                p[k] = save - eps;
                double lm = mean_loss(net, p, x, y, batch);
                p[k] = save;
                // Divide by the step actually taken in float.
                double h = (double)(save + eps) - (double)(save - eps);
                num = (lp - lm) / h;
                double err = fabs(num - g[k]);
                if (err <= 2e-3 + 2e-2 * fabs(num)) {
                    ok = true;
                    break;
                }
            }
            if (!ok) {
                bad++;
                worst = std::max(worst, fabs(num - g[k]));
            }
        }
        EXPECT_LE(bad, l->nparams / 100)
            << "layer " << li << " (" << l->ops->name << "): " << bad
            << " of " << l->nparams << " gradients wrong, worst abs error "
            << worst;
    }
}

} // namespace

TEST(TrainNet, SoftmaxCrossEntropyKnownValues)
{
    std::vector<float> z(2 * 10, 0.0f), d(20);
    std::vector<uint8_t> y = {3, 7};
    z[10 + 7] = 5.0f; // second sample confident and right
    int hits;
    double sum = train_softmax_xent(z.data(), y.data(), 2, 10, d.data(),
                                    &hits);
    double l1 = log(10.0);
    double l2 = log(9.0 + exp(5.0)) - 5.0;
    EXPECT_NEAR(sum, l1 + l2, 1e-9);
    EXPECT_EQ(hits, 1); // first sample: all tie, arg-max 0 != 3
    for (int j = 0; j < 10; j++) {
        EXPECT_NEAR(d[j], (0.1 - (j == 3)) / 2, 1e-7);
        double p = (j == 7 ? exp(5.0) : 1.0) / (9.0 + exp(5.0));
        EXPECT_NEAR(d[10 + j], (p - (j == 7)) / 2, 1e-7);
    }
    // Stable for huge logits.
    z[0] = 1e4f;
    sum = train_softmax_xent(z.data(), y.data(), 1, 10, d.data(), &hits);
    EXPECT_TRUE(std::isfinite(sum));
    EXPECT_NEAR(sum, 1e4, 1e-6 * 1e4);
}

TEST(TrainNet, DenseForwardMatchesNaive)
{
    train_layer_t l;
    ASSERT_EQ(train_layer_dense({3, 2, 2}, 5, 4, &l), GCX_OK);
    ASSERT_EQ(l.nparams, 12u * 5 + 5);
    auto p = random_vec(l.nparams, 1);
    auto x = random_vec(3 * 12, 2);
    std::vector<float> out(3 * 5);
    l.ops->forward(&l, p.data(), x.data(), out.data(), 3);
    for (int b = 0; b < 3; b++) {
        for (int o = 0; o < 5; o++) {
            double s = p[60 + o];
            for (int i = 0; i < 12; i++) {
                s += (double)x[b * 12 + i] * p[i * 5 + o];
            }
            EXPECT_NEAR(out[b * 5 + o], s, 1e-5);
        }
    }
    l.ops->destroy(&l);
}

TEST(TrainNet, ConvForwardMatchesDirectConvolution)
{
    const int C = 2, H = 5, W = 6, K = 3, k = 3, pad = 1, B = 2;
    train_layer_t l;
    ASSERT_EQ(train_layer_conv({C, H, W}, K, k, pad, B, &l), GCX_OK);
    EXPECT_EQ(l.out.c, K);
    EXPECT_EQ(l.out.h, H);
    EXPECT_EQ(l.out.w, W);
    ASSERT_EQ(l.nparams, (size_t)K * C * k * k + K);
    auto p = random_vec(l.nparams, 3);
    auto x = random_vec((size_t)B * C * H * W, 4);
    std::vector<float> out((size_t)B * K * H * W);
    l.ops->forward(&l, p.data(), x.data(), out.data(), B);
    for (int b = 0; b < B; b++) {
        for (int f = 0; f < K; f++) {
            for (int oh = 0; oh < H; oh++) {
                for (int ow = 0; ow < W; ow++) {
                    double s = p[(size_t)K * C * k * k + f];
                    for (int c = 0; c < C; c++) {
                        for (int i = 0; i < k; i++) {
                            for (int j = 0; j < k; j++) {
                                int ih = oh + i - pad, iw = ow + j - pad;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                                    continue;
                                }
                                s += (double)p[((f * C + c) * k + i) * k + j] *
                                     x[((b * C + c) * H + ih) * W + iw];
                            }
                        }
                    }
                    EXPECT_NEAR(out[((b * K + f) * H + oh) * W + ow], s, 1e-5);
                }
            }
        }
    }
    l.ops->destroy(&l);
}

TEST(TrainNet, MaxPoolForwardAndBackward)
{
    train_layer_t l;
    ASSERT_EQ(train_layer_maxpool({1, 4, 5}, 2, 1, &l), GCX_OK);
    EXPECT_EQ(l.out.h, 2);
    EXPECT_EQ(l.out.w, 2); // the fifth column is dropped
    std::vector<float> x(20);
    for (int i = 0; i < 20; i++) {
        x[i] = (float)((i * 7) % 11);
    }
    std::vector<float> out(4), dout = {1, 2, 3, 4}, din(20);
    l.ops->forward(&l, nullptr, x.data(), out.data(), 1);
    std::vector<float> dsum(20, 0.0f);
    for (int oh = 0; oh < 2; oh++) {
        for (int ow = 0; ow < 2; ow++) {
            int best = (2 * oh) * 5 + 2 * ow;
            for (int i = 0; i < 2; i++) {
                for (int j = 0; j < 2; j++) {
                    int q = (2 * oh + i) * 5 + 2 * ow + j;
                    if (x[q] > x[best]) {
                        best = q;
                    }
                }
            }
            EXPECT_EQ(out[oh * 2 + ow], x[best]);
            dsum[best] += dout[oh * 2 + ow];
        }
    }
    l.ops->backward(&l, nullptr, x.data(), out.data(), dout.data(), din.data(),
                    nullptr, 1);
    EXPECT_EQ(din, dsum);
    l.ops->destroy(&l);
}

TEST(TrainNet, MlpShapeAndParameterCount)
{
    train_model_spec_t spec = {};
    snprintf(spec.kind, sizeof(spec.kind), "mlp");
    spec.nhidden = 2;
    spec.hidden[0] = spec.hidden[1] = 1024;
    train_net_t net;
    ASSERT_EQ(train_model_build(&spec, {1, 28, 28}, 10, 8, &net), GCX_OK);
    EXPECT_EQ(net.nparams, 784u * 1024 + 1024 + 1024 * 1024 + 1024 +
                               1024 * 10 + 10);
    EXPECT_STREQ(net.desc, "mlp 784-1024-1024-10");
    EXPECT_EQ(net.nlayers, 5);
    train_net_destroy(&net);
}

TEST(TrainNet, CnnShapeAndParameterCount)
{
    train_model_spec_t spec = {};
    snprintf(spec.kind, sizeof(spec.kind), "cnn");
    spec.nchannels = 2;
    spec.channels[0] = 16;
    spec.channels[1] = 32;
    spec.ksize = 5;
    spec.nhidden = 1;
    spec.hidden[0] = 128;
    train_net_t net;
    ASSERT_EQ(train_model_build(&spec, {1, 28, 28}, 10, 4, &net), GCX_OK);
    size_t want = (16 * 25 + 16) + (32 * 16 * 25 + 32) +
                  (32 * 7 * 7 * 128 + 128) + (128 * 10 + 10);
    EXPECT_EQ(net.nparams, want);
    EXPECT_EQ(net.nlayers, 3 + 3 + 2 + 1);
    train_net_destroy(&net);

    spec.ksize = 4;
    testing::internal::CaptureStderr();
    EXPECT_EQ(train_model_build(&spec, {1, 28, 28}, 10, 4, &net),
              GCX_ERR_INVALID);
    testing::internal::GetCapturedStderr();
    snprintf(spec.kind, sizeof(spec.kind), "rnn");
    testing::internal::CaptureStderr();
    EXPECT_EQ(train_model_build(&spec, {1, 28, 28}, 10, 4, &net),
              GCX_ERR_INVALID);
    testing::internal::GetCapturedStderr();
}

TEST(TrainNet, InitIsSeededAndHeScaled)
{
    train_model_spec_t spec = {};
    snprintf(spec.kind, sizeof(spec.kind), "mlp");
    spec.nhidden = 1;
    spec.hidden[0] = 256;
    train_net_t net;
    ASSERT_EQ(train_model_build(&spec, {1, 28, 28}, 10, 2, &net), GCX_OK);
    std::vector<float> a(net.nparams), b(net.nparams), c(net.nparams);
    train_net_init_params(&net, a.data(), 11);
    train_net_init_params(&net, b.data(), 11);
    train_net_init_params(&net, c.data(), 12);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    // First layer weights: std sqrt(2/784); biases zero.
    double s2 = 0;
    for (size_t i = 0; i < 784 * 256; i++) {
        s2 += (double)a[i] * a[i];
    }
    EXPECT_NEAR(sqrt(s2 / (784 * 256)), sqrt(2.0 / 784), 0.02 * sqrt(2.0 / 784));
    for (size_t i = 784 * 256; i < 784 * 256 + 256; i++) {
        ASSERT_EQ(a[i], 0.0f);
    }
    train_net_destroy(&net);
}

TEST(TrainNet, MlpGradientsMatchFiniteDifferences)
{
    train_model_spec_t spec = {};
    snprintf(spec.kind, sizeof(spec.kind), "mlp");
    spec.nhidden = 2;
    spec.hidden[0] = 7;
    spec.hidden[1] = 5;
    train_net_t net;
    ASSERT_EQ(train_model_build(&spec, {1, 3, 4}, 10, 6, &net), GCX_OK);
    check_gradients(&net, 6, 21);
    check_gradients(&net, 1, 22);
    train_net_destroy(&net);
}

TEST(TrainNet, CnnGradientsMatchFiniteDifferences)
{
    train_model_spec_t spec = {};
    snprintf(spec.kind, sizeof(spec.kind), "cnn");
    spec.nchannels = 2;
    spec.channels[0] = 3;
    spec.channels[1] = 4;
    spec.ksize = 3;
    spec.nhidden = 1;
    spec.hidden[0] = 6;
    train_net_t net;
    // Two input channels and a non-square image exercise every index.
    ASSERT_EQ(train_model_build(&spec, {2, 8, 6}, 10, 3, &net), GCX_OK);
    check_gradients(&net, 3, 31);
    train_net_destroy(&net);
}

TEST(TrainNet, GlobalBatchGradientIsTheMeanOfShardGradients)
{
    // What data parallelism relies on: averaging the ranks' mean gradients
    // over equal shards gives the mean gradient of the whole global batch.
    train_model_spec_t spec = {};
    snprintf(spec.kind, sizeof(spec.kind), "mlp");
    spec.nhidden = 1;
    spec.hidden[0] = 16;
    const int global = 12, world = 4, batch = global / world, in = 20;
    train_net_t net;
    ASSERT_EQ(train_model_build(&spec, {1, 4, 5}, 10, global, &net), GCX_OK);
    std::vector<float> p(net.nparams), gfull(net.nparams), gpart(net.nparams);
    std::vector<double> avg(net.nparams, 0.0);
    train_net_init_params(&net, p.data(), 5);
    auto x = random_vec((size_t)global * in, 6);
    auto y = random_labels(global, 7);
    double loss, lsum = 0;
    int hits;
    train_net_loss_grad(&net, p.data(), x.data(), y.data(), global,
                        gfull.data(), &loss, &hits);
    for (int r = 0; r < world; r++) {
        double l;
        train_net_loss_grad(&net, p.data(), x.data() + r * batch * in,
                            y.data() + r * batch, batch, gpart.data(), &l,
                            &hits);
        lsum += l / world;
        for (size_t k = 0; k < net.nparams; k++) {
            avg[k] += gpart[k] / (double)world;
        }
    }
    EXPECT_NEAR(lsum, loss, 1e-6);
    for (size_t k = 0; k < net.nparams; k++) {
        ASSERT_NEAR(avg[k], gfull[k], 1e-6 + 1e-4 * fabs(gfull[k])) << k;
    }
    train_net_destroy(&net);
}

// The backward hook (what dense sync's buckets start on): one call per layer
// with parameters, from the last layer to the first, each slice ending where
// the one before began, together the whole vector; at each call the slice
// already holds its final gradient (the same bits as a run without the
// hook), and the layers below have not written theirs yet.
struct HookLog {
    std::vector<std::pair<size_t, size_t>> slices;
    const float *grads = nullptr;
    const std::vector<float> *want = nullptr;
    size_t bad_final = 0;   // elements of the slice not final at the call
    size_t early_below = 0; // elements below the slice written already
};

static void log_slice(void *ctx, size_t off, size_t len)
{
    auto *log = static_cast<HookLog *>(ctx);
    log->slices.emplace_back(off, len);
    for (size_t k = off; k < off + len; k++) {
        log->bad_final += log->grads[k] != (*log->want)[k];
    }
    for (size_t k = 0; k < off; k++) {
        log->early_below += !std::isnan(log->grads[k]);
    }
}

TEST(TrainNet, GradHookSeesEachLayerFinalFromTheTopDown)
{
    for (const char *kind : {"mlp", "cnn"}) {
        train_model_spec_t spec = {};
        snprintf(spec.kind, sizeof(spec.kind), "%s", kind);
        spec.nchannels = 1;
        spec.channels[0] = 4;
        spec.ksize = 3;
        spec.nhidden = 2;
        spec.hidden[0] = 12;
        spec.hidden[1] = 8;
        const int batch = 5;
        train_net_t net;
        ASSERT_EQ(train_model_build(&spec, {1, 8, 8}, 10, batch, &net), GCX_OK)
            << kind;
        std::vector<float> p(net.nparams), want(net.nparams);
        std::vector<float> got(net.nparams, NAN);
        train_net_init_params(&net, p.data(), 11);
        auto x = random_vec((size_t)batch * 64, 12);
        auto y = random_labels(batch, 13);
        double loss;
        int hits;
        train_net_loss_grad(&net, p.data(), x.data(), y.data(), batch,
                            want.data(), &loss, &hits);
        HookLog log;
        log.grads = got.data();
        log.want = &want;
        train_net_set_hook(&net, log_slice, &log);
        train_net_loss_grad(&net, p.data(), x.data(), y.data(), batch,
                            got.data(), &loss, &hits);
        train_net_set_hook(&net, nullptr, nullptr);
        size_t end = net.nparams, layers = 0;
        for (int i = 0; i < net.nlayers; i++) {
            layers += net.layers[i].nparams > 0;
        }
        EXPECT_EQ(layers, log.slices.size()) << kind;
        for (const auto &s : log.slices) {
            EXPECT_GT(s.second, 0u) << kind;
            EXPECT_EQ(end, s.first + s.second) << kind << ": a gap or overlap";
            end = s.first;
        }
        EXPECT_EQ(0u, end) << kind << ": the slices do not reach 0";
        EXPECT_EQ(0u, log.bad_final) << kind;
        EXPECT_EQ(0u, log.early_below) << kind;
        EXPECT_EQ(0, memcmp(want.data(), got.data(), want.size() * sizeof(float)))
            << kind;
        train_net_destroy(&net);
    }
}
