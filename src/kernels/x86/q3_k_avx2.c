/* q3_k_avx2.c — AVX2 Q3_K x Q8_K dot product: the same exact integer lanes and float order as q3_k.c
 * (llama.cpp's AVX2 ggml_vec_dot_q3_K_q8_K), bit-identical to the scalar one. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* The 16 signed 6-bit scales (sc - 32). */
static inline void unpack_scales(const uint8_t packed[12], int16_t sc[16])
{
    for (int s = 0; s < 16; s++) {
        int low = s < 8 ? packed[s] & 15 : packed[s - 8] >> 4;
        sc[s] = (int16_t)((low | ((packed[8 + s % 4] >> (2 * (s / 4))) & 3) << 4) - 32);
    }
}

void loom_q3_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q3_k *x = w;
    const struct loom_block_q8_k *y = a;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int16_t sc[16];
        unpack_scales(x[i].scales, sc);
        __m256i hm = _mm256_loadu_si256((const __m256i *)x[i].hmask), sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * h));
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m256i low = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                __m256i high = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 2)), four);
                __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * k));
                __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(q8, q));
                __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[8 * h + 2 * k + 1]), _mm_set1_epi16(sc[8 * h + 2 * k]));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, scale));
            }
        }
        float d = y[i].d * loom_f16c_to_f32(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = loom_hsum8_ps(acc);
}
