/* float_avx2.c — AVX2/FMA/F16C kernels of F32, F16 and BF16: dot products in the reference's vec_dot and
 * tinyBLAS orders (float.c's; a 16-lane accumulator is a pair of __m256), 4-activation-row forms, and
 * F32 -> F16 row conversion with the hardware's round-to-nearest-even. */
#include <float.h>
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Fold 4 accumulators of 16 lanes (each two __m256: lo = lanes 0..7, hi = 8..15) as float.c does. */
static float fold4(__m256 lo[4], __m256 hi[4])
{
    __m256 l = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
    __m256 h = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    return loom_hsum8_ps(_mm256_add_ps(l, h));
}

void loom_f32_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++)
        lo[j] = hi[j] = _mm256_setzero_ps();
    int64_t np = n - n % 64;
    for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const float *xp = x + i + 16 * j, *yp = y + i + 16 * j;
            lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xp), _mm256_loadu_ps(yp), lo[j]);
            hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + 8), _mm256_loadu_ps(yp + 8), hi[j]);
        }
    float sum = fold4(lo, hi);
    *s = loom_f32_dot_tail(x + np, y + np, n - np, sum);
}

static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

void loom_f16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++)
        lo[j] = hi[j] = _mm256_setzero_ps();
    int64_t np = n - n % 64;
    for (int64_t i = 0; i < np; i += 64)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const uint16_t *xp = x + i + 16 * j, *yp = y + i + 16 * j;
            lo[j] = _mm256_fmadd_ps(load_f16(xp), load_f16(yp), lo[j]);
            hi[j] = _mm256_fmadd_ps(load_f16(xp + 8), load_f16(yp + 8), hi[j]);
        }
    double sum = fold4(lo, hi);
    for (int64_t i = np; i < n; i++)
        sum += (double)(loom_f16c_to_f32(x[i]) * loom_f16c_to_f32(y[i]));
    *s = (float)sum;
}

void loom_f16_from_float_avx2(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        h[i] = loom_f32_to_f16(src[i]);
}

/* Subnormal lanes to zero of the same sign (VDPBF16PS's DAZ on inputs and FTZ on results). */
static inline __m256 flush(__m256 v)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, v), _mm256_set1_ps(FLT_MIN), _CMP_LT_OQ);
    return _mm256_andnot_ps(_mm256_andnot_ps(sign, tiny), v);
}

/* BF16 pairs (2l, 2l+1) of 16 elements as F32: even elements (low halves) and odd (high halves). */
static inline void load_bf16_pairs(const uint16_t *p, __m256 *even, __m256 *odd)
{
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    *even = flush(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    *odd = flush(_mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u))));
}

/* Same order as float.c loom_bf16_vec_dot (the reference's VDPBF16PS loop): accumulator h in {0, 1}
 * covers elements 32h..32h+31 of each 64-element step, lanes 0..7 in c[h][0] and 8..15 in c[h][1]. */
void loom_bf16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 c[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
            for (int q = 0; q < 2; q++) {
                __m256 xe, xo, ye, yo;
                load_bf16_pairs(x + i + 32 * h + 16 * q, &xe, &xo);
                load_bf16_pairs(y + i + 32 * h + 16 * q, &ye, &yo);
                c[h][q] = flush(_mm256_fmadd_ps(xe, ye, flush(_mm256_fmadd_ps(xo, yo, c[h][q]))));
            }
    double sum = 0;
    for (int h = 0; h < 2; h++)
        sum += loom_hsum8_ps(_mm256_add_ps(c[h][0], c[h][1]));
    for (; i < n; i++)
        sum += (double)(loom_bf16_to_f32(x[i]) * loom_bf16_to_f32(y[i]));
    *s = (float)sum;
}

/* tinyBLAS order (float.c loom_f32_tinyblas): one 16-lane accumulator as two __m256 halves. */
void loom_f32_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), hi);
    }
    *s = loom_hsum8_ps(_mm256_add_ps(lo, hi));
}

void loom_f16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        lo = _mm256_fmadd_ps(load_f16(x + i), load_f16(y + i), lo);
        hi = _mm256_fmadd_ps(load_f16(x + i + 8), load_f16(y + i + 8), hi);
    }
    *s = loom_hsum8_ps(_mm256_add_ps(lo, hi));
}

/* tinyBLAS BF16 order (float.c loom_bf16_tinyblas): lanes 0..7 from the first 16 elements of each
 * 32-element slice, lanes 8..15 from the next 16. */
void loom_bf16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 c[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n; i += 32)
#pragma GCC unroll 2
        for (int q = 0; q < 2; q++) {
            __m256 xe, xo, ye, yo;
            load_bf16_pairs(x + i + 16 * q, &xe, &xo);
            load_bf16_pairs(y + i + 16 * q, &ye, &yo);
            c[q] = flush(_mm256_fmadd_ps(xe, ye, flush(_mm256_fmadd_ps(xo, yo, c[q]))));
        }
    *s = loom_hsum8_ps(_mm256_add_ps(c[0], c[1]));
}

/* 8 F32 or F16 (f16) elements from element i of p, as floats. */
static inline __attribute__((always_inline)) __m256 load8(const void *p, int64_t i, int f16)
{
    return f16 ? load_f16((const uint16_t *)p + i) : _mm256_loadu_ps((const float *)p + i);
}

/* loom_f32_tinyblas_avx2 / loom_f16_tinyblas_avx2 (f16, a constant at each use) for 4 activation rows
 * (a + k * a_stride bytes) at once: token k keeps its own 16-lane accumulator (lo/hi), so each result is
 * bit-identical to the single-row dot, while 8 independent FMA chains keep the units busy. */
static inline __attribute__((always_inline)) void tinyblas_rows4(int64_t n, float s[4], const void *w, const void *a,
                                                                 size_t a_stride, int f16)
{
    __m256 lo[4], hi[4];
    for (int k = 0; k < 4; k++)
        lo[k] = hi[k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __m256 xl = load8(w, i, f16), xh = load8(w, i + 8, f16);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const char *y = (const char *)a + k * a_stride;
            lo[k] = _mm256_fmadd_ps(xl, load8(y, i, f16), lo[k]);
            hi[k] = _mm256_fmadd_ps(xh, load8(y, i + 8, f16), hi[k]);
        }
    }
    for (int k = 0; k < 4; k++)
        s[k] = loom_hsum8_ps(_mm256_add_ps(lo[k], hi[k]));
}

void loom_f32_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows4(n, s, w, a, a_stride, 0);
}

void loom_f16_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    tinyblas_rows4(n, s, w, a, a_stride, 1);
}
