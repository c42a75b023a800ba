/* iq_decode.h — what the scalar kernels of the grid IQ types (iq2.c: IQ2_XXS, IQ2_XS, IQ2_S; iq3.c: IQ3_XXS,
 * IQ3_S) share: a block decoded to signed integer weights and 4-bit scales, and the two float orders of the
 * reference's dot products over such blocks against Q8_K (ggml-cpu's AVX2 vec_dot and its IQ panel gemm,
 * iqp.cpp). Each type file supplies only its decoder and its scale constants. */
#ifndef LOOM_KERNELS_IQ_DECODE_H
#define LOOM_KERNELS_IQ_DECODE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/iq_grids.h"
#include "util/fp16.h"

/* One 256-weight block: v[i] = grid byte times sign of weight i (never 0: grid bytes are positive), ls[h] the
 * 4-bit scale of weights 16h..16h+15. The weight's value is db(ls) * |v| * sign, db per type. */
struct loom_iq_block {
    int8_t v[LOOM_QK_K];
    uint8_t ls[16];
};

/* Weights base..base+7 from an 8-byte grid entry and 8 sign bits (bit j: weight j negative). */
static inline void loom_iq_put8(int8_t *v, uint64_t grid, uint8_t signs)
{
    for (int j = 0; j < 8; j++) {
        int g = (int)(grid >> (8 * j) & 255);
        v[j] = (int8_t)(signs >> j & 1 ? -g : g);
    }
}

/* Weights base..base+3 from a 4-byte grid entry and 4 sign bits (bit j: weight j negative). */
static inline void loom_iq_put4(int8_t *v, uint32_t grid, unsigned signs)
{
    for (int j = 0; j < 4; j++) {
        int g = (int)(grid >> (8 * j) & 255);
        v[j] = (int8_t)(signs >> j & 1 ? -g : g);
    }
}

/* y[16h + k] = db[h] * |v| * (v < 0 ? -1 : 1): ggml-quants.c dequantize_row_iq*'s expression, the sign applied
 * as a multiplication by -1.f or 1.f as there (it keeps a NaN's sign bit, which a negation would flip). */
static inline void loom_iq_dequant_block(const struct loom_iq_block *b, const float db[16], float *y)
{
    for (int i = 0; i < LOOM_QK_K; i++) {
        int v = b->v[i];
        y[i] = db[i / 16] * (float)(v < 0 ? -v : v) * (v < 0 ? -1.f : 1.f);
    }
}

/* lane[l] = exact integer sum over the 8 sub-blocks of 32 of (2 ls + 1) * sum over weights 4l..4l+3 of v * q8:
 * the 8 int32 lanes of the reference's AVX2 kernels (VPMADDUBSW then VPMADDWD by the scale). */
static inline void loom_iq_lanes(const struct loom_iq_block *b, const int8_t *q8, int32_t lane[8])
{
    for (int l = 0; l < 8; l++)
        lane[l] = 0;
    for (int sb = 0; sb < 8; sb++)
        for (int l = 0; l < 8; l++) {
            int32_t s = 0;
            for (int k = 32 * sb + 4 * l; k < 32 * sb + 4 * l + 4; k++)
                s += b->v[k] * q8[k];
            lane[l] += (2 * b->ls[2 * sb + l / 4] + 1) * s;
        }
}

/* The block's whole exact integer sum, sum over the 16 sub-blocks of 16 of (2 ls + 1) * sum of v * q8. */
static inline int32_t loom_iq_isum(const struct loom_iq_block *b, const int8_t *q8)
{
    int32_t isum = 0;
    for (int h = 0; h < 16; h++) {
        int32_t s = 0;
        for (int k = 16 * h; k < 16 * h + 16; k++)
            s += b->v[k] * q8[k];
        isum += (2 * b->ls[h] + 1) * s;
    }
    return isum;
}

typedef void (*loom_iq_decode_fn)(const void *block, struct loom_iq_block *out);

/* Decode block i of a row of block_bytes-byte blocks at src into *b; returns the block's F16 d (its first two
 * bytes, as every grid IQ block begins) as F32. */
static inline float loom_iq_load(const void *src, int64_t i, size_t block_bytes, loom_iq_decode_fn decode,
                                 struct loom_iq_block *b)
{
    const uint8_t *blk = (const uint8_t *)src + (size_t)i * block_bytes;
    uint16_t dh;
    memcpy(&dh, blk, sizeof dh);
    decode(blk, b);
    return loom_f16_to_f32(dh);
}

/* The reference's AVX2 vec_dot order (ggml-cpu/arch/x86/quants.c ggml_vec_dot_iq2_xxs_q8_K and its siblings):
 * per block acc[l] = fma(d_w * d_a, lane[l], acc[l]) with d_w the block's F16 d; then hsum_float_8(acc), times
 * `post` when has_post (0.125 for the IQ2 types, 0.25 for IQ3_XXS; IQ3_S has none). */
static inline float loom_iq_vec_dot(int64_t n, const void *w, size_t block_bytes, const void *a,
                                    loom_iq_decode_fn decode, int has_post, float post)
{
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0};
    struct loom_iq_block b;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_iq_load(w, i, block_bytes, decode, &b) * y[i].d;
        int32_t lane[8];
        loom_iq_lanes(&b, y[i].qs, lane);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    float sum = loom_hsum8(acc);
    return has_post ? post * sum : sum;
}

/* The reference's IQ panel order (ggml-cpu/iqp.cpp, 8 or more activation rows, n_out % 8 == 0): per block
 * acc = fma(isum, dfac * d_a, acc), dfac = the F16 d times `dfac_mul` when has_mul (0.125 for the IQ2 types, 0.25
 * for IQ3_XXS; IQ3_S takes d as is). */
static inline float loom_iq_iqp(int64_t n, const void *w, size_t block_bytes, const void *a, loom_iq_decode_fn decode,
                                int has_mul, float dfac_mul)
{
    const struct loom_block_q8_k *y = a;
    float acc = 0;
    struct loom_iq_block b;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float dw = loom_iq_load(w, i, block_bytes, decode, &b);
        float dfac = has_mul ? dw * dfac_mul : dw;
        acc = fmaf((float)loom_iq_isum(&b, y[i].qs), dfac * y[i].d, acc);
    }
    return acc;
}

#endif
