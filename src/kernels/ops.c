/* ops.c — scalar kernels for the non-matmul math of the qwen35 forward pass (see ops.h); the scalar kernel set
 * (sets.c) points at its per-head ones, and the SIMD sets (x86/ops_avx2.c, x86/ops_avx512.c) reproduce them
 * bit for bit. Each function reproduces the rounding points and reduction order of llama.cpp's CPU backend as
 * built for AVX-512 (libggml-cpu-zen4: GCC 11, FP contraction on), verified against its source and its
 * disassembly. */
#include "kernels/ops.h"

#include <math.h>
#include <string.h>

#include "util/fp16.h"

void loom_ops_rmsnorm(int64_t n, const float *x, const float *w, float eps, float *y)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float sq = x[i] * x[i];
        sum += (double)sq;
    }
    float mean = (float)(sum / (double)n);
    float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++)
            y[i] = (x[i] * scale) * w[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] * scale;
    }
}

void loom_ops_l2norm(int64_t n, const float *x, float eps, float *y)
{
    float fn = (float)n;
    loom_ops_rmsnorm(n, x, NULL, eps / fn, y);
    float s = 1.0f / sqrtf(fn);
    for (int64_t i = 0; i < n; i++)
        y[i] *= s;
}

void loom_ops_rmsnorm_rows(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, const float *w, float eps,
                           float *y, int64_t y_stride)
{
    for (int64_t r = 0; r < n_rows; r++)
        loom_ops_rmsnorm(n, x + r * x_stride, w, eps, y + r * y_stride);
}

void loom_ops_l2norm_rows(int64_t n_rows, int64_t n, const float *x, int64_t x_stride, float eps, float *y,
                          int64_t y_stride)
{
    for (int64_t r = 0; r < n_rows; r++)
        loom_ops_l2norm(n, x + r * x_stride, eps, y + r * y_stride);
}

void loom_ops_conv1d_chunk(int64_t channels, int K, int n, float *state, const float *w, const float *x,
                           int64_t x_stride, float *y, int64_t y_stride)
{
    float win[LOOM_OPS_MAX_CONV_KERNEL];
    for (int64_t c = 0; c < channels; c++) {
        float *s = state + c * (K - 1);
        memcpy(win, s, (size_t)(K - 1) * sizeof(float));
        for (int t = 0; t < n; t++) {
            win[K - 1] = x[t * x_stride + c];
            y[t * y_stride + c] = loom_ops_tail_sum(0.0f, K, win, w + c * K);
            memmove(win, win + 1, (size_t)(K - 1) * sizeof(float));
        }
        memcpy(s, win, (size_t)(K - 1) * sizeof(float));
    }
}

void loom_ops_conv1d_step(int64_t channels, int K, float *state, const float *w, const float *x, float *y)
{
    loom_ops_conv1d_chunk(channels, K, 1, state, w, x, 0, y, 0);
}

float loom_ops_expf_poly(float x)
{
    const float r = 0x1.8p23f;
    float z = fmaf(x, 0x1.715476p+0f, r);
    float n = z - r;
    if (isnan(n))
        return x + x;
    if (fabsf(n) > 192.0f)
        return n <= 0.0f ? 0.0f : INFINITY;
    float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    float u = b * b;
    float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                   fmaf(0x1.ffffecp-1f, b, 1.0f));
    return ldexpf(j, (int)n);
}

static float silu_poly(float x) { return x / (1.0f + loom_ops_expf_poly(0.0f - x)); }
static float silu_libm(float x) { return x / (1.0f + expf(-x)); }

void loom_ops_silu(int64_t n, const float *x, float *y)
{
    int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < nv; i++)
        y[i] = silu_poly(x[i]);
    for (int64_t i = nv; i < n; i++)
        y[i] = silu_libm(x[i]);
}

void loom_ops_swiglu(int64_t n, const float *g, const float *u, float *y)
{
    int64_t nv = n & ~(int64_t)15;
    for (int64_t i = 0; i < nv; i++)
        y[i] = silu_poly(g[i]) * u[i];
    for (int64_t i = nv; i < n; i++)
        y[i] = silu_libm(g[i]) * u[i];
}

float loom_ops_reduce16(const float a[16])
{
    float h8[8], h4[4];
    for (int l = 0; l < 8; l++)
        h8[l] = a[l + 8] + a[l];
    for (int l = 0; l < 4; l++)
        h4[l] = h8[l + 4] + h8[l];
    float h0 = h4[0] + h4[2], h1 = h4[1] + h4[3];
    return h0 + h1;
}

/* Four 16-lane accumulators reduced as GGML_F32x16_REDUCE: (0+2), (1+3), then their sum, then R16. */
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

float loom_ops_dot_f32(int64_t n, const float *x, const float *y)
{
    float acc[64] = {0};
    int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int l = 0; l < 64; l++)
            acc[l] = fmaf(x[i + l], y[i + l], acc[l]);
    return loom_ops_tail_sum(reduce64(acc), n - np, x + np, y + np);
}

void loom_ops_softmax(int64_t n, float *x, float scale)
{
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        x[i] *= scale;
        max = x[i] > max ? x[i] : max;
    }
    /* The reference's row is a multiple of 16 long (its KV view is a multiple of 256 cells) with masked
     * entries at -inf, which become exactly 0: pad the last block with zeros the same way. */
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < n; i0 += 16) {
        float e[16];
        for (int l = 0; l < 16; l++) {
            int64_t i = i0 + l;
            e[l] = i < n ? loom_ops_expf_poly(x[i] - max) : 0.0f;
            if (i < n)
                x[i] = e[l];
        }
        sum += (double)loom_ops_reduce16(e);
    }
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

void loom_ops_delta_rule_step(int d, float *M, const float *q, const float *k, const float *v, float g,
                              float beta, float *out)
{
    float decay = expf(g), scale = 1.0f / sqrtf((float)d);
    for (int j = 0; j < d; j++) {
        float *row = M + (int64_t)j * d;
        for (int i = 0; i < d; i++)
            row[i] *= decay;
        float delta = (v[j] - loom_ops_dot_f32(d, row, k)) * beta;
        for (int i = 0; i < d; i++)
            row[i] = fmaf(k[i], delta, row[i]);
        out[j] = loom_ops_dot_f32(d, row, q) * scale;
    }
}

void loom_ops_delta_rule_chunk(int d, int n, const float *M_src, float *M, const float *q, const float *k,
                               const float *v, int64_t qkv_stride, const float *g, const float *beta, int64_t gb_stride,
                               float *out, int64_t out_stride)
{
    if (M_src != M)
        memcpy(M, M_src, (size_t)d * (size_t)d * sizeof(float));
    for (int t = 0; t < n; t++)
        loom_ops_delta_rule_step(d, M, q + t * qkv_stride, k + t * qkv_stride, v + t * qkv_stride, g[t * gb_stride],
                                 beta[t * gb_stride], out + t * out_stride);
}

/* Dot of F16 vectors with every element in a lane (no scalar tail): BATCH uses 16 lanes (tinyBLAS),
 * SINGLE 64 lanes (ggml_vec_dot_f16's four accumulators). A row shorter than a block behaves as if
 * padded with zeros, which add nothing: this is how the reference's padded KV view is summed. */
static float dot_f16_lanes(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order)
{
    float acc[64] = {0};
    if (order == LOOM_ATTN_ORDER_BATCH) {
        for (int64_t i = 0; i < n; i++)
            acc[i & 15] = fmaf(loom_f16_to_f32(x[i]), loom_f16_to_f32(y[i]), acc[i & 15]);
        return loom_ops_reduce16(acc);
    }
    for (int64_t i = 0; i < n; i++)
        acc[i & 63] = fmaf(loom_f16_to_f32(x[i]), loom_f16_to_f32(y[i]), acc[i & 63]);
    return reduce64(acc);
}

float loom_ops_dot_f16(int64_t n, const uint16_t *x, const uint16_t *y, enum loom_attn_order order)
{
    if (order == LOOM_ATTN_ORDER_BATCH)
        return dot_f16_lanes(n, x, y, order);
    int64_t np = n & ~(int64_t)63;
    double sum = (double)dot_f16_lanes(np, x, y, order);
    for (int64_t i = np; i < n; i++)
        sum += (double)(loom_f16_to_f32(x[i]) * loom_f16_to_f32(y[i]));
    return (float)sum;
}

void loom_ops_attn_head(int64_t n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                        int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                        enum loom_attn_order order, float *scores, uint16_t *probs16, float *out)
{
    for (int64_t p = 0; p < n_kv; p++)
        scores[p] = loom_ops_dot_f16(head_dim, k_cache + p * k_stride, q16, order);
    loom_ops_softmax(n_kv, scores, scale);
    for (int64_t p = 0; p < n_kv; p++)
        probs16[p] = loom_f32_to_f16(scores[p]);
    for (int j = 0; j < head_dim_v; j++)
        out[j] = dot_f16_lanes(n_kv, v_cache + (int64_t)j * v_stride, probs16, order);
}

void loom_ops_attn_softmax_v(int64_t n_kv, float *scores, float scale, uint16_t *probs16, const uint16_t *v_cache,
                             int64_t v_stride, int head_dim_v, enum loom_attn_order order, float *out)
{
    loom_ops_softmax(n_kv, scores, scale);
    for (int64_t p = 0; p < n_kv; p++)
        probs16[p] = loom_f32_to_f16(scores[p]);
    for (int j = 0; j < head_dim_v; j++)
        out[j] = dot_f16_lanes(n_kv, v_cache + (int64_t)j * v_stride, probs16, order);
}

void loom_ops_attn_heads(int n_q, const int64_t *n_kv, int head_dim, const uint16_t *q16, const uint16_t *k_cache,
                         int64_t k_stride, const uint16_t *v_cache, int64_t v_stride, int head_dim_v, float scale,
                         enum loom_attn_order order, float *scores, uint16_t *probs16, int64_t stride, float *out,
                         int64_t out_stride)
{
    for (int g = 0; g < n_q; g++)
        loom_ops_attn_head(n_kv[g], head_dim, q16 + (int64_t)g * head_dim, k_cache, k_stride, v_cache, v_stride,
                           head_dim_v, scale, order, scores + g * stride, probs16 + g * stride, out + g * out_stride);
}



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
