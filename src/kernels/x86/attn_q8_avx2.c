/* attn_q8_avx2.c — AVX2 variant of loom_ops_attn_heads_q8 (attention over a Q8_0 K cache, F16 V;
 * ops.h): scores by loom_q8_0_vec_dot_avx2, the softmax of ops.c, and the F16 V part in 8-lane registers
 * holding the scalar kernel's lanes (element i in lane i % 16 or i % 64), so the result is bitwise attn_q8.c's. */
#include <immintrin.h>
#include <math.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/ops.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* ops.c reduce64: (0+2), (1+3) of the four 16-lane groups, their sum, then R16. */
static float reduce64(float acc[64])
{
    for (int l = 0; l < 16; l++) {
        acc[l] += acc[32 + l];
        acc[16 + l] += acc[48 + l];
    }
    for (int l = 0; l < 16; l++)
        acc[l] += acc[16 + l];
    return loom_ops_reduce16(acc);
}

/* v[n] . p[n] (F16) as ops.c dot_f16_lanes: BATCH 16 lanes then R16, SINGLE 64 lanes then reduce64; the
 * whole lane blocks in registers, the last partial one per lane with the same fma. */
static float dot_f16_lanes(int64_t n, const uint16_t *v, const uint16_t *p, enum loom_attn_order order)
{
    int lanes = order == LOOM_ATTN_ORDER_BATCH ? 16 : 64, regs = lanes / 8;
    __m256 a[64 / 8];
    for (int r = 0; r < 64 / 8; r++)
        a[r] = _mm256_setzero_ps();
    int64_t nb = n / lanes * lanes;
    for (int64_t i = 0; i < nb; i += lanes)
        for (int r = 0; r < regs; r++)
            a[r] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i + 8 * r))),
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i + 8 * r))), a[r]);
    float acc[64];
    for (int r = 0; r < 64 / 8; r++)
        _mm256_storeu_ps(acc + 8 * r, a[r]);
    for (int64_t i = nb; i < n; i++)
        acc[i - nb] = fmaf(loom_f16_to_f32(v[i]), loom_f16_to_f32(p[i]), acc[i - nb]);
    return lanes == 16 ? loom_ops_reduce16(acc) : reduce64(acc);
}

void loom_ops_attn_heads_q8_avx2(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                 int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                 float scale, enum loom_attn_order order, float *scores, uint16_t *probs16,
                                 int64_t stride, float *out, int64_t out_stride)
{
    int64_t row = head_dim / LOOM_QK8_0 * (int64_t)sizeof(struct loom_block_q8_0);
    const char *k = k_cache;
    for (int g = 0; g < n_q; g++) {
        const char *q = (const char *)q8 + g * row;
        float *s = scores + g * stride, *o = out + g * out_stride;
        uint16_t *pr = probs16 + g * stride;
        int64_t n = n_kv[g];
        for (int64_t p = 0; p < n; p++)
            loom_q8_0_vec_dot_avx2(head_dim, &s[p], k + p * k_stride, q);
        loom_ops_softmax(n, s, scale);
        for (int64_t p = 0; p < n; p++)
            pr[p] = loom_f32_to_f16(s[p]);
        for (int j = 0; j < head_dim_v; j++)
            o[j] = dot_f16_lanes(n, v_cache + (int64_t)j * v_stride, pr, order);
    }
}
