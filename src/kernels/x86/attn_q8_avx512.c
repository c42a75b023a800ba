/* attn_q8_avx512.c — AVX-512 variant of loom_ops_attn_heads_q8 (attention over a Q8_0 K cache, F16 V;
 * ops.h): scores by loom_q8_0_vec_dot_avx512 (each K row read once for the group's query rows), the softmax of
 * ops.c, and the F16 V part in 16-lane registers holding the scalar kernel's lanes (element i in lane i % 16
 * or i % 64; VGROUP rows share each V tile), so the result is bitwise attn_q8.c's. */
#include <immintrin.h>
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/ops.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* ops.c reduce64: (0+2), (1+3) of the four 16-lane groups, their sum, then R16. */
static float reduce64(float acc[64])
{
    for (int l = 0; l < 16; l++) {
        acc[l] += acc[32 + l];
        acc[16 + l] += acc[48 + l];
    }
    for (int l = 0; l < 16; l++)
        acc[l] += acc[16 + l];
    return loom_ops_reduce16(acc);
}

/* Rows of one group the V part walks together (each V tile loaded once for them). */
#define VGROUP 4
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* loom_ops_expf_poly in 16 lanes (ggml_v_expf's steps: the same fma chain, then the power of two). */
static __m512 expf_poly16(__m512 x)
{
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192), _CMP_GT_OQ);
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512 res = _mm512_scalef_ps(j, n);
    if (!big)
        return res;
    const __m512 alt = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(big, res, alt);
}

/* loom_ops_softmax of x[n] with scale, then each probability rounded to F16 (pr) and kept widened in x: the max
 * over the scaled row, expf_poly of each 16-block (the last one padded with zeros) added to a double sum as R16
 * (_mm512_reduce_add_ps: halves added, as loom_ops_reduce16), then (float)(1 / sum) times each. */
static void softmax_round(int64_t n, float *x, float scale, uint16_t *pr)
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
        __m512 e = _mm512_maskz_mov_ps(k, expf_poly16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), m)));
        _mm512_mask_storeu_ps(x + i, k, e);
        sum += (double)_mm512_reduce_add_ps(e);
    }
    __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(pr + i, k, h);
        _mm512_mask_storeu_ps(x + i, k, _mm512_cvtph_ps(h));
    }
}

/* Lane blocks [i0, i1) of V row v for m rows (a compile-time constant where inlined): a[g][r] += V . pf[g]
 * over registers r < regs. */
ALWAYS_INLINE void v_blocks(int m, int regs, int lanes, int64_t i0, int64_t i1, const uint16_t *v,
                            float *const *pf, __m512 a[VGROUP][4])
{
    for (int64_t i = i0; i < i1; i += lanes)
        for (int r = 0; r < regs; r++) {
            __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + i + 16 * r)));
            for (int g = 0; g < m; g++)
                a[g][r] = _mm512_fmadd_ps(x, _mm512_loadu_ps(pf[g] + i + 16 * r), a[g][r]);
        }
}

/* out[g] for the rows g < m (m <= VGROUP) of one V row v: each row's dot_f16_lanes(n[g], v, its probabilities),
 * the probabilities widened to F32 in pf[g] (exact: they are F16 values). The lane blocks every row has share
 * the V loads; each row keeps its own lanes, its remaining whole blocks and its last partial block. */
ALWAYS_INLINE void v_rows(int m, int regs, int lanes, const int64_t *n, const uint16_t *v, float *const *pf,
                          float *o)
{
    __m512 a[VGROUP][4];
    int64_t nb[VGROUP], nb_min = INT64_MAX;
    for (int g = 0; g < m; g++) {
        nb[g] = n[g] / lanes * lanes;
        nb_min = nb[g] < nb_min ? nb[g] : nb_min;
        for (int r = 0; r < 4; r++)
            a[g][r] = _mm512_setzero_ps();
    }
    v_blocks(m, regs, lanes, 0, nb_min, v, pf, a);
    for (int g = 0; g < m; g++) {
        v_blocks(1, regs, lanes, nb_min, nb[g], v, pf + g, a + g);
        float acc[64];
        for (int r = 0; r < 4; r++)
            _mm512_storeu_ps(acc + 16 * r, a[g][r]);
        for (int64_t i = nb[g]; i < n[g]; i++)
            acc[i - nb[g]] = fmaf(loom_f16_to_f32(v[i]), pf[g][i], acc[i - nb[g]]);
        o[g] = lanes == 16 ? loom_ops_reduce16(acc) : reduce64(acc);
    }
}

/* The V part of rows g0.. (m of them) for every V row j, in the order's lanes. */
static void v_part(int m, int64_t g0, const int64_t *n, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                   float *const *pf, enum loom_attn_order order, float *out, int64_t out_stride)
{
    float o[VGROUP];
    for (int j = 0; j < head_dim_v; j++) {
        const uint16_t *v = v_cache + (int64_t)j * v_stride;
        if (m == VGROUP && order == LOOM_ATTN_ORDER_SINGLE)
            v_rows(VGROUP, 4, 64, n, v, pf, o);
        else if (m == VGROUP)
            v_rows(VGROUP, 1, 16, n, v, pf, o);
        else
            v_rows(m, order == LOOM_ATTN_ORDER_SINGLE ? 4 : 1, order == LOOM_ATTN_ORDER_SINGLE ? 64 : 16, n, v,
                   pf, o);
        for (int g = 0; g < m; g++)
            out[(g0 + g) * out_stride + j] = o[g];
    }
}

void loom_ops_attn_heads_q8_avx512(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                   int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                   float scale, enum loom_attn_order order, float *scores, uint16_t *probs16,
                                   int64_t stride, float *out, int64_t out_stride)
{
    int64_t row = head_dim / LOOM_QK8_0 * (int64_t)sizeof(struct loom_block_q8_0), n_max = 0;
    const char *k = k_cache;
    for (int g = 0; g < n_q; g++)
        n_max = n_kv[g] > n_max ? n_kv[g] : n_max;
    for (int64_t p = 0; p < n_max; p++) /* each K row read once for every query row that sees it */
        for (int g = 0; g < n_q; g++)
            if (p < n_kv[g])
                loom_q8_0_vec_dot_avx512(head_dim, &scores[g * stride + p], k + p * k_stride,
                                         (const char *)q8 + g * row);
    for (int g = 0; g < n_q; g++) /* probabilities rounded to F16, kept widened in scores */
        softmax_round(n_kv[g], scores + g * stride, scale, probs16 + g * stride);
    for (int g0 = 0; g0 < n_q; g0 += VGROUP) {
        int m = n_q - g0 < VGROUP ? n_q - g0 : VGROUP;
        float *pf[VGROUP];
        for (int g = 0; g < m; g++)
            pf[g] = scores + (g0 + g) * stride;
        v_part(m, g0, n_kv + g0, v_cache, v_stride, head_dim_v, pf, order, out, out_stride);
    }
}
