/* iq4_avx512.c — AVX-512 (VL, BW, VNNI on 256-bit vectors) IQ4_XS x Q8_K dots: vec_dot's order
 * (iq4.c loom_iq4_xs_vec_dot, llama.cpp's AVX2 ggml_vec_dot_iq4_xs_q8_K) and the IQ panel order for 1, 4 and 8
 * activation rows sharing each decoded block (iq4.c loom_iq4_xs_iqp). The integer lanes are those of
 * iq4_avx2.c, so every result is bit-identical to the scalar kernel's. */
#include <immintrin.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/protos.h"

/* One block's 8 sub-block scales ls - 32 (in [-32, 31]) as int16, broadcast to both 128-bit halves: lane s
 * holds the low nibble of scales_l[s / 2] (high nibble for odd s) with bits 2s, 2s + 1 of scales_h above. */
static inline __m256i xs_scales(const struct loom_block_iq4_xs *x)
{
    uint32_t l32;
    memcpy(&l32, x->scales_l, 4);
    __m128i l = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)l32),
                                 _mm_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1));
    l = _mm_and_si128(_mm_srlv_epi16(l, _mm_setr_epi16(0, 4, 0, 4, 0, 4, 0, 4)), _mm_set1_epi16(15));
    __m128i h = _mm_srlv_epi16(_mm_set1_epi16((short)x->scales_h), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14));
    h = _mm_slli_epi16(_mm_and_si128(h, _mm_set1_epi16(3)), 4);
    return _mm256_broadcastsi128_si256(_mm_sub_epi16(_mm_or_si128(l, h), _mm_set1_epi16(32)));
}

/* Sub-block s's scale in every int16 lane. */
static inline __m256i pick_scale(__m256i scales, int s)
{
    return _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)(0x0100 + 0x0202 * s)));
}

/* The grid values of sub-blocks 2p and 2p + 1 (qs + 32p), each in element order. */
static inline void decode_pair(const uint8_t qs[32], __m256i *v0, __m256i *v1)
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)loom_iq4nl_values));
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i q = _mm256_loadu_si256((const __m256i *)qs);
    __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
    __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    *v0 = _mm256_permute2x128_si256(lo, hi, 0x20);
    *v1 = _mm256_permute2x128_si256(lo, hi, 0x31);
}

/* acc + lane l of ls * (sum over elements 4l..4l+3 of v * q8): |v| times q8 signed by v, exact in int16 pairs
 * (at most 2 * 127 * 127), then the scaled pair sums added in int32. */
static inline __m256i dot_acc(__m256i acc, __m256i av, __m256i v, const int8_t *q8, __m256i scale)
{
    __m256i q = _mm256_loadu_si256((const __m256i *)q8);
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(av, _mm256_sign_epi8(q, v)), scale);
}

/* The 8 exact lanes of one block against one Q8_K block, as iq4_avx2.c xs_lanes. */
static inline __m256i xs_lanes(const struct loom_block_iq4_xs *x, const struct loom_block_q8_k *y)
{
    __m256i scales = xs_scales(x), sum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 0; p < 4; p++) {
        __m256i v0, v1;
        decode_pair(x->qs + 32 * p, &v0, &v1);
        sum = dot_acc(sum, _mm256_abs_epi8(v0), v0, y->qs + 64 * p, pick_scale(scales, 2 * p));
        sum = dot_acc(sum, _mm256_abs_epi8(v1), v1, y->qs + 64 * p + 32, pick_scale(scales, 2 * p + 1));
    }
    return sum;
}

void loom_iq4_xs_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_xs *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * y[i].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(xs_lanes(&x[i], &y[i])), acc);
    }
    *s = loom_hsum8_ps(acc);
}

void loom_iq4_xs_iqp_avx512(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_xs *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        acc = fmaf((float)loom_hsum_i32x8(xs_lanes(&x[i], &y[i])), loom_f16c_to_f32(x[i].d) * y[i].d, acc);
    *s = acc;
}

/* The IQ panel order for `rows` (4 or 8) activation rows: each block decoded once, row k's exact block sum
 * (hsum of its 8 lanes) times d_w * d_a added into lane k of the float accumulator, as the scalar kernel. */
static inline __attribute__((always_inline)) void iqp_rows(int64_t n, float *s, const void *w, const char *a,
                                                            size_t a_stride, int rows)
{
    const struct loom_block_iq4_xs *x = w;
    __m256 acc = _mm256_setzero_ps();
    __m128 acc4 = _mm_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const struct loom_block_q8_k *y[8];
        __m256i sum[8];
#pragma GCC unroll 8
        for (int k = 0; k < rows; k++) {
            y[k] = (const struct loom_block_q8_k *)(a + k * a_stride) + i;
            sum[k] = _mm256_setzero_si256();
        }
        __m256i scales = xs_scales(&x[i]);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m256i v0, v1;
            decode_pair(x[i].qs + 32 * p, &v0, &v1);
            __m256i av0 = _mm256_abs_epi8(v0), av1 = _mm256_abs_epi8(v1);
            __m256i sc0 = pick_scale(scales, 2 * p), sc1 = pick_scale(scales, 2 * p + 1);
#pragma GCC unroll 8
            for (int k = 0; k < rows; k++) {
                sum[k] = dot_acc(sum[k], av0, v0, y[k]->qs + 64 * p, sc0);
                sum[k] = dot_acc(sum[k], av1, v1, y[k]->qs + 64 * p + 32, sc1);
            }
        }
        float dw = loom_f16c_to_f32(x[i].d);
        if (rows == 8) {
            __m128i lo = loom_hsum_i32x8_x4(sum[0], sum[1], sum[2], sum[3]);
            __m128i hi = loom_hsum_i32x8_x4(sum[4], sum[5], sum[6], sum[7]);
            __m256 da = _mm256_set_ps(y[7]->d, y[6]->d, y[5]->d, y[4]->d, y[3]->d, y[2]->d, y[1]->d, y[0]->d);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_set_m128i(hi, lo)), _mm256_mul_ps(_mm256_set1_ps(dw), da),
                                  acc);
        } else {
            __m128 da = _mm_set_ps(y[3]->d, y[2]->d, y[1]->d, y[0]->d);
            acc4 = _mm_fmadd_ps(_mm_cvtepi32_ps(loom_hsum_i32x8_x4(sum[0], sum[1], sum[2], sum[3])),
                                _mm_mul_ps(_mm_set1_ps(dw), da), acc4);
        }
    }
    if (rows == 8)
        _mm256_storeu_ps(s, acc);
    else
        _mm_storeu_ps(s, acc4);
}

void loom_iq4_xs_iqp_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    iqp_rows(n, s, w, a, a_stride, 4);
}

void loom_iq4_xs_iqp_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)
{
    iqp_rows(n, s, w, a, a_stride, 8);
}
