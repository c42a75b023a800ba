/* q4_k_x16.c — the Q4_K x16 weight layout (16 rows interleaved per 256-weight block column, same bytes as
 * 16 standard Q4_K blocks; struct loom_block_q4_k_x16 in kernels/blocks.h): packing 16 standard rows into
 * it, unpacking one row back, and the scalar reference x16 dot, the oracle of the AVX2 and AVX-512 ones. */
#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Scale-plane byte q (< 4) of a row holds scale SC_OF[q] (plane A) / 4 + SC_OF[q] (plane B) and min
 * M_OF[q] (plane C) / 4 + M_OF[q] (plane D): the mins go in the order m0, m2, m1, m3 so that int16 lane
 * pairs of a plane dword are (m[2k], m[2k+1]). */
static const int M_OF[4] = {0, 2, 1, 3};

void loom_q4_k_x16_pack(const void *rows, size_t row_bytes, void *dst, int64_t n_in)
{
    struct loom_block_q4_k_x16 *g = dst;
    for (int64_t i = 0; i < n_in / LOOM_QK_K; i++) {
        for (int r = 0; r < 16; r++) {
            const struct loom_block_q4_k *b = (const struct loom_block_q4_k *)((const char *)rows + r * row_bytes) + i;
            uint8_t sc[8], m[8];
            loom_k4_scales(b->scales, sc, m);
            for (int s = 0; s < 32; s++)
                memcpy(g[i].qs[s][r], b->qs + 4 * s, 4);
            for (int q = 0; q < 4; q++) {
                uint8_t a = sc[q], bb = sc[4 + q], c = m[M_OF[q]], d = m[4 + M_OF[q]];
                g[i].sc_lo[4 * r + q] = (uint8_t)((a & 15) | (bb & 15) << 4);
                g[i].m_lo[4 * r + q] = (uint8_t)((c & 15) | (d & 15) << 4);
                g[i].hi[4 * r + q] = (uint8_t)((a >> 4) | (bb >> 4) << 2 | (c >> 4) << 4 | (d >> 4) << 6);
            }
            g[i].d[r] = b->d;
            g[i].dmin[r] = b->dmin;
        }
    }
}

/* The 8 scales and 8 mins of row r of group block g (6 bits each). */
static void group_scales(const struct loom_block_q4_k_x16 *g, int r, uint8_t sc[8], uint8_t m[8])
{
    for (int q = 0; q < 4; q++) {
        uint8_t lo = g->sc_lo[4 * r + q], ml = g->m_lo[4 * r + q], hi = g->hi[4 * r + q];
        sc[q] = (uint8_t)((lo & 15) | (hi & 3) << 4);
        sc[4 + q] = (uint8_t)((lo >> 4) | ((hi >> 2) & 3) << 4);
        m[M_OF[q]] = (uint8_t)((ml & 15) | ((hi >> 4) & 3) << 4);
        m[4 + M_OF[q]] = (uint8_t)((ml >> 4) | (hi >> 6) << 4);
    }
}

void loom_q4_k_x16_unpack_row(const void *group, int r, void *dst, int64_t n_in)
{
    const struct loom_block_q4_k_x16 *g = group;
    struct loom_block_q4_k *b = dst;
    for (int64_t i = 0; i < n_in / LOOM_QK_K; i++) {
        uint8_t sc[8], m[8];
        group_scales(&g[i], r, sc, m);
        /* the inverse of loom_k4_scales: 6 low bits of scale/min j < 4 in bytes j / j + 4 with the top 2
         * bits of j + 4 above them; bytes 8..11 the low nibbles of scale/min j + 4 */
        for (int j = 0; j < 4; j++) {
            b[i].scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
            b[i].scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
            b[i].scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
        }
        for (int s = 0; s < 32; s++)
            memcpy(b[i].qs + 4 * s, g[i].qs[s][r], 4);
        b[i].d = g[i].d[r];
        b[i].dmin = g[i].dmin[r];
    }
}

/* Per row r and block: isum = sum_j sc[j] * sum(q * q8 over sub-block j), imin = sum_j m[j] * (bsums[2j]
 * + bsums[2j+1]); acc = fma(isum, d * d_a, acc), accm = fma(imin, dmin * d_a, accm); y = acc - accm,
 * the order of loom_q4_k_gemv. Slot s of the qs holds bytes 4s..4s+3 of the row's qs: low
 * nibbles are elements of sub-block 2(s/8) at positions 4(s%8).., high nibbles sub-block 2(s/8)+1. */
void loom_q4_k_x16_gemv(int64_t n, float *y, const void *w, const void *a)
{
    const struct loom_block_q4_k_x16 *g = w;
    const struct loom_block_q8_k *x = a;
    for (int r = 0; r < 16; r++) {
        float acc = 0, accm = 0;
        for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
            uint8_t sc[8], m[8];
            group_scales(&g[i], r, sc, m);
            int32_t isum = 0, imin = 0;
            for (int j = 0; j < 8; j++) {
                int32_t sum = 0;
                for (int s = 8 * (j / 2); s < 8 * (j / 2) + 8; s++)
                    for (int k = 0; k < 4; k++)
                        sum += ((g[i].qs[s][r][k] >> (4 * (j & 1))) & 15) * x[i].qs[32 * j + 4 * (s % 8) + k];
                isum += sc[j] * sum;
                imin += m[j] * (x[i].bsums[2 * j] + x[i].bsums[2 * j + 1]);
            }
            acc = fmaf((float)isum, loom_f16_to_f32(g[i].d[r]) * x[i].d, acc);
            accm = fmaf((float)imin, loom_f16_to_f32(g[i].dmin[r]) * x[i].d, accm);
        }
        y[r] = acc - accm;
    }
}
