/* bench_mem_avx2.c — AVX2 variants of the `loom bench --mem` probes (see bench_mem.h): 256-bit streaming
 * reads and 256-bit FMA chains. */
#include <immintrin.h>

#include "cli/bench_mem.h"

uint64_t loom_bench_read_avx2(const void *buf, size_t bytes)
{
    const __m256i *p = buf;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0, n = bytes / sizeof(__m256i); i < n; i += 8) {
        a0 = _mm256_xor_si256(a0, _mm256_xor_si256(_mm256_load_si256(p + i), _mm256_load_si256(p + i + 1)));
        a1 = _mm256_xor_si256(a1, _mm256_xor_si256(_mm256_load_si256(p + i + 2), _mm256_load_si256(p + i + 3)));
        a2 = _mm256_xor_si256(a2, _mm256_xor_si256(_mm256_load_si256(p + i + 4), _mm256_load_si256(p + i + 5)));
        a3 = _mm256_xor_si256(a3, _mm256_xor_si256(_mm256_load_si256(p + i + 6), _mm256_load_si256(p + i + 7)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)(_mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 1) ^ _mm256_extract_epi64(a, 2) ^
                      _mm256_extract_epi64(a, 3));
}

float loom_bench_fma_avx2(int64_t iters)
{
    /* Twelve named accumulators, not an array (which the compiler would keep in memory): independent chains. */
    const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1), a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3);
    __m256 a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5), a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7);
    __m256 a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9), a10 = _mm256_set1_ps(10), a11 = _mm256_set1_ps(11);
    for (int64_t it = 0; it < iters; it++) {
        a0 = _mm256_fmadd_ps(a0, m, c), a1 = _mm256_fmadd_ps(a1, m, c), a2 = _mm256_fmadd_ps(a2, m, c);
        a3 = _mm256_fmadd_ps(a3, m, c), a4 = _mm256_fmadd_ps(a4, m, c), a5 = _mm256_fmadd_ps(a5, m, c);
        a6 = _mm256_fmadd_ps(a6, m, c), a7 = _mm256_fmadd_ps(a7, m, c), a8 = _mm256_fmadd_ps(a8, m, c);
        a9 = _mm256_fmadd_ps(a9, m, c), a10 = _mm256_fmadd_ps(a10, m, c), a11 = _mm256_fmadd_ps(a11, m, c);
    }
    a0 = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    a4 = _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7));
    a8 = _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11));
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a4), a8);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
