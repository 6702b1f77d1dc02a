// Data: IDX reading through zlib (gzip and plain), every error path, the
// GCX_DATA_DIR override, normalisation, the epoch permutation and sharding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <zlib.h>

#include "data.h"
#include "train_test_util.h"

using train_test::TempDir;

namespace {

std::vector<uint8_t> be32(uint32_t v)
{
    return {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
            (uint8_t)v};
}

// Header + payload of an unsigned-byte IDX file.
std::vector<uint8_t> idx_bytes(const std::vector<uint32_t> &dims,
                               const std::vector<uint8_t> &payload)
{
    std::vector<uint8_t> out = {0, 0, 0x08, (uint8_t)dims.size()};
    for (uint32_t d : dims) {
        auto b = be32(d);
        out.insert(out.end(), b.begin(), b.end());
    }
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

void write_gz(const std::string &path, const std::vector<uint8_t> &bytes)
{
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), (unsigned)bytes.size()),
              (int)bytes.size());
    ASSERT_EQ(gzclose(f), Z_OK);
}

void write_plain(const std::string &path, const std::vector<uint8_t> &bytes)
{
    FILE *f = fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    fclose(f);
}

// 5 images of 2x3 with pixel value 10*i + j, labels i % 10.
struct SmallSet {
    std::vector<uint8_t> images, labels;
    SmallSet()
    {
        std::vector<uint8_t> px, lb;
        for (int i = 0; i < 5; i++) {
            for (int j = 0; j < 6; j++) {
                px.push_back((uint8_t)(10 * i + j));
            }
            lb.push_back((uint8_t)(i % 10));
        }
        images = idx_bytes({5, 2, 3}, px);
        labels = idx_bytes({5}, lb);
    }
};

} // namespace

TEST(TrainData, LoadsGzipIdx)
{
    TempDir dir;
    SmallSet s;
    write_gz(dir.file("i.gz"), s.images);
    write_gz(dir.file("l.gz"), s.labels);

    train_dataset_t set;
    ASSERT_EQ(train_dataset_load(dir.file("i.gz").c_str(),
                                 dir.file("l.gz").c_str(), &set),
              GCX_OK);
    EXPECT_EQ(set.n, 5u);
    EXPECT_EQ(set.rows, 2);
    EXPECT_EQ(set.cols, 3);
    for (int i = 0; i < 5; i++) {
        EXPECT_EQ(set.labels[i], i % 10);
        for (int j = 0; j < 6; j++) {
            EXPECT_EQ(set.pixels[i * 6 + j], 10 * i + j);
        }
    }
    train_dataset_free(&set);
}

TEST(TrainData, FallsBackToPlainFileWithoutGz)
{
    TempDir dir;
    SmallSet s;
    write_plain(dir.file("i"), s.images);
    write_plain(dir.file("l"), s.labels);

    train_dataset_t set;
    ASSERT_EQ(train_dataset_load(dir.file("i.gz").c_str(),
                                 dir.file("l.gz").c_str(), &set),
              GCX_OK);
    EXPECT_EQ(set.n, 5u);
    EXPECT_EQ(set.pixels[29], 45);
    train_dataset_free(&set);
}

TEST(TrainData, MissingFileIsNamed)
{
    TempDir dir;
    std::string missing = dir.file("nothing-images-idx3-ubyte.gz");
    train_dataset_t set;

    testing::internal::CaptureStderr();
    EXPECT_EQ(train_dataset_load(missing.c_str(), missing.c_str(), &set),
              GCX_ERR_NOT_FOUND);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(missing), std::string::npos) << err;
    EXPECT_NE(err.find("GCX_DATA_DIR"), std::string::npos) << err;
}

TEST(TrainData, DataDirOverride)
{
    TempDir dir;
    SmallSet s;
    write_gz(dir.file("train-images-idx3-ubyte.gz"), s.images);
    write_gz(dir.file("train-labels-idx1-ubyte.gz"), s.labels);

    const char *old = getenv("GCX_DATA_DIR");
    std::string saved = old ? old : "";
    setenv("GCX_DATA_DIR", dir.path().c_str(), 1);
    train_dataset_t set;
    EXPECT_EQ(train_dataset_load_named("train", &set), GCX_OK);
    EXPECT_EQ(set.n, 5u);
    train_dataset_free(&set);

    testing::internal::CaptureStderr();
    EXPECT_EQ(train_dataset_load_named("t10k", &set), GCX_ERR_NOT_FOUND);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(dir.file("t10k-images-idx3-ubyte.gz")),
              std::string::npos)
        << err;
    if (old) {
        setenv("GCX_DATA_DIR", saved.c_str(), 1);
    } else {
        unsetenv("GCX_DATA_DIR");
    }
}

TEST(TrainData, RejectsMalformedFiles)
{
    TempDir dir;
    SmallSet s;
    train_dataset_t set;
    std::string lab = dir.file("l.gz");
    write_gz(lab, s.labels);

    struct Case {
        const char *what;
        std::vector<uint8_t> bytes;
        gcx_status_t expect;
    } cases[] = {
        {"bad magic", {0, 0, 0x0d, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 7},
         GCX_ERR_IO},
        {"truncated data",
         std::vector<uint8_t>(s.images.begin(), s.images.end() - 3),
         GCX_ERR_IO},
        {"truncated header", {0, 0, 8, 3, 0, 0}, GCX_ERR_IO},
        {"trailing bytes", [&] {
             auto b = s.images;
             b.push_back(1);
             return b;
         }(),
         GCX_ERR_IO},
        {"count mismatch",
         idx_bytes({4, 2, 3}, std::vector<uint8_t>(24, 1)),
         GCX_ERR_MISMATCH},
        {"zero dimension", idx_bytes({0, 2, 3}, {}), GCX_ERR_IO},
    };
    for (const auto &c : cases) {
        std::string img = dir.file("i.gz");
        write_gz(img, c.bytes);
        testing::internal::CaptureStderr();
        EXPECT_EQ(train_dataset_load(img.c_str(), lab.c_str(), &set),
                  c.expect)
            << c.what;
        std::string err = testing::internal::GetCapturedStderr();
        EXPECT_FALSE(err.empty()) << c.what;
    }

    // A label outside 0..9.
    std::string img = dir.file("i.gz");
    write_gz(img, s.images);
    write_gz(lab, idx_bytes({5}, {1, 2, 3, 10, 4}));
    testing::internal::CaptureStderr();
    EXPECT_EQ(train_dataset_load(img.c_str(), lab.c_str(), &set), GCX_ERR_IO);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("label"), std::string::npos) << err;
}

TEST(TrainData, NormalisationAndGather)
{
    train_dataset_t set = train_test::make_bars(200, 4, 10, 3);
    double mean, std;
    train_dataset_stats(&set, &mean, &std);

    // Reference in double straight from the bytes.
    size_t total = set.n * 40;
    double s1 = 0, s2 = 0;
    for (size_t i = 0; i < total; i++) {
        double x = set.pixels[i] / 255.0;
        s1 += x;
        s2 += x * x;
    }
    double rmean = s1 / total, rstd = sqrt(s2 / total - rmean * rmean);
    EXPECT_NEAR(mean, rmean, 1e-12);
    EXPECT_NEAR(std, rstd, 1e-12);

    train_dataset_set_norm(&set, mean, std);
    std::vector<uint32_t> idx = {7, 0, 199};
    std::vector<float> x(3 * 40);
    std::vector<uint8_t> y(3);
    train_dataset_gather(&set, idx.data(), 3, x.data(), y.data());
    for (int k = 0; k < 3; k++) {
        EXPECT_EQ(y[k], set.labels[idx[k]]);
        for (int j = 0; j < 40; j++) {
            double want = (set.pixels[idx[k] * 40 + j] / 255.0 - mean) / std;
            EXPECT_NEAR(x[k * 40 + j], want, 1e-5);
        }
    }

    // Over the whole set the normalised pixels have mean 0 and std 1.
    std::vector<uint32_t> all(set.n);
    for (size_t i = 0; i < set.n; i++) {
        all[i] = (uint32_t)i;
    }
    std::vector<float> xa(set.n * 40);
    std::vector<uint8_t> ya(set.n);
    train_dataset_gather(&set, all.data(), set.n, xa.data(), ya.data());
    double m = 0, v = 0;
    for (float f : xa) {
        m += f;
        v += (double)f * f;
    }
    m /= xa.size();
    v = v / xa.size() - m * m;
    EXPECT_NEAR(m, 0.0, 1e-5);
    EXPECT_NEAR(v, 1.0, 1e-4);
    train_dataset_free(&set);
}

TEST(TrainData, EpochPermutationIsSeeded)
{
    const size_t n = 1000;
    std::vector<uint32_t> a(n), b(n), c(n), d(n);
    train_epoch_permutation(42, 0, a.data(), n);
    train_epoch_permutation(42, 0, b.data(), n);
    train_epoch_permutation(42, 1, c.data(), n);
    train_epoch_permutation(43, 0, d.data(), n);

    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    EXPECT_NE(a, d);
    std::vector<uint32_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ(sorted[i], i);
    }
    // Not the identity, and no position bias worth speaking of.
    size_t fixed = 0;
    for (size_t i = 0; i < n; i++) {
        fixed += a[i] == i;
    }
    EXPECT_LT(fixed, 10u);
}

TEST(TrainData, ShardsAreDisjointAndFormTheGlobalBatch)
{
    const size_t n = 1000;
    std::vector<uint32_t> perm(n);
    train_epoch_permutation(5, 2, perm.data(), n);
    const int global = 24;

    for (int world : {1, 2, 3, 4, 6}) {
        int batch = global / world;
        size_t steps = train_steps_per_epoch(n, batch, world);
        EXPECT_EQ(steps, n / global) << world;
        std::set<uint32_t> seen;
        for (size_t s = 0; s < steps; s++) {
            std::set<uint32_t> step_set;
            for (int r = 0; r < world; r++) {
                size_t off = train_shard_offset((int)s, batch, r, world);
                ASSERT_LE(off + batch, n);
                for (int k = 0; k < batch; k++) {
                    EXPECT_TRUE(step_set.insert(perm[off + k]).second);
                    EXPECT_TRUE(seen.insert(perm[off + k]).second);
                }
            }
            // Same samples as one rank taking the whole global batch.
            std::set<uint32_t> ref(perm.begin() + s * global,
                                   perm.begin() + (s + 1) * global);
            EXPECT_EQ(step_set, ref) << "world " << world << " step " << s;
        }
        EXPECT_EQ(seen.size(), steps * global);
    }
}

TEST(TrainData, EvalRangesCoverTheTestSet)
{
    for (size_t n : {0u, 1u, 7u, 10000u}) {
        for (int world = 1; world <= 5; world++) {
            size_t next = 0;
            for (int r = 0; r < world; r++) {
                size_t b, e;
                train_eval_range(n, r, world, &b, &e);
                EXPECT_EQ(b, next);
                EXPECT_LE(e - b, n / world + 1);
                next = e;
            }
            EXPECT_EQ(next, n);
        }
    }
}

TEST(TrainData, RealFashionMnistIfInstalled)
{
    train_dataset_t train, test;
    testing::internal::CaptureStderr();
    gcx_status_t st = train_dataset_load_named("t10k", &test);
    testing::internal::GetCapturedStderr();
    if (st == GCX_ERR_NOT_FOUND) {
        GTEST_SKIP() << "Fashion-MNIST not installed (dataset-fashion-mnist)";
    }
    ASSERT_EQ(st, GCX_OK);
    EXPECT_EQ(test.n, 10000u);
    EXPECT_EQ(test.rows, 28);
    EXPECT_EQ(test.cols, 28);
    int counts[10] = {0};
    for (size_t i = 0; i < test.n; i++) {
        counts[test.labels[i]]++;
    }
    for (int c = 0; c < 10; c++) {
        EXPECT_EQ(counts[c], 1000) << c; // the test set is balanced
    }
    ASSERT_EQ(train_dataset_load_named("train", &train), GCX_OK);
    EXPECT_EQ(train.n, 60000u);
    double mean, std;
    train_dataset_stats(&train, &mean, &std);
    EXPECT_NEAR(mean, 0.2860, 1e-3); // published Fashion-MNIST statistics
    EXPECT_NEAR(std, 0.3530, 1e-3);
    train_dataset_free(&train);
    train_dataset_free(&test);
}
