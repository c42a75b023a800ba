/* tq_avx2.c — AVX2 dot products of the ternary types TQ1_0 and TQ2_0 x Q8_K, with the same exact integer lanes
 * and float order as tq.c (the reference's AVX2 kernels), bit-identical to the scalar kernels. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* Bytes times 3 and times 9, wrapping (AVX2 has no byte multiply). */
static inline __m256i mul3(__m256i q) { return _mm256_add_epi8(q, _mm256_add_epi8(q, q)); }
static inline __m256i mul9(__m256i q)
{
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(q, 3), _mm256_set1_epi8((char)0xf8)), q);
}

/* The base-3 digit (3 q) >> 8 of each byte q, by halving adds: a = max(q - 1, 0), ((a + ((a + 1) >> 1) + 1) >> 1)
 * >> 6 (equal for all 256 values; see tq.c). */
static inline __m256i digit(__m256i q)
{
    __m256i a = _mm256_subs_epu8(q, _mm256_set1_epi8(1));
    __m256i t = _mm256_avg_epu8(a, _mm256_avg_epu8(a, _mm256_setzero_si256()));
    return _mm256_and_si256(_mm256_srli_epi16(t, 6), _mm256_set1_epi8(3));
}

/* Built with the AVX-512 flags (x86/tq_avx512.c), the kernels are named _avx512 and sum with VPDPBUSD. */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define TQ_VNNI 1
#define TQ_NAME(t) loom_##t##_vec_dot_avx512
#else
#define TQ_VNNI 0
#define TQ_NAME(t) loom_##t##_vec_dot_avx2
#endif

/* int32 lane k += sum over bytes 4k..4k+3 of t * q (t unsigned <= 3, q in [-127, 127]), exact either way. */
static inline __m256i add_lanes(__m256i acc, __m256i t, const int8_t *q8)
{
#if TQ_VNNI
    return _mm256_dpbusd_epi32(acc, t, _mm256_loadu_si256((const __m256i *)q8));
#else
    __m256i p16 = _mm256_maddubs_epi16(t, _mm256_loadu_si256((const __m256i *)q8));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}

/* Lane k = bsums[2k] + bsums[2k + 1]. */
static inline __m256i bsum_pairs(const int16_t bsums[16])
{
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), _mm256_set1_epi16(1));
}

/* The 8 lanes of one TQ1_0 block (tq.c ternary_lanes): its 256 digits in 32-element chunks against the quants. */
static inline __m256i tq1_lanes(const struct loom_block_tq1_0 *x, const struct loom_block_q8_k *y)
{
    __m256i q = _mm256_loadu_si256((const __m256i *)x->qs), q3 = mul3(q), q9 = mul9(q);
    __m256i acc = _mm256_sub_epi32(_mm256_setzero_si256(), bsum_pairs(y->bsums));
    acc = add_lanes(acc, digit(q), y->qs);
    acc = add_lanes(acc, digit(q3), y->qs + 32);
    acc = add_lanes(acc, digit(q9), y->qs + 64);
    acc = add_lanes(acc, digit(mul9(q3)), y->qs + 96);
    acc = add_lanes(acc, digit(mul9(q9)), y->qs + 128);
    /* qs[32..47] times 3^n in both halves (n = 0, 1 | 2, 3 | 4 with qh), qh's four bytes times 1, 3, 9, 27 */
    __m256i r = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(x->qs + 32)));
    uint32_t qh;
    memcpy(&qh, x->qh, 4);
    __m256i h = _mm256_set1_epi32((int)qh), h3 = mul3(h), h9 = mul9(h);
    __m256i hv = _mm256_blend_epi32(_mm256_blend_epi32(h, h3, 0x22), _mm256_blend_epi32(h9, mul3(h9), 0x88), 0xcc);
    __m256i r3 = mul3(r), r9 = mul9(r);
    acc = add_lanes(acc, digit(_mm256_blend_epi32(r, r3, 0xf0)), y->qs + 160);
    acc = add_lanes(acc, digit(_mm256_blend_epi32(r9, mul9(r3), 0xf0)), y->qs + 192);
    acc = add_lanes(acc, digit(_mm256_blend_epi32(mul9(r9), hv, 0xf0)), y->qs + 224);
    return acc;
}

/* The 8 lanes of one TQ2_0 block: 2-bit fields in 32-element chunks against the quants. */
static inline __m256i tq2_lanes(const struct loom_block_tq2_0 *x, const struct loom_block_q8_k *y)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i acc = _mm256_sub_epi32(_mm256_setzero_si256(), bsum_pairs(y->bsums));
    for (int h = 0; h < 2; h++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int l = 0; l < 4; l++)
            acc = add_lanes(acc, _mm256_and_si256(_mm256_srli_epi16(q, 2 * l), m3), y->qs + 128 * h + 32 * l);
    }
    return acc;
}

void TQ_NAME(tq1_0)(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_tq1_0 *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m256 d = _mm256_set1_ps(y[i].d * loom_f16c_to_f32(x[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tq1_lanes(&x[i], &y[i])), d, acc);
    }
    *s = loom_hsum8_ps(acc);
}

void TQ_NAME(tq2_0)(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_tq2_0 *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m256 d = _mm256_set1_ps(y[i].d * loom_f16c_to_f32(x[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tq2_lanes(&x[i], &y[i])), d, acc);
    }
    *s = loom_hsum8_ps(acc);
}
