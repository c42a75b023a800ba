/* nl4.h — what the two 4-bit lookup-table types of 32-element blocks share (IQ4_NL: an F16 scale and the IQ4
 * table; MXFP4: an E8M0 scale and the doubled E2M1 table; both 16 bytes of indices laid out as Q4_0's): an
 * element's index, exact integer sums against Q8_0 quants, and the dot order of the reference's AVX2 kernels for
 * both (ggml-cpu/arch/x86/quants.c ggml_vec_dot_iq4_nl_q8_0 and ggml_vec_dot_mxfp4_q8_0). */
#ifndef LOOM_KERNELS_NL4_H
#define LOOM_KERNELS_NL4_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "util/fp16.h"

/* Table index (< 16) of element j (< 32): low nibbles are elements 0..15, high nibbles 16..31. */
static inline int loom_nl4_index(const uint8_t qs[16], int j)
{
    return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}

/* Exact integer sum over elements 4l..4l+3 of one block: table values times quants. */
static inline int32_t loom_nl4_lane_sum(const int8_t values[16], const uint8_t qs[16], const int8_t *q8, int l)
{
    int32_t sum = 0;
    for (int k = 4 * l; k < 4 * l + 4; k++)
        sum += values[loom_nl4_index(qs, k)] * q8[k];
    return sum;
}

/* The whole block's exact integer sum, as its 8 lanes. */
static inline int32_t loom_nl4_block_sum(const int8_t values[16], const uint8_t qs[16], const int8_t *q8)
{
    int32_t sum = 0;
    for (int l = 0; l < 8; l++)
        sum += loom_nl4_lane_sum(values, qs, q8, l);
    return sum;
}

/* sum over nb blocks of d_a * d_w * block dot, in the AVX2 order: blocks in pairs, the even one into acc1 and the
 * odd one into acc2, each lane l = fma(d_a * d_w, exact sum over elements 4l..4l+3, lane); sum =
 * hsum_float_8(acc1 + acc2); an odd last block is added as fma(d_a * d_w, block sum, sum). Weight block i is
 * stride bytes after block i - 1, its indices at qs; scale(block) is its d_w. */
static inline float loom_nl4_vec_dot(int64_t nb, const int8_t values[16], const uint8_t *w, size_t stride,
                                     size_t qs, float (*scale)(const uint8_t *block),
                                     const struct loom_block_q8_0 *y)
{
    int64_t i = 0;
    float acc1[8] = {0}, acc2[8] = {0};
    for (; i + 1 < nb; i += 2) {
        const uint8_t *x1 = w + (size_t)i * stride, *x2 = x1 + stride;
        float d1 = loom_f16_to_f32(y[i].d) * scale(x1), d2 = loom_f16_to_f32(y[i + 1].d) * scale(x2);
        for (int l = 0; l < 8; l++) {
            acc1[l] = fmaf(d1, (float)loom_nl4_lane_sum(values, x1 + qs, y[i].qs, l), acc1[l]);
            acc2[l] = fmaf(d2, (float)loom_nl4_lane_sum(values, x2 + qs, y[i + 1].qs, l), acc2[l]);
        }
    }
    for (int l = 0; l < 8; l++)
        acc1[l] += acc2[l];
    float sum = loom_hsum8(acc1);
    if (i < nb) {
        const uint8_t *x = w + (size_t)i * stride;
        sum = fmaf(loom_f16_to_f32(y[i].d) * scale(x), (float)loom_nl4_block_sum(values, x + qs, y[i].qs), sum);
    }
    return sum;
}

/* The order of the reference's repacked kernels for both (repack.cpp ggml_gemv/gemm_iq4_nl_8x8_q8_0 and
 * _mxfp4_8x8_q8_0, AVX2, n_out % 8 == 0): per block the whole exact integer sum, acc = fma(isum, d_w * d_a, acc). */
static inline float loom_nl4_gemv(int64_t nb, const int8_t values[16], const uint8_t *w, size_t stride, size_t qs,
                                  float (*scale)(const uint8_t *block), const struct loom_block_q8_0 *y)
{
    float acc = 0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *x = w + (size_t)i * stride;
        acc = fmaf((float)loom_nl4_block_sum(values, x + qs, y[i].qs), scale(x) * loom_f16_to_f32(y[i].d), acc);
    }
    return acc;
}

#endif
