/* test_matmul_rowwise.c — loom_matmul_rowwise (the CANONICAL prefill path, with its multi-token kernels)
 * against the one-row product, bit for bit: every output row equals a one-token loom_matmul_rowwise of
 * that row, in every kernel set and float-order profile, for 1 and 2 threads, and the SIMD sets equal the scalar
 * set. */
#include <stdlib.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels.h"
#include "kernels/protos.h"
#include "kernels/matmul.h"
#include "util/pool.h"
#include "test.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rnd_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rnd_f(void) { return (float)rnd_u32() / 2147483648.0f - 1.0f; }

/* Weights: n_out random rows quantized to `type` by its reference quantizer (F32 as is). */
static void *make_weights(uint32_t type, int64_t n_out, int64_t n_in, size_t *row_bytes)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    *row_bytes = loom_type_row_bytes(type, n_in);
    char *w = malloc(*row_bytes * (size_t)n_out);
    float *row = malloc(sizeof(float) * (size_t)n_in);
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++)
            row[i] = rnd_f() * (1.0f + (float)(o % 7));
        if (type == LOOM_TYPE_F32)
            memcpy(w + (size_t)o * *row_bytes, row, *row_bytes);
        else if (t->quantize)
            t->quantize(row, w + (size_t)o * *row_bytes, n_in);
        else
            loom_kernels_active()->types[type].from_float(row, w + (size_t)o * *row_bytes, n_in);
    }
    free(row);
    return w;
}

static void select_mode(enum loom_kernel_mode mode)
{
    loom_error err;
    loom_kernels_select(mode, &err);
}

/* y = rowwise(W, x) for n_tok rows in the current kernel set and each pool; each row must equal the
 * one-token product of that row alone; *y_mode gets the result for the cross-set comparison. */
static void check_shape(uint32_t type, int64_t n_out, int64_t n_in, int64_t n_tok, struct loom_pool **pools,
                        float *y_mode)
{
    size_t rb;
    void *wd = make_weights(type, n_out, n_in, &rb);
    struct loom_weight w = {type, n_in, n_out, rb, wd, LOOM_WEIGHT_ROWS, 0, 0};
    float *x = malloc(sizeof(float) * (size_t)(n_in * n_tok));
    for (int64_t i = 0; i < n_in * n_tok; i++)
        x[i] = rnd_f() * 3.0f;
    float *y = malloc(sizeof(float) * (size_t)(n_out * n_tok)), *y_one = malloc(sizeof(float) * (size_t)n_out);
    size_t sb = loom_matmul_scratch_bytes(type, n_in, n_tok);
    void *scratch = malloc(sb ? sb : 1);
    for (int p = 0; p < 3; p++) {
        memset(y, 0xff, sizeof(float) * (size_t)(n_out * n_tok));
        loom_matmul_rowwise(loom_kernels_active(), pools[p], &w, x, n_tok, y, scratch);
        int same = 1;
        for (int64_t k = 0; k < n_tok; k++) {
            loom_matmul_rowwise(loom_kernels_active(), NULL, &w, x + k * n_in, 1, y_one, scratch);
            same &= memcmp(y + k * n_out, y_one, sizeof(float) * (size_t)n_out) == 0;
        }
        CHECK(same, "%s rowwise %lldx%lld n_tok %lld threads %d (%s) differs from one-row products",
              loom_type_traits(type)->name, (long long)n_out, (long long)n_in, (long long)n_tok,
              loom_pool_n_threads(pools[p]), loom_kernels_name());
    }
    memcpy(y_mode, y, sizeof(float) * (size_t)(n_out * n_tok));
    free(scratch);
    free(wd);
    free(x);
    free(y);
    free(y_one);
}

int main(void)
{
    struct loom_pool *pools[3] = {NULL, loom_pool_new(1), loom_pool_new(2)};
    CHECK(pools[1] && pools[2], "pools");
    const uint32_t types[] = {LOOM_TYPE_Q4_K, LOOM_TYPE_Q6_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q8_0, LOOM_TYPE_F32, LOOM_TYPE_F16};
    const int64_t shapes[][3] = {{64, 512, 1}, {40, 256, 7}, {24, 1024, 13}, {72, 512, 33}};
    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    const enum loom_orders profiles[] = {LOOM_ORDERS_AVX512, LOOM_ORDERS_HASWELL};
    for (size_t o = 0; o < sizeof profiles / sizeof profiles[0]; o++) {
        loom_orders_select(profiles[o], NULL);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                size_t ny = (size_t)(shapes[s][0] * shapes[s][2]);
                float *y_scalar = malloc(sizeof(float) * ny), *y_simd = malloc(sizeof(float) * ny);
                for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
                    loom_error err;
                    if (loom_kernels_select(modes[m], &err) != LOOM_OK)
                        continue;
                    rng_state = 0x2545f4914f6cdd1dull + s; /* the same data in every kernel set */
                    check_shape(types[ti], shapes[s][0], shapes[s][1], shapes[s][2], pools, m ? y_simd : y_scalar);
                    if (m)
                        CHECK(memcmp(y_simd, y_scalar, sizeof(float) * ny) == 0,
                              "%s rowwise %s equals scalar (%s orders)", loom_type_traits(types[ti])->name,
                              loom_kernels_name(), loom_orders_name());
                }
                free(y_scalar);
                free(y_simd);
            }
    }
    select_mode(LOOM_KERNELS_AUTO);
    loom_pool_free(pools[1]);
    loom_pool_free(pools[2]);
    return test_finish();
}
