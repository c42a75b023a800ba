/* q5_k_avx2.c — AVX2 Q5_K x Q8_K dot product: the same exact integer lanes and float order as q5_k.c
 * (and as llama.cpp's AVX2 ggml_vec_dot_q5_K_q8_K), so results are bit-identical to the scalar kernel. */
#include <immintrin.h>
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

void loom_q5_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q5_k *x = w;
    const struct loom_block_q8_k *y = a;
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i sm = loom_k4_scales_si128(x[i].scales);
        __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m256i hbits = _mm256_loadu_si256((const __m256i *)x[i].qh);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * (j / 2)));
            __m256i lo = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(bits, 4) : bits, m4);
            /* bit j of each qh byte moved to bit 4 (the 16-bit shifts never carry into the kept bits) */
            __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, j), one), 4);
            __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * j));
            __m256i p = _mm256_maddubs_epi16(_mm256_or_si256(lo, hi), q8);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc16, loom_pick16(j))));
        }
        float d = y[i].d * loom_f16c_to_f32(x[i].d);
        float dmin = -y[i].d * loom_f16c_to_f32(x[i].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        summs = fmaf(dmin, (float)loom_hsum_i32x4(loom_k4_mins_dot(sm, y[i].bsums)), summs);
    }
    *s = loom_hsum8_ps(acc) + summs;
}
