/* q5_k.c — scalar reference kernels of Q5_K (block layout in kernels/blocks.h): dequantization
 * bit-identical to llama.cpp's dequantize_row_q5_K and the Q5_K x Q8_K dot product summed in the lane
 * order of ggml-cpu's AVX2 kernel (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q5_K_q8_K). */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* 5-bit quant of element l (< 32) of sub-block j. */
static inline int q5_at(const struct loom_block_q5_k *b, int j, int l)
{
    int lo = (b->qs[32 * (j / 2) + l] >> (4 * (j & 1))) & 15;
    return lo | (((b->qh[l] >> j) & 1) << 4);
}

/* value = (d*sc) * q - (dmin*m), products rounded separately (no FMA), as the reference. */
void loom_q5_k_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q5_k *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t sc[8], m[8];
        loom_k4_scales(b[i].scales, sc, m);
        float d = loom_f16_to_f32(b[i].d), dmin = loom_f16_to_f32(b[i].dmin);
        for (int j = 0; j < 8; j++) {
            float dj = d * sc[j], mj = dmin * m[j];
            for (int l = 0; l < 32; l++)
                dst[i * LOOM_QK_K + 32 * j + l] = dj * (float)q5_at(&b[i], j, l) - mj;
        }
    }
}

/* *s = sum_i W[i] * A[i] for one Q5_K row against a Q8_K row. Integer lanes as Q4_K (lane l sums
 * elements 4l..4l+3 of every sub-block, times the sub-block scale). Float order (reference AVX2 kernel):
 * acc[l] = fma(d_a * d, lane[l], acc[l]) per block; the mins go to one scalar,
 * summs = fma(-d_a * dmin, sum_j m[j] * (bsums[2j] + bsums[2j+1]), summs) (the reference's
 * `summs += dmin * isum` compiled with FMA contraction); *s = hsum_float_8(acc) + summs. */
void loom_q5_k_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q5_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0}, summs = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t sc[8], m[8];
        loom_k4_scales(x[i].scales, sc, m);
        int32_t lane[8] = {0}, mins = 0;
        for (int j = 0; j < 8; j++) {
            const int8_t *q8 = y[i].qs + 32 * j;
            for (int l = 0; l < 8; l++) {
                int32_t sum = 0;
                for (int k = 4 * l; k < 4 * l + 4; k++)
                    sum += q5_at(&x[i], j, k) * q8[k];
                lane[l] += sc[j] * sum;
            }
            mins += m[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        float d = y[i].d * loom_f16_to_f32(x[i].d);
        float dmin = -y[i].d * loom_f16_to_f32(x[i].dmin);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
        summs = fmaf(dmin, (float)mins, summs);
    }
    *s = loom_hsum8(acc) + summs;
}

/* One row of Q5_K blocks: each super-block fitted by loom_k4_quantize_superblock_w (nmax 31, the 6-bit scales
 * clamped to 63) when qw is given, else by loom_k4_quantize_superblock (nmax 31, rmin -0.5, 15 steps); the low 4
 * bits of sub-blocks 2g, 2g+1 then go to the nibbles of qs[32g..] and the fifth bit of element l of sub-block j
 * to bit j of qh[l]. */
static void quantize_row(const float *src, struct loom_block_q5_k *b, int64_t n, const float *qw)
{
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t L[LOOM_QK_K];
        const float *x = src + i * LOOM_QK_K;
        if (qw)
            loom_k4_quantize_superblock_w(x, qw + i * LOOM_QK_K, 31, 1, L, b[i].scales, &b[i].d, &b[i].dmin);
        else
            loom_k4_quantize_superblock(x, 31, -0.5f, 15, L, b[i].scales, &b[i].d, &b[i].dmin);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++) {
                int lo = L[64 * g + l], hi = L[64 * g + 32 + l];
                b[i].qh[l] |= (uint8_t)((lo >> 4) << (2 * g) | (hi >> 4) << (2 * g + 1));
                b[i].qs[32 * g + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            }
    }
}

/* Weight quantization, ggml-quants.c quantize_row_q5_K_ref. */
void loom_q5_k_quantize(const float *src, void *dst, int64_t n) { quantize_row(src, dst, n, NULL); }

/* Weighted weight quantization of one row (ggml-quants.c quantize_row_q5_K_impl with an importance matrix). */
void loom_q5_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw) { quantize_row(src, dst, n, qw); }
