/* q8_0_avx512.c — AVX-512 VNNI Q8_0 x Q8_0 dot product: VPDPBUSD forms the same exact 4-element lane
 * sums as q8_0.c, accumulated in the same float order. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/protos.h"

void loom_q8_0_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q8_0 *x = w, *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK8_0; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d));
        __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(qx), _mm256_sign_epi8(qy, qx));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = loom_hsum8_ps(acc);
}
