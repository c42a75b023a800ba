/* q6_k_avx2.c — AVX2 Q6_K x Q8_K dot product and its 4-activation-row form: the same exact integer lanes
 * and float order as q6_k.c (llama.cpp's AVX2 ggml_vec_dot_q6_K_q8_K), bit-identical to the scalar kernel. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* int16 scales of one 32-element chunk from the 16 int8 scales: lanes 0..7 get scales[k], 8..15 scales[k+1]. */
static inline __m256i chunk_scales(__m128i scales, int k)
{
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, _mm_set_epi64x(0x0101010101010101ll * (k + 1), 0x0101010101010101ll * k)));
}

/* The 128 unsigned 6-bit quants of one half block (ql[64] low nibbles, qh[32] high pairs) as 4 x 32 bytes in
 * element order: q[c] holds elements 32c .. 32c+31 of the half. */
static inline void unpack_q6(const uint8_t *ql, const uint8_t *qh, __m256i q[4])
{
    const __m256i m3 = _mm256_set1_epi8(3), m15 = _mm256_set1_epi8(15);
    __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m15), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
}

void loom_q6_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q6_k *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i sc = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i sc16 = _mm256_cvtepi8_epi16(sc);
        __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), sc16), 5);
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            unpack_q6(x[i].ql + 64 * h, x[i].qh + 32 * h, q);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 128 * h + 32 * c));
                __m256i p16 = _mm256_maddubs_epi16(q[c], q8);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, chunk_scales(sc, 8 * h + 2 * c)));
            }
        }
        sumi = _mm256_sub_epi32(sumi, offset);
        float d = y[i].d * loom_f16c_to_f32(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = loom_hsum8_ps(acc);
}

/* loom_q6_k_vec_dot_avx2 for 4 activation rows (a + k * a_stride bytes) at once, bit-identical per row:
 * the 6-bit weights are unpacked once and token k keeps its own 8-lane accumulator. */
void loom_q6_k_vec_dot_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_q6_k *x = w;
    const struct loom_block_q8_k *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = (const struct loom_block_q8_k *)((const char *)a + k * a_stride);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i sc = _mm_loadu_si128((const __m128i *)x[i].scales);
        __m256i sc16 = _mm256_cvtepi8_epi16(sc);
        __m256i sumi[4];
        for (int k = 0; k < 4; k++)
            sumi[k] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[k][i].bsums), sc16), 5));
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            unpack_q6(x[i].ql + 64 * h, x[i].qh + 32 * h, q);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m256i scales = chunk_scales(sc, 8 * h + 2 * c);
                for (int k = 0; k < 4; k++) {
                    __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[k][i].qs + 128 * h + 32 * c));
                    sumi[k] = _mm256_add_epi32(sumi[k], _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], q8), scales));
                }
            }
        }
        float dw = loom_f16c_to_f32(x[i].d);
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(y[k][i].d * dw), _mm256_cvtepi32_ps(sumi[k]), acc[k]);
    }
    for (int k = 0; k < 4; k++)
        s[k] = loom_hsum8_ps(acc[k]);
}
