/* iq2.c — scalar reference kernels of the 2-bit grid types IQ2_XXS, IQ2_XS and IQ2_S (block layouts in
 * kernels/blocks.h, grids in kernels/iq_grids.h): dequantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_iq2_xxs/xs/s) and the dot products with Q8_K in the float orders of the reference's zen4 CPU
 * backend: ggml-cpu/arch/x86/quants.c ggml_vec_dot_iq2_*_q8_K (its AVX2 code; no AVX-512 variant exists) for
 * fewer than 8 activation rows, iqp.cpp's IQ panel gemm for 8 or more (iq_decode.h). No weight quantizer. */
#include "kernels/iq_decode.h"
#include "kernels/protos.h"

/* IQ2_XXS: sub-block b's two words; grid index bytes in the first, sign indices and ls in the second. */
static void decode_iq2_xxs(const void *block, struct loom_iq_block *out)
{
    const struct loom_block_iq2_xxs *x = block;
    for (int b = 0; b < 8; b++) {
        uint32_t aux[2];
        memcpy(aux, x->qs + 4 * b, sizeof aux);
        out->ls[2 * b] = out->ls[2 * b + 1] = (uint8_t)(aux[1] >> 28);
        for (int l = 0; l < 4; l++)
            loom_iq_put8(out->v + 32 * b + 8 * l, loom_iq2xxs_grid[aux[0] >> (8 * l) & 255],
                         loom_iq2_ksigns[aux[1] >> (7 * l) & 127]);
    }
}

/* IQ2_XS: one uint16 per group of 8 (9-bit grid index, 7-bit sign index), a scale byte per sub-block. */
static void decode_iq2_xs(const void *block, struct loom_iq_block *out)
{
    const struct loom_block_iq2_xs *x = block;
    for (int b = 0; b < 8; b++) {
        out->ls[2 * b] = x->scales[b] & 15;
        out->ls[2 * b + 1] = x->scales[b] >> 4;
    }
    for (int g = 0; g < 32; g++)
        loom_iq_put8(out->v + 8 * g, loom_iq2xs_grid[x->qs[g] & 511], loom_iq2_ksigns[x->qs[g] >> 9]);
}

/* IQ2_S: 10-bit grid index from qs and qh, explicit sign bytes, a scale byte per sub-block. */
static void decode_iq2_s(const void *block, struct loom_iq_block *out)
{
    const struct loom_block_iq2_s *x = block;
    for (int b = 0; b < 8; b++) {
        out->ls[2 * b] = x->scales[b] & 15;
        out->ls[2 * b + 1] = x->scales[b] >> 4;
    }
    for (int g = 0; g < 32; g++) {
        int index = x->qs[g] | (x->qh[g / 4] >> (2 * (g % 4)) & 3) << 8;
        loom_iq_put8(out->v + 8 * g, loom_iq2s_grid[index], x->qs[32 + g]);
    }
}

/* value = (d * (0.5 + ls) * 0.25) * grid byte * sign, per 16 weights, as dequantize_row_iq2_*. */
static void iq2_to_float(const void *src, float *dst, int64_t n, size_t block_bytes, loom_iq_decode_fn decode)
{
    struct loom_iq_block b;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)src + (size_t)i * block_bytes;
        uint16_t dh;
        memcpy(&dh, blk, sizeof dh);
        float d = loom_f16_to_f32(dh), db[16];
        decode(blk, &b);
        for (int h = 0; h < 16; h++)
            db[h] = d * (0.5f + (float)b.ls[h]) * 0.25f;
        loom_iq_dequant_block(&b, db, dst + LOOM_QK_K * i);
    }
}

void loom_iq2_xxs_to_float(const void *src, float *dst, int64_t n)
{
    iq2_to_float(src, dst, n, sizeof(struct loom_block_iq2_xxs), decode_iq2_xxs);
}

void loom_iq2_xs_to_float(const void *src, float *dst, int64_t n)
{
    iq2_to_float(src, dst, n, sizeof(struct loom_block_iq2_xs), decode_iq2_xs);
}

void loom_iq2_s_to_float(const void *src, float *dst, int64_t n)
{
    iq2_to_float(src, dst, n, sizeof(struct loom_block_iq2_s), decode_iq2_s);
}

/* *s = sum of W[i] * A[i], in the AVX2 order: lanes of 4 weights, acc[l] = fma(d_w * d_a, lane, acc[l]),
 * *s = 0.125 * hsum_float_8(acc) (the 2 ls + 1 integer scales carry the rest of db). */
void loom_iq2_xxs_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_vec_dot(n, w, sizeof(struct loom_block_iq2_xxs), a, decode_iq2_xxs, 1, 0.125f);
}

void loom_iq2_xs_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_vec_dot(n, w, sizeof(struct loom_block_iq2_xs), a, decode_iq2_xs, 1, 0.125f);
}

void loom_iq2_s_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_vec_dot(n, w, sizeof(struct loom_block_iq2_s), a, decode_iq2_s, 1, 0.125f);
}

/* *s in the IQ panel order: per block acc = fma(isum, (d_w * 0.125) * d_a, acc). */
void loom_iq2_xxs_iqp(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_iqp(n, w, sizeof(struct loom_block_iq2_xxs), a, decode_iq2_xxs, 1, 0.125f);
}

void loom_iq2_xs_iqp(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_iqp(n, w, sizeof(struct loom_block_iq2_xs), a, decode_iq2_xs, 1, 0.125f);
}

void loom_iq2_s_iqp(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_iqp(n, w, sizeof(struct loom_block_iq2_s), a, decode_iq2_s, 1, 0.125f);
}
