/* q5_0_avx2.c — AVX2 dot products of the legacy 5-bit family, Q5_0 x Q8_0 and Q5_1 x Q8_1: the same
 * exact integer lanes and float orders as q5_0.c (llama.cpp's AVX2 ggml_vec_dot_q5_0_q8_0 /
 * ggml_vec_dot_q5_1_q8_1), bit-identical to the scalar ones. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* The 32 five-bit quants in [0, 31] as bytes in element order. */
static inline __m256i quants5(const uint8_t qs[16], const uint8_t qh[4])
{
    return _mm256_or_si256(loom_nibbles_epi8(qs), _mm256_and_si256(loom_bits_epi8(qh), _mm256_set1_epi8(16)));
}

void loom_q5_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q5_0 *x = w;
    const struct loom_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d));
        __m256i qx = _mm256_sub_epi8(quants5(x[i].qs, x[i].qh), _mm256_set1_epi8(16));
        __m256i p = loom_dot_i8_lanes(qx, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = loom_hsum8_ps(acc);
}

void loom_q5_1_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q5_1 *x = w;
    const struct loom_block_q8_1 *y = a;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d));
        summs = fmaf(loom_f16c_to_f32(x[i].m), loom_f16c_to_f32(y[i].s), summs);
        __m256i p16 = _mm256_maddubs_epi16(quants5(x[i].qs, x[i].qh), _mm256_loadu_si256((const __m256i *)y[i].qs));
        __m256i p = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = loom_hsum8_ps(acc) + summs;
}
