/* q8_0_avx2.c — AVX2 kernels of Q8_0: the activation quantizer (round half to even, as llama.cpp's x86
 * quantize_row_q8_0) and the Q8_0 x Q8_0 dot product in the lane order documented in q8_0.c. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"
#include "util/fp16.h"

static inline float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

void loom_q8_0_from_float_avx2(const float *src, void *dst, int64_t n)
{
    struct loom_block_q8_0 *b = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / LOOM_QK8_0; i++) {
        const float *x = src + i * LOOM_QK8_0;
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
        }
        float m = hmax8(amax);
        b[i].d = loom_f32_to_f16(m / 127.f);
        __m256 id = _mm256_set1_ps(m != 0.0f ? 127.f / m : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs work per 128-bit half: the bytes come out in dword order 0,4,1,5,2,6,3,7 */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)b[i].qs, p);
    }
}

/* Exact products of signed bytes summed in groups of 4 (lane l = elements 4l..4l+3); |x| * sign(y, x)
 * is exact for quants in [-127, 127]. */
static inline __m256i dot_i8x32(__m256i x, __m256i y)
{
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

void loom_q8_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q8_0 *x = w, *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK8_0; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d));
        __m256i p = dot_i8x32(_mm256_loadu_si256((const __m256i *)x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc);
    }
    *s = loom_hsum8_ps(acc);
}
