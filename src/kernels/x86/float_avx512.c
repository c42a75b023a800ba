/* float_avx512.c — the AVX-512 BF16 dot products (vec_dot and tinyBLAS orders, and a 4-row form): the
 * native VDPBF16PS pair dot, the instruction the reference uses, in float.c's order. (F32/F16 use the AVX2
 * kernels: the same order with 8 independent 256-bit chains runs faster on Zen4 than 4 of 512 bits.) */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/protos.h"
#include "util/fp16.h"

void loom_bf16_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        c1 = _mm512_dpbf16_ps(c1, (__m512bh)_mm512_loadu_si512(x + i), (__m512bh)_mm512_loadu_si512(y + i));
        c2 = _mm512_dpbf16_ps(c2, (__m512bh)_mm512_loadu_si512(x + i + 32), (__m512bh)_mm512_loadu_si512(y + i + 32));
    }
    double sum = 0;
    sum += loom_hsum16_ps(c1);
    sum += loom_hsum16_ps(c2);
    for (; i < n; i++)
        sum += (double)(loom_bf16_to_f32(x[i]) * loom_bf16_to_f32(y[i]));
    *s = (float)sum;
}

/* tinyBLAS BF16 order: one VDPBF16PS accumulator over 32-element slices (n % 32 == 0). */
void loom_bf16_tinyblas_avx512(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m512 c = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 32)
        c = _mm512_dpbf16_ps(c, (__m512bh)_mm512_loadu_si512(x + i), (__m512bh)_mm512_loadu_si512(y + i));
    *s = loom_hsum16_ps(c);
}

/* loom_bf16_tinyblas_avx512 for 4 activation rows (a + k * a_stride bytes) at once, bit-identical per row. */
void loom_bf16_tinyblas_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const uint16_t *x = w;
    __m512 c[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n; i += 32) {
        __m512bh xv = (__m512bh)_mm512_loadu_si512(x + i);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const uint16_t *y = (const uint16_t *)((const char *)a + k * a_stride) + i;
            c[k] = _mm512_dpbf16_ps(c[k], xv, (__m512bh)_mm512_loadu_si512(y));
        }
    }
    for (int k = 0; k < 4; k++)
        s[k] = loom_hsum16_ps(c[k]);
}
