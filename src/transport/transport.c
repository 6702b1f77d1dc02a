/*
 * transport.c - maps GCX_TRANSPORT to an ops table.
 */
#include "transport.h"
#include "base/config.h"

const gcx_tl_ops_t *gcx_tl_ops_find(int transport)
{
    switch (transport) {
    case GCX_TRANSPORT_UCX:
        return &gcx_tl_ucx_ops;
    default:
        return NULL;
    }
}
