/* helpers_avx2.h — the AVX2 helpers the x86 kernel files share (files built with -mavx2 -mfma -mf16c -mbmi2):
 * exact hardware F16 conversion, horizontal sums in exactly loom_hsum8/loom_hsum16's order, nibble and bit
 * unpacking, exact int8 dot lanes and the K-quant scale unpacking in vector registers. */
#ifndef LOOM_KERNELS_HELPERS_AVX2_H
#define LOOM_KERNELS_HELPERS_AVX2_H

#ifndef __AVX2__
#error "helpers_avx2.h is for files built with the AVX2 flags (*_avx2.c, *_avx512.c)"
#endif

#include <immintrin.h>

#include "kernels/helpers_scalar.h"

/* SIMD helpers for the x86 kernel files (compiled with -mavx2 -mfma -mf16c): exact hardware F16
 * conversion and horizontal sums in exactly loom_hsum8/loom_hsum16's order. */
static inline float loom_f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }

static inline float loom_hsum8_ps(__m256 v)
{
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v)); /* a[i] + a[i+4] */
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));                                          /* (0+2), (1+3) */
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* An 8x8 float transpose in registers: v[j] lane r = v[r] lane j on return. */
static inline void loom_transpose8_ps(__m256 v[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) { /* rows 0-3, then 4-7 */
        u[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xee);
        u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xee);
    }
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        v[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}

/* The packed Q4_K/Q5_K scales as 16 bytes: the 8 scales, then the 8 mins (as loom_k4_scales). Reads 16
 * bytes at packed (in a block the quants follow the 12 scale bytes). With u0..u2 the packed 32-bit words:
 * lanes u0 & 0x3f.., (u2 & 0x0f..) | ((u0 >> 6) & 0x03..) << 4, u1 & 0x3f.., ((u2 >> 4) & 0x0f..) |
 * ((u1 >> 6) & 0x03..) << 4, in vector operations. */
static inline __m128i loom_k4_scales_si128(const uint8_t *packed)
{
    __m128i v = _mm_loadu_si128((const __m128i *)packed);   /* u0, u1, u2, - */
    __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* u0, u2, u1, u2 */
    __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); /* u0, u0, u1, u1 */
    __m128i low = _mm_and_si128(_mm_srlv_epi32(a, _mm_set_epi32(4, 0, 0, 0)),
                                _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    __m128i high = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm_or_si128(low, high);
}

/* Lane k < 4: m[2k] * (bsums[4k] + bsums[4k+1]) + m[2k+1] * (bsums[4k+2] + bsums[4k+3]), with the mins
 * in bytes 8..15 of scales_mins. Exact in int32. */
static inline __m128i loom_k4_mins_dot(__m128i scales_mins, const int16_t bsums[16])
{
    __m256i bs = _mm256_loadu_si256((const __m256i *)bsums);
    __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(scales_mins, 8)), pairs);
}

/* The 32 quants of a Q4_0-style nibble block as bytes in element order (low nibbles, then high). */
static inline __m256i loom_nibbles_epi8(const uint8_t qs[16])
{
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(15));
}

/* Byte j = 0xff where bit j of the little-endian 32 bits at p is set, else 0. */
static inline __m256i loom_bits_epi8(const uint8_t p[4])
{
    uint32_t v;
    memcpy(&v, p, 4);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                                               0x0101010101010101, 0));
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
}

/* int32 lane l = sum of x[k] * y[k] over bytes k = 4l..4l+3, for signed bytes with |x| <= 127 and y in
 * [-127, 127] (the sign trick is exact there). */
static inline __m256i loom_dot_i8_lanes(__m256i x, __m256i y)
{
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* Exact sum of the 4 int32 lanes (wrapping). */
static inline int32_t loom_hsum_i32x4(__m128i v)
{
    v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
    return _mm_cvtsi128_si32(_mm_add_epi32(v, _mm_shuffle_epi32(v, 1)));
}

/* Exact sum of the 8 int32 lanes (wrapping). */
static inline int32_t loom_hsum_i32x8(__m256i v)
{
    return loom_hsum_i32x4(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

/* Lane k (< 4) = exact sum of the 8 int32 lanes of p[k] (wrapping). */
static inline __m128i loom_hsum_i32x8_x4(__m256i p0, __m256i p1, __m256i p2, __m256i p3)
{
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Byte-shuffle pattern that broadcasts int16 lane j of a 128-bit lane. */
static inline __m256i loom_pick16(int j) { return _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)); }

#endif
