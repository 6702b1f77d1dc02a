/*
 * report.c - progress line, CSV trace and JSON summary (rank 0 only).
 *
 * On a terminal the progress is one line redrawn in place at most 5 times a
 * second; otherwise a plain line every --log-every steps (default about 10 per
 * epoch) so logs stay readable. Every epoch ends with its own line either
 * way. A CSV row is held back one step so that the epoch's test accuracy can
 * be written into the row of the epoch's last step. Cost: one fprintf per
 * step to the CSV; nothing per element.
 */
#include "report.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

gcx_status_t train_report_open(train_report_t *rep, const train_opts_t *opts,
                               int rank, long steps_per_epoch, FILE *out)
{
    memset(rep, 0, sizeof(*rep));
    rep->active = rank == 0;
    rep->out = out;
    if (!rep->active) {
        return GCX_OK;
    }
    rep->mode = opts->progress;
    if (rep->mode == TRAIN_PROGRESS_AUTO) {
        rep->mode =
            isatty(fileno(out)) ? TRAIN_PROGRESS_TTY : TRAIN_PROGRESS_PLAIN;
    }
    rep->log_every = opts->log_every;
    if (rep->log_every <= 0) {
        rep->log_every = steps_per_epoch >= 10 ? steps_per_epoch / 10 : 1;
    }
    if (opts->csv[0] != '\0') {
        rep->csv = fopen(opts->csv, "w");
        if (rep->csv == NULL) {
            train_error("cannot write the CSV trace %s: %s", opts->csv,
                        strerror(errno));
            return GCX_ERR_IO;
        }
        fprintf(rep->csv, "%s\n", TRAIN_CSV_HEADER);
    }
    return GCX_OK;
}

static void report_csv_row(train_report_t *rep, double test_acc)
{
    const train_step_rec_t *r = &rep->pending;
    char acc[32] = "";

    if (!isnan(test_acc)) {
        snprintf(acc, sizeof(acc), "%.4f", test_acc);
    }
    fprintf(rep->csv,
            "%ld,%d,%.4f,%.6g,%.5f,%.4f,%s,%.4g,%.4g,%.0f,%.0f,%.0f,%.6f,"
            "%.6f,%.6f\n",
            r->step, r->epoch, r->time_s, r->lr, r->loss, r->acc, acc,
            r->sync.cf, r->sync.gain, r->sync.bytes_sent, r->sync.dense_bytes,
            r->bytes_total, r->step_s, r->compute_s, r->sync_s);
    rep->have_pending = 0;
}

/* "12.3 MB" style byte count. */
static const char *report_bytes(double b, char *buf, size_t len)
{
    static const char *unit[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;

    while (b >= 1000 && u < 4) {
        b /= 1000;
        u++;
    }
    snprintf(buf, len, "%.1f %s", b, unit[u]);
    return buf;
}

void train_report_step(train_report_t *rep, const train_step_rec_t *rec)
{
    char bytes[32];
    double now;
    int draw;

    if (!rep->active) {
        return;
    }
    if (rep->csv != NULL) {
        if (rep->have_pending) {
            report_csv_row(rep, NAN);
        }
        rep->pending = *rec;
        rep->have_pending = 1;
    }
    switch (rep->mode) {
    case TRAIN_PROGRESS_TTY:
        now = train_now();
        draw = now - rep->last_draw >= 0.2 ||
               rec->epoch_step + 1 == rec->steps_per_epoch;
        if (!draw) {
            return;
        }
        rep->last_draw = now;
        fprintf(rep->out,
                "\r\033[Kepoch %d step %ld/%ld loss %.4f acc %.4f CF %.1f "
                "gain %.3f step %.1f ms sent %s",
                rec->epoch, rec->epoch_step + 1, rec->steps_per_epoch,
                rec->loss, rec->acc, rec->sync.cf, rec->sync.gain,
                1e3 * rec->step_s,
                report_bytes(rec->bytes_total, bytes, sizeof(bytes)));
        fflush(rep->out);
        rep->line_open = 1;
        return;
    case TRAIN_PROGRESS_PLAIN:
        if ((rec->step + 1) % rep->log_every != 0) {
            return;
        }
        fprintf(rep->out,
                "epoch %d step %ld/%ld (global %ld) loss %.4f acc %.4f "
                "CF %.1f gain %.3f step %.1f ms (sync %.1f ms) lr %.4g "
                "sent %s\n",
                rec->epoch, rec->epoch_step + 1, rec->steps_per_epoch,
                rec->step + 1, rec->loss, rec->acc, rec->sync.cf,
                rec->sync.gain, 1e3 * rec->step_s, 1e3 * rec->sync_s, rec->lr,
                report_bytes(rec->bytes_total, bytes, sizeof(bytes)));
        fflush(rep->out);
        return;
    case TRAIN_PROGRESS_AUTO:
    case TRAIN_PROGRESS_NONE:
        return;
    }
}

/*
 * A test accuracy measured after the held-back step: write that row with
 * it (and flush), and end an open progress line so a line can follow.
 */
static void report_test_acc(train_report_t *rep, double test_acc)
{
    if (rep->csv != NULL && rep->have_pending) {
        report_csv_row(rep, test_acc);
        fflush(rep->csv);
    }
    if (rep->line_open) {
        fputc('\n', rep->out);
        rep->line_open = 0;
    }
}

void train_report_test(train_report_t *rep, const train_step_rec_t *rec,
                       double test_acc)
{
    if (!rep->active) {
        return;
    }
    report_test_acc(rep, test_acc);
    fprintf(rep->out, "epoch %d step %ld (global %ld): test acc %.4f | %.1f s\n",
            rec->epoch, rec->epoch_step + 1, rec->step + 1, test_acc,
            rec->time_s);
    fflush(rep->out);
}

void train_report_epoch(train_report_t *rep, const train_epoch_rec_t *rec,
                        int epochs)
{
    if (!rep->active) {
        return;
    }
    report_test_acc(rep, rec->test_acc);
    fprintf(rep->out,
            "epoch %d/%d done: train loss %.4f acc %.4f | test loss %.4f "
            "acc %.4f | %.1f s\n",
            rec->epoch, epochs, rec->train_loss, rec->train_acc, rec->test_loss,
            rec->test_acc, rec->time_s);
    fflush(rep->out);
}

void train_report_close(train_report_t *rep)
{
    if (rep->active && rep->line_open) {
        fputc('\n', rep->out);
        rep->line_open = 0;
    }
    if (rep->csv != NULL) {
        if (rep->have_pending) {
            report_csv_row(rep, NAN);
        }
        fclose(rep->csv);
        rep->csv = NULL;
    }
}

/* A JSON string literal. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

/* A JSON number, or null for NaN/Inf (JSON has neither). */
static void json_num(FILE *f, double v)
{
    if (isfinite(v)) {
        fprintf(f, "%.10g", v);
    } else {
        fputs("null", f);
    }
}

void train_report_json_stream(FILE *f, const train_opts_t *o,
                              const train_result_t *r)
{
    int i;

    fputs("{\n  \"model\": ", f);
    json_str(f, o->model.kind);
    fputs(",\n  \"model_desc\": ", f);
    json_str(f, r->model_desc);
    fprintf(f, ",\n  \"params\": %zu,\n  \"sync\": ", r->nparams);
    json_str(f, o->sync);
    fprintf(f,
            ",\n  \"world_size\": %d,\n  \"workers\": %d,\n"
            "  \"batch_per_rank\": %d,\n"
            "  \"global_batch\": %d,\n  \"epochs_planned\": %d,\n"
            "  \"epochs\": %d,\n  \"steps\": %ld,\n",
            r->world, r->workers, o->batch, o->batch * r->workers, o->epochs,
            r->nepochs, r->steps);
    fputs("  \"lr\": ", f);
    json_num(f, o->lr);
    fputs(", \"momentum\": ", f);
    json_num(f, o->momentum);
    fputs(", \"weight_decay\": ", f);
    json_num(f, o->weight_decay);
    fputs(", \"schedule\": ", f);
    json_str(f, train_sched_name(o->schedule));
    fputs(", \"warmup_epochs\": ", f);
    json_num(f, o->warmup_epochs);
    fprintf(f, ", \"seed\": %llu,\n", (unsigned long long)o->seed);
    fputs("  \"final_test_acc\": ", f);
    json_num(f, r->final_test_acc);
    fputs(",\n  \"best_test_acc\": ", f);
    json_num(f, r->best_test_acc);
    fputs(",\n  \"target_acc\": ", f);
    if (o->target_acc > 0) {
        json_num(f, o->target_acc);
    } else {
        fputs("null", f);
    }
    fputs(",\n  \"time_to_target_s\": ", f);
    if (r->time_to_target_s >= 0) {
        json_num(f, r->time_to_target_s);
    } else {
        fputs("null", f);
    }
    fprintf(f, ",\n  \"target_epoch\": %d", r->target_epoch);
    fputs(",\n  \"total_time_s\": ", f);
    json_num(f, r->total_time_s);
    fputs(",\n  \"eval_time_s\": ", f);
    json_num(f, r->eval_time_s);
    fprintf(f, ",\n  \"eval_every\": %ld", o->eval_every);
    fprintf(f, ",\n  \"straggler_rank\": %d", o->straggler_rank);
    fputs(",\n  \"straggler_delay_s\": ", f);
    json_num(f, o->straggler_delay);
    fputs(",\n  \"straggler_exp\": ", f);
    json_num(f, o->straggler_exp);
    fputs(",\n  \"bytes_sent\": ", f);
    json_num(f, r->bytes_sent_all);
    fputs(",\n  \"dense_bytes\": ", f);
    json_num(f, r->dense_bytes_all);
    fputs(",\n  \"bytes_sent_rank0\": ", f);
    json_num(f, r->bytes_sent);
    fputs(",\n  \"dense_bytes_rank0\": ", f);
    json_num(f, r->dense_bytes);
    fprintf(f, ",\n  \"weight_checks\": %d,\n  \"per_epoch\": [",
            r->weight_checks);
    for (i = 0; i < r->nepochs; i++) {
        const train_epoch_rec_t *e = &r->epochs[i];

        fprintf(f, "%s\n    {\"epoch\": %d, \"steps\": %ld, \"time_s\": ",
                i ? "," : "", e->epoch, e->steps);
        json_num(f, e->time_s);
        fputs(", \"train_loss\": ", f);
        json_num(f, e->train_loss);
        fputs(", \"train_acc\": ", f);
        json_num(f, e->train_acc);
        fputs(", \"test_loss\": ", f);
        json_num(f, e->test_loss);
        fputs(", \"test_acc\": ", f);
        json_num(f, e->test_acc);
        fputc('}', f);
    }
    fputs(r->nepochs ? "\n  ]\n}\n" : "]\n}\n", f);
}

gcx_status_t train_report_json(const char *path, const train_opts_t *opts,
                               const train_result_t *res)
{
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        train_error("cannot write the JSON summary %s: %s", path,
                    strerror(errno));
        return GCX_ERR_IO;
    }
    train_report_json_stream(f, opts, res);
    if (fclose(f) != 0) {
        train_error("writing the JSON summary %s failed: %s", path,
                    strerror(errno));
        return GCX_ERR_IO;
    }
    return GCX_OK;
}
