/* orders_haswell.c — the scalar kernels of the "haswell" float-order profile (orders_haswell.h): llama.cpp's
 * AVX2 CPU build's orders where they differ from its AVX-512 builds' (docs/haswell-numerics.md D1-D10), each
 * read from the reference's source and checked against its shipped libggml-cpu-haswell.so (tests/parity). */
#include "kernels/orders_haswell.h"

#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* ---- D7-D9: exp, SiLU, SwiGLU, softmax ---------------------------------------------------------------- */

static inline uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float loom_hsw_expf(float x)
{
    const float r = 0x1.8p23f;
    float z = fmaf(x, 0x1.715476p+0f, r);
    float n = z - r;
    float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    uint32_t e = bits_of(z) << 23;
    float k = float_of(e + 0x3f800000u);
    float u = b * b;
    float c1b = 0x1.ffffecp-1f * b;
    float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                   c1b);
    if (!(fabsf(n) > 126.0f)) /* NaN too: the lane keeps the fast form */
        return fmaf(k, j, k);
    uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    float s1 = float_of(g + 0x7f000000u), s2 = float_of(e - g);
    if (fabsf(n) > 192.0f)
        return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

static float silu_v(float x) { return x / (1.0f + loom_hsw_expf(0.0f - x)); }
static float silu_libm(float x) { return x / (1.0f + expf(-x)); }

void loom_hsw_silu(int64_t n, const float *x, float *y)
{
    int64_t nv = n & ~(int64_t)7;
    for (int64_t i = 0; i < nv; i++)
        y[i] = silu_v(x[i]);
    for (int64_t i = nv; i < n; i++)
        y[i] = silu_libm(x[i]);
}

void loom_hsw_swiglu(int64_t n, const float *g, const float *u, float *y)
{
    int64_t nv = n & ~(int64_t)7;
    for (int64_t i = 0; i < nv; i++)
        y[i] = silu_v(g[i]) * u[i];
    for (int64_t i = nv; i < n; i++)
        y[i] = silu_libm(g[i]) * u[i];
}

void loom_hsw_softmax(int64_t n, float *x, float scale)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        x[i] *= scale;
        max = x[i] > max ? x[i] : max;
    }
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += 8) {
        float e[8];
        for (int l = 0; l < 8; l++) {
            int64_t i = i0 + l;
            e[l] = i < n ? loom_hsw_expf(x[i] - max) : 0.0f;
            if (i < n)
                x[i] = e[l];
        }
        sum += (double)loom_hsum8(e);
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

void loom_hsw_softmax_router(int n, float *p)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = max > p[i] ? max : p[i];
    double sum = 0.0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int l = 0; l < 8; l++)
            p[i + l] = loom_hsw_expf(p[i + l] - max);
        sum += (double)loom_hsum8(p + i);
    }
    for (; i < n; i++) {
        p[i] = expf(p[i] - max);
        sum += (double)p[i];
    }
    float inv = (float)(1.0 / sum);
    for (i = 0; i < n; i++)
        p[i] *= inv;
}

/* ---- D1-D4: F32/F16/BF16 vec_dot -------------------------------------------------------------------- */

/* Four 8-lane accumulators folded as GGML_F32x8_REDUCE: (0+2), (1+3), then their sum, then T8a. */
static float fold_t8a(float acc[4][8])
{
    float r[8];
    for (int l = 0; l < 8; l++)
        r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    return loom_hsw_hsum8_t8a(r);
}

float loom_hsw_dot_f32(int64_t n, const float *x, const float *y)
{
    float acc[4][8] = {{0}};
    int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++)
                acc[j][l] = fmaf(x[i + 8 * j + l], y[i + 8 * j + l], acc[j][l]);
    return loom_hsw_tail_sum(fold_t8a(acc), n - np, x + np, y + np);
}

void loom_hsw_f32_vec_dot(int64_t n, float *s, const void *w, const void *a) { *s = loom_hsw_dot_f32(n, w, a); }

/* ggml_vec_dot_f16's 4x8 accumulators over the first n - n % 32 elements, folded to float. */
static float f16_dot_4x8(int64_t np, const uint16_t *x, const uint16_t *y)
{
    float acc[4][8] = {{0}};
    for (int64_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++) {
                int64_t k = i + 8 * j + l;
                acc[j][l] = fmaf(loom_f16_to_f32(x[k]), loom_f16_to_f32(y[k]), acc[j][l]);
            }
    return fold_t8a(acc);
}

void loom_hsw_f16_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    int64_t np = n & ~(int64_t)31;
    double sum = f16_dot_4x8(np, x, y);
    for (int64_t i = np; i < n; i++)
        sum += (double)(loom_f16_to_f32(x[i]) * loom_f16_to_f32(y[i]));
    *s = (float)sum;
}

/* ggml_vec_dot_bf16, AVX2: c1..c4 take the 8-element slices of each 32-element step (products of BF16 values
 * are exact, so the contracted FMA is the rounded add; no flushing), (c1+c3)+(c2+c4), T8b, then 0.0 + that
 * in double and the tail in double. */
void loom_hsw_bf16_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float c[4][8] = {{0}}, r[8];
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++) {
                int64_t k = i + 8 * j + l;
                c[j][l] = fmaf(loom_bf16_to_f32(x[k]), loom_bf16_to_f32(y[k]), c[j][l]);
            }
    for (int l = 0; l < 8; l++)
        r[l] = (c[0][l] + c[2][l]) + (c[1][l] + c[3][l]);
    double sum = 0.0;
    sum += (double)loom_hsum8(r);
    for (; i < n; i++)
        sum += (double)(loom_bf16_to_f32(x[i]) * loom_bf16_to_f32(y[i]));
    *s = (float)sum;
}

/* ---- D5, D6: tinyBLAS<8, __m256>: one 8-lane FMA accumulator, element e in lane e % 8, then T8b -------- */

void loom_hsw_f32_tinyblas(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n; i++)
        acc[i & 7] = fmaf(x[i], y[i], acc[i & 7]);
    *s = loom_hsum8(acc);
}

void loom_hsw_f16_tinyblas(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n; i++)
        acc[i & 7] = fmaf(loom_f16_to_f32(x[i]), loom_f16_to_f32(y[i]), acc[i & 7]);
    *s = loom_hsum8(acc);
}

void loom_hsw_bf16_tinyblas(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n; i++)
        acc[i & 7] = fmaf(loom_bf16_to_f32(x[i]), loom_bf16_to_f32(y[i]), acc[i & 7]);
    *s = loom_hsum8(acc);
}

/* ---- D10, D1: the Gated DeltaNet ops ----------------------------------------------------------------- */

void loom_hsw_conv1d_chunk(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                           int64_t x_stride, float *y, int64_t y_stride)
{
    float win[LOOM_OPS_MAX_CONV_KERNEL];
    for (int64_t c = 0; c < channels; c++) {
        float *s = state + c * (K - 1);
        memcpy(win, s, (size_t)(K - 1) * sizeof(float));
        for (int t = 0; t < n; t++) {
            win[K - 1] = x[t * x_stride + c];
            y[t * y_stride + c] = loom_hsw_tail_sum(0.0f, K, win, w + c * K);
            memmove(win, win + 1, (size_t)(K - 1) * sizeof(float));
        }
        memcpy(s, win, (size_t)(K - 1) * sizeof(float));
    }
}

void loom_hsw_conv1d_step(int64_t channels, int K, float *state, const float *w, const float *x, float *y)
{
    loom_hsw_conv1d_chunk(channels, K, 1, state, w, x, 0, y, 0);
}

void loom_hsw_delta_rule_step(int d, float *M, const float *q, const float *k, const float *v, float g, float beta,
                              float *out)
{
    float decay = expf(g), scale = 1.0f / sqrtf((float)d);
    for (int j = 0; j < d; j++) {
        float *row = M + (int64_t)j * d;
        for (int i = 0; i < d; i++)
            row[i] *= decay;
        float delta = (v[j] - loom_hsw_dot_f32(d, row, k)) * beta;
        for (int i = 0; i < d; i++)
            row[i] = fmaf(k[i], delta, row[i]);
        out[j] = loom_hsw_dot_f32(d, row, q) * scale;
    }
}

void loom_hsw_delta_rule_chunk(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                               const float *v, int64_t qkv_stride, const float *g, const float *beta,
                               int64_t gb_stride, float *out, int64_t out_stride)
{
    if (M_src != M)
        memcpy(M, M_src, (size_t)d * (size_t)d * sizeof(float));
    for (int t = 0; t < n; t++)
        loom_hsw_delta_rule_step(d, M, q + t * qkv_stride, k + t * qkv_stride, v + t * qkv_stride, g[t * gb_stride],
                                 beta[t * gb_stride], out + t * out_stride);
}

/* ---- attention (D3, D5, D8) ----------------------------------------------------------------------------- */

/* Dot of F16 vectors with every element in a lane, as if zero-padded to a whole block (the reference's padded KV
 * view): BATCH tinyBLAS's 8 lanes and T8b, SINGLE ggml_vec_dot_f16's 4x8 lanes, fold and T8a. */
static float dot_f16_lanes(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order)
{
    float acc[4][8] = {{0}};
    int lanes = order == LOOM_ATTN_ORDER_BATCH ? 8 : 32;
    for (int64_t i = 0; i < n; i++) {
        float *a = &acc[(i % lanes) / 8][i & 7];
        *a = fmaf(loom_f16_to_f32(x[i]), loom_f16_to_f32(y[i]), *a);
    }
    return order == LOOM_ATTN_ORDER_BATCH ? loom_hsum8(acc[0]) : fold_t8a(acc);
}

float loom_hsw_dot_f16(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order)
{
    float s;
    if (order == LOOM_ATTN_ORDER_BATCH)
        return dot_f16_lanes(n, x, y, order);
    loom_hsw_f16_vec_dot(n, &s, x, y);
    return s;
}

static void softmax_v(int64_t n_kv, float *scores, float scale, uint16_t *probs16, const uint16_t *v_cache,
                      int64_t v_stride, int head_dim_v, enum loom_attn_order order, float *out)
{
    loom_hsw_softmax(n_kv, scores, scale);
    for (int64_t p = 0; p < n_kv; p++)
        probs16[p] = loom_f32_to_f16(scores[p]);
    for (int j = 0; j < head_dim_v; j++)
        out[j] = dot_f16_lanes(n_kv, v_cache + (int64_t)j * v_stride, probs16, order);
}

void loom_hsw_attn_head(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache, int64_t k_stride,
                        const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                        enum loom_attn_order order, float *scores, uint16_t *probs16, float *out)
{
    for (int64_t p = 0; p < n_kv; p++)
        scores[p] = loom_hsw_dot_f16(head_dim, k_cache + p * k_stride, q16, order);
    softmax_v(n_kv, scores, scale, probs16, v_cache, v_stride, head_dim_v, order, out);
}

void loom_hsw_attn_heads(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                         int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                         enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                         int64_t out_stride)
{
    for (int g = 0; g < n_q; g++)
        loom_hsw_attn_head(n_kv[g], head_dim, q16 + (int64_t)g * head_dim, k_cache, k_stride, v_cache, v_stride,
                           head_dim_v, scale, order, scores + g * stride, probs16 + g * stride, out + g * out_stride);
}

void loom_hsw_attn_heads_q8(int n_q, const int64_t *n_kv, int head_dim, const void *q8, const void *k_cache,
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
        softmax_v(n_kv[g], s, scale, probs16 + g * stride, v_cache, v_stride, head_dim_v, order,
                  out + g * out_stride);
    }
}
