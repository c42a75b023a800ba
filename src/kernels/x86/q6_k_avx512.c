/* q6_k_avx512.c — AVX-512 (VNNI) Q6_K x Q8_K dots of 4 and 8 activation rows sharing each unpacked weight block,
 * in the float order of the one-row AVX2 kernel (q6_k_avx2.c loom_q6_k_vec_dot_avx2, llama.cpp's AVX2
 * ggml_vec_dot_q6_K_q8_K): per block and row the same 8 exact int32 lanes, so bit-identical per row. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/protos.h"

/* One Q6_K block unpacked for 512-bit lanes: q[2h + p] holds the 6-bit quants of chunks 2p and 2p+1 of
 * half h (elements 128h + 64p .. +63, matching the Q8_K quants at the same offsets), sc[2h + p] their
 * int16 sub-block scales lane for lane after maddubs (chunk c lanes 0..7: scales[8h + 2c], 8..15:
 * scales[8h + 2c + 1]). */
struct q6_k_unpacked {
    __m512i q[4], sc[4];
    __m256i sc16; /* the 16 scales as int16 */
};

static inline void unpack_block(const struct loom_block_q6_k *x, struct q6_k_unpacked *u)
{
    const __m512i m15 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
    const long long k1 = 0x0001000100010001ll;
    const __m512i eighth = _mm512_set_epi64(3 * k1, 3 * k1, 2 * k1, 2 * k1, k1, k1, 0, 0); /* int16 lane j: j / 8 */
    u->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    __m512i sc16 = _mm512_castsi256_si512(u->sc16);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i l = _mm512_loadu_si512((const void *)(x->ql + 64 * h)); /* chunks 0, 1 low nibbles; 2, 3 high */
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
        qh = _mm512_srlv_epi64(qh, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0)); /* chunk 0 bits 0-1, chunk 1 bits 2-3 */
        u->q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m15), _mm512_slli_epi64(_mm512_and_si512(qh, m3), 4));
        u->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi64(l, 4), m15),
                                          _mm512_slli_epi64(_mm512_and_si512(_mm512_srli_epi64(qh, 4), m3), 4));
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++)
            u->sc[2 * h + p] = _mm512_permutexvar_epi16(_mm512_add_epi16(eighth, _mm512_set1_epi16((short)(8 * h + 4 * p))), sc16);
    }
}

/* The 8 int32 lanes of loom_q6_k_vec_dot_avx2's sumi for one block and activation row (exact). */
static inline __m256i block_lanes(const struct q6_k_unpacked *u, const struct loom_block_q8_k *y)
{
    __m512i z = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
        z = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(u->q[c], _mm512_loadu_si512((const void *)(y->qs + 64 * c))), u->sc[c]);
    __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(z), _mm512_extracti64x4_epi64(z, 1));
    __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), u->sc16), 5);
    return _mm256_sub_epi32(sumi, offset);
}

/* s[k] for the nr (1, 4 or 8) activation rows at a + k * a_stride bytes. */
static inline void dot_rows(int64_t n, float *s, const void *w, const void *a, size_t a_stride, int nr)
{
    const struct loom_block_q6_k *x = w;
    const struct loom_block_q8_k *y[8];
    __m256 acc[8];
#pragma GCC unroll 8
    for (int k = 0; k < nr; k++) {
        y[k] = (const struct loom_block_q8_k *)((const char *)a + k * a_stride);
        acc[k] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        struct q6_k_unpacked u;
        unpack_block(&x[i], &u);
        float dw = loom_f16c_to_f32(x[i].d);
#pragma GCC unroll 8
        for (int k = 0; k < nr; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(y[k][i].d * dw), _mm256_cvtepi32_ps(block_lanes(&u, &y[k][i])), acc[k]);
    }
#pragma GCC unroll 8
    for (int k = 0; k < nr; k++)
        s[k] = loom_hsum8_ps(acc[k]);
}

void loom_q6_k_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a)
{
    dot_rows(n, s, w, a, 0, 1);
}

void loom_q6_k_vec_dot_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    dot_rows(n, s, w, a, a_stride, 4);
}

void loom_q6_k_vec_dot_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)
{
    dot_rows(n, s, w, a, a_stride, 8);
}
