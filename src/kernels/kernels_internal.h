/* kernels_internal.h — what the kernel families share: the quantized block layouts (byte-compatible with
 * GGUF/ggml), the reduction helpers that fix loom's float summation order, and the prototypes of every
 * scalar and SIMD kernel the dispatcher (types.c) installs into the trait table. */
#ifndef LOOM_KERNELS_INTERNAL_H
#define LOOM_KERNELS_INTERNAL_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/types.h"

#define LOOM_QK8_0 32
#define LOOM_QK_K 256

/* Q8_0: 32 weights q[i] in [-127, 127] with one F16 scale d; value = d * q[i]. 34 bytes. */
struct loom_block_q8_0 {
    uint16_t d;     /* F16 scale */
    int8_t qs[32];  /* signed quants, element i at qs[i] */
};
_Static_assert(sizeof(struct loom_block_q8_0) == 34, "Q8_0 block is 34 bytes");

/* Q8_K (activation type of the K-quants): 256 values with an F32 scale and the sums of each group of 16
 * quants (used to apply the weights' per-sub-block minimums). value = d * qs[i]. 292 bytes. */
struct loom_block_q8_k {
    float d;            /* F32 scale */
    int8_t qs[256];     /* signed quants in [-127, 127] */
    int16_t bsums[16];  /* bsums[j] = sum of qs[16j .. 16j+15] */
};
_Static_assert(sizeof(struct loom_block_q8_k) == 292, "Q8_K block is 292 bytes");

/* Q4_K: 256 weights in 8 sub-blocks of 32; each sub-block has a 6-bit scale sc and 6-bit min m, and
 * value = d*sc * q - dmin*m with q the 4-bit quant. scales[12] packs the 8 (sc, m) pairs:
 * sub-block j < 4: sc = scales[j] & 63, m = scales[j+4] & 63; j >= 4: sc = (scales[j+4] & 15) |
 * (scales[j-4] >> 6) << 4, m = (scales[j+4] >> 4) | (scales[j] >> 6) << 4. qs holds 4 groups of 32 bytes;
 * group g's low nibbles are sub-block 2g, its high nibbles sub-block 2g+1. 144 bytes. */
struct loom_block_q4_k {
    uint16_t d;          /* F16 super-scale of the scales */
    uint16_t dmin;       /* F16 super-scale of the mins */
    uint8_t scales[12];  /* packed 6-bit scales and mins */
    uint8_t qs[128];     /* 4-bit quants, layout above */
};
_Static_assert(sizeof(struct loom_block_q4_k) == 144, "Q4_K block is 144 bytes");

/* Q4_K x16: one 256-weight block column of 16 consecutive Q4_K rows, interleaved for 16-row SIMD lanes
 * (q4_k_x16.c), exactly as many bytes as the 16 standard blocks. qs[s][r] = bytes 4s..4s+3 of row r's
 * qs (low nibbles: sub-block 2(s/8) at positions 4(s%8)..+3; high nibbles: sub-block 2(s/8)+1). The
 * 6-bit scales sc[j] and mins m[j] of row r in 3 planes of 64 bytes, byte 4r + q (q < 4): sc_lo = low
 * nibbles of sc[q] | sc[4+q] << 4, m_lo = low nibbles of m[M(q)] | m[4+M(q)] << 4 with M = (0, 2, 1, 3),
 * hi = the top 2 bits of those four values at bits 0, 2, 4, 6. d and dmin: the rows' F16 super-scales. */
struct loom_block_q4_k_x16 {
    uint8_t qs[32][16][4];
    uint8_t sc_lo[64], m_lo[64], hi[64];
    uint16_t d[16], dmin[16];
};
_Static_assert(sizeof(struct loom_block_q4_k_x16) == 16 * sizeof(struct loom_block_q4_k), "Q4_K x16 is 16 blocks");

/* Q5_K: as Q4_K with a fifth bit per weight: element l of sub-block j (l < 32) has its high bit in
 * bit j of qh[l], so q = nibble + 16 * bit in [0, 31]. 176 bytes. */
struct loom_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[32];      /* bit j of qh[l]: high bit of element l of sub-block j */
    uint8_t qs[128];     /* low 4 bits, laid out as in Q4_K */
};
_Static_assert(sizeof(struct loom_block_q5_k) == 176, "Q5_K block is 176 bytes");

/* Q6_K: 256 weights in 16 sub-blocks of 16 with signed 8-bit scales; value = d * scales[s] * (q - 32) with
 * q a 6-bit quant. Two halves of 128 weights; in half h, element 32c + l (c < 4, l < 32) takes its low
 * 4 bits from ql[64h + l + 32(c & 1)] (low nibble for c < 2, high nibble for c >= 2) and its top 2 bits
 * from bits 2c, 2c+1 of qh[32h + l]; its scale is scales[8h + 2c + l/16]. 210 bytes. */
struct loom_block_q6_k {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;          /* F16 super-scale */
};
_Static_assert(sizeof(struct loom_block_q6_k) == 210, "Q6_K block is 210 bytes");

/* Q4_0: 32 weights, 4-bit quants q with one F16 scale d; value = d * (q - 8). Element j < 16 is the low
 * nibble of qs[j], element j + 16 its high nibble. 18 bytes. */
struct loom_block_q4_0 {
    uint16_t d;      /* F16 scale */
    uint8_t qs[16];  /* nibbles, layout above */
};
_Static_assert(sizeof(struct loom_block_q4_0) == 18, "Q4_0 block is 18 bytes");

/* Q4_1: as Q4_0 with an F16 offset m and unsigned quants; value = d * q + m. 20 bytes. */
struct loom_block_q4_1 {
    uint16_t d;      /* F16 scale */
    uint16_t m;      /* F16 offset (the block minimum) */
    uint8_t qs[16];  /* nibbles, laid out as in Q4_0 */
};
_Static_assert(sizeof(struct loom_block_q4_1) == 20, "Q4_1 block is 20 bytes");

/* Q5_0: Q4_0's nibbles plus a fifth bit per weight: bit j of qh (little-endian 32 bits) is the high bit
 * of element j, so q = nibble + 16 * bit in [0, 31]; value = d * (q - 16). 22 bytes. */
struct loom_block_q5_0 {
    uint16_t d;      /* F16 scale */
    uint8_t qh[4];   /* high bits, element j at bit j */
    uint8_t qs[16];  /* low 4 bits, laid out as in Q4_0 */
};
_Static_assert(sizeof(struct loom_block_q5_0) == 22, "Q5_0 block is 22 bytes");

/* Q5_1: Q5_0's quants, unsigned, with an F16 offset; value = d * q + m. 24 bytes. */
struct loom_block_q5_1 {
    uint16_t d;      /* F16 scale */
    uint16_t m;      /* F16 offset */
    uint8_t qh[4];
    uint8_t qs[16];
};
_Static_assert(sizeof(struct loom_block_q5_1) == 24, "Q5_1 block is 24 bytes");

/* Q8_1 (activation type of Q4_1/Q5_1): Q8_0 plus s = d * sum(qs) as F16, which carries the weights'
 * offset term. 36 bytes. */
struct loom_block_q8_1 {
    uint16_t d;      /* F16 scale */
    uint16_t s;      /* F16 d * sum of qs */
    int8_t qs[32];
};
_Static_assert(sizeof(struct loom_block_q8_1) == 36, "Q8_1 block is 36 bytes");

/* Q2_K: 256 weights in 16 sub-blocks of 16; scales[s] holds sub-block s's 4-bit scale (low nibble) and
 * 4-bit min (high nibble); value = d * sc * q - dmin * m with q a 2-bit quant. Element 128h + 32k + l
 * (h < 2, k < 4, l < 32) is bits 2k, 2k+1 of qs[32h + l] and belongs to sub-block 8h + 2k + l/16. 84 bytes. */
struct loom_block_q2_k {
    uint8_t scales[16];  /* low nibble scale, high nibble min */
    uint8_t qs[64];      /* 2-bit quants, layout above */
    uint16_t d;          /* F16 super-scale of the scales */
    uint16_t dmin;       /* F16 super-scale of the mins */
};
_Static_assert(sizeof(struct loom_block_q2_k) == 84, "Q2_K block is 84 bytes");

/* Q3_K: 256 weights in 16 sub-blocks of 16 with signed 6-bit scales; value = d * (sc - 32) * q, q in
 * [-4, 3]. Element 128h + 32k + l has its low 2 bits at bits 2k, 2k+1 of qs[32h + l] (as Q2_K) and
 * q = low - 4 unless bit 4h + k of hmask[l] is set. Sub-block s's scale: low 4 bits are the low nibble
 * of scales[s] (s < 8) or the high nibble of scales[s - 8], top 2 bits are bits 2(s/4), 2(s/4)+1 of
 * scales[8 + s % 4]. 110 bytes. */
struct loom_block_q3_k {
    uint8_t hmask[32];   /* high bits, layout above */
    uint8_t qs[64];      /* low 2 bits */
    uint8_t scales[12];  /* packed 6-bit scales */
    uint16_t d;          /* F16 super-scale */
};
_Static_assert(sizeof(struct loom_block_q3_k) == 110, "Q3_K block is 110 bytes");

/* IQ4_NL: 32 weights as 4-bit indices into the non-linear table loom_iq4nl_values; value = d *
 * values[index]. Nibble layout as Q4_0. 18 bytes. */
struct loom_block_iq4_nl {
    uint16_t d;      /* F16 scale */
    uint8_t qs[16];  /* indices, laid out as in Q4_0 */
};
_Static_assert(sizeof(struct loom_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");

/* IQ4_XS: 256 weights in 8 sub-blocks of 32 as IQ4_NL indices with 6-bit sub-block scales; value =
 * d * (ls - 32) * values[index]. Sub-block s: ls = nibble s % 2 of scales_l[s / 2] | (bits 2s, 2s+1 of
 * scales_h) << 4; its 32 indices are qs[16s .. 16s+15] laid out as in Q4_0. 136 bytes. */
struct loom_block_iq4_xs {
    uint16_t d;          /* F16 super-scale */
    uint16_t scales_h;   /* top 2 bits of the 8 scales */
    uint8_t scales_l[4]; /* low 4 bits of the 8 scales */
    uint8_t qs[128];
};
_Static_assert(sizeof(struct loom_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");

/* The 16 values of the IQ4_NL/IQ4_XS non-linear grid (llama.cpp ggml-common.h kvalues_iq4nl). */
static const int8_t loom_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Weight-quantizer helpers (semantics of llama.cpp ggml-quants.c, which the reference path must
 * reproduce byte for byte). Round to nearest, ties to even, by the 1.5 * 2^23 trick the reference uses
 * (nearest_int): exact for |x| < 2^22; larger or non-finite inputs give the same wrapped bits as there. */
static inline int loom_nearest_int(float x)
{
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* (int8_t)x as x86 compiles it (cvttss2si, then the low byte): truncation toward zero; NaN and values
 * outside int32 give 0x80000000, whose low byte is 0. */
static inline int loom_trunc_i8(float x)
{
    int32_t i = x > -2147483649.f && x < 2147483648.f ? (int32_t)x : INT32_MIN;
    return (int8_t)(uint8_t)(uint32_t)i;
}

/* The element of x[n] of largest magnitude, with its sign; the first one on ties, 0 if all are 0 (the
 * `max` of ggml-quants.c quantize_row_q4_0_ref / q5_0_ref). */
static inline float loom_signed_absmax(const float *x, int n)
{
    float amax = 0, max = 0;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

/* *min and *max of x[n], from FLT_MAX and -FLT_MAX (quantize_row_q4_1_ref / q5_1_ref). */
static inline void loom_min_max(const float *x, int n, float *min, float *max)
{
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min)
            *min = x[j];
        if (x[j] > *max)
            *max = x[j];
    }
}

/* Reduction helpers. loom sums exactly as ggml-cpu's x86 kernels do (llama.cpp ggml-cpu/arch/x86/quants.c
 * hsum_float_8 and the _mm512_reduce_add_ps tree), so that the last bits agree with the reference. */
static inline float loom_hsum8(const float a[8])
{
    float r0 = a[0] + a[4], r1 = a[1] + a[5], r2 = a[2] + a[6], r3 = a[3] + a[7];
    return (r0 + r2) + (r1 + r3);
}

static inline float loom_hsum16(const float a[16])
{
    float h[8];
    for (int i = 0; i < 8; i++)
        h[i] = a[i] + a[i + 8];
    return loom_hsum8(h);
}

/* sum + the t-element F32 dot tail that follows the 64-element main loop, in the order of the reference
 * binary (GCC vectorized ggml_vec_dot_f32's leftover loop for Zen4): while 16 or more remain, and then
 * once if 8 or more remain, each product is rounded and added in order; the last < 8 use FMA. */
static inline float loom_f32_dot_tail(const float *x, const float *y, int64_t t, float sum)
{
    int64_t unfused = (t & ~(int64_t)15) + ((t & 15) >= 8 ? 8 : 0), i = 0;
    for (; i < unfused; i++) {
        float p = x[i] * y[i];
        sum += p;
    }
    for (; i < t; i++)
        sum = fmaf(x[i], y[i], sum);
    return sum;
}

/* Unpack the 8 six-bit scales and mins of a Q4_K/Q5_K block. */
static inline void loom_k4_scales(const uint8_t packed[12], uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = packed[j] & 63;
        m[j] = packed[j + 4] & 63;
        sc[j + 4] = (uint8_t)((packed[j + 8] & 15) | ((packed[j] >> 6) << 4));
        m[j + 4] = (uint8_t)((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
    }
}

#ifdef __AVX2__
#include <immintrin.h>

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

/* Exact sum of the 8 int32 lanes (wrapping). */
static inline int32_t loom_hsum_i32x8(__m256i v)
{
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
    return _mm_cvtsi128_si32(_mm_add_epi32(r, _mm_shuffle_epi32(r, 1)));
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

#ifdef __AVX512F__
static inline float loom_hsum16_ps(__m512 v)
{
    return loom_hsum8_ps(_mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v)));
}
#endif

/* s[k] = dot(w, a + k * a_stride bytes) for k < 4: four activation rows against one weight row, each
 * bit-identical to the single-row dot it stands for (loom_kernels_matmul_dot4), sharing the unpacking. */
typedef void (*loom_vec_dot4_fn)(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
/* The same for 8 activation rows (loom_kernels_matmul_dot8). */
typedef void (*loom_vec_dot8_fn)(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);

/* --- scalar kernels (the reference set; always available) --- */
void loom_f32_to_float(const void *src, float *dst, int64_t n);
void loom_f32_from_float(const float *src, void *dst, int64_t n);
void loom_f32_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_f16_to_float(const void *src, float *dst, int64_t n);
void loom_f16_from_float(const float *src, void *dst, int64_t n);
void loom_f16_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_to_float(const void *src, float *dst, int64_t n);
void loom_bf16_from_float(const float *src, void *dst, int64_t n);
void loom_bf16_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_f32_dot_gemm(int64_t n, float *s, const void *w, const void *a);
void loom_f16_dot_gemm(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_dot_gemm(int64_t n, float *s, const void *w, const void *a);
void loom_q8_0_to_float(const void *src, float *dst, int64_t n);
void loom_q8_0_from_float(const float *src, void *dst, int64_t n);
void loom_q8_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q8_k_to_float(const void *src, float *dst, int64_t n);
void loom_q8_k_from_float(const float *src, void *dst, int64_t n);
void loom_q4_k_to_float(const void *src, float *dst, int64_t n);
void loom_q4_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_vec_dot_repacked(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_vec_dot_repacked_x4(int64_t n, float *s, const void *w, const void *a);
/* Q4_K x16 (q4_k_x16.c): pack 16 standard rows (row_bytes apart) of n_in elements into n_in / 256 x16
 * blocks at dst; unpack row r (< 16) of such a group into n_in / 256 standard blocks at dst (bytewise the
 * original). */
void loom_q4_k_x16_pack(const void *rows, size_t row_bytes, void *dst, int64_t n_in);
void loom_q4_k_x16_unpack_row(const void *group, int r, void *dst, int64_t n_in);
/* y[r] (r < 16) = dot of row r of an x16 group with one Q8_K row of n elements, in the order of
 * loom_q4_k_vec_dot_repacked (bit-identical to it per row). The scalar oracle of the SIMD x16 dots. */
void loom_q4_k_x16_dot(int64_t n, float *y, const void *w, const void *a);
void loom_q5_k_to_float(const void *src, float *dst, int64_t n);
void loom_q5_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_to_float(const void *src, float *dst, int64_t n);
void loom_q6_k_vec_dot(int64_t n, float *s, const void *w, const void *a);

/* --- weight quantizers: the reference path of llama.cpp's ggml-quants.c (quantize_row_<type>_ref, no
 * importance matrix), bytewise equal to it; n floats (n a multiple of the block size) into blocks --- */
void loom_q8_0_quantize(const float *src, void *dst, int64_t n);
void loom_q4_k_quantize(const float *src, void *dst, int64_t n);
void loom_q5_k_quantize(const float *src, void *dst, int64_t n);
void loom_q6_k_quantize(const float *src, void *dst, int64_t n);

/* ggml-quants.c make_qkx2_quants: fit x[n] (n <= 32) ~ scale * L - min with L[n] in 0..nmax, min <= 0,
 * weights w[n]: start from the (min, max) grid, then try nstep + 1 scales iscale = (rmin + 0.1 is + nmax)
 * / (max - min), refit (scale, min) by weighted least squares on each rounding and keep the one with the
 * smallest weighted error (absolute if use_mad, else squared). Returns the scale, *neg_min = -min >= 0.
 * Float operations in the reference's order (no FMA), so bit-identical. Q2_K, Q4_K, Q5_K. q4_k.c. */
float loom_k_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                           int nstep, int use_mad);

/* Fit one 256-weight super-block of Q4_K (nmax 15) or Q5_K (nmax 31), as ggml-quants.c
 * quantize_row_q4_K_ref / quantize_row_q5_K_ref: per 32-weight sub-block a (scale, min) pair by
 * make_qkx2_quants' weighted search (rmin, 0.1 step, nstep steps), both quantized to 6 bits against the
 * F16 super-scales *d and *dmin, then L[256] (0..nmax) recomputed from the rounded scales. q4_k.c. */
void loom_k4_quantize_superblock(const float x[256], int nmax, float rmin, int nstep, uint8_t L[256],
                                 uint8_t scales[12], uint16_t *d, uint16_t *dmin);

void loom_q4_0_to_float(const void *src, float *dst, int64_t n);
void loom_q4_0_quantize(const float *src, void *dst, int64_t n);
void loom_q4_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q4_1_to_float(const void *src, float *dst, int64_t n);
void loom_q4_1_quantize(const float *src, void *dst, int64_t n);
void loom_q4_1_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q5_0_to_float(const void *src, float *dst, int64_t n);
void loom_q5_0_quantize(const float *src, void *dst, int64_t n);
void loom_q5_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q5_1_to_float(const void *src, float *dst, int64_t n);
void loom_q5_1_quantize(const float *src, void *dst, int64_t n);
void loom_q5_1_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q8_1_to_float(const void *src, float *dst, int64_t n);
void loom_q8_1_from_float(const float *src, void *dst, int64_t n);
void loom_q2_k_to_float(const void *src, float *dst, int64_t n);
void loom_q2_k_quantize(const float *src, void *dst, int64_t n);
void loom_q2_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q3_k_to_float(const void *src, float *dst, int64_t n);
void loom_q3_k_quantize(const float *src, void *dst, int64_t n);
void loom_q3_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_to_float(const void *src, float *dst, int64_t n);
void loom_iq4_nl_quantize(const float *src, void *dst, int64_t n);
void loom_iq4_nl_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_to_float(const void *src, float *dst, int64_t n);
void loom_iq4_xs_quantize(const float *src, void *dst, int64_t n);
void loom_iq4_xs_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_dot_gemm(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_dot_panel(int64_t n, float *s, const void *w, const void *a);
void loom_q4_0_vec_dot_repacked(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_vec_dot_repacked(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_vec_dot_repacked(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_vec_dot_repacked_x4(int64_t n, float *s, const void *w, const void *a);

/* --- row validators (validate.c), the trait table's validate_row: ggml_validate_row_data's rules --- */
int loom_f32_validate_row(const void *row, int64_t n, struct loom_row_fault *fault);
int loom_f16_validate_row(const void *row, int64_t n, struct loom_row_fault *fault);
int loom_bf16_validate_row(const void *row, int64_t n, struct loom_row_fault *fault);
int loom_q8_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q4_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q4_1_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q5_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q5_1_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q8_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q2_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q3_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q4_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q5_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q6_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq4_nl_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq4_xs_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);

/* --- AVX2 (+FMA, F16C) kernels, src/kernels/x86/<family>_avx2.c --- */
void loom_f32_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_f16_from_float_avx2(const float *src, void *dst, int64_t n);
void loom_f16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_f32_dot_gemm_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_f16_dot_gemm_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_dot_gemm_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q8_0_from_float_avx2(const float *src, void *dst, int64_t n);
void loom_q8_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q8_k_from_float_avx2(const float *src, void *dst, int64_t n);
void loom_q4_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_vec_dot_repacked_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_vec_dot_repacked_x4_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_dot4_repacked_x4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q4_k_dot4_repacked_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q6_k_dot4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_f32_dot4_gemm_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_f16_dot4_gemm_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q5_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);

void loom_q4_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_1_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q5_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q5_1_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q8_1_from_float_avx2(const float *src, void *dst, int64_t n);
void loom_q2_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q3_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_0_vec_dot_repacked_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_vec_dot_repacked_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_vec_dot_repacked_x4_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_dot_gemm_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_vec_dot_repacked_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_dot_panel_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_0_dot4_repacked_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq4_nl_dot4_repacked_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq4_xs_dot4_panel_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);

/* --- AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels, src/kernels/x86/<family>_avx512.c --- */
void loom_bf16_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_dot_gemm_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_dot4_gemm_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q8_0_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_dot4_repacked_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q6_k_dot4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q4_k_dot8_repacked_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_q6_k_dot8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
/* Q4_K x16 dots of 1, 4 and 8 activation rows (q4_k_x16_avx512.c): y[k * y_stride + r] for row r < 16
 * of the group w and activation row k at a + k * a_stride bytes; each bit-identical to loom_q4_k_x16_dot. */
void loom_q4_k_x16_dot_avx512(int64_t n, float *y, size_t y_stride, const void *w, const void *a, size_t a_stride);
void loom_q4_k_x16_dot4_avx512(int64_t n, float *y, size_t y_stride, const void *w, const void *a, size_t a_stride);
void loom_q4_k_x16_dot8_avx512(int64_t n, float *y, size_t y_stride, const void *w, const void *a, size_t a_stride);
/* The same three forms for AVX2 (q4_k_x16_avx2.c; VPMADDUBSW with int16 sub-block sums), each
 * bit-identical to loom_q4_k_x16_dot. */
void loom_q4_k_x16_dot_avx2(int64_t n, float *y, size_t y_stride, const void *w, const void *a, size_t a_stride);
void loom_q4_k_x16_dot4_avx2(int64_t n, float *y, size_t y_stride, const void *w, const void *a, size_t a_stride);
void loom_q4_k_x16_dot8_avx2(int64_t n, float *y, size_t y_stride, const void *w, const void *a, size_t a_stride);

/* Install the kernel set `mode` (LOOM_KERNELS_SCALAR/AVX2/AVX512) into the trait table (types.c). The
 * caller (dispatch.c) has checked the CPU supports it. */
void loom_types_install(enum loom_kernel_mode mode);

/* The dot loom_matmul uses for the outputs of activation row t (< n_tok) in W[n_out][n_in] times n_tok
 * rows: the kernel whose float order the reference's CPU backend uses there (ggml-cpu.c
 * ggml_compute_forward_mul_mat): llamafile's tinyBLAS order for F32/F16/BF16 when n_tok >= 2,
 * n_out % 4 == 0 and n_in is a multiple of its step; for Q4_K with repacking enabled and n_out % 8 == 0
 * the repacked gemm order for rows t < n_tok - n_tok % 4 and the gemv order for the rest (likewise for
 * Q4_0, IQ4_NL and, on AVX-512 machines, Q2_K: the same switch mirrors use_extra_bufts); tinyBLAS's
 * quantized order for IQ4_NL when n_tok >= 2 (any n_out); the IQ panel order for IQ4_XS when n_tok >= 8
 * and n_out % 8 == 0; else the type's vec_dot. */
loom_vec_dot_fn loom_kernels_matmul_dot(uint32_t type, int64_t n_out, int64_t n_in, int64_t n_tok, int64_t t);

/* The 4-row form of a dot returned by loom_kernels_matmul_dot, or NULL when the active set has none. */
loom_vec_dot4_fn loom_kernels_matmul_dot4(loom_vec_dot_fn dot);
/* Its 8-row form, or NULL. */
loom_vec_dot8_fn loom_kernels_matmul_dot8(loom_vec_dot_fn dot);

/* Kernels over 16-row interleaved (x16) weight groups: y[k * y_stride + r] for group row r < 16 and the
 * activation rows k < 1, 4 or 8 at a + k * a_stride bytes. */
typedef void (*loom_x16_dot_fn)(int64_t n, float *y, size_t y_stride, const void *w, const void *a,
                                size_t a_stride);
struct loom_x16_kernels {
    loom_x16_dot_fn dot, dot4, dot8;
};

/* The active set's x16 kernels for weights of `type` whose per-row float order is that of `dot` (as
 * returned by loom_kernels_matmul_dot), or NULL when it has none (then rows are unpacked). */
const struct loom_x16_kernels *loom_kernels_matmul_x16(uint32_t type, loom_vec_dot_fn dot);
/* Whether the active set has x16 kernels for `type` (model load repacks such weights). */
int loom_kernels_x16_available(uint32_t type);

/* Which of the reference's Q4_K kernels loom_matmul mirrors. llama.cpp repacks Q4_K weights whose row
 * count is a multiple of 8 on AVX2 machines by default (llama_model_params.use_extra_bufts) and then sums
 * each output as acc - accm (ggml-cpu/arch/x86/repack.cpp ggml_gemv/gemm_q4_K_8x8_q8_K); with repacking
 * off it uses vec_dot's 8-lane order. on = 1 (the default) mirrors the repacked kernels, 0 the vec_dot.
 * Call before use (not thread-safe against running matmuls). */
void loom_kernels_set_q4_k_repacked(int on);
int loom_kernels_q4_k_repacked(void);

/* Whether this CPU runs the reference's AVX-512 build (which alone repacks Q2_K weights). */
int loom_kernels_cpu_avx512(void);

/* Make sure the table has been filled once (AUTO) before first use; cheap after the first call. */
void loom_kernels_ensure_init(void);

#endif
