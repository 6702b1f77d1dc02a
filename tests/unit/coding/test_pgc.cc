/*
 * test_pgc.cc - pipelined gradient coding: slots, the worked example of
 * coding.h, and a simulated training run in which the "gradient" of
 * partition j computed at step t is a known function g(j, t), checking
 * what the decoder claims against what was actually summed.
 */
#include "coding_test_util.h"

#include <limits>

using namespace gcxtest;

namespace
{

constexpr size_t kLen = 33;

/* The synthetic gradient of partition j computed at step t. */
float synth(int j, int64_t t, size_t k)
{
    return (float)(std::sin(0.37 * (double)(t + 1) * (j + 1) + 0.11 * k) +
                   0.01 * (j + 1) * (double)t);
}

PgcPtr make_pgc(gcx_code_t *code)
{
    gcx_pgc_t *p = nullptr;
    EXPECT_EQ(gcx_pgc_create(code, &p), GCX_OK);
    return PgcPtr(p);
}

/* sum_terms w * g(j, t - d) */
double from_terms(const std::vector<gcx_pgc_term_t> &terms, int nterms,
                  int64_t t, size_t k)
{
    double v = 0;
    for (int q = 0; q < nterms; q++) {
        v += terms[q].weight *
             synth(terms[q].partition, t - terms[q].staleness, k);
    }
    return v;
}

enum class Expect { kSingle, kAffine, kWeighted };

/* Simulate T steps: n workers with NaN-initialised slot buffers, random
 * arrived sets of size n - s, and check the decoded vector. */
void simulate(gcx_code_kind_t kind, gcx_code_decoding_t dec, int n, int s,
              Expect expect, std::mt19937_64 &rng)
{
    SCOPED_TRACE(testing::Message() << "kind " << kind << " dec " << dec
                                    << " n " << n << " s " << s);
    auto code = make_code(kind, n, s, dec);
    ASSERT_TRUE(code);
    auto pgc = make_pgc(code.get());
    ASSERT_TRUE(pgc);
    const int P = gcx_pgc_period(pgc.get());
    ASSERT_EQ(P, gcx_code_load(code.get()));
    if (n % (s + 1) == 0) {
        ASSERT_EQ(P, s + 1);
    } /* else an FR code whose smaller groups leave a slot empty */
    ASSERT_EQ(gcx_pgc_max_terms(pgc.get()), n * P);
    const double w = (double)n / ((n - s) * (s + 1));

    std::vector<std::vector<int>> slots(n, std::vector<int>(P));
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(gcx_pgc_slots(pgc.get(), i, slots[i].data()), GCX_OK);
    }
    /* buf[i][l]: worker i's slot l; NaN until first computed. */
    std::vector<std::vector<std::vector<float>>> buf(
        n, std::vector<std::vector<float>>(
               P, std::vector<float>(kLen,
                                     std::numeric_limits<float>::quiet_NaN())));
    std::vector<std::vector<float>> msg(n, std::vector<float>(kLen));
    std::vector<gcx_pgc_term_t> terms(n * P);
    const int T = 4 * P + 6;

    for (int64_t t = 0; t < T; t++) {
        /* Workers. */
        for (int i = 0; i < n; i++) {
            int l = -1, j = -2;
            ASSERT_EQ(gcx_pgc_compute(pgc.get(), i, t, &l, &j), GCX_OK);
            ASSERT_EQ(l, (int)(t % P));
            ASSERT_EQ(j, slots[i][l]);
            for (size_t k = 0; j >= 0 && k < kLen; k++) {
                buf[i][l][k] = synth(j, t, k);
            }
            std::vector<double> c(P);
            std::vector<int> st(P);
            ASSERT_EQ(gcx_pgc_coeffs(pgc.get(), i, t, c.data()), GCX_OK);
            ASSERT_EQ(gcx_pgc_staleness(pgc.get(), i, t, st.data()), GCX_OK);
            std::vector<int> seen(P, 0);
            int held = 0;
            for (int q = 0; q < P; q++) {
                if (slots[i][q] < 0) { /* an empty slot is never read */
                    EXPECT_EQ(c[q], 0.0);
                    continue;
                }
                held++;
                int want = t >= q ? (int)((t - q) % P) : -1;
                EXPECT_EQ(st[q], want);
                EXPECT_EQ(c[q] != 0.0, t >= q);
                if (st[q] >= 0) {
                    seen[st[q]]++;
                }
            }
            /* One gradient of each staleness its held slots give: one
             * fresh and one of each staleness 1..s when every slot is. */
            if (t >= P - 1) {
                int total = 0;
                for (int d = 0; d < P; d++) {
                    EXPECT_LE(seen[d], 1);
                    total += seen[d];
                }
                EXPECT_EQ(total, held);
            }
            std::vector<const float *> bp(P);
            for (int q = 0; q < P; q++) {
                bp[q] = buf[i][q].data();
            }
            ASSERT_EQ(
                gcx_code_encode(P, c.data(), bp.data(), kLen, msg[i].data()),
                GCX_OK);
        }

        /* Root: a few straggler patterns per step. */
        for (int rep = 0; rep < 3; rep++) {
            uint64_t f = random_subset(n, n - s, rng);
            std::vector<double> a(n);
            gcx_pgc_info_t info;
            ASSERT_EQ(
                gcx_pgc_decode(pgc.get(), t, ws(f), a.data(), terms.data(),
                               &info),
                GCX_OK);
            std::vector<const float *> mp(n);
            for (int i = 0; i < n; i++) {
                mp[i] = msg[i].data();
            }
            std::vector<float> decoded(kLen);
            ASSERT_EQ(
                gcx_code_encode(n, a.data(), mp.data(), kLen, decoded.data()),
                GCX_OK);

            /* Always: the decoded vector is what the terms say. */
            for (size_t k = 0; k < kLen; k++) {
                ASSERT_FALSE(std::isnan(decoded[k])) << "read a NaN slot";
                EXPECT_NEAR(decoded[k], from_terms(terms, info.nterms, t, k),
                            2e-5 * n);
            }
            /* Terms sorted by partition then staleness; summary fields. */
            double wsum = 0;
            int maxd = 0;
            for (int q = 0; q < info.nterms; q++) {
                if (q > 0) {
                    EXPECT_TRUE(terms[q - 1].partition < terms[q].partition ||
                                (terms[q - 1].partition == terms[q].partition &&
                                 terms[q - 1].staleness < terms[q].staleness));
                }
                wsum += terms[q].weight;
                maxd = std::max(maxd, terms[q].staleness);
            }
            EXPECT_NEAR(info.weight_sum, wsum, 1e-12);
            EXPECT_EQ(info.max_staleness, maxd);

            std::vector<double> pw(n, 0.0);
            for (int q = 0; q < info.nterms; q++) {
                pw[terms[q].partition] += terms[q].weight;
            }
            const bool warm = t >= P - 1;

            switch (expect) {
            case Expect::kSingle: {
                /* One term per present partition, weight 1, staleness
                 * (t - j mod P) mod P -- whoever arrived. */
                int missing = 0, q = 0;
                for (int j = 0; j < n; j++) {
                    if (t < j % P) {
                        missing++;
                        continue;
                    }
                    ASSERT_LT(q, info.nterms);
                    EXPECT_EQ(terms[q].partition, j);
                    EXPECT_EQ(terms[q].staleness, (int)((t - j % P) % P));
                    EXPECT_NEAR(terms[q].weight, 1.0, 1e-9);
                    q++;
                }
                EXPECT_EQ(info.nterms, q);
                EXPECT_EQ(info.missing, missing);
                EXPECT_EQ(info.exact, missing == 0 ? 1 : 0);
                EXPECT_EQ(info.scale, 1.0);
                for (size_t k = 0; k < kLen; k++) {
                    double want = 0;
                    for (int j = 0; j < n; j++) {
                        if (t >= j % P) {
                            want += synth(j, t - (t - j % P) % P, k);
                        }
                    }
                    EXPECT_NEAR(decoded[k], want, 2e-5 * n);
                }
                break;
            }
            case Expect::kAffine:
                /* Exact real-valued CR without a colouring: every
                 * partition's weights still sum to 1. */
                EXPECT_EQ(info.scale, 1.0);
                if (warm) {
                    EXPECT_EQ(info.missing, 0);
                    for (int j = 0; j < n; j++) {
                        EXPECT_NEAR(pw[j], 1.0, 1e-9) << "partition " << j;
                    }
                    EXPECT_NEAR(info.weight_sum, n, 1e-8);
                }
                break;
            case Expect::kWeighted: {
                /* The authors' formula, computed here from the slot table:
                 * n/((n-s)(s+1)) * sum_{i in F} sum_l g(p_il, t - d_l). */
                EXPECT_DOUBLE_EQ(info.scale, w);
                for (int i = 0; i < n; i++) {
                    EXPECT_EQ(a[i], (f >> i & 1) ? w : 0.0);
                }
                for (size_t k = 0; k < kLen; k++) {
                    double want = 0;
                    for (int i = 0; i < n; i++) {
                        if (!(f >> i & 1)) {
                            continue;
                        }
                        for (int l = 0; l < P; l++) {
                            if (t >= l) {
                                want += synth(slots[i][l], t - (t - l) % P, k);
                            }
                        }
                    }
                    EXPECT_NEAR(decoded[k], w * want, 2e-5 * n);
                }
                if (warm) {
                    EXPECT_NEAR(info.weight_sum, n, 1e-9);
                }
                break;
            }
            }
        }
    }
}

} // namespace

TEST(CodingPipelined, SlotsFollowThePartitionColour)
{
    for (auto kind : {GCX_CODE_FR, GCX_CODE_CR}) {
        for (int n : {2, 4, 6, 8, 9, 12}) {
            for (int s = 1; s <= 3; s++) {
                int P = s + 1;
                if (n % P != 0 || s >= n) {
                    continue;
                }
                auto c = make_code(kind, n, s);
                ASSERT_TRUE(c);
                auto p = make_pgc(c.get());
                ASSERT_TRUE(p);
                for (int i = 0; i < n; i++) {
                    std::vector<int> sl(P);
                    ASSERT_EQ(gcx_pgc_slots(p.get(), i, sl.data()), GCX_OK);
                    for (int l = 0; l < P; l++) {
                        EXPECT_EQ(sl[l] % P, l) << "worker " << i;
                    }
                }
            }
        }
    }
}

/* The worked example in coding.h. */
TEST(CodingPipelined, HeaderWorkedExample)
{
    auto c = make_code(GCX_CODE_CR, 3, 1, GCX_CODE_DECODE_WEIGHTED);
    ASSERT_TRUE(c);
    auto p = make_pgc(c.get());
    ASSERT_TRUE(p);
    int want_slots[3][2] = {{0, 1}, {2, 1}, {0, 2}};
    for (int i = 0; i < 3; i++) {
        int sl[2];
        ASSERT_EQ(gcx_pgc_slots(p.get(), i, sl), GCX_OK);
        EXPECT_EQ(sl[0], want_slots[i][0]);
        EXPECT_EQ(sl[1], want_slots[i][1]);
    }
    double a[3];
    gcx_pgc_term_t terms[6];
    gcx_pgc_info_t info;
    ASSERT_EQ(gcx_pgc_decode(p.get(), 4, ws(0b101), a, terms, &info), GCX_OK);
    EXPECT_EQ(a[0], 0.75);
    EXPECT_EQ(a[1], 0.0);
    EXPECT_EQ(a[2], 0.75);
    ASSERT_EQ(info.nterms, 3);
    gcx_pgc_term_t want[3] = {{0, 0, 1.5}, {1, 1, 0.75}, {2, 1, 0.75}};
    for (int q = 0; q < 3; q++) {
        EXPECT_EQ(terms[q].partition, want[q].partition);
        EXPECT_EQ(terms[q].staleness, want[q].staleness);
        EXPECT_DOUBLE_EQ(terms[q].weight, want[q].weight);
    }
    EXPECT_DOUBLE_EQ(info.weight_sum, 3.0);
    EXPECT_DOUBLE_EQ(info.scale, 0.75);
    EXPECT_EQ(info.exact, 0);
    EXPECT_EQ(info.missing, 0);
    EXPECT_EQ(info.max_staleness, 1);
    EXPECT_DOUBLE_EQ(info.mean_staleness, 0.5);

    /* EXACT CR on the same slots: workers 1 and 2 both hold p2, at
     * staleness 0 and 1; the weights of p2 sum to 1. */
    auto ce = make_code(GCX_CODE_CR, 3, 1);
    ASSERT_TRUE(ce);
    auto pe = make_pgc(ce.get());
    ASSERT_TRUE(pe);
    gcx_pgc_term_t te[6];
    ASSERT_EQ(gcx_pgc_decode(pe.get(), 4, ws(0b110), a, te, &info), GCX_OK);
    double w2 = 0;
    int n2 = 0;
    for (int q = 0; q < info.nterms; q++) {
        if (te[q].partition == 2) {
            EXPECT_EQ(te[q].staleness, n2);
            w2 += te[q].weight;
            n2++;
        }
    }
    EXPECT_EQ(n2, 2);
    EXPECT_NEAR(w2, 1.0, 1e-12);
    EXPECT_EQ(info.exact, 0);

    /* FR n = 4, s = 1 at t = 5: staleness (1, 0, 1, 0) whoever arrives. */
    auto fr = make_code(GCX_CODE_FR, 4, 1);
    ASSERT_TRUE(fr);
    auto pf = make_pgc(fr.get());
    ASSERT_TRUE(pf);
    for (uint64_t f : {0b0101, 0b1010, 0b0110, 0b1001}) {
        double af[4];
        gcx_pgc_term_t tf[8];
        ASSERT_EQ(gcx_pgc_decode(pf.get(), 5, ws(f), af, tf, &info), GCX_OK);
        ASSERT_EQ(info.nterms, 4);
        EXPECT_EQ(info.exact, 1);
        for (int j = 0; j < 4; j++) {
            EXPECT_EQ(tf[j].partition, j);
            EXPECT_EQ(tf[j].staleness, j % 2 == 0 ? 1 : 0);
        }
    }
}

TEST(CodingPipelined, FractionalRepetitionIsExact)
{
    std::mt19937_64 rng(31);
    /* (s + 1) | n or not: the groups of an FR code fit in one period */
    for (int n : {2, 4, 5, 6, 7, 8, 11, 12}) {
        for (int s = 1; s <= 3; s++) {
            if (s < n) {
                simulate(GCX_CODE_FR, GCX_CODE_DECODE_EXACT, n, s,
                         Expect::kSingle, rng);
            }
        }
    }
    simulate(GCX_CODE_UNCODED, GCX_CODE_DECODE_EXACT, 5, 0, Expect::kSingle,
             rng);
}

TEST(CodingPipelined, ExactCyclicRepetition)
{
    std::mt19937_64 rng(32);
    for (int n = 3; n <= 12; n++) {
        for (int s = 1; s <= std::min(3, n - 1); s++) {
            simulate(GCX_CODE_CR, GCX_CODE_DECODE_EXACT, n, s,
                     n % (s + 1) == 0 ? Expect::kSingle : Expect::kAffine, rng);
        }
    }
}

TEST(CodingPipelined, WeightedCyclicRepetition)
{
    std::mt19937_64 rng(33);
    for (int n = 3; n <= 12; n++) {
        for (int s = 1; s <= std::min(3, n - 1); s++) {
            simulate(GCX_CODE_CR, GCX_CODE_DECODE_WEIGHTED, n, s,
                     Expect::kWeighted, rng);
        }
    }
}

/* A caller matrix with a short row: its worker idles in the free slot. */
TEST(CodingPipelined, CallerMatrixWithIdleSlot)
{
    std::vector<double> m = {1, 1, 0, 0, 1, 0, 1, 0, 1};
    auto p = params(GCX_CODE_MATRIX, 3, 1);
    p.matrix = m.data();
    auto c = make_code(p);
    ASSERT_TRUE(c);
    auto pg = make_pgc(c.get());
    ASSERT_TRUE(pg);
    ASSERT_EQ(gcx_pgc_period(pg.get()), 2);
    int sl[2];
    ASSERT_EQ(gcx_pgc_slots(pg.get(), 1, sl), GCX_OK);
    EXPECT_EQ(sl[0], -1);
    EXPECT_EQ(sl[1], 1);
    int l, j, st[2];
    double co[2];
    ASSERT_EQ(gcx_pgc_compute(pg.get(), 1, 6, &l, &j), GCX_OK);
    EXPECT_EQ(l, 0);
    EXPECT_EQ(j, -1);
    ASSERT_EQ(gcx_pgc_coeffs(pg.get(), 1, 6, co), GCX_OK);
    EXPECT_EQ(co[0], 0.0);
    EXPECT_EQ(co[1], 1.0);
    ASSERT_EQ(gcx_pgc_staleness(pg.get(), 1, 6, st), GCX_OK);
    EXPECT_EQ(st[0], -1);
    EXPECT_EQ(st[1], 1);
}

TEST(CodingPipelined, Errors)
{
    gcx_pgc_t *p = nullptr;
    EXPECT_EQ(gcx_pgc_create(nullptr, &p), GCX_ERR_INVALID);
    auto c = make_code(GCX_CODE_CR, 5, 1);
    ASSERT_TRUE(c);
    EXPECT_EQ(gcx_pgc_create(c.get(), nullptr), GCX_ERR_INVALID);
    auto pg = make_pgc(c.get());
    ASSERT_TRUE(pg);
    int l, j, sl[2];
    double a[5];
    gcx_pgc_info_t info;
    info.nterms = 77;
    EXPECT_EQ(gcx_pgc_compute(pg.get(), 5, 0, &l, &j), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_compute(pg.get(), 0, -1, &l, &j), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_slots(pg.get(), -1, sl), GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_decode(pg.get(), 3, ws(0b00011), a, nullptr, &info),
              GCX_ERR_UNDECODABLE);
    EXPECT_EQ(info.nterms, 77) << "output written on failure";
    EXPECT_EQ(gcx_pgc_decode(pg.get(), 3, ws(0b11110), a, nullptr, nullptr),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_decode(pg.get(), 3, ws(0b11110), a, nullptr, &info),
              GCX_OK);
    EXPECT_EQ(info.missing, 0);
    gcx_pgc_destroy(nullptr);
    gcx_code_destroy(nullptr);
}

/* gcx_pgc_message_valid(): valid after normal steps (the warm-up too);
 * after a skipped step, invalid for exactly the steps whose coefficients
 * read the skipped slot, until it is recomputed. */
TEST(CodingPipelined, MessageValidity)
{
    struct Case {
        gcx_code_kind_t kind;
        int n, s;
    };
    for (Case cs : {Case{GCX_CODE_FR, 4, 1}, Case{GCX_CODE_FR, 6, 2},
                    Case{GCX_CODE_CR, 5, 2}, Case{GCX_CODE_CR, 4, 3}}) {
        SCOPED_TRACE(testing::Message() << "kind " << cs.kind << " n " << cs.n
                                        << " s " << cs.s);
        auto c = make_code(cs.kind, cs.n, cs.s);
        ASSERT_TRUE(c);
        auto pg = make_pgc(c.get());
        ASSERT_TRUE(pg);
        const int P = gcx_pgc_period(pg.get());
        const int T = 6 * P + 3;
        for (int i = 0; i < cs.n; i++) {
            /* skip = -1: no skipped step; else every step once */
            for (int skip = -1; skip < T; skip++) {
                std::vector<int64_t> steps(P, -1);
                for (int64_t t = 0; t < T; t++) {
                    int l = -1, j = -1, valid = -1;
                    ASSERT_EQ(gcx_pgc_compute(pg.get(), i, t, &l, &j), GCX_OK);
                    if (t == skip) {
                        continue; /* computed nothing, sent nothing */
                    }
                    steps[l] = t;
                    ASSERT_EQ(gcx_pgc_message_valid(pg.get(), i, t,
                                                    steps.data(), &valid),
                              GCX_OK);
                    /* the skipped slot is read at steps skip+1 .. skip+P-1
                     * (coefficients are nonzero once computed, for FR and
                     * CR), and recomputed at skip+P */
                    const bool reads_skipped =
                        skip >= 0 && t > skip && t < skip + P;
                    EXPECT_EQ(valid, reads_skipped ? 0 : 1)
                        << "worker " << i << " skip " << skip << " step "
                        << t;
                }
            }
        }
    }
}

/* Only slots with a nonzero coefficient are checked: the idle slot of a
 * short MATRIX row, and slots not computed yet in the warm-up. */
TEST(CodingPipelined, MessageValidityIgnoresUnreadSlots)
{
    std::vector<double> m = {1, 1, 0, 0, 1, 0, 1, 0, 1};
    auto p = params(GCX_CODE_MATRIX, 3, 1);
    p.matrix = m.data();
    auto c = make_code(p);
    ASSERT_TRUE(c);
    auto pg = make_pgc(c.get());
    ASSERT_TRUE(pg);
    int valid = -1;
    /* worker 1: slot 0 idle, slot 1 holds partition 1 */
    int64_t steps[2] = {-1, 5};
    ASSERT_EQ(gcx_pgc_message_valid(pg.get(), 1, 6, steps, &valid), GCX_OK);
    EXPECT_EQ(valid, 1);
    steps[1] = 3;
    ASSERT_EQ(gcx_pgc_message_valid(pg.get(), 1, 6, steps, &valid), GCX_OK);
    EXPECT_EQ(valid, 0);
    /* warm-up: at step 0 only slot 0 is read */
    int64_t warm[2] = {0, -1};
    ASSERT_EQ(gcx_pgc_message_valid(pg.get(), 0, 0, warm, &valid), GCX_OK);
    EXPECT_EQ(valid, 1);
    warm[0] = -1;
    ASSERT_EQ(gcx_pgc_message_valid(pg.get(), 0, 0, warm, &valid), GCX_OK);
    EXPECT_EQ(valid, 0) << "slot 0 never computed";
    /* a slot computed at a later step than the schedule says is wrong too */
    int64_t ahead[2] = {8, 7};
    ASSERT_EQ(gcx_pgc_message_valid(pg.get(), 0, 7, ahead, &valid), GCX_OK);
    EXPECT_EQ(valid, 0);
}

TEST(CodingPipelined, MessageValidityErrors)
{
    auto c = make_code(GCX_CODE_FR, 4, 1);
    ASSERT_TRUE(c);
    auto pg = make_pgc(c.get());
    ASSERT_TRUE(pg);
    int64_t steps[2] = {0, 1};
    int valid = 7;
    EXPECT_EQ(gcx_pgc_message_valid(nullptr, 0, 1, steps, &valid),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_message_valid(pg.get(), -1, 1, steps, &valid),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_message_valid(pg.get(), 4, 1, steps, &valid),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_message_valid(pg.get(), 0, -1, steps, &valid),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_message_valid(pg.get(), 0, 1, nullptr, &valid),
              GCX_ERR_INVALID);
    EXPECT_EQ(gcx_pgc_message_valid(pg.get(), 0, 1, steps, nullptr),
              GCX_ERR_INVALID);
    EXPECT_EQ(valid, 7) << "output written on failure";
    ASSERT_EQ(gcx_pgc_message_valid(pg.get(), 0, 1, steps, &valid), GCX_OK);
    EXPECT_EQ(valid, 1);
}
