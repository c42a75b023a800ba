/* test_sample.c — the sampler chain: greedy over sampleable rows, top-k, top-p, min-p, the stage order
 * (temperature last), penalties over a window, logit bias, padding rows never chosen, seeded reproducibility,
 * the temperature-scaled distribution, and exact top-p without top-k over a Qwen3.5-sized logits row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/sample.h"
#include "test.h"

static struct loom_sampler *mk(float temp, int top_k, float top_p, uint64_t seed, int n, const uint8_t *ok)
{
    struct loom_sampler_params p = {.temp = temp, .top_k = top_k, .top_p = top_p, .seed = seed};
    return loom_sampler_new(&p, n, ok, NULL);
}

static void test_greedy(void)
{
    float logits[6] = {1, 9, 3, 3, -1, 2};
    uint8_t ok[6] = {1, 0, 1, 1, 1, 1};
    struct loom_sampler *s = mk(0, 0, 1, 1, 6, ok);
    CHECK(s && loom_sampler_sample(s, logits) == 2, "greedy skips the masked max and takes the lowest tied id");
    logits[0] = NAN;
    CHECK(loom_sampler_sample(s, logits) == 2, "NaN never wins");
    loom_sampler_free(s);
    uint8_t none[6] = {0};
    s = mk(0, 0, 1, 1, 6, none);
    CHECK(loom_sampler_sample(s, logits) == -1, "nothing sampleable: -1");
    loom_sampler_free(s);
    s = mk(1, 0, 1, 1, 6, none);
    CHECK(loom_sampler_sample(s, logits) == -1, "nothing sampleable with temperature: -1");
    loom_sampler_free(s);
    float spread[6] = {-3e38f, 1, 2, 0, -1, 2.5f};
    for (int k = 0; k < 3; k++) {
        s = mk(1e-30f, k == 2 ? 2 : 0, k == 0 ? 1.0f : 0.9f, 1, 6, ok); /* x = logit / temp overflows */
        CHECK(loom_sampler_sample(s, spread) == 5, "tiny temperature (case %d) picks the argmax", k);
        loom_sampler_free(s);
    }
    CHECK(mk(1, 0, 1, 1, 0, ok) == NULL && mk(1, 0, 1, 1, 6, NULL) == NULL, "invalid arguments give NULL");
}

/* Draw n times; counts[id]++ for each. */
static void draw_many(struct loom_sampler *s, const float *logits, int n, int *counts)
{
    for (int i = 0; i < n; i++) {
        int32_t id = loom_sampler_sample(s, logits);
        if (id >= 0)
            counts[id]++;
    }
}

static void test_top_p(void)
{
    const float probs[4] = {0.3f, 0.1f, 0.1f, 0.5f};
    float logits[4];
    uint8_t ok[4] = {1, 1, 1, 1};
    for (int i = 0; i < 4; i++)
        logits[i] = logf(probs[i]);
    const int top_ks[3] = {0, 3, 4}; /* no limit (pruning path), a real top-k (sorted path), k = n */
    for (int t = 0; t < 3; t++) {
        struct loom_sampler *s = mk(1, top_ks[t], 0.8f, 42 + (uint64_t)t, 4, ok);
        int counts[4] = {0};
        draw_many(s, logits, 4000, counts);
        CHECK(counts[1] == 0 && counts[2] == 0 && counts[0] > 0 && counts[3] > 0,
              "top_k %d, top-p 0.8 keeps exactly {3, 0}: %d %d %d %d", top_ks[t], counts[0], counts[1], counts[2],
              counts[3]);
        double f3 = counts[3] / 4000.0;
        CHECK(fabs(f3 - 0.625) < 0.03, "renormalized share of id 3: %.3f (want 0.625)", f3);
        loom_sampler_free(s);
    }
    const float tiny[3] = {0.05f, 1e-8f, 0};
    for (int t = 0; t < 3; t++) {
        struct loom_sampler *s = mk(1, 0, tiny[t], 1, 4, ok);
        int counts[4] = {0};
        draw_many(s, logits, 200, counts);
        CHECK(counts[3] == 200, "tiny p %g keeps only the argmax", (double)tiny[t]);
        loom_sampler_free(s);
    }
    struct loom_sampler *s = mk(1, 1, 0.8f, 1, 4, ok);
    int counts[4] = {0};
    draw_many(s, logits, 200, counts);
    CHECK(counts[3] == 200, "top-k 1 with top-p 0.8 picks the argmax");
    loom_sampler_free(s);
    s = mk(1, 0, 1, 2, 4, ok);
    memset(counts, 0, sizeof counts);
    draw_many(s, logits, 4000, counts);
    CHECK(counts[0] > 0 && counts[1] > 0 && counts[2] > 0 && counts[3] > 0, "top-k 0 is no limit: %d %d %d %d",
          counts[0], counts[1], counts[2], counts[3]);
    loom_sampler_free(s);
    /* llama.cpp order: top-p sees the untempered distribution, so a hot temperature keeps the same {3, 0} */
    s = mk(3, 0, 0.8f, 3, 4, ok);
    memset(counts, 0, sizeof counts);
    draw_many(s, logits, 4000, counts);
    double want = pow(0.5, 1 / 3.0) / (pow(0.5, 1 / 3.0) + pow(0.3, 1 / 3.0));
    CHECK(counts[1] == 0 && counts[2] == 0 && fabs(counts[3] / 4000.0 - want) < 0.03,
          "temperature 3 after top-p 0.8: %d %d %d %d (share of 3 want %.3f)", counts[0], counts[1], counts[2],
          counts[3], want);
    loom_sampler_free(s);
}

static void test_min_p(void)
{
    const float probs[5] = {0.1f, 0.5f, 0.15f, 0.05f, 0.2f};
    float logits[5];
    uint8_t ok[5] = {1, 1, 1, 1, 1};
    for (int i = 0; i < 5; i++)
        logits[i] = logf(probs[i]);
    const float temps[2] = {1, 2};
    for (int t = 0; t < 2; t++) {
        /* threshold 0.35 * 0.5 = 0.175: keeps {1, 4}, at either temperature (min-p runs before it) */
        struct loom_sampler_params p = {.temp = temps[t], .top_p = 1, .min_p = 0.35f, .seed = 8};
        struct loom_sampler *s = loom_sampler_new(&p, 5, ok, NULL);
        int counts[5] = {0};
        draw_many(s, logits, 4000, counts);
        double want = pow(0.5, 1 / temps[t]) / (pow(0.5, 1 / temps[t]) + pow(0.2, 1 / temps[t]));
        CHECK(counts[0] == 0 && counts[2] == 0 && counts[3] == 0 && fabs(counts[1] / 4000.0 - want) < 0.03,
              "min-p 0.35 at temp %.0f keeps exactly {1, 4}: %d %d %d %d %d (share of 1 want %.3f)", temps[t],
              counts[0], counts[1], counts[2], counts[3], counts[4], want);
        loom_sampler_free(s);
    }
    struct loom_sampler_params p = {.temp = 1, .top_p = 1, .min_p = 0.25f, .seed = 8};
    struct loom_sampler *s = loom_sampler_new(&p, 5, ok, NULL);
    int counts[5] = {0};
    draw_many(s, logits, 4000, counts);
    CHECK(counts[0] == 0 && counts[3] == 0 && counts[1] && counts[2] && counts[4],
          "min-p 0.25 keeps exactly {1, 2, 4}: %d %d %d %d %d", counts[0], counts[1], counts[2], counts[3], counts[4]);
    loom_sampler_free(s);
}

static void test_penalties(void)
{
    struct loom_sampler_params p = {.repeat_penalty = 1.5f, .repeat_last_n = 64};
    float a = loom_sampler_penalize(&p, 2.0f, 1), b = loom_sampler_penalize(&p, -2.0f, 1);
    CHECK(fabsf(a - 4.0f / 3.0f) < 1e-6f && b == -3.0f, "repetition 1.5: 2 -> %.6f, -2 -> %.6f", a, b);
    CHECK(loom_sampler_penalize(&p, 2.0f, 0) == 2.0f, "a token outside the window is untouched");
    struct loom_sampler_params q = {.repeat_penalty = 1, .repeat_last_n = 8, .presence_penalty = 0.5f,
                                    .frequency_penalty = 0.1f};
    float c = loom_sampler_penalize(&q, 1.0f, 3);
    CHECK(fabsf(c - 0.2f) < 1e-6f, "presence 0.5 + 3 x frequency 0.1: 1 -> %.6f (want 0.2)", c);

    /* through the sampler, greedy: id 0 leads until accepted, then 2.0 / 1.5 < 1.4 */
    float logits[3] = {2.0f, 1.4f, -5};
    uint8_t ok[3] = {1, 1, 1};
    struct loom_sampler_params g = {.temp = 0, .top_p = 1, .repeat_penalty = 1.5f, .repeat_last_n = 2};
    struct loom_sampler *s = loom_sampler_new(&g, 3, ok, NULL);
    CHECK(s && loom_sampler_sample(s, logits) == 0, "no window yet: argmax");
    loom_sampler_accept(s, 0);
    CHECK(loom_sampler_sample(s, logits) == 1, "after accepting 0, 2.0 -> 1.333 loses to 1.4");
    loom_sampler_accept(s, 2);
    loom_sampler_accept(s, 2);
    CHECK(loom_sampler_sample(s, logits) == 0, "0 left the window of 2");
    loom_sampler_accept(s, 0);
    loom_sampler_accept(s, -1);
    loom_sampler_accept(s, 3);
    CHECK(loom_sampler_sample(s, logits) == 1, "0 is back in the window; out-of-range ids are ignored");
    loom_sampler_reset(s);
    CHECK(loom_sampler_sample(s, logits) == 0, "reset empties the window");
    loom_sampler_free(s);
    float neg[2] = {-2.0f, -2.9f};
    s = loom_sampler_new(&g, 2, ok, NULL);
    loom_sampler_accept(s, 0);
    CHECK(loom_sampler_sample(s, neg) == 1, "negative logits are multiplied: -2.0 -> -3.0 loses to -2.9");
    loom_sampler_free(s);
}

static void test_logit_bias(void)
{
    float logits[4] = {1, 3, 2, 0};
    uint8_t ok[4] = {1, 1, 1, 1};
    struct loom_logit_bias ban[2] = {{1, -INFINITY}, {3, 1.5f}};
    struct loom_sampler_params p = {.temp = 0, .top_p = 1, .bias = ban, .n_bias = 1};
    struct loom_sampler *s = loom_sampler_new(&p, 4, ok, NULL);
    CHECK(s && loom_sampler_sample(s, logits) == 2, "a banned argmax gives way");
    loom_sampler_free(s);
    p.n_bias = 2;
    ban[1].bias = 2.5f; /* biases are copied at creation */
    s = loom_sampler_new(&p, 4, ok, NULL);
    ban[1].bias = 0;
    CHECK(s && loom_sampler_sample(s, logits) == 3, "bias +2.5 lifts id 3 to the top");
    loom_sampler_free(s);
    p.temp = 1;
    p.n_bias = 1;
    s = loom_sampler_new(&p, 4, ok, NULL);
    int counts[4] = {0};
    draw_many(s, logits, 2000, counts);
    CHECK(counts[1] == 0 && counts[0] && counts[2] && counts[3], "a banned token is never drawn");
    loom_sampler_free(s);
    struct loom_logit_bias bad = {4, 1};
    struct loom_sampler_params pb = {.top_p = 1, .bias = &bad, .n_bias = 1};
    struct loom_sampler_params pp = {.top_p = 1.5f}, pm = {.top_p = 1, .min_p = -0.1f}, pr = {.top_p = 1,
                                                                                             .repeat_last_n = -1};
    CHECK(!loom_sampler_new(&pb, 4, ok, NULL) && !loom_sampler_new(&pp, 4, ok, NULL) && !loom_sampler_new(&pm, 4, ok, NULL) &&
              !loom_sampler_new(&pr, 4, ok, NULL),
          "invalid parameters give NULL");
}

/* The largest logits sit on padding rows (past the vocabulary) and an UNUSED row: no configuration returns them. */
static void test_padding_rows(void)
{
    enum { N = 12, N_VOCAB = 9 };
    float logits[N] = {0.5f, 1, -1, 2, 0.25f, 3, -2, 1.5f, 0, 50, 60, 70};
    uint8_t ok[N] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
    ok[4] = 0;   /* an UNUSED token inside the vocabulary */
    logits[4] = 40;
    const float temps[4] = {0, 0.5f, 1, 4}, top_ps[3] = {1, 0.5f, 0}, min_ps[2] = {0, 0.2f};
    const int top_ks[4] = {0, 1, 3, N};
    int bad = 0, runs = 0;
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 4; k++)
            for (int pi = 0; pi < 3; pi++)
                for (int mi = 0; mi < 2; mi++)
                    for (int pen = 0; pen < 2; pen++) {
                        struct loom_sampler_params p = {.temp = temps[t], .top_k = top_ks[k], .top_p = top_ps[pi],
                                                        .min_p = min_ps[mi], .seed = (uint64_t)runs,
                                                        .repeat_penalty = pen ? 1.3f : 1, .repeat_last_n = 4,
                                                        .presence_penalty = pen ? 0.5f : 0};
                        struct loom_sampler *s = loom_sampler_new(&p, N, ok, NULL);
                        for (int d = 0; d < 20; d++) {
                            int32_t id = loom_sampler_sample(s, logits);
                            bad += id < 0 || id >= N_VOCAB || !ok[id];
                            loom_sampler_accept(s, id);
                            loom_sampler_accept(s, N - 1); /* a padding id in the window changes nothing */
                        }
                        loom_sampler_free(s);
                        runs++;
                    }
    CHECK(bad == 0, "%d of %d draws over %d configurations returned a padding or UNUSED row", bad, runs * 20, runs);
}

static void test_top_k_and_seed(void)
{
    enum { N = 1000 };
    static float logits[N];
    static uint8_t ok[N];
    uint64_t x = 7;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)(x >> 40) / (float)(1 << 24) * 4.0f;
        ok[i] = 1;
    }
    int argmax = 0;
    for (int i = 1; i < N; i++)
        if (logits[i] > logits[argmax])
            argmax = i;
    struct loom_sampler *s = mk(1.5f, 1, 1, 3, N, ok);
    int same = 1;
    for (int i = 0; i < 100; i++)
        same &= loom_sampler_sample(s, logits) == argmax;
    CHECK(same, "top-k 1 is argmax");
    loom_sampler_free(s);

    struct loom_sampler *a = mk(1, 40, 0.95f, 1234, N, ok), *b = mk(1, 40, 0.95f, 1234, N, ok);
    struct loom_sampler *c = mk(1, 40, 0.95f, 1235, N, ok);
    int eq_ab = 1, eq_ac = 1;
    for (int i = 0; i < 200; i++) {
        int32_t ia = loom_sampler_sample(a, logits), ib = loom_sampler_sample(b, logits);
        eq_ab &= ia == ib;
        eq_ac &= ia == loom_sampler_sample(c, logits);
    }
    CHECK(eq_ab, "the same seed reproduces the same draws");
    CHECK(!eq_ac, "another seed gives other draws");
    loom_sampler_free(a);
    loom_sampler_free(b);
    loom_sampler_free(c);
}

static void test_temperature(void)
{
    const float logits[4] = {0, logf(2), logf(4), 100};
    const uint8_t ok[4] = {1, 1, 1, 0};
    const float temps[2] = {1, 2};
    for (int t = 0; t < 2; t++) {
        struct loom_sampler *s = mk(temps[t], 0, 1, 99, 4, ok);
        int counts[4] = {0};
        draw_many(s, logits, 20000, counts);
        double w[3], z = 0, worst = 0;
        for (int i = 0; i < 3; i++)
            z += w[i] = exp(logits[i] / temps[t]);
        for (int i = 0; i < 3; i++)
            worst = fmax(worst, fabs(counts[i] / 20000.0 - w[i] / z));
        CHECK(counts[3] == 0 && worst < 0.015, "temp %.0f: frequencies within %.4f of softmax", temps[t], worst);
        loom_sampler_free(s);
    }
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Qwen3.5-sized row, top_k 0, top_p 0.9: every draw lies in the brute-force nucleus. spread scales the
 * Gumbel-distributed logits: large is peaked (small nucleus), small is flat (most of the vocabulary). */
static void test_big_vocab(double spread)
{
    enum { N = 248320 };
    float *logits = malloc(N * sizeof *logits), *sorted = malloc(N * sizeof *sorted);
    uint8_t *ok = malloc(N);
    uint64_t x = 11;
    for (int i = 0; i < N; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u = ((x >> 11) + 0.5) * 0x1.0p-53;
        logits[i] = (float)(-log(-log(u)) * spread);
        ok[i] = i < 248044;
        sorted[i] = logits[i];
    }
    int n_ok = 248044;
    qsort(sorted, (size_t)n_ok, sizeof *sorted, cmp_desc); /* ok rows are a prefix of ids */
    double z = 0, acc = 0;
    for (int i = 0; i < n_ok; i++)
        z += exp((double)sorted[i] - sorted[0]);
    int keep = 0;
    while (keep < n_ok && acc < 0.9 * z)
        acc += exp((double)sorted[keep++] - sorted[0]);
    float cutoff = sorted[keep - 1];
    struct loom_sampler *s = mk(1, 0, 0.9f, 5, N, ok);
    int inside = 1;
    clock_t t0 = clock();
    for (int i = 0; i < 50; i++) {
        int32_t id = loom_sampler_sample(s, logits);
        inside &= id >= 0 && id < n_ok && logits[id] >= cutoff;
    }
    double ms = (double)(clock() - t0) / CLOCKS_PER_SEC * 1000 / 50;
    CHECK(inside, "all draws inside the nucleus of %d tokens", keep);
    printf("top-p over %d rows (nucleus %d): %.2f ms per draw\n", N, keep, ms);
    loom_sampler_free(s);
    free(logits);
    free(sorted);
    free(ok);
}

/* One sampler per sequence: a clone draws what its source would (window and generator copied), reseeding restarts
 * the generator, and an invalid parameter is refused naming it. */
static void test_clone_and_seed(void)
{
    float logits[5] = {1, 2, 1.5f, 0.5f, 1.8f};
    uint8_t ok[5] = {1, 1, 1, 1, 1};
    struct loom_sampler_params p = {.temp = 1, .top_p = 1, .seed = 99, .repeat_penalty = 1.3f, .repeat_last_n = 3,
                                    .bias = &(struct loom_logit_bias){4, 0.5f}, .n_bias = 1};
    loom_sampler *a = loom_sampler_new(&p, 5, ok, NULL);
    for (int i = 0; a && i < 7; i++)
        loom_sampler_accept(a, loom_sampler_sample(a, logits));
    loom_sampler *b = a ? loom_sampler_clone(a, NULL) : NULL;
    int same = a && b;
    for (int i = 0; same && i < 50; i++) {
        int32_t ia = loom_sampler_sample(a, logits);
        same &= ia == loom_sampler_sample(b, logits);
        loom_sampler_accept(a, ia);
        loom_sampler_accept(b, ia);
    }
    CHECK(same, "a clone draws what its source draws");
    loom_sampler *c = loom_sampler_new(&p, 5, ok, NULL);
    loom_sampler_seed(a, 99);
    loom_sampler_reset(a);
    same = a && c;
    for (int i = 0; same && i < 50; i++)
        same &= loom_sampler_sample(a, logits) == loom_sampler_sample(c, logits);
    CHECK(same, "reseed + reset: the draws of a fresh sampler");
    loom_sampler_free(a);
    loom_sampler_free(b);
    loom_sampler_free(c);
    loom_error err = {0};
    p.top_k = -2;
    CHECK(!loom_sampler_new(&p, 5, ok, &err) && err.code == LOOM_E_ARG && strstr(err.msg, "top_k"),
          "a negative top_k is refused naming it: %s", err.msg);
}

/* loom_logprobs: the log-softmax over sampleable rows, against a direct computation; the top k most likely first,
 * ties to the lower id, rows not sampleable (and -inf) never listed, fewer rows than k padded with -1. */
static void test_logprobs(void)
{
    const float logits[8] = {1.0f, 3.0f, -INFINITY, 3.0f, 0.5f, 9.0f, -2.0f, 2.0f};
    const uint8_t ok[8] = {1, 1, 1, 1, 1, 0, 1, 1}; /* row 5, the largest logit, is not sampleable */
    double z = 0;
    for (int i = 0; i < 8; i++)
        z += ok[i] && isfinite(logits[i]) ? exp((double)logits[i]) : 0;
    int32_t ids[4];
    float lp[4];
    float got = loom_logprobs(logits, 8, ok, 7, 4, ids, lp);
    CHECK(fabs(got - (2.0 - log(z))) < 1e-6, "log-probability of row 7: %g, expected %g", got, 2.0 - log(z));
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 7 && ids[3] == 0, "top 4: %d %d %d %d", ids[0], ids[1], ids[2],
          ids[3]);
    CHECK(fabs(lp[0] - (3.0 - log(z))) < 1e-6 && lp[0] == lp[1] && lp[3] < lp[2], "top log-probabilities");
    CHECK(loom_logprobs(logits, 8, ok, 5, 0, ids, lp) == -INFINITY && loom_logprobs(logits, 8, ok, 2, 0, ids, lp) ==
          -INFINITY && loom_logprobs(logits, 8, ok, 8, 0, ids, lp) == -INFINITY, "rows that cannot be sampled");
    int32_t many[LOOM_TOP_LOGPROBS_MAX];
    float many_lp[LOOM_TOP_LOGPROBS_MAX];
    loom_logprobs(logits, 8, ok, 0, LOOM_TOP_LOGPROBS_MAX, many, many_lp);
    CHECK(many[5] == 6 && many[6] == -1 && many[LOOM_TOP_LOGPROBS_MAX - 1] == -1, "six rows listed, the rest -1");
}

int main(void)
{
    test_logprobs();
    test_greedy();
    test_top_p();
    test_min_p();
    test_penalties();
    test_logit_bias();
    test_padding_rows();
    test_top_k_and_seed();
    test_temperature();
    test_clone_and_seed();
    test_big_vocab(2.0);
    test_big_vocab(1.0);
    test_big_vocab(0.5);
    return test_finish();
}
