/* mxfp4_avx2.c — AVX2 dot products of MXFP4 x Q8_0 (vec_dot and repacked gemv/gemm orders), with the same exact
 * integer lanes and float orders as mxfp4.c, bit-identical to the scalar kernels. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* Lane l = exact sum over elements 4l..4l+3 of (doubled) E2M1 value times q8. */
static inline __m256i block_values(const uint8_t qs[16])
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)loom_mxfp4_values));
    return _mm256_shuffle_epi8(table, loom_nibbles_epi8(qs));
}

static inline __m256i block_lanes(const uint8_t qs[16], const int8_t *q8)
{
    return loom_dot_i8_lanes(block_values(qs), _mm256_loadu_si256((const __m256i *)q8));
}

static inline float scale(const struct loom_block_mxfp4 *x, const struct loom_block_q8_0 *y)
{
    return loom_f16c_to_f32(y->d) * loom_e8m0_half_to_f32(x->e);
}

void loom_mxfp4_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_mxfp4 *x = w;
    const struct loom_block_q8_0 *y = a;
    int64_t nb = n / 32, i = 0;
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    for (; i + 1 < nb; i += 2) {
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(scale(&x[i], &y[i])), _mm256_cvtepi32_ps(block_lanes(x[i].qs, y[i].qs)),
                               acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(scale(&x[i + 1], &y[i + 1])),
                               _mm256_cvtepi32_ps(block_lanes(x[i + 1].qs, y[i + 1].qs)), acc2);
    }
    float sum = loom_hsum8_ps(_mm256_add_ps(acc1, acc2));
    if (i < nb)
        sum = fmaf(scale(&x[i], &y[i]), (float)loom_hsum_i32x8(block_lanes(x[i].qs, y[i].qs)), sum);
    *s = sum;
}

void loom_mxfp4_gemv_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_mxfp4 *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++)
        acc = fmaf((float)loom_hsum_i32x8(block_lanes(x[i].qs, y[i].qs)),
                   loom_e8m0_half_to_f32(x[i].e) * loom_f16c_to_f32(y[i].d), acc);
    *s = acc;
}

/* loom_mxfp4_gemv_avx2 for 4 activation rows: each block's values decoded once. */
void loom_mxfp4_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_mxfp4 *x = w;
    const struct loom_block_q8_0 *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = (const struct loom_block_q8_0 *)((const char *)a + k * a_stride);
    float acc[4] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i v = block_values(x[i].qs);
        __m256i p[4];
        for (int k = 0; k < 4; k++)
            p[k] = loom_dot_i8_lanes(v, _mm256_loadu_si256((const __m256i *)y[k][i].qs));
        int32_t isum[4];
        _mm_storeu_si128((__m128i *)isum, loom_hsum_i32x8_x4(p[0], p[1], p[2], p[3]));
        float dw = loom_e8m0_half_to_f32(x[i].e);
        for (int k = 0; k < 4; k++)
            acc[k] = fmaf((float)isum[k], dw * loom_f16c_to_f32(y[k][i].d), acc[k]);
    }
    memcpy(s, acc, sizeof acc);
}
