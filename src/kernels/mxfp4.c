/* mxfp4.c — scalar reference kernels of MXFP4 (OCP microscaling FP4: 32 E2M1 values with one E8M0 power-of-two
 * scale; block layout in kernels/blocks.h): dequantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_mxfp4), the dot products in the float order of the reference's zen4 CPU build
 * (ggml-cpu/arch/x86/quants.c ggml_vec_dot_mxfp4_q8_0, AVX2; and the repacked arch/x86/repack.cpp
 * ggml_gemv/gemm_mxfp4_8x8_q8_0 it runs for weights in its CPU_REPACK buffer); its row validator is in
 * validate.c. loom has no MXFP4 quantizer. */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Grid index (< 16) of element j (< 32) of an MXFP4 block: low nibbles are elements 0..15, high 16..31. */
static inline int index4(const uint8_t qs[16], int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

/* Half the E8M0 scale, 2^(e - 128), as an F32: e < 2 are subnormals (2^-128, 2^-127), e = 255 gives 2^127
 * (the format's NaN code; the reference, like loom, does not treat it specially). The E2M1 values in
 * loom_mxfp4_values are doubled, so value = values[index] * scale_half(e). */
float loom_e8m0_half_to_f32(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* value = (float)values[index] * 2^(e - 128). */
void loom_mxfp4_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_e8m0_half_to_f32(b[i].e);
        for (int j = 0; j < 32; j++)
            dst[32 * i + j] = (float)loom_mxfp4_values[index4(b[i].qs, j)] * d;
    }
}

/* Exact integer sum over elements 4l..4l+3 of one block: grid values times quants. */
static inline int32_t lane_sum(const uint8_t qs[16], const int8_t *q8, int l)
{
    int32_t sum = 0;
    for (int k = 4 * l; k < 4 * l + 4; k++)
        sum += loom_mxfp4_values[index4(qs, k)] * q8[k];
    return sum;
}

static inline int32_t block_sum(const uint8_t qs[16], const int8_t *q8)
{
    int32_t sum = 0;
    for (int l = 0; l < 8; l++)
        sum += lane_sum(qs, q8, l);
    return sum;
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_mxfp4_q8_0, the same as its IQ4_NL kernel): blocks in pairs,
 * the even one into acc1 and the odd one into acc2, each lane l = fma(d_a * d_w, exact sum over elements
 * 4l..4l+3, lane); sum = hsum_float_8(acc1 + acc2); an odd last block is added as fma(d_a * d_w, block sum, sum). */
void loom_mxfp4_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_mxfp4 *x = w;
    const struct loom_block_q8_0 *y = a;
    int64_t nb = n / 32, i = 0;
    float acc1[8] = {0}, acc2[8] = {0};
    for (; i + 1 < nb; i += 2) {
        float d1 = loom_f16_to_f32(y[i].d) * loom_e8m0_half_to_f32(x[i].e);
        float d2 = loom_f16_to_f32(y[i + 1].d) * loom_e8m0_half_to_f32(x[i + 1].e);
        for (int l = 0; l < 8; l++) {
            acc1[l] = fmaf(d1, (float)lane_sum(x[i].qs, y[i].qs, l), acc1[l]);
            acc2[l] = fmaf(d2, (float)lane_sum(x[i + 1].qs, y[i + 1].qs, l), acc2[l]);
        }
    }
    for (int l = 0; l < 8; l++)
        acc1[l] += acc2[l];
    float sum = loom_hsum8(acc1);
    if (i < nb)
        sum = fmaf(loom_f16_to_f32(y[i].d) * loom_e8m0_half_to_f32(x[i].e), (float)block_sum(x[i].qs, y[i].qs), sum);
    *s = sum;
}

/* The order of the reference's repacked MXFP4 kernels (repack.cpp ggml_gemv/gemm_mxfp4_8x8_q8_0 through the
 * Q4_0/IQ4_NL template gemv/gemm_q4_b32_8x8_q8_0_lut_avx, weights with n_out % 8 == 0): per block the whole
 * exact integer sum, acc = fma(isum, d_w * d_a, acc). */
void loom_mxfp4_gemv(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_mxfp4 *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++)
        acc = fmaf((float)block_sum(x[i].qs, y[i].qs), loom_e8m0_half_to_f32(x[i].e) * loom_f16_to_f32(y[i].d), acc);
    *s = acc;
}
