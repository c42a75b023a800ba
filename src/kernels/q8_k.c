/* q8_k.c — scalar kernels of Q8_K, the activation type of the K-quants (block layout in
 * kernels/blocks.h): quantization bit-identical to llama.cpp's (ggml-quants.c quantize_row_q8_K_ref,
 * which its x86 CPU backend uses as from_float) and dequantization for tests. */
#include <math.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"

/* Per 256-value block: m = the value of largest magnitude (the first one on ties), iscale = -127 / m,
 * q = min(127, round_half_even(iscale * x)), bsums over groups of 16, d = 1 / iscale. An all-zero block
 * gets d = 0 and zero quants (and zero bsums).
 * Finite products are within [-127.0001, 127.0001], so rint and the int8 store cannot overflow. */
void loom_q8_k_from_float(const float *src, void *dst, int64_t n)
{
    struct loom_block_q8_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const float *x = src + i * LOOM_QK_K;
        float amax = 0, max = 0;
        for (int j = 0; j < LOOM_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        memset(b[i].bsums, 0, sizeof b[i].bsums);
        if (amax == 0) {
            b[i].d = 0;
            memset(b[i].qs, 0, sizeof b[i].qs);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < LOOM_QK_K; j++) {
            /* non-finite products (iscale overflows for subnormal maxima) give 0, as the reference's
             * nearest_int bit trick does */
            float v = __builtin_rintf(iscale * x[j]);
            b[i].qs[j] = (int8_t)(fabsf(v) < INFINITY ? (v < 127.f ? (int)v : 127) : 0);
            b[i].bsums[j / 16] = (int16_t)(b[i].bsums[j / 16] + b[i].qs[j]);
        }
        b[i].d = 1 / iscale;
    }
}

void loom_q8_k_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q8_k *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        for (int j = 0; j < LOOM_QK_K; j++)
            dst[i * LOOM_QK_K + j] = b[i].d * (float)b[i].qs[j];
}
