/*
 * fuzz_config.c - libFuzzer target of the configuration parser
 * (src/base/config.c): the value of any GCX_* variable, as a user or a
 * launcher sets it in the environment.
 *
 * The first input byte picks a row of the one table (every area's rows are
 * linked in), the rest is the value, NUL-terminated as getenv() gives it.
 * An accepted value must print (gcx_config_format) and parse again: the
 * parser, the range checks and the printer are all exercised. Error lines
 * are silenced (level -1) so the fuzzer is not slowed by stderr; the
 * messages are still built. Cost per input: one parse, one print.
 */
#include "base/config.h"
#include "base/log.h"
#include "coll/coded/coded_int.h"
#include "core/bootstrap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gcx_config  config;
    static int                ready;
    const gcx_config_entry_t *entry;
    char                      value[2 * GCX_CONFIG_STRING_MAX];
    char                      printed[GCX_CONFIG_STRING_MAX];
    char                      accepted[256];
    char                      host[64];
    uint64_t                  set[GCX_WSET_WORDS(130)];
    size_t                    n;
    int                       ranks, workers;

    if (!ready) {
        gcx_log_configure(-1, -1);
        gcx_config_defaults(&config);
        ready = 1;
    }
    if (size < 1 || gcx_config_count() == 0) {
        return 0;
    }
    entry = gcx_config_at(data[0] % gcx_config_count());
    n     = size - 1 < sizeof(value) - 1 ? size - 1 : sizeof(value) - 1;
    memcpy(value, data + 1, n);
    value[n] = '\0';
    gcx_config_accepted(entry, accepted, sizeof(accepted));
    if (gcx_config_parse_entry(entry, value, &config) == GCX_OK) {
        gcx_config_format(entry, &config, printed, sizeof(printed));
        if (entry->type != GCX_CONFIG_DOUBLE &&
            gcx_config_parse_entry(entry, printed, &config) != GCX_OK) {
            abort(); /* what gcx-info prints must be accepted back */
        }
    }
    (void)gcx_config_find(value);
    if (gcx_bootstrap_first_host(value, host, 1 + data[0] % sizeof(host)) ==
            GCX_OK &&
        strlen(host) >= 1 + data[0] % sizeof(host)) {
        abort(); /* the host must fit the buffer it was given */
    }
    ranks   = 1 + data[0] % 130; /* worker sets of 1 to 3 words */
    workers = ranks - (data[0] & 1);
    memset(set, 0xff, sizeof(set)); /* the parse must clear what it owns */
    if (gcx_coded_straggler_parse(value, ranks, (data[0] >> 1) % ranks,
                                  data[0] & 1, set) == GCX_OK) {
        for (int w = workers; w < (int)(64 * GCX_WSET_WORDS(ranks)); ++w) {
            if (gcx_wset_has(set, w)) {
                abort(); /* a worker beyond the communicator */
            }
        }
    }
    return 0;
}
