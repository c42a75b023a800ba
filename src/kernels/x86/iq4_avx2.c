/* iq4_avx2.c — AVX2 dot products of the non-linear 4-bit family: IQ4_NL x Q8_0 (vec_dot, tinyBLAS and
 * repacked orders) and IQ4_XS x Q8_K (vec_dot and IQ panel orders), with the same exact integer sums and
 * float orders as iq4.c, bit-identical to the scalar ones. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* The 32 grid values of a nibble block as signed bytes in element order. */
static inline __m256i grid_values(const uint8_t qs[16])
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)loom_iq4nl_values));
    return _mm256_shuffle_epi8(table, loom_nibbles_epi8(qs));
}

/* Lane l = exact sum over elements 4l..4l+3 of grid value times q8. */
static inline __m256i block_lanes(const uint8_t qs[16], const int8_t *q8)
{
    return loom_dot_i8_lanes(grid_values(qs), _mm256_loadu_si256((const __m256i *)q8));
}

static inline float scale_nl(const struct loom_block_iq4_nl *x, const struct loom_block_q8_0 *y)
{
    return loom_f16c_to_f32(y->d) * loom_f16c_to_f32(x->d);
}

void loom_iq4_nl_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_nl *x = w;
    const struct loom_block_q8_0 *y = a;
    int64_t nb = n / 32, i = 0;
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    for (; i + 1 < nb; i += 2) {
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(scale_nl(&x[i], &y[i])), _mm256_cvtepi32_ps(block_lanes(x[i].qs, y[i].qs)), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(scale_nl(&x[i + 1], &y[i + 1])),
                               _mm256_cvtepi32_ps(block_lanes(x[i + 1].qs, y[i + 1].qs)), acc2);
    }
    float sum = loom_hsum8_ps(_mm256_add_ps(acc1, acc2));
    if (i < nb)
        sum = fmaf(scale_nl(&x[i], &y[i]), (float)loom_hsum_i32x8(block_lanes(x[i].qs, y[i].qs)), sum);
    *s = sum;
}

void loom_iq4_nl_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_nl *x = w;
    const struct loom_block_q8_0 *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(block_lanes(x[i].qs, y[i].qs)), acc);
    }
    *s = loom_hsum8_ps(acc);
}

void loom_iq4_nl_gemv_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_nl *x = w;
    const struct loom_block_q8_0 *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++)
        acc = fmaf((float)loom_hsum_i32x8(block_lanes(x[i].qs, y[i].qs)),
                   loom_f16c_to_f32(x[i].d) * loom_f16c_to_f32(y[i].d), acc);
    *s = acc;
}

/* Lane l of one IQ4_XS block: sum over the 8 sub-blocks of (ls - 32) * (their lane l). Exact. */
static inline __m256i xs_lanes(const struct loom_block_iq4_xs *x, const struct loom_block_q8_k *y)
{
    __m256i sum = _mm256_setzero_si256();
    for (int sb = 0; sb < 8; sb++) {
        int ls = (((x->scales_l[sb / 2] >> (4 * (sb % 2))) & 15) | ((x->scales_h >> (2 * sb)) & 3) << 4) - 32;
        __m256i v = grid_values(x->qs + 16 * sb), q8 = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * sb));
        __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q8, v));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)ls)));
    }
    return sum;
}

void loom_iq4_xs_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_xs *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m256 d = _mm256_set1_ps(loom_f16c_to_f32(x[i].d) * y[i].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(xs_lanes(&x[i], &y[i])), acc);
    }
    *s = loom_hsum8_ps(acc);
}

void loom_iq4_xs_iqp_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_iq4_xs *x = w;
    const struct loom_block_q8_k *y = a;
    float acc = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        acc = fmaf((float)loom_hsum_i32x8(xs_lanes(&x[i], &y[i])), loom_f16c_to_f32(x[i].d) * y[i].d, acc);
    *s = acc;
}

/* loom_iq4_nl_gemv_avx2 for 4 activation rows (a + k * a_stride bytes), the grid values
 * looked up once per block; token k runs in lane k in the same order. */
void loom_iq4_nl_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_iq4_nl *x = w;
    const struct loom_block_q8_0 *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = (const struct loom_block_q8_0 *)((const char *)a + k * a_stride);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i v = grid_values(x[i].qs), av = _mm256_sign_epi8(v, v), p[4];
        for (int k = 0; k < 4; k++) {
            __m256i q8 = _mm256_loadu_si256((const __m256i *)y[k][i].qs);
            p[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(q8, v)), _mm256_set1_epi16(1));
        }
        __m128 da = _mm_set_ps(loom_f16c_to_f32(y[3][i].d), loom_f16c_to_f32(y[2][i].d), loom_f16c_to_f32(y[1][i].d),
                               loom_f16c_to_f32(y[0][i].d));
        __m128 d = _mm_mul_ps(_mm_set1_ps(loom_f16c_to_f32(x[i].d)), da);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(loom_hsum_i32x8_x4(p[0], p[1], p[2], p[3])), d, acc);
    }
    _mm_storeu_ps(s, acc);
}

/* loom_iq4_xs_iqp_avx2 for 4 activation rows: grid values and scales unpacked once per block. */
void loom_iq4_xs_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_iq4_xs *x = w;
    const struct loom_block_q8_k *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = (const struct loom_block_q8_k *)((const char *)a + k * a_stride);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m256i sum[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int sb = 0; sb < 8; sb++) {
            int ls = (((x[i].scales_l[sb / 2] >> (4 * (sb % 2))) & 15) | ((x[i].scales_h >> (2 * sb)) & 3) << 4) - 32;
            __m256i v = grid_values(x[i].qs + 16 * sb), av = _mm256_sign_epi8(v, v), scale = _mm256_set1_epi16((short)ls);
            for (int k = 0; k < 4; k++) {
                __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[k][i].qs + 32 * sb));
                sum[k] = _mm256_add_epi32(sum[k], _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(q8, v)), scale));
            }
        }
        __m128 d = _mm_mul_ps(_mm_set1_ps(loom_f16c_to_f32(x[i].d)), _mm_set_ps(y[3][i].d, y[2][i].d, y[1][i].d, y[0][i].d));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(loom_hsum_i32x8_x4(sum[0], sum[1], sum[2], sum[3])), d, acc);
    }
    _mm_storeu_ps(s, acc);
}

/* loom_iq4_xs_iqp_avx2 for 8 activation rows: each sub-block's grid values, their magnitudes and its scale are
 * unpacked once for the 8 rows; row k's exact block sum then runs in lane k of one float accumulator. */
void loom_iq4_xs_iqp_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_iq4_xs *x = w;
    const char *a0 = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        const struct loom_block_q8_k *y[8];
        for (int k = 0; k < 8; k++)
            y[k] = (const struct loom_block_q8_k *)(a0 + k * a_stride) + i;
        __m256i sum[8];
        for (int k = 0; k < 8; k++)
            sum[k] = _mm256_setzero_si256();
        for (int sb = 0; sb < 8; sb++) {
            int ls = (((x[i].scales_l[sb / 2] >> (4 * (sb % 2))) & 15) | ((x[i].scales_h >> (2 * sb)) & 3) << 4) - 32;
            __m256i v = grid_values(x[i].qs + 16 * sb), av = _mm256_sign_epi8(v, v), scale = _mm256_set1_epi16((short)ls);
            for (int k = 0; k < 8; k++) {
                __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[k]->qs + 32 * sb));
                sum[k] = _mm256_add_epi32(sum[k], _mm256_madd_epi16(_mm256_maddubs_epi16(av, _mm256_sign_epi8(q8, v)), scale));
            }
        }
        __m128i lo = loom_hsum_i32x8_x4(sum[0], sum[1], sum[2], sum[3]);
        __m128i hi = loom_hsum_i32x8_x4(sum[4], sum[5], sum[6], sum[7]);
        __m256 da = _mm256_set_ps(y[7]->d, y[6]->d, y[5]->d, y[4]->d, y[3]->d, y[2]->d, y[1]->d, y[0]->d);
        __m256 d = _mm256_mul_ps(_mm256_set1_ps(loom_f16c_to_f32(x[i].d)), da);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_set_m128i(hi, lo)), d, acc);
    }
    _mm256_storeu_ps(s, acc);
}
