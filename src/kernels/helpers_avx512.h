/* helpers_avx512.h — the AVX-512 helpers the x86 kernel files share (files built with the AVX-512 flags):
 * the 16-lane horizontal sum in loom_hsum16's order. */
#ifndef LOOM_KERNELS_HELPERS_AVX512_H
#define LOOM_KERNELS_HELPERS_AVX512_H

#ifndef __AVX512F__
#error "helpers_avx512.h is for files built with the AVX-512 flags (*_avx512.c)"
#endif

#include "kernels/helpers_avx2.h"

static inline float loom_hsum16_ps(__m512 v)
{
    return loom_hsum8_ps(_mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v)));
}

#endif
