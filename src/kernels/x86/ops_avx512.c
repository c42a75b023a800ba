/* ops_avx512.c — AVX-512 variants of the per-head kernels of ops.h (causal conv1d, the gated delta rule
 * and attention heads). They compute exactly what the scalar versions in ops.c compute, in the same order
 * (the scalar code already describes 16-lane accumulators), so results are bitwise identical. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/helpers_avx2.h"
#include "kernels/ops.h"
#include "kernels/prefetch.h"
#include "kernels/x86/delta_rule_avx2.h"

/* loom_ops_dot_f32 with zmm accumulators; _mm512_reduce_add_ps is the R16 tree. */
static float dot_f32(int64_t n, const float *x, const float *y)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    a0 = _mm512_add_ps(a0, a2);
    a1 = _mm512_add_ps(a1, a3);
    a0 = _mm512_add_ps(a0, a1);
    return loom_ops_tail_sum(_mm512_reduce_add_ps(a0), n - np, x + np, y + np);
}

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- RMSNorm / L2 norm of rows ------------------------------------------------------------------------
 * loom_ops_rmsnorm sums the float squares in double, one add per element in index order: a dependency
 * chain per row. Eight rows share the chain here: 8x8 blocks of squares are transposed so that lane r of
 * block column j holds row r's square j, and one 8-lane double add per column serves all eight rows. */

/* sum[r] = sum over i < n of (double)(x_r[i] * x_r[i]), added in index order, for the 8 rows
 * x_r = x + r*stride (n % 8 == 0). */
static void sumsq8(int64_t n, const float *x, int64_t stride, double sum[8])
{
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v[8];
        for (int r = 0; r < 8; r++) {
            v[r] = _mm256_loadu_ps(x + r * stride + i);
            v[r] = _mm256_mul_ps(v[r], v[r]);
        }
        loom_transpose8_ps(v);
        for (int j = 0; j < 8; j++)
            acc = _mm512_add_pd(acc, _mm512_cvtps_pd(v[j]));
    }
    _mm512_storeu_pd(sum, acc);
}

/* y[i] = (x[i] * scale) * w[i], or (x[i] * scale) * wc where w is NULL (wc = 1 leaves x*scale exact). */
static void scale_row(int64_t n, const float *x, float scale, const float *w, float wc, float *y)
{
    __m512 s = _mm512_set1_ps(scale), c = _mm512_set1_ps(wc);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), s);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(v, w ? _mm512_maskz_loadu_ps(k, w + i) : c));
    }
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

void loom_ops_rmsnorm_rows_avx512(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w,
                                  float eps, float *y, int64_t y_stride)
{
    norm_rows(n_rows, n, x, x_stride, w, 1.0f, eps, y, y_stride);
}

/* loom_ops_l2norm: RMSNorm with eps / n, then times 1 / sqrtf(n), i.e. the constant weight 1 / sqrtf(n). */
void loom_ops_l2norm_rows_avx512(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, float eps, float *y,
                                 int64_t y_stride)
{
    float fn = (float)n;
    norm_rows(n_rows, n, x, x_stride, NULL, 1.0f / sqrtf(fn), eps / fn, y, y_stride);
}

/* ---- causal conv1d ---------------------------------------------------------------------------------
 * 16 channels at a time for kernels shorter than 8 taps (a chain of fused multiply-adds per channel, as
 * the scalar tail order gives for n < 8); longer kernels take the scalar path. The group's K taps and
 * K-1 state columns are transposed into registers once (per channel rows -> per tap columns), the tokens
 * stream through (one load, K fused multiply-adds, one store each, the state columns shifting by one
 * register), and the state is transposed back once. A full group moves its rows with register permutes
 * (gathers and scatters cost several times more here); a tail group (fewer than 16 channels, mask m) uses
 * masked gathers and scatters. */

/* Which register and lane of a row-major table every lane takes: lane c of the result is element g(c) of the
 * nr registers R, table lane idx = g % 32 (vpermt2ps's two-register index), pair = g / 32. */
struct conv_pick {
    __m512i idx, pair;
};

/* The pick of element c * stride + j for lane c (column j of a row-major [16][stride] table). */
ALWAYS_INLINE struct conv_pick conv_column(int stride, int j)
{
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i g = _mm512_add_epi32(_mm512_mullo_epi32(lane, _mm512_set1_epi32(stride)), _mm512_set1_epi32(j));
    return (struct conv_pick){_mm512_and_si512(g, _mm512_set1_epi32(31)), _mm512_srli_epi32(g, 5)};
}

/* Lane c of the result = element p.idx + 32 * p.pair of the nr registers R (permutes; no memory). */
ALWAYS_INLINE __m512 conv_select(int nr, const __m512 *R, struct conv_pick p)
{
    __m512 res = _mm512_permutex2var_ps(R[0], p.idx, nr > 1 ? R[1] : R[0]);
#pragma GCC unroll 4
    for (int q = 1; 2 * q < nr; q++)
        res = _mm512_mask_mov_ps(res, _mm512_cmpeq_epi32_mask(p.pair, _mm512_set1_epi32(q)),
                                 _mm512_permutex2var_ps(R[2 * q], p.idx, 2 * q + 1 < nr ? R[2 * q + 1] : R[2 * q]));
    return res;
}

/* The state columns sv[0..K-2] back into the row-major [16][K-1] layout: lane i of output register r is
 * element g = 16r + i, channel g / (K-1), column g % (K-1) (picked from sv as a table of pairs of columns). */
ALWAYS_INLINE void conv_state_store(int K, float *s, const __m512 *sv)
{
#pragma GCC unroll 8
    for (int r = 0; r < K - 1; r++) {
        int32_t idx[16], pair[16];
        for (int i = 0; i < 16; i++) {
            int g = 16 * r + i, c = g / (K - 1), j = g % (K - 1);
            idx[i] = c + 16 * (j & 1);
            pair[i] = j >> 1;
        }
        struct conv_pick p = {_mm512_loadu_si512(idx), _mm512_loadu_si512(pair)};
        _mm512_storeu_ps(s + 16 * r, conv_select(K - 1, sv, p));
    }
}

ALWAYS_INLINE void conv_group(int K, __mmask16 m, float *s, const float *wc, int n, const float *x, int64_t x_stride,
                              float *y, int64_t y_stride)
{
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i s_idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(K - 1));
    const __m512i w_idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(K));
    const __m512 zero = _mm512_setzero_ps();
    __m512 wv[8], sv[8];
    if (m == 0xffff) {
        __m512 rows[8];
#pragma GCC unroll 8
        for (int j = 0; j < K; j++)
            rows[j] = _mm512_loadu_ps(wc + 16 * j);
#pragma GCC unroll 8
        for (int j = 0; j < K; j++)
            wv[j] = conv_select(K, rows, conv_column(K, j));
#pragma GCC unroll 8
        for (int j = 0; j < K - 1; j++)
            rows[j] = _mm512_loadu_ps(s + 16 * j);
#pragma GCC unroll 8
        for (int j = 0; j < K - 1; j++)
            sv[j] = conv_select(K - 1, rows, conv_column(K - 1, j));
    } else {
#pragma GCC unroll 8
        for (int j = 0; j < K; j++)
            wv[j] = _mm512_mask_i32gather_ps(zero, m, w_idx, wc + j, 4);
#pragma GCC unroll 8
        for (int j = 0; j < K - 1; j++)
            sv[j] = _mm512_mask_i32gather_ps(zero, m, s_idx, s + j, 4);
    }
    for (int t = 0; t < n; t++) {
        __m512 xv = _mm512_maskz_loadu_ps(m, x + t * x_stride);
        __m512 acc = zero;
#pragma GCC unroll 8
        for (int j = 0; j < K - 1; j++)
            acc = _mm512_fmadd_ps(sv[j], wv[j], acc);
        _mm512_mask_storeu_ps(y + t * y_stride, m, _mm512_fmadd_ps(xv, wv[K - 1], acc));
#pragma GCC unroll 8
        for (int j = 0; j + 1 < K - 1; j++)
            sv[j] = sv[j + 1];
        if (K > 1)
            sv[K - 2] = xv;
    }
    if (m == 0xffff) {
        conv_state_store(K, s, sv);
        return;
    }
#pragma GCC unroll 8
    for (int j = 0; j < K - 1; j++)
        _mm512_mask_i32scatter_ps(s + j, m, s_idx, sv[j], 4);
}

/* Every group of the channel range for one kernel width (K a constant once inlined). */
ALWAYS_INLINE void conv_groups(int K, int64_t channels, float *state, const float *w, int n, const float *x,
                               int64_t x_stride, float *y, int64_t y_stride)
{
    for (int64_t c0 = 0; c0 < channels; c0 += 16) {
        __mmask16 m = channels - c0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (channels - c0)) - 1);
        loom_prefetch_ahead(state + c0 * (K - 1), 16 * (size_t)(K - 1) * sizeof(float));
        loom_prefetch_ahead(w + c0 * K, 16 * (size_t)K * sizeof(float));
        conv_group(K, m, state + c0 * (K - 1), w + c0 * K, n, x + c0, x_stride, y + c0, y_stride);
    }
}

void loom_ops_conv1d_chunk_avx512(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                                  int64_t x_stride, float *y, int64_t y_stride)
{
    switch (K) {
#define CONV_CASE(k)                                                                                               \
    case k:                                                                                                        \
        conv_groups(k, channels, state, w, n, x, x_stride, y, y_stride);                                           \
        return;
        CONV_CASE(1)
        CONV_CASE(2)
        CONV_CASE(3)
        CONV_CASE(4)
        CONV_CASE(5)
        CONV_CASE(6)
        CONV_CASE(7)
#undef CONV_CASE
    default:
        loom_ops_conv1d_chunk(channels, K, n, state, w, x, x_stride, y, y_stride);
    }
}

void loom_ops_conv1d_step_avx512(int64_t channels, int K, float *state, const float *w, const float *x, float *y)
{
    loom_ops_conv1d_chunk_avx512(channels, K, 1, state, w, x, 0, y, 0);
}

/* ---- gated delta rule ------------------------------------------------------------------------------ */

/* One token for any d that is a multiple of 16: each row of M read and written in four passes. */
static void delta_step_rows(int d, float *M, const float *q, const float *k, const float *v, float g, float beta,
                            float *out)
{
    __m512 decay = _mm512_set1_ps(expf(g));
    float scale = 1.0f / sqrtf((float)d);
    for (int j = 0; j < d; j++) {
        float *row = M + (int64_t)j * d;
        for (int i = 0; i < d; i += 16)
            _mm512_storeu_ps(row + i, _mm512_mul_ps(_mm512_loadu_ps(row + i), decay));
        __m512 dj = _mm512_set1_ps((v[j] - dot_f32(d, row, k)) * beta);
        for (int i = 0; i < d; i += 16)
            _mm512_storeu_ps(row + i, _mm512_fmadd_ps(_mm512_loadu_ps(k + i), dj, _mm512_loadu_ps(row + i)));
        out[j] = dot_f32(d, row, q) * scale;
    }
}

/* DELTA_BLOCK (delta_rule_avx2.h): tokens a block of rows walks before the next block. */

/* dot_f32 of a row held in nv registers (nv % 4 == 0, so no scalar tail) with y[16*nv]. */
ALWAYS_INLINE float dot_regs(int nv, const __m512 *r, const float *y)
{
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 16
    for (int i = 0; i < nv; i++)
        a[i & 3] = _mm512_fmadd_ps(r[i], _mm512_loadu_ps(y + 16 * i), a[i & 3]);
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])));
}

/* R rows j0.. of M (d = 16*nv) through the nb tokens of a block, each row held in registers: per token
 * the decay, the dot with k, the update and the dot with q of delta_step_rows, in its order. Rows are
 * independent, so R > 1 only overlaps their dependency chains. */
ALWAYS_INLINE void delta_rows(int nv, int R, const float *M_src, float *M, int j0, int nb, const float *q,
                              const float *k, const float *v,
                              int64_t qkv_stride, const float *decay, const float *beta, float scale, float *out,
                              int64_t out_stride)
{
    int d = 16 * nv;
    __m512 r[2][16];
    loom_prefetch_ahead(M_src + (int64_t)j0 * d, (size_t)R * (size_t)d * sizeof(float));
#pragma GCC unroll 2
    for (int rr = 0; rr < R; rr++)
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            r[rr][i] = _mm512_loadu_ps(M_src + (int64_t)(j0 + rr) * d + 16 * i);
    for (int t = 0; t < nb; t++) {
        const float *kt = k + t * qkv_stride, *qt = q + t * qkv_stride;
        __m512 dec = _mm512_set1_ps(decay[t]);
#pragma GCC unroll 2
        for (int rr = 0; rr < R; rr++) {
#pragma GCC unroll 16
            for (int i = 0; i < nv; i++)
                r[rr][i] = _mm512_mul_ps(r[rr][i], dec);
            __m512 dj = _mm512_set1_ps((v[t * qkv_stride + j0 + rr] - dot_regs(nv, r[rr], kt)) * beta[t]);
#pragma GCC unroll 16
            for (int i = 0; i < nv; i++)
                r[rr][i] = _mm512_fmadd_ps(_mm512_loadu_ps(kt + 16 * i), dj, r[rr][i]);
            out[t * out_stride + j0 + rr] = dot_regs(nv, r[rr], qt) * scale;
        }
    }
#pragma GCC unroll 2
    for (int rr = 0; rr < R; rr++)
#pragma GCC unroll 16
        for (int i = 0; i < nv; i++)
            _mm512_storeu_ps(M + (int64_t)(j0 + rr) * d + 16 * i, r[rr][i]);
}

/* Every row of the state through one block of tokens, read from M_src and written to M (d = 16*nv, R rows
 * at a time; R divides d). */
ALWAYS_INLINE void delta_block(int nv, int R, const float *M_src, float *M, int nb, const float *q, const float *k,
                               const float *v,
                               int64_t qkv_stride, const float *decay, const float *beta, float *out,
                               int64_t out_stride)
{
    float scale = 1.0f / sqrtf((float)(16 * nv));
    for (int j0 = 0; j0 < 16 * nv; j0 += R)
        delta_rows(nv, R, M_src, M, j0, nb, q, k, v, qkv_stride, decay, beta, scale, out, out_stride);
}

void loom_ops_delta_rule_chunk_avx512(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                                      const float *v, int64_t qkv_stride, const float *g, const float *beta,
                                      int64_t gb_stride, float *out, int64_t out_stride)
{
    if (d != 64 && d != 128 && d != 256) {
        if (M_src != M)
            memcpy(M, M_src, (size_t)d * (size_t)d * sizeof(float));
        for (int t = 0; t < n; t++) {
            const float *qt = q + t * qkv_stride, *kt = k + t * qkv_stride, *vt = v + t * qkv_stride;
            float *ot = out + t * out_stride;
            if (d % 16)
                loom_ops_delta_rule_step(d, M, qt, kt, vt, g[t * gb_stride], beta[t * gb_stride], ot);
            else
                delta_step_rows(d, M, qt, kt, vt, g[t * gb_stride], beta[t * gb_stride], ot);
        }
        return;
    }
    for (int t0 = 0; t0 < n; t0 += DELTA_BLOCK) {
        float decay[DELTA_BLOCK], bt[DELTA_BLOCK];
        int nb = delta_block_gates(n, t0, g, beta, gb_stride, decay, bt);
        const float *qb = q + t0 * qkv_stride, *kb = k + t0 * qkv_stride, *vb = v + t0 * qkv_stride;
        float *ob = out + t0 * out_stride;
        const float *src = t0 == 0 ? M_src : M; /* the first block reads the source, later ones M */
        if (d == 64)
            delta_block(4, 2, src, M, nb, qb, kb, vb, qkv_stride, decay, bt, ob, out_stride);
        else if (d == 128)
            delta_block(8, 2, src, M, nb, qb, kb, vb, qkv_stride, decay, bt, ob, out_stride);
        else
            delta_block(16, 1, src, M, nb, qb, kb, vb, qkv_stride, decay, bt, ob, out_stride);
    }
}

void loom_ops_delta_rule_step_avx512(int d, float *M, const float *q, const float *k, const float *v, float g,
                                     float beta, float *out)
{
    loom_ops_delta_rule_chunk_avx512(d, 1, M, M, q, k, v, 0, &g, &beta, 0, out, 0);
}

static __m512 load_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* The first n (< 16) F16 values at p, zeros after. */
static __m512 load_f16_part(const uint16_t *p, int64_t n)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16((__mmask16)((1u << n) - 1), p));
}

/* ggml_v_expf in 16 lanes (see loom_ops_expf_poly). */
static __m512 expf_poly(__m512 x)
{
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 d = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!d)
        return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(d, res, alt);
}

/* x / (1 + expf_poly(0 - x)) in 16 lanes, as ggml_v_silu. */
static __m512 silu16(__m512 x)
{
    __m512 e = expf_poly(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

void loom_ops_silu_avx512(int64_t n, const float *x, float *y)
{
    int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < nv; i += 16)
        _mm512_storeu_ps(y + i, silu16(_mm512_loadu_ps(x + i)));
    loom_ops_silu(n - nv, x + nv, y + nv); /* fewer than 16: the libm tail */
}

void loom_ops_swiglu_avx512(int64_t n, const float *g, const float *u, float *y)
{
    int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < nv; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(silu16(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i)));
    loom_ops_swiglu(n - nv, g + nv, u + nv, y + nv);
}

/* loom_ops_softmax up to its last step, 16 lanes at a time: x[p] = expf_poly(x[p]*scale - max) for p < n; returns
 * the factor (float)(1 / sum) the probabilities are then multiplied by. */
static float softmax_sum(int64_t n, float *x, float scale)
{
    __m512 vs = _mm512_set1_ps(scale), vmax = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 w = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
        _mm512_storeu_ps(x + i, w);
        vmax = _mm512_max_ps(vmax, w);
    }
    float max = _mm512_reduce_max_ps(vmax);
    for (; i < n; i++) {
        x[i] *= scale;
        max = x[i] > max ? x[i] : max;
    }
    __m512 m = _mm512_set1_ps(max);
    double sum = 0.0;
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 e = _mm512_maskz_mov_ps(k, expf_poly(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m)));
        _mm512_mask_storeu_ps(x + i, k, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    return (float)(1.0 / sum);
}

/* x[p] = f32(f16(x[p] * inv)) for p < n: softmax's last step and the rounding of the probabilities to F16 (as the
 * reference stores them, kept in F32, exact, so that the V products load them without a conversion each). */
static void scale_round(int64_t n, float *x, float inv)
{
    __m512 vi = _mm512_set1_ps(inv);
    for (int64_t p = 0; p < n; p += 16) {
        __mmask16 k = n - p >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - p)) - 1);
        __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + p), vi), _MM_FROUND_TO_NEAREST_INT);
        _mm512_mask_storeu_ps(x + p, k, _mm512_cvtph_ps(h));
    }
}

/* A row's accumulators (GGML_F32x16_REDUCE's first steps) as one vector: (0 + 2) + (1 + 3) for four, the one itself for one. */
ALWAYS_INLINE __m512 combine(int lanes, const __m512 *a)
{
    return lanes == 4 ? _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])) : a[0];
}

/* F16 dot with every element in a lane, rows padded with zeros (dot_f16_lanes in ops.c). */
static float dot_f16_lanes(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order)
{
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int lanes = order == LOOM_ATTN_ORDER_BATCH ? 1 : 4;
    int64_t i = 0, blk = 0;
    for (; i + 16 <= n; i += 16, blk++)
        a[blk % lanes] = _mm512_fmadd_ps(load_f16(x + i), load_f16(y + i), a[blk % lanes]);
    if (i < n)
        a[blk % lanes] = _mm512_fmadd_ps(load_f16_part(x + i, n - i), load_f16_part(y + i, n - i), a[blk % lanes]);
    return _mm512_reduce_add_ps(combine(lanes, a));
}

/* V row . probabilities (F32 values of F16 numbers) with every element in a lane, as dot_f16_lanes: one
 * accumulator (BATCH) or block b of 16 in accumulator b % 4 (SINGLE); zeros past n. */
static float dot_v_probs(int64_t n, const uint16_t *v, const float *probs, enum loom_attn_order order)
{
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int lanes = order == LOOM_ATTN_ORDER_BATCH ? 1 : 4;
    int64_t i = 0, blk = 0;
    for (; i + 16 <= n; i += 16, blk++)
        a[blk % lanes] = _mm512_fmadd_ps(load_f16(v + i), _mm512_loadu_ps(probs + i), a[blk % lanes]);
    if (i < n)
        a[blk % lanes] = _mm512_fmadd_ps(load_f16_part(v + i, n - i),
                                         _mm512_maskz_loadu_ps((__mmask16)((1u << (n - i)) - 1), probs + i),
                                         a[blk % lanes]);
    return _mm512_reduce_add_ps(combine(lanes, a));
}

void loom_ops_attn_head_avx512(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                               int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                               float scale, enum loom_attn_order order, float *scores, uint16_t *probs16, float *out)
{
    /* a single row's K dot has a scalar double tail past the last 64-block: keep that case scalar */
    if (order == LOOM_ATTN_ORDER_SINGLE && head_dim % 64) {
        loom_ops_attn_head(n_kv, head_dim, q16, k_cache, k_stride, v_cache, v_stride, head_dim_v, scale, order,
                           scores, probs16, out);
        return;
    }
    for (int64_t p = 0; p < n_kv; p++)
        scores[p] = dot_f16_lanes(head_dim, k_cache + p * k_stride, q16, order);
    scale_round(n_kv, scores, softmax_sum(n_kv, scores, scale));
    for (int j = 0; j < head_dim_v; j++)
        out[j] = dot_v_probs(n_kv, v_cache + (int64_t)j * v_stride, scores, order);
}

/* ---- several query rows of one KV head (loom_ops_attn_heads) -------------------------------------------
 * Rows go in groups of ATTN_G (the whole groups of the call; a row outside one takes the single-row kernel).
 * Both products run as register tiles: the scores as R query rows x P K positions, the values as R query rows x
 * J V rows, so that each K (V) vector loaded and converted serves R rows and each query (probability) vector P
 * positions (J V rows). Every (row, position) and (row, V row) dot keeps the accumulators, lane blocks and
 * reductions of the single-row kernel above (head_dim a multiple of 64): `lanes` accumulators, block b of 16
 * elements in accumulator b % lanes (4 in SINGLE order, 1 in BATCH order), then (0 + 2) + (1 + 3) and the R16
 * tree; only the interleaving of independent dots changes. A BATCH tile holds R x P (R x J) accumulators, one per
 * dot; a SINGLE tile goes in two halves, accumulators 0 and 2 then 1 and 3 (two per dot), so that it is as
 * large and loads as little per fused multiply-add as a BATCH one (4 x 3 dots x 2 accumulators). */
#define ATTN_G LOOM_OPS_ATTN_GROUP
#define ATTN_ROWS LOOM_OPS_ATTN_ROWS
#define ATTN_MAX_HD 512
#define TILE_MAX 24 /* accumulators per tile, at most */

/* Loads a vector once for the tile's P (J) multiply-adds that use it: without this the compiler folds it into
 * each of them as a memory operand, P loads instead of one. */
#define KEEP_IN_REGISTER(x) __asm__("" : "+v"(x))

/* Tile shapes per order: rows x positions (scores), rows x V rows (values). */
#define BATCH_R 4
#define BATCH_P 4
#define BATCH_J 6
#define SINGLE_R 4
#define SINGLE_P 3
#define SINGLE_J 3

/* The blocks of 16 of each 64 elements that one half of a tile takes, and their accumulators: in BATCH order one
 * half, all 4 blocks t into accumulator 0; in SINGLE order half h takes blocks h and h + 2 (t = 0, 1) into its
 * two accumulators u = t (the dot's accumulators h and h + 2). */
#define HALF_BLOCKS(lanes) ((lanes) == 4 ? 2 : 4)
#define HALF_ACCS(lanes) ((lanes) == 4 ? 2 : 1)
#define BLOCK_OF(lanes, h, t) ((lanes) == 4 ? (h) + 2 * (t) : (t))
#define ACC_OF(lanes, t) ((lanes) == 4 ? (t) : 0)

/* The R16 sums of 16 vectors at once: lane p of the result is _mm512_reduce_add_ps(v[p]) bit for bit. Each
 * level adds the same pairs as the one-vector tree (lanes l + 8 and l, l + 4 and l, then (0 + 2), (1 + 3), then
 * 0 + 1), two vectors' halves side by side; the last level leaves position 4k + j in lane 4j + k. */
static __m512 reduce16_x16(const __m512 v[16])
{
    __m512 w[8], z[4], u[2];
    for (int k = 0; k < 8; k++) /* [T3 of v[2k] | T3 of v[2k + 1]] */
        w[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int m = 0; m < 4; m++) /* quarter j: T6 of v[4m + j] */
        z[m] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * m], w[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(w[2 * m], w[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int n = 0; n < 2; n++) /* quarter j: (0 + 2), (1 + 3) of v[8n + j], then of v[8n + 4 + j] */
        u[n] = _mm512_add_ps(_mm512_shuffle_ps(z[2 * n], z[2 * n + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(z[2 * n], z[2 * n + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_permutexvar_ps(order, r);
}

/* The largest and the smallest of n_kv[0..n). */
static int64_t max_kv(const int64_t *n_kv, int n)
{
    int64_t m = 0;
    for (int g = 0; g < n; g++)
        m = n_kv[g] > m ? n_kv[g] : m;
    return m;
}

static int64_t min_kv(const int64_t *n_kv, int n)
{
    int64_t m = n_kv[0];
    for (int g = 1; g < n; g++)
        m = n_kv[g] < m ? n_kv[g] : m;
    return m;
}

/* Positions of one score block: a multiple of 16 (one reduce16_x16 each) and of every tile's P. */
#define SCORE_POS 48

/* R rows x P positions of scores: sums[r*SCORE_POS + p] = the combined accumulators (one vector, before the R16
 * tree) of K[pos[p]] . q[r], q in F32 (exact from F16) with the R rows' blocks of 16 side by side: block b of
 * row r at qf + (b*R + r)*16 (one pointer for all rows). */
ALWAYS_INLINE void score_tile(int lanes, int R, int P, int hd, const float *qf, const uint16_t *k, int64_t k_stride,
                              const int64_t *pos, __m512 *sums)
{
    const int per = HALF_ACCS(lanes);
#pragma GCC unroll 2
    for (int h = 0; h < lanes / per; h++) {
        __m512 a[TILE_MAX];
#pragma GCC unroll 24
        for (int t = 0; t < R * P * per; t++)
            a[t] = _mm512_setzero_ps();
        const float *qb = qf; /* the R rows' blocks at i */
        for (int i = 0; i < hd; i += 16 * lanes, qb += 16 * lanes * R)
#pragma GCC unroll 2
            for (int t = 0; t < per; t++) {
                int s = BLOCK_OF(lanes, h, t);
                __m512 kv[8];
#pragma GCC unroll 8
                for (int p = 0; p < P; p++)
                    kv[p] = load_f16(k + pos[p] * k_stride + i + 16 * s);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    __m512 qv = _mm512_loadu_ps(qb + (s * R + r) * 16);
                    KEEP_IN_REGISTER(qv);
#pragma GCC unroll 8
                    for (int p = 0; p < P; p++)
                        a[(r * P + p) * per + t] = _mm512_fmadd_ps(kv[p], qv, a[(r * P + p) * per + t]);
                }
            }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int p = 0; p < P; p++) {
                const __m512 *ap = a + (r * P + p) * per;
                __m512 half = per == 2 ? _mm512_add_ps(ap[0], ap[1]) : ap[0]; /* 0 + 2, or 1 + 3 */
                sums[r * SCORE_POS + p] = h ? _mm512_add_ps(sums[r * SCORE_POS + p], half) : half;
            }
        __asm__ volatile("" ::: "memory"); /* the first half's sums wait in memory, not in registers */
    }
}

/* scores[r*stride + p] = K[p] . q[r] for the R rows (n_kv[r] each) at the positions p0 <= p < p0 + SCORE_POS
 * that each row reaches: tiles of P positions (past the rows' last position a tile reads the last K row again
 * and keeps nothing of it), then the R16 trees of 16 positions at once. sums: scratch [R][SCORE_POS]. With
 * prefetch, the K rows of the next block are asked for meanwhile (the first row tile of a block). */
ALWAYS_INLINE void score_rows(int lanes, int R, int P, const int64_t *n_kv, int hd, const float *qf,
                              const uint16_t *k, int64_t k_stride, int64_t p0, int64_t n_all, int prefetch,
                              float *scores, int64_t stride, __m512 *sums)
{
    int64_t n_max = max_kv(n_kv, R);
    for (int64_t pt = p0; pt < p0 + SCORE_POS && pt < n_max; pt += P) {
        int64_t pos[8];
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            pos[p] = pt + p < n_max ? pt + p : n_max - 1;
            if (prefetch && pt + p + SCORE_POS < n_all)
                for (int i = 0; i < hd; i += 32)
                    _mm_prefetch((const char *)(k + (pt + p + SCORE_POS) * k_stride + i), _MM_HINT_T1);
        }
        score_tile(lanes, R, P, hd, qf, k, k_stride, pos, sums + (pt - p0));
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        for (int q = 0; q < SCORE_POS; q += 16) {
            int64_t left = n_kv[r] - (p0 + q); /* this row's positions in the 16 */
            if (left > 0)
                _mm512_mask_storeu_ps(scores + r * stride + p0 + q,
                                      left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1),
                                      reduce16_x16(sums + r * SCORE_POS + q));
        }
}

/* The scores of n_rows rows (a multiple of R; tiles of R rows of the same group): per SCORE_POS positions,
 * every row tile that reaches them in turn, so the block's K rows come from memory once for all of them. */
ALWAYS_INLINE void attn_scores(int lanes, int R, int P, int n_rows, const int64_t *n_kv, int hd, const float *qf,
                               const uint16_t *k, int64_t k_stride, float *scores, int64_t stride)
{
    __m512 sums[4 * SCORE_POS]; /* entries of positions no row reaches are read by the trees, never stored */
    for (int i = 0; i < R * SCORE_POS; i++)
        sums[i] = _mm512_setzero_ps();
    int64_t n_max = max_kv(n_kv, n_rows);
    for (int64_t p0 = 0; p0 < n_max; p0 += SCORE_POS)
        for (int r0 = 0; r0 < n_rows; r0 += R)
            if (max_kv(n_kv + r0, R) > p0)
                score_rows(lanes, R, P, n_kv + r0, hd, qf + (int64_t)r0 * hd, k, k_stride, p0, n_max, r0 == 0,
                           scores + r0 * stride, stride, sums);
}

/* V rows and positions of one values pass: each row tile's accumulators wait in memory between passes; a pass's
 * probabilities (R rows x VALUES_POS) stay in L1 while its J-row tiles go by, and its V stretch (VALUES_ROWS x
 * VALUES_POS, 48 KiB) in L2 for all row tiles. VALUES_POS is a multiple of 64, VALUES_ROWS of 16 (one
 * reduce16_x16 each) and of every J. */
#define VALUES_ROWS 48
#define VALUES_POS 512

/* One block of 16 positions that every row of the tile covers in full (the t-th of half h of the 64 at i). */
ALWAYS_INLINE void values_block(int lanes, int R, int J, int h, int t, const uint16_t *v, int64_t v_stride,
                                const float *probs, int64_t stride, int64_t i, __m512 *a)
{
    const int per = HALF_ACCS(lanes);
    int s = BLOCK_OF(lanes, h, t), u = ACC_OF(lanes, t);
    __m512 vv[8];
#pragma GCC unroll 8
    for (int j = 0; j < J; j++)
        vv[j] = load_f16(v + j * v_stride + i + 16 * s);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        __m512 pv = _mm512_loadu_ps(probs + r * stride + i + 16 * s);
        KEEP_IN_REGISTER(pv);
#pragma GCC unroll 8
        for (int j = 0; j < J; j++)
            a[(r * J + j) * per + u] = _mm512_fmadd_ps(vv[j], pv, a[(r * J + j) * per + u]);
    }
}

/* R rows x J V rows over positions [i0, i1) (i0 a multiple of 64) into the accumulators acc[j*acc_step + r*lanes
 * + s] (in memory): block b of 16 positions goes to accumulator b % lanes; first the blocks every row covers in
 * full, then each row's masked tail. The V row j is v + j*v_stride, row r's probabilities probs + r*stride. With
 * pf, the same V rows pf positions on are asked for meanwhile. */
ALWAYS_INLINE void values_tile(int lanes, int R, int J, const int64_t *n_kv, const uint16_t *v, int64_t v_stride,
                               const float *probs, int64_t stride, int64_t i0, int64_t i1, int64_t pf, __m512 *acc,
                               int acc_step)
{
    const int per = HALF_ACCS(lanes);
    int64_t n_min = min_kv(n_kv, R), n_max = max_kv(n_kv, R);
#pragma GCC unroll 2
    for (int h = 0; h < lanes / per; h++) {
        __m512 a[TILE_MAX];
#pragma GCC unroll 8
        for (int j = 0; j < J; j++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
#pragma GCC unroll 2
                for (int t = 0; t < per; t++)
                    a[(r * J + j) * per + t] = acc[j * acc_step + r * lanes + BLOCK_OF(lanes, h, t)];
        int64_t i = i0;
        for (; i + 64 <= i1 && i + 64 <= n_min; i += 64) {
            values_block(lanes, R, J, h, 0, v, v_stride, probs, stride, i, a);
            values_block(lanes, R, J, h, 1, v, v_stride, probs, stride, i, a);
            if (HALF_BLOCKS(lanes) == 4) {
                values_block(lanes, R, J, h, 2, v, v_stride, probs, stride, i, a);
                values_block(lanes, R, J, h, 3, v, v_stride, probs, stride, i, a);
            }
            if (pf && h == 0)
#pragma GCC unroll 8
                for (int j = 0; j < J; j++) {
                    _mm_prefetch((const char *)(v + j * v_stride + i + pf), _MM_HINT_T0);
                    _mm_prefetch((const char *)(v + j * v_stride + i + pf + 32), _MM_HINT_T0);
                }
        }
        for (; i < i1; i += 64)
            for (int t = 0; t < HALF_BLOCKS(lanes); t++) {
                int s = BLOCK_OF(lanes, h, t), u = ACC_OF(lanes, t);
                int64_t ib = i + 16 * s;
                if (ib >= n_max)
                    break;
                __m512 vv[8];
#pragma GCC unroll 8
                for (int j = 0; j < J; j++)
                    vv[j] = n_max - ib >= 16 ? load_f16(v + j * v_stride + ib)
                                             : load_f16_part(v + j * v_stride + ib, n_max - ib);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) {
                    int64_t left = n_kv[r] - ib;
                    if (left <= 0)
                        continue;
                    /* the single row's masked tail: zeros in both operands */
                    __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
                    __m512 pv = _mm512_maskz_loadu_ps(m, probs + r * stride + ib);
#pragma GCC unroll 8
                    for (int j = 0; j < J; j++)
                        a[(r * J + j) * per + u] =
                            _mm512_fmadd_ps(_mm512_maskz_mov_ps(m, vv[j]), pv, a[(r * J + j) * per + u]);
                }
            }
#pragma GCC unroll 8
        for (int j = 0; j < J; j++)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
#pragma GCC unroll 2
                for (int t = 0; t < per; t++)
                    acc[j * acc_step + r * lanes + BLOCK_OF(lanes, h, t)] = a[(r * J + j) * per + t];
    }
}

/* values_tile for jn V rows: J of them, or the fewer left at the end of a block. */
ALWAYS_INLINE void values_tile_n(int lanes, int R, int J, int jn, const int64_t *n_kv, const uint16_t *v,
                                 int64_t v_stride, const float *probs, int64_t stride, int64_t i0, int64_t i1,
                                 int64_t pf, __m512 *acc, int acc_step)
{
#define VALUES_TILE(j) values_tile(lanes, R, j, n_kv, v, v_stride, probs, stride, i0, i1, pf, acc, acc_step)
    if (jn >= J)
        VALUES_TILE(J);
    else if (J > 5 && jn == 5)
        VALUES_TILE(5);
    else if (J > 4 && jn == 4)
        VALUES_TILE(4);
    else if (J > 3 && jn == 3)
        VALUES_TILE(3);
    else if (J > 2 && jn == 2)
        VALUES_TILE(2);
    else
        VALUES_TILE(1);
#undef VALUES_TILE
}

/* out[r*out_stride + j] = V[j] . probs[r] over p < n_kv[r] (dot_v_probs; probs[r] at probs + r*stride, F32
 * values of F16 numbers) for n_rows rows (a multiple of R), per block of VALUES_ROWS V rows in passes of
 * VALUES_POS positions: each pass takes every row tile in turn, and each row tile every J V rows of the block;
 * the first row tile asks for the next pass's V meanwhile. */
ALWAYS_INLINE void attn_values(int lanes, int R, int J, int n_rows, const int64_t *n_kv, const uint16_t *v,
                               int64_t v_stride, int hdv, const float *probs, int64_t stride, float *out,
                               int64_t out_stride)
{
    __m512 acc[ATTN_ROWS * VALUES_ROWS * 4]; /* [row tile][V row][R][lanes], 192 KiB at most */
    int tile_step = VALUES_ROWS * R * lanes, acc_step = R * lanes;
    int64_t top = max_kv(n_kv, n_rows);
    for (int j0 = 0; j0 < hdv; j0 += VALUES_ROWS) {
        int nj = hdv - j0 < VALUES_ROWS ? hdv - j0 : VALUES_ROWS;
        for (int i = 0; i < n_rows / R * tile_step; i++)
            acc[i] = _mm512_setzero_ps();
        for (int64_t i0 = 0; i0 < top; i0 += VALUES_POS)
            for (int r0 = 0; r0 < n_rows; r0 += R) {
                int64_t n_max = max_kv(n_kv + r0, R);
                if (i0 >= n_max)
                    continue;
                int64_t i1 = n_max - i0 < VALUES_POS ? n_max : i0 + VALUES_POS;
                int64_t pf = r0 == 0 && i0 + VALUES_POS < top ? VALUES_POS : 0;
                for (int jj = 0; jj < nj; jj += J)
                    values_tile_n(lanes, R, J, nj - jj, n_kv + r0, v + (int64_t)(j0 + jj) * v_stride, v_stride,
                                  probs + r0 * stride, stride, i0, i1, pf, acc + r0 / R * tile_step + jj * acc_step,
                                  acc_step);
            }
        for (int r = 0; r < n_rows; r++) {
            const __m512 *ar = acc + r / R * tile_step + r % R * lanes;
            int jj = 0;
            for (; jj + 16 <= nj; jj += 16) { /* 16 V rows' R16 trees at once */
                __m512 c[16];
                for (int l = 0; l < 16; l++)
                    c[l] = combine(lanes, ar + (jj + l) * acc_step);
                _mm512_storeu_ps(out + r * out_stride + j0 + jj, reduce16_x16(c));
            }
            for (; jj < nj; jj++)
                out[r * out_stride + j0 + jj] = _mm512_reduce_add_ps(combine(lanes, ar + jj * acc_step));
        }
    }
}

void loom_ops_attn_heads_avx512(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                                const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                                int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                                uint16_t *probs16, int64_t stride, float *out, int64_t out_stride)
{
    int n_rows = head_dim % 64 || head_dim > ATTN_MAX_HD ? 0 : n_q / ATTN_G * ATTN_G;
    for (int g = n_rows; g < n_q; g++) /* rows outside a whole group: one at a time */
        loom_ops_attn_head_avx512(n_kv[g], head_dim, q16 + (int64_t)g * head_dim, k_cache, k_stride, v_cache, v_stride,
                                  head_dim_v, scale, order, scores + g * stride, probs16 + g * stride,
                                  out + g * out_stride);
    if (!n_rows)
        return;
    int single = order == LOOM_ATTN_ORDER_SINGLE, R = single ? SINGLE_R : BATCH_R;
    float qf[ATTN_ROWS * ATTN_MAX_HD]; /* per row tile, block b of its row r at (b*R + r)*16 */
    for (int g = 0; g < n_rows; g++)
        for (int b = 0; b < head_dim / 16; b++)
            _mm512_storeu_ps(qf + g / R * R * head_dim + (b * R + g % R) * 16,
                             load_f16(q16 + (int64_t)g * head_dim + b * 16));
    if (single)
        attn_scores(4, SINGLE_R, SINGLE_P, n_rows, n_kv, head_dim, qf, k_cache, k_stride, scores, stride);
    else
        attn_scores(1, BATCH_R, BATCH_P, n_rows, n_kv, head_dim, qf, k_cache, k_stride, scores, stride);
    loom_ops_attn_softmax_v_rows_avx512(n_rows, n_kv, scores, stride, scale, v_cache, v_stride, head_dim_v, order, out,
                                        out_stride);
}

void loom_ops_attn_softmax_v_rows_avx512(int n_q, const int64_t *n_kv, float *scores, int64_t stride, float scale,
                                         const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                         enum loom_attn_order order, float *out, int64_t out_stride)
{
    for (int g = 0; g < n_q; g++)
        scale_round(n_kv[g], scores + g * stride, softmax_sum(n_kv[g], scores + g * stride, scale));
    int n_rows = n_q / ATTN_G * ATTN_G; /* the rest one at a time */
    for (int g = n_rows; g < n_q; g++)
        for (int j = 0; j < head_dim_v; j++)
            out[g * out_stride + j] = dot_v_probs(n_kv[g], v_cache + (int64_t)j * v_stride, scores + g * stride, order);
    if (!n_rows)
        return;
    if (order == LOOM_ATTN_ORDER_SINGLE)
        attn_values(4, SINGLE_R, SINGLE_J, n_rows, n_kv, v_cache, v_stride, head_dim_v, scores, stride, out,
                    out_stride);
    else
        attn_values(1, BATCH_R, BATCH_J, n_rows, n_kv, v_cache, v_stride, head_dim_v, scores, stride, out, out_stride);
}
