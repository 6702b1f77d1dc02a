/*
 * fuzz_bootstrap.c - libFuzzer target of the bootstrap's message parsers
 * (src/core/bootstrap.c): the bytes a stranger can send to rank 0's
 * rendezvous port, or a fake root to a rank.
 *
 * The input is read as the receivers read it: a 12-byte header checked
 * against each message type and its body length (and against a DATA
 * length taken from the input), then the body parsed and its MAC checked
 * under a fixed token, as rank 0 does with a HELLO and a rank with a
 * REPLY. Cost per input: a few hundred instructions, no allocation.
 */
#include "core/bootstrap.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned types[] = {GCX_BOOTSTRAP_CHALLENGE,
                                     GCX_BOOTSTRAP_HELLO, GCX_BOOTSTRAP_REPLY,
                                     GCX_BOOTSTRAP_DATA, 0, 0xffff};
    static uint64_t       key[2];
    gcx_bootstrap_msg_t   msg;
    const char           *why;
    size_t                i, body;
    uint32_t              data_len = 0;

    if (key[0] == 0) {
        gcx_bootstrap_key("fuzz-token", key);
    }
    if (size >= 16) {
        memcpy(&data_len, data + 12, sizeof(data_len));
    }
    for (i = 0; i < sizeof(types) / sizeof(types[0]); ++i) {
        body = types[i] == GCX_BOOTSTRAP_DATA ? data_len :
                                                gcx_bootstrap_body_len(types[i]);
        if (gcx_bootstrap_parse_header(data, size, types[i], body, &why) !=
            GCX_OK) {
            if (why == NULL) {
                __builtin_trap(); /* a rejection must name its reason */
            }
            continue;
        }
        if (size - GCX_BOOTSTRAP_HEADER_LEN < body ||
            gcx_bootstrap_parse_body(types[i], data + GCX_BOOTSTRAP_HEADER_LEN,
                                     body, &msg) != GCX_OK) {
            continue;
        }
        if (msg.type == GCX_BOOTSTRAP_HELLO) {
            (void)(msg.mac == gcx_bootstrap_hello_mac(key, 1, &msg));
        } else if (msg.type == GCX_BOOTSTRAP_REPLY) {
            (void)(msg.mac == gcx_bootstrap_reply_mac(key, 1, 2, &msg));
        }
    }
    /* any bytes as a token */
    (void)gcx_bootstrap_siphash(key, data, size);
    return 0;
}
