/*
 * fuzz_coded.c - libFuzzer target of the coded gather's wire header
 * (src/coll/coded/): the active-message header a rank receives with
 * a contribution, a result or an error.
 *
 * Input: byte 0 picks the code's worker count n (1..64) and whether the
 * root is a worker, the rest is the header as it came off the wire.
 * gcx_coded_hdr_parse() must reject a wrong length; an accepted header from
 * a rank of the communicator goes where the handler sends it: the sender's
 * worker index (which must be a worker, or -1 for a root that is not one),
 * and the public result filled from it. Cost per input: one copy of at most 300 bytes.
 *
 * The same bytes go through the master-less coded allreduce's parser
 * (src/coll/coded/): bytes 1..32 as its header, the two after as
 * the payload length, byte 0 also picking the owners per chunk and the
 * vector length; an accepted header must name ranks of the communicator,
 * a known kind, and for DECODED and COMMIT an owner of the chunk (the
 * handler indexes per-chunk and per-owner state with them).
 */
#include "coll/coded/masterless_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gcx_coded_hdr_t    hdr;
    gcx_coded_t        coded;
    gcx_coded_result_t result;
    int                w;

    if (size < 1) {
        return 0;
    }
    if (size - 1 >= sizeof(gcx_car_hdr_t)) {
        gcx_car_hdr_t ch;
        int           csize = 1 + data[0] % GCX_CODE_MAX_WORKERS;
        int           line  = 1 + (data[0] >> 6) % csize, pos;
        size_t        payload = 0;

        if (size - 1 >= sizeof(ch) + 2) {
            payload = (size_t)data[1 + sizeof(ch)] |
                      (size_t)data[2 + sizeof(ch)] << 8;
        }
        if (gcx_car_hdr_parse(data + 1, sizeof(ch), payload, csize, line,
                              (size_t)data[0] * 37u, &ch) == GCX_OK) {
            pos = ((int)ch.sender - (int)ch.chunk + csize) % csize;
            if (ch.sender >= (unsigned)csize || ch.chunk >= (unsigned)csize ||
                ch.kind < GCX_CAR_CHUNK || ch.kind > GCX_CAR_LOST ||
                ((ch.kind == GCX_CAR_DECODED || ch.kind == GCX_CAR_COMMIT ||
                  ch.kind == GCX_CAR_LOST) && pos >= line) ||
                ((ch.kind == GCX_CAR_VOID || ch.kind == GCX_CAR_LOST) &&
                 payload != 0)) {
                abort();
            }
        }
    }
    memset(&coded, 0, sizeof(coded));
    coded.n               = 1 + data[0] % GCX_CODE_MAX_WORKERS;
    coded.root_not_worker = data[0] >> 7;
    coded.root            = 0;
    if (gcx_coded_hdr_parse(data + 1, size - 1, &hdr) != GCX_OK) {
        if (size - 1 >= offsetof(gcx_coded_hdr_t, arrival) &&
            size - 1 <= sizeof(hdr)) {
            abort(); /* a header of a valid length must parse */
        }
        return 0;
    }
    if (hdr.sender >= (unsigned)(coded.n + coded.root_not_worker)) {
        return 0; /* the handler drops it: not a rank of the communicator */
    }
    w = gcx_coded_worker(&coded, hdr.sender);
    if (w < -1 || w >= coded.n) {
        abort(); /* the root indexes its per-worker state with it */
    }
    gcx_coded_fill_result(&coded, &hdr, 0, &result);
    return 0;
}
