/* kernels_internal.h — what the kernel families share: the quantized block layouts (byte-compatible with
 * GGUF/ggml), the reduction helpers that fix loom's float summation order, and the prototypes of every
 * scalar and SIMD kernel the dispatcher (types.c) installs into the trait table. */
#ifndef LOOM_KERNELS_INTERNAL_H
#define LOOM_KERNELS_INTERNAL_H

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

/* The packed Q4_K/Q5_K scales as 16 bytes: the 8 scales, then the 8 mins (as loom_k4_scales). */
static inline __m128i loom_k4_scales_si128(const uint8_t packed[12])
{
    uint32_t u[3];
    memcpy(u, packed, 12);
    const uint32_t low6 = 0x3f3f3f3fu, nib = 0x0f0f0f0fu, top2 = 0x03030303u;
    return _mm_set_epi32((int)(((u[2] >> 4) & nib) | (((u[1] >> 6) & top2) << 4)), (int)(u[1] & low6),
                         (int)((u[2] & nib) | (((u[0] >> 6) & top2) << 4)), (int)(u[0] & low6));
}

/* Lane k < 4: m[2k] * (bsums[4k] + bsums[4k+1]) + m[2k+1] * (bsums[4k+2] + bsums[4k+3]), with the mins
 * in bytes 8..15 of scales_mins. Exact in int32. */
static inline __m128i loom_k4_mins_dot(__m128i scales_mins, const int16_t bsums[16])
{
    __m256i bs = _mm256_loadu_si256((const __m256i *)bsums);
    __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(scales_mins, 8)), pairs);
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
void loom_q5_k_to_float(const void *src, float *dst, int64_t n);
void loom_q5_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_to_float(const void *src, float *dst, int64_t n);
void loom_q6_k_vec_dot(int64_t n, float *s, const void *w, const void *a);

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
void loom_q6_k_dot4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_f32_dot4_gemm_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_f16_dot4_gemm_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q5_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);

/* --- AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels, src/kernels/x86/<family>_avx512.c --- */
void loom_bf16_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_dot_gemm_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_dot4_gemm_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q8_0_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);

/* Install the kernel set `mode` (LOOM_KERNELS_SCALAR/AVX2/AVX512) into the trait table (types.c). The
 * caller (dispatch.c) has checked the CPU supports it. */
void loom_types_install(enum loom_kernel_mode mode);

/* The dot loom_matmul uses for the outputs of activation row t (< n_tok) in W[n_out][n_in] times n_tok
 * rows: the kernel whose float order the reference's CPU backend uses there (ggml-cpu.c
 * ggml_compute_forward_mul_mat): llamafile's tinyBLAS order for F32/F16/BF16 when n_tok >= 2,
 * n_out % 4 == 0 and n_in is a multiple of its step; for Q4_K with repacking enabled and n_out % 8 == 0
 * the repacked gemm order for rows t < n_tok - n_tok % 4 and the gemv order for the rest; else the
 * type's vec_dot. */
loom_vec_dot_fn loom_kernels_matmul_dot(uint32_t type, int64_t n_out, int64_t n_in, int64_t n_tok, int64_t t);

/* The 4-row form of a dot returned by loom_kernels_matmul_dot, or NULL when the active set has none. */
loom_vec_dot4_fn loom_kernels_matmul_dot4(loom_vec_dot_fn dot);

/* Which of the reference's Q4_K kernels loom_matmul mirrors. llama.cpp repacks Q4_K weights whose row
 * count is a multiple of 8 on AVX2 machines by default (llama_model_params.use_extra_bufts) and then sums
 * each output as acc - accm (ggml-cpu/arch/x86/repack.cpp ggml_gemv/gemm_q4_K_8x8_q8_K); with repacking
 * off it uses vec_dot's 8-lane order. on = 1 (the default) mirrors the repacked kernels, 0 the vec_dot.
 * Call before use (not thread-safe against running matmuls). */
void loom_kernels_set_q4_k_repacked(int on);
int loom_kernels_q4_k_repacked(void);

/* Make sure the table has been filled once (AUTO) before first use; cheap after the first call. */
void loom_kernels_ensure_init(void);

#endif
