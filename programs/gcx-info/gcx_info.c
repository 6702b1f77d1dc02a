/*
 * gcx-info - what this gcx build can do and how it is configured.
 *
 *   gcx-info            version, transports and devices, every GCX_*
 *                       variable with its current value and doc
 *   gcx-info -c         only the variables (as NAME=value lines)
 *   gcx-info --markdown the variable table for the README
 *
 * A bad GCX_* value in the environment makes it fail (exit 1) with the
 * same error a communicator would give.
 */
#include "base/config.h"

#include <gcx/gcx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uct/api/uct.h>
#include <ucp/api/ucp.h>

#ifdef GCX_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

/* Lists UCX transports/devices from the UCT component and MD resources. */
static void gcx_info_ucx_transports(void)
{
    uct_component_h *components;
    unsigned         ncomponents, c;

    printf("# transport ucx: UCX %s\n", ucp_get_version_string());
    if (uct_query_components(&components, &ncomponents) != UCS_OK) {
        printf("#   (cannot query UCX components)\n");
        return;
    }
    for (c = 0; c < ncomponents; ++c) {
        uct_component_attr_t attr = {0};
        unsigned             m;

        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME |
                          UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
        if (uct_component_query(components[c], &attr) != UCS_OK) {
            continue;
        }
        attr.md_resources = calloc(attr.md_resource_count ?
                                       attr.md_resource_count : 1,
                                   sizeof(*attr.md_resources));
        attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        if (attr.md_resources == NULL ||
            uct_component_query(components[c], &attr) != UCS_OK) {
            free(attr.md_resources);
            continue;
        }
        for (m = 0; m < attr.md_resource_count; ++m) {
            uct_md_config_t      *md_config;
            uct_md_h              md;
            uct_tl_resource_desc_t *tls;
            unsigned              ntls, t;

            if (uct_md_config_read(components[c], NULL, NULL, &md_config) !=
                UCS_OK) {
                continue;
            }
            if (uct_md_open(components[c], attr.md_resources[m].md_name,
                            md_config, &md) == UCS_OK) {
                if (uct_md_query_tl_resources(md, &tls, &ntls) == UCS_OK) {
                    for (t = 0; t < ntls; ++t) {
                        printf("#   %-8s device %s\n", tls[t].tl_name,
                               tls[t].dev_name);
                    }
                    uct_release_tl_resource_list(tls);
                }
                uct_md_close(md);
            }
            uct_config_release(md_config);
        }
        free(attr.md_resources);
    }
    uct_release_component_list(components);
}

static void gcx_info_verbs(void)
{
#ifdef GCX_HAVE_VERBS
    int                  n = 0, i;
    struct ibv_device  **list = ibv_get_device_list(&n);

    printf("# transport verbs: built; %d RDMA device(s)%s\n", n,
           n == 0 ? " (none: GCX_TRANSPORT=verbs cannot run here)" : "");
    for (i = 0; i < n; ++i) {
        printf("#   device %s\n", ibv_get_device_name(list[i]));
    }
    if (list != NULL) {
        ibv_free_device_list(list);
    }
#else
    printf("# transport verbs: not built (meson -Dverbs=enabled)\n");
#endif
}

int main(int argc, char **argv)
{
    gcx_config_t *config;
    int           only_config = 0;

    if (argc > 1 && !strcmp(argv[1], "--markdown")) {
        gcx_config_print_markdown(stdout);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "-c")) {
        only_config = 1;
    } else if (argc > 1) {
        fprintf(stderr, "usage: gcx-info [-c | --markdown]\n");
        return argc > 1 && (!strcmp(argv[1], "-h") ||
                            !strcmp(argv[1], "--help")) ? 0 : 2;
    }
    if (gcx_config_read(&config) != GCX_OK) {
        fprintf(stderr, "gcx-info: the environment has invalid GCX_* values "
                "(see above)\n");
        return 1;
    }
    if (!only_config) {
        printf("# gcx %s\n", gcx_version());
        gcx_info_ucx_transports();
        gcx_info_verbs();
        printf("#\n# Configuration (environment variables):\n");
    }
    gcx_config_print(config, stdout);
    gcx_config_release(config);
    return 0;
}
