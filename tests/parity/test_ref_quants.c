/* test_ref_quants.c — loom's kernels against llama.cpp's ggml as the oracle: dequantization (ggml-base
 * to_float) and activation quantization (the CPU backend's from_float, from the libggml-cpu-NAME it loaded)
 * must be bitwise equal; vec_dot results are counted bitwise-equal and their max relative difference is
 * reported, for every loom kernel set, on random and edge-case blocks; and loom_matmul must equal a
 * ggml MUL_MAT graph run by the reference's CPU backend (1 and several tokens, plain and repacked
 * Q4_K weights), which exercises the reference's tinyBLAS and repack kernels too. */
#include <dlfcn.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/blocks.h"
#include "kernels/kernels.h"
#include "kernels/protos.h"
#include "kernels/matmul.h"
#include "parity.h"
#include "util/pool.h"
#include "test.h"
#include "util/fp16.h"

#define TEST_RNG_SEED 0x243f6a8885a308d3ull
#include "test_rng.h"

typedef const struct ggml_type_traits_cpu *(*traits_cpu_fn)(enum ggml_type);
static traits_cpu_fn ggml_cpu_traits;


/* F32, F16 and BF16 dots sum 8 lanes in the reference's AVX2 build, 16 in its AVX-512 builds and in loom (its
 * reference numerics are theirs); the other types' orders are the same in both builds. */
static int float_order(uint32_t type)
{
    return type == LOOM_TYPE_F32 || type == LOOM_TYPE_F16 || type == LOOM_TYPE_BF16;
}

/* Register the reference's CPU backend (parity.h) and take its CPU type traits from the same library: the
 * libggml-cpu-NAME.so it loaded (the best for this CPU, or LOOM_REF_CPU's), found in /proc/self/maps. */
static int load_cpu_backend(void)
{
    char path[1200] = "", line[1400];
    if (parity_ref_init() != 0)
        return 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    while (maps && !path[0] && fgets(line, sizeof line, maps)) {
        char *at = strchr(line, '/');
        if (at && strstr(at, "/libggml-cpu-")) {
            at[strcspn(at, "\n")] = 0;
            snprintf(path, sizeof path, "%s", at);
        }
    }
    if (maps)
        fclose(maps);
    void *h = path[0] ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return 0;
    }
    void (*cpu_init)(void) = (void (*)(void))dlsym(h, "ggml_cpu_init");
    ggml_cpu_traits = (traits_cpu_fn)dlsym(h, "ggml_get_type_traits_cpu");
    if (!cpu_init || !ggml_cpu_traits)
        return 0;
    cpu_init();
    return 1;
}

/* Edge-case F16 scales: zero, negative zero, smallest and largest subnormal, largest normal, one. */
static const uint16_t edge_scales[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x7bff, 0x3c00};
#define N_EDGE (sizeof edge_scales / sizeof edge_scales[0])

/* Byte offsets of the F16 scale fields of a block (second one -1 when absent). */
static void scale_offsets(uint32_t type, int *d, int *dmin)
{
    *dmin = -1;
    *d = type == LOOM_TYPE_Q6_K ? 208 : type == LOOM_TYPE_Q2_K ? 80 : type == LOOM_TYPE_Q3_K ? 108 : 0;
    if (type == LOOM_TYPE_TQ1_0 || type == LOOM_TYPE_TQ2_0)
        *d = type == LOOM_TYPE_TQ1_0 ? 52 : 64; /* IQ1_M and MXFP4 scales: put_scale */
    if (type == LOOM_TYPE_Q4_K || type == LOOM_TYPE_Q5_K || type == LOOM_TYPE_Q4_1 || type == LOOM_TYPE_Q5_1)
        *dmin = 2; /* Q4_1/Q5_1: the F16 offset m */
    if (type == LOOM_TYPE_Q2_K)
        *dmin = 82;
}

/* Store F16 scale s at byte off of a block, or as IQ1_M keeps its d (the top nibbles of its four scale words
 * at bytes 48..55) or, for MXFP4, an E8M0 exponent standing for s: 0 and -0 as 0 and 1 (the subnormal
 * scales), the subnormal F16s as 2 and 254, 1.0 as 127, anything else (largest, inf, NaN) as 255. */
static void put_scale(uint32_t type, uint8_t *blk, int off, uint16_t s)
{
    if (type == LOOM_TYPE_IQ1_M) {
        for (int k = 0; k < 4; k++)
            blk[48 + 2 * k + 1] = (uint8_t)((blk[48 + 2 * k + 1] & 0x0f) | ((s >> (4 * k)) & 15) << 4);
    } else if (type == LOOM_TYPE_MXFP4) {
        blk[0] = s == 0x0000 ? 0 : s == 0x8000 ? 1 : s == 0x0001 ? 2 : s == 0x03ff ? 254 : s == 0x3c00 ? 127 : 255;
    } else {
        memcpy(blk + off, &s, 2);
    }
}

/* n_rows weight rows of n elements: rows 0..N_EDGE-1 raw random bits with edge-case scales (and an
 * all-zero row), the rest from ggml_quantize_chunk of random Gaussian-ish floats. */
static void *make_weights(uint32_t type, int64_t n, int n_rows)
{
    size_t rb = loom_type_row_bytes(type, n);
    uint8_t *w = malloc(rb * (size_t)n_rows);
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)n_rows);
    for (int64_t i = 0; i < n * n_rows; i++)
        x[i] = (rnd_f() + rnd_f() + rnd_f()) * (1 + (i / n) % 4);
    /* IQ2_XXS and IQ2_XS quantize only with an importance matrix: all ones (each weight counts the same) */
    float *imatrix = NULL;
    if (ggml_quantize_requires_imatrix((enum ggml_type)type)) {
        imatrix = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++)
            imatrix[i] = 1.0f;
    }
    ggml_quantize_chunk((enum ggml_type)type, x, w, 0, n_rows, n, imatrix);
    free(imatrix);
    const struct loom_type_traits *t = loom_type_traits(type);
    int d, dmin;
    scale_offsets(type, &d, &dmin);
    for (int r = 0; r <= (int)N_EDGE && r < n_rows && t->block_size > 1; r++) {
        uint8_t *row = w + rb * (size_t)r;
        for (size_t i = 0; i < rb; i++)
            row[i] = r == (int)N_EDGE ? 0 : (uint8_t)rnd_u32();
        for (int64_t b = 0; b < n / t->block_size && r < (int)N_EDGE; b++) {
            uint8_t *blk = row + (size_t)b * t->type_size;
            uint16_t s = edge_scales[(r + b) % N_EDGE], s2 = edge_scales[(r + 2 * b + 1) % N_EDGE];
            put_scale(type, blk, d, s);
            if (dmin >= 0)
                memcpy(blk + dmin, &s2, 2);
            if (type == LOOM_TYPE_Q8_0)
                for (int j = 0; j < 32; j++)
                    if (blk[2 + j] == 0x80)
                        blk[2 + j] = 0x81; /* -128 is outside Q8_0's range and its AVX2 dot */
        }
    }
    free(x);
    return w;
}

/* Activation rows: random at several magnitudes, all zero, negative zeros, subnormals, huge values. */
static void make_activations(float *x, int64_t n, int row)
{
    for (int64_t i = 0; i < n; i++) {
        float v = rnd_f();
        switch (row % 6) {
        case 0: x[i] = v; break;
        case 1: x[i] = v * 1e-3f * (float)(1 + i % 7); break;
        case 2: x[i] = 0.0f; break;
        case 3: x[i] = i % 3 ? -0.0f : v * 1e-40f; break;
        case 4: x[i] = v * 1e30f; break;
        default: x[i] = roundf(v * 8) / 8; break; /* many ties after scaling */
        }
    }
}

/* Dequantization must be bitwise equal to ggml-base's to_float. */
static void check_dequant(uint32_t type, int64_t n, int n_rows)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    void *w = make_weights(type, n, n_rows);
    size_t rb = loom_type_row_bytes(type, n);
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    int bad = 0;
    for (int r = 0; r < n_rows; r++) {
        const void *row = (const char *)w + rb * (size_t)r;
        ggml_get_type_traits((enum ggml_type)type)->to_float(row, a, n);
        t->to_float(row, b, n);
        bad += memcmp(a, b, sizeof(float) * (size_t)n) != 0;
    }
    CHECK(bad == 0, "%s dequantize: %d of %d rows differ from ggml", t->name, bad, n_rows);
    free(w);
    free(a);
    free(b);
}

/* Activation quantization must be bitwise equal to the CPU backend's from_float. */
static void check_from_float(uint32_t type, int64_t n)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    size_t rb = loom_type_row_bytes(type, n);
    float *x = malloc(sizeof(float) * (size_t)n);
    void *a = malloc(rb), *b = malloc(rb);
    int bad = 0;
    for (int r = 0; r < 60; r++) {
        make_activations(x, n, r);
        memset(a, 0, rb);
        memset(b, 0, rb);
        ggml_cpu_traits((enum ggml_type)type)->from_float(x, a, n);
        loom_kernels_active()->types[type].from_float(x, b, n);
        bad += memcmp(a, b, rb) != 0;
    }
    CHECK(bad == 0, "%s from_float (%s) n=%lld: %d of 60 rows differ from ggml-cpu", t->name, loom_kernels_name(),
          (long long)n, bad);
    free(x);
    free(a);
    free(b);
}

/* vec_dot: count bitwise-equal results and the largest relative difference against ggml-cpu. */
static void check_vec_dot(uint32_t type, int64_t n, int n_rows)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    uint32_t at = t->vec_dot_type;
    size_t rb = loom_type_row_bytes(type, n), ab = loom_type_row_bytes(at, n);
    void *w = make_weights(type, n, n_rows);
    float *x = malloc(sizeof(float) * (size_t)n);
    void *act = malloc(ab);
    int equal = 0, total = 0;
    double max_rel = 0;
    for (int k = 0; k < 6; k++) {
        make_activations(x, n, k == 2 ? 0 : k); /* skip the all-zero activation row: every dot is 0 */
        ggml_cpu_traits((enum ggml_type)at)->from_float(x, act, n);
        for (int r = 0; r < n_rows; r++) {
            const void *row = (const char *)w + rb * (size_t)r;
            float s_ref = 0, s = 0;
            ggml_cpu_traits((enum ggml_type)type)->vec_dot((int)n, &s_ref, 0, row, 0, act, 0, 1);
            loom_kernels_active()->types[type].vec_dot.row(n, &s, row, act);
            total++;
            if (loom_f32_bits(s) == loom_f32_bits(s_ref) || (isnan(s) && isnan(s_ref))) {
                equal++;
                continue;
            }
            double rel = fabs((double)s - s_ref) / fmax(fabs((double)s_ref), 1e-30);
            if (rel > max_rel)
                max_rel = rel;
        }
    }
    printf("  %-5s n=%-5lld %-6s vec_dot: %d/%d bitwise equal, max rel diff %.3g\n", t->name, (long long)n,
           loom_kernels_name(), equal, total, max_rel);
    if (float_order(type)) {
        PARITY_CHECK_BITWISE(max_rel < 1e-5 && equal == total, "%s vec_dot (%s) n=%lld: %d of %d bitwise equal, "
                             "max rel diff %.3g", t->name, loom_kernels_name(), (long long)n, equal, total, max_rel);
    } else {
        CHECK(max_rel < 1e-5, "%s vec_dot (%s) n=%lld: max rel diff %.3g", t->name, loom_kernels_name(), (long long)n,
              max_rel);
        CHECK(equal == total, "%s vec_dot (%s) n=%lld: %d of %d bitwise equal", t->name, loom_kernels_name(),
              (long long)n, equal, total);
    }
    free(w);
    free(x);
    free(act);
}

/* Dequantization with non-finite F16 scales (Inf, -Inf, NaN in every scale field) must match too. */
static void check_dequant_nonfinite(uint32_t type, int64_t n)
{
    static const uint16_t bad_scales[] = {0x7c00, 0xfc00, 0x7e01, 0xfe00};
    const struct loom_type_traits *t = loom_type_traits(type);
    size_t rb = loom_type_row_bytes(type, n);
    uint8_t *w = malloc(rb);
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    int d, dmin, bad = 0;
    scale_offsets(type, &d, &dmin);
    for (int r = 0; r < 8; r++) {
        for (size_t i = 0; i < rb; i++)
            w[i] = (uint8_t)rnd_u32();
        for (int64_t k = 0; k < n / t->block_size; k++) {
            uint8_t *blk = w + (size_t)k * t->type_size;
            uint16_t s = bad_scales[(r + k) % 4], s2 = r % 2 ? 0x3c00 : bad_scales[(r + 2 * k + 1) % 4];
            put_scale(type, blk, d, s);
            if (dmin >= 0)
                memcpy(blk + dmin, &s2, 2);
        }
        ggml_get_type_traits((enum ggml_type)type)->to_float(w, a, n);
        t->to_float(w, b, n);
        bad += memcmp(a, b, sizeof(float) * (size_t)n) != 0;
    }
    CHECK(bad == 0, "%s dequantize with non-finite scales: %d of 8 rows differ from ggml", t->name, bad);
    free(w);
    free(a);
    free(b);
}

/* Source rows for weight quantization: Gaussian-ish at several magnitudes, all zero, negative zeros,
 * constant, subnormal, huge, a single spike, few distinct values (ties), and mixed signs per block. */
static void make_weight_floats(float *x, int64_t n, int row)
{
    for (int64_t i = 0; i < n; i++) {
        float v = rnd_f() + rnd_f() + rnd_f();
        switch (row % 10) {
        case 0: x[i] = v; break;
        case 1: x[i] = v * 1e-3f * (float)(1 + i % 7); break;
        case 2: x[i] = 0.0f; break;
        case 3: x[i] = i % 3 ? -0.0f : v * 1e-40f; break;
        case 4: x[i] = v * 3e4f; break;
        case 5: x[i] = roundf(v * 4) / 4; break;
        case 6: x[i] = 0.75f; break;
        case 7: x[i] = i % 97 == 5 ? 10.0f : v * 0.01f; break;
        case 8: x[i] = (i / 16) % 2 ? fabsf(v) : -fabsf(v); break;
        default: x[i] = v * (float)(1 + (i / 32) % 9) * 0.1f + ((i / 64) % 3 == 0 ? 2.0f : 0.0f); break;
        }
    }
}

/* Weight quantization (the reference path, no importance matrix) must be bytewise equal to
 * ggml_quantize_chunk's. */
static void check_quantize(uint32_t type, int64_t n, int n_rows)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    size_t rb = loom_type_row_bytes(type, n);
    float *x = malloc(sizeof(float) * (size_t)n);
    uint8_t *a = malloc(rb), *b = malloc(rb);
    int bad = 0;
    for (int r = 0; r < n_rows; r++) {
        make_weight_floats(x, n, r);
        memset(a, 0xaa, rb);
        memset(b, 0x55, rb);
        ggml_quantize_chunk((enum ggml_type)type, x, a, 0, 1, n, NULL);
        t->quantize(x, b, n);
        if (memcmp(a, b, rb) != 0) {
            bad++;
            if (getenv("LOOM_VERBOSE"))
                for (size_t i = 0; i < rb; i++)
                    if (a[i] != b[i]) {
                        fprintf(stderr, "%s row %d (kind %d): first difference at byte %zu: %02x vs %02x\n", t->name, r,
                                r % 10, i, a[i], b[i]);
                        break;
                    }
        }
    }
    printf("  %-6s n=%-5lld quantize: %d/%d rows bytewise equal\n", t->name, (long long)n, n_rows - bad, n_rows);
    CHECK(bad == 0, "%s quantize n=%lld: %d of %d rows differ from ggml_quantize_chunk", t->name, (long long)n, bad, n_rows);
    free(x);
    free(a);
    free(b);
}

/* The reference's CPU backend as a device: plain buffers, and the repack buffer type (CPU_REPACK). */
static ggml_backend_t cpu_backend;
static ggml_backend_buffer_type_t repack_buft;

/* y[n_tok][n_out] = W x by a ggml MUL_MAT graph on the reference CPU backend; W in the repack buffer
 * when `repacked`. */
static void ggml_matmul(uint32_t type, const void *w, int64_t n_out, int64_t n_in, const float *x, int64_t n_tok,
                        float *y, int repacked)
{
    struct ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), NULL, true};
    struct ggml_context *cw = ggml_init(ip), *cx = ggml_init(ip);
    struct ggml_tensor *tw = ggml_new_tensor_2d(cw, (enum ggml_type)type, n_in, n_out);
    struct ggml_tensor *tx = ggml_new_tensor_2d(cx, GGML_TYPE_F32, n_in, n_tok);
    struct ggml_tensor *ty = ggml_mul_mat(cx, tw, tx);
    struct ggml_tensor *in[] = {tw, tx};
    const void *data[] = {w, x};
    parity_graph_compute(cpu_backend, repacked ? repack_buft : NULL, cw, cx, in, data, 2, ty, y);
}

/* IQ1_S, IQ1_M, TQ1_0, TQ2_0, MXFP4: no weight quantizer in loom (ggml quantizes IQ1_S only with an importance
 * matrix; make_weights gives it one of all ones). */
static const uint32_t low_bit_types[] = {LOOM_TYPE_IQ1_S, LOOM_TYPE_IQ1_M, LOOM_TYPE_TQ1_0, LOOM_TYPE_TQ2_0,
                                         LOOM_TYPE_MXFP4};
#define N_LOW_BIT (sizeof low_bit_types / sizeof low_bit_types[0])

/* loom_matmul (2 threads) against the ggml graph, bitwise. */
static void check_matmul(struct loom_pool *pool, uint32_t type, int64_t n_out, int64_t n_in, int64_t n_tok, int repacked)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    void *w = make_weights(type, n_in, (int)n_out);
    float *x = malloc(sizeof(float) * (size_t)(n_in * n_tok));
    float *y = malloc(sizeof(float) * (size_t)(n_out * n_tok)), *y_ref = malloc(sizeof(float) * (size_t)(n_out * n_tok));
    for (int64_t i = 0; i < n_in * n_tok; i++)
        x[i] = rnd_f() + rnd_f();
    size_t sb = loom_matmul_scratch_bytes(type, n_in, n_tok);
    void *scratch = malloc(sb ? sb : 1);
    struct loom_weight lw = {type, n_in, n_out, loom_type_row_bytes(type, n_in), w, LOOM_WEIGHT_ROWS, 0, !repacked};
    loom_matmul(loom_kernels_active(), pool, &lw, x, n_tok, y, scratch);
    ggml_matmul(type, w, n_out, n_in, x, n_tok, y_ref, repacked && n_out % 8 == 0); /* as llama.cpp places weights */
    int equal = 0;
    double max_rel = 0;
    for (int64_t i = 0; i < n_out * n_tok; i++) {
        if (loom_f32_bits(y[i]) == loom_f32_bits(y_ref[i])) {
            equal++;
            continue;
        }
        double rel = fabs((double)y[i] - y_ref[i]) / fmax(fabs((double)y_ref[i]), 1e-30);
        if (getenv("LOOM_VERBOSE"))
            fprintf(stderr, "tok %lld row %lld: %.9g vs %.9g\n", (long long)(i / n_out), (long long)(i % n_out), y[i], y_ref[i]);
        max_rel = rel > max_rel ? rel : max_rel;
    }
    printf("  %-5s %lldx%lld n_tok %-3lld %-8s %-6s matmul: %d/%lld bitwise equal, max rel diff %.3g\n", t->name,
           (long long)n_out, (long long)n_in, (long long)n_tok, repacked ? "repacked" : "plain", loom_kernels_name(),
           equal, (long long)(n_out * n_tok), max_rel);
    if (float_order(type))
        PARITY_CHECK_BITWISE(equal == n_out * n_tok, "%s matmul %lldx%lld n_tok %lld %s (%s): %d of %lld bitwise equal",
                             t->name, (long long)n_out, (long long)n_in, (long long)n_tok,
                             repacked ? "repacked" : "plain", loom_kernels_name(), equal, (long long)(n_out * n_tok));
    else
        CHECK(equal == n_out * n_tok, "%s matmul %lldx%lld n_tok %lld %s (%s): %d of %lld bitwise equal", t->name,
              (long long)n_out, (long long)n_in, (long long)n_tok, repacked ? "repacked" : "plain", loom_kernels_name(),
              equal, (long long)(n_out * n_tok));
    free(w);
    free(x);
    free(y);
    free(y_ref);
    free(scratch);
}

static void check_matmuls(void)
{
    struct loom_pool *pool = loom_pool_new(2);
    const uint32_t types[] = {LOOM_TYPE_F32,  LOOM_TYPE_F16,  LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,  LOOM_TYPE_Q4_K,
                              LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1,  LOOM_TYPE_Q5_0,
                              LOOM_TYPE_Q5_1, LOOM_TYPE_Q2_K, LOOM_TYPE_Q3_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
                              LOOM_TYPE_IQ2_XXS, LOOM_TYPE_IQ2_XS, LOOM_TYPE_IQ2_S, LOOM_TYPE_IQ3_XXS,
                              LOOM_TYPE_IQ3_S};
    const int64_t n_toks[] = {1, 2, 7, 21}; /* 21: the repacked 16-row gemm, a 4-row group and gemv rows */
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        for (size_t k = 0; k < sizeof n_toks / sizeof n_toks[0]; k++) {
            check_matmul(pool, types[i], 64, 1024, n_toks[k], 0);
            /* Q2_K is repacked only by the reference's AVX-512 builds (its AVX2 build's CPU_REPACK buffer has no
             * Q2_K layout: set_tensor crashes) */
            if ((types[i] == LOOM_TYPE_Q4_K || types[i] == LOOM_TYPE_Q4_0 || types[i] == LOOM_TYPE_IQ4_NL ||
                 (types[i] == LOOM_TYPE_Q2_K && parity_ref_avx512())) && repack_buft)
                check_matmul(pool, types[i], 64, 1024, n_toks[k], 1);
        }
    check_matmul(pool, LOOM_TYPE_F16, 36, 320, 5, 0);  /* n_in not a multiple of 64 */
    check_matmul(pool, LOOM_TYPE_F32, 30, 512, 3, 0);  /* n_out % 4 != 0: vec_dot even for prefill */
    check_matmul(pool, LOOM_TYPE_Q4_K, 12, 512, 3, 1); /* n_out % 8 != 0: never repacked */
    check_matmul(pool, LOOM_TYPE_IQ4_NL, 30, 512, 3, 0); /* tinyBLAS for any n_out */
    check_matmul(pool, LOOM_TYPE_IQ4_NL, 12, 512, 6, 1); /* n_out % 8 != 0: not repacked */
    check_matmul(pool, LOOM_TYPE_Q4_0, 12, 512, 6, 1);
    check_matmul(pool, LOOM_TYPE_IQ4_XS, 12, 512, 9, 0); /* n_out % 8 != 0: no IQ panel */
    check_matmul(pool, LOOM_TYPE_IQ4_XS, 16, 512, 8, 0); /* the smallest IQ panel batch */
    const uint32_t grid_types[] = {LOOM_TYPE_IQ2_XXS, LOOM_TYPE_IQ2_XS, LOOM_TYPE_IQ2_S, LOOM_TYPE_IQ3_XXS,
                                   LOOM_TYPE_IQ3_S}; /* the IQ panel's edges for the grid types too */
    for (size_t i = 0; i < sizeof grid_types / sizeof grid_types[0]; i++) {
        check_matmul(pool, grid_types[i], 12, 512, 9, 0);
        check_matmul(pool, grid_types[i], 16, 512, 8, 0);
    }
    for (size_t i = 0; i < N_LOW_BIT; i++) /* vec_dot for 1 row and up; IQ1: the IQ panel from 8; MXFP4: repacked */
        for (int64_t n_tok = 1; n_tok <= 21; n_tok += n_tok < 2 ? 1 : n_tok < 7 ? 5 : 14) {
            check_matmul(pool, low_bit_types[i], 64, 1024, n_tok, 0);
            if (low_bit_types[i] == LOOM_TYPE_MXFP4 && repack_buft)
                check_matmul(pool, LOOM_TYPE_MXFP4, 64, 1024, n_tok, 1);
        }
    check_matmul(pool, LOOM_TYPE_IQ1_S, 12, 512, 9, 0); /* n_out % 8 != 0: no IQ panel */
    check_matmul(pool, LOOM_TYPE_IQ1_M, 16, 512, 8, 0); /* the smallest IQ panel batch */
    check_matmul(pool, LOOM_TYPE_MXFP4, 12, 512, 6, 1); /* n_out % 8 != 0: not repacked */
    check_matmul(pool, LOOM_TYPE_MXFP4, 24, 96, 5, 1);  /* an odd number of blocks, repacked */
    loom_pool_free(pool);
}

int main(void)
{
    if (!load_cpu_backend()) {
        CHECK(0, "the reference CPU backend (libggml-cpu-NAME.so) must load");
        return test_finish();
    }
    ggml_quantize_init(GGML_TYPE_Q4_K);
    const uint32_t quant_types[] = {LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K, LOOM_TYPE_F16,
                                    LOOM_TYPE_BF16};
    for (size_t i = 0; i < sizeof quant_types / sizeof quant_types[0]; i++)
        check_dequant(quant_types[i], 1024, 40);
    const uint32_t new_types[] = {LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1,
                                  LOOM_TYPE_Q2_K, LOOM_TYPE_Q3_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof new_types / sizeof new_types[0]; i++) {
        check_dequant(new_types[i], 1024, 40);
        check_dequant_nonfinite(new_types[i], 1024);
        check_quantize(new_types[i], 1024, 60);
        check_quantize(new_types[i], 4096, 10);
    }

    /* The grid IQ types: no weight quantizer in loom (published files are made with an importance matrix). */
    const uint32_t grid_types[] = {LOOM_TYPE_IQ2_XXS, LOOM_TYPE_IQ2_XS, LOOM_TYPE_IQ2_S, LOOM_TYPE_IQ3_XXS,
                                   LOOM_TYPE_IQ3_S};
    for (size_t i = 0; i < sizeof grid_types / sizeof grid_types[0]; i++) {
        check_dequant(grid_types[i], 1024, 40);
        check_dequant_nonfinite(grid_types[i], 1024);
    }

    for (size_t i = 0; i < N_LOW_BIT; i++) {
        check_dequant(low_bit_types[i], 1024, 40);
        check_dequant_nonfinite(low_bit_types[i], 1024);
    }

    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    const uint32_t dot_types[] = {LOOM_TYPE_F32,  LOOM_TYPE_F16,  LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,   LOOM_TYPE_Q4_K,
                                  LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1,   LOOM_TYPE_Q5_0,
                                  LOOM_TYPE_Q5_1, LOOM_TYPE_Q2_K, LOOM_TYPE_Q3_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
                                  LOOM_TYPE_IQ2_XXS, LOOM_TYPE_IQ2_XS, LOOM_TYPE_IQ2_S, LOOM_TYPE_IQ3_XXS,
                                  LOOM_TYPE_IQ3_S};
    const int64_t lens[] = {256, 1024, 3584};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        loom_error err;
        if (loom_kernels_select(modes[m], &err) != LOOM_OK)
            continue;
        const uint32_t act_types[] = {LOOM_TYPE_Q8_0, LOOM_TYPE_Q8_K, LOOM_TYPE_Q8_1, LOOM_TYPE_F16, LOOM_TYPE_BF16};
        for (size_t i = 0; i < sizeof act_types / sizeof act_types[0]; i++)
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
                check_from_float(act_types[i], lens[l]);
        check_from_float(LOOM_TYPE_F16, 1000);
        check_from_float(LOOM_TYPE_BF16, 70);
        for (size_t i = 0; i < sizeof dot_types / sizeof dot_types[0]; i++)
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
                check_vec_dot(dot_types[i], lens[l], 24);
        const int64_t odd[] = {70, 71, 72, 79, 80, 88, 95, 127, 1000}; /* every kind of F32 tail */
        for (size_t l = 0; l < sizeof odd / sizeof odd[0]; l++) {
            check_vec_dot(LOOM_TYPE_F32, odd[l], 8);
            check_vec_dot(LOOM_TYPE_F16, odd[l], 8);
            check_vec_dot(LOOM_TYPE_BF16, odd[l], 8);
        }
        check_vec_dot(LOOM_TYPE_IQ4_NL, 96, 8); /* an odd number of blocks: the reference's scalar tail */
        check_vec_dot(LOOM_TYPE_Q4_0, 96, 8);
        for (size_t i = 0; i < N_LOW_BIT; i++)
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
                check_vec_dot(low_bit_types[i], lens[l], 24);
        check_vec_dot(LOOM_TYPE_MXFP4, 96, 8); /* an odd number of blocks: the reference's scalar tail */
    }
    CHECK((cpu_backend = parity_cpu_backend(&repack_buft)) != NULL, "the reference CPU backend must initialize");
    CHECK(repack_buft != NULL, "the reference CPU backend offers the CPU_REPACK buffer type");
    for (size_t m = 0; m < sizeof modes / sizeof modes[0] && cpu_backend; m++)
        if (loom_kernels_select(modes[m], NULL) == LOOM_OK)
            check_matmuls();
    ggml_backend_free(cpu_backend);
    return test_finish();
}
