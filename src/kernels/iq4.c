/* iq4.c — scalar reference kernels of the non-linear 4-bit family, IQ4_NL and IQ4_XS (block layouts in
 * kernels/blocks.h): dequantization and weight quantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_iq4_nl/xs; quantize_iq4_nl/xs without an importance matrix, which is what
 * ggml_quantize_chunk and llama_model_quantize run), and the dot products in the float order of the
 * reference's AVX2 kernels (ggml-cpu/arch/x86/quants.c ggml_vec_dot_iq4_nl_q8_0, ggml_vec_dot_iq4_xs_q8_K). */
#include <math.h>
#include <stddef.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/nl4.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* value = d * grid[index]. */
void loom_iq4_nl_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++)
            dst[32 * i + j] = d * (float)loom_iq4nl_values[loom_nl4_index(b[i].qs, j)];
    }
}

/* Sub-block s's 6-bit scale ls (value scale is ls - 32). */
static inline int scale_xs(const struct loom_block_iq4_xs *b, int s)
{
    return ((b->scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((b->scales_h >> (2 * s)) & 3) << 4;
}

/* value = (d * (ls - 32)) * grid[index]. */
void loom_iq4_xs_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++) {
            float dl = d * (float)(scale_xs(&b[i], s) - 32);
            for (int j = 0; j < 32; j++)
                dst[LOOM_QK_K * i + 32 * s + j] = dl * (float)loom_iq4nl_values[loom_nl4_index(b[i].qs + 16 * s, j)];
        }
    }
}

/* Index of the grid value nearest to v (the lower one on ties; ends clamp), as best_index_int8. */
static int nearest_grid(float v)
{
    const int8_t *g = loom_iq4nl_values;
    if (v <= g[0])
        return 0;
    if (v >= g[15])
        return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < g[mid])
            hi = mid;
        else
            lo = mid;
    }
    return v - g[hi - 1] < g[hi] - v ? hi - 1 : hi;
}

/* Best scale of one sub-block of 32 (weights w, or x^2 when w is NULL): start from d = max / 127 (sign so that the extreme
 * value maps to grid[0] = -127), refit by least squares, and try the 15 scales (k - 127) / max for
 * k in [-7, 7], keeping the best sum(w q x)^2 / sum(w q q). L gets the indices of the first fit; returns
 * 0 for an all-zero sub-block (L untouched). Float operations in the reference's order
 * (ggml-quants.c quantize_row_iq4_nl_impl with ntry = 7 and no importance weights). */
static float fit_sub_block(const float *x, const float *w, uint8_t *L)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < 1e-15f) /* GROUP_MAX_EPS */
        return 0;
    float d = -max / (float)loom_iq4nl_values[0], id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        int l = nearest_grid(id * x[j]);
        L[j] = (uint8_t)l;
        float q = (float)loom_iq4nl_values[l], wj = w ? w[j] : x[j] * x[j];
        sumqx += wj * q * x[j];
        sumq2 += wj * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; itry++) {
        id = (float)(itry + loom_iq4nl_values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float q = (float)loom_iq4nl_values[nearest_grid(id * x[j])], wj = w ? w[j] : x[j] * x[j];
            sumqx += wj * q * x[j];
            sumq2 += wj * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* Pack 32 grid indices into Q4_0-style nibbles. */
static void pack_indices(const uint8_t L[32], uint8_t qs[16])
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(L[j] | L[16 + j] << 4);
}

/* Weight quantization (quantize_iq4_nl without imatrix): d = the fitted scale (stored as F16), and the
 * indices requantized against the unrounded scale. */
void loom_iq4_nl_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_iq4_nl *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        uint8_t L[32];
        float d = fit_sub_block(x, NULL, L);
        b[i].d = loom_f32_to_f16(d);
        float id = d != 0 ? 1 / d : 0;
        for (int j = 0; j < 32; j++)
            L[j] = (uint8_t)nearest_grid(id * x[j]);
        pack_indices(L, b[i].qs);
    }
}

/* Weight quantization (quantize_iq4_xs without imatrix): fit the 8 sub-block scales, quantize them to
 * 6 bits against the one of largest magnitude (d = max_scale / -32, stored as F16), and requantize each
 * sub-block's indices against d * (ls - 32) computed from the unrounded d. */
static void iq4_xs_block(const float *x, const float *w, struct loom_block_iq4_xs *b);

void loom_iq4_xs_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_iq4_xs *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq4_xs_block(src + LOOM_QK_K * i, NULL, &b[i]);
}

/* The importance weights of quantize_row_iq4_nl_impl over a super-block x[nsb]: qw * sqrt(sigma2 + x^2), with
 * sigma2 = sum(x^2) * (2 / nsb). */
static void iq4_weights(const float *x, const float *qw, int nsb, float *w)
{
    float sigma2 = 0;
    for (int j = 0; j < nsb; j++)
        sigma2 += x[j] * x[j];
    sigma2 *= 2.f / (float)nsb;
    for (int j = 0; j < nsb; j++)
        w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* Weighted weight quantization of one row (quantize_iq4_xs with an importance matrix): as loom_iq4_xs_quantize
 * with the sub-block fits weighted by iq4_weights over each super-block of 256. */
void loom_iq4_xs_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_iq4_xs *b = dst;
    float w[LOOM_QK_K];
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        iq4_weights(src + LOOM_QK_K * i, qw + LOOM_QK_K * i, LOOM_QK_K, w);
        iq4_xs_block(src + LOOM_QK_K * i, w, &b[i]);
    }
}

/* Weighted weight quantization of one row (quantize_iq4_nl with an importance matrix): as
 * loom_iq4_nl_quantize with each block's fit weighted by iq4_weights over the block of 32. */
void loom_iq4_nl_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_iq4_nl *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        uint8_t L[32];
        float w[32];
        iq4_weights(x, qw + 32 * i, 32, w);
        float d = fit_sub_block(x, w, L);
        b[i].d = loom_f32_to_f16(d);
        float id = d != 0 ? 1 / d : 0;
        for (int j = 0; j < 32; j++)
            L[j] = (uint8_t)nearest_grid(id * x[j]);
        pack_indices(L, b[i].qs);
    }
}

/* One IQ4_XS super-block of 256 at x into *b; w NULL: weights x^2 (the path without an importance matrix). */
static void iq4_xs_block(const float *x, const float *w, struct loom_block_iq4_xs *b)
{
    uint8_t L[32];
    float scales[8], max_scale = 0, amax_scale = 0;
    for (int s = 0; s < 8; s++) {
        scales[s] = fit_sub_block(x + 32 * s, w ? w + 32 * s : NULL, L);
        if (fabsf(scales[s]) > amax_scale) {
            amax_scale = fabsf(scales[s]);
            max_scale = scales[s];
        }
    }
    float d = -max_scale / 32, id = d != 0 ? 1 / d : 0.f;
    b->d = loom_f32_to_f16(d);
    b->scales_h = 0;
    memset(b->scales_l, 0, sizeof b->scales_l);
    for (int s = 0; s < 8; s++) {
        int l = loom_nearest_int(id * scales[s]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        float dl = d * (float)l, idl = dl != 0 ? 1 / dl : 0.f;
        for (int j = 0; j < 32; j++)
            L[j] = (uint8_t)nearest_grid(idl * x[32 * s + j]);
        pack_indices(L, b->qs + 16 * s);
        l += 32;
        b->scales_l[s / 2] = (uint8_t)(b->scales_l[s / 2] | (l & 15) << (4 * (s % 2)));
        b->scales_h = (uint16_t)(b->scales_h | (l >> 4) << (2 * s));
    }
}

/* Exact integer sum over elements 4l..4l+3 of one 32-element sub-block: grid values times quants. */
static inline int32_t lane_sum(const uint8_t qs[16], const int8_t *q8, int l)
{
    return loom_nl4_lane_sum(loom_iq4nl_values, qs, q8, l);
}

static float iq4_nl_scale(const uint8_t *block)
{
    return loom_f16_to_f32(((const struct loom_block_iq4_nl *)(const void *)block)->d);
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_iq4_nl_q8_0): blocks in pairs, the even one into
 * acc1 and the odd one into acc2, each lane l = fma(d_a * d_w, exact sum over elements 4l..4l+3, lane);
 * sum = hsum_float_8(acc1 + acc2); an odd last block is added as fma(d_a * d_w, block sum, sum). */
void loom_iq4_nl_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_nl4_vec_dot(n / 32, loom_iq4nl_values, w, sizeof(struct loom_block_iq4_nl),
                          offsetof(struct loom_block_iq4_nl, qs), iq4_nl_scale, a);
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_iq4_xs_q8_K): lane l = exact sum over the 8
 * sub-blocks of (ls - 32) * (sum over its elements 4l..4l+3); per block acc[l] = fma(d_w * d_a, lane,
 * acc[l]); *s = hsum_float_8(acc). */
void loom_iq4_xs_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_xs *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t lane[8] = {0};
        for (int sb = 0; sb < 8; sb++) {
            int ls = scale_xs(&x[i], sb) - 32;
            for (int l = 0; l < 8; l++)
                lane[l] += ls * lane_sum(x[i].qs + 16 * sb, y[i].qs + 32 * sb, l);
        }
        float d = loom_f16_to_f32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    *s = loom_hsum8(acc);
}

/* The order of llamafile's tinyBLAS (ggml-cpu/llamafile/sgemm.cpp tinyBLAS_Q0_AVX), which the reference
 * uses for IQ4_NL x Q8_0 products with 2 or more activation rows: one accumulator per output with lanes
 * as vec_dot's (no even/odd block split, no scalar tail), acc[l] = fma(d_w * d_a, lane, acc[l]), then
 * hsum_float_8. */
void loom_iq4_nl_tinyblas(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_nl *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        float d = loom_f16_to_f32(x[i].d) * loom_f16_to_f32(y[i].d);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane_sum(x[i].qs, y[i].qs, l), acc[l]);
    }
    *s = loom_hsum8(acc);
}

/* The order of the reference's IQ panel gemm (ggml-cpu/iqp.cpp, used on AVX2 machines for IQ4_XS
 * weights with a row count divisible by 8 and 8 or more activation rows): per block the whole exact
 * integer sum isum = sum over sub-blocks of (ls - 32) * sum of grid * q8, then acc = fma(isum, d_w * d_a,
 * acc) in one scalar accumulator. */
void loom_iq4_xs_iqp(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_xs *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t isum = 0;
        for (int sb = 0; sb < 8; sb++) {
            int32_t sub = 0;
            for (int l = 0; l < 8; l++)
                sub += lane_sum(x[i].qs + 16 * sb, y[i].qs + 32 * sb, l);
            isum += (scale_xs(&x[i], sb) - 32) * sub;
        }
        acc = fmaf((float)isum, loom_f16_to_f32(x[i].d) * y[i].d, acc);
    }
    *s = acc;
}

/* The order of the reference's repacked IQ4_NL kernels (repack.cpp ggml_gemv/gemm_iq4_nl_8x8_q8_0, AVX2,
 * n_out % 8 == 0): per block the whole exact integer sum, acc = fma(isum, d_w * d_a, acc). */
void loom_iq4_nl_gemv(int64_t n, float *s, const void *w, const void *a)
{
    *s = loom_nl4_gemv(n / 32, loom_iq4nl_values, w, sizeof(struct loom_block_iq4_nl),
                       offsetof(struct loom_block_iq4_nl, qs), iq4_nl_scale, a);
}
