/* test_forward.c — the forward pass: each op of kernels/ops.h against a plain double-precision version
 * written here, then whole-model properties on a synthetic micro model written by the test (batch vs
 * token-by-token, chunked prefill, micro-batch size, thread-count independence and bound, reset, and state
 * published only on success). Bit-exact agreement with llama.cpp is checked by the parity harness, not here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/types.h"
#include "runtime/session.h"
#include "test.h"
#include "model_fixture.h"
#include "test_rng.h"
#include "util/error.h"
#include "util/fp16.h"

/* ---- helpers --------------------------------------------------------------------------------------- */

/* Uniform in [-1, 1), from the top 53 bits of the generator's state. */
static float frand(void) { return (float)((double)(rnd_next() >> 11) / 4503599627370496.0 - 1.0); }

/* The scalar kernels of the active float-order profile: the oracle each variant must equal bitwise. */
static const struct loom_ops_kernels *scalar_ops(void) { return &loom_kernels_for(LOOM_KERNELS_SCALAR)->ops; }

static void fill(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = frand() * scale;
}

static double max_abs_diff(const float *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* ---- ops against double precision ------------------------------------------------------------------ */

static void test_reductions(void)
{
    /* lanes l and l+8 pair first: 2^24 and -2^24 cancel before any 1 is added, so nothing is lost */
    float a[16];
    for (int l = 0; l < 16; l++)
        a[l] = 1.0f;
    a[0] = 16777216.0f;
    a[8] = -16777216.0f;
    CHECK(loom_ops_reduce16(a) == 14.0f, "reduce16 = %g, expected 14 (tree order)", loom_ops_reduce16(a));

    const int64_t sizes[] = {1, 7, 32, 64, 100, 128, 200, 256};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float x[256], y[256];
        uint16_t xh[256], yh[256];
        fill(x, n, 1.0f);
        fill(y, n, 1.0f);
        double ref = 0, mag = 0, refh = 0;
        for (int64_t i = 0; i < n; i++) {
            xh[i] = loom_f32_to_f16(x[i]);
            yh[i] = loom_f32_to_f16(y[i]);
            ref += (double)x[i] * y[i];
            mag += fabs((double)x[i] * y[i]);
            refh += (double)loom_f16_to_f32(xh[i]) * loom_f16_to_f32(yh[i]);
        }
        double tol = 1e-6 * (mag + 1);
        CHECK(fabs(loom_ops_dot_f32(n, x, y) - ref) < tol, "dot_f32 n=%lld: %g vs %g", (long long)n,
              loom_ops_dot_f32(n, x, y), ref);
        CHECK(fabs(loom_ops_dot_f16(n, xh, yh, LOOM_ATTN_ORDER_SINGLE) - refh) < tol, "dot_f16 single n=%lld",
              (long long)n);
        CHECK(fabs(loom_ops_dot_f16(n, xh, yh, LOOM_ATTN_ORDER_BATCH) - refh) < tol, "dot_f16 batch n=%lld",
              (long long)n);
    }
}

static void test_elementwise(void)
{
    double worst = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.0137f) { /* normal results only */
        double e = exp((double)x), r = fabs(loom_ops_expf_poly(x) - e) / e;
        worst = fmax(worst, r);
    }
    CHECK(worst < 3e-7, "expf_poly relative error %g, expected < 3e-7 (1.5 ulp + rounding)", worst);
    CHECK(loom_ops_expf_poly(-200.0f) == 0.0f, "expf_poly(-200) flushes to 0");
    CHECK(isinf(loom_ops_expf_poly(200.0f)), "expf_poly(200) is inf");
    CHECK(isnan(loom_ops_expf_poly(NAN)), "expf_poly(nan) is nan");
    CHECK(loom_ops_expf_poly(-INFINITY) == 0.0f, "expf_poly(-inf) is 0 (masked softmax entries)");

    float x[37], g[37], y[37], z[37];
    fill(x, 37, 8.0f);
    fill(g, 37, 2.0f);
    scalar_ops()->silu(37, x, y);
    scalar_ops()->swiglu(37, x, g, z);
    for (int i = 0; i < 37; i++) {
        double s = (double)x[i] / (1.0 + exp(-(double)x[i]));
        CHECK(fabs(y[i] - s) <= 1e-6 * fabs(s) + 1e-7, "silu(%g) = %g, expected %g", x[i], y[i], s);
        CHECK(fabs(z[i] - s * g[i]) <= 1e-6 * fabs(s * g[i]) + 1e-7, "swiglu %d", i);
    }
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    float y2[37], z2[37];
    ops->silu(37, x, y2);
    ops->swiglu(37, x, g, z2);
    CHECK(memcmp(y, y2, sizeof y) == 0 && memcmp(z, z2, sizeof z) == 0, "silu/swiglu: %s variant differs",
          loom_kernels_name());
    /* the whole range: exp(-x) overflowing (x < -88), subnormal (87 < x < 104) and zero (x > 104), infinities */
    enum { NW = 512 + 7 };
    static float xw[NW], yw[NW], yw2[NW], zw[NW], zw2[NW];
    for (int i = 0; i < NW; i++)
        xw[i] = -160.0f + 320.0f * (float)i / NW;
    xw[3] = INFINITY, xw[4] = -INFINITY, xw[5] = 0.0f, xw[6] = -0.0f;
    scalar_ops()->silu(NW, xw, yw);
    ops->silu(NW, xw, yw2);
    scalar_ops()->swiglu(NW, xw, xw, zw);
    ops->swiglu(NW, xw, xw, zw2);
    CHECK(memcmp(yw, yw2, sizeof yw) == 0 && memcmp(zw, zw2, sizeof zw) == 0,
          "silu/swiglu over [-160, 160] and infinities: %s variant differs", loom_kernels_name());
    const float pts[] = {-30.0f, -3.0f, 0.0f, 0.5f, 19.0f, 25.0f};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        double v = pts[i], sg = 1.0 / (1.0 + exp(-v)), sp = log1p(exp(v));
        CHECK(fabs(loom_ops_sigmoid(pts[i]) - sg) < 1e-7, "sigmoid(%g)", v);
        CHECK(fabs(loom_ops_softplus(pts[i]) - sp) < 2e-6 * (1 + sp), "softplus(%g) = %g, expected %g", v,
              loom_ops_softplus(pts[i]), sp);
    }
}

static void test_norms(void)
{
    float x[200], w[200], y[200], q[64];
    double ref[200];
    fill(x, 200, 3.0f);
    fill(w, 200, 1.0f);
    loom_ops_rmsnorm(200, x, w, 1e-6f, y);
    double ss = 0;
    for (int i = 0; i < 200; i++)
        ss += (double)x[i] * x[i];
    double sc = 1.0 / sqrt(ss / 200 + 1e-6);
    for (int i = 0; i < 200; i++)
        ref[i] = x[i] * sc * w[i];
    CHECK(max_abs_diff(y, ref, 200) < 1e-5, "rmsnorm differs by %g", max_abs_diff(y, ref, 200));
    memcpy(y, x, sizeof y);
    loom_ops_rmsnorm(200, y, NULL, 1e-6f, y);
    for (int i = 0; i < 200; i++)
        ref[i] = x[i] * sc;
    CHECK(max_abs_diff(y, ref, 200) < 1e-5, "rmsnorm in place, no weight");

    fill(q, 64, 5.0f);
    loom_ops_l2norm(64, q, 1e-6f, q);
    double n2 = 0;
    for (int i = 0; i < 64; i++)
        n2 += (double)q[i] * q[i];
    CHECK(fabs(sqrt(n2) - 1.0) < 1e-6, "l2norm gives norm %g", sqrt(n2));
}

static void test_rope(void)
{
    enum { HD = 64, NROT = 16 };
    float x[HD], y[HD], cache[NROT];
    fill(x, HD, 2.0f);
    memcpy(y, x, sizeof x);
    int pos = 7;
    float base = 1e7f;
    loom_ops_rope_cache(pos, NROT, base, cache);
    loom_ops_rope_neox(y, NROT, cache);
    for (int i = 0; i < NROT / 2; i++) {
        double th = pos * pow(base, -2.0 * i / NROT), c = cos(th), s = sin(th);
        double r0 = x[i] * c - x[i + NROT / 2] * s, r1 = x[i] * s + x[i + NROT / 2] * c;
        CHECK(fabs(y[i] - r0) < 1e-5 && fabs(y[i + NROT / 2] - r1) < 1e-5, "rope pair %d: (%g, %g) vs (%g, %g)", i,
              y[i], y[i + NROT / 2], r0, r1);
    }
    CHECK(memcmp(x + NROT, y + NROT, (HD - NROT) * sizeof(float)) == 0, "rope changed dims past n_rot");
    loom_ops_rope_cache(0, NROT, base, cache);
    memcpy(y, x, sizeof x);
    loom_ops_rope_neox(y, NROT, cache);
    CHECK(memcmp(x, y, sizeof x) == 0, "rope at position 0 is the identity");
}

static void test_softmax(void)
{
    const int64_t sizes[] = {1, 5, 16, 37, 100};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float x[100];
        double ref[100], mx = -INFINITY, sum = 0;
        fill(x, n, 20.0f);
        for (int64_t i = 0; i < n; i++)
            mx = fmax(mx, x[i] * 0.125);
        for (int64_t i = 0; i < n; i++)
            sum += ref[i] = exp(x[i] * 0.125 - mx);
        for (int64_t i = 0; i < n; i++)
            ref[i] /= sum;
        loom_ops_softmax(n, x, 0.125f);
        CHECK(max_abs_diff(x, ref, n) < 1e-6, "softmax n=%lld differs by %g", (long long)n, max_abs_diff(x, ref, n));
    }
}

/* conv1d over T steps in two calls sequences (state carried) vs the direct causal convolution. */
static void test_conv1d(void)
{
    enum { C = 5, K = 4, T = 9 };
    float w[C * K], x[T][C], y[T][C], state[C * (K - 1)] = {0};
    fill(w, C * K, 1.0f);
    fill(&x[0][0], T * C, 1.0f);
    for (int t = 0; t < T; t++)
        scalar_ops()->conv1d_step(C, K, state, w, x[t], y[t]);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double r = 0;
            for (int j = 0; j < K; j++) {
                int src = t - (K - 1) + j;
                if (src >= 0)
                    r += (double)x[src][c] * w[c * K + j];
            }
            CHECK(fabs(y[t][c] - r) < 1e-6, "conv t=%d c=%d: %g vs %g", t, c, y[t][c], r);
        }
    for (int c = 0; c < C; c++)
        for (int j = 0; j < K - 1; j++)
            CHECK(state[c * (K - 1) + j] == x[T - (K - 1) + j][c], "conv state keeps the last K-1 inputs");
    /* the active variant, over more channels than one vector and kernels with and without the FMA chain */
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    const int kernels[] = {1, 2, 4, 9};
    for (size_t ki = 0; ki < sizeof kernels / sizeof kernels[0]; ki++) {
        enum { CH = 37, KM = 9 };
        int k = kernels[ki];
        static float wk[CH * KM], s1[CH * KM], s2[CH * KM], xs[CH], y1[CH], y2[CH];
        fill(wk, CH * k, 1.0f);
        fill(s1, CH * (k - 1), 1.0f);
        memcpy(s2, s1, sizeof s1);
        int same = 1;
        for (int t = 0; t < 3; t++) {
            fill(xs, CH, 1.0f);
            scalar_ops()->conv1d_step(CH, k, s1, wk, xs, y1);
            ops->conv1d_step(CH, k, s2, wk, xs, y2);
            same &= memcmp(y1, y2, sizeof y1) == 0 && memcmp(s1, s2, sizeof s1) == 0;
        }
        CHECK(same, "conv1d K=%d: %s variant differs from scalar", k, loom_kernels_name());
    }
}

/* The delta rule over several steps against S <- e^g S; u = S^T k; S <- S + k (beta (v - u))^T;
 * o = S^T q / sqrt(d), with S[i][j] (key i, value j) in double. */
static void check_delta_rule(int d)
{
    enum { T = 6, DMAX = 80 };
    static float M[DMAX * DMAX], M2[DMAX * DMAX], q[T][DMAX], k[T][DMAX], v[T][DMAX], out[DMAX], out2[DMAX];
    static double S[DMAX][DMAX];
    float g[T], beta[T];
    memset(M, 0, sizeof M);
    memset(M2, 0, sizeof M2);
    memset(S, 0, sizeof S);
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    int same = 1;
    for (int t = 0; t < T; t++) {
        fill(q[t], d, 1.0f);
        fill(k[t], d, 1.0f);
        fill(v[t], d, 1.0f);
        loom_ops_l2norm(d, q[t], 1e-6f, q[t]);
        loom_ops_l2norm(d, k[t], 1e-6f, k[t]);
        g[t] = -0.5f * (1.0f + frand());
        beta[t] = 0.5f + 0.4f * frand();
    }
    double worst = 0;
    for (int t = 0; t < T; t++) {
        scalar_ops()->delta_rule_step(d, M, q[t], k[t], v[t], g[t], beta[t], out);
        ops->delta_rule_step(d, M2, q[t], k[t], v[t], g[t], beta[t], out2);
        same &= memcmp(out, out2, (size_t)d * sizeof(float)) == 0;
        double e = exp((double)g[t]), u[DMAX], o[DMAX];
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                S[i][j] *= e;
        for (int j = 0; j < d; j++) {
            u[j] = 0;
            for (int i = 0; i < d; i++)
                u[j] += S[i][j] * k[t][i];
        }
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                S[i][j] += k[t][i] * (beta[t] * (v[t][j] - u[j]));
        for (int j = 0; j < d; j++) {
            o[j] = 0;
            for (int i = 0; i < d; i++)
                o[j] += S[i][j] * q[t][i];
            o[j] /= sqrt((double)d);
        }
        worst = fmax(worst, max_abs_diff(out, o, d));
    }
    CHECK(worst < 1e-5, "delta rule d=%d: output differs by %g", d, worst);
    same &= memcmp(M, M2, (size_t)d * d * sizeof(float)) == 0;
    CHECK(same, "delta rule d=%d: %s variant differs from scalar", d, loom_kernels_name());
    double wm = 0;
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            wm = fmax(wm, fabs(M[j * d + i] - S[i][j]));
    CHECK(wm < 1e-5, "delta rule d=%d: state M[j][i] differs from S[i][j] by %g", d, wm);
}

/* One attention head against dense softmax(q K^T * scale) V in double over the same F16 inputs, and the
 * active SIMD variant against the scalar one bitwise. q_mag scales the query: large values spread the
 * scores over hundreds, so that exponentials underflow to subnormals and to zero. */
static void check_attention(int nkv, int hd, int vs, float q_mag)
{
    enum { NMAX = 300, DMAX = 256 };
    static uint16_t q16[DMAX], K[NMAX * DMAX], V[DMAX * NMAX], probs[NMAX];
    static float scores[NMAX], out[DMAX], out2[DMAX];
    static double s[NMAX], ref[DMAX];
    for (int i = 0; i < hd; i++)
        q16[i] = loom_f32_to_f16(frand() * q_mag);
    for (int p = 0; p < nkv; p++)
        for (int i = 0; i < hd; i++) {
            K[p * hd + i] = loom_f32_to_f16(frand() * 3.0f);
            V[i * vs + p] = loom_f32_to_f16(frand());
        }
    double mx = -INFINITY, sum = 0, sc = 1.0 / sqrt((double)hd);
    for (int p = 0; p < nkv; p++) {
        s[p] = 0;
        for (int i = 0; i < hd; i++)
            s[p] += (double)loom_f16_to_f32(K[p * hd + i]) * loom_f16_to_f32(q16[i]);
        s[p] *= sc;
        mx = fmax(mx, s[p]);
    }
    for (int p = 0; p < nkv; p++)
        sum += s[p] = exp(s[p] - mx);
    for (int j = 0; j < hd; j++) {
        ref[j] = 0;
        for (int p = 0; p < nkv; p++)
            ref[j] += s[p] / sum * loom_f16_to_f32(V[j * vs + p]);
    }
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    for (int o = 0; o < 2; o++) {
        enum loom_attn_order order = o ? LOOM_ATTN_ORDER_SINGLE : LOOM_ATTN_ORDER_BATCH;
        scalar_ops()->attn_head(nkv, hd, q16, K, hd, V, vs, hd, (float)sc, order, scores, probs, out);
        /* probabilities are rounded to F16 (relative 2^-11) before the V product */
        CHECK(max_abs_diff(out, ref, hd) < 1e-3, "attention n_kv %d hd %d (order %d) differs from dense by %g", nkv,
              hd, o, max_abs_diff(out, ref, hd));
        ops->attn_head(nkv, hd, q16, K, hd, V, vs, hd, (float)sc, order, scores, probs, out2);
        CHECK(memcmp(out, out2, (size_t)hd * sizeof(float)) == 0, "attention n_kv %d hd %d order %d: %s differs",
              nkv, hd, o, loom_kernels_name());
    }
}

/* Several query rows of one KV head at once (the forms prefill and decode use: tokens x heads, up to
 * LOOM_OPS_ATTN_ROWS) against the single-row kernel, bitwise, for the scalar and the active variant: rows of
 * different lengths, tails, groups that end before others, positions past one V tile (1024). */
static void check_attention_group(int n_q, const int64_t *n_kv, int hd, int vs)
{
    enum { G = LOOM_OPS_ATTN_ROWS, NMAX = 2100, DMAX = 256 };
    static uint16_t q16[G * DMAX], K[NMAX * DMAX], V[DMAX * NMAX], probs[G * NMAX];
    static float scores[G * NMAX], out[G * DMAX], out1[DMAX];
    for (int i = 0; i < n_q * hd; i++)
        q16[i] = loom_f32_to_f16(frand() * 3.0f);
    for (int i = 0; i < NMAX * hd; i++)
        K[i] = loom_f32_to_f16(frand() * 3.0f);
    for (int i = 0; i < hd * vs; i++)
        V[i] = loom_f32_to_f16(frand());
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    float sc = 1.0f / sqrtf((float)hd);
    for (int o = 0; o < 2; o++)
        for (int k = 0; k < 2; k++) {
            enum loom_attn_order order = o ? LOOM_ATTN_ORDER_SINGLE : LOOM_ATTN_ORDER_BATCH;
            if (k)
                ops->attn_heads(n_q, n_kv, hd, q16, K, hd, V, vs, hd, sc, order, scores, probs, NMAX, out, DMAX);
            else
                scalar_ops()->attn_heads(n_q, n_kv, hd, q16, K, hd, V, vs, hd, sc, order, scores, probs, NMAX, out, DMAX);
            for (int g = 0; g < n_q; g++) {
                scalar_ops()->attn_head(n_kv[g], hd, q16 + g * hd, K, hd, V, vs, hd, sc, order, scores, probs, out1);
                CHECK(memcmp(out + g * DMAX, out1, (size_t)hd * sizeof(float)) == 0,
                      "attention group row %d (n_kv %lld hd %d order %d): %s differs from the single row", g,
                      (long long)n_kv[g], hd, o, k ? loom_kernels_name() : "scalar");
            }
        }
}

static void test_attention(void)
{
    check_attention(1, 64, 8, 3.0f);
    check_attention(37, 64, 40, 3.0f);
    check_attention(300, 256, 300, 3.0f);
    check_attention(70, 48, 80, 3.0f);
    check_attention(300, 256, 300, 60.0f); /* scores hundreds apart: subnormal and zero probabilities */
    check_attention(45, 64, 64, 200.0f);
    check_attention_group(4, (const int64_t[]){1, 2, 3, 4}, 64, 8);
    check_attention_group(4, (const int64_t[]){61, 62, 63, 64}, 256, 300);
    check_attention_group(4, (const int64_t[]){297, 298, 299, 300}, 256, 300);
    check_attention_group(4, (const int64_t[]){17, 1, 33, 16}, 128, 40);
    check_attention_group(3, (const int64_t[]){5, 6, 7}, 64, 8);
    check_attention_group(4, (const int64_t[]){20, 21, 22, 23}, 48, 80);
    check_attention_group(16, (const int64_t[]){61, 62, 63, 64, 61, 62, 63, 64, 61, 62, 63, 64, 61, 62, 63, 64}, 256,
                          300);
    check_attention_group(8, (const int64_t[]){1025, 1026, 1027, 1028, 1025, 1026, 1027, 1028}, 256, 2100);
    check_attention_group(16, (const int64_t[]){5, 6, 7, 8, 2000, 2001, 2002, 2003, 1500, 17, 1024, 1023, 64, 65,
                                                2100, 1}, 256, 2100);
    check_attention_group(13, (const int64_t[]){300, 299, 298, 297, 30, 31, 32, 33, 100, 101, 102, 103, 7}, 128,
                          300);
    /* around the tiles' edges: score blocks of 48 positions in tiles of 3 or 4, V passes of 512 positions in
     * halves of 64, V rows in blocks of 24 (tiles of 3 or 6, fewer at a block's end: head_dim_v 64 and 128) */
    check_attention_group(8, (const int64_t[]){47, 48, 49, 50, 95, 96, 97, 98}, 256, 300);
    check_attention_group(8, (const int64_t[]){511, 512, 513, 514, 575, 576, 577, 1030}, 64, 2100);
    check_attention_group(4, (const int64_t[]){15, 16, 63, 65}, 128, 80);
    check_attention_group(12, (const int64_t[]){2, 3, 1, 1, 130, 129, 128, 127, 200, 14, 190, 64}, 192, 300);
}

/* ---- the whole model ------------------------------------------------------------------------------- */

static loom_session *new_session_numerics(const loom_model *m, int n_ctx, int n_threads, enum loom_numerics numerics)
{
    loom_session_params p = {.n_ctx = n_ctx, .n_threads = n_threads, .numerics = numerics};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &p, &err);
    CHECK(s != NULL, "session: %s", err.msg);
    return s;
}

static loom_session *new_session(const loom_model *m, int n_ctx, int n_threads)
{
    return new_session_numerics(m, n_ctx, n_threads, LOOM_NUMERICS_CANONICAL);
}

static int eval(loom_session *s, const int32_t *t, int n, float *logits, enum loom_logits_mode mode)
{
    loom_error err = {0};
    int rc = loom_session_eval(s, t, n, logits, mode, &err);
    CHECK(rc == LOOM_OK, "eval of %d tokens: %s", n, err.msg);
    return rc;
}

enum { NT = 12 };

/* Batch vs token by token. CANONICAL numerics (batch: one canonical batch) give bitwise the token-by-token
 * rows. In REFERENCE_BATCH numerics the reference sums attention (and F32/F16/BF16 matmuls) in a different
 * order for a batch (tinyBLAS: 16 lanes) than for one token (vec_dot: 64 lanes) and loom mirrors both, so
 * the two differ by rounding that grows through the layers: measured 6e-4 of the logit rms on the micro
 * preset, exactly as much as the reference's own batch vs sequential difference. Bound at 2e-3 of the rms. */
static void test_batch_vs_sequential(const loom_model *m, const int32_t *tok, int nv, const float *canonical)
{
    loom_session *s = new_session(m, 64, 1);
    loom_session *r = new_session_numerics(m, 64, 1, LOOM_NUMERICS_REFERENCE_BATCH);
    float *seq = malloc(sizeof(float) * (size_t)NT * nv), *batch = malloc(sizeof(float) * (size_t)NT * nv);
    if (!s || !r || !seq || !batch)
        goto out;
    for (int t = 0; t < NT; t++)
        if (eval(s, tok + t, 1, seq + (size_t)t * nv, LOOM_LOGITS_LAST))
            goto out;
    CHECK(memcmp(seq, canonical, sizeof(float) * (size_t)NT * nv) == 0,
          "canonical batch differs from token by token");
    if (eval(r, tok, NT, batch, LOOM_LOGITS_ALL))
        goto out;
    double worst = 0, var = 0;
    int top_agree = 0;
    for (int t = 0; t < NT; t++) {
        int ab = 0, as = 0;
        for (int i = 0; i < nv; i++) {
            const float a = batch[(size_t)t * nv + i], b = seq[(size_t)t * nv + i];
            worst = fmax(worst, fabs((double)a - b));
            var += (double)a * a;
            ab = a > batch[(size_t)t * nv + ab] ? i : ab;
            as = b > seq[(size_t)t * nv + as] ? i : as;
        }
        top_agree += ab == as;
    }
    double sd = sqrt(var / ((double)NT * nv));
    printf("reference-batch batch vs sequential: max |diff| %.3g, logit rms %.3g\n", worst, sd);
    CHECK(worst < 2e-3 * sd, "batch vs sequential logits differ by %g (logit rms %g)", worst, sd);
    CHECK(top_agree == NT, "batch vs sequential top-1 agree %d/%d", top_agree, NT);
    CHECK(loom_session_pos(s) == NT, "position %d after %d tokens", loom_session_pos(s), NT);
out:
    free(seq);
    free(batch);
    loom_session_free(s);
    loom_session_free(r);
}

/* Prefill in two chunks (5 + 7) equals one batch of 12 bitwise; 2 threads equal 1 thread bitwise; reset
 * gives a fresh session's results. */
static void test_chunks_threads_reset(const loom_model *m, const int32_t *tok, int nv, const float *batch)
{
    loom_session *s2 = new_session(m, 64, 2);
    float *out = malloc(sizeof(float) * (size_t)NT * nv);
    if (!s2 || !out)
        goto out;
    if (eval(s2, tok, 5, out, LOOM_LOGITS_ALL) || eval(s2, tok + 5, NT - 5, out + (size_t)5 * nv, LOOM_LOGITS_ALL))
        goto out;
    CHECK(memcmp(out, batch, sizeof(float) * (size_t)NT * nv) == 0, "5+7 chunked prefill (2 threads) differs from "
                                                                       "one batch of 12 (1 thread)");
    loom_session_reset(s2);
    CHECK(loom_session_pos(s2) == 0, "reset puts the position back to 0");
    if (eval(s2, tok, NT, out, LOOM_LOGITS_ALL))
        goto out;
    CHECK(memcmp(out, batch, sizeof(float) * (size_t)NT * nv) == 0, "batch after reset differs from a fresh one");
    float *last = malloc(sizeof(float) * (size_t)nv);
    loom_session_reset(s2);
    if (last && !eval(s2, tok, NT, last, LOOM_LOGITS_LAST)) {
        double worst = 0;
        for (int i = 0; i < nv; i++)
            worst = fmax(worst, fabs((double)last[i] - batch[(size_t)(NT - 1) * nv + i]));
        /* canonical numerics: the output head's row does not depend on how many rows it runs with */
        CHECK(worst == 0, "LOGITS_LAST differs from the last row of LOGITS_ALL by %g", worst);
    }
    free(last);
out:
    free(out);
    loom_session_free(s2);
}

/* REFERENCE_BATCH splits a request into micro-batches of n_ubatch tokens, as llama_decode does: 12 tokens at
 * n_ubatch 11 run as 11 + 1, bitwise what two requests of 11 and 1 give at the default n_ubatch (512, here
 * the 64-position context), and the last row differs from one micro-batch of 12 (its token takes the
 * single-token orders). A negative n_ubatch is rejected. */
static void test_ubatch_split(const loom_model *m, const int32_t *tok, int nv)
{
    loom_error err = {0};
    loom_session_params p = {.n_ctx = 64, .n_threads = 1, .numerics = LOOM_NUMERICS_REFERENCE_BATCH, .n_ubatch = 11};
    loom_session *u = loom_session_new(m, &p, &err);
    CHECK(u != NULL, "session with n_ubatch 11: %s", err.msg);
    loom_session *d = new_session_numerics(m, 64, 1, LOOM_NUMERICS_REFERENCE_BATCH);
    float *a = malloc(sizeof(float) * (size_t)NT * nv), *b = malloc(sizeof(float) * (size_t)NT * nv);
    if (u && d && a && b && !eval(u, tok, NT, a, LOOM_LOGITS_ALL) && !eval(d, tok, 11, b, LOOM_LOGITS_ALL) &&
        !eval(d, tok + 11, NT - 11, b + (size_t)11 * nv, LOOM_LOGITS_ALL)) {
        CHECK(memcmp(a, b, sizeof(float) * (size_t)NT * nv) == 0, "n_ubatch 11: 12 tokens differ from requests 11 + 1");
        loom_session_reset(d);
        if (!eval(d, tok, NT, b, LOOM_LOGITS_ALL))
            CHECK(memcmp(a + (size_t)11 * nv, b + (size_t)11 * nv, sizeof(float) * (size_t)nv) != 0,
                  "n_ubatch 11: the 12th row equals one micro-batch of 12 (n_ubatch ignored?)");
    }
    p.n_ubatch = -1;
    loom_session *bad = loom_session_new(m, &p, &err);
    CHECK(!bad && err.code == LOOM_E_ARG && strstr(err.msg, "n_ubatch"), "n_ubatch -1 rejected: %s", err.msg);
    loom_session_free(bad);
    free(a);
    free(b);
    loom_session_free(u);
    loom_session_free(d);
}

/* A request that fails leaves every byte of state and the position as they were. */
static void test_publish_on_success(const loom_model *m, const int32_t *tok, int nv)
{
    loom_session *s = new_session(m, 16, 1);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    unsigned char *snap = NULL;
    if (!s || !a || !b)
        goto out;
    if (eval(s, tok, 10, NULL, LOOM_LOGITS_LAST))
        goto out;
    snap = malloc(s->arena_bytes);
    if (!snap)
        goto out;
    memcpy(snap, s->arena, s->arena_bytes);
    loom_error err = {0};
    int rc = loom_session_eval(s, tok, 7, a, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_E_RANGE, "10 + 7 tokens in a 16-position context: rc %d, expected LOOM_E_RANGE", rc);
    CHECK(strstr(err.msg, "context") != NULL, "range error names the context: %s", err.msg);
    int32_t bad[3] = {tok[0], (int32_t)m->tok_embd.n_out, tok[1]};
    rc = loom_session_eval(s, bad, 3, a, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_E_ARG, "token id past the embedding rows: rc %d, expected LOOM_E_ARG", rc);
    bad[1] = -1;
    CHECK(loom_session_eval(s, bad, 3, a, LOOM_LOGITS_LAST, &err) == LOOM_E_ARG, "negative token id accepted");
    CHECK(loom_session_eval(s, tok, 1, a, (enum loom_logits_mode)7, &err) == LOOM_E_ARG, "bad logits mode accepted");
    CHECK(loom_session_pos(s) == 10, "position %d after failed requests, expected 10", loom_session_pos(s));
    CHECK(memcmp(snap, s->arena, s->arena_bytes) == 0, "a failed request changed the session state");
    /* the session still continues exactly as one that never saw the failures */
    loom_session *f = new_session(m, 16, 1);
    if (f && !eval(s, tok + 10, 6, a, LOOM_LOGITS_LAST) && !eval(f, tok, 10, NULL, LOOM_LOGITS_LAST) &&
        !eval(f, tok + 10, 6, b, LOOM_LOGITS_LAST))
        CHECK(memcmp(a, b, sizeof(float) * (size_t)nv) == 0, "continuation after failures differs");
    CHECK(loom_session_eval(s, tok, 1, a, LOOM_LOGITS_LAST, &err) == LOOM_E_RANGE, "full context accepted more");
    CHECK(loom_session_eval(s, tok, 0, a, LOOM_LOGITS_LAST, &err) == LOOM_OK, "empty request at full context");
    loom_session_free(f);
out:
    free(snap);
    free(a);
    free(b);
    loom_session_free(s);
}

static void test_model(void)
{
    char dir[] = "/tmp/loom-test-forward-XXXXXX", vocab[64], path[64];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    snprintf(path, sizeof path, "%s/micro.gguf", dir);
    loom_model *m = NULL;
    float *batch = NULL;
    if (write_mini_vocab(vocab) || !(m = load_micro_model(vocab, path, LOOM_TYPE_F32, 5)))
        goto out;
    int nv = loom_model_n_logits(m);
    CHECK(nv >= MINI_TOKENS, "n_logits %d", nv);
    loom_error e = {0};
    static const int bad_threads[2] = {-1, LOOM_MAX_THREADS + 1};
    for (int k = 0; k < 2; k++) {
        loom_session *none = loom_session_new(m, &(loom_session_params){.n_ctx = 64, .n_threads = bad_threads[k]}, &e);
        CHECK(!none && e.code == LOOM_E_ARG && strstr(e.msg, k ? "to 1024 threads, found 1025" : "n_threads >= 0"),
              "session n_threads %d refused with the field named: %s", bad_threads[k], e.msg);
        loom_session_free(none);
    }
    CHECK(loom_model_token_sampleable(m, 3) && !loom_model_token_sampleable(m, nv - 1) &&
              !loom_model_token_sampleable(m, -1) && !loom_model_token_sampleable(m, nv),
          "sampleable: real tokens yes, padding rows and out-of-range ids no");
    int32_t tok[NT + 4];
    for (int i = 0; i < NT + 4; i++)
        tok[i] = (int32_t)((i * 37 + 11) % MINI_TOKENS);
    batch = malloc(sizeof(float) * (size_t)NT * nv);
    loom_session *s = new_session(m, 64, 1);
    if (!batch || !s || eval(s, tok, NT, batch, LOOM_LOGITS_ALL)) {
        loom_session_free(s);
        goto out;
    }
    loom_session_free(s);
    int finite = 1;
    for (size_t i = 0; i < (size_t)NT * nv; i++)
        finite &= isfinite(batch[i]) != 0;
    CHECK(finite, "logits are finite");
    test_batch_vs_sequential(m, tok, nv, batch);
    test_chunks_threads_reset(m, tok, nv, batch);
    test_publish_on_success(m, tok, nv);
    test_ubatch_split(m, tok, nv);
out:
    free(batch);
    loom_model_free(m);
    unlink(path);
    unlink(vocab);
    rmdir(dir);
}

int main(void)
{
    test_reductions();
    test_norms();
    test_rope();
    test_softmax();
    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    const enum loom_orders profiles[] = {LOOM_ORDERS_AVX512, LOOM_ORDERS_HASWELL};
    loom_error err;
    for (size_t o = 0; o < sizeof profiles / sizeof profiles[0]; o++) { /* each float-order profile */
        CHECK(loom_orders_select(profiles[o], &err) == LOOM_OK, "float-order profile %d: %s", (int)profiles[o],
              err.msg);
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) { /* each per-head variant the CPU runs */
            if (loom_kernels_select(modes[m], &err) != LOOM_OK)
                continue;
            printf("per-head kernels: %s, %s orders\n", loom_kernels_name(), loom_orders_name());
            test_elementwise();
            test_conv1d();
            check_delta_rule(16);
            check_delta_rule(32);
            check_delta_rule(80);
            test_attention();
        }
    }
    CHECK(loom_orders_select(LOOM_ORDERS_AVX512, &err) == LOOM_OK, "avx512 profile back: %s", err.msg);
    CHECK(loom_kernels_select(LOOM_KERNELS_AUTO, &err) == LOOM_OK, "auto kernels: %s", err.msg);
    test_model();
    return test_finish();
}
