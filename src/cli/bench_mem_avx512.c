/* bench_mem_avx512.c — AVX-512 variants of the `loom bench --mem` probes (see bench_mem.h): 512-bit streaming
 * reads, 512-bit FMA chains and 512-bit VNNI int8 dot-product chains. */
#include <immintrin.h>

#include "cli/bench_mem.h"

uint64_t loom_bench_read_avx512(const void *buf, size_t bytes)
{
    const __m512i *p = buf;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
    for (size_t i = 0, n = bytes / sizeof(__m512i); i < n; i += 4) {
        a0 = _mm512_xor_si512(a0, _mm512_xor_si512(_mm512_load_si512(p + i), _mm512_load_si512(p + i + 1)));
        a1 = _mm512_xor_si512(a1, _mm512_xor_si512(_mm512_load_si512(p + i + 2), _mm512_load_si512(p + i + 3)));
    }
    return (uint64_t)_mm512_reduce_or_epi64(_mm512_xor_si512(a0, a1));
}

float loom_bench_fma_avx512(int64_t iters)
{
    /* Twelve named accumulators, not an array (which the compiler would keep in memory): independent chains. */
    const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3);
    __m512 a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7);
    __m512 a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
    for (int64_t it = 0; it < iters; it++) {
        a0 = _mm512_fmadd_ps(a0, m, c), a1 = _mm512_fmadd_ps(a1, m, c), a2 = _mm512_fmadd_ps(a2, m, c);
        a3 = _mm512_fmadd_ps(a3, m, c), a4 = _mm512_fmadd_ps(a4, m, c), a5 = _mm512_fmadd_ps(a5, m, c);
        a6 = _mm512_fmadd_ps(a6, m, c), a7 = _mm512_fmadd_ps(a7, m, c), a8 = _mm512_fmadd_ps(a8, m, c);
        a9 = _mm512_fmadd_ps(a9, m, c), a10 = _mm512_fmadd_ps(a10, m, c), a11 = _mm512_fmadd_ps(a11, m, c);
    }
    a0 = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    a4 = _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7));
    a8 = _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11));
    __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a4), a8);
    return _mm512_reduce_add_ps(s);
}

uint32_t loom_bench_dot_i8_avx512(int64_t iters)
{
    /* Distinct starting values, so that no two chains are the same computation (which the compiler would merge). */
    const __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(-5);
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2);
    __m512i a3 = _mm512_set1_epi32(3), a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5);
    __m512i a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7), a8 = _mm512_set1_epi32(8);
    __m512i a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
    for (int64_t it = 0; it < iters; it++) {
        a0 = _mm512_dpbusd_epi32(a0, w, x), a1 = _mm512_dpbusd_epi32(a1, w, x), a2 = _mm512_dpbusd_epi32(a2, w, x);
        a3 = _mm512_dpbusd_epi32(a3, w, x), a4 = _mm512_dpbusd_epi32(a4, w, x), a5 = _mm512_dpbusd_epi32(a5, w, x);
        a6 = _mm512_dpbusd_epi32(a6, w, x), a7 = _mm512_dpbusd_epi32(a7, w, x), a8 = _mm512_dpbusd_epi32(a8, w, x);
        a9 = _mm512_dpbusd_epi32(a9, w, x), a10 = _mm512_dpbusd_epi32(a10, w, x), a11 = _mm512_dpbusd_epi32(a11, w, x);
    }
    __m512i s = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3)),
                                 _mm512_xor_si512(_mm512_xor_si512(a4, a5), _mm512_xor_si512(a6, a7)));
    s = _mm512_xor_si512(s, _mm512_xor_si512(_mm512_xor_si512(a8, a9), _mm512_xor_si512(a10, a11)));
    return (uint32_t)_mm512_reduce_or_epi32(s);
}
