/* mxfp4.c — scalar reference kernels of MXFP4 (OCP microscaling FP4: 32 E2M1 values with one E8M0 power-of-two
 * scale; block layout in kernels/blocks.h): dequantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_mxfp4), the dot products in the float order of the reference's zen4 CPU build
 * (ggml-cpu/arch/x86/quants.c ggml_vec_dot_mxfp4_q8_0, AVX2; and the repacked arch/x86/repack.cpp
 * ggml_gemv/gemm_mxfp4_8x8_q8_0 it runs for weights in its CPU_REPACK buffer); its row validator is in
 * validate.c. Its quantizer is bytewise quantize_row_mxfp4_ref (the reference ignores an importance matrix). */
#include <math.h>
#include <stddef.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/nl4.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Half the E8M0 scale, 2^(e - 128), as an F32: e < 2 are subnormals (2^-128, 2^-127), e = 255 gives 2^127
 * (the format's NaN code; the reference, like loom, does not treat it specially). The E2M1 values in
 * loom_mxfp4_values are doubled, so value = values[index] * scale_half(e). */
float loom_e8m0_half_to_f32(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* value = (float)values[index] * 2^(e - 128). */
void loom_mxfp4_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_e8m0_half_to_f32(b[i].e);
        for (int j = 0; j < 32; j++)
            dst[32 * i + j] = (float)loom_mxfp4_values[loom_nl4_index(b[i].qs, j)] * d;
    }
}

static float mxfp4_scale(const uint8_t *block)
{
    return loom_e8m0_half_to_f32(((const struct loom_block_mxfp4 *)(const void *)block)->e);
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_mxfp4_q8_0, the same as its IQ4_NL kernel): blocks in pairs,
 * the even one into acc1 and the odd one into acc2, each lane l = fma(d_a * d_w, exact sum over elements
 * 4l..4l+3, lane); sum = hsum_float_8(acc1 + acc2); an odd last block is added as fma(d_a * d_w, block sum, sum). */
void loom_mxfp4_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_nl4_vec_dot(n / 32, loom_mxfp4_values, w, sizeof(struct loom_block_mxfp4),
                          offsetof(struct loom_block_mxfp4, qs), mxfp4_scale, a);
}

/* The order of the reference's repacked MXFP4 kernels (repack.cpp ggml_gemv/gemm_mxfp4_8x8_q8_0 through the
 * Q4_0/IQ4_NL template gemv/gemm_q4_b32_8x8_q8_0_lut_avx, weights with n_out % 8 == 0): per block the whole
 * exact integer sum, acc = fma(isum, d_w * d_a, acc). */
void loom_mxfp4_gemv(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_nl4_gemv(n / 32, loom_mxfp4_values, w, sizeof(struct loom_block_mxfp4),
                       offsetof(struct loom_block_mxfp4, qs), mxfp4_scale, a);
}

/* Index (< 16) of the doubled E2M1 value nearest x at half-scale d: the first index of least |value * d - x|,
 * as the reference's best_index_mxfp4 (the +0 index 0 wins over -0 index 8). */
static int mxfp4_nearest(float x, float d)
{
    int best = 0;
    float best_err = fabsf((float)loom_mxfp4_values[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf((float)loom_mxfp4_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

/* n floats (a multiple of 32) into MXFP4 blocks: e = floor(log2(max |x|)) - 2 + 127 (0 for an all-zero block),
 * converted to its byte as the reference's x86 build converts the float (through a 32-bit integer, keeping the
 * low byte: a block whose max is below 2^-125 wraps, as there), then each element's nearest value. */
void loom_mxfp4_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(src[j]))
                amax = fabsf(src[j]);
        uint8_t e = amax > 0.0f ? (uint8_t)(uint32_t)(int32_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        float d = loom_e8m0_half_to_f32(e);
        y[i].e = e;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(mxfp4_nearest(src[j], d) | mxfp4_nearest(src[16 + j], d) << 4);
    }
}

/* The MXFP4 x16 layout: 16 rows interleaved block by block, 16 * 17 bytes per block index i: the 16 rows'
 * E8M0 bytes (row r at r), then the quant bytes in 4 slices of 64, slice j holding bytes 4j..4j+3 of each
 * row's qs (row r at 16 + 64j + 4r). A slice's low nibbles are elements 4j..4j+3 of the 16 rows, its high
 * nibbles elements 16 + 4j.., so one 4-byte activation group multiplies 16 rows at once. */
void loom_mxfp4_x16_pack(const void *rows, size_t row_bytes, void *dst, int64_t n_in)
{
    uint8_t *out = dst;
    for (int64_t i = 0; i < n_in / 32; i++, out += 16 * sizeof(struct loom_block_mxfp4))
        for (int r = 0; r < 16; r++) {
            const struct loom_block_mxfp4 *b = (const struct loom_block_mxfp4 *)((const char *)rows + r * row_bytes) + i;
            out[r] = b->e;
            for (int j = 0; j < 4; j++)
                memcpy(out + 16 + 64 * j + 4 * r, b->qs + 4 * j, 4);
        }
}

void loom_mxfp4_x16_unpack_row(const void *group, int r, void *dst, int64_t n_in)
{
    const uint8_t *in = group;
    struct loom_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n_in / 32; i++, in += 16 * sizeof(struct loom_block_mxfp4)) {
        b[i].e = in[r];
        for (int j = 0; j < 4; j++)
            memcpy(b[i].qs + 4 * j, in + 16 + 64 * j + 4 * r, 4);
    }
}
