/* q6_k_x16.c — the Q6_K x16 weight layout (16 rows interleaved word by word, same bytes as 16 standard
 * Q6_K blocks; struct loom_block_q6_k_x16 in kernels/blocks.h): packing 16 standard rows into it, unpacking
 * one row back, and the scalar reference x16 dot, the oracle of the AVX-512 one. */
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

void loom_q6_k_x16_pack(const void *rows, size_t row_bytes, void *dst, int64_t n_in)
{
    struct loom_block_q6_k_x16 *g = dst;
    for (int64_t i = 0; i < n_in / LOOM_QK_K; i++)
        for (int r = 0; r < 16; r++) {
            const struct loom_block_q6_k *b = (const struct loom_block_q6_k *)((const char *)rows + r * row_bytes) + i;
            for (int l = 0; l < 8; l++)
                for (int h = 0; h < 2; h++) {
                    memcpy(g[i].q[l][h][0][r], b->qh + 4 * (8 * h + l), 4);
                    memcpy(g[i].q[l][h][1][r], b->ql + 4 * (16 * h + l), 4);
                    memcpy(g[i].q[l][h][2][r], b->ql + 4 * (16 * h + 8 + l), 4);
                }
            for (int s = 0; s < 4; s++)
                memcpy(g[i].scales[s][r], b->scales + 4 * s, 4);
            g[i].d[r] = b->d;
        }
}

void loom_q6_k_x16_unpack_row(const void *group, int r, void *dst, int64_t n_in)
{
    const struct loom_block_q6_k_x16 *g = group;
    struct loom_block_q6_k *b = dst;
    for (int64_t i = 0; i < n_in / LOOM_QK_K; i++) {
        for (int l = 0; l < 8; l++)
            for (int h = 0; h < 2; h++) {
                memcpy(b[i].qh + 4 * (8 * h + l), g[i].q[l][h][0][r], 4);
                memcpy(b[i].ql + 4 * (16 * h + l), g[i].q[l][h][1][r], 4);
                memcpy(b[i].ql + 4 * (16 * h + 8 + l), g[i].q[l][h][2][r], 4);
            }
        for (int s = 0; s < 4; s++)
            memcpy(b[i].scales + 4 * s, g[i].scales[s][r], 4);
        b[i].d = g[i].d[r];
    }
}

/* Row r's unsigned 6-bit quant of element 32c + l (c < 4, l < 32) of half h (its low 4 bits in ql byte
 * 64h + 32(c & 1) + l, its top 2 in qh byte 32h + l), and its scale j. */
static inline int q6_at(const struct loom_block_q6_k_x16 *g, int r, int h, int c, int l)
{
    int lo = (g->q[(l / 4) % 8][h][1 + (c & 1)][r][l % 4] >> (4 * (c >> 1))) & 15;
    int hi = (g->q[(l / 4) % 8][h][0][r][l % 4] >> (2 * c)) & 3;
    return lo | hi << 4;
}

static inline int scale_at(const struct loom_block_q6_k_x16 *g, int r, int j) { return g->scales[j / 4][r][j % 4]; }

/* Per row, loom_q6_k_vec_dot's integer lanes and float order. */
void loom_q6_k_x16_vec_dot(int64_t n, float *y, const void *w, const void *a)
{
    const struct loom_block_q6_k_x16 *g = w;
    const struct loom_block_q8_k *x = a;
    for (int r = 0; r < 16; r++) {
        float acc[8] = {0};
        for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
            int32_t lane[8];
            for (int l = 0; l < 8; l++)
                lane[l] = -32 * (x[i].bsums[2 * l] * scale_at(&g[i], r, 2 * l) +
                                 x[i].bsums[2 * l + 1] * scale_at(&g[i], r, 2 * l + 1));
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 4; c++) {
                    const int8_t *q8 = x[i].qs + 128 * h + 32 * c;
                    for (int l = 0; l < 8; l++)
                        for (int k = 4 * l; k < 4 * l + 4; k++)
                            lane[l] += scale_at(&g[i], r, 8 * h + 2 * c + k / 16) * q6_at(&g[i], r, h, c, k) * q8[k];
                }
            float d = x[i].d * loom_f16_to_f32(g[i].d[r]);
            for (int l = 0; l < 8; l++)
                acc[l] = fmaf(d, (float)lane[l], acc[l]);
        }
        y[r] = loom_hsum8(acc);
    }
}
