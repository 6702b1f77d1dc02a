// Command line: defaults, every option, and a clear error for bad values.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "opts.h"

namespace {

// Parse a command line; returns TRAIN_OPTS_* and the captured stderr.
int parse(std::initializer_list<const char *> args, train_opts_t *o,
          std::string *err = nullptr)
{
    std::vector<std::string> store = {"gcx-train"};
    for (const char *a : args) {
        store.push_back(a);
    }
    std::vector<char *> argv;
    for (auto &s : store) {
        argv.push_back(&s[0]);
    }
    argv.push_back(nullptr);
    train_opts_default(o);
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    int rc = train_opts_parse((int)store.size(), argv.data(), o);
    testing::internal::GetCapturedStdout();
    std::string e = testing::internal::GetCapturedStderr();
    if (err) {
        *err = e;
    }
    return rc;
}

} // namespace

TEST(TrainOpts, Defaults)
{
    train_opts_t o;
    ASSERT_EQ(parse({}, &o), TRAIN_OPTS_RUN);
    EXPECT_STREQ(o.model.kind, "mlp");
    ASSERT_EQ(o.model.nhidden, 2);
    EXPECT_EQ(o.model.hidden[0], 1024);
    EXPECT_EQ(o.model.hidden[1], 1024);
    EXPECT_STREQ(o.sync, "dense");
    EXPECT_EQ(o.schedule, TRAIN_SCHED_COSINE);
    EXPECT_GT(o.epochs, 0);
    EXPECT_GT(o.batch, 0);

    ASSERT_EQ(parse({"--model", "cnn"}, &o), TRAIN_OPTS_RUN);
    ASSERT_EQ(o.model.nhidden, 1);
    EXPECT_EQ(o.model.hidden[0], 128);
    ASSERT_EQ(o.model.nchannels, 2);
}

TEST(TrainOpts, EveryOption)
{
    train_opts_t o;
    ASSERT_EQ(parse({"--model", "cnn", "--hidden", "64,32", "--channels",
                     "4,8,16", "--kernel", "3", "--epochs", "7", "--batch",
                     "32", "--lr", "0.1", "--momentum", "0.5", "--wd", "0",
                     "--schedule", "step", "--warmup", "1.5", "--lr-step",
                     "2", "--lr-gamma", "0.5", "--min-lr", "0.001", "--seed",
                     "99", "--max-steps", "10", "--sync", "dense",
                     "--check-every", "0", "--target-acc", "0.9",
                     "--stop-at-target", "--json", "a.json", "--csv", "b.csv",
                     "--progress", "plain", "--log-every", "5",
                     "--straggler", "2:150", "--eval-every", "25"},
                    &o),
              TRAIN_OPTS_RUN);
    EXPECT_STREQ(o.model.kind, "cnn");
    ASSERT_EQ(o.model.nhidden, 2);
    EXPECT_EQ(o.model.hidden[1], 32);
    ASSERT_EQ(o.model.nchannels, 3);
    EXPECT_EQ(o.model.channels[2], 16);
    EXPECT_EQ(o.model.ksize, 3);
    EXPECT_EQ(o.epochs, 7);
    EXPECT_EQ(o.batch, 32);
    EXPECT_EQ(o.lr, 0.1);
    EXPECT_EQ(o.momentum, 0.5);
    EXPECT_EQ(o.weight_decay, 0);
    EXPECT_EQ(o.schedule, TRAIN_SCHED_STEP);
    EXPECT_EQ(o.warmup_epochs, 1.5);
    EXPECT_EQ(o.lr_step_epochs, 2);
    EXPECT_EQ(o.lr_gamma, 0.5);
    EXPECT_EQ(o.min_lr, 0.001);
    EXPECT_EQ(o.seed, 99u);
    EXPECT_EQ(o.max_steps, 10);
    EXPECT_EQ(o.check_every, 0);
    EXPECT_EQ(o.target_acc, 0.9);
    EXPECT_EQ(o.stop_at_target, 1);
    EXPECT_STREQ(o.json, "a.json");
    EXPECT_STREQ(o.csv, "b.csv");
    EXPECT_EQ(o.progress, TRAIN_PROGRESS_PLAIN);
    EXPECT_EQ(o.log_every, 5);
    EXPECT_EQ(o.straggler_rank, 2);
    EXPECT_DOUBLE_EQ(o.straggler_delay, 0.150);
    EXPECT_EQ(o.eval_every, 25);

    ASSERT_EQ(parse({"--hidden", "none"}, &o), TRAIN_OPTS_RUN);
    EXPECT_EQ(o.model.nhidden, 0);
    // exp:M replaces R:MS and the other way round (the last one wins)
    ASSERT_EQ(parse({"--straggler", "2:150", "--straggler", "exp:1.5"}, &o),
              TRAIN_OPTS_RUN);
    EXPECT_EQ(o.straggler_exp, 1.5);
    EXPECT_EQ(o.straggler_rank, -1);
    EXPECT_EQ(o.straggler_delay, 0);
    ASSERT_EQ(parse({"--straggler", "exp:2", "--straggler", "1:20"}, &o),
              TRAIN_OPTS_RUN);
    EXPECT_EQ(o.straggler_exp, 0);
    EXPECT_EQ(o.straggler_rank, 1);
    ASSERT_EQ(parse({"--batch=16"}, &o), TRAIN_OPTS_RUN);
    EXPECT_EQ(o.batch, 16);
}

TEST(TrainOpts, HelpExitsCleanly)
{
    train_opts_t o;
    EXPECT_EQ(parse({"--help"}, &o), TRAIN_OPTS_EXIT);
    testing::internal::CaptureStdout();
    train_opts_usage(stdout);
    std::string usage = testing::internal::GetCapturedStdout();
    for (const char *opt : {"--model", "--hidden", "--epochs", "--batch",
                            "--lr", "--momentum", "--wd", "--schedule",
                            "--seed", "--sync", "--target-acc", "--json",
                            "--csv", "dense"}) {
        EXPECT_NE(usage.find(opt), std::string::npos) << opt;
    }
}

TEST(TrainOpts, BadValuesAreClearErrors)
{
    struct Case {
        std::vector<const char *> args;
        const char *mentions;
    } cases[] = {
        {{"--model", "rnn"}, "--model rnn"},
        {{"--hidden", "10,,3"}, "--hidden"},
        {{"--hidden", "0"}, "--hidden"},
        {{"--hidden", "1,2,3,4,5,6,7,8,9"}, "--hidden"},
        {{"--channels", "none"}, "--channels"},
        {{"--kernel", "4"}, "odd"},
        {{"--epochs", "0"}, "--epochs 0"},
        {{"--epochs", "3x"}, "--epochs 3x"},
        {{"--batch", "-1"}, "--batch -1"},
        {{"--batch", ""}, "--batch"},
        {{"--lr", "0"}, "--lr 0"},
        {{"--lr", "nan"}, "--lr nan"},
        {{"--momentum", "1"}, "--momentum 1"},
        {{"--wd", "-0.1"}, "--wd"},
        {{"--schedule", "linear"}, "--schedule linear"},
        {{"--lr-step", "0"}, "--lr-step"},
        {{"--seed", "-3"}, "--seed"},
        {{"--target-acc", "1.5"}, "--target-acc"},
        {{"--progress", "fancy"}, "--progress"},
        {{"--json", ""}, "--json"},
        {{"--straggler", "1"}, "--straggler 1"},
        {{"--straggler", "x:5"}, "--straggler x:5"},
        {{"--straggler", "1:-5"}, "--straggler 1:-5"},
        {{"--straggler", "1:5ms"}, "--straggler 1:5ms"},
        {{"--straggler", "exp:"}, "--straggler exp:: expected exp:M"},
        {{"--straggler", "exp:0"}, "--straggler exp:0: expected exp:M"},
        {{"--straggler", "exp:-1"}, "--straggler exp:-1"},
        {{"--straggler", "exp:1001"}, "(0, 1000]"},
        {{"--straggler", "exp:nan"}, "--straggler exp:nan"},
        {{"--straggler", "exp:2x"}, "--straggler exp:2x"},
        {{"--straggler", "exq:2"}, "--straggler exq:2"},
        {{"--eval-every", "-1"}, "--eval-every"},
        {{"--bogus"}, "--bogus"},
        {{"--epochs"}, "--epochs"},
        {{"stray"}, "stray"},
    };
    for (const auto &c : cases) {
        std::vector<std::string> store = {"gcx-train"};
        for (const char *a : c.args) {
            store.push_back(a);
        }
        std::vector<char *> argv;
        for (auto &s : store) {
            argv.push_back(&s[0]);
        }
        argv.push_back(nullptr);
        train_opts_t o;
        train_opts_default(&o);
        testing::internal::CaptureStderr();
        int rc = train_opts_parse((int)store.size(), argv.data(), &o);
        std::string err = testing::internal::GetCapturedStderr();
        EXPECT_EQ(rc, TRAIN_OPTS_ERROR) << c.mentions;
        EXPECT_NE(err.find(c.mentions), std::string::npos)
            << "expected '" << c.mentions << "' in: " << err;
    }
}

TEST(TrainOpts, WidthLists)
{
    int w[4], n = -1;
    EXPECT_EQ(train_parse_widths("3", w, 4, &n), 0);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(train_parse_widths("1,65536", w, 4, &n), 0);
    EXPECT_EQ(w[1], 65536);
    EXPECT_EQ(train_parse_widths("65537", w, 4, &n), -1);
    EXPECT_EQ(train_parse_widths("1,2,3,4,5", w, 4, &n), -1);
    EXPECT_EQ(train_parse_widths("2,", w, 4, &n), -1);
    EXPECT_EQ(train_parse_widths("", w, 4, &n), -1);
}
