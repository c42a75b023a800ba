/* tq.c — scalar reference kernels of the ternary types TQ1_0 and TQ2_0 (block layouts in kernels/blocks.h):
 * dequantization bit-identical to llama.cpp's ggml-quants.c (dequantize_row_tq1_0/tq2_0) and the dot products in
 * the float order of the reference's zen4 CPU build (ggml-cpu/arch/x86/quants.c ggml_vec_dot_tq1_0_q8_K /
 * ggml_vec_dot_tq2_0_q8_K, AVX2; GCC contracts their multiply-add into FMA). No batched path of the reference
 * handles these types, so vec_dot is their only order. */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* TQ1_0 base-3 digit of q = byte * 3^n (mod 256), as the reference's dequantization extracts it: (3 q) >> 8.
 * Its AVX2 dot extracts it by halving adds (a = max(q - 1, 0), ((a + ((a + 1) >> 1) + 1) >> 1) >> 6), which
 * gives the same digit for all 256 values of q (checked exhaustively), so one function serves both. */
static inline int tq1_digit(uint8_t q) { return (q * 3) >> 8; }

/* The 256 unsigned digits (0..2, value = digit - 1) of a TQ1_0 block in element order: elements 32 n + m
 * (n < 5, m < 32) from qs[m] * 3^n, 160 + 16 n + m (n < 5, m < 16) from qs[32 + m] * 3^n, 240 + 4 n + j
 * (n < 4, j < 4) from qh[j] * 3^n. */
static void tq1_digits(const struct loom_block_tq1_0 *b, uint8_t t[256])
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    int e = 0;
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) {
            uint8_t q = (uint8_t)(b->qs[m] * pow3[n]);
            t[e++] = (uint8_t)tq1_digit(q);
        }
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) {
            uint8_t q = (uint8_t)(b->qs[32 + m] * pow3[n]);
            t[e++] = (uint8_t)tq1_digit(q);
        }
    for (int n = 0; n < 4; n++)
        for (int j = 0; j < 4; j++) {
            uint8_t q = (uint8_t)(b->qh[j] * pow3[n]);
            t[e++] = (uint8_t)tq1_digit(q);
        }
}

/* The 256 unsigned 2-bit quants (value = q - 1) of a TQ2_0 block in element order: element 128 h + 32 l + m
 * (h < 2, l < 4, m < 32) is bits 2 l, 2 l + 1 of qs[32 h + m]. */
static void tq2_digits(const struct loom_block_tq2_0 *b, uint8_t t[256])
{
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++)
                t[128 * h + 32 * l + m] = (uint8_t)((b->qs[32 * h + m] >> (2 * l)) & 3);
}

/* value = (float)(digit - 1) * d. */
void loom_tq1_0_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_tq1_0 *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t t[256];
        tq1_digits(&b[i], t);
        float d = loom_f16_to_f32(b[i].d);
        for (int e = 0; e < 256; e++)
            dst[LOOM_QK_K * i + e] = (float)(t[e] - 1) * d;
    }
}

void loom_tq2_0_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_tq2_0 *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t t[256];
        tq2_digits(&b[i], t);
        float d = loom_f16_to_f32(b[i].d);
        for (int e = 0; e < 256; e++)
            dst[LOOM_QK_K * i + e] = (float)(t[e] - 1) * d;
    }
}

/* One block's 8 lanes: lane k = exact sum over the eight 32-element chunks c of digit * q over elements
 * 32 c + 4 k .. 32 c + 4 k + 3, minus bsums[2 k] and bsums[2 k + 1] (which turn digit into digit - 1). The
 * reference adds in 16 bits, which for digits <= 3 and quants in [-127, 127] never wraps (|lane half| < 2^13). */
static void ternary_lanes(const uint8_t t[256], const struct loom_block_q8_k *y, int32_t lane[8])
{
    for (int k = 0; k < 8; k++) {
        int32_t sum = -(y->bsums[2 * k] + y->bsums[2 * k + 1]);
        for (int c = 0; c < 8; c++)
            for (int e = 32 * c + 4 * k; e < 32 * c + 4 * k + 4; e++)
                sum += t[e] * y->qs[e];
        lane[k] = sum;
    }
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_tq1_0_q8_K / tq2_0): per block the 8 lanes above, d = d_a *
 * d_w, acc[k] = fma(lane, d, acc[k]); *s = hsum_float_8(acc). */
static void ternary_dot(const uint8_t t[256], const struct loom_block_q8_k *y, uint16_t dw, float acc[8])
{
    int32_t lane[8];
    ternary_lanes(t, y, lane);
    float d = y->d * loom_f16_to_f32(dw);
    for (int k = 0; k < 8; k++)
        acc[k] = fmaf((float)lane[k], d, acc[k]);
}

void loom_tq1_0_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_tq1_0 *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t t[256];
        tq1_digits(&x[i], t);
        ternary_dot(t, &y[i], x[i].d, acc);
    }
    *s = loom_hsum8(acc);
}

void loom_tq2_0_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_tq2_0 *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t t[256];
        tq2_digits(&x[i], t);
        ternary_dot(t, &y[i], x[i].d, acc);
    }
    *s = loom_hsum8(acc);
}
