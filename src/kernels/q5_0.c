/* q5_0.c — scalar reference kernels of the legacy 5-bit family, Q5_0 and Q5_1 (block layouts in
 * kernels/blocks.h): dequantization and weight quantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_q5_0/1, quantize_row_q5_0/1_ref), and the dot products with Q8_0/Q8_1 activations in
 * the float order of the reference's AVX2 kernels (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q5_0_q8_0,
 * ggml_vec_dot_q5_1_q8_1). */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Quant j (< 32) in [0, 31]: the Q4_0-style nibble plus 16 * bit j of qh. */
static inline int quant5(const uint8_t qs[16], const uint8_t qh[4], int j)
{
    int low = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    return low | ((qh[j / 8] >> (j % 8)) & 1) << 4;
}

/* Pack 32 quants in [0, 31] into qs and qh. */
static void pack5(const int q[32], uint8_t qs[16], uint8_t qh[4])
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | (q[16 + j] & 15) << 4);
        h |= (uint32_t)((q[j] >> 4) & 1) << j | (uint32_t)((q[16 + j] >> 4) & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++)
        qh[k] = (uint8_t)(h >> (8 * k));
}

/* value = (q - 16) * d. */
void loom_q5_0_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++)
            dst[32 * i + j] = (float)(quant5(b[i].qs, b[i].qh, j) - 16) * d;
    }
}

/* value = q * d + m, the product rounded before the add. */
void loom_q5_1_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(b[i].d), m = loom_f16_to_f32(b[i].m);
        for (int j = 0; j < 32; j++) {
            float p = (float)quant5(b[i].qs, b[i].qh, j) * d;
            dst[32 * i + j] = p + m;
        }
    }
}

/* Weight quantization (quantize_row_q5_0_ref): max = the value of largest magnitude (first on ties),
 * d = max / -16, q = min(31, trunc(x / d + 16.5)). */
void loom_q5_0_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        float max = loom_signed_absmax(x, 32);
        float d = max / -16, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = loom_f32_to_f16(d);
        int q[32];
        for (int j = 0; j < 32; j++) {
            int v = loom_trunc_i8(x[j] * id + 16.5f);
            q[j] = (v < 31 ? v : 31) & 0xff;
        }
        pack5(q, b[i].qs, b[i].qh);
    }
}

/* Weight quantization (quantize_row_q5_1_ref): d = (max - min) / 31, m = min,
 * q = trunc((x - min) / d + 0.5). */
void loom_q5_1_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        float min, max;
        loom_min_max(x, 32, &min, &max);
        float d = (max - min) / 31, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = loom_f32_to_f16(d);
        b[i].m = loom_f32_to_f16(min);
        int q[32];
        for (int j = 0; j < 32; j++)
            q[j] = loom_trunc_i8((x[j] - min) * id + 0.5f) & 0xff;
        pack5(q, b[i].qs, b[i].qh);
    }
}

/* Order as Q4_0 (q4_0.c): per-lane exact integer sums of 4 elements, acc[l] = fma(d_w * d_a, lane,
 * acc[l]), hsum_float_8 (AVX2 ggml_vec_dot_q5_0_q8_0). */
void loom_q5_0_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q5_0 *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(x[i].d) * loom_f16_to_f32(y[i].d);
        for (int l = 0; l < 8; l++) {
            int sum = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++)
                sum += (quant5(x[i].qs, x[i].qh, k) - 16) * y[i].qs[k];
            acc[l] = fmaf(d, (float)sum, acc[l]);
        }
    }
    *s = loom_hsum8(acc);
}

/* Order as Q4_1 (q4_1 in q4_0.c): acc lanes plus summs = fma(m_w, s_a, summs); *s = hsum(acc) + summs
 * (AVX2 ggml_vec_dot_q5_1_q8_1). */
void loom_q5_1_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q5_1 *x = w;
    const struct loom_block_q8_1 *y = a;
    float acc[8] = {0}, summs = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(x[i].d) * loom_f16_to_f32(y[i].d);
        summs = fmaf(loom_f16_to_f32(x[i].m), loom_f16_to_f32(y[i].s), summs);
        for (int l = 0; l < 8; l++) {
            int sum = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++)
                sum += quant5(x[i].qs, x[i].qh, k) * y[i].qs[k];
            acc[l] = fmaf(d, (float)sum, acc[l]);
        }
    }
    *s = loom_hsum8(acc) + summs;
}
