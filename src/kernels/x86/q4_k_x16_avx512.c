/* q4_k_x16_avx512.c — AVX-512 VNNI dots of Q4_K x16 weight groups (16 rows interleaved, q4_k_x16.c) with 1,
 * to 8 activation rows: an outer product, each 4-byte activation broadcast against the same 4 positions
 * of 16 rows (VPDPBUSD), per-sub-block int32 sums scaled per row (VPMULLD), the mins by VPDPWSSD. Only the
 * whole-block integer sums (exact) enter the float steps, which are loom_q4_k_gemv's, so every
 * row is bit-identical to it. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/prefetch.h"
#include "kernels/protos.h"

/* A group block's scales as int32 per row lane (sc[j], j < 8) and its mins as int16 pairs (m[2k],
 * m[2k+1]) per row lane (mp[k], k < 4), from the three 64-byte planes. */
struct x16_scales {
    __m512i sc[8], mp[4];
};

static inline void unpack_scales(const struct loom_block_q4_k_x16 *g, struct x16_scales *u)
{
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), mff = _mm512_set1_epi32(0xff);
    const __m512i m00ff = _mm512_set1_epi32(0x00ff00ff);
    __m512i n1 = _mm512_loadu_si512((const void *)g->sc_lo), n2 = _mm512_loadu_si512((const void *)g->m_lo);
    __m512i h = _mm512_loadu_si512((const void *)g->hi);
    /* bytes 4r + q: a = sc[q], b = sc[4 + q], c = m[0, 2, 1, 3][q], d = m[4 + (0, 2, 1, 3)[q]] */
    __m512i a = _mm512_or_si512(_mm512_and_si512(n1, m4), _mm512_and_si512(_mm512_slli_epi32(h, 4), m30));
    __m512i b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(n1, 4), m4),
                                _mm512_and_si512(_mm512_slli_epi32(h, 2), m30));
    __m512i c = _mm512_or_si512(_mm512_and_si512(n2, m4), _mm512_and_si512(h, m30));
    __m512i d = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(n2, 4), m4),
                                _mm512_and_si512(_mm512_srli_epi32(h, 2), m30));
    u->sc[0] = _mm512_and_si512(a, mff);
    u->sc[1] = _mm512_and_si512(_mm512_srli_epi32(a, 8), mff);
    u->sc[2] = _mm512_and_si512(_mm512_srli_epi32(a, 16), mff);
    u->sc[3] = _mm512_srli_epi32(a, 24);
    u->sc[4] = _mm512_and_si512(b, mff);
    u->sc[5] = _mm512_and_si512(_mm512_srli_epi32(b, 8), mff);
    u->sc[6] = _mm512_and_si512(_mm512_srli_epi32(b, 16), mff);
    u->sc[7] = _mm512_srli_epi32(b, 24);
    u->mp[0] = _mm512_and_si512(c, m00ff);
    u->mp[1] = _mm512_srli_epi16(c, 8);
    u->mp[2] = _mm512_and_si512(d, m00ff);
    u->mp[3] = _mm512_srli_epi16(d, 8);
}

/* Dword k of 4-byte quants at p, in every lane. */
static inline __m512i bcast_dword(const int8_t *p, int k)
{
    int32_t v;
    memcpy(&v, p + 4 * k, 4);
    return _mm512_set1_epi32(v);
}

/* imin per row for one Q8_K block: sum_k (m[2k], m[2k+1]) . (P[2k], P[2k+1]) with P[j] = bsums[2j] +
 * bsums[2j+1] (at most 32 * 128 in magnitude, so the int16 pair sums are exact). */
static inline __m512i mins_dot(const struct x16_scales *u, const struct loom_block_q8_k *y)
{
    __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    __m128i p = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    __m512i s = _mm512_dpwssd_epi32(_mm512_setzero_si512(), u->mp[0], _mm512_broadcastd_epi32(p));
    s = _mm512_dpwssd_epi32(s, u->mp[1], _mm512_broadcastd_epi32(_mm_shuffle_epi32(p, 1)));
    s = _mm512_dpwssd_epi32(s, u->mp[2], _mm512_broadcastd_epi32(_mm_shuffle_epi32(p, 2)));
    return _mm512_dpwssd_epi32(s, u->mp[3], _mm512_broadcastd_epi32(_mm_shuffle_epi32(p, 3)));
}

/* Block i of nt (<= 4, a constant after inlining) activation rows y[t] against group block g: per row lane,
 * acc[t] = fma(isum, d * d_a, acc[t]) and accm[t] = fma(imin, dmin * d_a, accm[t]). */
static inline __attribute__((always_inline)) void block_tile(const struct loom_block_q4_k_x16 *g,
                                                             const struct x16_scales *u,
                                                             const struct loom_block_q8_k *const *y, int nt,
                                                             __m512 *acc, __m512 *accm)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i isum[4], lo[4], hi[4];
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int grp = 0; grp < 4; grp++) {
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            __m512i wq = _mm512_loadu_si512((const void *)g->qs[8 * grp + s]);
            __m512i wl = _mm512_and_si512(wq, m4), wh = _mm512_and_si512(_mm512_srli_epi16(wq, 4), m4);
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                lo[t] = _mm512_dpbusd_epi32(lo[t], wl, bcast_dword(y[t]->qs, 16 * grp + s));
                hi[t] = _mm512_dpbusd_epi32(hi[t], wh, bcast_dword(y[t]->qs, 16 * grp + 8 + s));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(lo[t], u->sc[2 * grp]),
                                                                 _mm512_mullo_epi32(hi[t], u->sc[2 * grp + 1])));
    }
    __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g->d));
    __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g->dmin));
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++) {
        __m512 da = _mm512_set1_ps(y[t]->d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, da), acc[t]);
        accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins_dot(u, y[t])), _mm512_mul_ps(dmin, da), accm[t]);
    }
}

/* The dot of a group with nt (1 to 4; constant after inlining) activation rows. */
static inline __attribute__((always_inline)) void dot_n(int64_t n, float *out, size_t y_stride, const void *w,
                                                        const void *a, size_t a_stride, int nt)
{
    const struct loom_block_q4_k_x16 *g = w;
    __m512 acc[4], accm[4];
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        acc[t] = accm[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        struct x16_scales u;
        loom_prefetch_ahead(&g[i], sizeof g[i]);
        unpack_scales(&g[i], &u);
        const struct loom_block_q8_k *y[4];
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            y[t] = (const struct loom_block_q8_k *)((const char *)a + t * a_stride) + i;
        block_tile(&g[i], &u, y, nt, acc, accm);
    }
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
        _mm512_storeu_ps(out + t * y_stride, _mm512_sub_ps(acc[t], accm[t]));
}

/* Up to 4 activation rows per pass over the group (a second pass reads it from L1/L2): one 8-row tile per
 * block spills registers and measured no faster. */
void loom_q4_k_x16_gemv_avx512(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                               size_t a_stride)
{
    LOOM_X16_BY_FOUR(dot_n, n, n_act, y, y_stride, w, a, a_stride);
}
