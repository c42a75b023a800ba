/* tq.c — scalar reference kernels of the ternary types TQ1_0 and TQ2_0 (block layouts in kernels/blocks.h):
 * dequantization bit-identical to llama.cpp's ggml-quants.c (dequantize_row_tq1_0/tq2_0) and the dot products in
 * the float order of the reference's zen4 CPU build (ggml-cpu/arch/x86/quants.c ggml_vec_dot_tq1_0_q8_K /
 * ggml_vec_dot_tq2_0_q8_K, AVX2; GCC contracts their multiply-add into FMA). No batched path of the reference
 * handles these types, so vec_dot is their only order. The quantizers (no importance matrix: the reference
 * ignores one) are bytewise quantize_row_tq1_0_ref / quantize_row_tq2_0_ref. */
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

/* The block's scale: the largest |x| (as the reference's running MAX, which keeps the old value on ties and
 * NaN), stored as F16; *id = 1/d (0 for an all-zero block). */
static uint16_t ternary_scale(const float *x, float *id)
{
    float amax = 0.0f;
    for (int j = 0; j < LOOM_QK_K; j++) {
        float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    *id = amax != 0.0f ? 1.0f / amax : 0.0f;
    return loom_f32_to_f16(amax);
}

/* Unsigned digit (0, 1, 2) of x: round(x / d) + 1. */
static inline int ternary_digit(float x, float id) { return (int)lroundf(x * id) + 1; }

/* Base-3 number of `count` digits (first most significant) at x[0], x[stride], ..., mapped onto a byte so
 * that the dequantizer's (3 * (byte * 3^n mod 256)) >> 8 recovers digit n: ceil(v * 256 / 243) after the
 * value is shifted up to 5 digits (shift 3^(5 - count)). uint8_t arithmetic as the reference's. */
static uint8_t tq1_pack(const float *x, int stride, int count, float id)
{
    uint8_t q = 0;
    for (int n = 0; n < count; n++)
        q = (uint8_t)(q * 3 + ternary_digit(x[n * stride], id));
    for (int n = count; n < 5; n++)
        q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t)q * 256 + 242) / 243);
}

/* n floats (a multiple of 256) into TQ1_0 blocks: d = max |x|, digit round(x / d) + 1, packed as in blocks.h. */
void loom_tq1_0_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_tq1_0 *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++, src += LOOM_QK_K) {
        float id;
        y[i].d = ternary_scale(src, &id);
        for (int m = 0; m < 32; m++)
            y[i].qs[m] = tq1_pack(src + m, 32, 5, id);
        for (int m = 0; m < 16; m++)
            y[i].qs[32 + m] = tq1_pack(src + 160 + m, 16, 5, id);
        for (int j = 0; j < 4; j++)
            y[i].qh[j] = tq1_pack(src + 240 + j, 4, 4, id);
    }
}

/* n floats (a multiple of 256) into TQ2_0 blocks: d = max |x|, 2-bit t = round(x / d) + 1, packed as in blocks.h
 * (the reference masks t with 3). */
void loom_tq2_0_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_tq2_0 *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++, src += LOOM_QK_K) {
        float id;
        y[i].d = ternary_scale(src, &id);
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 32; m++) {
                unsigned q = 0;
                for (int l = 0; l < 4; l++)
                    q += (unsigned)(ternary_digit(src[128 * h + 32 * l + m], id) & 3) << (2 * l);
                y[i].qs[32 * h + m] = (uint8_t)q;
            }
    }
}
