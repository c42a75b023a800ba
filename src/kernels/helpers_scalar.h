/* helpers_scalar.h — the scalar helpers the kernel files share: the weight quantizers' rounding and search
 * helpers (ggml-quants.c semantics), the reductions that fix loom's float summation order, and the K-quant
 * scale unpacking. All static inline: each use compiles to what the repeated code was. */
#ifndef LOOM_KERNELS_HELPERS_SCALAR_H
#define LOOM_KERNELS_HELPERS_SCALAR_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Weight-quantizer helpers (semantics of llama.cpp ggml-quants.c, which the reference path must
 * reproduce byte for byte). Round to nearest, ties to even, by the 1.5 * 2^23 trick the reference uses
 * (nearest_int): exact for |x| < 2^22; larger or non-finite inputs give the same wrapped bits as there. */
static inline int loom_nearest_int(float x)
{
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* (int8_t)x as x86 compiles it (cvttss2si, then the low byte): truncation toward zero; NaN and values
 * outside int32 give 0x80000000, whose low byte is 0. */
static inline int loom_trunc_i8(float x)
{
    int32_t i = x > -2147483649.f && x < 2147483648.f ? (int32_t)x : INT32_MIN;
    return (int8_t)(uint8_t)(uint32_t)i;
}

/* The element of x[n] of largest magnitude, with its sign; the first one on ties, 0 if all are 0 (the
 * `max` of ggml-quants.c quantize_row_q4_0_ref / q5_0_ref). */
static inline float loom_signed_absmax(const float *x, int n)
{
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

/* *min and *max of x[n], from FLT_MAX and -FLT_MAX (quantize_row_q4_1_ref / q5_1_ref). */
static inline void loom_min_max(const float *x, int n, float *min, float *max)
{
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min)
            *min = x[j];
        if (x[j] > *max)
            *max = x[j];
    }
}

/* Reduction helpers. loom sums exactly as ggml-cpu's x86 kernels do (llama.cpp ggml-cpu/arch/x86/quants.c
 * hsum_float_8 and the _mm512_reduce_add_ps tree), so that the last bits agree with the reference. */
static inline float loom_hsum8(const float a[8])
{
    float r0 = a[0] + a[4], r1 = a[1] + a[5], r2 = a[2] + a[6], r3 = a[3] + a[7];
    return (r0 + r2) + (r1 + r3);
}

static inline float loom_hsum16(const float a[16])
{
    float h[8];
    for (int i = 0; i < 8; i++)
        h[i] = a[i] + a[i + 8];
    return loom_hsum8(h);
}

/* sum + the t-element F32 dot tail that follows the 64-element main loop, in the order of the reference
 * binary (GCC vectorized ggml_vec_dot_f32's leftover loop for Zen4): while 16 or more remain, and then
 * once if 8 or more remain, each product is rounded and added in order; the last < 8 use FMA. */
static inline float loom_f32_dot_tail(const float *x, const float *y, int64_t t, float sum)
{
    int64_t unfused = (t & ~(int64_t)15) + ((t & 15) >= 8 ? 8 : 0), i = 0;
    for (; i < unfused; i++) {
        float p = x[i] * y[i];
        sum += p;
    }
    for (; i < t; i++)
        sum = fmaf(x[i], y[i], sum);
    return sum;
}

/* Unpack the 8 six-bit scales and mins of a Q4_K/Q5_K block. */
static inline void loom_k4_scales(const uint8_t packed[12], uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = packed[j] & 63;
        m[j] = packed[j + 4] & 63;
        sc[j + 4] = (uint8_t)((packed[j + 8] & 15) | ((packed[j] >> 6) << 4));
        m[j + 4] = (uint8_t)((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
    }
}

#endif
