/* iq1_avx2.c — AVX2 dot products of the 1-bit lattice types IQ1_S and IQ1_M x Q8_K (vec_dot and IQ panel orders,
 * the panel also for 4 activation rows at once), with the same exact integer lanes and float orders as iq1.c,
 * bit-identical to the scalar kernels. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/iq1_grid.h"
#include "kernels/protos.h"

/* The 32 grid values of four groups (indices i0..i3) as signed bytes in element order. */
static inline __m256i grid4(int i0, int i1, int i2, int i3)
{
    return _mm256_set_epi64x((long long)loom_iq1s_grid[i3], (long long)loom_iq1s_grid[i2],
                             (long long)loom_iq1s_grid[i1], (long long)loom_iq1s_grid[i0]);
}

/* The 4 grid indices packed as 16-bit words (BMI2): low bytes from qs[0..3], bits 8..10 from high[l] where the
 * 16-bit `high` holds group l's 3 high bits at bits 4l..4l+2 (bit 4l+3 clear). */
static inline __m256i grid_packed(const uint8_t *qs, uint32_t high)
{
    uint32_t q;
    memcpy(&q, qs, 4);
    uint64_t idx = _pdep_u64(q, 0x00ff00ff00ff00ffull) | _pdep_u64(high, 0x0f000f000f000f00ull);
    return grid4((int)(idx & 0xffff), (int)((idx >> 16) & 0xffff), (int)((idx >> 32) & 0xffff), (int)(idx >> 48));
}

/* int32 lane k (< 8) = scale16's int16 scale for bytes 4k..4k+3 times the sum over them of g * q, for |g| <= 9 and
 * q in [-127, 127] (the sign trick is exact there, and the int16 pair sums do not saturate). */
static inline __m256i scaled_lanes(__m256i g, __m256i q8, __m256i scale16)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(g, g), _mm256_sign_epi8(q8, g)), scale16);
}

/* Eight int16 lanes of lo, then eight of hi: the scales of the two halves of a 32-element sub-block for madd. */
static inline __m256i halves16(int lo, int hi)
{
    return _mm256_set_m128i(_mm_set1_epi16((short)hi), _mm_set1_epi16((short)lo));
}

/* Eight times the grid bytes (each in -1..1), wrapping byte adds (a 16-bit shift would carry across bytes). */
static inline __m256i times8(__m256i g)
{
    g = _mm256_add_epi8(g, g);
    g = _mm256_add_epi8(g, g);
    return _mm256_add_epi8(g, g);
}

/* IQ1_S sub-block ib: its grid values, its scale 2 ls + 1 and its delta sign (-1 or 1). */
static inline __m256i iq1_s_sub(const struct loom_block_iq1_s *x, int ib, int *ls, int *sign)
{
    const uint8_t *qs = x->qs + 4 * ib;
    int qh = x->qh[ib];
    *ls = 2 * ((qh >> 12) & 7) + 1;
    *sign = qh & 0x8000 ? -1 : 1;
    return grid_packed(qs, (uint32_t)_pdep_u32((uint32_t)qh & 0xfff, 0x7777));
}

/* IQ1_M block: the four scale words and the F16 super-scale spread over their top nibbles. */
static inline uint16_t iq1_m_scales(const struct loom_block_iq1_m *x, uint16_t sc[4])
{
    memcpy(sc, x->scales, 8);
    return (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

/* IQ1_M sub-block ib: its grid values, *delta = its groups' delta signs as bytes (1 or -1 over each group of 8)
 * and *scale16 its half scales. */
static inline __m256i iq1_m_sub(const struct loom_block_iq1_m *x, const uint16_t sc[4], int ib, __m256i *delta,
                                __m256i *scale16)
{
    const uint8_t *qs = x->qs + 4 * ib, *qh = x->qh + 2 * ib;
    int shift = 6 * (ib % 2), word = sc[ib / 2];
    *scale16 = halves16(2 * ((word >> shift) & 7) + 1, 2 * ((word >> (shift + 3)) & 7) + 1);
    uint32_t h = (uint32_t)(qh[0] | qh[1] << 8);
    /* byte l = 0xff where group l's delta is negative (bit 4l+3 of h), then spread over the group's 8 bytes */
    uint32_t neg = (uint32_t)_pdep_u32(_pext_u32(h, 0x8888), 0x01010101) * 0xffu;
    *delta = _mm256_or_si256(_mm256_cvtepi8_epi64(_mm_cvtsi32_si128((int)neg)), _mm256_set1_epi8(1));
    return grid_packed(qs, h & 0x7777);
}

void loom_iq1_s_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq1_s *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    float acc1 = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m256i lanes = _mm256_setzero_si256();
        int32_t dsum = 0;
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            int ls, sign;
            __m256i g = iq1_s_sub(&x[i], ib, &ls, &sign);
            __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            lanes = _mm256_add_epi32(lanes, scaled_lanes(g, q8, _mm256_set1_epi16((short)ls)));
            dsum += (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]) * sign * ls;
        }
        float d = y[i].d * loom_f16c_to_f32(x[i].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
        acc1 = fmaf((float)dsum, d, acc1);
    }
    float delta = 0.125f * acc1;
    *s = loom_hsum8_ps(acc) + delta;
}

void loom_iq1_m_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq1_m *x = w;
    const struct loom_block_q8_k *y = a;
    const __m256i ones = _mm256_set1_epi8(1);
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        uint16_t sc[4], dw = iq1_m_scales(&x[i], sc);
        __m256i lanes = _mm256_setzero_si256(), dlanes = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int ib = 0; ib < 8; ib++) {
            __m256i delta, scale16, g = iq1_m_sub(&x[i], sc, ib, &delta, &scale16);
            __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[i].qs + 32 * ib));
            lanes = _mm256_add_epi32(lanes, scaled_lanes(g, q8, scale16));
            __m256i dq = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q8, delta));
            dlanes = _mm256_add_epi32(dlanes, _mm256_madd_epi16(dq, scale16));
        }
        __m256 d = _mm256_set1_ps(y[i].d * loom_f16c_to_f32(dw));
        acc1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc1);
        acc2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dlanes), acc2);
    }
    *s = fmaf(loom_hsum8_ps(acc2), 0.125f, loom_hsum8_ps(acc1));
}

/* The IQ panel form of one block (iqp.cpp iqp_decode_iq1_s/m): v[ib] = 8 * grid + delta (delta +-1, so |v| <= 9)
 * per sub-block and s16[ib] its half scales as madd operands; returns d_w / 8. */
static inline float panel_iq1_s(const void *block, __m256i v[8], __m256i s16[8])
{
    const struct loom_block_iq1_s *x = block;
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ib++) {
        int ls, sign;
        __m256i g = iq1_s_sub(x, ib, &ls, &sign);
        v[ib] = _mm256_add_epi8(times8(g), _mm256_set1_epi8((char)sign));
        s16[ib] = _mm256_set1_epi16((short)ls);
    }
    return loom_f16c_to_f32(x->d) * 0.125f;
}

static inline float panel_iq1_m(const void *block, __m256i v[8], __m256i s16[8])
{
    const struct loom_block_iq1_m *x = block;
    uint16_t sc[4], dw = iq1_m_scales(x, sc);
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ib++) {
        __m256i delta, g = iq1_m_sub(x, sc, ib, &delta, &s16[ib]);
        v[ib] = _mm256_add_epi8(times8(g), delta);
    }
    return loom_f16c_to_f32(dw) * 0.125f;
}

/* Exact isum of one panel block with one Q8_K block: sum over sub-blocks of scale * v . q. */
static inline int32_t panel_isum(const __m256i v[8], const __m256i s16[8], const int8_t *q8)
{
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib++)
        sum = _mm256_add_epi32(sum, scaled_lanes(v[ib], _mm256_loadu_si256((const __m256i *)(q8 + 32 * ib)), s16[ib]));
    return loom_hsum_i32x8(sum);
}

/* IQ panel order (iq1.c loom_iq1_s_iqp): acc = fma(isum, (d_w / 8) * d_a, acc) per block, for `rows` activation
 * rows a_stride bytes apart, each block decoded once for all of them. */
static inline void panel_rows(int64_t n, float *s, const void *w, size_t block_bytes, const void *a, size_t a_stride,
                              int rows, float (*panel)(const void *, __m256i *, __m256i *))
{
    float acc[4] = {0};
    __m256i v[8], s16[8];
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        float dfac = panel((const char *)w + (size_t)i * block_bytes, v, s16);
        for (int k = 0; k < rows; k++) {
            const struct loom_block_q8_k *y = (const struct loom_block_q8_k *)((const char *)a + k * a_stride) + i;
            acc[k] = fmaf((float)panel_isum(v, s16, y->qs), dfac * y->d, acc[k]);
        }
    }
    memcpy(s, acc, sizeof(float) * (size_t)rows);
}

void loom_iq1_s_iqp_avx2(int64_t n, float *s, const void *w, const void *a)
{
    panel_rows(n, s, w, sizeof(struct loom_block_iq1_s), a, 0, 1, panel_iq1_s);
}

void loom_iq1_s_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    panel_rows(n, s, w, sizeof(struct loom_block_iq1_s), a, a_stride, 4, panel_iq1_s);
}

void loom_iq1_m_iqp_avx2(int64_t n, float *s, const void *w, const void *a)
{
    panel_rows(n, s, w, sizeof(struct loom_block_iq1_m), a, 0, 1, panel_iq1_m);
}

void loom_iq1_m_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    panel_rows(n, s, w, sizeof(struct loom_block_iq1_m), a, a_stride, 4, panel_iq1_m);
}
