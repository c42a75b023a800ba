/* q8_k_avx2.c — AVX2 quantizer of Q8_K activation rows, bit-identical to q8_k.c (and so to llama.cpp's
 * quantize_row_q8_K_ref): same scale from the first value of largest magnitude, same rounding. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* The value of largest magnitude in x[256], the first one on ties (0 when all are zero). */
static float signed_absmax(const float *x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < LOOM_QK_K; j += 8)
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
    __m128 h = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float amax = _mm_cvtss_f32(h);
    if (amax == 0)
        return 0;
    __m256 target = _mm256_set1_ps(amax);
    for (int j = 0; j < LOOM_QK_K; j += 8) {
        __m256 v = _mm256_loadu_ps(x + j);
        int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), target, _CMP_EQ_OQ));
        if (mask)
            return x[j + __builtin_ctz((unsigned)mask)];
    }
    return 0; /* unreachable for finite input: some |x[j]| equals the maximum */
}

void loom_q8_k_from_float_avx2(const float *src, void *dst, int64_t n)
{
    struct loom_block_q8_k *b = dst;
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(INFINITY);
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const float *x = src + i * LOOM_QK_K;
        float max = signed_absmax(x);
        if (max == 0) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float iscale = -127.f / max;
        __m256 vs = _mm256_set1_ps(iscale);
        for (int j = 0; j < LOOM_QK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                __m256 v = _mm256_round_ps(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * k)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                v = _mm256_and_ps(v, _mm256_cmp_ps(_mm256_andnot_ps(sign, v), inf, _CMP_LT_OQ)); /* inf/NaN -> 0 */
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(127));
            }
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(b[i].qs + j), _mm256_permutevar8x32_epi32(p, perm));
        }
        /* bsums: bias each byte by 128 to sum it unsigned with SAD, then remove the bias */
        for (int g = 0; g < 16; g++) {
            __m128i q = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(b[i].qs + 16 * g)), _mm_set1_epi8(-128));
            __m128i sad = _mm_sad_epu8(q, _mm_setzero_si128());
            b[i].bsums[g] = (int16_t)(_mm_cvtsi128_si32(sad) + _mm_extract_epi16(sad, 4) - 16 * 128);
        }
        b[i].d = 1 / iscale;
    }
}
