/* ops_avx2.c — the AVX2 set of the per-head ops of ops.h. The gated delta rule and attention are written by
 * hand here (each 16-lane accumulator of the scalar code is a pair of 8-lane registers, reduced in its
 * order, so results are bitwise the scalar set's); the other ops are the scalar C of ops_impl.h compiled
 * again with AVX2, FMA, F16C and BMI2 enabled (the Makefile's flags for *_avx2.c). */
#include <immintrin.h>

#define OPS(name) loom_ops_##name##_avx2
#define OPS_INNER static
#define OPS_OWN_HEADS
#include "kernels/ops_impl.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* One 16-lane accumulator of the scalar code: lanes 0-7 and 8-15. */
struct acc16 {
    __m256 lo, hi;
};

static const struct acc16 acc16_zero = {{0}, {0}};

/* The R16 tree of loom_ops_reduce16: lanes l + 8 and l, then l + 4 and l, then (0 + 2) + (1 + 3). */
ALWAYS_INLINE float reduce16(struct acc16 a)
{
    __m256 h8 = _mm256_add_ps(a.hi, a.lo);
    __m128 h4 = _mm_add_ps(_mm256_extractf128_ps(h8, 1), _mm256_castps256_ps128(h8));
    __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

ALWAYS_INLINE struct acc16 add16(struct acc16 a, struct acc16 b)
{
    return (struct acc16){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}

/* Four 16-lane accumulators as GGML_F32x16_REDUCE: (0 + 2) + (1 + 3), then R16 (reduce64 of ops_impl.h). */
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

/* ---- gated delta rule ------------------------------------------------------------------------------
 * loom_ops_delta_rule_step per row of the state: decay, the dot with k, the update, the dot with q. A row
 * (d floats) stays in L1 while a block of tokens passes over it; q and k of the block stay in L1 too. */

/* Tokens a row walks before the next row. */
#define DELTA_BLOCK 16

/* Row j of the state through the nb tokens of a block: read from src, written to row. */
static void delta_row(int d, const float *src, float *row, int j, int nb, const float *q, const float *k,
                      const float *v, int64_t qkv_stride, const float *decay, const float *beta, float scale,
                      float *out, int64_t out_stride)
{
    for (int t = 0; t < nb; t++) {
        const float *kt = k + t * qkv_stride, *in = t == 0 ? src : row;
        __m256 dec = _mm256_set1_ps(decay[t]);
        int i = 0;
        for (; i + 8 <= d; i += 8)
            _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(in + i), dec));
        for (; i < d; i++)
            row[i] = in[i] * decay[t];
        float dj = (v[t * qkv_stride + j] - dot_f32(d, row, kt)) * beta[t];
        __m256 vd = _mm256_set1_ps(dj);
        for (i = 0; i + 8 <= d; i += 8)
            _mm256_storeu_ps(row + i, _mm256_fmadd_ps(_mm256_loadu_ps(kt + i), vd, _mm256_loadu_ps(row + i)));
        for (; i < d; i++)
            row[i] = fmaf(kt[i], dj, row[i]);
        out[t * out_stride + j] = dot_f32(d, row, q + t * qkv_stride) * scale;
    }
}

void loom_ops_delta_rule_chunk_avx2(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                                    const float *v, int64_t qkv_stride, const float *g, const float *beta,
                                    int64_t gb_stride, float *out, int64_t out_stride)
{
    float scale = 1.0f / sqrtf((float)d);
    for (int t0 = 0; t0 < n; t0 += DELTA_BLOCK) {
        int nb = n - t0 < DELTA_BLOCK ? n - t0 : DELTA_BLOCK;
        float decay[DELTA_BLOCK], bt[DELTA_BLOCK];
        for (int t = 0; t < nb; t++) {
            decay[t] = expf(g[(t0 + t) * gb_stride]);
            bt[t] = beta[(t0 + t) * gb_stride];
        }
        const float *src = t0 == 0 ? M_src : M; /* the first block reads the source, later ones M */
        for (int j = 0; j < d; j++)
            delta_row(d, src + (int64_t)j * d, M + (int64_t)j * d, j, nb, q + t0 * qkv_stride,
                      k + t0 * qkv_stride, v + t0 * qkv_stride, qkv_stride, decay, bt, scale, out + t0 * out_stride,
                      out_stride);
    }
}

void loom_ops_delta_rule_step_avx2(int d, float *M, const float *q, const float *k, const float *v, float g,
                                   float beta, float *out)
{
    loom_ops_delta_rule_chunk_avx2(d, 1, M, M, q, k, v, 0, &g, &beta, 0, out, 0);
}

/* ---- attention over an F16 KV cache (ops.h) ---------------------------------------------------------- */

static __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* 16 F16 values at p as an accumulator's lanes: the first n (<= 16), zeros after. */
static struct acc16 load16_f16(const uint16_t *p, int64_t n)
{
    if (n >= 16)
        return (struct acc16){load_f16(p), load_f16(p + 8)};
    uint16_t t[16] = {0};
    memcpy(t, p, (size_t)n * sizeof *t);
    return (struct acc16){load_f16(t), load_f16(t + 8)};
}

ALWAYS_INLINE struct acc16 fma16(struct acc16 x, struct acc16 y, struct acc16 a)
{
    return (struct acc16){_mm256_fmadd_ps(x.lo, y.lo, a.lo), _mm256_fmadd_ps(x.hi, y.hi, a.hi)};
}

/* F16 dot with every element in a lane, rows padded with zeros (dot_f16_lanes of ops_impl.h): one
 * accumulator (BATCH) or four, block b of 16 elements in accumulator b % 4 (SINGLE). */
static float dot_f16_lanes(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order)
{
    struct acc16 a[4] = {acc16_zero, acc16_zero, acc16_zero, acc16_zero};
    int lanes = order == LOOM_ATTN_ORDER_BATCH ? 1 : 4;
    for (int64_t i = 0, blk = 0; i < n; i += 16, blk++)
        a[blk % lanes] = fma16(load16_f16(x + i, n - i), load16_f16(y + i, n - i), a[blk % lanes]);
    return lanes == 4 ? reduce4(a) : reduce16(a[0]);
}

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

/* loom_ops_softmax: scale, max, exponentials summed in double per block of 16 (R16 over the block, zeros
 * past n), then times 1 / sum. */
static void softmax(int64_t n, float *x, float scale)
{
    __m256 vs = _mm256_set1_ps(scale), vmax = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 w = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        _mm256_storeu_ps(x + i, w);
        vmax = _mm256_max_ps(vmax, w);
    }
    float lanes[8], max = -INFINITY;
    _mm256_storeu_ps(lanes, vmax);
    for (int l = 0; l < 8; l++)
        max = lanes[l] > max ? lanes[l] : max;
    for (; i < n; i++) {
        x[i] *= scale;
        max = x[i] > max ? x[i] : max;
    }
    __m256 m = _mm256_set1_ps(max);
    double sum = 0.0;
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

/* probs16[p] = f16(x[p]) for p < n. */
static void round_probs(int64_t n, const float *x, uint16_t *probs16)
{
    int64_t p = 0;
    for (; p + 8 <= n; p += 8)
        _mm_storeu_si128((__m128i *)(probs16 + p), _mm256_cvtps_ph(_mm256_loadu_ps(x + p), _MM_FROUND_TO_NEAREST_INT));
    for (; p < n; p++)
        probs16[p] = loom_f32_to_f16(x[p]);
}

void loom_ops_attn_head_avx2(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                             int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                             enum loom_attn_order order, float *scores, uint16_t *probs16, float *out)
{
    for (int64_t p = 0; p < n_kv; p++) /* a single row's K dot has a scalar double tail past the last 64 */
        scores[p] = order == LOOM_ATTN_ORDER_SINGLE && head_dim % 64
                        ? loom_ops_dot_f16(head_dim, k_cache + p * k_stride, q16, order)
                        : dot_f16_lanes(head_dim, k_cache + p * k_stride, q16, order);
    softmax(n_kv, scores, scale);
    round_probs(n_kv, scores, probs16);
    for (int j = 0; j < head_dim_v; j++)
        out[j] = dot_f16_lanes(n_kv, v_cache + (int64_t)j * v_stride, probs16, order);
}

/* ---- several query rows of one head (loom_ops_attn_heads) -------------------------------------------
 * Each K row and V row is converted once for the whole group; every row keeps the accumulators, lane
 * blocks and reductions of the single-row kernel (SINGLE order, head_dim a multiple of 64). Sixteen
 * registers cannot hold four rows' four accumulators, so each accumulator half runs its whole chain (the
 * 64-element blocks in order) before the next, from the group's converted values. */
#define ATTN_G LOOM_OPS_ATTN_GROUP
#define ATTN_MAX_HD 512

/* scores[g*stride + p] = K[p] . q[g] for p < n_kv[g]; qf[g*hd ..] is q[g] in F32 (exact from F16). */
static void attn_scores_group(const int64_t *n_kv, int hd, const float *qf, const uint16_t *k, int64_t k_stride,
                              float *scores, int64_t stride)
{
    int64_t n_max = 0;
    for (int g = 0; g < ATTN_G; g++)
        n_max = n_kv[g] > n_max ? n_kv[g] : n_max;
    int nb = hd / 64;
    for (int64_t p = 0; p < n_max; p++) {
        const uint16_t *kr = k + p * k_stride;
        float lanes[ATTN_G][64]; /* row g's accumulator s, lane l at [16 s + l] */
        for (int h = 0; h < 8; h++) { /* half h % 2 of accumulator h / 2: elements 8 h .. 8 h + 7 of a block */
            __m256 kv[ATTN_MAX_HD / 64];
            for (int b = 0; b < nb; b++)
                kv[b] = load_f16(kr + 64 * b + 8 * h);
#pragma GCC unroll 4
            for (int g = 0; g < ATTN_G; g++) {
                __m256 a = _mm256_setzero_ps();
                for (int b = 0; b < nb; b++)
                    a = _mm256_fmadd_ps(kv[b], _mm256_loadu_ps(qf + g * hd + 64 * b + 8 * h), a);
                _mm256_storeu_ps(lanes[g] + 8 * h, a);
            }
        }
        for (int g = 0; g < ATTN_G; g++)
            if (p < n_kv[g]) {
                struct acc16 a[4];
                for (int s = 0; s < 4; s++)
                    a[s] = (struct acc16){_mm256_loadu_ps(lanes[g] + 16 * s), _mm256_loadu_ps(lanes[g] + 16 * s + 8)};
                scores[g * stride + p] = reduce4(a);
            }
    }
}

/* out[g*out_stride + j] = V[j] . probs16[g] over p < n_kv[g] (dot_f16_lanes, SINGLE order): per V row,
 * each accumulator half of the four rows through all blocks of 64 positions, then the next half. */
static void attn_values_group(const int64_t *n_kv, const uint16_t *v, int64_t v_stride, int hdv,
                              const uint16_t *probs16, int64_t stride, float *out, int64_t out_stride)
{
    int64_t n_max = 0;
    for (int g = 0; g < ATTN_G; g++)
        n_max = n_kv[g] > n_max ? n_kv[g] : n_max;
    for (int j = 0; j < hdv; j++) {
        const uint16_t *vr = v + (int64_t)j * v_stride;
        float lanes[ATTN_G][64];
        for (int h = 0; h < 8; h++) {
            __m256 a[ATTN_G] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int64_t i = 8 * h; i < n_max; i += 64) {
                /* positions i .. i + 7: zeros past each row's end (the single row's padded tail), and no
                 * product at all for a row that ends before the block of 16 they are in */
                int64_t left = n_max - i;
                __m256 vb = left >= 8 ? load_f16(vr + i) : load16_f16(vr + i, left).lo;
                int64_t blk = i - i % 16;
#pragma GCC unroll 4
                for (int g = 0; g < ATTN_G; g++) {
                    int64_t r = n_kv[g] - i;
                    if (n_kv[g] <= blk)
                        continue;
                    __m256 pb = r >= 8 ? load_f16(probs16 + g * stride + i)
                                       : load16_f16(probs16 + g * stride + i, r > 0 ? r : 0).lo;
                    __m256 vg = r >= 8 ? vb : load16_f16(vr + i, r > 0 ? r : 0).lo;
                    a[g] = _mm256_fmadd_ps(vg, pb, a[g]);
                }
            }
            for (int g = 0; g < ATTN_G; g++)
                _mm256_storeu_ps(lanes[g] + 8 * h, a[g]);
        }
        for (int g = 0; g < ATTN_G; g++) {
            struct acc16 a[4];
            for (int s = 0; s < 4; s++)
                a[s] = (struct acc16){_mm256_loadu_ps(lanes[g] + 16 * s), _mm256_loadu_ps(lanes[g] + 16 * s + 8)};
            out[g * out_stride + j] = reduce4(a);
        }
    }
}

void loom_ops_attn_heads_avx2(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                              const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                              int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                              uint16_t *probs16, int64_t stride, float *out, int64_t out_stride)
{
    if (n_q != ATTN_G || order != LOOM_ATTN_ORDER_SINGLE || head_dim % 64 || head_dim > ATTN_MAX_HD) {
        for (int g = 0; g < n_q; g++)
            loom_ops_attn_head_avx2(n_kv[g], head_dim, q16 + (int64_t)g * head_dim, k_cache, k_stride, v_cache,
                                    v_stride, head_dim_v, scale, order, scores + g * stride, probs16 + g * stride,
                                    out + g * out_stride);
        return;
    }
    float qf[ATTN_G * ATTN_MAX_HD];
    for (int i = 0; i < ATTN_G * head_dim; i += 8)
        _mm256_storeu_ps(qf + i, load_f16(q16 + i));
    attn_scores_group(n_kv, head_dim, qf, k_cache, k_stride, scores, stride);
    for (int g = 0; g < ATTN_G; g++) {
        softmax(n_kv[g], scores + g * stride, scale);
        round_probs(n_kv[g], scores + g * stride, probs16 + g * stride);
    }
    attn_values_group(n_kv, v_cache, v_stride, head_dim_v, probs16, stride, out, out_stride);
}
