/* q4_0.c — scalar reference kernels of the legacy 4-bit family, Q4_0 and Q4_1 (block layouts in
 * kernels/blocks.h): dequantization and weight quantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_q4_0/1, quantize_row_q4_0/1_ref), and the dot products with Q8_0/Q8_1 activations in
 * the float order of the reference's AVX2 kernels (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q4_0_q8_0,
 * ggml_vec_dot_q4_1_q8_1). */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Quant j (< 32) of a Q4_0-style nibble block. */
static inline int nibble(const uint8_t qs[16], int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

/* value = (q - 8) * d, one F32 product per element. */
void loom_q4_0_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++)
            dst[32 * i + j] = (float)(nibble(b[i].qs, j) - 8) * d;
    }
}

/* value = q * d + m, the product rounded before the add (no FMA), as the reference. */
void loom_q4_1_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(b[i].d), m = loom_f16_to_f32(b[i].m);
        for (int j = 0; j < 32; j++) {
            float p = (float)nibble(b[i].qs, j) * d;
            dst[32 * i + j] = p + m;
        }
    }
}

/* Weight quantization (reference path, ggml-quants.c quantize_row_q4_0_ref): max = the value of
 * largest magnitude (first on ties), d = max / -8, q = min(15, trunc(x / d + 8.5)). */
void loom_q4_0_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        float max = loom_signed_absmax(x, 32);
        float d = max / -8, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = loom_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int q0 = loom_trunc_i8(x[j] * id + 8.5f), q1 = loom_trunc_i8(x[16 + j] * id + 8.5f);
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
            b[i].qs[j] = (uint8_t)((unsigned)(q0 & 0xff) | (unsigned)(q1 & 0xff) << 4);
        }
    }
}

/* Weight quantization (quantize_row_q4_1_ref): d = (max - min) / 15, m = min,
 * q = min(15, trunc((x - min) / d + 0.5)). */
void loom_q4_1_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        float min, max;
        loom_min_max(x, 32, &min, &max);
        float d = (max - min) / 15, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = loom_f32_to_f16(d);
        b[i].m = loom_f32_to_f16(min);
        for (int j = 0; j < 16; j++) {
            int q0 = loom_trunc_i8((x[j] - min) * id + 0.5f), q1 = loom_trunc_i8((x[16 + j] - min) * id + 0.5f);
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
            b[i].qs[j] = (uint8_t)((unsigned)(q0 & 0xff) | (unsigned)(q1 & 0xff) << 4);
        }
    }
}

/* The importance weights of one 32-block on the reference's imatrix path: qw[j] * sqrt(sigma2 + x[j]^2). */
static void block_weights(const float *x, const float *qw, float sigma2, float w[32])
{
    for (int j = 0; j < 32; j++)
        w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* sum(x^2) / n over the whole row: the sigma2 of quantize_row_q4_0_impl / q4_1_impl. */
static float row_sigma2(const float *x, int64_t n)
{
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; j++)
        sum_x2 += x[j] * x[j];
    return sum_x2 / (float)n;
}

/* Weighted weight quantization of one row (ggml-quants.c quantize_row_q4_0_impl with an importance matrix):
 * per block d = make_qx_quants(32, 8, rmse 1) with weights qw * sqrt(sigma2 + x^2), sigma2 the row's mean
 * square; quants l + 8 packed as in loom_q4_0_quantize. */
void loom_q4_0_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_q4_0 *b = dst;
    float sigma2 = row_sigma2(src, n), w[32];
    for (int64_t i = 0; i < n / 32; i++) {
        int8_t L[32];
        block_weights(src + 32 * i, qw + 32 * i, sigma2, w);
        b[i].d = loom_f32_to_f16(loom_fit_qx(32, 8, src + 32 * i, w, L));
        for (int j = 0; j < 16; j++)
            b[i].qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}

/* Weighted weight quantization of one row (quantize_row_q4_1_impl): per block (d, -min) by make_qkx3_quants
 * (nmax 15, rmin -0.9, step 0.05, 36 steps) with the weights of loom_q4_0_quantize_w. */
void loom_q4_1_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_q4_1 *b = dst;
    float sigma2 = row_sigma2(src, n), w[32];
    for (int64_t i = 0; i < n / 32; i++) {
        uint8_t L[32];
        float min;
        block_weights(src + 32 * i, qw + 32 * i, sigma2, w);
        float d = loom_fit_qkx3(32, 15, src + 32 * i, w, L, &min, -0.9f, 0.05f, 36, 0);
        b[i].d = loom_f32_to_f16(d);
        b[i].m = loom_f32_to_f16(-min);
        for (int j = 0; j < 16; j++)
            b[i].qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}

/* *s = sum over blocks of d_w * d_a * sum_j (q_j - 8) * qa_j. Order (AVX2 ggml_vec_dot_q4_0_q8_0): lane
 * l < 8 holds the exact integer sum over elements 4l..4l+3 of each block; acc[l] = fma(d_w * d_a, lane,
 * acc[l]); the 8 lanes are added as hsum_float_8. */
void loom_q4_0_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_0 *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(x[i].d) * loom_f16_to_f32(y[i].d);
        for (int l = 0; l < 8; l++) {
            int sum = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++)
                sum += (nibble(x[i].qs, k) - 8) * y[i].qs[k];
            acc[l] = fmaf(d, (float)sum, acc[l]);
        }
    }
    *s = loom_hsum8(acc);
}

/* *s = sum over blocks of d_w * d_a * sum_j q_j * qa_j + m_w * s_a. Order (AVX2 ggml_vec_dot_q4_1_q8_1):
 * lanes as Q4_0 with unsigned quants; the offset terms summs = fma(m_w, s_a, summs) in block order (the
 * reference binary contracts that product-add); *s = hsum_float_8(acc) + summs. */
void loom_q4_1_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_1 *x = w;
    const struct loom_block_q8_1 *y = a;
    float acc[8] = {0}, summs = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(x[i].d) * loom_f16_to_f32(y[i].d);
        summs = fmaf(loom_f16_to_f32(x[i].m), loom_f16_to_f32(y[i].s), summs);
        for (int l = 0; l < 8; l++) {
            int sum = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++)
                sum += nibble(x[i].qs, k) * y[i].qs[k];
            acc[l] = fmaf(d, (float)sum, acc[l]);
        }
    }
    *s = loom_hsum8(acc) + summs;
}

/* The order of the reference's repacked Q4_0 kernels (ggml-cpu/arch/x86/repack.cpp
 * ggml_gemv/gemm_q4_0_8x8_q8_0, used by default on AVX2 machines for weights with n_out % 8 == 0): per
 * block the whole exact integer sum, acc = fma(isum, d_w * d_a, acc) in one scalar accumulator; gemv and
 * gemm share it. */
void loom_q4_0_gemv(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_0 *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t isum = 0;
        for (int k = 0; k < 32; k++)
            isum += (nibble(x[i].qs, k) - 8) * y[i].qs[k];
        acc = fmaf((float)isum, loom_f16_to_f32(x[i].d) * loom_f16_to_f32(y[i].d), acc);
    }
    *s = acc;
}
