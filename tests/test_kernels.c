/* test_kernels.c — the quantization kernels and matmul without the reference: every SIMD kernel set
 * agrees bit for bit with the scalar one (activation quantizers and dot products), dots agree with a
 * double-precision dot of the dequantized rows, quantize -> dequantize round trips are within half a
 * step, and loom_matmul equals per-element vec_dot for several shapes, token counts and thread counts; the
 * float-order profiles: the default (the CPU's) and the haswell profile's sets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/kernels.h"
#include "kernels/protos.h"
#include "kernels/matmul.h"
#include "kernels/orders_haswell.h"
#include "util/cpu.h"
#include "util/pool.h"
#include "test.h"
#include "test_rng.h"
#include "util/fp16.h"

static void fill_floats(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_f() * scale;
}

/* A random weight row of `type` with n elements: random quant bits, sane positive F16 scales. */
static void fill_weights(uint32_t type, void *dst, int64_t n)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    size_t bytes = loom_type_row_bytes(type, n);
    uint8_t *p = dst;
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)rnd_u32();
    int64_t nb = n / t->block_size;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = p + (size_t)b * t->type_size;
        uint16_t d = loom_f32_to_f16(0.001f + 0.01f * fabsf(rnd_f())), dmin = loom_f32_to_f16(0.01f * fabsf(rnd_f()));
        switch (type) {
        case LOOM_TYPE_F32:
            ((float *)p)[b] = rnd_f();
            break;
        case LOOM_TYPE_F16:
            ((uint16_t *)p)[b] = loom_f32_to_f16(rnd_f());
            break;
        case LOOM_TYPE_BF16:
            ((uint16_t *)p)[b] = loom_f32_to_bf16(rnd_f());
            break;
        case LOOM_TYPE_Q8_0:
            memcpy(blk, &d, 2);
            for (int j = 0; j < 32; j++)
                if (blk[2 + j] == 0x80)
                    blk[2 + j] = 0x81; /* quants are in [-127, 127] */
            break;
        case LOOM_TYPE_Q4_K:
        case LOOM_TYPE_Q5_K:
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dmin, 2);
            break;
        case LOOM_TYPE_Q6_K:
            memcpy(blk + 208, &d, 2);
            break;
        case LOOM_TYPE_Q4_0:
        case LOOM_TYPE_Q5_0:
        case LOOM_TYPE_IQ4_NL:
        case LOOM_TYPE_IQ4_XS:
        case LOOM_TYPE_IQ2_XXS:
        case LOOM_TYPE_IQ2_XS:
        case LOOM_TYPE_IQ2_S:
        case LOOM_TYPE_IQ3_XXS:
        case LOOM_TYPE_IQ3_S:
            memcpy(blk, &d, 2);
            break;
        case LOOM_TYPE_Q4_1:
        case LOOM_TYPE_Q5_1:
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dmin, 2); /* the offset m */
            break;
        case LOOM_TYPE_Q2_K:
            memcpy(blk + 80, &d, 2);
            memcpy(blk + 82, &dmin, 2);
            break;
        case LOOM_TYPE_Q3_K:
            memcpy(blk + 108, &d, 2);
            break;
        case LOOM_TYPE_IQ1_S:
            memcpy(blk, &d, 2);
            break;
        case LOOM_TYPE_IQ1_M: /* d in the top nibbles of the four scale words (bytes 49, 51, 53, 55) */
            for (int k = 0; k < 4; k++)
                blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
            break;
        case LOOM_TYPE_TQ1_0:
            memcpy(blk + 52, &d, 2);
            break;
        case LOOM_TYPE_TQ2_0:
            memcpy(blk + 64, &d, 2);
            break;
        case LOOM_TYPE_MXFP4:
            blk[0] = (uint8_t)(118 + rnd_u32() % 13); /* E8M0: scales 2^-10 .. 2^2 */
            break;
        }
    }
}

static const uint32_t weight_types[] = {LOOM_TYPE_F32,  LOOM_TYPE_F16,  LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,   LOOM_TYPE_Q4_K,
                                        LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1,   LOOM_TYPE_Q5_0,
                                        LOOM_TYPE_Q5_1, LOOM_TYPE_Q2_K, LOOM_TYPE_Q3_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS};
#define N_WEIGHT_TYPES (sizeof weight_types / sizeof weight_types[0])
/* Types loom reads but does not quantize (no weight round trip): IQ1_S, IQ1_M, TQ1_0, TQ2_0, MXFP4. */
static const uint32_t low_bit_types[] = {LOOM_TYPE_IQ1_S, LOOM_TYPE_IQ1_M, LOOM_TYPE_TQ1_0, LOOM_TYPE_TQ2_0,
                                         LOOM_TYPE_MXFP4};
#define N_LOW_BIT (sizeof low_bit_types / sizeof low_bit_types[0])
/* The grid IQ types, read but not quantized either (every index and sign pattern is valid, so random bits are
 * real blocks). */
static const uint32_t grid_types[] = {LOOM_TYPE_IQ2_XXS, LOOM_TYPE_IQ2_XS, LOOM_TYPE_IQ2_S, LOOM_TYPE_IQ3_XXS,
                                      LOOM_TYPE_IQ3_S};
#define N_GRID (sizeof grid_types / sizeof grid_types[0])

static int n_modes;
static enum loom_kernel_mode modes[3];

static void select_mode(enum loom_kernel_mode m)
{
    loom_error err;
    int rc = loom_kernels_select(m, &err);
    CHECK(rc == LOOM_OK, "select %d: %s", (int)m, err.msg);
}

/* Dot of the dequantized weight row with the dequantized activation row, in double. */
static double ref_dot(uint32_t type, const void *w, const void *act, int64_t n, double *mag)
{
    const struct loom_type_traits *t = loom_type_traits(type), *at = loom_type_traits(t->vec_dot_type);
    float *wf = malloc((size_t)n * sizeof(float)), *af = malloc((size_t)n * sizeof(float));
    t->to_float(w, wf, n);
    at->to_float(act, af, n);
    double s = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)wf[i] * af[i];
        m += fabs((double)wf[i] * af[i]);
    }
    free(wf);
    free(af);
    *mag = m;
    return s;
}

#define N_ORDERS 5

/* The active set's vec_dot of `type`, and the orders loom_matmul picks for grouped and trailing prefill rows
 * (gemm, gemv where the type has them) and, for other row counts, tinyBLAS's and iqp's. */
static void dot_orders(uint32_t type, int64_t n, loom_dot_fn dots[N_ORDERS])
{
    const struct loom_kernel_set *ks = loom_kernels_active();
    dots[0] = ks->types[type].vec_dot.row;
    dots[1] = loom_matmul_dot(ks, type, 8, n, 5, 0, 0)->row;
    dots[2] = loom_matmul_dot(ks, type, 8, n, 5, 4, 0)->row;
    dots[3] = loom_matmul_dot(ks, type, 12, n, 9, 0, 0)->row;
    dots[4] = loom_matmul_dot(ks, type, 16, n, 9, 0, 0)->row;
}

/* For one type and length: activation conversion and vec_dot of every kernel set equal the scalar
 * set's bit for bit, and the dot is within float rounding of the dequantized double dot. */
static void check_dot(uint32_t type, int64_t n)
{
    select_mode(LOOM_KERNELS_SCALAR);
    const struct loom_type_traits *t = loom_type_traits(type);
    uint32_t at = t->vec_dot_type;
    size_t wb = loom_type_row_bytes(type, n), ab = loom_type_row_bytes(at, n);
    void *w = malloc(wb), *act_ref = malloc(ab), *act = malloc(ab);
    float *x = malloc((size_t)n * sizeof(float));
    fill_weights(type, w, n);
    fill_floats(x, n, 2.0f);
    loom_kernels_active()->types[at].from_float(x, act_ref, n);
    loom_dot_fn ref_dots[N_ORDERS];
    dot_orders(type, n, ref_dots);
    float s_refs[N_ORDERS];
    for (int k = 0; k < N_ORDERS; k++)
        ref_dots[k](n, &s_refs[k], w, act_ref);
    double mag, exact = ref_dot(type, w, act_ref, n, &mag);
    for (int k = 0; k < N_ORDERS; k++)
        CHECK(fabs(s_refs[k] - exact) <= 1e-5 * mag + 1e-30, "%s n=%lld scalar dot %d: %.9g vs dequantized %.9g",
              t->name, (long long)n, k, s_refs[k], exact);
    for (int m = 1; m < n_modes; m++) {
        select_mode(modes[m]);
        memset(act, 0x55, ab);
        loom_kernels_active()->types[at].from_float(x, act, n);
        CHECK(memcmp(act, act_ref, ab) == 0, "%s activation (%s) n=%lld differs from scalar",
              loom_type_traits(at)->name, loom_kernels_name(), (long long)n);
        loom_dot_fn dots[N_ORDERS];
        dot_orders(type, n, dots);
        for (int k = 0; k < N_ORDERS; k++) {
            float s;
            dots[k](n, &s, w, act_ref);
            CHECK(loom_f32_bits(s) == loom_f32_bits(s_refs[k]), "%s dot %d (%s) n=%lld: %.9g vs scalar %.9g", t->name, k,
                  loom_kernels_name(), (long long)n, s, s_refs[k]);
        }
    }
    select_mode(LOOM_KERNELS_SCALAR);
    free(w);
    free(act_ref);
    free(act);
    free(x);
}

/* Activation quantizers: |dequant(quant(x)) - x| <= d/2 (+ rounding) per element, bsums consistent,
 * all-zero blocks give d = 0. */
static void check_quant_roundtrip(uint32_t type, int64_t n)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    size_t ab = loom_type_row_bytes(type, n);
    void *q = malloc(ab);
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    fill_floats(x, n, 3.0f);
    memset(x, 0, (size_t)t->block_size * sizeof(float)); /* first block all zero */
    x[t->block_size] = -0.0f;
    loom_kernels_active()->types[type].from_float(x, q, n);
    t->to_float(q, y, n);
    int ok = 1;
    for (int64_t b = 0; b < n / t->block_size; b++) {
        float amax = 0;
        for (int64_t i = b * t->block_size; i < (b + 1) * t->block_size; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        float step = amax / 127.f;
        for (int64_t i = b * t->block_size; i < (b + 1) * t->block_size; i++)
            ok &= fabsf(y[i] - x[i]) <= 0.5f * step * 1.01f + amax * 2e-3f; /* Q8_0's F16 scale costs ~1e-3 */
    }
    CHECK(ok, "%s round trip within half a step", t->name);
    if (type == LOOM_TYPE_Q8_K) {
        const struct loom_block_q8_k *k = q;
        CHECK(k[0].d == 0, "all-zero Q8_K block has d = 0");
        int bs_ok = 1;
        for (int64_t b = 0; b < n / 256; b++)
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int i = 0; i < 16; i++)
                    s += k[b].qs[16 * g + i];
                bs_ok &= s == k[b].bsums[g];
            }
        CHECK(bs_ok, "Q8_K bsums are the group sums");
    } else if (type == LOOM_TYPE_Q8_1) {
        const struct loom_block_q8_1 *k = q;
        CHECK(k[0].d == 0 && k[0].s == 0, "all-zero Q8_1 block has d = s = 0");
        int s_ok = 1;
        for (int64_t b = 0; b < n / 32; b++) {
            int sum = 0;
            for (int i = 0; i < 32; i++)
                sum += k[b].qs[i];
            /* s = F16(d_f32 * sum) where d_f32 is the unrounded scale: within 2 F16 steps of F16(d) * sum */
            float want = loom_f16_to_f32(k[b].d) * (float)sum, got = loom_f16_to_f32(k[b].s);
            s_ok &= fabsf(got - want) <= fabsf(want) * 2e-3f + 1e-6f;
        }
        CHECK(s_ok, "Q8_1 s is d times the quant sum");
    } else {
        const struct loom_block_q8_0 *k = q;
        CHECK(k[0].d == 0, "all-zero Q8_0 block has d = 0");
    }
    free(q);
    free(x);
    free(y);
}

/* Weight quantization (traits quantize) round trip: the relative RMS error of dequant(quant(x)) on a
 * Gaussian-ish row stays under the type's bound, an all-zero row comes back all zero, and quantizing is
 * deterministic. Bounds: about 2x the errors measured (Q4_0 0.079, Q4_1 0.074, Q5_0 0.038, Q5_1 0.036,
 * Q2_K 0.283, Q3_K 0.145, IQ4_NL 0.070, IQ4_XS 0.071). */
static void check_weight_quantize(uint32_t type, double max_rel_rms)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    const int64_t n = 2048;
    size_t rb = loom_type_row_bytes(type, n);
    uint8_t *q = malloc(rb), *q2 = malloc(rb);
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_f() + rnd_f() + rnd_f();
    t->quantize(x, q, n);
    t->quantize(x, q2, n);
    t->to_float(q, y, n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; i++) {
        err += (double)(y[i] - x[i]) * (y[i] - x[i]);
        ref += (double)x[i] * x[i];
    }
    double rel = sqrt(err / ref);
    CHECK(rel < max_rel_rms, "%s quantize round trip: relative RMS error %.4f, expected < %.3f", t->name, rel, max_rel_rms);
    CHECK(memcmp(q, q2, rb) == 0, "%s quantize is deterministic", t->name);
    memset(x, 0, (size_t)n * sizeof(float));
    t->quantize(x, q, n);
    t->to_float(q, y, n);
    int zero = 1;
    for (int64_t i = 0; i < n; i++)
        zero &= y[i] == 0;
    CHECK(zero, "%s quantize of an all-zero row dequantizes to zero", t->name);
    free(q);
    free(q2);
    free(x);
    free(y);
}

/* loom_matmul against per-element vec_dot (bitwise) for NULL, 1- and 2-thread pools. */
static void check_matmul(uint32_t type, int64_t n_out, int64_t n_in, int64_t n_tok, struct loom_pool **pools)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    size_t rb = loom_type_row_bytes(type, n_in);
    void *wd = malloc(rb * (size_t)n_out);
    for (int64_t o = 0; o < n_out; o++)
        fill_weights(type, (char *)wd + (size_t)o * rb, n_in);
    struct loom_weight w = {type, n_in, n_out, rb, wd, LOOM_WEIGHT_ROWS, 0, 0};
    float *x = malloc(sizeof(float) * (size_t)(n_in * n_tok));
    float *y = malloc(sizeof(float) * (size_t)(n_out * n_tok)), *y_ref = malloc(sizeof(float) * (size_t)(n_out * n_tok));
    fill_floats(x, n_in * n_tok, 1.0f);
    size_t sb = loom_matmul_scratch_bytes(type, n_in, n_tok);
    void *scratch = malloc(sb ? sb : 1);
    /* expected: one vec_dot per element against the row converted on its own */
    size_t ab = loom_type_row_bytes(t->vec_dot_type, n_in);
    void *act = malloc(ab);
    for (int64_t k = 0; k < n_tok; k++) {
        loom_dot_fn dot = loom_matmul_dot(loom_kernels_active(), type, n_out, n_in, n_tok, k, 0)->row;
        loom_kernels_active()->types[t->vec_dot_type].from_float(x + k * n_in, act, n_in);
        for (int64_t o = 0; o < n_out; o++)
            dot(n_in, &y_ref[k * n_out + o], (char *)wd + (size_t)o * rb, act);
    }
    for (int p = 0; p < 3; p++) {
        memset(y, 0xff, sizeof(float) * (size_t)(n_out * n_tok));
        loom_matmul(loom_kernels_active(), pools[p], &w, x, n_tok, y, scratch);
        CHECK(memcmp(y, y_ref, sizeof(float) * (size_t)(n_out * n_tok)) == 0,
              "%s matmul %lldx%lld n_tok %lld threads %d (%s) differs from vec_dot", t->name, (long long)n_out,
              (long long)n_in, (long long)n_tok, loom_pool_n_threads(pools[p]), loom_kernels_name());
    }
    float *row = malloc(sizeof(float) * (size_t)n_in), *row_ref = malloc(sizeof(float) * (size_t)n_in);
    loom_weight_get_row(&w, n_out - 1, row);
    t->to_float((char *)wd + (size_t)(n_out - 1) * rb, row_ref, n_in);
    CHECK(memcmp(row, row_ref, sizeof(float) * (size_t)n_in) == 0, "%s get_row", t->name);
    free(row);
    free(row_ref);
    free(act);
    free(scratch);
    free(wd);
    free(x);
    free(y);
    free(y_ref);
}

static void check_dispatch(void)
{
    loom_error err;
    CHECK(loom_kernels_select(LOOM_KERNELS_SCALAR, &err) == LOOM_OK && strcmp(loom_kernels_name(), "scalar") == 0,
          "scalar selectable");
    CHECK(loom_kernels_select((enum loom_kernel_mode)7, &err) == LOOM_E_ARG, "unknown mode rejected");
    modes[n_modes++] = LOOM_KERNELS_SCALAR;
    if (loom_kernels_select(LOOM_KERNELS_AVX2, &err) == LOOM_OK)
        modes[n_modes++] = LOOM_KERNELS_AVX2;
    if (loom_kernels_select(LOOM_KERNELS_AVX512, &err) == LOOM_OK)
        modes[n_modes++] = LOOM_KERNELS_AVX512;
    CHECK(loom_kernels_select(LOOM_KERNELS_AUTO, &err) == LOOM_OK, "auto selectable");
    printf("kernel sets: %d (auto picks %s)\n", n_modes, loom_kernels_name());
    CHECK(loom_type_row_bytes(LOOM_TYPE_Q4_K, 1024) == 576 && loom_type_row_bytes(LOOM_TYPE_Q4_K, 1000) == 0,
          "row bytes");
}

/* The default float-order profile is the CPU's (haswell without AVX-512F, else avx512), read before any select;
 * the rest of the test selects each profile explicitly. */
static void check_default_orders(void)
{
    const char *cpu = loom_cpu_features() & LOOM_CPU_AVX512F ? "avx512" : "haswell";
    CHECK(strcmp(loom_orders_name(), cpu) == 0 && loom_kernels_active()->orders == loom_orders_active(),
          "default profile: expected the CPU's %s, found %s", cpu, loom_orders_name());
    printf("default float-order profile: %s\n", loom_orders_name());
}

/* The haswell float-order profile (orders_haswell.h): selectable and back; every set of it runs the profile's
 * F32/F16/BF16 dots and order-dependent ops (scalar, or in the SIMD sets their AVX2 forms, bitwise: checked below
 * and by check_matmul), tinyBLAS for n_in % 8 == 0, Q2_K never repacked (in the avx512 profile always); its exp's
 * branches and reduction trees. */
static void check_orders(void)
{
    loom_error err;
    CHECK(strcmp(loom_orders_name(), "avx512") == 0, "avx512 profile selected, found %s", loom_orders_name());
    CHECK(loom_orders_select((enum loom_orders)5, &err) == LOOM_E_ARG, "unknown profile rejected");
    CHECK(loom_orders_select(LOOM_ORDERS_HASWELL, &err) == LOOM_OK && strcmp(loom_orders_name(), "haswell") == 0,
          "haswell selectable");
    for (int m = 0; m < n_modes; m++) {
        const struct loom_kernel_set *ks = loom_kernels_for(modes[m]);
        CHECK(ks->orders == LOOM_ORDERS_HASWELL && ks->mode == modes[m], "%s: haswell profile", ks->name);
        int simd = modes[m] != LOOM_KERNELS_SCALAR;
        CHECK(ks->types[LOOM_TYPE_F32].vec_dot.row == (simd ? loom_hsw_f32_vec_dot_avx2 : loom_hsw_f32_vec_dot) &&
                  ks->types[LOOM_TYPE_F16].tinyblas.row ==
                      (simd ? loom_hsw_f16_tinyblas_avx2 : loom_hsw_f16_tinyblas) &&
                  ks->types[LOOM_TYPE_BF16].vec_dot.row ==
                      (simd ? loom_hsw_bf16_vec_dot_avx2 : loom_hsw_bf16_vec_dot) &&
                  ks->types[LOOM_TYPE_F32].tinyblas.rows4 == (simd ? loom_hsw_f32_tinyblas_rows4_avx2 : NULL) &&
                  ks->types[LOOM_TYPE_F16].tinyblas.rows8 == (simd ? loom_hsw_f16_tinyblas_rows8_avx2 : NULL),
              "%s: the profile's dots", ks->name);
        CHECK(ks->ops.silu == (simd ? loom_hsw_silu_avx2 : loom_hsw_silu) &&
                  ks->ops.attn_heads == (simd ? loom_hsw_attn_heads_avx2 : loom_hsw_attn_heads) &&
                  ks->ops.conv1d_chunk == (simd ? loom_hsw_conv1d_chunk_avx2 : loom_hsw_conv1d_chunk) &&
                  ks->ops.rmsnorm_rows != NULL,
              "%s: the profile's ops", ks->name);
        CHECK(loom_matmul_dot(ks, LOOM_TYPE_Q2_K, 8, 256, 5, 0, 0) == &ks->types[LOOM_TYPE_Q2_K].vec_dot,
              "%s: Q2_K never repacked", ks->name);
        CHECK(loom_matmul_dot(ks, LOOM_TYPE_F16, 8, 24, 2, 0, 0) == &ks->types[LOOM_TYPE_F16].tinyblas,
              "%s: tinyBLAS for n_in %% 8 == 0", ks->name);
    }
    CHECK(loom_hsw_expf(0.0f) == 1.0f && loom_hsw_expf(-INFINITY) == 0.0f && isinf(loom_hsw_expf(200.0f)) &&
              isnan(loom_hsw_expf(NAN)) && loom_hsw_expf(-100.0f) > 0.0f && loom_hsw_expf(-100.0f) < 1e-43f,
          "haswell exp: 1, 0, inf, nan, and a subnormal past |n| > 126");
    const float a[8] = {1e8f, 1.0f, -1e8f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    CHECK(loom_hsw_hsum8_t8a(a) == 0.0f && loom_hsum8(a) == 2.0f, "T8a: (r0+r1)+(r2+r3); T8b: (r0+r2)+(r1+r3)");
    float x[7], y[7], p[4];
    fill_floats(x, 7, 1.0f);
    fill_floats(y, 7, 1.0f);
    for (int i = 0; i < 4; i++)
        p[i] = x[i] * y[i];
    float want = fmaf(x[6], y[6], fmaf(x[5], y[5], fmaf(x[4], y[4], (((0.0f + p[0]) + p[1]) + p[2]) + p[3])));
    CHECK(loom_hsw_tail_sum(0.0f, 7, x, y) == want, "tail of 7: four rounded products added, then three fused");
    CHECK(loom_orders_select(LOOM_ORDERS_AVX512, &err) == LOOM_OK &&
              loom_kernels_for(LOOM_KERNELS_SCALAR)->orders == LOOM_ORDERS_AVX512,
          "avx512 profile back");
    for (int m = 0; m < n_modes; m++) {
        const struct loom_kernel_set *ks = loom_kernels_for(modes[m]);
        CHECK(loom_matmul_dot(ks, LOOM_TYPE_Q2_K, 8, 256, 5, 0, 0) == &ks->types[LOOM_TYPE_Q2_K].gemm,
              "%s: Q2_K repacked in the avx512 profile, whatever the CPU", ks->name);
    }
}

/* The haswell profile's AVX2 ops (x86/orders_haswell_avx2.c) bitwise its scalar ones: SiLU/SwiGLU over every
 * exp branch and tail length, the delta rule over a few tokens. */
static void check_haswell_avx2_ops(void)
{
    float g[1003], u[1003], y[1003], y_ref[1003];
    fill_floats(g, 1003, 150.0f);
    fill_floats(u, 1003, 2.0f);
    for (int n = 1; n <= 1003; n += 101) {
        loom_hsw_silu(n, g, y_ref);
        loom_hsw_silu_avx2(n, g, y);
        CHECK(memcmp(y, y_ref, sizeof(float) * (size_t)n) == 0, "haswell silu avx2 n=%d", n);
        loom_hsw_swiglu(n, g, u, y_ref);
        loom_hsw_swiglu_avx2(n, g, u, y);
        CHECK(memcmp(y, y_ref, sizeof(float) * (size_t)n) == 0, "haswell swiglu avx2 n=%d", n);
    }
    enum { D = 32, T = 3 };
    float M0[D * D], M[D * D], M_ref[D * D], qkv[T * 3 * D], gb[2 * T], out[T * D], out_ref[T * D];
    fill_floats(M0, D * D, 1.0f);
    fill_floats(qkv, T * 3 * D, 0.5f);
    fill_floats(gb, 2 * T, 0.5f);
    loom_hsw_delta_rule_chunk(D, T, M0, M_ref, qkv, qkv + D, qkv + 2 * D, 3 * D, gb, gb + T, 1, out_ref, D);
    loom_hsw_delta_rule_chunk_avx2(D, T, M0, M, qkv, qkv + D, qkv + 2 * D, 3 * D, gb, gb + T, 1, out, D);
    CHECK(memcmp(M, M_ref, sizeof M) == 0 && memcmp(out, out_ref, sizeof out) == 0, "haswell delta rule avx2");
}

int main(void)
{
    check_default_orders();
    loom_orders_select(LOOM_ORDERS_AVX512, NULL);
    check_dispatch();
    const int64_t lens[] = {256, 512, 1024, 3584};
    for (size_t i = 0; i < N_WEIGHT_TYPES; i++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            check_dot(weight_types[i], lens[l]);
    const int64_t odd[] = {1, 31, 63, 65, 100, 1000};
    for (size_t l = 0; l < sizeof odd / sizeof odd[0]; l++) {
        check_dot(LOOM_TYPE_F32, odd[l]);
        check_dot(LOOM_TYPE_F16, odd[l]);
        check_dot(LOOM_TYPE_BF16, odd[l]);
    }
    check_dot(LOOM_TYPE_Q8_0, 96);
    check_quant_roundtrip(LOOM_TYPE_Q8_0, 1024);
    check_quant_roundtrip(LOOM_TYPE_Q8_K, 1024);
    check_quant_roundtrip(LOOM_TYPE_Q8_1, 1024);
    check_dot(LOOM_TYPE_IQ4_NL, 96); /* an odd number of blocks */
    check_dot(LOOM_TYPE_Q4_0, 96);
    check_dot(LOOM_TYPE_Q5_1, 96);
    for (size_t i = 0; i < N_LOW_BIT; i++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            check_dot(low_bit_types[i], lens[l]);
    check_dot(LOOM_TYPE_MXFP4, 96); /* an odd number of blocks */
    for (size_t i = 0; i < N_GRID; i++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            check_dot(grid_types[i], lens[l]);
    const struct {
        uint32_t type;
        double bound;
    } wq[] = {{LOOM_TYPE_Q4_0, 0.16}, {LOOM_TYPE_Q4_1, 0.15}, {LOOM_TYPE_Q5_0, 0.08},   {LOOM_TYPE_Q5_1, 0.075},
              {LOOM_TYPE_Q2_K, 0.57}, {LOOM_TYPE_Q3_K, 0.3},  {LOOM_TYPE_IQ4_NL, 0.15}, {LOOM_TYPE_IQ4_XS, 0.15}};
    for (size_t i = 0; i < sizeof wq / sizeof wq[0]; i++)
        check_weight_quantize(wq[i].type, wq[i].bound);

    struct loom_pool *pools[3] = {NULL, loom_pool_new(1), loom_pool_new(2)};
    CHECK(pools[1] && pools[2], "pools");
    const int64_t shapes[][3] = {{37, 256, 1}, {64, 512, 1}, {5, 1024, 3}, {130, 512, 17}, {16, 768, 9}};
    for (int m = 0; m < n_modes; m++) {
        select_mode(modes[m]);
        for (size_t i = 0; i < N_WEIGHT_TYPES; i++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                check_matmul(weight_types[i], shapes[s][0], shapes[s][1], shapes[s][2], pools);
        for (size_t i = 0; i < N_LOW_BIT; i++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                check_matmul(low_bit_types[i], shapes[s][0], shapes[s][1], shapes[s][2], pools);
        for (size_t i = 0; i < N_GRID; i++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                check_matmul(grid_types[i], shapes[s][0], shapes[s][1], shapes[s][2], pools);
    }
    check_orders();
    loom_orders_select(LOOM_ORDERS_HASWELL, NULL);
    if (n_modes > 1)
        check_haswell_avx2_ops();
    const uint32_t float_types[] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16};
    for (size_t i = 0; i < 3; i++) {
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            check_dot(float_types[i], lens[l]);
        for (size_t l = 0; l < sizeof odd / sizeof odd[0]; l++)
            check_dot(float_types[i], odd[l]);
    }
    for (int m = 0; m < n_modes; m++) {
        select_mode(modes[m]);
        for (size_t i = 0; i < 3; i++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                check_matmul(float_types[i], shapes[s][0], shapes[s][1], shapes[s][2], pools);
    }
    loom_orders_select(LOOM_ORDERS_AVX512, NULL);
    loom_pool_free(pools[1]);
    loom_pool_free(pools[2]);
    return test_finish();
}
