/* q4_k_x16_avx2.c — AVX2 dots of Q4_K x16 weight groups (16 rows interleaved, q4_k_x16.c) with 1 to 8
 * activation rows, for CPUs without AVX-512: the 16 rows as two 8-row halves, each 4-byte activation
 * broadcast against the same 4 positions of 8 rows (VPMADDUBSW), one sub-block's 8 slots summed in int16,
 * then one VPMADDWD per sub-block against the row scales. Only whole-block integer sums (exact) meet the
 * float steps, which are loom_q4_k_gemv's, so every row is bit-identical to loom_q4_k_x16_gemv. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/prefetch.h"
#include "kernels/protos.h"

/* One 8-row half of a group block's scales: sc[j] (j < 8) as the int16 pair (sc[j], sc[j]) per row lane,
 * and the mins as int16 pairs (m[2k], m[2k+1]) per row lane (mp[k], k < 4). */
struct x16_half_scales {
    __m256i sc[8], mp[4];
};

/* The scales of rows 8h..8h+7 of group block g from the three scale planes (layout in kernels/blocks.h). */
static inline void unpack_half_scales(const struct loom_block_q4_k_x16 *g, int h, struct x16_half_scales *u)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30), m00ff = _mm256_set1_epi32(0x00ff00ff);
    __m256i n1 = _mm256_loadu_si256((const __m256i *)(g->sc_lo + 32 * h));
    __m256i n2 = _mm256_loadu_si256((const __m256i *)(g->m_lo + 32 * h));
    __m256i hb = _mm256_loadu_si256((const __m256i *)(g->hi + 32 * h));
    /* bytes 4r + q: a = sc[q], b = sc[4 + q], c = m[0, 2, 1, 3][q], d = m[4 + (0, 2, 1, 3)[q]] */
    __m256i a = _mm256_or_si256(_mm256_and_si256(n1, m4), _mm256_and_si256(_mm256_slli_epi32(hb, 4), m30));
    __m256i b = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(n1, 4), m4),
                                _mm256_and_si256(_mm256_slli_epi32(hb, 2), m30));
    __m256i c = _mm256_or_si256(_mm256_and_si256(n2, m4), _mm256_and_si256(hb, m30));
    __m256i d = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(n2, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi32(hb, 2), m30));
    /* byte q of each dword into its bytes 0 and 2, zeros in 1 and 3 */
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        const __m256i pick = _mm256_add_epi8(_mm256_set1_epi32((int)(0x80008000u | (unsigned)q << 16 | (unsigned)q)),
                                             _mm256_setr_epi8(0, 0, 0, 0, 4, 0, 4, 0, 8, 0, 8, 0, 12, 0, 12, 0, 0, 0,
                                                              0, 0, 4, 0, 4, 0, 8, 0, 8, 0, 12, 0, 12, 0));
        u->sc[q] = _mm256_shuffle_epi8(a, pick);
        u->sc[4 + q] = _mm256_shuffle_epi8(b, pick);
    }
    u->mp[0] = _mm256_and_si256(c, m00ff);
    u->mp[1] = _mm256_srli_epi16(c, 8);
    u->mp[2] = _mm256_and_si256(d, m00ff);
    u->mp[3] = _mm256_srli_epi16(d, 8);
}

/* Dword k of 4-byte quants at p, in every lane. */
static inline __m256i bcast_dword(const int8_t *p, int k)
{
    int32_t v;
    memcpy(&v, p + 4 * k, 4);
    return _mm256_set1_epi32(v);
}

/* imin per row of the half for one Q8_K block: sum_k (m[2k], m[2k+1]) . (P[2k], P[2k+1]) with P[j] =
 * bsums[2j] + bsums[2j+1] (at most 32 * 128 in magnitude, so the int16 pair sums are exact). */
static inline __m256i mins_dot(const struct x16_half_scales *u, const struct loom_block_q8_k *y)
{
    __m128i p = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums),
                               _mm_loadu_si128((const __m128i *)(y->bsums + 8)));
    __m256i s = _mm256_madd_epi16(u->mp[0], _mm256_broadcastd_epi32(p));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(u->mp[1], _mm256_broadcastd_epi32(_mm_shuffle_epi32(p, 1))));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(u->mp[2], _mm256_broadcastd_epi32(_mm_shuffle_epi32(p, 2))));
    return _mm256_add_epi32(s, _mm256_madd_epi16(u->mp[3], _mm256_broadcastd_epi32(_mm_shuffle_epi32(p, 3))));
}

/* isum per row of halves h0..h0+nh-1 for nt activation rows y[t] (nh * nt <= 4, constants after
 * inlining), into isum[t * nh + h]: sub-block j at a time, its 8 slots' VPMADDUBSW pair sums (each at
 * most 2 * 15 * 128 = 3840 in magnitude) added in int16 (at most 8 * 3840 = 30720, exact), then VPMADDWD
 * by (sc[j], sc[j]) sums each pair into exact int32. The first pass over a group (h0 = 0) asks for part j of 8
 * of the block LOOM_PREFETCH_AHEAD on. */
static inline __attribute__((always_inline)) void tile_isum(const struct loom_block_q4_k_x16 *g, int h0, int nh,
                                                            const struct x16_half_scales *u,
                                                            const struct loom_block_q8_k *const *y, int nt,
                                                            __m256i *isum)
{
    const __m256i m4 = _mm256_set1_epi8(15);
#pragma GCC unroll 4
    for (int k = 0; k < nt * nh; k++)
        isum[k] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int j = 0; j < 8; j++) {
        __m256i s16[4];
        if (h0 == 0) /* the first pass over the group */
            loom_prefetch_ahead_part(g, sizeof *g, j, 8);
#pragma GCC unroll 4
        for (int k = 0; k < nt * nh; k++)
            s16[k] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            __m256i w[2];
#pragma GCC unroll 2
            for (int h = 0; h < nh; h++) {
                __m256i wq = _mm256_loadu_si256((const __m256i *)g->qs[8 * (j / 2) + s][8 * (h0 + h)]);
                w[h] = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(wq, 4) : wq, m4);
            }
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                __m256i act = bcast_dword(y[t]->qs, 8 * j + s);
#pragma GCC unroll 2
                for (int h = 0; h < nh; h++)
                    s16[t * nh + h] = _mm256_add_epi16(s16[t * nh + h], _mm256_maddubs_epi16(w[h], act));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
#pragma GCC unroll 2
            for (int h = 0; h < nh; h++)
                isum[t * nh + h] = _mm256_add_epi32(isum[t * nh + h], _mm256_madd_epi16(s16[t * nh + h], u[h].sc[j]));
    }
}

/* Rows 8h0..8(h0+nh)-1 of a group with nt activation rows (nh * nt <= 4; constants after inlining): per
 * row lane and block, acc = fma(isum, d * d_a, acc), accm = fma(imin, dmin * d_a, accm); out = acc - accm. */
static inline __attribute__((always_inline)) void dot_tile(int64_t n, float *out, size_t y_stride,
                                                           const struct loom_block_q4_k_x16 *g, int h0, int nh,
                                                           const void *a, size_t a_stride, int nt)
{
    __m256 acc[4], accm[4];
#pragma GCC unroll 4
    for (int k = 0; k < nt * nh; k++)
        acc[k] = accm[k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        struct x16_half_scales u[2];
        const struct loom_block_q8_k *y[4];
        __m256i isum[4];
#pragma GCC unroll 2
        for (int h = 0; h < nh; h++)
            unpack_half_scales(&g[i], h0 + h, &u[h]);
#pragma GCC unroll 4
        for (int t = 0; t < nt; t++)
            y[t] = (const struct loom_block_q8_k *)((const char *)a + t * a_stride) + i;
        tile_isum(&g[i], h0, nh, u, y, nt, isum);
#pragma GCC unroll 2
        for (int h = 0; h < nh; h++) {
            __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g[i].d + 8 * (h0 + h))));
            __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g[i].dmin + 8 * (h0 + h))));
#pragma GCC unroll 4
            for (int t = 0; t < nt; t++) {
                __m256 da = _mm256_set1_ps(y[t]->d);
                int k = t * nh + h;
                acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[k]), _mm256_mul_ps(d, da), acc[k]);
                accm[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins_dot(&u[h], y[t])), _mm256_mul_ps(dmin, da), accm[k]);
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < nt; t++)
#pragma GCC unroll 2
        for (int h = 0; h < nh; h++)
            _mm256_storeu_ps(out + t * y_stride + 8 * (h0 + h), _mm256_sub_ps(acc[t * nh + h], accm[t * nh + h]));
}

/* Up to 4 activation rows per pass over the group (an 8-row tile spills): one or two rows with both halves
 * per broadcast activation dword, three or four one half at a time (both halves with 4 rows, or with 2 rows
 * twice, measured no faster: VPMADDUBSW throughput bounds all three). */
void loom_q4_k_x16_gemv_avx2(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                             size_t a_stride)
{
    for (; n_act > 0; n_act -= 4, y += 4 * y_stride, a = (const char *)a + 4 * a_stride)
        switch (n_act) {
        case 1:
            dot_tile(n, y, y_stride, w, 0, 2, a, a_stride, 1);
            break;
        case 2:
            dot_tile(n, y, y_stride, w, 0, 2, a, a_stride, 2);
            break;
        case 3:
            dot_tile(n, y, y_stride, w, 0, 1, a, a_stride, 3);
            dot_tile(n, y, y_stride, w, 1, 1, a, a_stride, 3);
            break;
        default:
            dot_tile(n, y, y_stride, w, 0, 1, a, a_stride, 4);
            dot_tile(n, y, y_stride, w, 1, 1, a, a_stride, 4);
            break;
        }
}
