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

/* ---- configuration rows (registered into base's one table) -------------- */

static const gcx_config_value_t gcx_tl_names[] = {
    {GCX_TRANSPORT_UCX, "ucx", "UCX: shared memory, TCP, InfiniBand"},
    {0, NULL, NULL}};

static const gcx_config_value_t gcx_tl_ucx_err_modes[] = {
    {GCX_UCX_ERR_MODE_AUTO, "auto",
     "peer to other hosts, none on this host (keeps shared memory)"},
    {GCX_UCX_ERR_MODE_NONE, "none", "keep shared memory; GCX_TIMEOUT finds a dead peer"},
    {GCX_UCX_ERR_MODE_PEER, "peer", "UCP_ERR_HANDLING_MODE_PEER"},
    {0, NULL, NULL}};

static const gcx_config_entry_t gcx_tl_config_rows[] = {
    {"TRANSPORT", GCX_CONFIG_ENUM, "ucx",
     "Transport for collectives (UCX: shared memory, TCP, InfiniBand; the "
     "only one built so far)",
     offsetof(struct gcx_config, transport), 0, 0, gcx_tl_names},
    {"UCX_ERR_MODE", GCX_CONFIG_ENUM, "auto",
     "UCX endpoint error handling: peer reports a lost peer at once but, in "
     "UCX 1.13, rules out shared memory (posix/sysv/cma); none keeps them "
     "and a dead peer is found by GCX_TIMEOUT; auto uses peer for peers on "
     "other hosts (another boot id or network namespace) and none on this "
     "host",
     offsetof(struct gcx_config, ucx_err_mode), 0, 0, gcx_tl_ucx_err_modes},
};
GCX_CONFIG_REGISTER(GCX_CONFIG_LAYER_TRANSPORT, "transport", gcx_tl_config_rows)
