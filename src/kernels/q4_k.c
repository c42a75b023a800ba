/* q4_k.c — scalar reference kernels of Q4_K (block layout in kernels/blocks.h): dequantization
 * bit-identical to llama.cpp's dequantize_row_q4_K and the Q4_K x Q8_K dot product in both of the
 * reference's float orders: its AVX2 vec_dot (ggml-cpu/arch/x86/quants.c ggml_vec_dot_q4_K_q8_K) and its
 * repacked 8x8 gemv/gemm (ggml-cpu/arch/x86/repack.cpp ggml_gemv/gemm_q4_K_8x8_q8_K), which llama.cpp
 * uses by default on AVX2 machines. */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* value = (d*sc) * q - (dmin*m), each product rounded to F32 separately (no FMA), as the reference. */
void loom_q4_k_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_q4_k *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t sc[8], m[8];
        loom_k4_scales(b[i].scales, sc, m);
        float d = loom_f16_to_f32(b[i].d), dmin = loom_f16_to_f32(b[i].dmin);
        float *y = dst + i * LOOM_QK_K;
        for (int g = 0; g < 4; g++) {
            const uint8_t *q = b[i].qs + 32 * g;
            float d1 = d * sc[2 * g], m1 = dmin * m[2 * g];
            float d2 = d * sc[2 * g + 1], m2 = dmin * m[2 * g + 1];
            for (int l = 0; l < 32; l++)
                y[64 * g + l] = d1 * (float)(q[l] & 15) - m1;
            for (int l = 0; l < 32; l++)
                y[64 * g + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* Integer part of one block: lane[l] (l < 8) = sum over the 8 sub-blocks j of sc[j] * sum of q*q8 over
 * the 4 elements 4l..4l+3 of sub-block j; mins[k] (k < 4) = m[2k]*(bsums[4k]+bsums[4k+1]) +
 * m[2k+1]*(bsums[4k+2]+bsums[4k+3]). Exact in int32. */
static void block_sums(const struct loom_block_q4_k *x, const struct loom_block_q8_k *y, int32_t lane[8],
                       int32_t mins[4])
{
    uint8_t sc[8], m[8];
    loom_k4_scales(x->scales, sc, m);
    for (int l = 0; l < 8; l++)
        lane[l] = 0;
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = x->qs + 32 * (j / 2);
        const int8_t *q8 = y->qs + 32 * j;
        int shift = 4 * (j & 1);
        for (int l = 0; l < 8; l++) {
            int32_t sum = 0;
            for (int k = 4 * l; k < 4 * l + 4; k++)
                sum += ((q[k] >> shift) & 15) * q8[k];
            lane[l] += sc[j] * sum;
        }
    }
    for (int k = 0; k < 4; k++)
        mins[k] = m[2 * k] * (y->bsums[4 * k] + y->bsums[4 * k + 1]) +
                  m[2 * k + 1] * (y->bsums[4 * k + 2] + y->bsums[4 * k + 3]);
}

/* *s = sum_i W[i] * A[i] for one Q4_K row against a Q8_K row. Float order (as the reference's AVX2
 * kernel): per block, acc[l] = fma(d_a * d, lane[l], acc[l]) for 8 lanes and accm[k] = fma(-d_a * dmin,
 * mins[k], accm[k]) for 4 lanes; *s = hsum_float_8(acc) + ((accm0 + accm2) + (accm1 + accm3)). */
void loom_q4_k_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0}, accm[4] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t lane[8], mins[4];
        block_sums(&x[i], &y[i], lane, mins);
        float d = y[i].d * loom_f16_to_f32(x[i].d);
        float dmin = -y[i].d * loom_f16_to_f32(x[i].dmin);
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(d, (float)lane[l], acc[l]);
        for (int k = 0; k < 4; k++)
            accm[k] = fmaf(dmin, (float)mins[k], accm[k]);
    }
    *s = loom_hsum8(acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]));
}

/* Per sub-block: scaled[j] = sc[j] * sum of q * q8 over sub-block j; mins as block_sums. */
static void sub_block_sums(const struct loom_block_q4_k *x, const struct loom_block_q8_k *y, int32_t scaled[8],
                           int32_t mins[4])
{
    int32_t lane[8];
    block_sums(x, y, lane, mins);
    uint8_t sc[8], m[8];
    loom_k4_scales(x->scales, sc, m);
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = x->qs + 32 * (j / 2);
        int32_t sum = 0;
        for (int k = 0; k < 32; k++)
            sum += ((q[k] >> (4 * (j & 1))) & 15) * y->qs[32 * j + k];
        scaled[j] = sc[j] * sum;
    }
}

/* The same dot in the order of the reference's repacked gemv (activation rows that are not part of a
 * group of 4): per block acc = fma(isum, d * d_a, acc) and accm = fma(imin, dmin * d_a, accm) with the
 * whole-block integer sums isum = sum_j scaled[j], imin = sum_k mins[k]; *s = acc - accm. */
void loom_q4_k_gemv(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t scaled[8], mins[4];
        sub_block_sums(&x[i], &y[i], scaled, mins);
        int32_t isum = 0, imin = mins[0] + mins[1] + mins[2] + mins[3];
        for (int j = 0; j < 8; j++)
            isum += scaled[j];
        acc = fmaf((float)isum, loom_f16_to_f32(x[i].d) * y[i].d, acc);
        accm = fmaf((float)imin, loom_f16_to_f32(x[i].dmin) * y[i].d, accm);
    }
    *s = acc - accm;
}

/* The order of the reference's repacked gemm (activation rows in groups of 4): as the gemv, but one
 * fma per pair of sub-blocks g < 4, with isum_g = scaled[2g] + scaled[2g+1] and imin_g = mins[g]. */
void loom_q4_k_gemm(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t scaled[8], mins[4];
        sub_block_sums(&x[i], &y[i], scaled, mins);
        float d = loom_f16_to_f32(x[i].d) * y[i].d, dmin = loom_f16_to_f32(x[i].dmin) * y[i].d;
        for (int g = 0; g < 4; g++) {
            acc = fmaf((float)(scaled[2 * g] + scaled[2 * g + 1]), d, acc);
            accm = fmaf((float)mins[g], dmin, accm);
        }
    }
    *s = acc - accm;
}

/* make_qkx2_quants is make_qkx3_quants with a step of 0.1 and the weights always given: the two differ only in
 * testing `max == min` where make_qkx3_quants tests `max <= min`, the same test since min never exceeds max. */
float loom_k_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                           int nstep, int use_mad)
{
    return loom_fit_qkx3(n, nmax, x, w, L, neg_min, rmin, 0.1f, nstep, use_mad);
}

/* Store the 6-bit scale ls and min lm (each <= 63) of sub-block j into scales[12], as loom_k4_scales unpacks
 * them; called for j = 0 .. 7 in order (sub-blocks 4..7 add their high bits to bytes the first four wrote). */
static void put_scale_min(uint8_t scales[12], int j, uint8_t ls, uint8_t lm)
{
    if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
        scales[j - 4] = (uint8_t)(scales[j - 4] | (ls >> 4) << 6);
        scales[j] = (uint8_t)(scales[j] | (lm >> 4) << 6);
    }
}

/* The last step of both super-block fits: L[256] recomputed against the rounded F16 d, dmin and 6-bit scales,
 * q = clamp(nearest((x + dmin*m) / (d*sc)), 0, nmax); a sub-block whose scale rounded to 0 keeps its search
 * result. */
static void requantize(const float x[256], int nmax, const uint8_t scales[12], uint16_t d, uint16_t dmin,
                       uint8_t L[256])
{
    uint8_t q_sc[8], q_m[8];
    loom_k4_scales(scales, q_sc, q_m);
    for (int j = 0; j < 8; j++) {
        float dj = loom_f16_to_f32(d) * (float)q_sc[j];
        if (dj == 0.0f)
            continue;
        float dm = loom_f16_to_f32(dmin) * (float)q_m[j];
        for (int l = 0; l < 32; l++) {
            int q = loom_nearest_int((x[32 * j + l] + dm) / dj);
            L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}

void loom_k4_quantize_superblock(const float x[256], int nmax, float rmin, int nstep, uint8_t L[256],
                                 uint8_t scales[12], uint16_t *d, uint16_t *dmin)
{
    float sc[8], mn[8], w[32], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++)
            sum_x2 += xj[l] * xj[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xj[l]);
        sc[j] = loom_k_fit_scale_min(32, nmax, xj, w, L + 32 * j, &mn[j], rmin, nstep, 0);
        max_scale = sc[j] > max_scale ? sc[j] : max_scale;
        max_min = mn[j] > max_min ? mn[j] : max_min;
    }
    /* 6-bit scales and mins relative to the maxima, packed as loom_k4_scales unpacks them */
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)loom_nearest_int(inv_scale * sc[j]);
        uint8_t lm = (uint8_t)loom_nearest_int(inv_min * mn[j]);
        ls = ls > 63 ? 63 : ls;
        lm = lm > 63 ? 63 : lm;
        put_scale_min(scales, j, ls, lm);
    }
    *d = loom_f32_to_f16(max_scale / 63.f);
    *dmin = loom_f32_to_f16(max_min / 63.f);
    requantize(x, nmax, scales, *d, *dmin, L);
}

void loom_k4_quantize_superblock_w(const float x[256], const float qw[256], int nmax, int clamp_scales,
                                   uint8_t L[256], uint8_t scales[12], uint16_t *d, uint16_t *dmin)
{
    float sum_x2 = 0;
    for (int l = 0; l < 256; l++)
        sum_x2 += x[l] * x[l];
    float sigma2 = 2 * sum_x2 / 256, w[32], sw[8], sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        float sumw = 0;
        for (int l = 0; l < 32; l++)
            w[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        for (int l = 0; l < 32; l++)
            sumw += w[l];
        sw[j] = sumw;
        sc[j] = loom_fit_qkx3(32, nmax, x + 32 * j, w, L + 32 * j, &mn[j], -0.9f, 0.05f, 36, 0);
    }
    uint8_t Ls[8], Lm[8];
    float d_block = loom_fit_qp(8, 63, sc, Ls, sw), m_block = loom_fit_qp(8, 63, mn, Lm, sw);
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = Ls[j], lm = Lm[j];
        if (clamp_scales) {
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
        }
        put_scale_min(scales, j, ls, lm);
    }
    *d = loom_f32_to_f16(d_block);
    *dmin = loom_f32_to_f16(m_block);
    requantize(x, nmax, scales, *d, *dmin, L);
}

/* One row of Q4_K blocks: each super-block fitted by loom_k4_quantize_superblock_w (nmax 15) when qw is given,
 * else by loom_k4_quantize_superblock (nmax 15, rmin -1, 20 steps); sub-blocks 2g and 2g+1 then packed as the
 * low and high nibbles of qs[32g..]. */
static void quantize_row(const float *src, struct loom_block_q4_k *b, int64_t n, const float *qw)
{
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t L[LOOM_QK_K];
        const float *x = src + i * LOOM_QK_K;
        if (qw)
            loom_k4_quantize_superblock_w(x, qw + i * LOOM_QK_K, 15, 0, L, b[i].scales, &b[i].d, &b[i].dmin);
        else
            loom_k4_quantize_superblock(x, 15, -1.f, 20, L, b[i].scales, &b[i].d, &b[i].dmin);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * g + l] = (uint8_t)(L[64 * g + l] | L[64 * g + 32 + l] << 4);
    }
}

/* Weight quantization, ggml-quants.c quantize_row_q4_K_ref. */
void loom_q4_k_quantize(const float *src, void *dst, int64_t n) { quantize_row(src, dst, n, NULL); }

/* Weighted weight quantization of one row (ggml-quants.c quantize_row_q4_K_impl with an importance matrix). */
void loom_q4_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw) { quantize_row(src, dst, n, qw); }
