/* q6_k_x16_avx512.c — AVX-512 VNNI dots of Q6_K x16 weight groups (16 rows interleaved, q6_k_x16.c) with 1
 * to 8 activation rows: an outer product, each 4-byte activation broadcast against the same 4 positions of
 * 16 rows (VPDPBUSD), the sums of two chunks paired as int16 and scaled per row by one VPDPWSSD. Every row
 * gets exactly the 8 int32 lanes and the float steps of loom_q6_k_vec_dot, so it is bit-identical to it. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/prefetch.h"
#include "kernels/protos.h"

/* A group block's scales per row lane: sp[q][s] holds the int16 pair (scales[4q + s], scales[4q + 2 + s])
 * (the scales of lane l = 4s + .. of chunks 2q and 2q + 1), op[l] the pair -32 * (scales[2l],
 * scales[2l + 1]) that turns the activation's block sums into lane l's -32 offset. */
struct x16_scales {
    __m512i sp[4][2], op[8];
};

static inline void unpack_scales(const struct loom_block_q6_k_x16 *g, struct x16_scales *u)
{
    const __m512i m32 = _mm512_set1_epi16(-32);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        __m512i x = _mm512_loadu_si512((const void *)g->scales[q]); /* per row: scales 4q .. 4q + 3 */
        __m512i e = _mm512_srai_epi16(_mm512_slli_epi16(x, 8), 8);  /* (scales[4q], scales[4q + 2]) */
        __m512i o = _mm512_srai_epi16(x, 8);                        /* (scales[4q + 1], scales[4q + 3]) */
        u->sp[q][0] = e;
        u->sp[q][1] = o;
        u->op[2 * q] = _mm512_mullo_epi16(_mm512_mask_blend_epi16(0xaaaaaaaa, e, _mm512_slli_epi32(o, 16)), m32);
        u->op[2 * q + 1] = _mm512_mullo_epi16(_mm512_mask_blend_epi16(0xaaaaaaaa, _mm512_srli_epi32(e, 16), o), m32);
    }
}

/* Dword k of the Q8_K quants (elements 4k .. 4k + 3), in every lane. */
static inline __m512i bcast_dword(const int8_t *p, int k)
{
    int32_t v;
    memcpy(&v, p + 4 * k, 4);
    return _mm512_set1_epi32(v);
}

/* Lane l (< 8) of block g for nt activation rows: isum[t] per row = the reference's sumi lane l. Chunk c =
 * 4h + cc, positions 4l .. 4l + 3: low 4 bits in q[l][h][1 + (cc & 1)] (nibble cc >> 1), top 2 bits in
 * q[l][h][0] (bits 2cc). A 4-product sum is at most 4 * 63 * 128 in magnitude, so it fits the int16
 * that VPDPWSSD multiplies by the scale. */
static inline __attribute__((always_inline)) void lane_isums(const struct loom_block_q6_k_x16 *g,
                                                             const struct x16_scales *u,
                                                             const struct loom_block_q8_k *const *y, int nt, int l,
                                                             __m512i *isum)
{
    const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
    /* int16 lane 2r of a pair from the first sum's row r, lane 2r + 1 from the second's */
    const __m512i pair = _mm512_set_epi32(0x003e001e, 0x003c001c, 0x003a001a, 0x00380018, 0x00360016, 0x00340014,
                                          0x00320012, 0x00300010, 0x002e000e, 0x002c000c, 0x002a000a, 0x00280008,
                                          0x00260006, 0x00240004, 0x00220002, 0x00200000);
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        int32_t bs;
        memcpy(&bs, y[t]->bsums + 2 * l, 4);
        isum[t] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), u->op[l], _mm512_set1_epi32(bs));
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i qh = _mm512_loadu_si512((const void *)g->q[l][h][0]);
        __m512i la = _mm512_loadu_si512((const void *)g->q[l][h][1]);
        __m512i lb = _mm512_loadu_si512((const void *)g->q[l][h][2]);
        __m512i q[4];
        q[0] = _mm512_or_si512(_mm512_and_si512(la, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
        q[1] = _mm512_or_si512(_mm512_and_si512(lb, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30));
        q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(la, 4), m4), _mm512_and_si512(qh, m30));
        q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lb, 4), m4),
                               _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
#pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                int c = 4 * h + 2 * p;
                __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[2 * p], bcast_dword(y[t]->qs, 8 * c + l));
                __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[2 * p + 1],
                                                 bcast_dword(y[t]->qs, 8 * (c + 1) + l));
                __m512i s01 = _mm512_permutex2var_epi16(s0, pair, s1);
                isum[t] = _mm512_dpwssd_epi32(isum[t], s01, u->sp[2 * h + p][l / 4]);
            }
    }
}

/* The dot of a group with nt (1 to 4 or 8; constant after inlining) activation rows: per row lane, lane l and
 * block, acc[t][l] = fma(d * d_a, isum, acc[t][l]); out = ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5)
 * + (acc3 + acc7)), loom_hsum8's order. */
static inline __attribute__((always_inline)) void dot_n(int64_t n, float *out, size_t y_stride, const void *w,
                                                        const void *a, size_t a_stride, int nt)
{
    const struct loom_block_q6_k_x16 *g = w;
    __m512 acc[8][8];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        for (int l = 0; l < 8; l++)
            acc[t][l] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        struct x16_scales u;
        loom_prefetch_ahead(&g[i], sizeof g[i]);
        unpack_scales(&g[i], &u);
        const struct loom_block_q8_k *y[8];
        __m512 dd[8];
        __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g[i].d));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++) {
            y[t] = (const struct loom_block_q8_k *)((const char *)a + t * a_stride) + i;
            dd[t] = _mm512_mul_ps(_mm512_set1_ps(y[t]->d), d);
        }
        for (int l = 0; l < 8; l++) {
            __m512i isum[8];
            lane_isums(&g[i], &u, y, nt, l, isum);
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++)
                acc[t][l] = _mm512_fmadd_ps(dd[t], _mm512_cvtepi32_ps(isum[t]), acc[t][l]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++) {
        __m512 lo = _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][4]), _mm512_add_ps(acc[t][2], acc[t][6]));
        __m512 hi = _mm512_add_ps(_mm512_add_ps(acc[t][1], acc[t][5]), _mm512_add_ps(acc[t][3], acc[t][7]));
        _mm512_storeu_ps(out + t * y_stride, _mm512_add_ps(lo, hi));
    }
}

/* 8 activation rows in one pass over the group (the quants are unpacked once per block for all of them);
 * fewer up to 4 at a time. */
void loom_q6_k_x16_vec_dot_avx512(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                                  size_t a_stride)
{
    if (n_act == 8) {
        dot_n(n, y, y_stride, w, a, a_stride, 8);
        return;
    }
    LOOM_X16_BY_FOUR(dot_n, n, n_act, y, y_stride, w, a, a_stride);
}
