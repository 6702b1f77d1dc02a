// The loop on one process (no communicator): it learns a separable synthetic
// task, is reproducible from the seed, honours --max-steps and
// --stop-at-target, writes a well-formed CSV trace and JSON summary, computes
// every sample of an epoch once (GCX_TRAIN_TRACE_SAMPLES), and the weight
// checksum detects any difference.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loop.h"
#include "report.h"
#include "train_test_util.h"

using train_test::TempDir;

namespace {

struct Bars {
    train_dataset_t train, test;
    Bars()
    {
        train = train_test::make_bars(640, 6, 10, 1);
        test = train_test::make_bars(200, 6, 10, 2);
        double mean, std;
        train_dataset_stats(&train, &mean, &std);
        train_dataset_set_norm(&train, mean, std);
        train_dataset_set_norm(&test, mean, std);
    }
    ~Bars()
    {
        train_dataset_free(&train);
        train_dataset_free(&test);
    }
};

train_opts_t small_opts()
{
    train_opts_t o;
    train_opts_default(&o);
    o.model.nhidden = 1;
    o.model.hidden[0] = 32;
    o.epochs = 3;
    o.batch = 16;
    o.lr = 0.05;
    o.warmup_epochs = 0.25;
    o.check_every = 7;
    o.target_acc = 0.9;
    o.progress = TRAIN_PROGRESS_NONE;
    return o;
}

std::string slurp(const std::string &path)
{
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The cells of one CSV line (a trailing comma gives a last empty cell).
std::vector<std::string> csv_cells(const std::string &line)
{
    std::vector<std::string> f;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) {
        f.push_back(cell);
    }
    if (!line.empty() && line.back() == ',') {
        f.push_back("");
    }
    return f;
}

gcx_status_t run(const train_opts_t &o, Bars &d, train_result_t *r)
{
    train_comm_t comm;
    train_comm_local(&comm);
    testing::internal::CaptureStdout();
    gcx_status_t st = train_run(&o, &comm, &d.train, &d.test, r);
    testing::internal::GetCapturedStdout();
    return st;
}

} // namespace

TEST(TrainLoop, LearnsASeparableTask)
{
    Bars d;
    train_opts_t o = small_opts();
    train_result_t r;
    ASSERT_EQ(run(o, d, &r), GCX_OK);
    EXPECT_EQ(r.world, 1);
    EXPECT_EQ(r.workers, 1);
    EXPECT_EQ(r.nepochs, 3);
    EXPECT_EQ(r.steps, 3 * (640 / 16));
    EXPECT_GT(r.final_test_acc, 0.9);
    EXPECT_GE(r.best_test_acc, r.final_test_acc);
    EXPECT_GE(r.time_to_target_s, 0);
    EXPECT_GE(r.target_epoch, 1);
    EXPECT_LT(r.epochs[2].train_loss, r.epochs[0].train_loss);
    EXPECT_EQ(r.bytes_sent, 0); // one process sends nothing
    // 120 steps / 7 = 17 periodic checks plus one per epoch.
    EXPECT_EQ(r.weight_checks, 17 + 3);
    for (int e = 0; e < 3; e++) {
        EXPECT_EQ(r.epochs[e].epoch, e + 1);
        EXPECT_EQ(r.epochs[e].steps, (e + 1) * 40);
        EXPECT_GT(r.epochs[e].time_s, 0);
    }
    train_result_free(&r);
}

TEST(TrainLoop, SameSeedSameRunOtherSeedOtherRun)
{
    Bars d;
    train_opts_t o = small_opts();
    o.epochs = 2;
    train_result_t a, b, c;
    ASSERT_EQ(run(o, d, &a), GCX_OK);
    ASSERT_EQ(run(o, d, &b), GCX_OK);
    o.seed = 2;
    ASSERT_EQ(run(o, d, &c), GCX_OK);
    for (int e = 0; e < 2; e++) {
        EXPECT_EQ(a.epochs[e].train_loss, b.epochs[e].train_loss);
        EXPECT_EQ(a.epochs[e].test_loss, b.epochs[e].test_loss);
    }
    EXPECT_NE(a.epochs[1].train_loss, c.epochs[1].train_loss);
    train_result_free(&a);
    train_result_free(&b);
    train_result_free(&c);
}

TEST(TrainLoop, MaxStepsAndStopAtTarget)
{
    Bars d;
    train_opts_t o = small_opts();
    o.max_steps = 50; // stops in the second epoch, which is still evaluated
    train_result_t r;
    ASSERT_EQ(run(o, d, &r), GCX_OK);
    EXPECT_EQ(r.steps, 50);
    EXPECT_EQ(r.nepochs, 2);
    EXPECT_EQ(r.epochs[1].steps, 50);
    train_result_free(&r);

    o = small_opts();
    o.epochs = 10;
    o.target_acc = 0.5;
    o.stop_at_target = 1;
    ASSERT_EQ(run(o, d, &r), GCX_OK);
    EXPECT_EQ(r.nepochs, r.target_epoch);
    EXPECT_LT(r.nepochs, 10);
    train_result_free(&r);
}

TEST(TrainLoop, CnnTrainsToo)
{
    Bars d;
    train_opts_t o = small_opts();
    snprintf(o.model.kind, sizeof(o.model.kind), "cnn");
    o.model.nchannels = 1;
    o.model.channels[0] = 4;
    o.model.ksize = 3;
    o.model.nhidden = 0;
    train_result_t r;
    ASSERT_EQ(run(o, d, &r), GCX_OK);
    EXPECT_GT(r.final_test_acc, 0.8);
    train_result_free(&r);
}

TEST(TrainLoop, CsvTraceAndJsonSummary)
{
    Bars d;
    TempDir dir;
    train_opts_t o = small_opts();
    o.epochs = 2;
    snprintf(o.csv, sizeof(o.csv), "%s", dir.file("t.csv").c_str());
    snprintf(o.json, sizeof(o.json), "%s", dir.file("s.json").c_str());
    train_result_t r;
    ASSERT_EQ(run(o, d, &r), GCX_OK);
    ASSERT_EQ(train_report_json(o.json, &o, &r), GCX_OK);

    std::istringstream csv(slurp(o.csv));
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line, TRAIN_CSV_HEADER);
    int rows = 0, with_acc = 0;
    while (std::getline(csv, line)) {
        std::vector<std::string> f = csv_cells(line);
        ASSERT_EQ(f.size(), 15u) << line;
        EXPECT_EQ(std::stol(f[0]), rows); // step
        if (!f[6].empty()) {
            with_acc++;
            // Test accuracy sits on each epoch's last step.
            EXPECT_EQ((rows + 1) % 40, 0) << line;
            EXPECT_NEAR(std::stod(f[6]), r.epochs[(rows + 1) / 40 - 1].test_acc,
                        1e-4);
        }
        EXPECT_EQ(std::stod(f[7]), 1.0); // CF of dense
        rows++;
    }
    EXPECT_EQ(rows, 80);
    EXPECT_EQ(with_acc, 2);

    std::string js = slurp(o.json);
    for (const char *key :
         {"\"final_test_acc\"", "\"time_to_target_s\"", "\"total_time_s\"",
          "\"bytes_sent\"", "\"dense_bytes\"", "\"steps\": 80",
          "\"per_epoch\"", "\"world_size\": 1", "\"workers\": 1",
          "\"sync\": \"dense\""}) {
        EXPECT_NE(js.find(key), std::string::npos) << key << "\n" << js;
    }
    // Balanced braces and brackets, no NaN literal.
    int depth = 0;
    for (char ch : js) {
        depth += (ch == '{' || ch == '[') - (ch == '}' || ch == ']');
        ASSERT_GE(depth, 0);
    }
    EXPECT_EQ(depth, 0);
    EXPECT_EQ(js.find("nan"), std::string::npos);
    train_result_free(&r);
}

TEST(TrainLoop, EvalEveryPutsTestAccuracyIntoTheTrace)
{
    Bars d;
    TempDir dir;
    train_opts_t o = small_opts();
    o.epochs = 2;     // 40 steps per epoch
    o.eval_every = 15; // evaluations after steps 15, 30, (40), 45, 60, (80)
    o.target_acc = 0;
    snprintf(o.csv, sizeof(o.csv), "%s", dir.file("t.csv").c_str());
    train_result_t r;
    ASSERT_EQ(run(o, d, &r), GCX_OK);
    std::istringstream csv(slurp(o.csv));
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));
    std::vector<long> evaluated;
    while (std::getline(csv, line)) {
        std::vector<std::string> f = csv_cells(line);
        if (f.size() > 6 && !f[6].empty()) {
            double acc = std::stod(f[6]);
            EXPECT_GE(acc, 0.0);
            EXPECT_LE(acc, 1.0);
            evaluated.push_back(std::stol(f[0]) + 1);
        }
    }
    EXPECT_EQ(evaluated, (std::vector<long>{15, 30, 40, 45, 60, 75, 80}));
    EXPECT_EQ(r.nepochs, 2);
    EXPECT_GT(r.eval_time_s, 0.0);
    train_result_free(&r);
}

TEST(TrainLoop, TimeToTargetUsesMidEpochEvaluations)
{
    Bars d;
    train_opts_t o = small_opts();
    o.epochs = 3;
    o.eval_every = 5;
    o.target_acc = 0.5; // reached long before the first epoch ends
    o.stop_at_target = 1;
    train_result_t r;
    ASSERT_EQ(run(o, d, &r), GCX_OK);
    EXPECT_GT(r.time_to_target_s, 0.0);
    EXPECT_EQ(r.target_epoch, 1);
    EXPECT_LT(r.steps, 40); // stopped at the evaluation that reached it
    EXPECT_EQ(r.steps % 5, 0);
    train_result_free(&r);
}

// The sample trace hook: an epoch computes each sample of its full global
// batches once, at the step of its global batch, and skips the tail.
// (ranks.sh checks the pipelined coded modes, P steps per batch, the same
// way over real ranks.)
TEST(TrainLoop, SampleTraceShowsOnePassPerEpoch)
{
    Bars d;
    TempDir dir;
    train_opts_t o = small_opts();
    o.epochs = 2;
    o.batch = 24; // 26 steps of 24 per epoch; the last 16 samples skipped
    const size_t n = d.train.n, spe = n / 24;
    std::string prefix = dir.file("samples");
    ASSERT_EQ(setenv("GCX_TRAIN_TRACE_SAMPLES", prefix.c_str(), 1), 0);
    train_result_t r;
    gcx_status_t status = run(o, d, &r);
    unsetenv("GCX_TRAIN_TRACE_SAMPLES");
    ASSERT_EQ(status, GCX_OK);
    EXPECT_EQ(r.steps, (long)(2 * spe));
    train_result_free(&r);

    std::ifstream trace(prefix + ".0"); // rank 0
    ASSERT_TRUE(trace.good()) << prefix;
    std::vector<std::vector<int>> seen(2, std::vector<int>(n, 0));
    int epoch, lines = 0;
    size_t step, begin, count;
    while (trace >> epoch >> step >> begin >> count) {
        ASSERT_TRUE(epoch == 1 || epoch == 2) << epoch;
        ASSERT_LT(step, spe);
        EXPECT_EQ(begin, step * 24); // the step's global batch, whole
        EXPECT_EQ(count, 24u);
        ASSERT_LE(begin + count, n);
        for (size_t i = begin; i < begin + count; i++) {
            seen[epoch - 1][i]++;
        }
        lines++;
    }
    EXPECT_EQ(lines, (int)(2 * spe));
    for (int e = 0; e < 2; e++) {
        for (size_t i = 0; i < n; i++) {
            ASSERT_EQ(seen[e][i], i < spe * 24 ? 1 : 0)
                << "epoch " << e + 1 << " sample " << i;
        }
    }
}

TEST(TrainLoop, UnwritableCsvFailsTheRun)
{
    Bars d;
    train_opts_t o = small_opts();
    snprintf(o.csv, sizeof(o.csv), "/nonexistent-dir/x.csv");
    train_result_t r;
    testing::internal::CaptureStderr();
    EXPECT_EQ(run(o, d, &r), GCX_ERR_IO);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("/nonexistent-dir/x.csv"), std::string::npos) << err;
}

TEST(TrainLoop, BatchLargerThanTheDataSetIsAnError)
{
    Bars d;
    train_opts_t o = small_opts();
    o.batch = 1000;
    train_result_t r;
    testing::internal::CaptureStderr();
    EXPECT_EQ(run(o, d, &r), GCX_ERR_INVALID);
    testing::internal::GetCapturedStderr();
}

TEST(TrainLoop, ChecksumSeesEveryBit)
{
    std::vector<float> a(1000, 0.25f), b = a;
    EXPECT_EQ(train_checksum(a.data(), a.size()),
              train_checksum(b.data(), b.size()));
    EXPECT_GE(train_checksum(a.data(), a.size()), 0);
    for (size_t i : {0u, 500u, 999u}) {
        b = a;
        b[i] = std::nextafter(b[i], 1.0f); // one ulp
        EXPECT_NE(train_checksum(a.data(), a.size()),
                  train_checksum(b.data(), b.size()))
            << i;
    }
    train_comm_t comm;
    train_comm_local(&comm);
    EXPECT_EQ(train_check_identical(&comm, a.data(), a.size(), 3), GCX_OK);
}
