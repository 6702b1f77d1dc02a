/*
 * startup_common.c - stamps, record files and rank 0's line for the
 * start-up drivers (startup_common.h). Plain POSIX: no gcx, no MPI, so
 * both drivers link it as is.
 */
#include "startup_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double startup_clock(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double startup_wall(void)
{
    return startup_clock(CLOCK_REALTIME);
}

double startup_exec_time(void)
{
    char   buf[1024], *p;
    FILE  *f = fopen("/proc/self/stat", "r");
    size_t n;
    int    field;
    double ticks = (double)sysconf(_SC_CLK_TCK), since_boot;

    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL || ticks <= 0) {
        return 0;
    }
    /* field 2 ends at ')'; starttime is field 22 */
    for (field = 2; field < 22 && p != NULL; ++field) {
        p = strchr(p + 1, ' ');
    }
    if (p == NULL) {
        return 0;
    }
    since_boot = strtod(p + 1, NULL) / ticks;
    return startup_wall() - (startup_clock(CLOCK_BOOTTIME) - since_boot);
}

int startup_opts(int argc, char **argv, const char **dir_p, double *wait_p)
{
    int i;

    for (i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            *dir_p = argv[++i];
        } else if (!strcmp(argv[i], "--wait") && i + 1 < argc) {
            *wait_p = atof(argv[++i]);
        } else {
            break;
        }
    }
    if (i < argc || *dir_p == NULL) {
        fprintf(stderr, "usage: %s --dir DIR [--wait S] (under a launcher)\n",
                argv[0]);
        return 2;
    }
    return 0;
}

static int startup_write(const char *dir, int rank, const startup_rec_t *rec)
{
    char  tmp[4096], path[4096];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s/.r%d.tmp", dir, rank);
    snprintf(path, sizeof(path), "%s/r%d", dir, rank);
    f = fopen(tmp, "w");
    if (f == NULL) {
        return -1;
    }
    fprintf(f, "%.9f %.9f %.9f %.9f %.9f %ld\n", rec->start, rec->exec,
            rec->created, rec->destroy_begin, rec->destroy_end,
            rec->maxrss_kb);
    if (fclose(f) != 0) {
        return -1;
    }
    return rename(tmp, path);
}

static int startup_read(const char *dir, int rank, startup_rec_t *rec)
{
    char  path[4096];
    FILE *f;
    int   n;

    snprintf(path, sizeof(path), "%s/r%d", dir, rank);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    n = fscanf(f, "%lf %lf %lf %lf %lf %ld", &rec->start, &rec->exec,
               &rec->created, &rec->destroy_begin, &rec->destroy_end,
               &rec->maxrss_kb);
    fclose(f);
    return n == 6 ? 0 : -1;
}

int startup_report(const char *name, const char *dir, int rank, int size,
                   startup_rec_t *rec, double wait_s)
{
    struct rusage  ru;
    startup_rec_t *all;
    double         deadline, create = 0, first = 0, last_created = 0;
    double         destroy = 0, last_start = 0, load = -1, t0 = -1;
    long           rss = 0;
    int            r, have = 0;
    const char    *t0_env = getenv("STARTUP_T0");

    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        rec->maxrss_kb = ru.ru_maxrss; /* kilobytes on Linux */
    }
    if (startup_write(dir, rank, rec) != 0) {
        fprintf(stderr, "%s rank %d: cannot write its record under %s\n",
                name, rank, dir);
        return 1;
    }
    if (rank != 0) {
        return 0;
    }
    all = calloc((size_t)size, sizeof(*all));
    if (all == NULL) {
        return 1;
    }
    deadline = startup_wall() + wait_s;
    for (r = 0; r < size; ++r) {
        while (startup_read(dir, r, &all[r]) != 0) {
            if (startup_wall() > deadline) {
                break;
            }
            usleep(10000);
        }
    }
    for (r = 0; r < size; ++r) {
        const startup_rec_t *a = &all[r];

        if (a->start == 0) {
            continue; /* no record within --wait */
        }
        if (have++ == 0) {
            first = last_start = a->start;
        }
        first      = a->start < first ? a->start : first;
        last_start = a->start > last_start ? a->start : last_start;
        if (a->created - a->start > create) {
            create = a->created - a->start;
        }
        if (a->created > last_created) {
            last_created = a->created;
        }
        if (a->destroy_end - a->destroy_begin > destroy) {
            destroy = a->destroy_end - a->destroy_begin;
        }
        if (a->exec > 0 && a->start - a->exec > load) {
            load = a->start - a->exec;
        }
        rss = a->maxrss_kb > rss ? a->maxrss_kb : rss;
    }
    if (t0_env != NULL) {
        t0 = atof(t0_env);
    }
    if (have < size) {
        fprintf(stderr, "%s: only %d of %d ranks wrote a record within "
                "%g s\n", name, have, size, wait_s);
    }
    printf("STARTUP %s ranks %d create_s %.4f create_from_first_s %.4f "
           "destroy_s %.4f rss_kb %ld start_spread_s %.4f load_s %.3f "
           "first_start_s %.4f last_start_s %.4f records %d\n",
           name, size, create, last_created - first, destroy, rss,
           last_start - first, load, t0 > 0 ? first - t0 : -1.0,
           t0 > 0 ? last_start - t0 : -1.0, have);
    fflush(stdout);
    free(all);
    return have == size ? 0 : 1;
}
