/* ops_avx512.c — AVX-512 variants of the per-head kernels of ops.h (the gated delta rule step and one
 * attention head). They compute exactly what the scalar versions in ops.c compute, in the same order
 * (the scalar code already describes 16-lane accumulators), so results are bitwise identical. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/ops.h"

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

/* 16 channels at a time for kernels shorter than 8 taps (a chain of fused multiply-adds per channel, as the
 * scalar tail order gives for n < 8); longer kernels take the scalar path. */
void loom_ops_conv1d_step_avx512(int64_t channels, int K, float *state, const float *w, const float *x, float *y)
{
    if (K >= 8) {
        loom_ops_conv1d_step(channels, K, state, w, x, y);
        return;
    }
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i s_idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(K - 1));
    const __m512i w_idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(K));
    int64_t c0 = 0;
    for (; c0 + 16 <= channels; c0 += 16) {
        float *s = state + c0 * (K - 1);
        const float *wc = w + c0 * K;
        __m512 acc = _mm512_setzero_ps();
        for (int j = 0; j < K - 1; j++)
            acc = _mm512_fmadd_ps(_mm512_i32gather_ps(s_idx, s + j, 4), _mm512_i32gather_ps(w_idx, wc + j, 4), acc);
        __m512 xv = _mm512_loadu_ps(x + c0);
        _mm512_storeu_ps(y + c0, _mm512_fmadd_ps(xv, _mm512_i32gather_ps(w_idx, wc + K - 1, 4), acc));
        for (int l = 0; l < 16 && K > 1; l++) {
            float *sl = s + l * (K - 1);
            memmove(sl, sl + 1, (size_t)(K - 2) * sizeof(float));
            sl[K - 2] = x[c0 + l];
        }
    }
    if (c0 < channels)
        loom_ops_conv1d_step(channels - c0, K, state + c0 * (K - 1), w + c0 * K, x + c0, y + c0);
}

void loom_ops_delta_rule_step_avx512(int d, float *M, const float *q, const float *k, const float *v, float g,
                                     float beta, float *out)
{
    if (d % 16) {
        loom_ops_delta_rule_step(d, M, q, k, v, g, beta, out);
        return;
    }
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

/* loom_ops_softmax, 16 lanes at a time. */
static void softmax(int64_t n, float *x, float scale)
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
    __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (i = 0; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    for (; i < n; i++)
        x[i] *= (float)(1.0 / sum);
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
    if (lanes == 4) {
        a[0] = _mm512_add_ps(a[0], a[2]);
        a[1] = _mm512_add_ps(a[1], a[3]);
        a[0] = _mm512_add_ps(a[0], a[1]);
    }
    return _mm512_reduce_add_ps(a[0]);
}

/* probs16[p] = f16(x[p]) for p < n. */
static void round_probs(int64_t n, const float *x, uint16_t *probs16)
{
    int64_t p = 0;
    for (; p + 16 <= n; p += 16)
        _mm256_storeu_si256((__m256i *)(probs16 + p),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + p), _MM_FROUND_TO_NEAREST_INT));
    if (p < n) {
        __mmask16 k = (__mmask16)((1u << (n - p)) - 1);
        _mm256_mask_storeu_epi16(probs16 + p, k,
                                 _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, x + p), _MM_FROUND_TO_NEAREST_INT));
    }
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
    softmax(n_kv, scores, scale);
    round_probs(n_kv, scores, probs16);
    for (int j = 0; j < head_dim_v; j++)
        out[j] = dot_f16_lanes(n_kv, v_cache + (int64_t)j * v_stride, probs16, order);
}

/* ---- several query rows of one head (loom_ops_attn_heads) -------------------------------------------
 * Each K row and V row is loaded once for the whole group; every row keeps the accumulators, lane blocks
 * and reductions of the single-row kernel above (SINGLE order, head_dim a multiple of 64). */
#define ATTN_G LOOM_OPS_ATTN_GROUP
#define ATTN_MAX_HD 512

/* (a0 + a2) + (a1 + a3), then the R16 tree: dot_f16_lanes' four-accumulator reduction. */
static float reduce4(const __m512 *a)
{
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])));
}

/* scores[g*stride + p] = K[p] . q[g] for p < n_kv[g]; qf[g*hd ..] is q[g] in F32 (exact from F16). */
static void attn_scores_group(const int64_t *n_kv, int hd, const float *qf, const uint16_t *k, int64_t k_stride,
                              float *scores, int64_t stride)
{
    int64_t n_max = 0;
    for (int g = 0; g < ATTN_G; g++)
        n_max = n_kv[g] > n_max ? n_kv[g] : n_max;
    for (int64_t p = 0; p < n_max; p++) {
        const uint16_t *kr = k + p * k_stride;
        __m512 a[ATTN_G][4];
        for (int g = 0; g < ATTN_G; g++)
            a[g][0] = a[g][1] = a[g][2] = a[g][3] = _mm512_setzero_ps();
        for (int i = 0; i < hd; i += 64)
            for (int s = 0; s < 4; s++) {
                __m512 kv = load_f16(kr + i + 16 * s);
                for (int g = 0; g < ATTN_G; g++)
                    a[g][s] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(qf + g * hd + i + 16 * s), a[g][s]);
            }
        for (int g = 0; g < ATTN_G; g++)
            if (p < n_kv[g])
                scores[g * stride + p] = reduce4(a[g]);
    }
}

/* out[g*out_stride + j] = V[j] . probs16[g] over p < n_kv[g] (dot_f16_lanes, SINGLE order). */
static void attn_values_group(const int64_t *n_kv, const uint16_t *v, int64_t v_stride, int hdv,
                              const uint16_t *probs16, int64_t stride, float *out, int64_t out_stride)
{
    int64_t n_max = 0;
    for (int g = 0; g < ATTN_G; g++)
        n_max = n_kv[g] > n_max ? n_kv[g] : n_max;
    for (int j = 0; j < hdv; j++) {
        const uint16_t *vr = v + (int64_t)j * v_stride;
        __m512 a[ATTN_G][4];
        for (int g = 0; g < ATTN_G; g++)
            a[g][0] = a[g][1] = a[g][2] = a[g][3] = _mm512_setzero_ps();
        int64_t i = 0;
        for (int blk = 0; i < n_max; i += 16, blk++) {
            __m512 vb = n_max - i >= 16 ? load_f16(vr + i) : load_f16_part(vr + i, n_max - i);
            for (int g = 0; g < ATTN_G; g++) {
                int64_t r = n_kv[g] - i;
                if (r >= 16)
                    a[g][blk & 3] = _mm512_fmadd_ps(vb, load_f16(probs16 + g * stride + i), a[g][blk & 3]);
                else if (r > 0) /* the single row's masked tail: zeros in both operands */
                    a[g][blk & 3] = _mm512_fmadd_ps(_mm512_maskz_mov_ps((__mmask16)((1u << r) - 1), vb),
                                                    load_f16_part(probs16 + g * stride + i, r), a[g][blk & 3]);
            }
        }
        for (int g = 0; g < ATTN_G; g++)
            out[g * out_stride + j] = reduce4(a[g]);
    }
}

void loom_ops_attn_heads_avx512(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                                const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                                int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                                uint16_t *probs16, int64_t stride, float *out, int64_t out_stride)
{
    if (n_q != ATTN_G || order != LOOM_ATTN_ORDER_SINGLE || head_dim % 64 || head_dim > ATTN_MAX_HD) {
        for (int g = 0; g < n_q; g++)
            loom_ops_attn_head_avx512(n_kv[g], head_dim, q16 + (int64_t)g * head_dim, k_cache, k_stride, v_cache,
                                      v_stride, head_dim_v, scale, order, scores + g * stride,
                                      probs16 + g * stride, out + g * out_stride);
        return;
    }
    float qf[ATTN_G * ATTN_MAX_HD];
    for (int i = 0; i < ATTN_G * head_dim; i += 16)
        _mm512_storeu_ps(qf + i, load_f16(q16 + i));
    attn_scores_group(n_kv, head_dim, qf, k_cache, k_stride, scores, stride);
    for (int g = 0; g < ATTN_G; g++) {
        softmax(n_kv[g], scores + g * stride, scale);
        round_probs(n_kv[g], scores + g * stride, probs16 + g * stride);
    }
    attn_values_group(n_kv, v_cache, v_stride, head_dim_v, probs16, stride, out, out_stride);
}
