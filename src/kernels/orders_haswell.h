/* orders_haswell.h — the "haswell" float-order profile: the kernels whose float order differs between
 * llama.cpp's AVX2 CPU build (libggml-cpu-haswell, loaded on a CPU without AVX-512) and its AVX-512 builds,
 * in the AVX2 build's order (docs/haswell-numerics.md, D1-D11). Scalar kernels, with AVX2 forms of the hot
 * dots and ops that the profile's AVX2 and AVX-512 sets use (sets.c); all sets stay bitwise equal within it. */
#ifndef LOOM_KERNELS_ORDERS_HASWELL_H
#define LOOM_KERNELS_ORDERS_HASWELL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

/* T8a, the GGML_F32x8_REDUCE tail (extract the high half, add the low, hadd, hadd):
 * r_l = a_l + a_{l+4}, then (r0 + r1) + (r2 + r3). */
static inline float loom_hsw_hsum8_t8a(const float a[8])
{
    float r0 = a[0] + a[4], r1 = a[1] + a[5], r2 = a[2] + a[6], r3 = a[3] + a[7];
    return (r0 + r1) + (r2 + r3);
}

/* sum + a[0]*b[0] + ... + a[n-1]*b[n-1] in the order GCC vectorized the reference's float leftover loops for
 * AVX2 (ggml_vec_dot_f32's tail, D2; ssm_conv's tap sum, D10): while 8 or more remain, 8 separately rounded
 * products added in index order; then once, if 4 or more remain, 4 such; the last < 4 by fused multiply-add. */
static inline float loom_hsw_tail_sum(float sum, int64_t n, const float *a, const float *b)
{
    int64_t unfused = (n & ~(int64_t)7) + ((n & 7) >= 4 ? 4 : 0), i = 0;
    for (; i < unfused; i++) {
        float p = a[i] * b[i];
        sum += p;
    }
    for (; i < n; i++)
        sum = fmaf(a[i], b[i], sum);
    return sum;
}

/* ggml_v_expf's AVX2 form in one lane (vec.h, D7): the same range reduction and polynomial as
 * loom_ops_expf_poly but j' = P*u + round(c1*b) without the + 1, the result k * (1 + j') as one fused
 * multiply-add with k = 2^n built from z's bits for |n| <= 126, two scalings beyond, 0 or inf past |n| > 192. */
float loom_hsw_expf(float x);

/* ggml_vec_silu_f32 / ggml_vec_swiglu_f32 of the AVX2 build (D9): elements in whole 8-blocks with
 * loom_hsw_expf, the n % 8 rest with libm expf. y may alias x. */
void loom_hsw_silu(int64_t n, const float *x, float *y);
void loom_hsw_swiglu(int64_t n, const float *g, const float *u, float *y);

/* loom_ops_softmax in the AVX2 build's order (D8): exponentials by loom_hsw_expf in blocks of 8 (the last
 * padded with zeros, as the reference's masked row), each block's T8b sum (loom_hsum8) added in double. */
void loom_hsw_softmax(int64_t n, float *x, float scale);
/* The router's soft_max (scale 1, no mask) of p[n] in place: max, then 8-blocks by loom_hsw_expf summed T8b in
 * double, the n % 8 rest by libm expf each added in double, then p *= (float)(1 / sum). */
void loom_hsw_softmax_router(int n, float *p);

/* ggml_vec_dot_f32 of the AVX2 build (D1, D2): four 8-lane FMA accumulators over 32-element steps, folded
 * (0+2)+(1+3), T8a, then the n % 32 tail by loom_hsw_tail_sum. */
float loom_hsw_dot_f32(int64_t n, const float *x, const float *y);

/* The per-head ops of the profile (ops.h's contracts, these orders): conv1d by loom_hsw_tail_sum (D10), the
 * delta rule's dots by loom_hsw_dot_f32 (D1), silu/swiglu (D9), attention with loom_hsw_softmax and F16 dots
 * in tinyBLAS's 8-lane order (BATCH, D5) or ggml_vec_dot_f16's 4x8 order (SINGLE, D3). */
void loom_hsw_conv1d_step(int64_t channels, int K, float *state, const float *w, const float *x, float *y);
void loom_hsw_conv1d_chunk(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                           int64_t x_stride, float *y, int64_t y_stride);
void loom_hsw_delta_rule_step(int d, float *M, const float *q, const float *k, const float *v, float g, float beta,
                              float *out);
void loom_hsw_delta_rule_chunk(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                               const float *v, int64_t qkv_stride, const float *g, const float *beta,
                               int64_t gb_stride, float *out, int64_t out_stride);
float loom_hsw_dot_f16(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order);
void loom_hsw_attn_head(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache, int64_t k_stride,
                        const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                        enum loom_attn_order order, float *scores, uint16_t *probs16, float *out);
void loom_hsw_attn_heads(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                         int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                         enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                         int64_t out_stride);
void loom_hsw_attn_heads_q8(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                            int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                            enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                            int64_t out_stride);

/* The F32/F16/BF16 dot kernels (kernels.h's loom_dot_fn) of the AVX2 build: vec_dot (D1, D3, D4) and tinyBLAS
 * (D5, D6: one 8-lane FMA accumulator, n % 8 == 0, T8b). */
void loom_hsw_f32_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_f16_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_bf16_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_f32_tinyblas(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_f16_tinyblas(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_bf16_tinyblas(int64_t n, float *s, const void *w, const void *a);

/* AVX2/FMA/F16C forms of the hot ones (x86/orders_haswell_avx2.c), bitwise the scalar kernels above; call only
 * where the CPU has AVX2, FMA and F16C. */
void loom_hsw_f32_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_f16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_f32_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_f16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_bf16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_hsw_bf16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a);
/* The tinyBLAS dots for 4 / 8 activation rows at once (kernels.h's rows4 / rows8 forms), each row bitwise the
 * one-row kernel. */
void loom_hsw_f32_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_hsw_f32_tinyblas_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_hsw_f16_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_hsw_f16_tinyblas_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_hsw_bf16_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_hsw_bf16_tinyblas_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_hsw_delta_rule_step_avx2(int d, float *M, const float *q, const float *k, const float *v, float g,
                                   float beta, float *out);
void loom_hsw_delta_rule_chunk_avx2(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                                    const float *v, int64_t qkv_stride, const float *g, const float *beta,
                                    int64_t gb_stride, float *out, int64_t out_stride);
void loom_hsw_silu_avx2(int64_t n, const float *x, float *y);
void loom_hsw_swiglu_avx2(int64_t n, const float *g, const float *u, float *y);
/* conv1d in x86/ops_avx2.c (the avx512 profile's kernel in this profile's tap order); the attention kernels in
 * four-row groups (x86/attn_group_avx2.h) for head_dim a multiple of 32 up to 512, else the scalar kernels. */
void loom_hsw_conv1d_step_avx2(int64_t channels, int K, float *state, const float *w, const float *x, float *y);
void loom_hsw_conv1d_chunk_avx2(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                                int64_t x_stride, float *y, int64_t y_stride);
void loom_hsw_attn_head_avx2(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                             int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                             enum loom_attn_order order, float *scores, uint16_t *probs16, float *out);
void loom_hsw_attn_heads_avx2(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                              const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                              int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                              uint16_t *probs16, int64_t stride, float *out, int64_t out_stride);
void loom_hsw_attn_heads_q8_avx2(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                 int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                 float scale, enum loom_attn_order order, float *scores, uint16_t *probs16,
                                 int64_t stride, float *out, int64_t out_stride);

#endif
