/*
 * record.c - the per-step trace record as a CSV line, and the one tiny
 * allreduce that makes every rank decide alike.
 *
 * Formatting is one snprintf per step. The allreduce sums 4 doubles
 * (32 bytes: latency-bound, one recursive-doubling round trip per log2 P);
 * it goes through a copy so the caller's norms change only on success.
 */
#include "gravac_int.h"

#include <stdio.h>
#include <string.h>

const char *gcx_gravac_record_header(void)
{
    return "step,level,cf,delta_min,delta_c,throughput,theta_min,theta_s,"
           "events";
}

gcx_status_t gcx_gravac_record_format(const gcx_gravac_record_t *rec,
                                      char *buf, size_t buflen)
{
    char line[512];
    int  len;

    if (rec == NULL || buf == NULL) {
        return GCX_ERR_INVALID;
    }
    len = snprintf(line, sizeof(line),
                   "%llu,%s,%.6g,%.6f,%.6f,%.6g,%.6g,%.6g,%u",
                   (unsigned long long)rec->step,
                   gcx_gravac_level_name(rec->level), rec->cf, rec->delta_min,
                   rec->delta_c, rec->throughput, rec->theta_min, rec->theta_s,
                   rec->events);
    if (len < 0 || (size_t)len >= buflen) {
        return GCX_ERR_RANGE; /* buf untouched */
    }
    memcpy(buf, line, (size_t)len + 1);
    return GCX_OK;
}

gcx_status_t gcx_gravac_allreduce_norms(gcx_comm_t *comm,
                                        gcx_gravac_norms_t *norms)
{
    gcx_gravac_norms_t sum;
    gcx_status_t       status;

    if (comm == NULL || norms == NULL) {
        return GCX_ERR_INVALID;
    }
    status = gcx_allreduce(comm, norms, &sum, 4, GCX_DT_F64, GCX_OP_SUM, NULL);
    if (status != GCX_OK) {
        return status;
    }
    *norms = sum;
    return GCX_OK;
}
