/*
 * fuzz_coded.c - libFuzzer target of the coded gather's wire header
 * (src/coll/coded/): the active-message header a rank receives with
 * a contribution, a result or an error.
 *
 * Input: byte 0 picks the code's worker count n (1..128) and whether the
 * root is a worker, the rest is the header as it came off the wire, with
 * the worker sets of a RESULT or LOST after it.
 * gcx_coded_hdr_parse() must accept exactly the lengths of its kind (and
 * the sets must lie within the message); an accepted header from a rank of
 * the communicator goes where the handler sends it: the sender's worker
 * index (which must be a worker, or -1 for a root that is not one), and,
 * for RESULT and LOST, the public result filled from it, which must hold
 * the header's sets. Cost per input: a few copies of at most 200 bytes.
 *
 * The same bytes go through the master-less coded allreduce's parser
 * (src/coll/coded/): bytes 1..2 as the payload length, the rest as its
 * header (with a DECODED's used set after the fixed 32 bytes), byte 0
 * also picking the owners per chunk and the vector length; an accepted
 * header must have its kind's length, name ranks of the communicator, a
 * known kind, for DECODED and COMMIT an owner of the chunk (the handler
 * indexes per-chunk and per-owner state with them), and for DECODED a
 * used set within the message with no worker at or past n.
 *
 * The result is written into storage for exactly n workers
 * (gcx_coded_result_alloc()), so writing past a worker set or the arrival
 * times shows under ASan.
 */
#include "coll/coded/masterless_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Largest worker count byte 0 picks: worker sets of one and two words;
 * its top bit is root_not_worker. */
#define FUZZ_CODED_MAX_N 128

/* 1 when one of the @p nsets sets of n workers at @p bytes (unaligned)
 * has a bit at or past n. */
static int fuzz_past_n(const uint8_t *bytes, size_t words, int n, size_t nsets)
{
    uint64_t last;
    size_t   k;

    for (k = 1; n % 64 != 0 && k <= nsets; ++k) {
        memcpy(&last, bytes + (k * words - 1) * sizeof(uint64_t), sizeof(last));
        if (last >> (n % 64) != 0) {
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gcx_coded_hdr_t      hdr, raw;
    gcx_coded_t          coded;
    gcx_coded_result_t   result;
    const unsigned char *sets_p = NULL;
    uint64_t            *sets;
    float               *arrival;
    size_t               words, len;
    int                  w, with_sets;

    if (size < 1) {
        return 0;
    }
    if (size >= 3) {
        const unsigned char *used = NULL;
        gcx_car_hdr_t        ch;
        int                  csize = 1 + data[0] % FUZZ_CODED_MAX_N;
        int                  line  = 1 + (data[0] >> 6) % csize, pos;
        size_t               payload = (size_t)data[1] | (size_t)data[2] << 8;
        size_t               cwords  = GCX_WSET_WORDS(csize);

        if (gcx_car_hdr_parse(data + 3, size - 3, payload, csize, line,
                              (size_t)data[0] * 37u, &ch, &used) == GCX_OK) {
            pos = ((int)ch.sender - (int)ch.chunk + csize) % csize;
            if (size - 3 != gcx_car_hdr_len(ch.kind, csize) ||
                ch.sender >= (unsigned)csize || ch.chunk >= (unsigned)csize ||
                ch.kind < GCX_CAR_CHUNK || ch.kind > GCX_CAR_LOST ||
                ((ch.kind == GCX_CAR_DECODED || ch.kind == GCX_CAR_COMMIT ||
                  ch.kind == GCX_CAR_LOST) && pos >= line) ||
                ((ch.kind == GCX_CAR_VOID || ch.kind == GCX_CAR_LOST) &&
                 payload != 0) ||
                (ch.kind == GCX_CAR_DECODED) !=
                    (used == data + 3 + sizeof(ch)) ||
                (used != NULL && fuzz_past_n(used, cwords, csize, 1))) {
                abort();
            }
        }
    }
    memset(&coded, 0, sizeof(coded));
    coded.n               = 1 + data[0] % FUZZ_CODED_MAX_N;
    coded.words           = GCX_WSET_WORDS(coded.n);
    coded.root_not_worker = data[0] >> 7;
    coded.root            = 0;
    words                 = coded.words;
    len                   = size - 1;
    if (gcx_coded_hdr_parse(data + 1, len, coded.n, &hdr, &sets_p) !=
        GCX_OK) {
        if (len >= sizeof(raw)) {
            memcpy(&raw, data + 1, sizeof(raw));
            with_sets = raw.kind == GCX_CODED_RESULT ||
                        raw.kind == GCX_CODED_LOST;
            if (len == sizeof(raw) + (with_sets ? 3 * words * 8 : 0) &&
                raw.nwords == (with_sets ? words : 0) &&
                !(with_sets && fuzz_past_n(data + 1 + sizeof(raw), words,
                                           coded.n, 3))) {
                abort(); /* a header of its kind's length must parse */
            }
        }
        return 0;
    }
    with_sets = hdr.kind == GCX_CODED_RESULT || hdr.kind == GCX_CODED_LOST;
    if (len != sizeof(hdr) + (with_sets ? 3 * words * 8 : 0) ||
        (with_sets ? sets_p != data + 1 + sizeof(hdr) : sets_p != NULL)) {
        abort(); /* the sets follow the header, within the message */
    }
    if (hdr.sender >= (unsigned)(coded.n + coded.root_not_worker)) {
        return 0; /* the handler drops it: not a rank of the communicator */
    }
    w = gcx_coded_worker(&coded, hdr.sender);
    if (w < -1 || w >= coded.n) {
        abort(); /* the root indexes its per-worker state with it */
    }
    if (!with_sets) {
        return 0; /* only RESULT and LOST fill a result */
    }
    /* the sets, aligned (as a rank copies them), and the root's arrival
     * times every other round: each exactly n workers' worth */
    sets    = malloc(3 * words * sizeof(uint64_t));
    arrival = malloc((size_t)coded.n * sizeof(float));
    if (sets == NULL || arrival == NULL ||
        gcx_coded_result_alloc(&result, coded.n) != GCX_OK) {
        abort();
    }
    memcpy(sets, sets_p, 3 * words * sizeof(uint64_t));
    if (fuzz_past_n(sets_p, words, coded.n, 3)) {
        abort(); /* a set naming a worker past n was accepted */
    }
    for (w = 0; w < coded.n; ++w) {
        arrival[w] = (float)w;
    }
    gcx_coded_fill_result(&coded, &hdr, sets, hdr.round % 2 ? arrival : NULL,
                          0, &result);
    if (result.round != hdr.round ||
        result.lost != (hdr.kind == GCX_CODED_LOST) ||
        memcmp(result.arrived, sets, words * 8) != 0 ||
        memcmp(result.used, sets + words, words * 8) != 0 ||
        memcmp(result.abstained, sets + 2 * words, words * 8) != 0) {
        abort(); /* the result is what the header says */
    }
    gcx_coded_result_free(&result);
    free(arrival);
    free(sets);
    return 0;
}
