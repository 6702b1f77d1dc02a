/*
 * opts.c - command-line parsing with getopt_long and strict number checks:
 * every value is range-checked and every error names the option.
 */
#include "opts.h"
#include "data.h"
#include "sync/sync.h"
#include "util.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

void train_opts_default(train_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    snprintf(opts->model.kind, sizeof(opts->model.kind), "mlp");
    opts->model.nhidden = -1; /* model's default, set after parsing */
    opts->model.nchannels = 2;
    opts->model.channels[0] = 16;
    opts->model.channels[1] = 32;
    opts->model.ksize = 5;
    opts->epochs = 10;
    opts->batch = 64;
    opts->lr = 0.05;
    opts->momentum = 0.9;
    opts->weight_decay = 1e-4;
    opts->schedule = TRAIN_SCHED_COSINE;
    opts->warmup_epochs = 0.5;
    opts->lr_step_epochs = 5;
    opts->lr_gamma = 0.1;
    opts->min_lr = 0;
    opts->seed = 1;
    snprintf(opts->sync, sizeof(opts->sync), "dense");
    opts->target_acc = 0.85;
    opts->check_every = 200;
    opts->straggler_rank = -1;
    opts->progress = TRAIN_PROGRESS_AUTO;
}

void train_opts_usage(FILE *out)
{
    train_opts_t d;

    train_opts_default(&d);
    fprintf(out,
            "Usage: gcx-train [options]\n"
            "Data-parallel training on Fashion-MNIST over gcx. Run one "
            "process per rank,\n"
            "e.g. gcxrun -n 4 -- gcx-train ...; data from GCX_DATA_DIR "
            "(default %s).\n\n"
            "Model:\n"
            "  --model mlp|cnn        model (default %s)\n"
            "  --hidden W1,W2,...     hidden FC widths, or 'none' (mlp "
            "default 1024,1024;\n"
            "                         cnn default 128)\n"
            "  --channels C1,C2,...   cnn filters per conv block (default "
            "16,32)\n"
            "  --kernel K             cnn kernel size, odd (default %d)\n"
            "Training:\n"
            "  --epochs E             epochs, each one pass over the "
            "training data (default %d)\n"
            "  --batch B              samples per rank per step; the global "
            "batch is B x ranks\n"
            "                         (default %d)\n"
            "  --lr LR                base learning rate (default %g)\n"
            "  --momentum M           SGD momentum in [0, 1) (default %g)\n"
            "  --wd WD                weight decay (default %g)\n"
            "  --schedule S           const|step|cosine (default %s)\n"
            "  --warmup EPOCHS        linear warmup (default %g)\n"
            "  --lr-step EPOCHS       step schedule: decay interval (default "
            "%g)\n"
            "  --lr-gamma G           step schedule: decay factor (default "
            "%g)\n"
            "  --min-lr LR            cosine schedule: final rate (default "
            "%g)\n"
            "  --seed N               seed of init and data order (default "
            "%llu)\n"
            "  --max-steps N          stop after N steps (default: no "
            "limit)\n"
            "  --straggler R:MS       rank R sleeps MS milliseconds in every "
            "step it computes\n"
            "                         a gradient (a slow worker; default: "
            "none)\n"
            "  --straggler exp:M      every worker sleeps Exp(mean M x the "
            "compute time) after\n"
            "                         each gradient it computes, drawn from "
            "(seed, step, worker,\n"
            "                         part): random stragglers (a coded "
            "mode's master=1 rank\n"
            "                         computes nothing and never sleeps)\n"
            "Synchronisation:\n"
            "  --sync MODE[:k=v,...]  how gradients are combined (default "
            "%s);\n"
            "                         coded modes with master=1: the root "
            "decodes only and\n"
            "                         the other ranks are the workers, "
            "global batch\n"
            "                         (ranks - 1) x --batch:\n",
            TRAIN_DATA_DIR_HELP, d.model.kind, d.model.ksize, d.epochs, d.batch,
            d.lr, d.momentum, d.weight_decay, train_sched_name(d.schedule),
            d.warmup_epochs, d.lr_step_epochs, d.lr_gamma, d.min_lr,
            (unsigned long long)d.seed, d.sync);
    train_sync_list(out);
    fprintf(out,
            "  --check-every N        verify every N steps that all ranks "
            "hold identical\n"
            "                         weights; 0: at epoch ends only "
            "(default %ld)\n"
            "Output:\n"
            "  --eval-every N         also evaluate on the test set every N "
            "steps (default: at\n"
            "                         epoch ends only); evaluation time is "
            "not training time\n"
            "  --target-acc A         report the time to test accuracy A "
            "(default %g; 0: off)\n"
            "  --stop-at-target       stop once the target is reached\n"
            "  --json FILE            JSON summary (rank 0)\n"
            "  --csv FILE             CSV trace, one row per step (rank 0)\n"
            "  --progress P           auto|tty|plain|none (default auto: "
            "tty on a terminal)\n"
            "  --log-every N          steps between plain progress lines "
            "(default: 10 per epoch)\n"
            "Checkpoints:\n"
            "  --save PATH            at the end of the run, every rank "
            "writes PATH.<rank>:\n"
            "                         weights, optimizer, data position and "
            "the sync mode's\n"
            "                         state (residuals, GraVAC controller)\n"
            "  --resume PATH          continue from PATH.<rank> (same "
            "ranks, model, batch,\n"
            "                         seed and --sync); the run takes the "
            "same decisions\n"
            "                         as one that never stopped\n"
            "  --help                 this text\n",
            d.check_every, d.target_acc);
}

int train_parse_widths(const char *text, int *widths, int max, int *count_p)
{
    const char *p = text;
    int n = 0;

    if (strcmp(text, "none") == 0) {
        *count_p = 0;
        return 0;
    }
    for (;;) {
        char *end;
        long v;

        errno = 0;
        v = strtol(p, &end, 10);
        if (errno != 0 || end == p || v < 1 || v > 65536 || n == max ||
            (*end != ',' && *end != '\0')) {
            return -1;
        }
        widths[n++] = (int)v;
        if (*end == '\0') {
            break;
        }
        p = end + 1;
    }
    *count_p = n;
    return 0;
}

static int opt_double(const char *name, const char *arg, double min, double max,
                      double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(arg, &end);
    if (errno != 0 || end == arg || *end != '\0' || !(v >= min) ||
        !(v <= max)) {
        train_error("--%s %s: expected a number in [%g, %g]", name, arg, min,
                    max);
        return -1;
    }
    *out = v;
    return 0;
}

static int opt_long(const char *name, const char *arg, long min, long max,
                    long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(arg, &end, 10);
    if (errno != 0 || end == arg || *end != '\0' || v < min || v > max) {
        train_error("--%s %s: expected an integer in [%ld, %ld]", name, arg,
                    min, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int opt_copy(const char *name, const char *arg, char *dst, size_t len)
{
    if (strlen(arg) >= len || arg[0] == '\0') {
        train_error("--%s: value empty or longer than %zu characters", name,
                    len - 1);
        return -1;
    }
    memcpy(dst, arg, strlen(arg) + 1);
    return 0;
}

enum {
    OPT_MODEL = 256,
    OPT_HIDDEN,
    OPT_CHANNELS,
    OPT_KERNEL,
    OPT_EPOCHS,
    OPT_BATCH,
    OPT_LR,
    OPT_MOMENTUM,
    OPT_WD,
    OPT_SCHEDULE,
    OPT_WARMUP,
    OPT_LR_STEP,
    OPT_LR_GAMMA,
    OPT_MIN_LR,
    OPT_SEED,
    OPT_MAX_STEPS,
    OPT_STRAGGLER,
    OPT_EVAL_EVERY,
    OPT_SYNC,
    OPT_CHECK_EVERY,
    OPT_TARGET,
    OPT_STOP,
    OPT_JSON,
    OPT_CSV,
    OPT_PROGRESS,
    OPT_LOG_EVERY,
    OPT_SAVE,
    OPT_RESUME,
    OPT_HELP,
};

static const struct option train_long_opts[] = {
    {"model", required_argument, NULL, OPT_MODEL},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"channels", required_argument, NULL, OPT_CHANNELS},
    {"kernel", required_argument, NULL, OPT_KERNEL},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"lr", required_argument, NULL, OPT_LR},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"wd", required_argument, NULL, OPT_WD},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"lr-step", required_argument, NULL, OPT_LR_STEP},
    {"lr-gamma", required_argument, NULL, OPT_LR_GAMMA},
    {"min-lr", required_argument, NULL, OPT_MIN_LR},
    {"seed", required_argument, NULL, OPT_SEED},
    {"max-steps", required_argument, NULL, OPT_MAX_STEPS},
    {"straggler", required_argument, NULL, OPT_STRAGGLER},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
    {"sync", required_argument, NULL, OPT_SYNC},
    {"check-every", required_argument, NULL, OPT_CHECK_EVERY},
    {"target-acc", required_argument, NULL, OPT_TARGET},
    {"stop-at-target", no_argument, NULL, OPT_STOP},
    {"json", required_argument, NULL, OPT_JSON},
    {"csv", required_argument, NULL, OPT_CSV},
    {"progress", required_argument, NULL, OPT_PROGRESS},
    {"log-every", required_argument, NULL, OPT_LOG_EVERY},
    {"save", required_argument, NULL, OPT_SAVE},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/*
 * "R:MS": rank R sleeps MS ms per gradient step; "exp:M": every rank sleeps
 * an exponential time of mean M x the compute time of each gradient it
 * computes (the straggler model of the gradient coding papers). One form
 * replaces the other.
 */
static int opt_straggler(const char *arg, train_opts_t *o)
{
    const char *ms_text;
    char *end;
    long rank;
    double ms;

    if (strncmp(arg, "exp:", 4) == 0) {
        errno = 0;
        ms = strtod(arg + 4, &end);
        if (end == arg + 4 || *end != '\0' || errno != 0 ||
            !(ms > 0 && ms <= 1000)) {
            train_error("--straggler %s: expected exp:M with M, the mean "
                        "delay as a multiple of the compute time, in "
                        "(0, 1000]",
                        arg);
            return -1;
        }
        o->straggler_exp = ms;
        o->straggler_rank = -1;
        o->straggler_delay = 0;
        return 0;
    }
    errno = 0;
    rank = strtol(arg, &end, 10);
    if (end == arg || *end != ':' || rank < 0 || rank > 65535 || errno != 0) {
        goto bad;
    }
    ms_text = end + 1;
    ms = strtod(ms_text, &end);
    if (end == ms_text || *end != '\0' || !(ms >= 0 && ms <= 1e6)) {
        goto bad;
    }
    o->straggler_rank = (int)rank;
    o->straggler_delay = ms * 1e-3;
    o->straggler_exp = 0;
    return 0;
bad:
    train_error("--straggler %s: expected RANK:MS with RANK in [0, 65535] "
                "and MS in [0, 1e6], or exp:M",
                arg);
    return -1;
}

/* Apply one option; 0 on success, -1 after printing an error. */
static int train_opts_apply(int opt, const char *arg, train_opts_t *o)
{
    long l = 0;
    int k;

    switch (opt) {
    case OPT_MODEL:
        if (strcmp(arg, "mlp") != 0 && strcmp(arg, "cnn") != 0) {
            train_error("--model %s: expected mlp or cnn", arg);
            return -1;
        }
        snprintf(o->model.kind, sizeof(o->model.kind), "%s", arg);
        return 0;
    case OPT_HIDDEN:
        if (train_parse_widths(arg, o->model.hidden, TRAIN_MODEL_MAX_WIDTHS,
                               &o->model.nhidden) != 0) {
            train_error("--hidden %s: expected 'none' or up to %d widths in "
                        "[1, 65536] separated by commas",
                        arg, TRAIN_MODEL_MAX_WIDTHS);
            return -1;
        }
        return 0;
    case OPT_CHANNELS:
        if (strcmp(arg, "none") == 0 ||
            train_parse_widths(arg, o->model.channels, TRAIN_MODEL_MAX_WIDTHS,
                               &o->model.nchannels) != 0) {
            train_error("--channels %s: expected up to %d filter counts in "
                        "[1, 65536] separated by commas",
                        arg, TRAIN_MODEL_MAX_WIDTHS);
            return -1;
        }
        return 0;
    case OPT_KERNEL:
        if (opt_long("kernel", arg, 1, 15, &l) != 0) {
            return -1;
        }
        if (l % 2 == 0) {
            train_error("--kernel %s: must be odd (same padding)", arg);
            return -1;
        }
        o->model.ksize = (int)l;
        return 0;
    case OPT_EPOCHS:
        k = opt_long("epochs", arg, 1, 100000, &l);
        o->epochs = (int)l;
        return k;
    case OPT_BATCH:
        k = opt_long("batch", arg, 1, 65536, &l);
        o->batch = (int)l;
        return k;
    case OPT_LR:
        if (opt_double("lr", arg, 0, 100, &o->lr) != 0) {
            return -1;
        }
        if (o->lr == 0) {
            train_error("--lr %s: must be positive", arg);
            return -1;
        }
        return 0;
    case OPT_MOMENTUM:
        if (opt_double("momentum", arg, 0, 1, &o->momentum) != 0) {
            return -1;
        }
        if (o->momentum >= 1) {
            train_error("--momentum %s: must be below 1", arg);
            return -1;
        }
        return 0;
    case OPT_WD:
        return opt_double("wd", arg, 0, 1, &o->weight_decay);
    case OPT_SCHEDULE:
        k = train_sched_parse(arg);
        if (k < 0) {
            train_error("--schedule %s: expected const, step or cosine", arg);
            return -1;
        }
        o->schedule = (train_sched_kind_t)k;
        return 0;
    case OPT_WARMUP:
        return opt_double("warmup", arg, 0, 1e6, &o->warmup_epochs);
    case OPT_LR_STEP:
        if (opt_double("lr-step", arg, 0, 1e6, &o->lr_step_epochs) != 0) {
            return -1;
        }
        if (o->lr_step_epochs == 0) {
            train_error("--lr-step %s: must be positive", arg);
            return -1;
        }
        return 0;
    case OPT_LR_GAMMA:
        return opt_double("lr-gamma", arg, 0, 1, &o->lr_gamma);
    case OPT_MIN_LR:
        return opt_double("min-lr", arg, 0, 100, &o->min_lr);
    case OPT_SEED:
        k = opt_long("seed", arg, 0, LONG_MAX, &l);
        o->seed = (uint64_t)l;
        return k;
    case OPT_MAX_STEPS:
        return opt_long("max-steps", arg, 0, LONG_MAX, &o->max_steps);
    case OPT_STRAGGLER:
        return opt_straggler(arg, o);
    case OPT_EVAL_EVERY:
        return opt_long("eval-every", arg, 0, LONG_MAX, &o->eval_every);
    case OPT_SYNC:
        return opt_copy("sync", arg, o->sync, sizeof(o->sync));
    case OPT_CHECK_EVERY:
        return opt_long("check-every", arg, 0, LONG_MAX, &o->check_every);
    case OPT_TARGET:
        return opt_double("target-acc", arg, 0, 1, &o->target_acc);
    case OPT_STOP:
        o->stop_at_target = 1;
        return 0;
    case OPT_JSON:
        return opt_copy("json", arg, o->json, sizeof(o->json));
    case OPT_CSV:
        return opt_copy("csv", arg, o->csv, sizeof(o->csv));
    case OPT_SAVE:
        return opt_copy("save", arg, o->save, sizeof(o->save));
    case OPT_RESUME:
        return opt_copy("resume", arg, o->resume, sizeof(o->resume));
    case OPT_PROGRESS:
        if (strcmp(arg, "auto") == 0) {
            o->progress = TRAIN_PROGRESS_AUTO;
        } else if (strcmp(arg, "tty") == 0) {
            o->progress = TRAIN_PROGRESS_TTY;
        } else if (strcmp(arg, "plain") == 0) {
            o->progress = TRAIN_PROGRESS_PLAIN;
        } else if (strcmp(arg, "none") == 0) {
            o->progress = TRAIN_PROGRESS_NONE;
        } else {
            train_error("--progress %s: expected auto, tty, plain or none",
                        arg);
            return -1;
        }
        return 0;
    case OPT_LOG_EVERY:
        return opt_long("log-every", arg, 0, LONG_MAX, &o->log_every);
    }
    return -1;
}

int train_opts_parse(int argc, char **argv, train_opts_t *opts)
{
    int opt;

    optind = 0; /* GNU: full re-initialisation, so tests may parse again */
    opterr = 0;
    for (;;) {
        int prev = optind ? optind : 1;

        opt = getopt_long(argc, argv, "+", train_long_opts, NULL);
        if (opt == -1) {
            break;
        }
        if (opt == '?' || opt == ':') {
            if (optopt != 0) {
                train_error("option '%s' needs a value (see --help)",
                            argv[prev]);
            } else {
                train_error("unknown option '%s' (see --help)", argv[prev]);
            }
            return TRAIN_OPTS_ERROR;
        }
        if (opt == OPT_HELP) {
            train_opts_usage(stdout);
            return TRAIN_OPTS_EXIT;
        }
        if (train_opts_apply(opt, optarg, opts) != 0) {
            return TRAIN_OPTS_ERROR;
        }
    }
    if (optind < argc) {
        train_error("unexpected argument '%s' (options start with --; see "
                    "--help)",
                    argv[optind]);
        return TRAIN_OPTS_ERROR;
    }
    if (opts->model.nhidden < 0) {
        if (strcmp(opts->model.kind, "mlp") == 0) {
            opts->model.nhidden = 2;
            opts->model.hidden[0] = 1024;
            opts->model.hidden[1] = 1024;
        } else {
            opts->model.nhidden = 1;
            opts->model.hidden[0] = 128;
        }
    }
    if (strcmp(opts->model.kind, "cnn") == 0 && opts->model.nchannels == 0) {
        train_error("--model cnn needs at least one conv block (--channels)");
        return TRAIN_OPTS_ERROR;
    }
    return TRAIN_OPTS_RUN;
}
