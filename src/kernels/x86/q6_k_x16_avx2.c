/* q6_k_x16_avx2.c — AVX2 dots of Q6_K x16 weight groups (16 rows interleaved, q6_k_x16.c) with 1 to 8
 * activation rows, for CPUs without AVX-512: the 16 rows as two 8-row halves, each 4-byte activation
 * broadcast against the same 4 positions of 8 rows (VPMADDUBSW), each row's two pair sums scaled by their
 * sub-block scale and added into int32 by one VPMADDWD. Every row gets exactly the 8 int32 lanes and the
 * float steps of loom_q6_k_vec_dot, so it is bit-identical to loom_q6_k_x16_vec_dot. */
#include <immintrin.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/prefetch.h"
#include "kernels/protos.h"

/* One 8-row half of a group block's scales per row lane: sc[j] (j < 16) the int16 pair (scales[j],
 * scales[j]), op[l] (l < 8) the pair -32 * (scales[2l], scales[2l + 1]) that turns the activation's block
 * sums into lane l's -32 offset. */
struct x16_half_scales {
    __m256i sc[16], op[8];
};

/* Bytes b0 and b1 (< 4) of every dword of x as its two int16, sign-extended: PSHUFB puts them in the high
 * bytes and zeros below (index bytes 0x80 + 4k), the arithmetic shift brings them down. */
static inline __m256i dword_bytes_epi16(__m256i x, int b0, int b1)
{
    const __m256i at = _mm256_set1_epi32((int)(0x00800080u | (unsigned)b0 << 8 | (unsigned)b1 << 24));
    const __m256i pick = _mm256_add_epi32(at, _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0,
                                                                0x04040404, 0x08080808, 0x0c0c0c0c));
    return _mm256_srai_epi16(_mm256_shuffle_epi8(x, pick), 8);
}

/* The scales of rows 8rh .. 8rh + 7 of group block g: dword s of a row holds its scales 4s .. 4s + 3. */
static inline void unpack_half_scales(const struct loom_block_q6_k_x16 *g, int rh, struct x16_half_scales *u)
{
    const __m256i m32 = _mm256_set1_epi16(-32);
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) {
        __m256i x = _mm256_loadu_si256((const __m256i *)g->scales[s][8 * rh]);
#pragma GCC unroll 4
        for (int o = 0; o < 4; o++)
            u->sc[4 * s + o] = dword_bytes_epi16(x, o, o);
        u->op[2 * s] = _mm256_mullo_epi16(dword_bytes_epi16(x, 0, 1), m32);
        u->op[2 * s + 1] = _mm256_mullo_epi16(dword_bytes_epi16(x, 2, 3), m32);
    }
}

/* Dword k of the 4-byte words at p, in every lane. */
static inline __m256i bcast_dword(const void *p, int k)
{
    int32_t v;
    memcpy(&v, (const char *)p + 4 * k, 4);
    return _mm256_set1_epi32(v);
}

/* Lane l (< 8) of block g for rows 8rh .. 8rh + 7 and nt activation rows: isum[t] per row = the reference's
 * lane l. Chunk c = 4h + cc, positions 4l .. 4l + 3: low 4 bits in q[l][h][1 + (cc & 1)] (nibble cc >> 1),
 * top 2 bits in q[l][h][0] (bits 2cc); scale 8h + 2cc + l / 4. VPMADDUBSW's pair sums of unsigned 6-bit
 * quants and int8 activations are at most 2 * 63 * 128 = 16128 in magnitude (no saturation), VPMADDWD's
 * scaled sums at most 2 * 16128 * 128, and a lane at most 32 * 63 * 128 * 128 + 32 * 2 * 2048 * 128: exact. */
static inline __attribute__((always_inline)) void lane_isums(const struct loom_block_q6_k_x16 *g, int rh,
                                                             const struct x16_half_scales *u,
                                                             const struct loom_block_q8_k *const *y, int nt, int l,
                                                             __m256i *isum)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const __m256i *sc = u->sc + l / 4; /* sc[8h + 2cc]: chunk 4h + cc's scale in lane l */
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        isum[t] = _mm256_madd_epi16(u->op[l], bcast_dword(y[t]->bsums, l));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m256i qh = _mm256_loadu_si256((const __m256i *)g->q[l][h][0][8 * rh]);
        __m256i la = _mm256_loadu_si256((const __m256i *)g->q[l][h][1][8 * rh]);
        __m256i lb = _mm256_loadu_si256((const __m256i *)g->q[l][h][2][8 * rh]);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(la, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        q[1] = _mm256_or_si256(_mm256_and_si256(lb, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), m4), _mm256_and_si256(qh, m30));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
#pragma GCC unroll 4
            for (int cc = 0; cc < 4; cc++) {
                __m256i p = _mm256_maddubs_epi16(q[cc], bcast_dword(y[t]->qs, 8 * (4 * h + cc) + l));
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, sc[8 * h + 2 * cc]));
                /* no instruction: it keeps each sum a running register, where GCC 12 would otherwise hold
                 * every product of the lane live to add them last (spilled: about 15% more instructions) */
                __asm__("" : "+x"(isum[t]));
            }
    }
}

/* The dot of a group with nt (1 to 4 or 8; constant after inlining) activation rows, one 8-row half of
 * each block at a time, asking for part 8rh + l of 16 of the block LOOM_PREFETCH_AHEAD on at each lane l: per row
 * lane, lane l and block, acc[t][l] = fma(d * d_a, isum, acc[t][l]); out =
 * ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)), loom_hsum8's order. */
static inline __attribute__((always_inline)) void dot_n(int64_t n, float *out, size_t y_stride, const void *w,
                                                        const void *a, size_t a_stride, int nt)
{
    const struct loom_block_q6_k_x16 *g = w;
    __m256 acc[8][2][8];
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        for (int rh = 0; rh < 2; rh++)
            for (int l = 0; l < 8; l++)
                acc[t][rh][l] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const struct loom_block_q8_k *y[8];
#pragma GCC unroll 8
        for (int t = 0; t < nt; t++)
            y[t] = (const struct loom_block_q8_k *)((const char *)a + t * a_stride) + i;
        for (int rh = 0; rh < 2; rh++) {
            struct x16_half_scales u;
            unpack_half_scales(&g[i], rh, &u);
            __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g[i].d + 8 * rh)));
            __m256 dd[8];
#pragma GCC unroll 8
            for (int t = 0; t < nt; t++)
                dd[t] = _mm256_mul_ps(_mm256_set1_ps(y[t]->d), d);
            for (int l = 0; l < 8; l++) {
                __m256i isum[8];
                loom_prefetch_ahead_part(&g[i], sizeof g[i], 8 * rh + l, 16);
                lane_isums(&g[i], rh, &u, y, nt, l, isum);
#pragma GCC unroll 8
                for (int t = 0; t < nt; t++)
                    acc[t][rh][l] = _mm256_fmadd_ps(dd[t], _mm256_cvtepi32_ps(isum[t]), acc[t][rh][l]);
            }
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < nt; t++)
        for (int rh = 0; rh < 2; rh++) {
            const __m256 *v = acc[t][rh];
            __m256 lo = _mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6]));
            __m256 hi = _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7]));
            _mm256_storeu_ps(out + t * y_stride + 8 * rh, _mm256_add_ps(lo, hi));
        }
}

/* 8 activation rows in one pass over the group (the quants are unpacked once per block for all of them);
 * fewer up to 4 at a time. */
void loom_q6_k_x16_vec_dot_avx2(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                                size_t a_stride)
{
    if (n_act == 8) {
        dot_n(n, y, y_stride, w, a, a_stride, 8);
        return;
    }
    LOOM_X16_BY_FOUR(dot_n, n, n_act, y, y_stride, w, a, a_stride);
}
