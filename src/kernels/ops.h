/* ops.h — the non-matmul math of the qwen35 forward pass: RMSNorm, L2 norm, partial NEOX RoPE, softmax,
 * SiLU/SwiGLU/sigmoid/softplus, the mixture-of-experts router, the causal conv1d over a conv state, the gated
 * delta rule step and causal GQA attention over an F16 KV cache. Every reduction has one documented order,
 * chosen to be the order of llama.cpp's CPU backend on an AVX-512 machine (ggml-cpu ops.cpp, vec.h, vec.cpp,
 * llamafile/sgemm.cpp), so results agree with the reference to the last bit. Scalar kernels live in ops.c;
 * the AVX2 and AVX-512 variants of the per-head ones (x86/ops_avx2.c, x86/ops_avx512.c) give bitwise the same
 * results. None allocates or spawns threads. */
#ifndef LOOM_KERNELS_OPS_H
#define LOOM_KERNELS_OPS_H

#include <math.h>
#include <stdint.h>

/* ---- reductions ----------------------------------------------------------------------------------
 * R16: the AVX-512 horizontal sum (_mm512_reduce_add_ps): lanes l and l+8 added, then l and l+4, then
 * l and l+2, then lanes 0 and 1. */
float loom_ops_reduce16(const float a[16]);

/* dot(x, y) over n floats in ggml_vec_dot_f32's AVX-512 order: four 16-lane accumulators, element e of
 * each 64-block going to accumulator (e % 64) / 16, lane e % 16 by fused multiply-add; then accumulators
 * 0+2, 1+3, then 0+1, then R16. The n % 64 elements after the last full block are added to that float
 * sum as GCC's vectorization of the reference's leftover loop does: groups of 16, then one of 8, of
 * separately rounded products added in index order, then the last < 8 by fused multiply-add. */
float loom_ops_dot_f32(int64_t n, const float *x, const float *y);
/* sum + a[0]*b[0] + ... + a[n-1]*b[n-1] in the tail order just described (inline, so that translation units
 * built with FMA instructions inline fmaf). */
static inline float loom_ops_tail_sum(float sum, int64_t n, const float *a, const float *b)
{
    int64_t i = 0;
    for (; n - i >= 16; i += 16)
        for (int l = 0; l < 16; l++) {
            float p = a[i + l] * b[i + l];
            sum += p;
        }
    if (n - i >= 8) {
        for (int l = 0; l < 8; l++) {
            float p = a[i + l] * b[i + l];
            sum += p;
        }
        i += 8;
    }
    for (; i < n; i++)
        sum = fmaf(a[i], b[i], sum);
    return sum;
}

/* ---- elementwise ---------------------------------------------------------------------------------- */

/* exp(x) as ggml_v_expf computes it in each AVX-512 lane (a degree-5 polynomial after range reduction by
 * ln 2, result scaled by 2^n; |x| large flushes to 0 or infinity). Max error ~1.5 ulp. */
float loom_ops_expf_poly(float x);

/* y[i] = x[i] / (1 + exp(-x[i])). Elements in whole 16-blocks use loom_ops_expf_poly and the rest libm
 * expf, as ggml_vec_silu_f32 does. y may alias x. */
void loom_ops_silu(int64_t n, const float *x, float *y);
/* y[i] = silu(g[i]) * u[i] (ggml_vec_swiglu_f32: same exp split as loom_ops_silu). */
void loom_ops_swiglu(int64_t n, const float *g, const float *u, float *y);
/* 1 / (1 + expf(-x)) with libm expf (ggml op_sigmoid). */
float loom_ops_sigmoid(float x);
/* x > 20 ? x : logf(1 + expf(x)) (ggml op_softplus). */
float loom_ops_softplus(float x);

/* ---- normalization --------------------------------------------------------------------------------
 * RMSNorm of one row: the squares x[i]*x[i] are rounded to float and summed in double in index order,
 * mean = (float)(sum / n), scale = 1 / sqrtf(mean + eps), y[i] = (x[i] * scale) * w[i] (w may be NULL:
 * then y[i] = x[i] * scale). y may alias x. (ggml-cpu ops.cpp rms_norm, fused with mul.) */
void loom_ops_rmsnorm(int64_t n, const float *x, const float *w, float eps, float *y);

/* The Gated DeltaNet L2 norm as qwen35 builds it (models.h build_gdn_l2_norm): RMSNorm with eps / n
 * (eps / n rounded to float), no weight, then every element times 1 / sqrtf(n). y may alias x. */
void loom_ops_l2norm(int64_t n, const float *x, float eps, float *y);

/* loom_ops_rmsnorm / loom_ops_l2norm of n_rows rows of n floats each: row r from x + r*x_stride to
 * y + r*y_stride (y may alias x row for row). Bitwise the same as one call per row; the AVX-512 variant
 * sums the squares of 8 rows at once, one row per double lane, each still in index order. */
void loom_ops_rmsnorm_rows(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w, float eps,
                           float *y, int64_t y_stride);
void loom_ops_l2norm_rows(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, float eps, float *y,
                          int64_t y_stride);

/* ---- rotary position embedding --------------------------------------------------------------------
 * cache[2i] = cos(theta_i), cache[2i+1] = sin(theta_i) for i < n_rot/2 with theta_0 = pos and
 * theta_{i+1} = theta_i * powf(base, -2/n_rot), multiplied in float as ggml_mrope_cache_init does (for
 * text positions every M-RoPE section has the same position, so the sections do not change theta). */
void loom_ops_rope_cache(int32_t pos, int n_rot, float freq_base, float *cache);
/* NEOX rotation of the first n_rot dims of one head in place: pairs (i, i + n_rot/2) for i < n_rot/2,
 * x0' = fma(x0, cos, -(x1*sin)), x1' = fma(x0, sin, x1*cos) (the contraction the reference's compiled
 * rotate_pairs uses). Dims past n_rot are unchanged. */
void loom_ops_rope_neox(float *x, int n_rot, const float *cache);

/* ---- softmax ---------------------------------------------------------------------------------------
 * In-place softmax of x[0..n) scaled by `scale` (ggml soft_max_ext without mask/ALiBi; masked entries
 * are simply not part of the row): w = x*scale; m = max; e = expf_poly(w - m) for elements in whole
 * 16-blocks (libm expf after); the sum adds each 16-block's R16 in double, then the tail in double;
 * x[i] = e[i] * (float)(1.0 / sum). */
void loom_ops_softmax(int64_t n, float *x, float scale);

/* ---- mixture-of-experts router ----------------------------------------------------------------------
 * The reference's softmax-gated router for one token (llama-graph.cpp build_moe_ffn with gating SOFTMAX,
 * norm_w on, no weight scale, no expert groups, as qwen35moe.cpp build_layer_ffn builds it), op by op on
 * its CPU backend:
 *   soft_max (ops.cpp ggml_compute_forward_soft_max_f32, scale 1, no mask): m = max in index order;
 *     e = expf_poly(l - m) per whole 16-block, each block's R16 added to a double sum; the n % 16 tail with
 *     libm expf, each added to the double sum (vec.cpp ggml_vec_soft_max_f32); p = e * (float)(1.0 / sum)
 *   argsort_top_k (ggml.c ggml_argsort_top_k = a view of the first k of ARGSORT desc; ops.cpp
 *     ggml_compute_forward_argsort_f32: std::sort of 0..n-1 with p[a] > p[b], not stable):
 *     loom_ops_argsort_desc, whose order for equal probabilities is libstdc++'s introsort's
 *   get_rows, sum_rows (vec.h ggml_vec_sum_f32: a double sum in slot order, rounded to float), clamp
 *     (ops.cpp clamp_f32: MAX(MIN(s, INFINITY), 6.103515625e-5)), div: w[j] = p[ids[j]] / clamped sum.
 * The CPU backend fuses none of these (ggml-cpu.c ggml_cpu_try_fuse_ops fuses only RMS_NORM + MUL). */
#define LOOM_OPS_MAX_EXPERTS 1024

/* idx[0..n) = the permutation of 0..n-1 that libstdc++'s std::sort(idx, idx + n, cmp) leaves with
 * cmp(a, b) = x[a] > x[b] (introsort: median-of-three quicksort above 16 elements, heapsort past depth
 * 2 * floor(log2 n), then insertion sort), so ties come out in the reference's order. */
void loom_ops_argsort_desc(int n, const float *x, int32_t *idx);

/* The router's soft_max above, in place over p[n] (the avx512 profile's order; the haswell profile's is
 * loom_hsw_softmax_router): a kernel set's ops.router_softmax. */
void loom_ops_softmax_router(int n, float *p);

/* One token's router, n (1..LOOM_OPS_MAX_EXPERTS) experts, k (1..n) used: logits[n] in, probabilities
 * out (in place, by softmax: the kernel set's ops.router_softmax); ids[k] the selected experts, best first;
 * weights[k] their normalized weights. */
void loom_ops_moe_route(void (*softmax)(int n, float *p), int n, int k, float *logits, int32_t *ids,
                        float *weights);

/* The n_tok * k (token, slot) pairs of a ubatch (ids[t * k + slot]: expert of the pair, < n_expert) grouped
 * by expert as MUL_MAT_ID groups its rows (ggml-cpu.c ggml_compute_forward_mul_mat_id: tokens in order,
 * slots in order within a token): expert e's pairs at positions [start[e], start[e + 1]) (start has
 * n_expert + 1 entries), perm[p] = t * k + slot of the pair at position p, pos[t * k + slot] = p. */
void loom_ops_moe_group(int n_tok, int k, int n_expert, const int32_t *ids, int32_t *start, int32_t *perm,
                        int32_t *pos);

/* ---- Gated DeltaNet --------------------------------------------------------------------------------
 * Causal depthwise conv1d for one token over `channels` channels with kernel width K (1..MAX):
 * window[c] = (state[c][0..K-1), x[c]); y[c] = sum_j window[c][j] * w[c][j], summed from 0 in tap order
 * as ggml ssm_conv's compiled loop does (for K < 8 a chain of fused multiply-adds; longer kernels take
 * groups of separately rounded products first, as loom_ops_dot_f32's tail); then state[c] = window[c][1..K).
 * state is [channels][K-1], w is [channels][K] (the GGUF ssm_conv1d layout). y must not alias x. */
#define LOOM_OPS_MAX_CONV_KERNEL 64
void loom_ops_conv1d_step(int64_t channels, int K, float *state, const float *w, const float *x, float *y);
/* n tokens of loom_ops_conv1d_step through one conv state: token t reads x + t*x_stride and writes
 * y + t*y_stride (`channels` floats each). Bitwise the same as n calls in token order; each channel keeps
 * its window while the tokens stream through, and the state is written back once. */
void loom_ops_conv1d_chunk(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                           int64_t x_stride, float *y, int64_t y_stride);

/* One token of the gated delta rule for one value head with head dim d (ggml gated_delta_net, fused path).
 * M[d][d] is the state stored value-major: M[j*d + i] = S[i][j] (i = key index, j = value index).
 * Row by row (each row of M only depends on itself):
 *   M[j] *= expf(g);  delta_j = (v[j] - dot(M[j], k)) * beta;  M[j][i] = fma(k[i], delta_j, M[j][i]);
 *   out[j] = dot(M[j], q) * (1 / sqrtf(d))
 * with dot = loom_ops_dot_f32. q and k are L2-normalized by the caller; q is not pre-scaled. */
void loom_ops_delta_rule_step(int d, float *M, const float *q, const float *k, const float *v, float g,
                              float beta, float *out);
/* n tokens of loom_ops_delta_rule_step through one head's state, read from M_src[d][d] and written to
 * M[d][d] (M_src == M: in place; otherwise the two must not overlap, and the copy is never made: the
 * state's transaction copy costs no extra pass): token t reads q, k and v at + t*qkv_stride (d floats
 * each), g[t*gb_stride] and beta[t*gb_stride], and writes out + t*out_stride (d floats). Bitwise the same
 * as copying M_src to M, then n calls in token order: since each row of M only depends on itself, a row
 * may walk several tokens before the next row starts. */
void loom_ops_delta_rule_chunk(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                               const float *v, int64_t qkv_stride, const float *g, const float *beta, int64_t gb_stride,
                               float *out, int64_t out_stride);

/* ---- attention over an F16 KV cache ---------------------------------------------------------------
 * The reference (flash attention off, F16 cache) computes, per query row and head:
 *   s[p] = K[p] . f16(q) for p <= the row's position (F16 products accumulated in F32),
 *   softmax(s * scale) as loom_ops_softmax, probabilities rounded to F16,
 *   o[j] = sum_p f16(prob[p]) * V[j][p].
 * Both dot products take their accumulation order from the matmul path the reference picks: for a
 * batch of >= 2 rows tinyBLAS (one 16-lane accumulator, element e in lane e % 16, then R16); for a
 * single row ggml_vec_dot_f16 (as loom_ops_dot_f32 but over F16 inputs, tail summed in double). */
enum loom_attn_order { LOOM_ATTN_ORDER_BATCH = 0, LOOM_ATTN_ORDER_SINGLE = 1 };

/* dot of two F16 vectors in the given order. */
float loom_ops_dot_f16(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order);

/* One head of one query row. q16[head_dim] (already F16), K rows k_cache + p*k_stride (F16, head_dim
 * each) for p < n_kv, V transposed: v_cache + j*v_stride holds V[j][0..n_kv) (F16). scores[n_kv] and
 * probs16[n_kv] are scratch; out[head_dim_v] F32. */
void loom_ops_attn_head(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                        int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                        enum loom_attn_order order, float *scores, uint16_t *probs16, float *out);

/* Query rows a kernel keeps in registers together (each K/V row loaded once for them), and the most
 * loom_ops_attn_heads takes at once (groups of LOOM_OPS_ATTN_GROUP reading each K/V tile from memory once). */
#define LOOM_OPS_ATTN_GROUP 4
#define LOOM_OPS_ATTN_ROWS 16

/* n_q (1..LOOM_OPS_ATTN_ROWS) query rows against the same K/V cache (of one KV head): row g is
 * loom_ops_attn_head(n_kv[g], head_dim, q16 + g*head_dim, ..., scores + g*stride, probs16 + g*stride,
 * out + g*out_stride), bitwise, for every variant. K rows up to the largest n_kv[g] must be written.
 * scores/probs16 are scratch [n_q][stride] with stride >= every n_kv[g]. */
void loom_ops_attn_heads(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                         int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                         enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                         int64_t out_stride);

/* ---- attention over a Q8_0 K cache (V F16) ------------------------------------------------------------
 * The reference with type_k = Q8_0 and flash attention off: each K row is Q8_0 (set_rows' from_float,
 * quantize_row_q8_0), the query row is quantized to Q8_0 (Q8_0's vec_dot_type) and each score is a Q8_0 x
 * Q8_0 dot. One token runs ggml_vec_dot_q8_0_q8_0, a batch tinyBLAS_Q0_AVX (llamafile/sgemm.cpp); both keep
 * 8 float lanes, lane l = fma(d_k * d_q, exact integer sum of elements 4l..4l+3 of the block, lane l) per
 * block, then hsum_float_8: one order, loom_q8_0_vec_dot's, whatever `order` says. Softmax and the F16 V
 * part are loom_ops_attn_head's (`order` picks the V part's). */

/* The reference's Hadamard rotation of Q and K rows before a quantized K cache (llama-kv-cache.cpp attn_rot_k:
 * type_k quantized and head dimension % 64 == 0; llama_mul_mat_hadamard, computed on the CPU by
 * ggml_compute_forward_fwht): x[n] (n a power of two) in place, first x[j] * (1 / sqrtf(n)), then the
 * butterflies (u, v) -> (u + v, u - v) at distance 1, 2, 4, ..., n / 2. Every step is one rounding of its own,
 * so the result has one order. */
void loom_ops_fwht(int n, float *x);
/* loom_ops_fwht's butterflies alone (the unnormalized transform: x = H x in place, n a power of two). */
void loom_ops_hadamard(int n, float *x);

/* The part of loom_ops_attn_head after the scores: softmax of scores[n_kv] (in place) with scale,
 * probabilities rounded to probs16[n_kv], out[head_dim_v] = V . probs in the given order. */
void loom_ops_attn_softmax_v(int64_t n_kv, float *scores, float scale, uint16_t *probs16, const uint16_t *v_cache,
                             int64_t v_stride, int head_dim_v, enum loom_attn_order order, float *out);

/* As loom_ops_attn_heads over a Q8_0 K cache: q8 holds n_q query rows of head_dim / 32 Q8_0 blocks each
 * (struct loom_block_q8_0, loom_q8_0_from_float of the F32 rows), K row p at k_cache + p * k_stride bytes
 * (head_dim / 32 blocks); head_dim a multiple of 32. Every variant is bitwise the scalar one. */
void loom_ops_attn_heads_q8(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                            int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                            enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                            int64_t out_stride);
/* The SIMD sets' part of loom_ops_attn_heads after the scores (the attention kernels' own, bitwise the scalar
 * loom_ops_attn_softmax_v of each row; the probabilities stay in scores as the F32 values of their F16 rounding):
 * n_q <= LOOM_OPS_ATTN_ROWS rows of one KV head at once, row g's scores at scores + g * stride and output at
 * out + g * out_stride (AVX2: groups of four rows share each V row's loads; AVX-512: the V tiles of
 * loom_ops_attn_heads_avx512). */
void loom_ops_attn_softmax_v_rows_avx2(int n_q, const int64_t *n_kv, float *scores, int64_t stride, float scale,
                                       const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                       enum loom_attn_order order, float *out, int64_t out_stride);
void loom_ops_attn_softmax_v_rows_avx512(int n_q, const int64_t *n_kv, float *scores, int64_t stride, float scale,
                                         const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                         enum loom_attn_order order, float *out, int64_t out_stride);
/* scores[g*stride + p] = K[p] . q8[g] for p < n_kv[g] over a Q8_0 K cache (loom_q8_0_vec_dot_avx2 each). */
void loom_ops_attn_scores_q8_avx2(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                  int64_t k_stride, float *scores, int64_t stride);
void loom_ops_attn_heads_q8_avx2(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                 int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                 float scale, enum loom_attn_order order, float *scores, uint16_t *probs16,
                                 int64_t stride, float *out, int64_t out_stride);
void loom_ops_attn_heads_q8_avx512(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                                   int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                                   float scale, enum loom_attn_order order, float *scores, uint16_t *probs16,
                                   int64_t stride, float *out, int64_t out_stride);

/* ---- variants ----------------------------------------------------------------------------------
 * The per-head kernels that dominate the time, one implementation per kernel set (the `ops` of struct
 * loom_kernel_set, kernels.h). Every variant computes bitwise the same results as the scalar one (same
 * operations in the same order). */
struct loom_ops_kernels {
    void (*silu)(int64_t n, const float *x, float *y);
    void (*swiglu)(int64_t n, const float *g, const float *u, float *y);
    void (*conv1d_step)(int64_t channels, int K, float *state, const float *w, const float *x, float *y);
    void (*delta_rule_step)(int d, float *M, const float *q, const float *k, const float *v, float g, float beta,
                            float *out);
    void (*conv1d_chunk)(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                         int64_t x_stride, float *y, int64_t y_stride);
    void (*delta_rule_chunk)(int d, int n, const float *M_src, float *M, const float *q, const float *k, const float *v,
                             int64_t qkv_stride, const float *g, const float *beta, int64_t gb_stride, float *out,
                             int64_t out_stride);
    void (*rmsnorm_rows)(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w, float eps,
                         float *y, int64_t y_stride);
    void (*l2norm_rows)(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, float eps, float *y,
                        int64_t y_stride);
    void (*attn_head)(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache, int64_t k_stride,
                      const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                      enum loom_attn_order order, float *scores, uint16_t *probs16, float *out);
    void (*attn_heads)(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                       int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                       enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                       int64_t out_stride);
    void (*attn_heads_q8)(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
                          int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                          enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                          int64_t out_stride);
    void (*router_softmax)(int n, float *p); /* the same in every set of a profile (loom_ops_moe_route) */
};

/* AVX2 variants (src/kernels/x86/ops_avx2.c); call only where the CPU has AVX2, FMA and F16C. */
void loom_ops_silu_avx2(int64_t n, const float *x, float *y);
void loom_ops_swiglu_avx2(int64_t n, const float *g, const float *u, float *y);
void loom_ops_conv1d_step_avx2(int64_t channels, int K, float *state, const float *w, const float *x, float *y);
void loom_ops_delta_rule_step_avx2(int d, float *M, const float *q, const float *k, const float *v, float g,
                                   float beta, float *out);
void loom_ops_rmsnorm_rows_avx2(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w,
                                float eps, float *y, int64_t y_stride);
void loom_ops_l2norm_rows_avx2(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, float eps, float *y,
                               int64_t y_stride);
void loom_ops_conv1d_chunk_avx2(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                                int64_t x_stride, float *y, int64_t y_stride);
void loom_ops_delta_rule_chunk_avx2(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                                    const float *v, int64_t qkv_stride, const float *g, const float *beta,
                                    int64_t gb_stride, float *out, int64_t out_stride);
void loom_ops_attn_head_avx2(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                             int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                             enum loom_attn_order order, float *scores, uint16_t *probs16, float *out);
void loom_ops_attn_heads_avx2(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                              const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                              int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                              uint16_t *probs16, int64_t stride, float *out, int64_t out_stride);

/* AVX-512 variants (src/kernels/x86/ops_avx512.c); call only where the CPU has AVX-512 F/BW/VL/DQ. */
void loom_ops_silu_avx512(int64_t n, const float *x, float *y);
void loom_ops_swiglu_avx512(int64_t n, const float *g, const float *u, float *y);
void loom_ops_conv1d_step_avx512(int64_t channels, int K, float *state, const float *w, const float *x, float *y);
void loom_ops_delta_rule_step_avx512(int d, float *M, const float *q, const float *k, const float *v, float g,
                                     float beta, float *out);
void loom_ops_rmsnorm_rows_avx512(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w,
                                  float eps, float *y, int64_t y_stride);
void loom_ops_l2norm_rows_avx512(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, float eps, float *y,
                                 int64_t y_stride);
void loom_ops_conv1d_chunk_avx512(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                                  int64_t x_stride, float *y, int64_t y_stride);
void loom_ops_delta_rule_chunk_avx512(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                                      const float *v,
                                      int64_t qkv_stride, const float *g, const float *beta, int64_t gb_stride,
                                      float *out, int64_t out_stride);
void loom_ops_attn_head_avx512(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                               int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v,
                               float scale, enum loom_attn_order order, float *scores, uint16_t *probs16, float *out);
void loom_ops_attn_heads_avx512(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16,
                                const uint16_t *k_cache, int64_t k_stride, const uint16_t *v_cache, int64_t v_stride,
                                int head_dim_v, float scale, enum loom_attn_order order, float *scores,
                                uint16_t *probs16, int64_t stride, float *out, int64_t out_stride);

#endif
