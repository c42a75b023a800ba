/* q4_0_avx2.c — AVX2 dot products of the legacy 4-bit family, Q4_0 x Q8_0 and Q4_1 x Q8_1, and the
 * repacked-kernel order of Q4_0: the same exact integer lanes and float orders as q4_0.c (llama.cpp's AVX2
 * ggml_vec_dot_q4_0_q8_0 / ggml_vec_dot_q4_1_q8_1 and repacked gemv/gemm), bit-identical to the scalar ones. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

void loom_q4_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_0 *x = w;
    const struct loom_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d));
        __m256i qx = _mm256_sub_epi8(loom_nibbles_epi8(x[i].qs), _mm256_set1_epi8(8));
        __m256i p = loom_dot_i8_lanes(qx, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = loom_hsum8_ps(acc);
}

void loom_q4_0_gemv_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_0 *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i qx = _mm256_sub_epi8(loom_nibbles_epi8(x[i].qs), _mm256_set1_epi8(8));
        int32_t isum = loom_hsum_i32x8(loom_dot_i8_lanes(qx, _mm256_loadu_si256((const __m256i *)y[i].qs)));
        acc = fmaf((float)isum, loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d), acc);
    }
    *s = acc;
}

void loom_q4_1_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_1 *x = w;
    const struct loom_block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d));
        summs = fmaf(loom_f16c_to_f32(x[i].m), loom_f16c_to_f32(y[i].s), summs);
        __m256i p16 = _mm256_maddubs_epi16(loom_nibbles_epi8(x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        __m256i p = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = loom_hsum8_ps(acc) + summs;
}

/* loom_q4_0_gemv_avx2 for 4 activation rows (a + k * a_stride bytes): the weight quants are
 * unpacked once per block; token k's block sum and fma run in lane k, in the same order. */
void loom_q4_0_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_q4_0 *x = w;
    const struct loom_block_q8_0 *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = (const struct loom_block_q8_0 *)((const char *)a + k * a_stride);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i qx = _mm256_sub_epi8(loom_nibbles_epi8(x[i].qs), _mm256_set1_epi8(8));
        __m256i ax = _mm256_sign_epi8(qx, qx), p[4];
        for (int k = 0; k < 4; k++) {
            __m256i q8 = _mm256_loadu_si256((const __m256i *)y[k][i].qs);
            p[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(q8, qx)), _mm256_set1_epi16(1));
        }
        __m128 da = _mm_set_ps(loom_f16c_to_f32(y[3][i].d), loom_f16c_to_f32(y[2][i].d), loom_f16c_to_f32(y[1][i].d),
                               loom_f16c_to_f32(y[0][i].d));
        __m128 d = _mm_mul_ps(_mm_set1_ps(loom_f16c_to_f32(x[i].d)), da);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(loom_hsum_i32x8_x4(p[0], p[1], p[2], p[3])), d, acc);
    }
    _mm_storeu_ps(s, acc);
}
