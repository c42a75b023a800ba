/* q2_k_avx2.c — AVX2 Q2_K x Q8_K dot products: the reference's vec_dot lanes and its repacked gemv/gemm
 * orders, with the same exact integer sums and float orders as q2_k.c (llama.cpp's AVX2
 * ggml_vec_dot_q2_K_q8_K, repack.cpp ggml_gemv/gemm_q2_K_8x8_q8_K), bit-identical to the scalar ones. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* Lanes of one half block h (as q2_k.c block_sums restricted to groups 4h..4h+3): lane l = sum over the
 * 4 groups k of sc[8h + 2k + l/4] * sum of q * q8 over elements 128h + 32k + 4l .. +3. */
static inline __m256i half_lanes(const struct loom_block_q2_k *x, const struct loom_block_q8_k *y, int h)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h)), sum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
        __m256i p16 = _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(y->qs + 128 * h + 32 * k)));
        const uint8_t *sc = x->scales + 8 * h + 2 * k;
        __m256i scale = _mm256_set_m128i(_mm_set1_epi16((short)(sc[1] & 15)), _mm_set1_epi16((short)(sc[0] & 15)));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p16, scale));
    }
    return sum;
}

/* Lane l = m[2l] * bsums[2l] + m[2l+1] * bsums[2l+1] with m the 16 4-bit mins. */
static inline __m256i min_lanes(const struct loom_block_q2_k *x, const struct loom_block_q8_k *y)
{
    __m128i packed = _mm_loadu_si128((const __m128i *)x->scales);
    __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(15)));
    return _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)y->bsums));
}

void loom_q2_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q2_k *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = y[i].d * loom_f16c_to_f32(x[i].d), dmin = -y[i].d * loom_f16c_to_f32(x[i].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(min_lanes(&x[i], &y[i])), acc);
        __m256i sumi = _mm256_add_epi32(half_lanes(&x[i], &y[i], 0), half_lanes(&x[i], &y[i], 1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = loom_hsum8_ps(acc);
}

/* sum over the 8 sub-blocks of half h of m * bsums. */
static inline int32_t half_min(const struct loom_block_q2_k *x, const struct loom_block_q8_k *y, int h)
{
    int32_t sum = 0;
    for (int sb = 8 * h; sb < 8 * h + 8; sb++)
        sum += (x->scales[sb] >> 4) * y->bsums[sb];
    return sum;
}

void loom_q2_k_gemv_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q2_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t isum = loom_hsum_i32x8(_mm256_add_epi32(half_lanes(&x[i], &y[i], 0), half_lanes(&x[i], &y[i], 1)));
        int32_t imin = loom_hsum_i32x8(min_lanes(&x[i], &y[i]));
        acc = fmaf((float)isum, loom_f16c_to_f32(x[i].d) * y[i].d, acc);
        accm = fmaf((float)imin, loom_f16c_to_f32(x[i].dmin) * y[i].d, accm);
    }
    *s = acc - accm;
}

void loom_q2_k_gemm_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q2_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_f16c_to_f32(x[i].d) * y[i].d, dmin = loom_f16c_to_f32(x[i].dmin) * y[i].d;
        for (int h = 0; h < 2; h++) {
            acc = fmaf((float)loom_hsum_i32x8(half_lanes(&x[i], &y[i], h)), d, acc);
            accm = fmaf((float)half_min(&x[i], &y[i], h), dmin, accm);
        }
    }
    *s = acc - accm;
}
