/* test_ref_orders.c — the elementwise and per-row ops whose float order depends on the reference's CPU build
 * (docs/haswell-numerics.md D7-D10), in loom's active float-order profile (the reference build's, parity.h),
 * against the reference's own ops on its CPU backend, bitwise: SiLU and SwiGLU (ggml_v_expf in 16- or 8-blocks,
 * libm tails) over ranges that reach every branch of the exp, softmax with a scale over padded rows, and
 * ssm_conv's tap sum for kernel widths 2 to 16. The F32/F16/BF16 dots are test_ref_quants', the router's
 * softmax test_ref_moe_ops'. */
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "kernels/kernels.h"
#include "kernels/orders_haswell.h"
#include "parity.h"
#include "test.h"
#include "util/fp16.h"

#define TEST_RNG_SEED 0x3c6ef372fe94f82bull
#include "test_rng.h"

static ggml_backend_t cpu_backend;

static int count_equal(const float *a, const float *b, int64_t n)
{
    int equal = 0;
    for (int64_t i = 0; i < n; i++)
        equal += loom_f32_bits(a[i]) == loom_f32_bits(b[i]);
    return equal;
}

/* Values that reach each branch of ggml_v_expf(-x) and of exp(x - max): |n| <= 126, 126 < |n| <= 192 (both
 * signs: subnormal and scaled results), |n| > 192 (0 and inf), zeros and infinities; random values between. */
static const float SPECIAL[] = {0.0f,   -0.0f,  1e-30f, -1e-30f, 87.0f,  87.5f,  88.0f,  88.5f,   89.0f,   -87.0f,
                                -87.5f, -88.0f, -88.5f, -89.0f,  -100.f, 100.0f, 103.0f, -103.0f, 120.0f,  -120.0f,
                                133.0f, -133.0f, 140.0f, -140.0f, 200.0f, -200.0f, INFINITY, -INFINITY, 60.0f, -60.0f};

static void fill(float *x, int64_t n, float range)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_u32() % 4 == 0 ? SPECIAL[rnd_u32() % (sizeof SPECIAL / sizeof SPECIAL[0])] : range * rnd_f();
}

/* Run the graph of out (inputs a, b: n floats each, b may be NULL) on the reference's CPU backend into y. */
static void run_graph(struct ggml_context *ctx, struct ggml_tensor *out, struct ggml_tensor *ta, const float *a,
                      struct ggml_tensor *tb, const float *b, float *y)
{
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu_backend);
    ggml_backend_tensor_set(ta, a, 0, ggml_nbytes(ta));
    if (tb)
        ggml_backend_tensor_set(tb, b, 0, ggml_nbytes(tb));
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_graph_compute(cpu_backend, gf);
    ggml_backend_tensor_get(out, y, 0, ggml_nbytes(out));
    ggml_backend_buffer_free(buf);
}

static struct ggml_context *graph_ctx(void)
{
    struct ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), NULL, true};
    return ggml_init(ip);
}

/* ggml_silu (swiglu 0) or ggml_swiglu_split (swiglu 1) of one row of n against the active set's op. */
static void check_silu(int64_t n, int swiglu)
{
    float *g = malloc(sizeof(float) * (size_t)n), *u = malloc(sizeof(float) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)n), *y_ref = malloc(sizeof(float) * (size_t)n);
    fill(g, n, 12.0f);
    fill(u, n, 2.0f);
    struct ggml_context *ctx = graph_ctx();
    struct ggml_tensor *tg = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n), *tu = NULL;
    if (swiglu)
        tu = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    run_graph(ctx, swiglu ? ggml_swiglu_split(ctx, tg, tu) : ggml_silu(ctx, tg), tg, g, tu, u, y_ref);
    ggml_free(ctx);
    const struct loom_ops_kernels *ops = &loom_kernels_active()->ops;
    if (swiglu)
        ops->swiglu(n, g, u, y);
    else
        ops->silu(n, g, y);
    int equal = count_equal(y, y_ref, n);
    printf("  %-6s n %5lld: %lld/%lld bitwise equal\n", swiglu ? "swiglu" : "silu", (long long)n, (long long)equal,
           (long long)n);
    PARITY_CHECK_BITWISE(equal == n, "%s n %lld: %d of %lld bitwise equal", swiglu ? "swiglu" : "silu", (long long)n,
                         equal, (long long)n);
    free(g);
    free(u);
    free(y);
    free(y_ref);
}

/* ggml_soft_max_ext with scale, no mask, over n_rows rows of n (a multiple of 16: the reference's attention rows
 * are padded views) against loom's attention softmax of the profile. */
static void check_softmax(int64_t n, int n_rows, float range)
{
    float scale = 0.0883883476f; /* 1 / sqrt(128) */
    size_t sz = sizeof(float) * (size_t)(n * n_rows);
    float *x = malloc(sz), *y = malloc(sz), *y_ref = malloc(sz);
    for (int64_t i = 0; i < n * n_rows; i++)
        x[i] = range * rnd_f();
    for (int r = 0; r < n_rows; r++) /* a -inf (masked) entry and a row with a few entries far below the max */
        x[r * n + (r % n)] = r % 2 ? -INFINITY : 2.0f * range;
    struct ggml_context *ctx = graph_ctx();
    struct ggml_tensor *tx = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n_rows);
    run_graph(ctx, ggml_soft_max_ext(ctx, tx, NULL, scale, 0.0f), tx, x, NULL, NULL, y_ref);
    ggml_free(ctx);
    memcpy(y, x, sz);
    for (int r = 0; r < n_rows; r++) {
        if (loom_orders_active() == LOOM_ORDERS_HASWELL)
            loom_hsw_softmax(n, y + r * n, scale);
        else
            loom_ops_softmax(n, y + r * n, scale);
    }
    int equal = count_equal(y, y_ref, n * n_rows);
    printf("  softmax n %4lld x %d rows, range %g: %d/%lld bitwise equal\n", (long long)n, n_rows, range, equal,
           (long long)(n * n_rows));
    PARITY_CHECK_BITWISE(equal == n * n_rows, "softmax n %lld range %g: %d of %lld bitwise equal", (long long)n, range,
                         equal, (long long)(n * n_rows));
    free(x);
    free(y);
    free(y_ref);
}

/* ggml_ssm_conv over `channels` channels, kernel width K, n_t tokens against the active set's conv1d_chunk. */
static void check_conv(int K, int64_t channels, int n_t)
{
    int64_t w_len = K - 1 + n_t;
    float *sx = malloc(sizeof(float) * (size_t)(w_len * channels)), *c = malloc(sizeof(float) * (size_t)(K * channels));
    float *state = malloc(sizeof(float) * (size_t)((K - 1) * channels + 1));
    float *x = malloc(sizeof(float) * (size_t)(n_t * channels)), *y = malloc(sizeof(float) * (size_t)(n_t * channels));
    float *y_ref = malloc(sizeof(float) * (size_t)(n_t * channels));
    for (int64_t i = 0; i < w_len * channels; i++)
        sx[i] = 4.0f * rnd_f();
    for (int64_t i = 0; i < K * channels; i++)
        c[i] = rnd_f();
    struct ggml_context *ctx = graph_ctx();
    struct ggml_tensor *tsx = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, w_len, channels);
    struct ggml_tensor *tc = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, channels);
    run_graph(ctx, ggml_ssm_conv(ctx, ggml_reshape_3d(ctx, tsx, w_len, channels, 1), tc), tsx, sx, tc, c, y_ref);
    ggml_free(ctx);
    for (int64_t ch = 0; ch < channels; ch++) {
        memcpy(state + ch * (K - 1), sx + ch * w_len, sizeof(float) * (size_t)(K - 1));
        for (int t = 0; t < n_t; t++)
            x[t * channels + ch] = sx[ch * w_len + K - 1 + t];
    }
    loom_kernels_active()->ops.conv1d_chunk(channels, K, n_t, state, c, x, channels, y, channels);
    int equal = count_equal(y, y_ref, n_t * channels);
    printf("  ssm_conv K %2d: %d/%lld bitwise equal\n", K, equal, (long long)(n_t * channels));
    PARITY_CHECK_BITWISE(equal == n_t * channels, "ssm_conv K %d: %d of %lld bitwise equal", K, equal,
                         (long long)(n_t * channels));
    free(sx);
    free(c);
    free(state);
    free(x);
    free(y);
    free(y_ref);
}

int main(void)
{
    ggml_backend_buffer_type_t repack;
    if (parity_ref_init() != 0 || !(cpu_backend = parity_cpu_backend(&repack))) {
        CHECK(0, "the reference CPU backend must load");
        return test_finish();
    }
    printf("float-order profile %s, reference build %s\n", loom_orders_name(),
           parity_ref_avx512() ? "with AVX-512" : "without AVX-512 (haswell)");
    const int64_t lengths[] = {1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 100, 1000, 1003, 3584};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        check_silu(lengths[i], 0);
        check_silu(lengths[i], 1);
    }
    const float ranges[] = {1.0f, 30.0f, 2000.0f};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        check_softmax(256, 6, ranges[i]);
        check_softmax(16, 6, ranges[i]);
    }
    for (int K = 2; K <= 16; K++)
        check_conv(K, 40, 5);
    ggml_backend_free(cpu_backend);
    return test_finish();
}
