/* q3_k.c — scalar reference kernels of Q3_K (block layout in kernels/blocks.h): dequantization and
 * weight quantization bit-identical to llama.cpp's ggml-quants.c (dequantize_row_q3_K,
 * quantize_row_q3_K_ref, the path without an importance matrix), and the Q3_K x Q8_K dot product in the
 * float order of the reference's AVX2 kernel (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q3_K_q8_K). */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Signed scale (sc - 32, in [-32, 31]) of sub-block s (< 16). */
static inline int scale3(const uint8_t scales[12], int s)
{
    int low = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
    return (low | ((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4) - 32;
}

/* Quant of element e = 128h + 32k + l in [-4, 3]: 2 low bits as Q2_K, minus 4 unless bit 4h + k of
 * hmask[l] is set. */
static inline int quant3(const struct loom_block_q3_k *b, int e)
{
    int h = e / 128, k = (e / 32) % 4, l = e % 32;
    int low = (b->qs[32 * h + l] >> (2 * k)) & 3;
    return low - ((b->hmask[l] >> (4 * h + k)) & 1 ? 0 : 4);
}

/* value = (d * sc) * q per sub-block of 16. */
void loom_q3_k_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q3_k *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_f16_to_f32(b[i].d);
        for (int e = 0; e < LOOM_QK_K; e++) {
            float dl = d * (float)scale3(b[i].scales, e / 16);
            dst[LOOM_QK_K * i + e] = dl * (float)quant3(&b[i], e);
        }
    }
}

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Fit x[16] ~ scale * L with L in [-4, 3] by weighted least squares (weights x^2), refining each L in
 * up to 5 passes (ggml-quants.c make_q3_quants(16, 4, x, L, true)). L comes back offset by +4 (in
 * [0, 7]); returns the scale. Float operations in the reference's order. */
static float fit_scale(const float x[16], int8_t L[16])
{
    const int nmax = 4;
    float max = 0, amax = 0;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < 1e-15f) { /* GROUP_MAX_EPS */
        memset(L, 0, 16);
        return 0.f;
    }
    float iscale = -(float)nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < 16; i++) {
        int l = clamp_int(loom_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < 16; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (!(slx > 0))
                continue;
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            int new_l = clamp_int(loom_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == L[i])
                continue;
            slx += w * x[i] * (float)new_l;
            sl2 += w * (float)new_l * (float)new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)new_l;
                sumlx = slx;
                suml2 = sl2;
                n_changed++;
            }
        }
        if (!n_changed)
            break;
    }
    for (int i = 0; i < 16; i++)
        L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Store the 6-bit scale code l (in [0, 63], the scale + 32) of sub-block j (< 16): its low 4 bits in the
 * nibble j / 8 of scales[j % 8], its high 2 bits at bit 2 (j / 4) of scales[8 + j % 4] (as scale3 reads). */
static void put_scale(uint8_t scales[12], int j, int l)
{
    if (j < 8)
        scales[j] = (uint8_t)(l & 15);
    else
        scales[j - 8] = (uint8_t)(scales[j - 8] | (l & 15) << 4);
    scales[8 + j % 4] = (uint8_t)(scales[8 + j % 4] | (l >> 4) << (2 * (j / 4)));
}

/* The last step of both quantizers: requantize x[256] against the block's stored d and scales, q =
 * clamp(nearest(x / (d*sc)), -4, 3) (a sub-block whose scale is 0 keeps L from its fit; L holds q + 4 in
 * [0, 7]), then pack bit 2 into hmask and bits 0-1 into qs as quant3 reads them. L is scratch. */
static void requantize_pack(struct loom_block_q3_k *b, const float x[LOOM_QK_K], int8_t L[LOOM_QK_K])
{
    for (int j = 0; j < 16; j++) {
        float d = loom_f16_to_f32(b->d) * (float)scale3(b->scales, j);
        if (d == 0)
            continue;
        for (int l = 0; l < 16; l++)
            L[16 * j + l] = (int8_t)(clamp_int(loom_nearest_int(x[16 * j + l] / d), -4, 3) + 4);
    }
    memset(b->hmask, 0, 32);
    for (int e = 0; e < LOOM_QK_K; e++)
        if (L[e] > 3) {
            b->hmask[e % 32] = (uint8_t)(b->hmask[e % 32] | 1u << (e / 32));
            L[e] = (int8_t)(L[e] - 4);
        }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *q = L + 128 * h + l;
            b->qs[32 * h + l] = (uint8_t)(q[0] | q[32] << 2 | q[64] << 4 | q[96] << 6);
        }
}

/* Weight quantization (quantize_row_q3_K_ref): fit each sub-block's scale, quantize the scales to 6
 * bits against the one of largest magnitude (d = max_scale / -32), then requantize the weights with the
 * stored scales: q = clamp(nearest(x / (d*sc)), -4, 3). */
void loom_q3_k_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q3_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const float *x = src + LOOM_QK_K * i;
        int8_t L[LOOM_QK_K];
        float scales[16], max_scale = 0, amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_scale(x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(b[i].scales, 0, 12);
        b[i].d = loom_f32_to_f16(0.f);
        if (max_scale != 0) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++)
                put_scale(b[i].scales, j, clamp_int((int8_t)loom_nearest_int(iscale * scales[j]), -32, 31) + 32);
            b[i].d = loom_f32_to_f16(1 / iscale);
        }
        requantize_pack(&b[i], x, L);
    }
}

/* lane[l] (l < 8) = sum over the 8 groups g of 32 elements of sc[2g + l/4] * sum of q * q8 over
 * elements 32g + 4l .. +3 (as the reference's AVX2 lanes). Exact in int32. */
static void block_sums(const struct loom_block_q3_k *x, const struct loom_block_q8_k *y, int32_t lane[8])
{
    for (int l = 0; l < 8; l++)
        lane[l] = 0;
    for (int g = 0; g < 8; g++)
        for (int l = 0; l < 8; l++) {
            int base = 32 * g + 4 * l, sum = 0;
            for (int e = base; e < base + 4; e++)
                sum += quant3(x, e) * y->qs[e];
            lane[l] += scale3(x->scales, 2 * g + l / 4) * sum;
        }
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_q3_K_q8_K): per block acc[l] = fma(d_a * d, lane[l],
 * acc[l]); *s = hsum_float_8(acc). */
void loom_q3_k_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q3_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t lane[8];
        block_sums(&x[i], &y[i], lane);
        float d = y[i].d * loom_f16_to_f32(x[i].d);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
    }
    *s = loom_hsum8(acc);
}

/* Weighted weight quantization of one row (ggml-quants.c quantize_row_q3_K_impl with an importance matrix):
 * per 16-weight group a scale by make_qx_quants (nmax 4) with weights qw * sqrt(sigma2 + x^2), sigma2 = 2 *
 * the block's mean square; the 16 scales quantized to 6 bits by make_qx_quants (nmax 32) weighted by each
 * group's weight sum; then the weights requantized against the stored scales, as loom_q3_k_quantize packs. */
void loom_q3_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_q3_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const float *x = src + LOOM_QK_K * i;
        int8_t L[LOOM_QK_K], Ls[16];
        float scales[16], sw[16], w[16], sumx2 = 0;
        for (int j = 0; j < LOOM_QK_K; j++)
            sumx2 += x[j] * x[j];
        float sigma2 = 2 * sumx2 / LOOM_QK_K;
        for (int j = 0; j < 16; j++) {
            float sumw = 0;
            for (int l = 0; l < 16; l++)
                w[l] = qw[LOOM_QK_K * i + 16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < 16; l++)
                sumw += w[l];
            sw[j] = sumw;
            scales[j] = loom_fit_qx(16, 4, x + 16 * j, w, L + 16 * j);
        }
        memset(b[i].scales, 0, 12);
        float d_block = loom_fit_qx(16, 32, scales, sw, Ls);
        for (int j = 0; j < 16; j++)
            put_scale(b[i].scales, j, Ls[j]);
        b[i].d = loom_f32_to_f16(d_block);
        requantize_pack(&b[i], x, L);
    }
}
