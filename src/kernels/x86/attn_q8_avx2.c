/* attn_q8_avx2.c — AVX2 variant of loom_ops_attn_heads_q8 (attention over a Q8_0 K cache, F16 V; ops.h): per
 * query row the scores by loom_q8_0_vec_dot_avx2 (the same in both float-order profiles), then the F16 path's
 * softmax and V products for all the rows (loom_ops_attn_softmax_v_rows_avx2), so the result is bitwise
 * attn_q8.c's. */
#include "kernels/blocks.h"
#include "kernels/ops.h"
#include "kernels/protos.h"

void loom_ops_attn_scores_q8_avx2(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                  int64_t k_stride, float *scores, int64_t stride)
{
    int64_t row = head_dim / LOOM_QK8_0 * (int64_t)sizeof(struct loom_block_q8_0);
    const char *k = k_cache;
    for (int g = 0; g < n_q; g++)
        for (int64_t p = 0; p < n_kv[g]; p++)
            loom_q8_0_vec_dot_avx2(head_dim, scores + g * stride + p, k + p * k_stride, (const char *)q8 + g * row);
}

void loom_ops_attn_heads_q8_avx2(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                 int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                 float scale, enum loom_attn_order order, float *scores, uint16_t *probs16,
                                 int64_t stride, float *out, int64_t out_stride)
{
    loom_ops_attn_scores_q8_avx2(n_q, n_kv, head_dim, q8, k_cache, k_stride, scores, stride);
    (void)probs16; /* the rounded probabilities stay in scores, as F32 */
    loom_ops_attn_softmax_v_rows_avx2(n_q, n_kv, scores, stride, scale, v_cache, v_stride, head_dim_v, order, out,
                                      out_stride);
}
