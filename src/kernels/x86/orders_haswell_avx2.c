/* orders_haswell_avx2.c — AVX2/FMA/F16C forms of the haswell float-order profile's hot kernels
 * (orders_haswell.h): the F32/F16/BF16 vec_dot and tinyBLAS dots, the delta rule, SiLU/SwiGLU and attention, in the
 * reference's AVX2 build's own 8-lane operations, bitwise the scalar kernels (tests/test_kernels.c, test_ops.c).
 * The AVX2 and AVX-512 sets of the profile use them (and ops_avx2.c's conv1d); the rest stays scalar. */
#include <immintrin.h>
#include <string.h>

#include "kernels/helpers_avx2.h"
#include "kernels/orders_haswell.h"
#include "kernels/protos.h"
#include "kernels/x86/attn_group_avx2.h"
#include "kernels/x86/delta_rule_avx2.h"
#include "util/fp16.h"

/* GGML_F32x8_REDUCE of four accumulators: (0+2), (1+3), their sum, then T8a (extract, add, hadd, hadd). */
static inline float reduce_t8a(__m256 acc[4])
{
    __m256 s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

static float dot_f32(int64_t n, const float *x, const float *y)
{
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * j), _mm256_loadu_ps(y + i + 8 * j), acc[j]);
    return loom_hsw_tail_sum(reduce_t8a(acc), n - np, x + np, y + np);
}

void loom_hsw_f32_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a) { *s = dot_f32(n, w, a); }

void loom_hsw_f16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            acc[j] = _mm256_fmadd_ps(attn_load_f16(x + i + 8 * j), attn_load_f16(y + i + 8 * j), acc[j]);
    double sum = reduce_t8a(acc);
    for (int64_t i = np; i < n; i++)
        sum += (double)(_cvtsh_ss(x[i]) * _cvtsh_ss(y[i]));
    *s = (float)sum;
}

void loom_hsw_f32_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    *s = loom_hsum8_ps(acc);
}

void loom_hsw_f16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8)
        acc = _mm256_fmadd_ps(attn_load_f16(x + i), attn_load_f16(y + i), acc);
    *s = loom_hsum8_ps(acc);
}

/* 8 BF16 values at p as floats (exact: the bits shifted into the high half). */
static inline __m256 load_bf16(const uint16_t *p)
{
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

/* loom_hsw_bf16_vec_dot: four 8-lane FMA accumulators over 32-element steps, (0+2)+(1+3), T8b, added to 0.0 in
 * double, the n % 32 tail in double. */
void loom_hsw_bf16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; j++)
            acc[j] = _mm256_fmadd_ps(load_bf16(x + i + 8 * j), load_bf16(y + i + 8 * j), acc[j]);
    double sum = 0.0;
    sum += (double)loom_hsum8_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3])));
    for (; i < n; i++)
        sum += (double)(loom_bf16_to_f32(x[i]) * loom_bf16_to_f32(y[i]));
    *s = (float)sum;
}

void loom_hsw_bf16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8)
        acc = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), acc);
    *s = loom_hsum8_ps(acc);
}

/* 8 elements of type t (0 F32, 1 F16, 2 BF16) from element i of p, as floats. */
static inline __attribute__((always_inline)) __m256 load8_t(const void *p, int64_t i, int t)
{
    return t == 0 ? _mm256_loadu_ps((const float *)p + i)
                  : t == 1 ? attn_load_f16((const uint16_t *)p + i) : load_bf16((const uint16_t *)p + i);
}

/* The tinyBLAS dots above (type t a constant at each use) for R activation rows (a + k * a_stride bytes) at once:
 * row k keeps its own 8-lane accumulator, so each result is bitwise the one-row dot, while R independent FMA chains
 * keep the units busy (the one-row form waits on one chain). */
static inline __attribute__((always_inline)) void tinyblas_rows(int R, int t, int64_t n, float *s, const void *w,
                                                                const void *a, size_t a_stride)
{
    __m256 acc[8];
#pragma GCC unroll 8
    for (int k = 0; k < R; k++)
        acc[k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 x = load8_t(w, i, t);
#pragma GCC unroll 8
        for (int k = 0; k < R; k++)
            acc[k] = _mm256_fmadd_ps(x, load8_t((const char *)a + k * a_stride, i, t), acc[k]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < R; k++)
        s[k] = loom_hsum8_ps(acc[k]);
}

void loom_hsw_f32_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows(4, 0, n, s, w, a, a_stride);
}

void loom_hsw_f32_tinyblas_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows(8, 0, n, s, w, a, a_stride);
}

void loom_hsw_f16_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows(4, 1, n, s, w, a, a_stride);
}

void loom_hsw_f16_tinyblas_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows(8, 1, n, s, w, a, a_stride);
}

void loom_hsw_bf16_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows(4, 2, n, s, w, a, a_stride);
}

void loom_hsw_bf16_tinyblas_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows(8, 2, n, s, w, a, a_stride);
}

/* The delta rule (delta_rule_avx2.h) with the profile's dot_f32 (D1); the decay and the update are elementwise
 * (a rounded product, a fused multiply-add per element), so 8 at a time changes nothing. */
void loom_hsw_delta_rule_chunk_avx2(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                                    const float *v, int64_t qkv_stride, const float *g, const float *beta,
                                    int64_t gb_stride, float *out, int64_t out_stride)
{
    delta_rule_chunk_avx2(dot_f32, d, n, M_src, M, q, k, v, qkv_stride, g, beta, gb_stride, out, out_stride);
}

void loom_hsw_delta_rule_step_avx2(int d, float *M, const float *q, const float *k, const float *v, float g,
                                   float beta, float *out)
{
    loom_hsw_delta_rule_chunk_avx2(d, 1, M, M, q, k, v, 0, &g, &beta, 0, out, 0);
}

/* ggml_v_expf, AVX2 form (vec.h), as the reference writes it. */
static inline __m256 v_expf(__m256 x)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b =
        _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
    const __m256i c =
        _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(126), _CMP_GT_OQ));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    if (!_mm256_movemask_ps(_mm256_castsi256_ps(c)))
        return _mm256_fmadd_ps(j, k, k);
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256i d =
        _mm256_castps_si256(_mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(192), _CMP_GT_OQ));
    return _mm256_or_ps(
        _mm256_and_ps(_mm256_castsi256_ps(d), _mm256_mul_ps(s1, s1)),
        _mm256_andnot_ps(_mm256_castsi256_ps(d),
                         _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(c), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                                      _mm256_andnot_ps(_mm256_castsi256_ps(c), _mm256_fmadd_ps(k, j, k)))));
}

static inline __m256 v_silu(__m256 x)
{
    __m256 e = v_expf(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

void loom_hsw_silu_avx2(int64_t n, const float *x, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, v_silu(_mm256_loadu_ps(x + i)));
    loom_hsw_silu(n - i, x + i, y + i);
}

void loom_hsw_swiglu_avx2(int64_t n, const float *g, const float *u, float *y)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(v_silu(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    loom_hsw_swiglu(n - i, g + i, u + i, y + i);
}

/* ---- attention (D3, D5, D8): attn_group_avx2.h's groups in the forms ATTN_T8AX4 (SINGLE) and ATTN_T8BX1 (BATCH) */

/* loom_hsw_softmax: scale, max, the exponentials (v_expf) in blocks of 8 with zeros past n, each block's T8b sum
 * added in double, then times (float)(1 / sum). */
static void softmax(int64_t n, float *x, float scale)
{
    __m256 m = _mm256_set1_ps(attn_scale_max(n, x, scale));
    double sum = 0.0;
    int64_t i;
    for (i = 0; i < n; i += 8) {
        int64_t k = n - i < 8 ? n - i : 8;
        __m256 e;
        if (k == 8) {
            e = v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
            _mm256_storeu_ps(x + i, e);
        } else { /* the lanes past n: exactly 0 */
            e = _mm256_and_ps(v_expf(_mm256_sub_ps(attn_load8_part(x + i, k), m)),
                              _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)k),
                                                                     _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
            float t[8];
            _mm256_storeu_ps(t, e);
            memcpy(x + i, t, (size_t)k * sizeof *t);
        }
        sum += (double)loom_hsum8_ps(e);
    }
    float inv = (float)(1.0 / sum);
    __m256 vinv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
    for (; i < n; i++)
        x[i] *= inv;
}

/* The scores of G rows (4 or 1), the order's form and G constants in each call. */
static void scores_group(enum loom_attn_order order, int G, const int64_t *n_kv, int hd, const float *qf,
                         const uint16_t *k, int64_t k_stride, float *scores, int64_t stride)
{
    if (order == LOOM_ATTN_ORDER_SINGLE && G == ATTN_G)
        attn_scores_group(ATTN_T8AX4, ATTN_G, n_kv, hd, qf, k, k_stride, scores, stride);
    else if (order == LOOM_ATTN_ORDER_SINGLE)
        attn_scores_group(ATTN_T8AX4, 1, n_kv, hd, qf, k, k_stride, scores, stride);
    else if (G == ATTN_G)
        attn_scores_group(ATTN_T8BX1, ATTN_G, n_kv, hd, qf, k, k_stride, scores, stride);
    else
        attn_scores_group(ATTN_T8BX1, 1, n_kv, hd, qf, k, k_stride, scores, stride);
}

static void values_group(enum loom_attn_order order, int G, const int64_t *n_kv, const uint16_t *v, int64_t v_stride,
                         int hdv, const float *probs, int64_t stride, float *out, int64_t out_stride)
{
    if (order == LOOM_ATTN_ORDER_SINGLE && G == ATTN_G)
        attn_values_group(ATTN_T8AX4, ATTN_G, n_kv, v, v_stride, hdv, probs, stride, out, out_stride);
    else if (order == LOOM_ATTN_ORDER_SINGLE)
        attn_values_group(ATTN_T8AX4, 1, n_kv, v, v_stride, hdv, probs, stride, out, out_stride);
    else if (G == ATTN_G)
        attn_values_group(ATTN_T8BX1, ATTN_G, n_kv, v, v_stride, hdv, probs, stride, out, out_stride);
    else
        attn_values_group(ATTN_T8BX1, 1, n_kv, v, v_stride, hdv, probs, stride, out, out_stride);
}

/* The part after the scores for n_q rows: softmax, the probabilities rounded to F16 (kept in scores as F32), the
 * V products in groups of four, then one row at a time. */
static void softmax_v_rows(int n_q, const int64_t *n_kv, float *scores, int64_t stride, float scale,
                           const uint16_t *v_cache, int64_t v_stride, int head_dim_v, enum loom_attn_order order,
                           float *out, int64_t out_stride)
{
    for (int g = 0; g < n_q; g++) {
        softmax(n_kv[g], scores + g * stride, scale);
        attn_round_probs(n_kv[g], scores + g * stride);
    }
    for (int g = 0, G; g < n_q; g += G) {
        G = n_q - g >= ATTN_G ? ATTN_G : 1;
        values_group(order, G, n_kv + g, v_cache, v_stride, head_dim_v, scores + g * stride, stride,
                     out + g * out_stride, out_stride);
    }
}

void loom_hsw_attn_heads_avx2(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                              const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                              int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                              uint16_t *probs16, int64_t stride, float *out, int64_t out_stride)
{
    if (head_dim % 32 || head_dim > ATTN_MAX_HD) {
        loom_hsw_attn_heads(n_q, n_kv, head_dim, q16, k_cache, k_stride, v_cache, v_stride, head_dim_v, scale, order,
                            scores, probs16, stride, out, out_stride);
        return;
    }
    for (int g = 0, G; g < n_q; g += G) {
        G = n_q - g >= ATTN_G ? ATTN_G : 1;
        float qf[ATTN_G * ATTN_MAX_HD];
        attn_q_f32(G, head_dim, q16 + (int64_t)g * head_dim, qf);
        scores_group(order, G, n_kv + g, head_dim, qf, k_cache, k_stride, scores + g * stride, stride);
    }
    softmax_v_rows(n_q, n_kv, scores, stride, scale, v_cache, v_stride, head_dim_v, order, out, out_stride);
}

void loom_hsw_attn_head_avx2(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                             int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                             enum loom_attn_order order, float *scores, uint16_t *probs16, float *out)
{
    loom_hsw_attn_heads_avx2(1, &n_kv, head_dim, q16, k_cache, k_stride, v_cache, v_stride, head_dim_v, scale, order,
                             scores, probs16, 0, out, 0);
}

void loom_hsw_attn_heads_q8_avx2(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                 int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                 float scale, enum loom_attn_order order, float *scores, uint16_t *probs16,
                                 int64_t stride, float *out, int64_t out_stride)
{
    (void)probs16; /* the rounded probabilities stay in scores, as F32 */
    loom_ops_attn_scores_q8_avx2(n_q, n_kv, head_dim, q8, k_cache, k_stride, scores, stride);
    softmax_v_rows(n_q, n_kv, scores, stride, scale, v_cache, v_stride, head_dim_v, order, out, out_stride);
}
