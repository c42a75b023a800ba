/* q2_k.c — scalar reference kernels of Q2_K (block layout in kernels/blocks.h): dequantization and
 * weight quantization bit-identical to llama.cpp's ggml-quants.c (dequantize_row_q2_K,
 * quantize_row_q2_K_ref, the path without an importance matrix), and the Q2_K x Q8_K dot product in the
 * float order of the reference's AVX2 kernel (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q2_K_q8_K). */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Quant of element e (< 256) of a Q2_K/Q3_K 2-bit field: bits 2k, 2k+1 of qs[32h + l], e = 128h + 32k + l. */
static inline int quant2(const uint8_t qs[64], int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3; }

/* value = (d * sc) * q - dmin * m per sub-block of 16, products rounded separately (no FMA). */
void loom_q2_k_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q2_k *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_f16_to_f32(b[i].d), dmin = loom_f16_to_f32(b[i].dmin);
        for (int e = 0; e < LOOM_QK_K; e++) {
            uint8_t sc = b[i].scales[e / 16];
            float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
            float p = dl * (float)quant2(b[i].qs, e);
            dst[LOOM_QK_K * i + e] = p - ml;
        }
    }
}

/* The last step of both quantizers: requantize x[256] against the block's stored d, dmin and 4-bit scales
 * and mins, q = clamp(nearest((x + dmin*m) / (d*sc)), 0, 3) (a sub-block whose scale is 0 keeps L from its
 * fit), then pack four 2-bit quants a byte as quant2 reads them. L is scratch. */
static void requantize_pack(struct loom_block_q2_k *b, const float x[LOOM_QK_K], uint8_t L[LOOM_QK_K])
{
    for (int j = 0; j < 16; j++) {
        float d = loom_f16_to_f32(b->d) * (float)(b->scales[j] & 15);
        if (d == 0)
            continue;
        float dm = loom_f16_to_f32(b->dmin) * (float)(b->scales[j] >> 4);
        for (int l = 0; l < 16; l++) {
            int q = loom_nearest_int((x[16 * j + l] + dm) / d);
            L[16 * j + l] = (uint8_t)(q < 0 ? 0 : q > 3 ? 3 : q);
        }
    }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *q = L + 128 * h + l;
            b->qs[32 * h + l] = (uint8_t)(q[0] | q[32] << 2 | q[64] << 4 | q[96] << 6);
        }
}

/* Weight quantization (quantize_row_q2_K_ref): fit each sub-block's scale and min (make_qkx2_quants with
 * nmax 3, weights |x|, rmin -0.5, 15 steps, absolute error), quantize both to 4 bits against their maxima
 * (d = max_scale / 15, dmin = max_min / 15), then requantize the weights with the stored scales:
 * q = clamp(nearest((x + dmin*m) / (d*sc)), 0, 3). */
void loom_q2_k_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q2_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const float *x = src + LOOM_QK_K * i;
        uint8_t L[LOOM_QK_K];
        float scales[16], mins[16], max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            float w[16];
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * j + l]);
            scales[j] = loom_k_fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.5f, 15, 1);
            if (scales[j] > max_scale)
                max_scale = scales[j];
            if (mins[j] > max_min)
                max_min = mins[j];
        }
        memset(b[i].scales, 0, 16);
        b[i].d = loom_f32_to_f16(0.f);
        if (max_scale > 0) {
            float iscale = 15.f / max_scale;
            for (int j = 0; j < 16; j++)
                b[i].scales[j] = (uint8_t)loom_nearest_int(iscale * scales[j]);
            b[i].d = loom_f32_to_f16(max_scale / 15.f);
        }
        b[i].dmin = loom_f32_to_f16(0.f);
        if (max_min > 0) {
            float iscale = 15.f / max_min;
            for (int j = 0; j < 16; j++)
                b[i].scales[j] = (uint8_t)(b[i].scales[j] | (unsigned)loom_nearest_int(iscale * mins[j]) << 4);
            b[i].dmin = loom_f32_to_f16(max_min / 15.f);
        }
        requantize_pack(&b[i], x, L);
    }
}

/* Integer part of one block, in the reference's 8 lanes: lane[l] = sum over the 8 groups g = (h, k) of
 * sc[8h + 2k + l/4] * sum of q * q8 over elements 128h + 32k + 4l .. +3; mins[l] = m[2l] * bsums[2l] +
 * m[2l+1] * bsums[2l+1]. Exact in int32. */
static void block_sums(const struct loom_block_q2_k *x, const struct loom_block_q8_k *y, int32_t lane[8],
                       int32_t mins[8])
{
    for (int l = 0; l < 8; l++) {
        lane[l] = 0;
        mins[l] = (x->scales[2 * l] >> 4) * y->bsums[2 * l] + (x->scales[2 * l + 1] >> 4) * y->bsums[2 * l + 1];
    }
    for (int g = 0; g < 8; g++)
        for (int l = 0; l < 8; l++) {
            int base = 32 * g + 4 * l, sum = 0; /* 128h + 32k = 32g */
            for (int e = base; e < base + 4; e++)
                sum += quant2(x->qs, e) * y->qs[e];
            lane[l] += (x->scales[(32 * g + 16 * (l / 4)) / 16] & 15) * sum;
        }
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_q2_K_q8_K): per block, acc[l] = fma(-d_a * dmin,
 * mins[l], acc[l]) then acc[l] = fma(d_a * d, lane[l], acc[l]); *s = hsum_float_8(acc). */
void loom_q2_k_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q2_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t lane[8], mins[8];
        block_sums(&x[i], &y[i], lane, mins);
        float d = y[i].d * loom_f16_to_f32(x[i].d), dmin = -y[i].d * loom_f16_to_f32(x[i].dmin);
        for (int l = 0; l < 8; l++) {
            acc[l] = fmaf(dmin, (float)mins[l], acc[l]);
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
        }
    }
    *s = loom_hsum8(acc);
}

/* Exact integer sums of one half h (elements 128h .. 128h+127) of a block: *isum = sum of sc * q * q8,
 * *imin = sum over its 8 sub-blocks of m * bsums. */
static void half_sums(const struct loom_block_q2_k *x, const struct loom_block_q8_k *y, int h, int32_t *isum,
                      int32_t *imin)
{
    *isum = *imin = 0;
    for (int sb = 8 * h; sb < 8 * h + 8; sb++) {
        int32_t sum = 0;
        for (int e = 16 * sb; e < 16 * sb + 16; e++)
            sum += quant2(x->qs, e) * y->qs[e];
        *isum += (x->scales[sb] & 15) * sum;
        *imin += (x->scales[sb] >> 4) * y->bsums[sb];
    }
}

/* The order of the reference's repacked Q2_K gemv (repack.cpp ggml_gemv_q2_K_8x8_q8_K; AVX-512 builds
 * repack Q2_K weights with n_out % 8 == 0): per block acc = fma(isum, d * d_a, acc) and accm = fma(imin,
 * dmin * d_a, accm) with whole-block integer sums; *s = acc - accm. */
void loom_q2_k_gemv(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q2_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t isum = 0, imin = 0;
        for (int h = 0; h < 2; h++) {
            int32_t hs, hm;
            half_sums(&x[i], &y[i], h, &hs, &hm);
            isum += hs;
            imin += hm;
        }
        acc = fmaf((float)isum, loom_f16_to_f32(x[i].d) * y[i].d, acc);
        accm = fmaf((float)imin, loom_f16_to_f32(x[i].dmin) * y[i].d, accm);
    }
    *s = acc - accm;
}

/* The repacked gemm order (ggml_gemm_q2_K_8x8_q8_K, activation rows in groups of 4): as the gemv, but
 * one fma pair per half block of 128. */
void loom_q2_k_gemm(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q2_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float d = loom_f16_to_f32(x[i].d) * y[i].d, dmin = loom_f16_to_f32(x[i].dmin) * y[i].d;
        for (int h = 0; h < 2; h++) {
            int32_t isum, imin;
            half_sums(&x[i], &y[i], h, &isum, &imin);
            acc = fmaf((float)isum, d, acc);
            accm = fmaf((float)imin, dmin, accm);
        }
    }
    *s = acc - accm;
}

/* Weighted weight quantization of one row (ggml-quants.c quantize_row_q2_K_impl with an importance matrix):
 * per 16-weight group (scale, min) by make_qkx3_quants (nmax 3, rmin -0.9, step 0.05, 36 steps) with weights
 * qw * sqrt(sigma2 + x^2), sigma2 the block's mean square; the scales and mins quantized to 4 bits by
 * make_qp_quants weighted by each group's weight sum; the weights requantized against the stored scales. */
void loom_q2_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_q2_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const float *x = src + LOOM_QK_K * i;
        uint8_t L[LOOM_QK_K], Ls[16], Lm[16];
        float scales[16], mins[16], sw[16], w[16], sumx2 = 0;
        for (int j = 0; j < LOOM_QK_K; j++)
            sumx2 += x[j] * x[j];
        float sigma2 = sumx2 / LOOM_QK_K;
        for (int j = 0; j < 16; j++) {
            sw[j] = 0;
            for (int l = 0; l < 16; l++)
                w[l] = qw[LOOM_QK_K * i + 16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < 16; l++)
                sw[j] += w[l];
            scales[j] = loom_fit_qkx3(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], -0.9f, 0.05f, 36, 0);
        }
        float dm = loom_fit_qp(16, 15, scales, Ls, sw), mm = loom_fit_qp(16, 15, mins, Lm, sw);
        b[i].d = loom_f32_to_f16(dm);
        b[i].dmin = loom_f32_to_f16(mm);
        for (int j = 0; j < 16; j++)
            b[i].scales[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
        requantize_pack(&b[i], x, L);
    }
}
