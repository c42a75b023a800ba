/* q8_0.c — scalar reference kernels of Q8_0 (block layout in kernels/blocks.h): dequantization, the
 * activation quantizer (as llama.cpp's x86 CPU backend rounds, not as its portable reference does) and
 * the Q8_0 x Q8_0 block dot product summed in the reference's AVX2 lane order. */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* dst[n] = d * q per element (ggml-quants.c dequantize_row_q8_0: one F32 product per element). */
void loom_q8_0_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / LOOM_QK8_0; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int j = 0; j < LOOM_QK8_0; j++)
            dst[i * LOOM_QK8_0 + j] = (float)b[i].qs[j] * d;
    }
}

/* Quantize n floats (n % 32 == 0) to Q8_0 exactly as ggml-cpu/arch/x86/quants.c quantize_row_q8_0:
 * amax = max |x|, d = amax / 127 stored as F16, and q = round_half_even(x * (127 / amax)) saturated to
 * int8 (the portable reference instead multiplies by 1/d and rounds half away from zero). */
void loom_q8_0_from_float(const float *src, void *dst, int64_t n)
{
    struct loom_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK8_0; i++) {
        const float *x = src + i * LOOM_QK8_0;
        float amax = 0;
        for (int j = 0; j < LOOM_QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        b[i].d = loom_f32_to_f16(amax / 127.f);
        float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < LOOM_QK8_0; j++) {
            /* as cvtps_epi32 + saturating packs: out of int32 range, infinite or NaN -> INT_MIN -> -128 */
            float v = __builtin_rintf(x[j] * id);
            int q = v >= -2147483648.f && v < 2147483648.f ? (v > 127.f ? 127 : v < -128.f ? -128 : (int)v) : -128;
            b[i].qs[j] = (int8_t)q;
        }
    }
}

/* *s = sum over blocks of d_w * d_a * sum_j qw[j] * qa[j]. Order (ggml_vec_dot_q8_0_q8_0, AVX2): lane
 * l < 8 holds the exact integer sum of elements 4l..4l+3 of each block; per block, lane acc[l] =
 * fma(d_w * d_a, lane sum, acc[l]); finally the 8 lanes are added as hsum_float_8. */
void loom_q8_0_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q8_0 *x = w, *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK8_0; i++) {
        float d = loom_f16_to_f32(x[i].d) * loom_f16_to_f32(y[i].d);
        for (int l = 0; l < 8; l++) {
            int sum = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++)
                sum += x[i].qs[k] * y[i].qs[k];
            acc[l] = fmaf(d, (float)sum, acc[l]);
        }
    }
    *s = loom_hsum8(acc);
}

/* Weight quantization, ggml-quants.c quantize_row_q8_0_ref (what llama_model_quantize writes): amax =
 * max |x| by the reference's MAX (a > b ? a : b, NaN included), d = amax / 127 stored as F16, and q =
 * roundf(x * (1/d)) (half away from zero) with 1/d from the unrounded F32 d. */
void loom_q8_0_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK8_0; i++) {
        const float *x = src + i * LOOM_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < LOOM_QK8_0; j++)
            amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        float d = amax / 127.f, id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = loom_f32_to_f16(d);
        for (int j = 0; j < LOOM_QK8_0; j++)
            b[i].qs[j] = (int8_t)loom_trunc_i8(roundf(x[j] * id));
    }
}
