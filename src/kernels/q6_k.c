/* q6_k.c — scalar reference kernels of Q6_K (block layout in kernels/blocks.h): dequantization
 * bit-identical to llama.cpp's dequantize_row_q6_K and the Q6_K x Q8_K dot product summed in the lane
 * order of ggml-cpu's AVX2 kernel (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q6_K_q8_K). */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
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

/* ggml-quants.c make_qx_quants with rmse_type 1 (weights x^2) and no importance matrix, for n = 16
 * weights and nmax = 32: symmetric quants l in [-32, 31] around the signed extreme, then 18 nearby
 * scales -(32 + 0.1 is) / max (is = -9..9, not 0), keeping the one with the best weighted least-squares
 * fit. L[n] gets l + 32; returns the fitted scale (0 for an all-zero group). The reference's float order. */
static float q6_fit_group(int n, const float *x, int8_t *L)
{
    const int nmax = 32;
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)-nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = loom_nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0)
            continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = loom_nearest_int(iscale * x[i]);
            l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = loom_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + (l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

static void q6_quantize_block(const float *x, const float *qw, struct loom_block_q6_k *b);

/* Weight quantization, ggml-quants.c quantize_row_q6_K_ref: a scale per 16-weight group (q6_fit_group),
 * the group scales quantized to int8 against d = max_scale / -128 (the signed scale of largest
 * magnitude), the weights requantized against the rounded scales and packed as the Q6_K layout in
 * kernels/blocks.h. A block whose scales are all below 1e-15 is all zero. */
void loom_q6_k_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q6_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        q6_quantize_block(src + i * LOOM_QK_K, NULL, &b[i]);
}

/* Weighted weight quantization of one row (ggml-quants.c quantize_row_q6_K_impl with an importance matrix):
 * as loom_q6_k_quantize, but each group's scale is make_qx_quants' fit with the importance weights qw
 * themselves (not scaled by the values, unlike the other K-quants). */
void loom_q6_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_q6_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        q6_quantize_block(src + i * LOOM_QK_K, qw + i * LOOM_QK_K, &b[i]);
}

/* One super-block of 256 at x into *b; qw NULL: the reference path (weights x^2). */
static void q6_quantize_block(const float *x, const float *qw, struct loom_block_q6_k *b)
{
    int8_t L[LOOM_QK_K];
    float scales[16], max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; g++) {
        scales[g] = qw ? loom_fit_qx(16, 32, x + 16 * g, qw + 16 * g, L + 16 * g)
                       : q6_fit_group(16, x + 16 * g, L + 16 * g);
        if (fabsf(scales[g]) > max_abs_scale) {
            max_abs_scale = fabsf(scales[g]);
            max_scale = scales[g];
        }
    }
    memset(b, 0, sizeof *b);
    if (max_abs_scale < 1e-15f)
        return;
    float iscale = -128.f / max_scale;
    b->d = loom_f32_to_f16(1 / iscale);
    for (int g = 0; g < 16; g++) {
        int s = loom_nearest_int(iscale * scales[g]);
        b->scales[g] = (int8_t)(uint8_t)(s < 127 ? s : 127);
    }
    for (int g = 0; g < 16; g++) {
        float d = loom_f16_to_f32(b->d) * (float)b->scales[g];
        if (d == 0.0f)
            continue;
        for (int l = 0; l < 16; l++) {
            int q = loom_nearest_int(x[16 * g + l] / d);
            L[16 * g + l] = (int8_t)(32 + (q < -32 ? -32 : q > 31 ? 31 : q));
        }
    }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *q = L + 128 * h + l;
            b->ql[64 * h + l] = (uint8_t)((q[0] & 15) | (q[64] & 15) << 4);
            b->ql[64 * h + 32 + l] = (uint8_t)((q[32] & 15) | (q[96] & 15) << 4);
            b->qh[32 * h + l] = (uint8_t)(q[0] >> 4 | (q[32] >> 4) << 2 | (q[64] >> 4) << 4 | (q[96] >> 4) << 6);
        }
}
