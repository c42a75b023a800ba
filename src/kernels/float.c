/* float.c — scalar reference kernels of the unquantized types F32, F16 (IEEE binary16) and BF16: row
 * conversion to and from F32 and the dot products, summed in exactly the order of llama.cpp's AVX-512
 * CPU backend (ggml-cpu/vec.cpp ggml_vec_dot_f32/f16/bf16 built for Zen4) so both agree bit for bit. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* Elements per accumulator lane group and per loop step of the reference's AVX-512 F32/F16 dots:
 * 4 accumulators of 16 lanes, consecutive 16-element slices going to accumulators 0..3 in turn. */
#define DOT_LANES 16
#define DOT_STEP 64

void loom_f32_to_float(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void loom_f32_from_float(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

/* Fold the 4x16 accumulators as the reference does: (a0 + a2) + (a1 + a3), then the 16-lane tree. */
static float fold_accumulators(float acc[4][DOT_LANES])
{
    float r[DOT_LANES];
    for (int l = 0; l < DOT_LANES; l++)
        r[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    return loom_hsum16(r);
}

/* *s = sum_i w[i] * a[i] over F32 rows. Order (ggml_vec_dot_f32, AVX-512): lane-wise FMA into 4x16
 * accumulators over the first n - n%64 elements, fold, then the tail in F32 (loom_f32_dot_tail). */
void loom_f32_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    float acc[4][DOT_LANES] = {{0}};
    int64_t np = n - n % DOT_STEP;
    for (int64_t i = 0; i < np; i += DOT_STEP)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < DOT_LANES; l++)
                acc[j][l] = fmaf(x[i + j * DOT_LANES + l], y[i + j * DOT_LANES + l], acc[j][l]);
    float sum = fold_accumulators(acc);
    *s = loom_f32_dot_tail(x + np, y + np, n - np, sum);
}

void loom_f16_to_float(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = loom_f16_to_f32(h[i]);
}

void loom_f16_from_float(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = loom_f32_to_f16(src[i]);
}

/* *s = sum_i w[i] * a[i] over F16 rows (both widened exactly to F32). Order (ggml_vec_dot_f16, AVX-512
 * without FP16 arithmetic): as the F32 dot for the first n - n%64 elements; the folded sum is then
 * widened to double and the tail products (rounded to F32) are added in double. */
void loom_f16_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float acc[4][DOT_LANES] = {{0}};
    int64_t np = n - n % DOT_STEP;
    for (int64_t i = 0; i < np; i += DOT_STEP)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < DOT_LANES; l++) {
                int64_t k = i + j * DOT_LANES + l;
                acc[j][l] = fmaf(loom_f16_to_f32(x[k]), loom_f16_to_f32(y[k]), acc[j][l]);
            }
    double sum = fold_accumulators(acc);
    for (int64_t i = np; i < n; i++)
        sum += (double)(loom_f16_to_f32(x[i]) * loom_f16_to_f32(y[i]));
    *s = (float)sum;
}

void loom_bf16_to_float(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = loom_bf16_to_f32(h[i]);
}

void loom_bf16_from_float(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++)
        h[i] = loom_f32_to_bf16(src[i]);
}

/* VDPBF16PS reads subnormal inputs as zero and flushes subnormal results to zero, keeping the sign. */
static inline float bf16_daz(uint16_t h) { return loom_bf16_to_f32((h & 0x7f80) ? h : (uint16_t)(h & 0x8000)); }
static inline float ftz(float f) { return fabsf(f) < FLT_MIN ? copysignf(0.0f, f) : f; }

/* *s = sum_i w[i] * a[i] over BF16 rows. Order (ggml_vec_dot_bf16 with AVX512_BF16): two 16-lane
 * accumulators c1, c2 take 64 elements per step, c1 the first 32 and c2 the next 32; lane l of an
 * accumulator adds the product of pair element 2l+1 and then of element 2l (VDPBF16PS as measured on
 * Zen4: two rounded adds of exact products, odd element first, with DAZ/FTZ). Then double sum =
 * hsum(c1) + hsum(c2) and the tail in double (plain arithmetic, no flushing). Products of BF16 values
 * are exact in F32, so fmaf equals the rounded add. */
void loom_bf16_vec_dot(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float c[2][DOT_LANES] = {{0}};
    int64_t i = 0;
    for (; i + DOT_STEP <= n; i += DOT_STEP)
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < DOT_LANES; l++) {
                int64_t k = i + 32 * h + 2 * l;
                float acc = ftz(fmaf(bf16_daz(x[k + 1]), bf16_daz(y[k + 1]), c[h][l]));
                c[h][l] = ftz(fmaf(bf16_daz(x[k]), bf16_daz(y[k]), acc));
            }
    double sum = 0;
    sum += loom_hsum16(c[0]);
    sum += loom_hsum16(c[1]);
    for (; i < n; i++)
        sum += (double)(loom_bf16_to_f32(x[i]) * loom_bf16_to_f32(y[i]));
    *s = (float)sum;
}

/* The llamafile tinyBLAS order (ggml-cpu/llamafile/sgemm.cpp, AVX-512 build), used by the reference for
 * F32/F16/BF16 products with two or more activation rows: one 16-lane FMA accumulator runs over the row
 * in 16-element slices (n % 16 == 0), then the 16-lane tree (_mm512_reduce_add_ps). */
void loom_f32_tinyblas(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    float acc[DOT_LANES] = {0};
    for (int64_t i = 0; i < n; i += DOT_LANES)
        for (int l = 0; l < DOT_LANES; l++)
            acc[l] = fmaf(x[i + l], y[i + l], acc[l]);
    *s = loom_hsum16(acc);
}

void loom_f16_tinyblas(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float acc[DOT_LANES] = {0};
    for (int64_t i = 0; i < n; i += DOT_LANES)
        for (int l = 0; l < DOT_LANES; l++)
            acc[l] = fmaf(loom_f16_to_f32(x[i + l]), loom_f16_to_f32(y[i + l]), acc[l]);
    *s = loom_hsum16(acc);
}

/* BF16 in tinyBLAS order: one VDPBF16PS accumulator over 32-element slices (n % 32 == 0); lane l takes
 * the pair 2l, 2l+1 of each slice (odd element first, DAZ/FTZ as loom_bf16_vec_dot). */
void loom_bf16_tinyblas(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    float acc[DOT_LANES] = {0};
    for (int64_t i = 0; i < n; i += 2 * DOT_LANES)
        for (int l = 0; l < DOT_LANES; l++) {
            int64_t k = i + 2 * l;
            float t = ftz(fmaf(bf16_daz(x[k + 1]), bf16_daz(y[k + 1]), acc[l]));
            acc[l] = ftz(fmaf(bf16_daz(x[k]), bf16_daz(y[k]), t));
        }
    *s = loom_hsum16(acc);
}
