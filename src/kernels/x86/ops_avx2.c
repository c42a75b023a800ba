/* ops_avx2.c — AVX2 (+FMA, F16C) variants of the per-head kernels of ops.h (row norms, causal conv1d, SiLU,
 * the gated delta rule, attention heads). They compute exactly what the scalar versions in ops.c compute, in
 * the same order: each 16-lane accumulator of the scalar code is a pair of 8-lane registers reduced in its
 * order, so results are bitwise identical. The conv1d kernel also serves the haswell profile (loom_hsw_conv1d_*). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/helpers_avx2.h"
#include "kernels/x86/attn_group_avx2.h"
#include "kernels/x86/delta_rule_avx2.h"
#include "kernels/ops.h"
#include "kernels/orders_haswell.h"
#include "util/fp16.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* One 16-lane accumulator of the scalar code: lanes 0-7 and 8-15. */
struct acc16 {
    __m256 lo, hi;
};

static const struct acc16 acc16_zero = {{0}, {0}};

/* The R16 tree of loom_ops_reduce16: lanes l + 8 and l, then loom_hsum8_ps's l + 4 and l, (0 + 2) + (1 + 3). */
ALWAYS_INLINE float reduce16(struct acc16 a) { return loom_hsum8_ps(_mm256_add_ps(a.hi, a.lo)); }

ALWAYS_INLINE struct acc16 add16(struct acc16 a, struct acc16 b)
{
    return (struct acc16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}

/* Four 16-lane accumulators as GGML_F32x16_REDUCE: (0 + 2) + (1 + 3), then R16 (reduce64 of ops.c). */
ALWAYS_INLINE float reduce4(const struct acc16 a[4])
{
    return reduce16(add16(add16(a[0], a[2]), add16(a[1], a[3])));
}

/* loom_ops_dot_f32: element i in lane i % 64 of four 16-lane accumulators, the tail past the last 64 in
 * loom_ops_tail_sum's order. */
static float dot_f32(int64_t n, const float *x, const float *y)
{
    struct acc16 a[4] = {acc16_zero, acc16_zero, acc16_zero, acc16_zero};
    int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++) {
            const float *xs = x + i + 16 * s, *ys = y + i + 16 * s;
            a[s].lo = _mm256_fmadd_ps(_mm256_loadu_ps(xs), _mm256_loadu_ps(ys), a[s].lo);
            a[s].hi = _mm256_fmadd_ps(_mm256_loadu_ps(xs + 8), _mm256_loadu_ps(ys + 8), a[s].hi);
        }
    return loom_ops_tail_sum(reduce4(a), n - np, x + np, y + np);
}

/* ---- RMSNorm / L2 norm of rows ------------------------------------------------------------------------
 * loom_ops_rmsnorm sums the float squares in double, one add per element in index order: a dependency
 * chain per row. Eight rows share the chain here: 8x8 blocks of squares are transposed so that lane r of
 * block column j holds row r's square j, and one 4-lane double add per half serves all eight rows. */

/* sum[r] = sum over i < n of (double)(x_r[i] * x_r[i]), added in index order, for the 8 rows
 * x_r = x + r*stride (n % 8 == 0). */
static void sumsq8(int64_t n, const float *x, int64_t stride, double sum[8])
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v[8];
        for (int r = 0; r < 8; r++) {
            v[r] = _mm256_loadu_ps(x + r * stride + i);
            v[r] = _mm256_mul_ps(v[r], v[r]);
        }
        loom_transpose8_ps(v);
        for (int j = 0; j < 8; j++) {
            lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v[j])));
            hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v[j], 1)));
        }
    }
    _mm256_storeu_pd(sum, lo);
    _mm256_storeu_pd(sum + 4, hi);
}

/* y[i] = (x[i] * scale) * w[i], or (x[i] * scale) * wc where w is NULL (wc = 1 leaves x*scale exact). */
static void scale_row(int64_t n, const float *x, float scale, const float *w, float wc, float *y)
{
    __m256 s = _mm256_set1_ps(scale), c = _mm256_set1_ps(wc);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v, w ? _mm256_loadu_ps(w + i) : c));
    }
    for (; i < n; i++)
        y[i] = (x[i] * scale) * (w ? w[i] : wc);
}

/* The rest of loom_ops_rmsnorm for one row once its sum of squares is known. */
static void finish_row(double sum, int64_t n, const float *x, const float *w, float wc, float eps, float *y)
{
    float mean = (float)(sum / (double)n);
    scale_row(n, x, 1.0f / sqrtf(mean + eps), w, wc, y);
}

/* loom_ops_rmsnorm per row with the weight w or the constant wc. */
static void norm_rows(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w, float wc,
                      float eps, float *y, int64_t y_stride)
{
    int64_t r = 0;
    double sum[8];
    for (; n % 8 == 0 && r + 8 <= n_rows; r += 8) {
        sumsq8(n, x + r * x_stride, x_stride, sum);
        for (int l = 0; l < 8; l++)
            finish_row(sum[l], n, x + (r + l) * x_stride, w, wc, eps, y + (r + l) * y_stride);
    }
    for (; r < n_rows; r++) {
        const float *xr = x + r * x_stride;
        double s1 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            float sq = xr[i] * xr[i];
            s1 += (double)sq;
        }
        finish_row(s1, n, xr, w, wc, eps, y + r * y_stride);
    }
}

void loom_ops_rmsnorm_rows_avx2(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w,
                                float eps, float *y, int64_t y_stride)
{
    norm_rows(n_rows, n, x, x_stride, w, 1.0f, eps, y, y_stride);
}

/* loom_ops_l2norm: RMSNorm with eps / n, then times 1 / sqrtf(n), i.e. the constant weight 1 / sqrtf(n). */
void loom_ops_l2norm_rows_avx2(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, float eps, float *y,
                               int64_t y_stride)
{
    float fn = (float)n;
    norm_rows(n_rows, n, x, x_stride, NULL, 1.0f / sqrtf(fn), eps / fn, y, y_stride);
}

/* ---- causal conv1d ---------------------------------------------------------------------------------
 * 8 channels at a time for kernels shorter than 8 taps, in a profile's tap order: the first `unfused` taps'
 * products rounded and added in order, the rest by fused multiply-adds (the scalar tail orders for n < 8: the
 * avx512 profile's loom_ops_tail_sum fuses them all, the haswell profile's loom_hsw_tail_sum rounds the first 4
 * when there are 4 or more); longer kernels take the scalar path. The group's K taps and K-1 state columns are
 * gathered into registers once, the tokens stream through (one load, K multiply-adds, one store each, the state
 * columns shifting by one register), and the state is written back once. m selects the nc channels present (a
 * tail group has fewer than 8). */
ALWAYS_INLINE void conv_group(int K, int unfused, int nc, float *s, const float *wc, int n, const float *x,
                              int64_t x_stride, float *y, int64_t y_stride)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc), lane);
    const __m256i s_idx = _mm256_mullo_epi32(lane, _mm256_set1_epi32(K - 1));
    const __m256i w_idx = _mm256_mullo_epi32(lane, _mm256_set1_epi32(K));
    const __m256 zero = _mm256_setzero_ps(), mf = _mm256_castsi256_ps(m);
    __m256 wv[8], sv[8];
#pragma GCC unroll 8
    for (int j = 0; j < K; j++)
        wv[j] = _mm256_mask_i32gather_ps(zero, wc + j, w_idx, mf, 4);
#pragma GCC unroll 8
    for (int j = 0; j < K - 1; j++)
        sv[j] = _mm256_mask_i32gather_ps(zero, s + j, s_idx, mf, 4);
    for (int t = 0; t < n; t++) {
        __m256 xv = _mm256_maskload_ps(x + t * x_stride, m);
        __m256 acc = zero;
        sv[K - 1] = xv;
#pragma GCC unroll 8
        for (int j = 0; j < K; j++)
            acc = j < unfused ? _mm256_add_ps(acc, _mm256_mul_ps(sv[j], wv[j])) : _mm256_fmadd_ps(sv[j], wv[j], acc);
        _mm256_maskstore_ps(y + t * y_stride, m, acc);
#pragma GCC unroll 8
        for (int j = 0; j < K - 1; j++)
            sv[j] = sv[j + 1];
    }
#pragma GCC unroll 8
    for (int j = 0; j < K - 1; j++) {
        float col[8];
        _mm256_storeu_ps(col, sv[j]);
        for (int l = 0; l < nc; l++)
            s[l * (K - 1) + j] = col[l];
    }
}

/* Every group of the channel range for one kernel width (K a constant once inlined). */
ALWAYS_INLINE void conv_groups(int K, int unfused, int64_t channels, float *state, const float *w, int n,
                               const float *x, int64_t x_stride, float *y, int64_t y_stride)
{
    for (int64_t c0 = 0; c0 < channels; c0 += 8)
        conv_group(K, unfused, channels - c0 >= 8 ? 8 : (int)(channels - c0), state + c0 * (K - 1), w + c0 * K, n,
                   x + c0, x_stride, y + c0, y_stride);
}

/* conv_groups for K < 8 in the profile's tap order (hsw: haswell's), 0 when K takes the scalar path. */
ALWAYS_INLINE int conv_chunk(int hsw, int64_t channels, int K, int n, float *state, const float *w, const float *x,
                             int64_t x_stride, float *y, int64_t y_stride)
{
    switch (K) {
#define CONV_CASE(k)                                                                                               \
    case k:                                                                                                        \
        conv_groups(k, hsw && k >= 4 ? 4 : 0, channels, state, w, n, x, x_stride, y, y_stride);                    \
        return 1;
        CONV_CASE(1)
        CONV_CASE(2)
        CONV_CASE(3)
        CONV_CASE(4)
        CONV_CASE(5)
        CONV_CASE(6)
        CONV_CASE(7)
#undef CONV_CASE
    default:
        return 0;
    }
}

void loom_ops_conv1d_chunk_avx2(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                                int64_t x_stride, float *y, int64_t y_stride)
{
    if (!conv_chunk(0, channels, K, n, state, w, x, x_stride, y, y_stride))
        loom_ops_conv1d_chunk(channels, K, n, state, w, x, x_stride, y, y_stride);
}

void loom_ops_conv1d_step_avx2(int64_t channels, int K, float *state, const float *w, const float *x, float *y)
{
    loom_ops_conv1d_chunk_avx2(channels, K, 1, state, w, x, 0, y, 0);
}

void loom_hsw_conv1d_chunk_avx2(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                                int64_t x_stride, float *y, int64_t y_stride)
{
    if (!conv_chunk(1, channels, K, n, state, w, x, x_stride, y, y_stride))
        loom_hsw_conv1d_chunk(channels, K, n, state, w, x, x_stride, y, y_stride);
}

void loom_hsw_conv1d_step_avx2(int64_t channels, int K, float *state, const float *w, const float *x, float *y)
{
    loom_hsw_conv1d_chunk_avx2(channels, K, 1, state, w, x, 0, y, 0);
}

/* ---- SiLU ------------------------------------------------------------------------------------------ */

/* expf_poly (loom_ops_expf_poly) in 8 lanes. AVX2 has no scalef: j * 2^n is two exact power-of-two
 * factors 2^(n/2) and 2^(n - n/2) (each a normal float for |n| <= 192), so the product rounds once, as
 * ldexpf does, subnormal results included. */
static __m256 expf_poly8(__m256 x)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvttps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 res = _mm256_mul_ps(_mm256_mul_ps(j, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23))),
                               _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
    const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    if (_mm256_movemask_ps(big)) {
        __m256 alt = _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
                                      _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ));
        res = _mm256_blendv_ps(res, alt, big);
    }
    const __m256 nan = _mm256_cmp_ps(n, n, _CMP_UNORD_Q); /* the scalar code returns x + x */
    return _mm256_movemask_ps(nan) ? _mm256_blendv_ps(res, _mm256_add_ps(x, x), nan) : res;
}

/* x / (1 + expf_poly(0 - x)) in 8 lanes, as ggml_v_silu. */
static __m256 silu8(__m256 x)
{
    __m256 e = expf_poly8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* The reference's tail past the last multiple of 16: libm's expf. */
static float silu_libm(float x) { return x / (1.0f + expf(-x)); }

void loom_ops_silu_avx2(int64_t n, const float *x, float *y)
{
    int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < nv; i += 8)
        _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    for (int64_t i = nv; i < n; i++)
        y[i] = silu_libm(x[i]);
}

void loom_ops_swiglu_avx2(int64_t n, const float *g, const float *u, float *y)
{
    int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < nv; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    for (int64_t i = nv; i < n; i++)
        y[i] = silu_libm(g[i]) * u[i];
}

/* ---- gated delta rule (delta_rule_avx2.h, with this profile's dot_f32) ---------------------------------------- */

void loom_ops_delta_rule_chunk_avx2(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                                    const float *v, int64_t qkv_stride, const float *g, const float *beta,
                                    int64_t gb_stride, float *out, int64_t out_stride)
{
    delta_rule_chunk_avx2(dot_f32, d, n, M_src, M, q, k, v, qkv_stride, g, beta, gb_stride, out, out_stride);
}

void loom_ops_delta_rule_step_avx2(int d, float *M, const float *q, const float *k, const float *v, float g,
                                   float beta, float *out)
{
    loom_ops_delta_rule_chunk_avx2(d, 1, M, M, q, k, v, 0, &g, &beta, 0, out, 0);
}

/* ---- attention over an F16 KV cache (ops.h) ---------------------------------------------------------- */

/* 16 F16 values at p as an accumulator's lanes: the first n (any n; none when n <= 0), zeros after. */
static struct acc16 load16_f16(const uint16_t *p, int64_t n)
{
    if (n >= 16)
        return (struct acc16){attn_load_f16(p), attn_load_f16(p + 8)};
    uint16_t t[16] = {0};
    if (n > 0)
        memcpy(t, p, (size_t)n * sizeof *t);
    return (struct acc16){attn_load_f16(t), attn_load_f16(t + 8)};
}

ALWAYS_INLINE struct acc16 fma16(struct acc16 x, struct acc16 y, struct acc16 a)
{
    return (struct acc16){_mm256_fmadd_ps(x.lo, y.lo, a.lo), _mm256_fmadd_ps(x.hi, y.hi, a.hi)};
}

/* F16 dot with every element in a lane, rows padded with zeros (dot_f16_lanes of ops.c): one
 * accumulator (BATCH) or four, block b of 16 elements in accumulator b % 4 (SINGLE). */
static float dot_f16_lanes(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order)
{
    struct acc16 a[4] = {acc16_zero, acc16_zero, acc16_zero, acc16_zero};
    int lanes = order == LOOM_ATTN_ORDER_BATCH ? 1 : 4;
    for (int64_t i = 0, blk = 0; i < n; i += 16, blk++)
        a[blk % lanes] = fma16(load16_f16(x + i, n - i), load16_f16(y + i, n - i), a[blk % lanes]);
    return lanes == 4 ? reduce4(a) : reduce16(a[0]);
}

/* loom_ops_softmax: scale, max, exponentials summed in double per block of 16 (R16 over the block, zeros
 * past n), then times 1 / sum. */
static void softmax(int64_t n, float *x, float scale)
{
    __m256 m = _mm256_set1_ps(attn_scale_max(n, x, scale));
    double sum = 0.0;
    int64_t i;
    for (i = 0; i < n; i += 16) {
        float e[16] = {0};
        int64_t k = n - i < 16 ? n - i : 16;
        memcpy(e, x + i, (size_t)k * sizeof(float));
        struct acc16 v = {expf_poly8(_mm256_sub_ps(_mm256_loadu_ps(e), m)),
                          expf_poly8(_mm256_sub_ps(_mm256_loadu_ps(e + 8), m))};
        _mm256_storeu_ps(e, v.lo);
        _mm256_storeu_ps(e + 8, v.hi);
        for (int l = (int)k; l < 16; l++)
            e[l] = 0.0f; /* the reference's masked cells: exactly 0 */
        memcpy(x + i, e, (size_t)k * sizeof(float));
        sum += (double)reduce16((struct acc16){_mm256_loadu_ps(e), _mm256_loadu_ps(e + 8)});
    }
    __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++)
        x[i] *= (float)(1.0 / sum);
}

/* V row . probabilities (F32 values of F16 numbers) with every element in a lane, as dot_f16_lanes: one
 * accumulator (BATCH) or block b of 16 in accumulator b % 4 (SINGLE); zeros past n. */
static float dot_v_probs(int64_t n, const uint16_t *v, const float *probs, enum loom_attn_order order)
{
    struct acc16 a[4] = {acc16_zero, acc16_zero, acc16_zero, acc16_zero};
    int lanes = order == LOOM_ATTN_ORDER_BATCH ? 1 : 4;
    int64_t i = 0, blk = 0;
    for (; i + 16 <= n; i += 16, blk++)
        a[blk % lanes] = fma16((struct acc16){attn_load_f16(v + i), attn_load_f16(v + i + 8)},
                               (struct acc16){_mm256_loadu_ps(probs + i), _mm256_loadu_ps(probs + i + 8)},
                               a[blk % lanes]);
    if (i < n)
        a[blk % lanes] =
            fma16(load16_f16(v + i, n - i),
                  (struct acc16){attn_load8_part(probs + i, n - i), attn_load8_part(probs + i + 8, n - i - 8)},
                  a[blk % lanes]);
    return lanes == 4 ? reduce4(a) : reduce16(a[0]);
}

/* scores[p] = K[p] . q for p < n_kv, one row. */
static void scores_row(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache, int64_t k_stride,
                       enum loom_attn_order order, float *scores)
{
    for (int64_t p = 0; p < n_kv; p++) /* a single row's K dot has a scalar double tail past the last 64 */
        scores[p] = order == LOOM_ATTN_ORDER_SINGLE && head_dim % 64
                        ? loom_ops_dot_f16(head_dim, k_cache + p * k_stride, q16, order)
                        : dot_f16_lanes(head_dim, k_cache + p * k_stride, q16, order);
}

/* loom_ops_attn_softmax_v of one row, the rounded probabilities kept in scores as F32 (probs16 unused). */
static void softmax_v_row(int64_t n_kv, float *scores, float scale, const uint16_t *v_cache, int64_t v_stride,
                          int head_dim_v, enum loom_attn_order order, float *out)
{
    softmax(n_kv, scores, scale);
    attn_round_probs(n_kv, scores);
    for (int j = 0; j < head_dim_v; j++)
        out[j] = dot_v_probs(n_kv, v_cache + (int64_t)j * v_stride, scores, order);
}

void loom_ops_attn_head_avx2(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                             int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                             enum loom_attn_order order, float *scores, uint16_t *probs16, float *out)
{
    (void)probs16; /* the rounded probabilities stay in scores, as F32 */
    scores_row(n_kv, head_dim, q16, k_cache, k_stride, order, scores);
    softmax_v_row(n_kv, scores, scale, v_cache, v_stride, head_dim_v, order, out);
}

/* ---- several query rows of one head (loom_ops_attn_heads) -------------------------------------------
 * Each K row and V row is converted once for a group of four rows (attn_group_avx2.h), every row keeping the
 * accumulators, lane blocks and reductions of the single-row kernel (head_dim a multiple of 64): `lanes` 16-lane
 * accumulators (4 in SINGLE order, 1 in BATCH order) as 8-lane slices, the forms ATTN_R16X4 and ATTN_R16X1. */

/* attn_scores_group and attn_values_group for each order, the form a constant in each. */
static void scores_group_single(const int64_t *n_kv, int hd, const float *qf, const uint16_t *k, int64_t k_stride,
                                float *scores, int64_t stride)
{
    attn_scores_group(ATTN_R16X4, ATTN_G, n_kv, hd, qf, k, k_stride, scores, stride);
}

static void scores_group_batch(const int64_t *n_kv, int hd, const float *qf, const uint16_t *k, int64_t k_stride,
                               float *scores, int64_t stride)
{
    attn_scores_group(ATTN_R16X1, ATTN_G, n_kv, hd, qf, k, k_stride, scores, stride);
}

static void values_group_single(const int64_t *n_kv, const uint16_t *v, int64_t v_stride, int hdv,
                                const float *probs, int64_t stride, float *out, int64_t out_stride)
{
    attn_values_group(ATTN_R16X4, ATTN_G, n_kv, v, v_stride, hdv, probs, stride, out, out_stride);
}

static void values_group_batch(const int64_t *n_kv, const uint16_t *v, int64_t v_stride, int hdv,
                               const float *probs, int64_t stride, float *out, int64_t out_stride)
{
    attn_values_group(ATTN_R16X1, ATTN_G, n_kv, v, v_stride, hdv, probs, stride, out, out_stride);
}

/* The scores of whole groups of four through attn_scores_group (each group reads the K rows itself), of other
 * rows one at a time; then loom_ops_attn_softmax_v_rows_avx2. */
void loom_ops_attn_heads_avx2(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                              const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                              int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                              uint16_t *probs16, int64_t stride, float *out, int64_t out_stride)
{
    (void)probs16; /* the rounded probabilities stay in scores, as F32 */
    int grouped = head_dim % 64 == 0 && head_dim <= ATTN_MAX_HD, g = 0;
    for (; grouped && g + ATTN_G <= n_q; g += ATTN_G) {
        float qf[ATTN_G * ATTN_MAX_HD];
        attn_q_f32(ATTN_G, head_dim, q16 + (int64_t)g * head_dim, qf);
        (order == LOOM_ATTN_ORDER_SINGLE ? scores_group_single : scores_group_batch)(n_kv + g, head_dim, qf, k_cache,
                                                                                     k_stride, scores + g * stride,
                                                                                     stride);
    }
    for (; g < n_q; g++)
        scores_row(n_kv[g], head_dim, q16 + (int64_t)g * head_dim, k_cache, k_stride, order, scores + g * stride);
    loom_ops_attn_softmax_v_rows_avx2(n_q, n_kv, scores, stride, scale, v_cache, v_stride, head_dim_v, order, out,
                                      out_stride);
}

void loom_ops_attn_softmax_v_rows_avx2(int n_q, const int64_t *n_kv, float *scores, int64_t stride, float scale,
                                       const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                       enum loom_attn_order order, float *out, int64_t out_stride)
{
    int g = 0;
    for (; g + ATTN_G <= n_q; g += ATTN_G) {
        for (int r = g; r < g + ATTN_G; r++) {
            softmax(n_kv[r], scores + r * stride, scale);
            attn_round_probs(n_kv[r], scores + r * stride);
        }
        (order == LOOM_ATTN_ORDER_SINGLE ? values_group_single : values_group_batch)(
            n_kv + g, v_cache, v_stride, head_dim_v, scores + g * stride, stride, out + g * out_stride, out_stride);
    }
    for (; g < n_q; g++)
        softmax_v_row(n_kv[g], scores + g * stride, scale, v_cache, v_stride, head_dim_v, order, out + g * out_stride);
}
