/*
 * bootstrap_wire.c - the bootstrap's wire format and its authentication:
 * framing (a 12-byte header of magic, type, version and body length, then a
 * body whose length the receiver knows beforehand), the fixed-size
 * CHALLENGE/HELLO/REPLY bodies, SipHash-2-4, the key made from the job
 * token, the HELLO and REPLY MACs, and the nonces.
 *
 * Idea: every function here is pure (except the nonce, which reads
 * getrandom() and a counter), so the parsers and MACs are what the unit
 * tests and the fuzz target (tests/fuzz/fuzz_bootstrap.c) exercise, and
 * bootstrap.c only moves the bytes. Integers are little-endian on the wire
 * whatever the host.
 *
 * Cost: the authentication is two SipHash-2-4 calls over 32 bytes per rank
 * and connection; packing and parsing are a few loads and stores.
 */
#include "bootstrap.h"
#include "base/time.h"

#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- the job token and the authenticator -------------------------------- */

#define GCX_ROTL(_x, _b) (uint64_t)(((_x) << (_b)) | ((_x) >> (64 - (_b))))
#define GCX_SIPROUND(_v0, _v1, _v2, _v3)                                       \
    do {                                                                       \
        _v0 += _v1; _v1 = GCX_ROTL(_v1, 13); _v1 ^= _v0;                       \
        _v0 = GCX_ROTL(_v0, 32);                                               \
        _v2 += _v3; _v3 = GCX_ROTL(_v3, 16); _v3 ^= _v2;                       \
        _v0 += _v3; _v3 = GCX_ROTL(_v3, 21); _v3 ^= _v0;                       \
        _v2 += _v1; _v1 = GCX_ROTL(_v1, 17); _v1 ^= _v2;                       \
        _v2 = GCX_ROTL(_v2, 32);                                               \
    } while (0)

static void gcx_bootstrap_put32(uint8_t *p, uint32_t v)
{
    int i;

    for (i = 0; i < 4; ++i) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void gcx_bootstrap_put64(uint8_t *p, uint64_t v)
{
    int i;

    for (i = 0; i < 8; ++i) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint32_t gcx_bootstrap_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t gcx_bootstrap_get64(const uint8_t *p)
{
    return (uint64_t)gcx_bootstrap_get32(p) |
           (uint64_t)gcx_bootstrap_get32(p + 4) << 32;
}

uint64_t gcx_bootstrap_siphash(const uint64_t key[2], const void *data,
                               size_t len)
{
    const uint8_t *in = data;
    uint64_t       v0 = 0x736f6d6570736575ull ^ key[0];
    uint64_t       v1 = 0x646f72616e646f6dull ^ key[1];
    uint64_t       v2 = 0x6c7967656e657261ull ^ key[0];
    uint64_t       v3 = 0x7465646279746573ull ^ key[1];
    uint64_t       b  = (uint64_t)len << 56, m;
    size_t         i, left = len & 7, end = len - left;

    for (i = 0; i < end; i += 8) {
        m = gcx_bootstrap_get64(in + i);
        v3 ^= m;
        GCX_SIPROUND(v0, v1, v2, v3);
        GCX_SIPROUND(v0, v1, v2, v3);
        v0 ^= m;
    }
    for (i = 0; i < left; ++i) {
        b |= (uint64_t)in[end + i] << (8 * i);
    }
    v3 ^= b;
    GCX_SIPROUND(v0, v1, v2, v3);
    GCX_SIPROUND(v0, v1, v2, v3);
    v0 ^= b;
    v2 ^= 0xff;
    for (i = 0; i < 4; ++i) {
        GCX_SIPROUND(v0, v1, v2, v3);
    }
    return v0 ^ v1 ^ v2 ^ v3;
}

void gcx_bootstrap_key(const char *token, uint64_t key[2])
{
    /* two fixed keys make a 128-bit key of the token (domain separation) */
    static const uint64_t k0[2] = {0x6763782d6a6f622dull, 0x746f6b656e2d6b30ull};
    static const uint64_t k1[2] = {0x6763782d6a6f622dull, 0x746f6b656e2d6b31ull};

    key[0] = gcx_bootstrap_siphash(k0, token, strlen(token));
    key[1] = gcx_bootstrap_siphash(k1, token, strlen(token));
}

uint64_t gcx_bootstrap_hello_mac(const uint64_t key[2], uint64_t root_nonce,
                                 const gcx_bootstrap_msg_t *hello)
{
    uint8_t in[32];

    memcpy(in, "gcxHELLO", 8);
    gcx_bootstrap_put64(in + 8, root_nonce);
    gcx_bootstrap_put64(in + 16, hello->nonce);
    gcx_bootstrap_put32(in + 24, hello->rank);
    gcx_bootstrap_put32(in + 28, hello->size);
    return gcx_bootstrap_siphash(key, in, sizeof(in));
}

uint64_t gcx_bootstrap_reply_mac(const uint64_t key[2], uint64_t root_nonce,
                                 uint64_t rank_nonce,
                                 const gcx_bootstrap_msg_t *reply)
{
    uint8_t in[32];

    memcpy(in, "gcxREPLY", 8);
    gcx_bootstrap_put64(in + 8, root_nonce);
    gcx_bootstrap_put64(in + 16, rank_nonce);
    gcx_bootstrap_put32(in + 24, (uint32_t)reply->status);
    gcx_bootstrap_put32(in + 28, reply->rank);
    return gcx_bootstrap_siphash(key, in, sizeof(in));
}

/* A nonce: never repeated in practice, not secret (it only keeps a hello
 * or a reply from being replayed into another connection). */
uint64_t gcx_bootstrap_nonce(void)
{
    static uint64_t counter; /* creations may run on several threads */
    uint64_t        v = 0;

    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        v = (uint64_t)(gcx_time_now() * 1e9) ^ ((uint64_t)getpid() << 32);
    }
    return v ^ (__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) *
                0x9e3779b97f4a7c15ull);
}

/* ---- messages ------------------------------------------------------------ */

size_t gcx_bootstrap_body_len(unsigned type)
{
    switch (type) {
    case GCX_BOOTSTRAP_CHALLENGE:
        return 8;  /* nonce */
    case GCX_BOOTSTRAP_HELLO:
        return 24; /* rank, size, nonce, mac */
    case GCX_BOOTSTRAP_REPLY:
        return 16; /* status, rank, mac */
    default:
        return 0;  /* DATA: the allgather's length */
    }
}

void gcx_bootstrap_put_header(uint8_t *p, unsigned type, uint32_t length)
{
    gcx_bootstrap_put32(p, GCX_BOOTSTRAP_MAGIC);
    p[4] = (uint8_t)type;
    p[5] = (uint8_t)(type >> 8);
    p[6] = (uint8_t)GCX_BOOTSTRAP_VERSION;
    p[7] = (uint8_t)(GCX_BOOTSTRAP_VERSION >> 8);
    gcx_bootstrap_put32(p + 8, length);
}

gcx_status_t gcx_bootstrap_parse_header(const void *bytes, size_t len,
                                        unsigned type, size_t length,
                                        const char **why_p)
{
    const uint8_t *p = bytes;
    const char    *why = NULL;

    if (len < GCX_BOOTSTRAP_HEADER_LEN) {
        why = "a truncated header";
    } else if (gcx_bootstrap_get32(p) != GCX_BOOTSTRAP_MAGIC) {
        why = "not a gcx bootstrap message (bad magic)";
    } else if ((p[6] | p[7] << 8) != GCX_BOOTSTRAP_VERSION) {
        why = "another protocol version (another gcx release)";
    } else if ((unsigned)(p[4] | p[5] << 8) != type) {
        why = "an unexpected message type";
    } else if (gcx_bootstrap_get32(p + 8) != length) {
        why = "a length other than the expected one";
    }
    if (why_p != NULL) {
        *why_p = why;
    }
    return why == NULL ? GCX_OK : GCX_ERR_INVALID;
}

gcx_status_t gcx_bootstrap_parse_body(unsigned type, const void *bytes,
                                      size_t len, gcx_bootstrap_msg_t *msg)
{
    const uint8_t *p = bytes;

    memset(msg, 0, sizeof(*msg));
    msg->type = type;
    if (gcx_bootstrap_body_len(type) == 0 ||
        len != gcx_bootstrap_body_len(type)) {
        return GCX_ERR_INVALID;
    }
    switch (type) {
    case GCX_BOOTSTRAP_CHALLENGE:
        msg->nonce = gcx_bootstrap_get64(p);
        break;
    case GCX_BOOTSTRAP_HELLO:
        msg->rank  = gcx_bootstrap_get32(p);
        msg->size  = gcx_bootstrap_get32(p + 4);
        msg->nonce = gcx_bootstrap_get64(p + 8);
        msg->mac   = gcx_bootstrap_get64(p + 16);
        break;
    case GCX_BOOTSTRAP_REPLY:
        msg->status = (int32_t)gcx_bootstrap_get32(p);
        msg->rank   = gcx_bootstrap_get32(p + 4);
        msg->mac    = gcx_bootstrap_get64(p + 8);
        break;
    }
    return GCX_OK;
}

/* Header + body of a fixed-size message into @p buf; its length. */
size_t gcx_bootstrap_pack(uint8_t *buf, const gcx_bootstrap_msg_t *msg)
{
    uint8_t *p = buf + GCX_BOOTSTRAP_HEADER_LEN;

    gcx_bootstrap_put_header(buf, msg->type,
                             (uint32_t)gcx_bootstrap_body_len(msg->type));
    switch (msg->type) {
    case GCX_BOOTSTRAP_CHALLENGE:
        gcx_bootstrap_put64(p, msg->nonce);
        break;
    case GCX_BOOTSTRAP_HELLO:
        gcx_bootstrap_put32(p, msg->rank);
        gcx_bootstrap_put32(p + 4, msg->size);
        gcx_bootstrap_put64(p + 8, msg->nonce);
        gcx_bootstrap_put64(p + 16, msg->mac);
        break;
    case GCX_BOOTSTRAP_REPLY:
        gcx_bootstrap_put32(p, (uint32_t)msg->status);
        gcx_bootstrap_put32(p + 4, msg->rank);
        gcx_bootstrap_put64(p + 8, msg->mac);
        break;
    }
    return GCX_BOOTSTRAP_HEADER_LEN + gcx_bootstrap_body_len(msg->type);
}
