/* ops.c — scalar kernels for the non-matmul math of the qwen35 forward pass (see ops.h); the scalar kernel set
 * (sets.c) points at its per-head ones. Each function reproduces the rounding points and reduction order of
 * llama.cpp's CPU backend as built for AVX-512 (libggml-cpu-zen4: GCC 11, FP contraction on), verified
 * against its source and its disassembly. */
#include "kernels/ops.h"

#include <math.h>

/* The per-set ops as the scalar set (x86/ops_avx2.c compiles the same C for the AVX2 set). */
#define OPS(name) loom_ops_##name
#define OPS_INNER
#include "kernels/ops_impl.h"
#undef OPS
#undef OPS_INNER

float loom_ops_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

float loom_ops_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

void loom_ops_rope_cache(int32_t pos, int n_rot, float freq_base, float *cache)
{
    float theta_scale = powf(freq_base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < n_rot / 2; i++) {
        cache[2 * i] = cosf(theta);
        cache[2 * i + 1] = sinf(theta);
        theta *= theta_scale;
    }
}

void loom_ops_rope_neox(float *x, int n_rot, const float *cache)
{
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        float c = cache[2 * i], s = cache[2 * i + 1];
        float x0 = x[i], x1 = x[i + half];
        x[i] = fmaf(x0, c, -(x1 * s));
        x[i + half] = fmaf(x0, s, x1 * c);
    }
}
