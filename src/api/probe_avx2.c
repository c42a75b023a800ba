/* probe_avx2.c — AVX2 variants of the machine probes (probe.h): 256-bit streaming reads and 256-bit FMA
 * chains. */
#include <immintrin.h>

#include "api/probe.h"

uint64_t loom_probe_read_avx2(const void *buf, size_t bytes)
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

static float hsum256(__m256 s)
{
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

#define CHAINS_FN loom_probe_fma_avx2
#define CHAINS_RESULT float
#define CHAINS_VEC __m256
#define CHAINS_INIT(k) _mm256_set1_ps(k)
#define CHAINS_STEP(a) _mm256_fmadd_ps(a, _mm256_set1_ps(0.9999999f), _mm256_set1_ps(1e-7f))
#define CHAINS_COMBINE _mm256_add_ps
#define CHAINS_REDUCE hsum256
#include "api/probe_chains.h"
