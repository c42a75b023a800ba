/* attn_group_avx2.h — the AVX2 attention of up to four query rows of one head over an F16 KV cache, in either
 * float-order profile's accumulator layout and reduction trees (a compile-time `form`): included by ops_avx2.c
 * (the avx512 profile's orders) and orders_haswell_avx2.c (the haswell profile's), each bitwise its scalar kernel. */
#ifndef LOOM_KERNELS_X86_ATTN_GROUP_AVX2_H
#define LOOM_KERNELS_X86_ATTN_GROUP_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels/helpers_avx2.h"
#include "kernels/ops.h"
#include "util/fp16.h"

#define ATTN_INLINE static inline __attribute__((always_inline))
#define ATTN_G LOOM_OPS_ATTN_GROUP
#define ATTN_MAX_HD 512

/* The layout of one dot order's accumulators, as 8-lane slices: S slices (attn_slices), element e of a row in slice
 * e / 8 % S; the slices folded in the order's tree (attn_fold), then one 8-lane horizontal sum (T8a or T8b).
 * A row's last partial slice: the avx512 forms add products of zeros up to the end of its 16-element block (the
 * scalar code's zero-padded 16-lane loads), the haswell forms add no product past the row's end. */
enum attn_form {
    ATTN_R16X4, /* avx512 SINGLE: four 16-lane accumulators, (0 + 2) + (1 + 3), R16 (S 8) */
    ATTN_R16X1, /* avx512 BATCH: one 16-lane accumulator, R16 (S 2) */
    ATTN_T8AX4, /* haswell SINGLE: four 8-lane accumulators, (0 + 2) + (1 + 3), T8a (S 4) */
    ATTN_T8BX1, /* haswell BATCH: one 8-lane accumulator, T8b (S 1) */
};

ATTN_INLINE int attn_slices(enum attn_form f)
{
    return f == ATTN_R16X4 ? 8 : f == ATTN_R16X1 ? 2 : f == ATTN_T8AX4 ? 4 : 1;
}

static inline __m256 attn_load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* 8 F16 values at p as floats: the first n (any n; none when n <= 0), zeros after. */
static inline __m256 attn_load8_f16_part(const uint16_t *p, int64_t n)
{
    uint16_t t[8] = {0};
    if (n > 0)
        memcpy(t, p, (size_t)(n < 8 ? n : 8) * sizeof *t);
    return attn_load_f16(t);
}

/* 8 floats at p: the first n (any n; none when n <= 0), zeros after. */
static inline __m256 attn_load8_part(const float *p, int64_t n)
{
    float t[8] = {0};
    if (n > 0)
        memcpy(t, p, (size_t)(n < 8 ? n : 8) * sizeof *t);
    return _mm256_loadu_ps(t);
}

/* x[p] = f32(f16(x[p])) for p < n: the probabilities rounded to F16 as the reference stores them, kept in F32
 * (exact) so that the V products load them without a conversion each. */
static inline void attn_round_probs(int64_t n, float *x)
{
    int64_t p = 0;
    for (; p + 8 <= n; p += 8)
        _mm256_storeu_ps(x + p, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + p), _MM_FROUND_TO_NEAREST_INT)));
    for (; p < n; p++)
        x[p] = loom_f16_to_f32(loom_f32_to_f16(x[p]));
}

/* The softmax's first pass over scores x[n] (both profiles): x[i] *= scale, returning the largest (exact in any
 * order). */
static inline float attn_scale_max(int64_t n, float *x, float scale)
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
    return max;
}

/* The slices s[0 .. S-1] of one row folded in the form's tree to one 8-lane sum: R16X4 reduce4's
 * ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) (lanes 0-7 and 8-15 of (a0 + a2) + (a1 + a3)), R16X1 s0 + s1,
 * T8AX4 (s0 + s2) + (s1 + s3), T8BX1 s0. */
ATTN_INLINE __m256 attn_fold(enum attn_form f, const __m256 *s)
{
    switch (f) {
    case ATTN_R16X4:
        return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s[0], s[4]), _mm256_add_ps(s[2], s[6])),
                             _mm256_add_ps(_mm256_add_ps(s[1], s[5]), _mm256_add_ps(s[3], s[7])));
    case ATTN_R16X1:
        return _mm256_add_ps(s[0], s[1]);
    case ATTN_T8AX4:
        return _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3]));
    default:
        return s[0];
    }
}

/* The 8-lane horizontal sum of each of u[0..3] into r[0..3], four at once: a[l] + a[l + 4], then T8b
 * (loom_hsum8_ps: (0 + 2) + (1 + 3)) or, for T8AX4, T8a ((0 + 1) + (2 + 3)). */
ATTN_INLINE void attn_hsum8_x4(enum attn_form f, const __m256 u[4], float r[4])
{
    __m256 r01 = _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x31), _mm256_permute2f128_ps(u[0], u[1], 0x20));
    __m256 r23 = _mm256_add_ps(_mm256_permute2f128_ps(u[2], u[3], 0x31), _mm256_permute2f128_ps(u[2], u[3], 0x20));
    /* per 128-bit half (u0 | u1 below, u2 | u3 above): the first level of the tree for each */
    __m256 s = f == ATTN_T8AX4 ? _mm256_add_ps(_mm256_shuffle_ps(r01, r23, _MM_SHUFFLE(2, 0, 2, 0)),
                                               _mm256_shuffle_ps(r01, r23, _MM_SHUFFLE(3, 1, 3, 1)))
                               : _mm256_add_ps(_mm256_shuffle_ps(r01, r23, _MM_SHUFFLE(1, 0, 1, 0)),
                                               _mm256_shuffle_ps(r01, r23, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 t = _mm256_add_ps(_mm256_shuffle_ps(s, s, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm256_shuffle_ps(s, s, _MM_SHUFFLE(3, 1, 3, 1)));
    float l[8];
    _mm256_storeu_ps(l, t);
    r[0] = l[0], r[1] = l[4], r[2] = l[1], r[3] = l[5];
}

/* y[g] = chain of slice s0 (+ chain of slice s1 when s1 >= 0) of K row kr . q[g] for g < G (qf: the rows in F32,
 * hd apart), over the row's nb blocks of `step` elements: up to eight independent FMA chains. */
ATTN_INLINE void attn_scores_pair(int G, const uint16_t *kr, const float *qf, int hd, int step, int nb, int s0, int s1,
                                  __m256 y[ATTN_G])
{
    __m256 a[ATTN_G], b[ATTN_G];
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
        a[g] = b[g] = _mm256_setzero_ps();
    for (int blk = 0; blk < nb; blk++) {
        int e0 = step * blk + 8 * s0, e1 = step * blk + 8 * s1;
        __m256 k0 = attn_load_f16(kr + e0);
        __m256 k1 = s1 >= 0 ? attn_load_f16(kr + e1) : k0;
#pragma GCC unroll 4
        for (int g = 0; g < G; g++) {
            a[g] = _mm256_fmadd_ps(k0, _mm256_loadu_ps(qf + g * hd + e0), a[g]);
            if (s1 >= 0)
                b[g] = _mm256_fmadd_ps(k1, _mm256_loadu_ps(qf + g * hd + e1), b[g]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; g++)
        y[g] = s1 >= 0 ? _mm256_add_ps(a[g], b[g]) : a[g];
}

/* scores[g*stride + p] = K[p] . q[g] for p < n_kv[g], g < G (hd a multiple of 8 * S); qf[g*hd ..] is q[g] in F32
 * (exact from F16). The slices' chains run a pair at a time, combined in attn_fold's tree. */
ATTN_INLINE void attn_scores_group(enum attn_form f, int G, const int64_t *n_kv, int hd, const float *qf,
                                   const uint16_t *k, int64_t k_stride, float *scores, int64_t stride)
{
    int64_t n_max = 0;
    for (int g = 0; g < G; g++)
        n_max = n_kv[g] > n_max ? n_kv[g] : n_max;
    int step = 8 * attn_slices(f), nb = hd / step;
    for (int64_t p = 0; p < n_max; p++) {
        const uint16_t *kr = k + p * k_stride;
        __m256 u[ATTN_G] = {0}, x[ATTN_G], y[ATTN_G];
        float r[ATTN_G];
        if (f == ATTN_R16X4) {
            attn_scores_pair(G, kr, qf, hd, step, nb, 0, 4, x);
            attn_scores_pair(G, kr, qf, hd, step, nb, 2, 6, y);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                u[g] = _mm256_add_ps(x[g], y[g]);
            attn_scores_pair(G, kr, qf, hd, step, nb, 1, 5, x);
            attn_scores_pair(G, kr, qf, hd, step, nb, 3, 7, y);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                u[g] = _mm256_add_ps(u[g], _mm256_add_ps(x[g], y[g]));
        } else if (f == ATTN_T8AX4) {
            attn_scores_pair(G, kr, qf, hd, step, nb, 0, 2, x);
            attn_scores_pair(G, kr, qf, hd, step, nb, 1, 3, y);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                u[g] = _mm256_add_ps(x[g], y[g]);
        } else {
            attn_scores_pair(G, kr, qf, hd, step, nb, 0, f == ATTN_R16X1 ? 1 : -1, u);
        }
        attn_hsum8_x4(f, u, r);
#pragma GCC unroll 4
        for (int g = 0; g < G; g++)
            if (p < n_kv[g])
                scores[g * stride + p] = r[g];
    }
}

/* One slice's step of the V products at positions i .. i + 7 of V row vr for the G rows' a[], past the positions
 * every row covers: the form's rule for a row's last partial slice (see enum attn_form). */
ATTN_INLINE void attn_values_step(enum attn_form f, int G, const uint16_t *vr, int64_t i, int64_t n_max,
                                  const int64_t *n_kv, const float *probs, int64_t stride, __m256 *a)
{
    int64_t left = n_max - i;
    __m256 vb = left >= 8 ? attn_load_f16(vr + i) : attn_load8_f16_part(vr + i, left);
    int64_t blk = f == ATTN_R16X4 || f == ATTN_R16X1 ? i - i % 16 : i;
#pragma GCC unroll 4
    for (int g = 0; g < G; g++) {
        int64_t r = n_kv[g] - i;
        if (n_kv[g] <= blk)
            continue;
        if (r >= 8) {
            a[g] = _mm256_fmadd_ps(vb, _mm256_loadu_ps(probs + g * stride + i), a[g]);
            continue;
        }
        __m256 s = _mm256_fmadd_ps(attn_load8_f16_part(vr + i, r), attn_load8_part(probs + g * stride + i, r), a[g]);
        if (f == ATTN_T8AX4 || f == ATTN_T8BX1) /* no product past the row's end */
            s = _mm256_blendv_ps(a[g], s,
                                 _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
                                                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))));
        a[g] = s;
    }
}

/* Positions of the V products whose probabilities (four rows, 8 KiB) stay in L1 while every slice passes
 * over them. */
#define ATTN_V_CHUNK 512
/* V rows a tile takes at once: 3 x 4 accumulators and 3 converted V slices in the 16 registers. */
#define ATTN_V_TILE 3

/* acc[(j*G + g)*8*S + 8*s ..] (slice s of V row vr + j*v_stride times row g's probabilities) advanced over
 * positions [i0, i1), multiples of 8*S that every row covers: per slice, its positions through the J x G tile in
 * order, each converted V slice used by the G rows and each probability slice by the J V rows. */
ATTN_INLINE void attn_values_tile(int J, int G, int S, const uint16_t *vr, int64_t v_stride, int64_t i0, int64_t i1,
                                  const float *probs, int64_t stride, float *acc)
{
    for (int s = 0; s < S; s++) {
        __m256 a[ATTN_V_TILE][ATTN_G];
#pragma GCC unroll 4
        for (int j = 0; j < J; j++)
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                a[j][g] = _mm256_loadu_ps(acc + (j * G + g) * 8 * S + 8 * s);
        for (int64_t i = i0 + 8 * s; i < i1; i += 8 * S) {
            __m256 v[ATTN_V_TILE];
#pragma GCC unroll 4
            for (int j = 0; j < J; j++)
                v[j] = attn_load_f16(vr + j * v_stride + i);
#pragma GCC unroll 4
            for (int g = 0; g < G; g++) {
                __m256 pr = _mm256_loadu_ps(probs + g * stride + i);
#pragma GCC unroll 4
                for (int j = 0; j < J; j++)
                    a[j][g] = _mm256_fmadd_ps(v[j], pr, a[j][g]);
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < J; j++)
#pragma GCC unroll 4
            for (int g = 0; g < G; g++)
                _mm256_storeu_ps(acc + (j * G + g) * 8 * S + 8 * s, a[j][g]);
    }
}

/* out[g*out_stride + j] = V[j] . probs[g] for j < J, g < G: the positions every row covers (n_main) in chunks
 * through attn_values_tile, the rest (each row's end) a slice at a time through attn_values_step, then each row's
 * slices folded and summed in the form's trees. */
ATTN_INLINE void attn_values_rows(enum attn_form f, int J, int G, const int64_t *n_kv, int64_t n_max, int64_t n_main,
                                  const uint16_t *vr, int64_t v_stride, const float *probs, int64_t stride, float *out,
                                  int64_t out_stride)
{
    int S = attn_slices(f);
    float acc[ATTN_V_TILE * ATTN_G * 64] = {0};
    for (int64_t c = 0; c < n_main; c += ATTN_V_CHUNK)
        attn_values_tile(J, G, S, vr, v_stride, c, c + ATTN_V_CHUNK < n_main ? c + ATTN_V_CHUNK : n_main, probs,
                         stride, acc);
    for (int j = 0; j < J; j++)
        for (int s = 0; s < S; s++) {
            __m256 a[ATTN_G];
            for (int g = 0; g < G; g++)
                a[g] = _mm256_loadu_ps(acc + (j * G + g) * 8 * S + 8 * s);
            for (int64_t i = n_main + 8 * s; i < n_max; i += 8 * S)
                attn_values_step(f, G, vr + j * v_stride, i, n_max, n_kv, probs, stride, a);
            for (int g = 0; g < G; g++)
                _mm256_storeu_ps(acc + (j * G + g) * 8 * S + 8 * s, a[g]);
        }
    for (int j = 0; j < J; j++) {
        __m256 u[ATTN_G] = {0}, sl[8];
        for (int g = 0; g < G; g++) {
            for (int s = 0; s < S; s++)
                sl[s] = _mm256_loadu_ps(acc + (j * G + g) * 8 * S + 8 * s);
            u[g] = attn_fold(f, sl);
        }
        float r[ATTN_G];
        attn_hsum8_x4(f, u, r);
        for (int g = 0; g < G; g++)
            out[g * out_stride + j] = r[g];
    }
}

/* out[g*out_stride + j] = V[j] . probs[g] over p < n_kv[g], g < G (probs[g] at probs + g*stride, F32 values of F16
 * numbers), in tiles of ATTN_V_TILE V rows. */
ATTN_INLINE void attn_values_group(enum attn_form f, int G, const int64_t *n_kv, const uint16_t *v, int64_t v_stride,
                                   int hdv, const float *probs, int64_t stride, float *out, int64_t out_stride)
{
    int64_t n_max = 0, n_min = n_kv[0];
    for (int g = 0; g < G; g++) {
        n_max = n_kv[g] > n_max ? n_kv[g] : n_max;
        n_min = n_kv[g] < n_min ? n_kv[g] : n_min;
    }
    int64_t n_main = n_min - n_min % (8 * attn_slices(f));
    int j = 0;
    for (; j + ATTN_V_TILE <= hdv; j += ATTN_V_TILE)
        attn_values_rows(f, ATTN_V_TILE, G, n_kv, n_max, n_main, v + (int64_t)j * v_stride, v_stride, probs, stride,
                         out + j, out_stride);
    for (; j < hdv; j++)
        attn_values_rows(f, 1, G, n_kv, n_max, n_main, v + (int64_t)j * v_stride, v_stride, probs, stride, out + j,
                         out_stride);
}

/* G query rows' q16 (F16, head_dim apart) as F32 into qf (exact). */
ATTN_INLINE void attn_q_f32(int G, int head_dim, const uint16_t *q16, float *qf)
{
    for (int i = 0; i < G * head_dim; i += 8)
        _mm256_storeu_ps(qf + i, attn_load_f16(q16 + i));
}

#endif
