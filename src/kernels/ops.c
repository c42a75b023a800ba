/* ops.c — scalar kernels for the non-matmul math of the qwen35 forward pass (see ops.h), and the table of
 * per-head kernels of each kernel set. Each function reproduces the rounding points and reduction order of
 * llama.cpp's CPU backend as built for AVX-512 (libggml-cpu-zen4: GCC 11, FP contraction on), verified
 * against its source and its disassembly. */
#include "kernels/ops.h"

#include <math.h>
#include <string.h>

#include "loom.h"

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

static const struct loom_ops_kernels ops_scalar = {
    .name = "scalar",
    .silu = loom_ops_silu,
    .swiglu = loom_ops_swiglu,
    .conv1d_step = loom_ops_conv1d_step,
    .delta_rule_step = loom_ops_delta_rule_step,
    .conv1d_chunk = loom_ops_conv1d_chunk,
    .delta_rule_chunk = loom_ops_delta_rule_chunk,
    .rmsnorm_rows = loom_ops_rmsnorm_rows,
    .l2norm_rows = loom_ops_l2norm_rows,
    .attn_head = loom_ops_attn_head,
    .attn_heads = loom_ops_attn_heads,
};
static const struct loom_ops_kernels ops_avx2 = {
    .name = "avx2",
    .silu = loom_ops_silu_avx2,
    .swiglu = loom_ops_swiglu_avx2,
    .conv1d_step = loom_ops_conv1d_step_avx2,
    .delta_rule_step = loom_ops_delta_rule_step_avx2,
    .conv1d_chunk = loom_ops_conv1d_chunk_avx2,
    .delta_rule_chunk = loom_ops_delta_rule_chunk_avx2,
    .rmsnorm_rows = loom_ops_rmsnorm_rows_avx2,
    .l2norm_rows = loom_ops_l2norm_rows_avx2,
    .attn_head = loom_ops_attn_head_avx2,
    .attn_heads = loom_ops_attn_heads_avx2,
};
static const struct loom_ops_kernels ops_avx512 = {
    .name = "avx512",
    .silu = loom_ops_silu_avx512,
    .swiglu = loom_ops_swiglu_avx512,
    .conv1d_step = loom_ops_conv1d_step_avx512,
    .delta_rule_step = loom_ops_delta_rule_step_avx512,
    .conv1d_chunk = loom_ops_conv1d_chunk_avx512,
    .delta_rule_chunk = loom_ops_delta_rule_chunk_avx512,
    .rmsnorm_rows = loom_ops_rmsnorm_rows_avx512,
    .l2norm_rows = loom_ops_l2norm_rows_avx512,
    .attn_head = loom_ops_attn_head_avx512,
    .attn_heads = loom_ops_attn_heads_avx512,
};

const struct loom_ops_kernels *loom_ops_kernels_active(void)
{
    const char *set = loom_kernels_name();
    return !strcmp(set, "avx512") ? &ops_avx512 : !strcmp(set, "avx2") ? &ops_avx2 : &ops_scalar;
}
