/* q8_1.c — scalar kernels of Q8_1, the activation type of Q4_1 and Q5_1 (block layout in
 * kernels/blocks.h): quantization bit-identical to llama.cpp's x86 CPU backend (ggml-cpu/arch/x86/
 * quants.c quantize_row_q8_1: round half to even, s from the exact quant sum) and dequantization for tests. */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Per 32 values: amax = max |x|, d = amax / 127 (stored as F16), q = round_half_even(x * (127 / amax))
 * saturated to int8 and s = F16(d * sum of the unsaturated int32 quants) — as cvtps_epi32 gives them:
 * values out of int32 range, infinite or NaN become INT_MIN (and the sum wraps). */
void loom_q8_1_from_float(const float *src, void *dst, int64_t n)
{
    struct loom_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
        uint32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            float v = __builtin_rintf(x[j] * id);
            int32_t q = v >= -2147483648.f && v < 2147483648.f ? (int32_t)v : INT32_MIN;
            sum += (uint32_t)q;
            b[i].qs[j] = (int8_t)(q > 127 ? 127 : q < -128 ? -128 : q);
        }
        b[i].d = loom_f32_to_f16(d);
        b[i].s = loom_f32_to_f16(d * (float)(int32_t)sum);
    }
}

/* value = d * q (s is derived data and not needed to dequantize). */
void loom_q8_1_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++)
            dst[32 * i + j] = (float)b[i].qs[j] * d;
    }
}
