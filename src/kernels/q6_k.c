/* q6_k.c — scalar reference kernels of Q6_K (block layout in kernels_internal.h): dequantization
 * bit-identical to llama.cpp's dequantize_row_q6_K and the Q6_K x Q8_K dot product summed in the lane
 * order of ggml-cpu's AVX2 kernel (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q6_K_q8_K). */
#include <math.h>

#include "kernels/kernels_internal.h"
#include "util/fp16.h"

/* Unsigned 6-bit quant (0..63, value q - 32) of element 32c + l (c < 4, l < 32) of half h. */
static inline int q6_at(const struct loom_block_q6_k *b, int h, int c, int l)
{
    int lo = (b->ql[64 * h + 32 * (c & 1) + l] >> (4 * (c >> 1))) & 15;
    int hi = (b->qh[32 * h + l] >> (2 * c)) & 3;
    return lo | hi << 4;
}

/* value = (d * scale) * (q - 32), as the reference (two F32 products, left to right). */
void loom_q6_k_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q6_k *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int h = 0; h < 2; h++)
            for (int c = 0; c < 4; c++)
                for (int l = 0; l < 32; l++) {
                    float sc = (float)b[i].scales[8 * h + 2 * c + l / 16];
                    dst[i * LOOM_QK_K + 128 * h + 32 * c + l] = d * sc * (float)(q6_at(&b[i], h, c, l) - 32);
                }
    }
}

/* *s = sum_i W[i] * A[i] for one Q6_K row against a Q8_K row. Integer lanes (reference AVX2 kernel):
 * lane[l] = sum over the eight 32-element chunks of scale * q * q8 over chunk elements 4l..4l+3 (q
 * unsigned 0..63), minus 32 * (bsums[2l]*scales[2l] + bsums[2l+1]*scales[2l+1]) for the -32 offset.
 * Float order: acc[l] = fma(d_a * d, lane[l], acc[l]) per block, then hsum_float_8. */
void loom_q6_k_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q6_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t lane[8];
        for (int l = 0; l < 8; l++)
            lane[l] = -32 * (y[i].bsums[2 * l] * x[i].scales[2 * l] + y[i].bsums[2 * l + 1] * x[i].scales[2 * l + 1]);
        for (int h = 0; h < 2; h++)
            for (int c = 0; c < 4; c++) {
                const int8_t *q8 = y[i].qs + 128 * h + 32 * c;
                for (int l = 0; l < 8; l++)
                    for (int k = 4 * l; k < 4 * l + 4; k++)
                        lane[l] += x[i].scales[8 * h + 2 * c + k / 16] * q6_at(&x[i], h, c, k) * q8[k];
            }
        float d = y[i].d * loom_f16_to_f32(x[i].d);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    *s = loom_hsum8(acc);
}
