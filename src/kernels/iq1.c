/* iq1.c — scalar reference kernels of the 1-bit lattice types IQ1_S and IQ1_M (block layouts in kernels/blocks.h,
 * lattice in kernels/iq1_grid.h): dequantization bit-identical to llama.cpp's ggml-quants.c
 * (dequantize_row_iq1_s/m), the dot products in the float order of the reference's zen4 CPU build
 * (ggml-cpu/arch/x86/quants.c ggml_vec_dot_iq1_s_q8_K / ggml_vec_dot_iq1_m_q8_K, AVX2 with BMI2; GCC contracts
 * the scalar product-adds) and of its IQ panel gemm (ggml-cpu/iqp.cpp); their row validators are in validate.c.
 * The quantizers are in iq1_quant.c. */
#include <math.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/iq1_grid.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Weight j (< 8) of grid entry idx, in {-1, 0, 1}. */
static inline int grid_at(int idx, int j) { return (int8_t)(uint8_t)(loom_iq1s_grid[idx] >> (8 * j)); }

/* IQ1_S group l (< 4) of sub-block ib: its grid index. */
static inline int iq1_s_index(const struct loom_block_iq1_s *b, int ib, int l)
{
    return b->qs[4 * ib + l] | ((b->qh[ib] >> (3 * l)) & 7) << 8;
}

/* IQ1_S sub-block ib's odd integer scale 2 ls + 1 (1..15). */
static inline int iq1_s_scale(const struct loom_block_iq1_s *b, int ib) { return 2 * ((b->qh[ib] >> 12) & 7) + 1; }

/* value = (d * (2 ls + 1)) * (grid + delta), delta = -1/8 when bit 15 of qh[ib] is set, else +1/8. */
void loom_iq1_s_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_iq1_s *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++, b++) {
        float d = loom_f16_to_f32(b->d);
        for (int ib = 0; ib < 8; ib++) {
            float dl = d * (float)iq1_s_scale(b, ib), delta = b->qh[ib] & 0x8000 ? -0.125f : 0.125f;
            for (int l = 0; l < 4; l++) {
                int idx = iq1_s_index(b, ib, l);
                for (int j = 0; j < 8; j++)
                    *dst++ = dl * ((float)grid_at(idx, j) + delta);
            }
        }
    }
}

/* The four little-endian 16-bit words of an IQ1_M block's scales. */
static inline void iq1_m_words(const struct loom_block_iq1_m *b, uint16_t sc[4])
{
    for (int k = 0; k < 4; k++)
        sc[k] = (uint16_t)(b->scales[2 * k] | b->scales[2 * k + 1] << 8);
}

/* The F16 super-scale of an IQ1_M block: the top nibbles of the four scale words, first word lowest. */
static inline uint16_t iq1_m_d(const uint16_t sc[4])
{
    return (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

/* IQ1_M sub-block ib, half h (0: groups 0-1, 1: groups 2-3): its odd integer scale (1..15). */
static inline int iq1_m_scale(const uint16_t sc[4], int ib, int h)
{
    return 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * h)) & 7) + 1;
}

/* IQ1_M group l (< 4) of sub-block ib: its qh nibble (bits 0-2 the index's top bits, bit 3 the delta sign). */
static inline int iq1_m_nibble(const struct loom_block_iq1_m *b, int ib, int l)
{
    return (b->qh[2 * ib + l / 2] >> (4 * (l % 2))) & 15;
}

static inline int iq1_m_index(const struct loom_block_iq1_m *b, int ib, int l)
{
    return b->qs[4 * ib + l] | (iq1_m_nibble(b, ib, l) & 7) << 8;
}

/* value = (d * scale) * (grid + delta), scale per half sub-block, delta -1/8 when the group's nibble has bit 3. */
void loom_iq1_m_to_float(const void *src, float *dst, int64_t n)
{
    const struct loom_block_iq1_m *b = src;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++, b++) {
        uint16_t sc[4];
        iq1_m_words(b, sc);
        float d = loom_f16_to_f32(iq1_m_d(sc));
        for (int ib = 0; ib < 8; ib++)
            for (int l = 0; l < 4; l++) {
                float dl = d * (float)iq1_m_scale(sc, ib, l / 2);
                float delta = iq1_m_nibble(b, ib, l) & 8 ? -0.125f : 0.125f;
                int idx = iq1_m_index(b, ib, l);
                for (int j = 0; j < 8; j++)
                    *dst++ = dl * ((float)grid_at(idx, j) + delta);
            }
    }
}

/* Exact sum over elements 4k..4k+3 of group-of-8 pair (lane k < 8 of a 32-element sub-block): grid values
 * times quants. The reference's sign trick (|g| * sign(q, g)) equals g * q for quants in [-127, 127], which is
 * all Q8_K holds. */
static inline int32_t grid_lane(const int idx[4], const int8_t *q8, int k)
{
    int32_t sum = 0;
    for (int e = 4 * k; e < 4 * k + 4; e++)
        sum += grid_at(idx[e / 8], e % 8) * q8[e];
    return sum;
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_iq1_s_q8_K): per block, lane k (< 8) = exact sum over
 * sub-blocks of (2 ls + 1) * (grid . q over elements 4k..4k+3), and the delta sum = exact sum over sub-blocks of
 * +-(2 ls + 1) * (the sub-block's two bsums); d = d_a * d_w; acc[k] = fma(d, lane, acc[k]) and
 * acc1 = fma(delta sum, d, acc1); *s = hsum_float_8(acc) + 0.125f * acc1 (product rounded, then added). */
void loom_iq1_s_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq1_s *x = w;
    const struct loom_block_q8_k *y = a;
    float acc[8] = {0}, acc1 = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t lane[8] = {0}, dsum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int ls = iq1_s_scale(&x[i], ib), idx[4];
            for (int l = 0; l < 4; l++)
                idx[l] = iq1_s_index(&x[i], ib, l);
            for (int k = 0; k < 8; k++)
                lane[k] += ls * grid_lane(idx, y[i].qs + 32 * ib, k);
            dsum += (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]) * (x[i].qh[ib] & 0x8000 ? -1 : 1) * ls;
        }
        float d = y[i].d * loom_f16_to_f32(x[i].d);
        for (int k = 0; k < 8; k++)
            acc[k] = fmaf(d, (float)lane[k], acc[k]);
        acc1 = fmaf((float)dsum, d, acc1);
    }
    float delta = 0.125f * acc1;
    *s = loom_hsum8(acc) + delta;
}

/* *s = sum of W[i] * A[i]. Order (AVX2 ggml_vec_dot_iq1_m_q8_K): per block, lane k (< 8) = exact sum over
 * sub-blocks of scale * (grid . q over elements 4k..4k+3) and delta lane k = exact sum of scale * (+-1 . q over
 * the same elements), scale the half sub-block's (lanes 0-3 the first half, 4-7 the second); d = d_a * d_w;
 * acc1[k] = fma(d, lane, acc1[k]), acc2[k] = fma(d, delta lane, acc2[k]);
 * *s = fma(hsum_float_8(acc2), 0.125f, hsum_float_8(acc1)). */
void loom_iq1_m_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq1_m *x = w;
    const struct loom_block_q8_k *y = a;
    float acc1[8] = {0}, acc2[8] = {0};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint16_t sc[4];
        iq1_m_words(&x[i], sc);
        int32_t lane[8] = {0}, dlane[8] = {0};
        for (int ib = 0; ib < 8; ib++) {
            const int8_t *q8 = y[i].qs + 32 * ib;
            int idx[4];
            for (int l = 0; l < 4; l++)
                idx[l] = iq1_m_index(&x[i], ib, l);
            for (int k = 0; k < 8; k++) {
                int scale = iq1_m_scale(sc, ib, k / 4), sign = iq1_m_nibble(&x[i], ib, k / 2) & 8 ? -1 : 1;
                lane[k] += scale * grid_lane(idx, q8, k);
                dlane[k] += scale * sign * (q8[4 * k] + q8[4 * k + 1] + q8[4 * k + 2] + q8[4 * k + 3]);
            }
        }
        float d = y[i].d * loom_f16_to_f32(iq1_m_d(sc));
        for (int k = 0; k < 8; k++) {
            acc1[k] = fmaf(d, (float)lane[k], acc1[k]);
            acc2[k] = fmaf(d, (float)dlane[k], acc2[k]);
        }
    }
    *s = fmaf(loom_hsum8(acc2), 0.125f, loom_hsum8(acc1));
}

/* Exact integer sum of one sub-block in the IQ panel's form: scale * sum of (8 grid + delta) * q, delta +-1. */
static inline int32_t panel_sub_block(const int idx[4], const int sign[4], int scale_lo, int scale_hi,
                                      const int8_t *q8)
{
    int32_t lo = 0, hi = 0;
    for (int e = 0; e < 32; e++) {
        int32_t v = (8 * grid_at(idx[e / 8], e % 8) + sign[e / 8]) * q8[e];
        if (e < 16)
            lo += v;
        else
            hi += v;
    }
    return scale_lo * lo + scale_hi * hi;
}

/* The order of the reference's IQ panel gemm (ggml-cpu/iqp.cpp, AVX2 machines, weights with a row count divisible
 * by 8 and 8 or more activation rows): per block the whole exact integer sum isum of scale * (8 grid + delta) * q
 * (delta +-1), then acc = fma(isum, (d_w * 0.125f) * d_a, acc) in one scalar accumulator. */
void loom_iq1_s_iqp(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq1_s *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int idx[4], sign = x[i].qh[ib] & 0x8000 ? -1 : 1, signs[4] = {sign, sign, sign, sign};
            for (int l = 0; l < 4; l++)
                idx[l] = iq1_s_index(&x[i], ib, l);
            int ls = iq1_s_scale(&x[i], ib);
            isum += panel_sub_block(idx, signs, ls, ls, y[i].qs + 32 * ib);
        }
        float dfac = loom_f16_to_f32(x[i].d) * 0.125f;
        acc = fmaf((float)isum, dfac * y[i].d, acc);
    }
    *s = acc;
}

void loom_iq1_m_iqp(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq1_m *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint16_t sc[4];
        iq1_m_words(&x[i], sc);
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int idx[4], signs[4];
            for (int l = 0; l < 4; l++) {
                idx[l] = iq1_m_index(&x[i], ib, l);
                signs[l] = iq1_m_nibble(&x[i], ib, l) & 8 ? -1 : 1;
            }
            isum += panel_sub_block(idx, signs, iq1_m_scale(sc, ib, 0), iq1_m_scale(sc, ib, 1), y[i].qs + 32 * ib);
        }
        float dfac = loom_f16_to_f32(iq1_m_d(sc)) * 0.125f;
        acc = fmaf((float)isum, dfac * y[i].d, acc);
    }
    *s = acc;
}
