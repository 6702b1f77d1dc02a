/*
 * config.c - the registry of GCX_* rows, their parsers and printers.
 *
 * Reading the configuration walks the table once (a getenv per row), so it
 * costs microseconds and happens at communicator creation, never on a
 * collective's path. Values are validated here, not where they are used:
 * a bad value fails the whole read with an error that names the variable,
 * the value and what is accepted.
 */
#include "config.h"
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const gcx_config_value_t gcx_config_log_levels[] = {
    {GCX_LOG_ERROR, "error", "errors only"},
    {GCX_LOG_WARN, "warn", "errors and warnings"},
    {GCX_LOG_INFO, "info", "+ one line per decision (algorithm, settling)"},
    {GCX_LOG_DEBUG, "debug", "+ one line per collective"},
    {GCX_LOG_TRACE, "trace", "+ one line per message"},
    {0, NULL, NULL}};

/* base's own rows */
static const gcx_config_entry_t gcx_config_base_rows[] = {
    {"LOG_LEVEL", GCX_CONFIG_ENUM, "warn",
     "Logging level; lines go to stderr prefixed with the rank",
     offsetof(struct gcx_config, log_level), 0, 0, gcx_config_log_levels},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_BASE, "base", gcx_config_base_rows)

/* ---- the registry ------------------------------------------------------- */

static gcx_config_rows_t *gcx_config_list; /* sorted by (layer, area) */

void gcx_config_register(gcx_config_rows_t *rows)
{
    gcx_config_rows_t **pos = &gcx_config_list;

    while (*pos != NULL &&
           ((*pos)->layer < rows->layer ||
            ((*pos)->layer == rows->layer &&
             strcmp((*pos)->area, rows->area) <= 0))) {
        pos = &(*pos)->next;
    }
    rows->next = *pos;
    *pos       = rows;
}

const gcx_config_rows_t *gcx_config_areas(void)
{
    return gcx_config_list;
}

size_t gcx_config_count(void)
{
    const gcx_config_rows_t *r;
    size_t                   n = 0;

    for (r = gcx_config_list; r != NULL; r = r->next) {
        n += r->count;
    }
    return n;
}

const gcx_config_entry_t *gcx_config_at(size_t index)
{
    const gcx_config_rows_t *r;

    for (r = gcx_config_list; r != NULL; r = r->next) {
        if (index < r->count) {
            return &r->rows[index];
        }
        index -= r->count;
    }
    return NULL;
}

/* every row of the table, in its order */
#define GCX_CONFIG_FOREACH(_r, _e)                                             \
    for ((_r) = gcx_config_list; (_r) != NULL; (_r) = (_r)->next)              \
        for ((_e) = (_r)->rows; (_e) < (_r)->rows + (_r)->count; ++(_e))

const char *gcx_config_value_name(const gcx_config_value_t *values, int id)
{
    for (; values->name != NULL; ++values) {
        if (values->id == id) {
            return values->name;
        }
    }
    return "?";
}

const gcx_config_value_t *gcx_config_value_find(const gcx_config_value_t *values,
                                                const char *name)
{
    for (; values->name != NULL; ++values) {
        if (!strcasecmp(name, values->name)) {
            return values;
        }
    }
    return NULL;
}

void gcx_config_value_list(const gcx_config_value_t *values, char *buf,
                           size_t buflen)
{
    size_t used = 0;
    int    i;

    buf[0] = '\0';
    for (i = 0; values[i].name != NULL && used < buflen; ++i) {
        used += (size_t)snprintf(buf + used, buflen - used, "%s%s",
                                 i ? "|" : "", values[i].name);
    }
}

static void *gcx_config_field(const gcx_config_entry_t *entry,
                              struct gcx_config *config)
{
    return (char *)config + entry->offset;
}

static const void *gcx_config_field_const(const gcx_config_entry_t *entry,
                                          const struct gcx_config *config)
{
    return (const char *)config + entry->offset;
}

void gcx_config_accepted(const gcx_config_entry_t *entry, char *buf,
                         size_t buflen)
{
    buf[0] = '\0';
    switch (entry->type) {
    case GCX_CONFIG_INT:
        snprintf(buf, buflen, "an integer in %.0f..%.0f", entry->min,
                 entry->max);
        break;
    case GCX_CONFIG_DOUBLE:
        snprintf(buf, buflen, "a number in %g..%g", entry->min, entry->max);
        break;
    case GCX_CONFIG_SIZE:
        snprintf(buf, buflen, "bytes in %.0f..%.0f, suffix K, M or G allowed",
                 entry->min, entry->max);
        break;
    case GCX_CONFIG_BOOL:
        snprintf(buf, buflen, "y|n (also yes/no, 1/0, true/false, on/off)");
        break;
    case GCX_CONFIG_STRING:
        snprintf(buf, buflen, "text of at most %d characters",
                 GCX_CONFIG_STRING_MAX - 1);
        break;
    case GCX_CONFIG_SECRET:
        snprintf(buf, buflen, "text of at most %d characters (a secret: "
                 "never printed)", GCX_CONFIG_STRING_MAX - 1);
        break;
    case GCX_CONFIG_ENUM:
        gcx_config_value_list(entry->values, buf, buflen);
        break;
    }
}

static gcx_status_t gcx_config_bad(const gcx_config_entry_t *entry,
                                   const char *value, const char *why)
{
    char accepted[256];

    gcx_config_accepted(entry, accepted, sizeof(accepted));
    gcx_error("invalid GCX_%s='%s': %s; accepted: %s", entry->name,
              entry->type == GCX_CONFIG_SECRET ? "(not shown)" : value, why,
              accepted);
    return GCX_ERR_INVALID;
}

static int gcx_config_parse_bool(const char *value, int *out)
{
    static const char *const yes[] = {"y", "yes", "1", "true", "on"};
    static const char *const no[]  = {"n", "no", "0", "false", "off"};
    size_t i;

    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); ++i) {
        if (!strcasecmp(value, yes[i])) {
            *out = 1;
            return 1;
        }
        if (!strcasecmp(value, no[i])) {
            *out = 0;
            return 1;
        }
    }
    return 0;
}

/* Parses a real number with an optional K/M/G (binary) suffix. */
static int gcx_config_parse_number(const char *value, int allow_suffix,
                                   double *out)
{
    char  *end;
    double v;

    errno = 0;
    v     = strtod(value, &end);
    if (end == value || errno != 0 || !isfinite(v)) {
        return 0;
    }
    if (allow_suffix && *end != '\0') {
        switch (toupper((unsigned char)*end)) {
        case 'K':
            v *= 1024.0;
            break;
        case 'M':
            v *= 1024.0 * 1024.0;
            break;
        case 'G':
            v *= 1024.0 * 1024.0 * 1024.0;
            break;
        default:
            return 0;
        }
        ++end;
        if (toupper((unsigned char)*end) == 'B') {
            ++end;
        }
    }
    *out = v;
    return *end == '\0';
}

gcx_status_t gcx_config_parse_entry(const gcx_config_entry_t *entry,
                                    const char *value,
                                    struct gcx_config *config)
{
    void                     *field = gcx_config_field(entry, config);
    const gcx_config_value_t *v;
    double                    number;
    int                       flag;

    switch (entry->type) {
    case GCX_CONFIG_INT:
    case GCX_CONFIG_DOUBLE:
    case GCX_CONFIG_SIZE:
        /* numbers: parse (sizes take K/M/G), integrality, range */
        if (!gcx_config_parse_number(value, entry->type == GCX_CONFIG_SIZE,
                                     &number) ||
            (entry->type != GCX_CONFIG_DOUBLE && number != floor(number))) {
            return gcx_config_bad(entry, value,
                                  entry->type == GCX_CONFIG_INT ? "not an integer" :
                                  entry->type == GCX_CONFIG_SIZE ? "not a size" :
                                                                   "not a number");
        }
        if (number < entry->min || number > entry->max) {
            return gcx_config_bad(entry, value, "out of range");
        }
        if (entry->type == GCX_CONFIG_INT) {
            *(int *)field = (int)number;
        } else if (entry->type == GCX_CONFIG_SIZE) {
            *(size_t *)field = (size_t)number;
        } else {
            *(double *)field = number;
        }
        return GCX_OK;
    case GCX_CONFIG_BOOL:
        if (!gcx_config_parse_bool(value, &flag)) {
            return gcx_config_bad(entry, value, "not a boolean");
        }
        *(int *)field = flag;
        return GCX_OK;
    case GCX_CONFIG_ENUM:
        v = gcx_config_value_find(entry->values, value);
        if (v == NULL) {
            return gcx_config_bad(entry, value, "unknown value");
        }
        *(int *)field = v->id;
        return GCX_OK;
    case GCX_CONFIG_STRING:
    case GCX_CONFIG_SECRET:
        if (strlen(value) >= GCX_CONFIG_STRING_MAX) {
            return gcx_config_bad(entry, value, "too long");
        }
        strcpy((char *)field, value);
        return GCX_OK;
    }
    return GCX_ERR_INVALID;
}

void gcx_config_defaults(struct gcx_config *config)
{
    const gcx_config_rows_t  *r;
    const gcx_config_entry_t *e;

    memset(config, 0, sizeof(*config));
    GCX_CONFIG_FOREACH(r, e) {
        gcx_status_t status = gcx_config_parse_entry(e, e->default_value,
                                                     config);
        (void)status; /* defaults are valid: checked by a unit test */
    }
}

const gcx_config_entry_t *gcx_config_find(const char *name)
{
    const gcx_config_rows_t  *r;
    const gcx_config_entry_t *e;

    if (!strncmp(name, "GCX_", 4)) {
        name += 4;
    }
    GCX_CONFIG_FOREACH(r, e) {
        if (!strcmp(e->name, name)) {
            return e;
        }
    }
    return NULL;
}

void gcx_config_format(const gcx_config_entry_t *entry,
                       const struct gcx_config *config, char *buf,
                       size_t buflen)
{
    const void *field = gcx_config_field_const(entry, config);
    size_t      size;

    switch (entry->type) {
    case GCX_CONFIG_INT:
        snprintf(buf, buflen, "%d", *(const int *)field);
        break;
    case GCX_CONFIG_DOUBLE:
        snprintf(buf, buflen, "%g", *(const double *)field);
        break;
    case GCX_CONFIG_SIZE:
        size = *(const size_t *)field;
        if (size != 0 && size % (1024 * 1024 * 1024) == 0) {
            snprintf(buf, buflen, "%zuG", size >> 30);
        } else if (size != 0 && size % (1024 * 1024) == 0) {
            snprintf(buf, buflen, "%zuM", size >> 20);
        } else if (size != 0 && size % 1024 == 0) {
            snprintf(buf, buflen, "%zuK", size >> 10);
        } else {
            snprintf(buf, buflen, "%zu", size);
        }
        break;
    case GCX_CONFIG_BOOL:
        snprintf(buf, buflen, "%s", *(const int *)field ? "y" : "n");
        break;
    case GCX_CONFIG_ENUM:
        snprintf(buf, buflen, "%s",
                 gcx_config_value_name(entry->values, *(const int *)field));
        break;
    case GCX_CONFIG_STRING:
    case GCX_CONFIG_SECRET:
        snprintf(buf, buflen, "%s", (const char *)field);
        break;
    }
}

void gcx_config_print(const struct gcx_config *config, FILE *stream)
{
    char                      value[GCX_CONFIG_STRING_MAX], accepted[256];
    const gcx_config_rows_t  *r;
    const gcx_config_entry_t *entry;

    GCX_CONFIG_FOREACH(r, entry) {
        gcx_config_format(entry, config, value, sizeof(value));
        gcx_config_accepted(entry, accepted, sizeof(accepted));
        fprintf(stream, "#\n# %s\n# accepted: %s; default: '%s'\n#\n",
                entry->doc, accepted, entry->default_value);
        if (entry->type == GCX_CONFIG_SECRET && value[0] != '\0') {
            fprintf(stream, "# GCX_%s is set (a secret: not shown)\n",
                    entry->name);
        } else {
            fprintf(stream, "GCX_%s=%s\n", entry->name, value);
        }
    }
}

/* A table cell: '|' would end the cell, so it is written escaped. */
static void gcx_config_print_cell(FILE *stream, const char *text)
{
    for (; *text != '\0'; ++text) {
        if (*text == '|') {
            fputc('\\', stream);
        }
        fputc(*text, stream);
    }
}

void gcx_config_print_markdown(FILE *stream)
{
    char                      accepted[256];
    const gcx_config_rows_t  *r;
    const gcx_config_entry_t *entry;

    fprintf(stream, "| Variable | Default | Accepted | Meaning |\n");
    fprintf(stream, "|---|---|---|---|\n");
    GCX_CONFIG_FOREACH(r, entry) {
        gcx_config_accepted(entry, accepted, sizeof(accepted));
        fprintf(stream, "| `GCX_%s` | `%s` | ", entry->name,
                entry->default_value);
        gcx_config_print_cell(stream, accepted);
        fputs(" | ", stream);
        gcx_config_print_cell(stream, entry->doc);
        fputs(" |\n", stream);
    }
}

/* ---- public API -------------------------------------------------------- */

gcx_status_t gcx_config_read(gcx_config_t **config_p)
{
    struct gcx_config        *config;
    gcx_status_t              status = GCX_OK;
    const gcx_config_rows_t  *r;
    const gcx_config_entry_t *e;

    if (config_p == NULL) {
        return GCX_ERR_INVALID;
    }
    config = malloc(sizeof(*config));
    if (config == NULL) {
        return GCX_ERR_NOMEM;
    }
    gcx_config_defaults(config);
    GCX_CONFIG_FOREACH(r, e) {
        char        envname[128];
        const char *value;

        snprintf(envname, sizeof(envname), "GCX_%s", e->name);
        value = getenv(envname);
        if (value != NULL) {
            gcx_status_t st = gcx_config_parse_entry(e, value, config);
            if (st != GCX_OK) {
                status = st; /* keep going: report every bad variable */
            }
        }
    }
    if (status != GCX_OK) {
        free(config);
        return status;
    }
    gcx_log_configure(config->log_level, -1);
    *config_p = config;
    return GCX_OK;
}

gcx_status_t gcx_config_set(gcx_config_t *config, const char *name,
                            const char *value)
{
    const gcx_config_entry_t *entry;
    struct gcx_config         tmp;
    gcx_status_t              status;

    if (config == NULL || name == NULL || value == NULL) {
        return GCX_ERR_INVALID;
    }
    entry = gcx_config_find(name);
    if (entry == NULL) {
        gcx_error("unknown configuration variable '%s' (see gcx-info)", name);
        return GCX_ERR_NOT_FOUND;
    }
    tmp    = *config; /* outputs set only on success */
    status = gcx_config_parse_entry(entry, value, &tmp);
    if (status == GCX_OK) {
        *config = tmp;
        if (entry->offset == offsetof(struct gcx_config, log_level)) {
            gcx_log_configure(config->log_level, -1);
        }
    }
    return status;
}

gcx_status_t gcx_config_get(const gcx_config_t *config, const char *name,
                            char *buf, size_t buflen)
{
    const gcx_config_entry_t *entry;
    char                      value[GCX_CONFIG_STRING_MAX];

    if (config == NULL || name == NULL || buf == NULL) {
        return GCX_ERR_INVALID;
    }
    entry = gcx_config_find(name);
    if (entry == NULL) {
        return GCX_ERR_NOT_FOUND;
    }
    gcx_config_format(entry, config, value, sizeof(value));
    if (strlen(value) >= buflen) {
        return GCX_ERR_RANGE;
    }
    strcpy(buf, value);
    return GCX_OK;
}

void gcx_config_release(gcx_config_t *config)
{
    free(config);
}
