/* iq3.c — scalar reference kernels of the 3-bit grid types IQ3_XXS and IQ3_S (block layouts in kernels/blocks.h,
 * grids in kernels/iq_grids.h): dequantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_iq3_xxs/s) and the dot products with Q8_K in the float orders of the reference's zen4 CPU
 * backend: ggml-cpu/arch/x86/quants.c ggml_vec_dot_iq3_*_q8_K (its AVX2 code) for fewer than 8 activation rows,
 * iqp.cpp's IQ panel gemm for 8 or more (iq_decode.h). No weight quantizer. */
#include "kernels/iq_decode.h"
#include "kernels/protos.h"

/* IQ3_XXS: 64 grid index bytes, then per sub-block a word of 4 sign indices (one per 8 weights) and ls. */
static void decode_iq3_xxs(const void *block, struct loom_iq_block *out)
{
    const struct loom_block_iq3_xxs *x = block;
    for (int b = 0; b < 8; b++) {
        uint32_t aux;
        memcpy(&aux, x->qs + 64 + 4 * b, sizeof aux);
        out->ls[2 * b] = out->ls[2 * b + 1] = (uint8_t)(aux >> 28);
        for (int l = 0; l < 4; l++) {
            uint8_t signs = loom_iq2_ksigns[aux >> (7 * l) & 127];
            int k = 8 * b + 2 * l; /* the two groups of 4 under these signs */
            loom_iq_put4(out->v + 4 * k, loom_iq3xxs_grid[x->qs[k]], signs & 15);
            loom_iq_put4(out->v + 4 * k + 4, loom_iq3xxs_grid[x->qs[k + 1]], signs >> 4);
        }
    }
}

/* IQ3_S: 9-bit grid index from qs and qh, explicit sign bytes, a scale nibble per sub-block. */
static void decode_iq3_s(const void *block, struct loom_iq_block *out)
{
    const struct loom_block_iq3_s *x = block;
    for (int b = 0; b < 8; b++)
        out->ls[2 * b] = out->ls[2 * b + 1] = x->scales[b / 2] >> (4 * (b % 2)) & 15;
    for (int k = 0; k < 64; k++) {
        int index = x->qs[k] | (x->qh[k / 8] >> (k % 8) & 1) << 8;
        loom_iq_put4(out->v + 4 * k, loom_iq3s_grid[index], (unsigned)x->signs[k / 2] >> (4 * (k % 2)) & 15);
    }
}

/* value = (d * (0.5 + ls) * 0.5) * grid byte * sign (dequantize_row_iq3_xxs). */
void loom_iq3_xxs_to_float(const void *src, float *dst, int64_t n)
{
    struct loom_iq_block b;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_iq_load(src, i, sizeof(struct loom_block_iq3_xxs), decode_iq3_xxs, &b), db[16];
        for (int h = 0; h < 16; h++)
            db[h] = d * (0.5f + (float)b.ls[h]) * 0.5f;
        loom_iq_dequant_block(&b, db, dst + LOOM_QK_K * i);
    }
}

/* value = (d * (1 + 2 ls)) * grid byte * sign (dequantize_row_iq3_s). */
void loom_iq3_s_to_float(const void *src, float *dst, int64_t n)
{
    struct loom_iq_block b;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_iq_load(src, i, sizeof(struct loom_block_iq3_s), decode_iq3_s, &b), db[16];
        for (int h = 0; h < 16; h++)
            db[h] = d * (float)(1 + 2 * b.ls[h]);
        loom_iq_dequant_block(&b, db, dst + LOOM_QK_K * i);
    }
}

/* *s = sum of W[i] * A[i], in the AVX2 order (iq_decode.h): IQ3_XXS scales the sum by 0.25, IQ3_S not at all. */
void loom_iq3_xxs_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_vec_dot(n, w, sizeof(struct loom_block_iq3_xxs), a, decode_iq3_xxs, 1, 0.25f);
}

void loom_iq3_s_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_vec_dot(n, w, sizeof(struct loom_block_iq3_s), a, decode_iq3_s, 0, 1.0f);
}

/* *s in the IQ panel order: dfac = d_w * 0.25 (IQ3_XXS) or d_w (IQ3_S). */
void loom_iq3_xxs_iqp(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_iqp(n, w, sizeof(struct loom_block_iq3_xxs), a, decode_iq3_xxs, 1, 0.25f);
}

void loom_iq3_s_iqp(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_iq_iqp(n, w, sizeof(struct loom_block_iq3_s), a, decode_iq3_s, 0, 1.0f);
}
