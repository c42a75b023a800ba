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

float loom_k_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                           int nstep, int use_mad)
{
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        min = x[i] < min ? x[i] : min;
        max = x[i] > max ? x[i] : max;
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    min = min > 0 ? 0 : min;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = loom_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * (float)L[i] + min - x[i];
        best_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    uint8_t aux[32];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + 0.1f * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = loom_nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            aux[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D, this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float cur_error = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * (float)aux[i] + this_min - x[i];
            cur_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
        }
        if (cur_error < best_error) {
            memcpy(L, aux, (size_t)n);
            best_error = cur_error;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
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
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d = loom_f32_to_f16(max_scale / 63.f);
    *dmin = loom_f32_to_f16(max_min / 63.f);
    /* requantize against the rounded scales; a sub-block whose scale rounded to 0 keeps its search result */
    uint8_t q_sc[8], q_m[8];
    loom_k4_scales(scales, q_sc, q_m);
    for (int j = 0; j < 8; j++) {
        float dj = loom_f16_to_f32(*d) * (float)q_sc[j];
        if (dj == 0.0f)
            continue;
        float dm = loom_f16_to_f32(*dmin) * (float)q_m[j];
        for (int l = 0; l < 32; l++) {
            int q = loom_nearest_int((x[32 * j + l] + dm) / dj);
            L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}

/* Weight quantization, ggml-quants.c quantize_row_q4_K_ref: loom_k4_quantize_superblock with nmax 15,
 * rmin -1 and 20 steps, then sub-blocks 2g and 2g+1 packed as the low and high nibbles of qs[32g..]. */
void loom_q4_k_quantize(const float *src, void *dst, int64_t n)
{
    struct loom_block_q4_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t L[LOOM_QK_K];
        loom_k4_quantize_superblock(src + i * LOOM_QK_K, 15, -1.f, 20, L, b[i].scales, &b[i].d, &b[i].dmin);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * g + l] = (uint8_t)(L[64 * g + l] | L[64 * g + 32 + l] << 4);
    }
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
        if (j < 4) {
            scales[j] = ls;
            scales[j + 4] = lm;
        } else {
            scales[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            scales[j - 4] = (uint8_t)(scales[j - 4] | (ls >> 4) << 6);
            scales[j] = (uint8_t)(scales[j] | (lm >> 4) << 6);
        }
    }
    *d = loom_f32_to_f16(d_block);
    *dmin = loom_f32_to_f16(m_block);
    uint8_t q_sc[8], q_m[8];
    loom_k4_scales(scales, q_sc, q_m);
    for (int j = 0; j < 8; j++) {
        float dj = loom_f16_to_f32(*d) * (float)q_sc[j];
        if (dj == 0.0f)
            continue;
        float dm = loom_f16_to_f32(*dmin) * (float)q_m[j];
        for (int l = 0; l < 32; l++) {
            int q = loom_nearest_int((x[32 * j + l] + dm) / dj);
            L[32 * j + l] = (uint8_t)(q < 0 ? 0 : q > nmax ? nmax : q);
        }
    }
}

/* Weighted weight quantization of one row (ggml-quants.c quantize_row_q4_K_impl with an importance matrix):
 * loom_k4_quantize_superblock_w with nmax 15, packed as loom_q4_k_quantize. */
void loom_q4_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_q4_k *b = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint8_t L[LOOM_QK_K];
        loom_k4_quantize_superblock_w(src + i * LOOM_QK_K, qw + i * LOOM_QK_K, 15, 0, L, b[i].scales, &b[i].d,
                                      &b[i].dmin);
        for (int g = 0; g < 4; g++)
            for (int l = 0; l < 32; l++)
                b[i].qs[32 * g + l] = (uint8_t)(L[64 * g + l] | L[64 * g + 32 + l] << 4);
    }
}
