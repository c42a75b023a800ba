/* iq_grid_avx2.h — what the AVX2 kernels of the grid IQ types (iq2_avx2.c, iq3_avx2.c) share: one sub-block of 32
 * weights (grid bytes, 32 sign bits, two 4-bit scales) against 32 Q8_K quants as the 8 exact int32 lanes of
 * iq_decode.h's loom_iq_lanes, and the kernel bodies in the float orders of the scalar ones (vec_dot: the
 * reference's AVX2 order; iqp: its IQ panel order, also for 4 or 8 activation rows at once). */
#ifndef LOOM_KERNELS_X86_IQ_GRID_AVX2_H
#define LOOM_KERNELS_X86_IQ_GRID_AVX2_H

#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/iq_grids.h"
#include "kernels/protos.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define IQG_VNNI 1
#define IQG_ISA avx512
#else
#define IQG_VNNI 0
#define IQG_ISA avx2
#endif

/* A decoded sub-block: grid magnitudes in weight order, 0xff in the bytes of the negative weights, and the scales
 * ls of its two halves of 16. */
struct iqg_sub {
    __m256i grid, mask;
    int ls_lo, ls_hi;
};

/* The 8-byte negation mask of a sign byte s (byte j 0xff when bit j is set), as a constant expression, and its
 * table, built by the compiler, for every 7-bit sign index k of the IQ2_XXS, IQ2_XS and IQ3_XXS formats (whose
 * eighth sign is the parity of the seven, as in loom_iq2_ksigns; the AVX2 tests hold the two equal). */
#define IQG_M(s)                                                                                                   \
    ((s) & 1 ? 0xffull : 0) | ((s) & 2 ? 0xff00ull : 0) | ((s) & 4 ? 0xff0000ull : 0) |                          \
        ((s) & 8 ? 0xff000000ull : 0) | ((s) & 16 ? 0xff00000000ull : 0) | ((s) & 32 ? 0xff0000000000ull : 0) |  \
        ((s) & 64 ? 0xff000000000000ull : 0) | ((s) & 128 ? 0xff00000000000000ull : 0)
#define IQG_PARITY7(k) (((k) ^ (k) >> 1 ^ (k) >> 2 ^ (k) >> 3 ^ (k) >> 4 ^ (k) >> 5 ^ (k) >> 6) & 1)
#define IQG_K(k) IQG_M((k) | IQG_PARITY7(k) << 7)
#define IQG_4(F, k) F(k), F((k) + 1), F((k) + 2), F((k) + 3)
#define IQG_16(F, k) IQG_4(F, k), IQG_4(F, (k) + 4), IQG_4(F, (k) + 8), IQG_4(F, (k) + 12)
#define IQG_64(F, k) IQG_16(F, k), IQG_16(F, (k) + 16), IQG_16(F, (k) + 32), IQG_16(F, (k) + 48)
static const uint64_t iqg_ksign_mask[128] = {IQG_64(IQG_K, 0), IQG_64(IQG_K, 64)};

/* The mask of 4 sign indices (7 bits each, from bit 0 of v). */
static inline __m256i iqg_ksign_mask4(uint32_t v)
{
    return _mm256_set_epi64x((long long)iqg_ksign_mask[v >> 21 & 127], (long long)iqg_ksign_mask[v >> 14 & 127],
                             (long long)iqg_ksign_mask[v >> 7 & 127], (long long)iqg_ksign_mask[v & 127]);
}

/* The mask of 4 sign bytes (byte l for weights 8l..8l+7). */
static inline __m256i iqg_sign_mask(uint32_t signs)
{
    const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)signs), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
}

/* The two halves' integer scales 2 ls + 1 as int16 lanes (the low 128 bits: weights 0..15); split: a constant,
 * 0 for the types with one scale per sub-block (no branch on the data either way). */
static inline __m256i iqg_scales(const struct iqg_sub *u, const int split)
{
    if (!split)
        return _mm256_set1_epi16((short)(2 * u->ls_lo + 1));
    /* the pair as one dword in every lane, then int16 0 spread over the low 128 bits and int16 1 over the high */
    const __m256i pick = _mm256_set_epi64x(0x0302030203020302, 0x0302030203020302, 0x0100010001000100,
                                           0x0100010001000100);
    uint32_t pair = (uint32_t)(2 * u->ls_lo + 1) | (uint32_t)(2 * u->ls_hi + 1) << 16;
    return _mm256_shuffle_epi8(_mm256_set1_epi32((int)pair), pick);
}

/* The grid bytes with their signs applied (exact: every grid byte is nonzero and at most 62). */
static inline __m256i iqg_signed(__m256i grid, __m256i mask) { return _mm256_sub_epi8(_mm256_xor_si256(grid, mask), mask); }

/* acc + lane l of (2 ls + 1) * sum over weights 4l..4l+3 of grid * sign * q8, exact: the quants signed by the
 * signed grid (VPSIGNB; the grid has no zero byte), then VPMADDUBSW of the unsigned grid bytes (<= 62) with them
 * (|q8| <= 127) cannot saturate. sgrid: iqg_signed; scales: iqg_scales. */
static inline __m256i iqg_acc(__m256i acc, __m256i grid, __m256i sgrid, __m256i scales, const int8_t *q8)
{
    __m256i q = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)q8), sgrid);
#if IQG_VNNI
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(grid, q), scales); /* the same sums, one instruction */
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(grid, q), scales));
#endif
}

/* Kernel names: loom_<t>_<order>_avx2, or _avx512 where the including file is built with the AVX-512 flags
 * (x86/iq2_avx512.c, iq3_avx512.c: the same kernels with VPDPWSSD in iqg_acc). */
#define IQG_NAME3(t, order, isa) loom_##t##_##order##_##isa
#define IQG_NAME2(t, order, isa) IQG_NAME3(t, order, isa)
#define IQG_NAME(t, order) IQG_NAME2(t, order, IQG_ISA)

/* The kernels of one type T (struct loom_block_<t>) from its sub-block decoder decode_<t>(x, b, &sub) (SPLIT: 1
 * when the halves of a sub-block have their own scales):
 *   loom_<t>_vec_dot_<isa>    acc = fma(d_w * d_a, lanes, acc), POST(hsum8(acc))
 *   loom_<t>_iqp_<isa>        acc = fma(sum of lanes, DFAC(d_w) * d_a, acc)
 *   loom_<t>_iqp_rows4_<isa>, loom_<t>_iqp_rows8_<isa>   the same for 4 or 8 activation rows, each block decoded
 *                             once for all (token k in lane k). <isa>: IQG_NAME. */
#define LOOM_IQ_GRID_AVX2_KERNELS(t, POST, DFAC, SPLIT)                                                                    \
    static inline __m256i t##_block_lanes(const struct loom_block_##t *x, const int8_t *q8)                     \
    {                                                                                                            \
        __m256i sum = _mm256_setzero_si256();                                                                    \
        for (int b = 0; b < 8; b++) {                                                                            \
            struct iqg_sub u;                                                                                    \
            decode_##t(x, b, &u);                                                                                \
            sum = iqg_acc(sum, u.grid, iqg_signed(u.grid, u.mask), iqg_scales(&u, SPLIT), q8 + 32 * b);          \
        }                                                                                                        \
        return sum;                                                                                              \
    }                                                                                                            \
    void IQG_NAME(t, vec_dot)(int64_t n, float *s, const void *w, const void *a)                       \
    {                                                                                                            \
        const struct loom_block_##t *x = w;                                                                      \
        const struct loom_block_q8_k *y = a;                                                                     \
        __m256 acc = _mm256_setzero_ps();                                                                        \
        for (int64_t i = 0; i < n / LOOM_QK_K; i++) {                                                            \
            __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * y[i].d);                                        \
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(t##_block_lanes(&x[i], y[i].qs)), acc);                 \
        }                                                                                                        \
        *s = POST(loom_hsum8_ps(acc));                                                                           \
    }                                                                                                            \
    void IQG_NAME(t, iqp)(int64_t n, float *s, const void *w, const void *a)                                 \
    {                                                                                                            \
        const struct loom_block_##t *x = w;                                                                      \
        const struct loom_block_q8_k *y = a;                                                                     \
        float acc = 0;                                                                                           \
        for (int64_t i = 0; i < n / LOOM_QK_K; i++)                                                              \
            acc = fmaf((float)loom_hsum_i32x8(t##_block_lanes(&x[i], y[i].qs)),                                 \
                       DFAC(loom_f16c_to_f32(x[i].d)) * y[i].d, acc);                                            \
        *s = acc;                                                                                                \
    }                                                                                                            \
    /* ROWS (4 or 8) activation rows: the block's sub-blocks decoded once for all of them */                 \
    static inline __attribute__((always_inline)) void t##_iqp_rows(int64_t n, float *s, const void *w,         \
                                                                  const void *a, size_t a_stride,          \
                                    const int rows)                                                              \
    {                                                                                                            \
        const struct loom_block_##t *x = w;                                                                      \
        const struct loom_block_q8_k *y[8];                                                                      \
        for (int k = 0; k < rows; k++)                                                                           \
            y[k] = (const struct loom_block_q8_k *)((const char *)a + k * a_stride);                            \
        __m256 acc = _mm256_setzero_ps();                                                                        \
        for (int64_t i = 0; i < n / LOOM_QK_K; i++) {                                                            \
            __m256i sum[8];                                                                                      \
            for (int k = 0; k < rows; k++)                                                                       \
                sum[k] = _mm256_setzero_si256();                                                                 \
            for (int b = 0; b < 8; b++) {                                                                        \
                struct iqg_sub u;                                                                                \
                decode_##t(&x[i], b, &u);                                                                        \
                __m256i scales = iqg_scales(&u, SPLIT), sgrid = iqg_signed(u.grid, u.mask);                      \
                _Pragma("GCC unroll 8") for (int k = 0; k < rows; k++)                                           \
                    sum[k] = iqg_acc(sum[k], u.grid, sgrid, scales, y[k][i].qs + 32 * b);                        \
            }                                                                                                    \
            float da[8] = {0};                                                                                   \
            for (int k = 0; k < rows; k++)                                                                       \
                da[k] = y[k][i].d;                                                                               \
            __m128i lo = loom_hsum_i32x8_x4(sum[0], sum[1], sum[2], sum[3]);                                     \
            __m128i hi = rows == 8 ? loom_hsum_i32x8_x4(sum[4], sum[5], sum[6], sum[7]) : _mm_setzero_si128();   \
            __m256 d = _mm256_mul_ps(_mm256_set1_ps(DFAC(loom_f16c_to_f32(x[i].d))), _mm256_loadu_ps(da));       \
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_set_m128i(hi, lo)), d, acc);                         \
        }                                                                                                        \
        float out[8];                                                                                            \
        _mm256_storeu_ps(out, acc);                                                                              \
        memcpy(s, out, sizeof(float) * (size_t)rows);                                                            \
    }                                                                                                            \
    void IQG_NAME(t, iqp_rows4)(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)        \
    {                                                                                                            \
        t##_iqp_rows(n, s, w, a, a_stride, 4);                                                                   \
    }                                                                                                            \
    void IQG_NAME(t, iqp_rows8)(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)        \
    {                                                                                                            \
        t##_iqp_rows(n, s, w, a, a_stride, 8);                                                                   \
    }

#endif
