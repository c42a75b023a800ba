/* mxfp4_avx512.c — AVX-512 VNNI dots of MXFP4 x16 weight groups (16 rows interleaved, mxfp4.c
 * loom_mxfp4_x16_pack) with 1 to 8 Q8_0 activation rows, in the order of the reference's repacked MXFP4 kernels
 * (mxfp4.c loom_mxfp4_gemv): per block and row the exact integer sum, then acc = fma(isum, d_w * d_a, acc) in
 * that row's lane, so bit-identical per row to the one-row kernel. The integer sum is an outer product: each
 * 4-byte activation group broadcast against the same 4 elements of the 16 rows (VPDPBUSD), with the weights
 * offset by +12 to make them unsigned and 12 * (the activation block's sum) taken off again. */
#include <immintrin.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/prefetch.h"
#include "kernels/protos.h"

#define GROUP_BLOCK_BYTES (16 * sizeof(struct loom_block_mxfp4))

/* The doubled E2M1 values plus 12 (so in [0, 24]), for the 16 nibble codes. */
static const uint8_t values_u8[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

/* The 16 rows' half scales 2^(e - 128) (mxfp4.c loom_e8m0_half_to_f32): (e - 1) << 23 as F32 bits, e < 2 the
 * subnormals 0x00200000 << e. */
static inline __m512 half_scales(const uint8_t e[16])
{
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)e));
    __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(v, _mm512_set1_epi32(1)), 23);
    __mmask16 sub = _mm512_cmplt_epu32_mask(v, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_sllv_epi32(normal, sub, _mm512_set1_epi32(0x00200000), v));
}

/* Exact sum of the 32 quants of an activation block. */
static inline int32_t act_sum(const int8_t qs[32])
{
    __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                    _mm256_loadu_si256((const __m256i *)qs));
    return loom_hsum_i32x8(s);
}

/* y[k * y_stride + r] for `rows` (1 to 8) activation rows: per block the 16 rows' offset values decoded once
 * (u[j]: elements 4j..4j+3 in lane r, j < 4 from the low nibbles of slice j, j >= 4 the high ones of slice
 * j - 4, i.e. elements 16 + 4(j - 4)..) and dotted with each row's 8 broadcast groups. */
static inline __attribute__((always_inline)) void dot(int64_t n, float *y, size_t y_stride, const void *w,
                                                       const void *a, size_t a_stride, int rows)
{
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)values_u8));
    const __m512i m4 = _mm512_set1_epi8(15);
    const uint8_t *g = w;
    __m512 acc[8];
    for (int k = 0; k < rows; k++)
        acc[k] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, g += GROUP_BLOCK_BYTES) {
        __m512i u[8];
        loom_prefetch_ahead(g, GROUP_BLOCK_BYTES);
        for (int j = 0; j < 4; j++) {
            __m512i q = _mm512_loadu_si512((const void *)(g + 16 + 64 * j));
            u[j] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
            u[4 + j] = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
        }
        __m512 dw = half_scales(g);
        for (int k = 0; k < rows; k++) {
            const struct loom_block_q8_0 *b = (const struct loom_block_q8_0 *)((const char *)a + k * a_stride) + i;
            __m512i s = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) {
                int32_t grp;
                memcpy(&grp, b->qs + 4 * j, 4);
                s = _mm512_dpbusd_epi32(s, u[j], _mm512_set1_epi32(grp));
            }
            s = _mm512_sub_epi32(s, _mm512_set1_epi32(12 * act_sum(b->qs)));
            __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(loom_f16c_to_f32(b->d)));
            acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, acc[k]);
        }
    }
    for (int k = 0; k < rows; k++)
        _mm512_storeu_ps(y + k * y_stride, acc[k]);
}

void loom_mxfp4_x16_gemv_avx512(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                                size_t a_stride)
{
    switch (n_act) { /* each count its own specialized loop, the 8 accumulators in registers */
    case 1: dot(n, y, y_stride, w, a, a_stride, 1); break;
    case 2: dot(n, y, y_stride, w, a, a_stride, 2); break;
    case 3: dot(n, y, y_stride, w, a, a_stride, 3); break;
    case 4: dot(n, y, y_stride, w, a, a_stride, 4); break;
    case 5: dot(n, y, y_stride, w, a, a_stride, 5); break;
    case 6: dot(n, y, y_stride, w, a, a_stride, 6); break;
    case 7: dot(n, y, y_stride, w, a, a_stride, 7); break;
    default: dot(n, y, y_stride, w, a, a_stride, 8); break;
    }
}
