/* test_attn_q8.c — attention over a Q8_0 K cache (ops.h loom_ops_attn_heads_q8) and the Hadamard rotation
 * before it (loom_ops_fwht): in each float-order profile every kernel set's variant bitwise the scalar one in
 * both orders, over query groups, KV lengths around the 16- and 64-lane blocks and several head sizes; the
 * avx512 profile's scalar kernel equal to its definition (Q8_0 dots, then the F16 V part of loom_ops_attn_softmax_v); the rotation against Sylvester's
 * Hadamard matrix computed in double (ggml_gen_hadamard's matrix: H[i][j] = (-1)^popcount(i & j) / sqrt(n))
 * and its known values; on the synthetic micro model (head size 64: rotated), a session with a Q8_0 K cache
 * partition invariant in CANONICAL numerics (one batch = token by token = two requests, bitwise), decoded with
 * another sequence as alone, its state bytes, refusals of other K types, of a decode step mixing K types and of a
 * state file saved with the other K type. Prints "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/blocks.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/protos.h"
#include "loom.h"
#include "test.h"
#include "test_rng.h"
#include "util/fp16.h"
#include "model_fixture.h"

enum { NMAX = 2100, DMAX = 256, QMAX = LOOM_OPS_ATTN_ROWS, ROW8 = DMAX / 32 * 34 };

static unsigned char K8[NMAX * 2 * ROW8]; /* two KV heads' rows interleaved, as the session stores them */
static uint16_t V[DMAX * NMAX];
static unsigned char Q8[QMAX * ROW8];
static float scores[QMAX * NMAX], out[QMAX * DMAX], want[QMAX * DMAX], got[QMAX * DMAX];
static uint16_t probs[QMAX * NMAX];

/* Random K rows (quantized), V and query rows (quantized) of head size hd; spread scales the scores. */
static void fill(int hd, int64_t n, float spread)
{
    float row[DMAX];
    int64_t row8 = hd / 32 * 34;
    for (int64_t p = 0; p < 2 * n; p++) {
        for (int i = 0; i < hd; i++)
            row[i] = rnd_f() * spread;
        loom_q8_0_from_float(row, K8 + p * row8, hd);
    }
    for (int64_t i = 0; i < (int64_t)hd * n; i++)
        V[i] = loom_f32_to_f16(rnd_f());
    for (int g = 0; g < QMAX; g++) {
        for (int i = 0; i < hd; i++)
            row[i] = rnd_f();
        loom_q8_0_from_float(row, Q8 + g * row8, hd);
    }
}

/* The scalar kernel against its definition, then every available set's variant against the scalar kernel. */
static void check_group(int n_q, const int64_t *n_kv, int hd, float spread)
{
    int64_t n = 0, row8 = hd / 32 * 34;
    for (int g = 0; g < n_q; g++)
        n = n_kv[g] > n ? n_kv[g] : n;
    fill(hd, n, spread);
    const unsigned char *k = K8 + row8; /* the second KV head: stride two rows */
    float sc = 1.0f / sqrtf((float)hd);
    for (int o = 0; o < 2; o++) {
        enum loom_attn_order order = o ? LOOM_ATTN_ORDER_SINGLE : LOOM_ATTN_ORDER_BATCH;
        /* the active profile's scalar kernel; in the avx512 profile also against its definition */
        loom_kernels_for(LOOM_KERNELS_SCALAR)->ops.attn_heads_q8(n_q, n_kv, hd, Q8, k, 2 * row8, V, n, hd, sc, order,
                                                                 scores, probs, NMAX, got, DMAX);
        int same = 1;
        if (loom_orders_active() == LOOM_ORDERS_AVX512) {
            for (int g = 0; g < n_q; g++) {
                for (int64_t p = 0; p < n_kv[g]; p++)
                    loom_q8_0_vec_dot(hd, &scores[p], k + p * 2 * row8, Q8 + g * row8);
                loom_ops_attn_softmax_v(n_kv[g], scores, sc, probs, V, n, hd, order, want + g * DMAX);
            }
            for (int g = 0; g < n_q; g++)
                same &= memcmp(got + g * DMAX, want + g * DMAX, (size_t)hd * sizeof(float)) == 0;
            CHECK(same, "scalar q8 attention (n_q %d, n_kv[0] %lld, hd %d, order %d) differs from its definition",
                  n_q, (long long)n_kv[0], hd, o);
        }
        static const enum loom_kernel_mode modes[] = {LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            const struct loom_kernel_set *set = loom_kernels_for(modes[m]);
            if (!set)
                continue;
            memset(out, 0xff, sizeof out);
            set->ops.attn_heads_q8(n_q, n_kv, hd, Q8, k, 2 * row8, V, n, hd, sc, order, scores, probs, NMAX, out,
                                   DMAX);
            same = 1;
            for (int g = 0; g < n_q; g++)
                same &= memcmp(out + g * DMAX, got + g * DMAX, (size_t)hd * sizeof(float)) == 0;
            CHECK(same, "%s q8 attention (n_q %d, n_kv[0] %lld, hd %d, order %d) differs from the scalar kernel",
                  set->name, n_q, (long long)n_kv[0], hd, o);
        }
    }
}

static void test_attention(void)
{
    check_group(1, (const int64_t[]){1}, 64, 1.0f);
    check_group(1, (const int64_t[]){16}, 256, 2.0f);
    check_group(4, (const int64_t[]){15, 16, 17, 18}, 128, 2.0f);
    check_group(4, (const int64_t[]){63, 64, 65, 66}, 256, 2.0f);
    check_group(3, (const int64_t[]){127, 128, 129}, 32, 3.0f);
    check_group(16, (const int64_t[]){5, 6, 7, 8, 300, 301, 302, 303, 1500, 17, 1024, 1023, 64, 65, 2100, 1}, 256,
                2.0f);
    check_group(2, (const int64_t[]){300, 299}, 256, 40.0f); /* scores far apart: zero probabilities */
    check_group(8, (const int64_t[]){513, 514, 515, 516, 517, 518, 519, 520}, 96, 1.0f);
}

/* Sylvester's Hadamard matrix entry, normalized. */
static double hadamard(int n, int i, int j)
{
    return (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) / sqrt(n);
}

static void test_fwht(void)
{
    static const int sizes[] = {64, 128, 256, 512};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float x[512], y[512];
        for (int i = 0; i < n; i++)
            x[i] = y[i] = rnd_f() * 4.0f;
        loom_ops_fwht(n, y);
        double err = 0, norm_x = 0, norm_y = 0;
        for (int i = 0; i < n; i++) {
            double e = 0;
            for (int j = 0; j < n; j++)
                e += hadamard(n, i, j) * x[j];
            err = fmax(err, fabs(e - y[i]));
            norm_x += (double)x[i] * x[i];
            norm_y += (double)y[i] * y[i];
        }
        CHECK(err < 1e-5, "fwht %d: max |H x - fwht(x)| = %g", n, err);
        CHECK(fabs(norm_x - norm_y) < 1e-4 * norm_x, "fwht %d keeps the norm: %g vs %g", n, norm_x, norm_y);
        loom_ops_fwht(n, y); /* the rotation is its own inverse */
        double back = 0;
        for (int i = 0; i < n; i++)
            back = fmax(back, fabs((double)y[i] - x[i]));
        CHECK(back < 1e-5, "fwht %d twice: max |x - fwht(fwht(x))| = %g", n, back);
    }
    /* exact values: a unit vector spreads to +-1/sqrt(n) (0.125 for 64: one product, then exact sums) */
    float e[64] = {0};
    e[5] = 1.0f;
    loom_ops_fwht(64, e);
    int exact = 1;
    for (int i = 0; i < 64; i++)
        exact &= e[i] == (__builtin_popcount((unsigned)(i & 5)) & 1 ? -0.125f : 0.125f);
    CHECK(exact, "fwht of e_5 over 64 is +-0.125 by Sylvester's signs");
}

static loom_session *session(const loom_model *m, enum loom_kv_type k_type, loom_error *err)
{
    loom_session_params p = {.n_ctx = 64, .n_threads = 2, .k_type = k_type};
    return loom_session_new(m, &p, err);
}

enum { NT = 40 };

/* A Q8_0 K session's rows: one batch, token by token and two requests, bitwise the same. */
static void check_partitions(const loom_model *m, const int32_t *tok, int nv, float *all, float *row)
{
    loom_error err = {0};
    loom_session *a = session(m, LOOM_KV_Q8_0, &err), *b = session(m, LOOM_KV_Q8_0, &err);
    CHECK(a && b, "Q8_0 K sessions: %s", err.msg);
    if (!a || !b) {
        loom_session_free(a);
        loom_session_free(b);
        return;
    }
    int rc = loom_session_eval(a, tok, NT, all, LOOM_LOGITS_ALL, &err), bad = 0;
    for (int t = 0; t < NT && rc == LOOM_OK; t++) {
        rc = loom_session_eval(b, tok + t, 1, row, LOOM_LOGITS_LAST, &err);
        bad += memcmp(row, all + (size_t)t * nv, (size_t)nv * sizeof(float)) != 0;
    }
    CHECK(rc == LOOM_OK && bad == 0, "Q8_0 K: %d of %d token-by-token rows differ from the batch's (%s)", bad, NT,
          err.msg);
    loom_session_reset(b);
    rc = loom_session_eval(b, tok, 17, NULL, LOOM_LOGITS_LAST, &err);
    rc |= loom_session_eval(b, tok + 17, NT - 17, row, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK && memcmp(row, all + (size_t)(NT - 1) * nv, (size_t)nv * sizeof(float)) == 0,
          "Q8_0 K: two requests' last row differs from the batch's");
    loom_session *f = session(m, LOOM_KV_F16, &err);
    CHECK(f != NULL, "F16 session: %s", err.msg);
    if (f) {
        /* one attention layer, one KV head of 64: K 128 B in F16, 2 blocks = 68 B in Q8_0, per position */
        CHECK(loom_session_state_bytes(f) - loom_session_state_bytes(a) == 64 * (128 - 68),
              "state bytes: F16 K %llu, Q8_0 K %llu", (unsigned long long)loom_session_state_bytes(f),
              (unsigned long long)loom_session_state_bytes(a));
        rc = loom_session_eval(f, tok, NT, NULL, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_OK && memcmp(loom_session_last_logits(f), row, (size_t)nv * sizeof(float)) != 0,
              "the K type changes the logits");
    }
    char path[] = "/tmp/loom-test-attn-q8-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0 && f) {
        close(fd);
        CHECK(loom_session_save(a, path, &err) == LOOM_OK, "save: %s", err.msg);
        loom_error e2 = {0};
        CHECK(loom_session_restore(f, path, &e2) == LOOM_E_FORMAT &&
                  strstr(e2.msg, "saved with K cache type q8_0, this session's is f16"),
              "restore across K types: '%s'", e2.msg);
        CHECK(loom_session_save(f, path, &err) == LOOM_OK && loom_session_restore(a, path, &e2) == LOOM_E_FORMAT &&
                  strstr(e2.msg, "saved with K cache type f16, this session's is q8_0"),
              "restore across K types: '%s'", e2.msg);
        unlink(path);
    }
    loom_session_free(f);
    loom_session_free(a);
    loom_session_free(b);
}

/* Two Q8_0 K sessions decoded in one step give their solo rows bitwise; a step mixing K types is refused. */
static void check_multi(const loom_model *m, const int32_t *tok, int nv, float *two, float *row)
{
    loom_error err = {0};
    loom_session *s[3] = {session(m, LOOM_KV_Q8_0, &err), session(m, LOOM_KV_Q8_0, &err),
                          session(m, LOOM_KV_F16, &err)};
    CHECK(s[0] && s[1] && s[2], "sessions: %s", err.msg);
    if (s[0] && s[1] && s[2]) {
        int rc = loom_session_eval(s[0], tok, 10, NULL, LOOM_LOGITS_LAST, &err);
        rc |= loom_session_eval(s[1], tok + 3, 21, NULL, LOOM_LOGITS_LAST, &err);
        int32_t next[2] = {tok[30], tok[31]};
        rc |= loom_sessions_decode(s, next, 2, two, &err);
        CHECK(rc == LOOM_OK, "multi decode: %s", err.msg);
        loom_session *solo = session(m, LOOM_KV_Q8_0, &err);
        rc = !solo || loom_session_eval(solo, tok + 3, 21, NULL, LOOM_LOGITS_LAST, &err) ||
             loom_session_eval(solo, next + 1, 1, row, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_OK && memcmp(row, two + nv, (size_t)nv * sizeof(float)) == 0,
              "Q8_0 K: a sequence decoded with another is not its solo row");
        loom_session_free(solo);
        loom_error e2 = {0};
        loom_session *mixed[2] = {s[0], s[2]};
        CHECK(loom_sessions_decode(mixed, next, 2, two, &e2) == LOOM_E_ARG &&
                  strstr(e2.msg, "decode session 1: expected the first one's K cache type q8_0, found f16"),
              "mixed K types refused: '%s'", e2.msg);
    }
    for (int i = 0; i < 3; i++)
        loom_session_free(s[i]);
}

static void test_session(void)
{
    char dir[] = "/tmp/loom-test-attn-q8-XXXXXX", vocab[64], path[64];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    snprintf(path, sizeof path, "%s/micro.gguf", dir);
    loom_model *m = NULL;
    if (write_mini_vocab(vocab) == LOOM_OK && (m = load_micro_model(vocab, path, LOOM_TYPE_F32, 7))) {
        int nv = loom_model_n_logits(m);
        int32_t tok[NT];
        for (int i = 0; i < NT; i++)
            tok[i] = (int32_t)((i * 41 + 5) % MINI_TOKENS);
        float *all = malloc(sizeof(float) * (size_t)NT * nv), *row = malloc(sizeof(float) * (size_t)nv);
        if (all && row) {
            check_partitions(m, tok, nv, all, row);
            check_multi(m, tok, nv, all, row);
        }
        free(all);
        free(row);
        loom_error err = {0};
        loom_session *bad = session(m, (enum loom_kv_type)5, &err);
        CHECK(!bad && err.code == LOOM_E_ARG && strstr(err.msg, "k_type: expected LOOM_KV_F16 (0) or LOOM_KV_Q8_0 (1), "
                                                                "found 5"),
              "k_type 5 refused: '%s'", err.msg);
        enum loom_kv_type t = LOOM_KV_F16;
        CHECK(loom_kv_type_parse("Q8_0", &t, &err) == LOOM_OK && t == LOOM_KV_Q8_0 &&
                  loom_kv_type_parse("q4_0", &t, &err) == LOOM_E_ARG && strstr(err.msg, "found 'q4_0'"),
              "loom_kv_type_parse: '%s'", err.msg);
    }
    loom_model_free(m);
    unlink(vocab);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const enum loom_orders profiles[] = {LOOM_ORDERS_AVX512, LOOM_ORDERS_HASWELL};
    for (size_t o = 0; o < sizeof profiles / sizeof profiles[0]; o++) { /* each float-order profile */
        loom_error err;
        CHECK(loom_orders_select(profiles[o], &err) == LOOM_OK, "float-order profile %d: %s", (int)profiles[o],
              err.msg);
        test_attention();
    }
    CHECK(loom_orders_select(LOOM_ORDERS_AVX512, NULL) == LOOM_OK, "avx512 profile back");
    test_fwht();
    test_session();
    return test_finish();
}
