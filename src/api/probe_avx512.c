/* probe_avx512.c — AVX-512 variants of the machine probes (probe.h): 512-bit streaming reads, 512-bit FMA
 * chains and 512-bit VNNI int8 dot-product chains. */
#include <immintrin.h>

#include "api/probe.h"

uint64_t loom_probe_read_avx512(const void *buf, size_t bytes)
{
    const __m512i *p = buf;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0;
    for (size_t i = 0, n = bytes / sizeof(__m512i); i < n; i += 4) {
        a0 = _mm512_xor_si512(a0, _mm512_xor_si512(_mm512_load_si512(p + i), _mm512_load_si512(p + i + 1)));
        a1 = _mm512_xor_si512(a1, _mm512_xor_si512(_mm512_load_si512(p + i + 2), _mm512_load_si512(p + i + 3)));
    }
    return (uint64_t)_mm512_reduce_or_epi64(_mm512_xor_si512(a0, a1));
}

#define CHAINS_FN loom_probe_fma_avx512
#define CHAINS_RESULT float
#define CHAINS_VEC __m512
#define CHAINS_INIT(k) _mm512_set1_ps(k)
#define CHAINS_STEP(a) _mm512_fmadd_ps(a, _mm512_set1_ps(0.9999999f), _mm512_set1_ps(1e-7f))
#define CHAINS_COMBINE _mm512_add_ps
#define CHAINS_REDUCE _mm512_reduce_add_ps
#include "api/probe_chains.h"

#define CHAINS_FN loom_probe_dot_i8_avx512
#define CHAINS_RESULT uint32_t
#define CHAINS_VEC __m512i
#define CHAINS_INIT(k) _mm512_set1_epi32(k)
#define CHAINS_STEP(a) _mm512_dpbusd_epi32(a, _mm512_set1_epi8(3), _mm512_set1_epi8(-5))
#define CHAINS_COMBINE _mm512_xor_si512
#define CHAINS_REDUCE (uint32_t)_mm512_reduce_or_epi32
#include "api/probe_chains.h"
