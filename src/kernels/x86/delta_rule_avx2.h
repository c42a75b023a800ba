/* delta_rule_avx2.h — the AVX2 gated delta rule of one value head over a run of tokens, each row of the state
 * kept in L1 while a block of tokens passes over it and read from the source state by the first token (no copy):
 * included by ops_avx2.c and orders_haswell_avx2.c, each with its profile's dot_f32 (the only reduction); the
 * block's gates (delta_block_gates) by ops_avx512.c too. */
#ifndef LOOM_KERNELS_X86_DELTA_RULE_AVX2_H
#define LOOM_KERNELS_X86_DELTA_RULE_AVX2_H

#include <immintrin.h>
#include <math.h>

#define DELTA_INLINE static inline __attribute__((always_inline))

/* Tokens a row walks before the next row: their q and k (2 x d floats each) stay in L1. */
#define DELTA_BLOCK 16

typedef float (*delta_dot_fn)(int64_t n, const float *x, const float *y);

/* The gates of the block of tokens t0 .. of n (gate rows gb_stride apart): decay[t] = expf(g), bt[t] = beta, for
 * the block's nb = min(n - t0, DELTA_BLOCK) tokens; returns nb. */
DELTA_INLINE int delta_block_gates(int n, int t0, const float *g, const float *beta, int64_t gb_stride,
                                   float decay[DELTA_BLOCK], float bt[DELTA_BLOCK])
{
    int nb = n - t0 < DELTA_BLOCK ? n - t0 : DELTA_BLOCK;
    for (int t = 0; t < nb; t++) {
        decay[t] = expf(g[(t0 + t) * gb_stride]);
        bt[t] = beta[(t0 + t) * gb_stride];
    }
    return nb;
}

/* Row j of the state through the nb tokens of a block, read from src and written to row, per token in the
 * order of loom_ops_delta_rule_step: the decay (a rounded product per element), delta_j = (v[j] - dot(row, k)) *
 * beta, the update (one fused multiply-add per element), out[j] = dot(row, q) * scale. */
DELTA_INLINE void delta_row_avx2(delta_dot_fn dot, int d, const float *src, float *row, int j, int nb,
                                 const float *q, const float *k, const float *v, int64_t qkv_stride,
                                 const float *decay, const float *beta, float scale, float *out, int64_t out_stride)
{
    for (int t = 0; t < nb; t++) {
        const float *kt = k + t * qkv_stride, *in = t == 0 ? src : row;
        __m256 dec = _mm256_set1_ps(decay[t]);
        int i = 0;
        for (; i + 8 <= d; i += 8)
            _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(in + i), dec));
        for (; i < d; i++)
            row[i] = in[i] * decay[t];
        float dj = (v[t * qkv_stride + j] - dot(d, row, kt)) * beta[t];
        __m256 vd = _mm256_set1_ps(dj);
        for (i = 0; i + 8 <= d; i += 8)
            _mm256_storeu_ps(row + i, _mm256_fmadd_ps(_mm256_loadu_ps(kt + i), vd, _mm256_loadu_ps(row + i)));
        for (; i < d; i++)
            row[i] = fmaf(kt[i], dj, row[i]);
        out[t * out_stride + j] = dot(d, row, q + t * qkv_stride) * scale;
    }
}

/* n tokens through the state M_src [d][d] (M_src == M: in place), written to M; q, k, v and out as
 * loom_ops_delta_rule_chunk. Rows are independent, so walking a row through a block of tokens before the next
 * row changes no result. */
DELTA_INLINE void delta_rule_chunk_avx2(delta_dot_fn dot, int d, int n, const float *M_src, float *M, const float *q,
                                        const float *k, const float *v, int64_t qkv_stride, const float *g,
                                        const float *beta, int64_t gb_stride, float *out, int64_t out_stride)
{
    float scale = 1.0f / sqrtf((float)d);
    for (int t0 = 0; t0 < n; t0 += DELTA_BLOCK) {
        float decay[DELTA_BLOCK], bt[DELTA_BLOCK];
        int nb = delta_block_gates(n, t0, g, beta, gb_stride, decay, bt);
        const float *src = t0 == 0 ? M_src : M; /* the first block reads the source, later ones M */
        for (int j = 0; j < d; j++)
            delta_row_avx2(dot, d, src + (int64_t)j * d, M + (int64_t)j * d, j, nb, q + t0 * qkv_stride,
                           k + t0 * qkv_stride, v + t0 * qkv_stride, qkv_stride, decay, bt, scale,
                           out + t0 * out_stride, out_stride);
    }
}

#endif
