/* attn_q8.c — attention of query rows over a Q8_0 K cache with an F16 V cache (the reference with
 * type_k = Q8_0, flash attention off): the scalar kernel, the bitwise oracle of the SIMD variants in
 * x86/attn_q8_avx2.c and x86/attn_q8_avx512.c (the score order is documented in ops.h), and the Hadamard
 * rotation the reference applies to Q and K rows before such a cache. */
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/ops.h"
#include "kernels/protos.h"

void loom_ops_attn_heads_q8(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                            int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                            enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                            int64_t out_stride)
{
    int64_t row = head_dim / LOOM_QK8_0 * (int64_t)sizeof(struct loom_block_q8_0);
    const char *k = k_cache;
    for (int g = 0; g < n_q; g++) {
        const char *q = (const char *)q8 + g * row;
        float *s = scores + g * stride;
        for (int64_t p = 0; p < n_kv[g]; p++)
            loom_q8_0_vec_dot(head_dim, &s[p], k + p * k_stride, q);
        loom_ops_attn_softmax_v(n_kv[g], s, scale, probs16 + g * stride, v_cache, v_stride, head_dim_v, order,
                                out + g * out_stride);
    }
}

void loom_ops_fwht(int n, float *x)
{
    float scale = 1.0f / sqrtf((float)n);
    for (int j = 0; j < n; j++)
        x[j] *= scale;
    loom_ops_hadamard(n, x);
}

void loom_ops_hadamard(int n, float *x)
{
    for (int len = 1; len < n; len <<= 1)
        for (int i = 0; i < n; i += 2 * len)
            for (int j = i; j < i + len; j++) {
                float u = x[j], v = x[j + len];
                x[j] = u + v;
                x[j + len] = u - v;
            }
}
