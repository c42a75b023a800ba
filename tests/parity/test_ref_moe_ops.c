/* test_ref_moe_ops.c — the mixture-of-experts pieces of loom against llama.cpp's ggml as the oracle, op by op,
 * bitwise: the router (soft_max, argsort with its tie order, get_rows, sum_rows, clamp, div, as
 * llama-graph.cpp build_moe_ffn builds them) on random and tie-heavy logits, and the grouped expert matmul
 * (loom_ops_moe_group + loom_matmul_experts) against a ggml MUL_MAT_ID graph on the reference's CPU backend,
 * plain and repacked (CPU_REPACK) expert tensors, for every loom kernel set, and Q4_K experts in loom's own X16
 * layout. */
#include <dlfcn.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "parity.h"
#include "test.h"
#include "util/fp16.h"
#include "util/pool.h"

#define TEST_RNG_SEED 0x452821e638d01377ull
#include "test_rng.h"

static ggml_backend_t cpu_backend;
static ggml_backend_buffer_type_t repack_buft;

static int init_backend(void)
{
    return parity_ref_init() == 0 && (cpu_backend = parity_cpu_backend(&repack_buft)) != NULL;
}

static int count_equal(const float *a, const float *b, int64_t n)
{
    int equal = 0;
    for (int64_t i = 0; i < n; i++)
        equal += loom_f32_bits(a[i]) == loom_f32_bits(b[i]);
    return equal;
}

/* ---- the router ---------------------------------------------------------------------------------- */

/* The reference's router on logits [n_tok][n]: probs [n_tok][n], the full argsort order [n_tok][n] and the
 * normalized weights of the first k [n_tok][k]. */
static void ggml_route(int n, int k, int n_tok, const float *logits, float *probs, int32_t *order, float *weights)
{
    struct ggml_init_params ip = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), NULL, true};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *tl = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n_tok);
    struct ggml_tensor *tp = ggml_soft_max(ctx, tl);
    struct ggml_tensor *ts = ggml_argsort(ctx, tp, GGML_SORT_ORDER_DESC);
    struct ggml_tensor *top = ggml_argsort_top_k(ctx, tp, k); /* what build_moe_ffn selects with */
    struct ggml_tensor *w = ggml_get_rows(ctx, ggml_reshape_3d(ctx, tp, 1, n, n_tok), top);
    w = ggml_reshape_2d(ctx, w, k, n_tok);
    struct ggml_tensor *sum = ggml_clamp(ctx, ggml_sum_rows(ctx, w), 6.103515625e-5f, INFINITY);
    w = ggml_div(ctx, w, sum);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu_backend);
    ggml_backend_tensor_set(tl, logits, 0, ggml_nbytes(tl));
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, tp);
    ggml_build_forward_expand(gf, ts);
    ggml_build_forward_expand(gf, w);
    ggml_backend_graph_compute(cpu_backend, gf);
    ggml_backend_tensor_get(tp, probs, 0, ggml_nbytes(tp));
    ggml_backend_tensor_get(ts, order, 0, ggml_nbytes(ts));
    ggml_backend_tensor_get(w, weights, 0, ggml_nbytes(w));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

/* Logits of one kind: 0 random, 1 a few distinct values (many ties), 2 all equal, 3 two values. */
static float make_logit(int kind, int i)
{
    switch (kind) {
    case 0:
        return 4.0f * rnd_f();
    case 1:
        return floorf(4.0f * rnd_f()) * 0.5f;
    case 2:
        return 0.25f;
    default:
        return i % 3 == 0 ? 1.0f : -1.0f;
    }
}

static void check_router(int n, int k, int kind)
{
    int n_tok = 9;
    float *logits = malloc(sizeof(float) * (size_t)(n * n_tok)), *probs = malloc(sizeof(float) * (size_t)(n * n_tok));
    float *p_ref = malloc(sizeof(float) * (size_t)(n * n_tok)), *w_ref = malloc(sizeof(float) * (size_t)(k * n_tok));
    int32_t *o_ref = malloc(sizeof(int32_t) * (size_t)(n * n_tok)), *order = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n * n_tok; i++)
        logits[i] = make_logit(kind, i);
    ggml_route(n, k, n_tok, logits, p_ref, o_ref, w_ref);
    int bad_p = 0, bad_o = 0, bad_w = 0;
    for (int t = 0; t < n_tok; t++) {
        int32_t ids[LOOM_OPS_MAX_EXPERTS];
        float w[LOOM_OPS_MAX_EXPERTS];
        float *p = probs + t * n;
        memcpy(p, logits + t * n, sizeof(float) * (size_t)n);
        loom_ops_moe_route(loom_kernels_active()->ops.router_softmax, n, k, p, ids, w);
        bad_p += n - count_equal(p, p_ref + t * n, n);
        loom_ops_argsort_desc(n, p_ref + t * n, order);
        for (int i = 0; i < n; i++)
            bad_o += order[i] != o_ref[t * n + i] || (i < k && ids[i] != order[i]);
        bad_w += k - count_equal(w, w_ref + t * k, k);
    }
    printf("  router n %3d k %2d logits %d: probs %d, order %d, weights %d differ\n", n, k, kind, bad_p, bad_o, bad_w);
    /* the reference's AVX2 build rounds its softmax's exp differently */
    PARITY_CHECK_BITWISE(bad_p == 0 && bad_o == 0 && bad_w == 0,
                         "router n %d k %d kind %d: %d probs, %d order entries, %d weights differ", n, k, kind, bad_p,
                         bad_o, bad_w);
    free(logits);
    free(probs);
    free(p_ref);
    free(w_ref);
    free(o_ref);
    free(order);
}

/* ---- the expert matmul (MUL_MAT_ID) ------------------------------------------------------------------ */

/* n_expert expert matrices [n_out][n_in] of `type` from random floats. */
static void *make_experts(uint32_t type, int64_t n_in, int64_t n_out, int n_expert)
{
    int64_t rows = n_out * n_expert;
    float *x = malloc(sizeof(float) * (size_t)(n_in * rows));
    for (int64_t i = 0; i < n_in * rows; i++)
        x[i] = (rnd_f() + rnd_f() + rnd_f()) * (float)(1 + (i / n_in) % 4);
    void *w = malloc(loom_type_row_bytes(type, n_in) * (size_t)rows);
    ggml_quantize_init((enum ggml_type)type);
    ggml_quantize_chunk((enum ggml_type)type, x, w, 0, rows, n_in, NULL);
    free(x);
    return w;
}

/* y[n_tok][k][n_out] = MUL_MAT_ID of the experts w with activations b [n_tok][n_b][n_in] (n_b = 1: every slot
 * reads the token's row, as the gate/up projections; n_b = k: slot j reads row j, as down) and ids [n_tok][k]. */
static void ggml_mul_mat_id_ref(uint32_t type, const void *w, int64_t n_in, int64_t n_out, int n_expert,
                                const float *b, int n_b, const int32_t *ids, int k, int n_tok, float *y, int repacked)
{
    struct ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), NULL, true};
    struct ggml_context *cw = ggml_init(ip), *cx = ggml_init(ip);
    struct ggml_tensor *tw = ggml_new_tensor_3d(cw, (enum ggml_type)type, n_in, n_out, n_expert);
    struct ggml_tensor *tb = ggml_new_tensor_3d(cx, GGML_TYPE_F32, n_in, n_b, n_tok);
    struct ggml_tensor *ti = ggml_new_tensor_2d(cx, GGML_TYPE_I32, k, n_tok);
    struct ggml_tensor *ty = ggml_mul_mat_id(cx, tw, tb, ti);
    struct ggml_tensor *in[] = {tw, tb, ti};
    const void *data[] = {w, b, ids};
    parity_graph_compute(cpu_backend, repacked ? repack_buft : NULL, cw, cx, in, data, 3, ty, y);
}

/* loom's MUL_MAT_ID: group the pairs, gather each pair's converted activation row, multiply expert by
 * expert, and scatter back to [n_tok][k][n_out]. */
static void loom_mul_mat_id(struct loom_pool *pool, const struct loom_weight *w, int n_expert, const float *b, int n_b,
                            const int32_t *ids, int k, int n_tok, float *y, int rowwise)
{
    int n = n_tok * k;
    int32_t *start = malloc(sizeof(int32_t) * (size_t)(n_expert + 1)), *perm = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    loom_ops_moe_group(n_tok, k, n_expert, ids, start, perm, pos);
    size_t sb = loom_matmul_scratch_bytes(w->type, w->n_in, n_tok * n_b);
    void *scratch = malloc(sb ? sb : 1);
    struct loom_matmul_act act = {b, n_tok * n_b, LOOM_TYPE_COUNT, scratch};
    const void *rows;
    size_t rb = loom_matmul_act_rows(loom_kernels_active(), pool, w, &act, &rows);
    char *gathered = malloc(rb * (size_t)n);
    float *yg = malloc(sizeof(float) * (size_t)(n * w->n_out));
    for (int p = 0; p < n; p++) {
        int t = perm[p] / k, j = perm[p] % k;
        memcpy(gathered + (size_t)p * rb, (const char *)rows + (size_t)(t * n_b + (n_b > 1 ? j : 0)) * rb, rb);
    }
    loom_matmul_experts(loom_kernels_active(), pool, w, (size_t)w->n_out * w->row_bytes, n_expert, start, gathered,
                        rb, yg, rowwise);
    for (int i = 0; i < n; i++)
        memcpy(y + (size_t)i * w->n_out, yg + (size_t)pos[i] * w->n_out, sizeof(float) * (size_t)w->n_out);
    free(start);
    free(perm);
    free(pos);
    free(scratch);
    free(gathered);
    free(yg);
}

/* The experts of lw repacked into the X16 layout (as model load repacks Q4_K experts when the kernel set has
 * x16 kernels) must give the same bits: y_ref in the ubatch's order, y_rowwise in the one-row order. */
static void check_x16(struct loom_pool *pool, const struct loom_weight *lw, int n_expert, const float *b, int n_b,
                      const int32_t *ids, int k, int n_tok, const float *y_ref, const float *y_rowwise)
{
    size_t expert_bytes = (size_t)lw->n_out * lw->row_bytes, n_y = (size_t)(n_tok * k) * (size_t)lw->n_out;
    if (lw->n_out % 16 || !loom_weight_x16_bytes(loom_kernels_active(), lw))
        return;
    char *x16 = aligned_alloc(64, expert_bytes * (size_t)n_expert);
    for (int e = 0; e < n_expert; e++) {
        struct loom_weight we = *lw;
        we.data = (const char *)lw->data + (size_t)e * expert_bytes;
        loom_weight_repack_x16(NULL, &we, x16 + (size_t)e * expert_bytes);
    }
    struct loom_weight w16 = *lw;
    w16.data = x16, w16.layout = LOOM_WEIGHT_X16, w16.rows = lw->data;
    float *y = malloc(sizeof(float) * n_y);
    loom_mul_mat_id(pool, &w16, n_expert, b, n_b, ids, k, n_tok, y, 0);
    int equal = count_equal(y, y_ref, (int64_t)n_y);
    loom_mul_mat_id(pool, &w16, n_expert, b, n_b, ids, k, n_tok, y, 1);
    int equal_rowwise = count_equal(y, y_rowwise, (int64_t)n_y);
    printf("  %-6s %lldx%lld x%d n_tok %2d X16 layout %-8s: %d/%zu bitwise equal to MUL_MAT_ID, rowwise %d/%zu\n",
           loom_type_traits(lw->type)->name, (long long)lw->n_out, (long long)lw->n_in, n_expert, n_tok,
           loom_kernels_name(), equal, n_y, equal_rowwise, n_y);
    CHECK(equal == (int)n_y && equal_rowwise == (int)n_y, "%s x16 experts n_tok %d (%s): %d and %d of %zu equal",
          loom_type_traits(lw->type)->name, n_tok, loom_kernels_name(), equal, equal_rowwise, n_y);
    free(x16);
    free(y);
}

/* Expert of token t, slot j: expert 0 for every token's slot 0 (so it gathers rows), the others spread. */
static int32_t pick_expert(int t, int j, int n_expert) { return j == 0 ? 0 : 1 + (t * 3 + j * 7) % (n_expert - 1); }

static void check_experts(struct loom_pool *pool, uint32_t type, int64_t n_in, int64_t n_out, int n_tok, int n_b,
                          int repacked)
{
    const int n_expert = 16, k = 4;
    void *w = make_experts(type, n_in, n_out, n_expert);
    float *b = malloc(sizeof(float) * (size_t)(n_in * n_b * n_tok));
    for (int64_t i = 0; i < n_in * n_b * n_tok; i++)
        b[i] = rnd_f() + rnd_f();
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_tok * k));
    for (int t = 0; t < n_tok; t++)
        for (int j = 0; j < k; j++)
            ids[t * k + j] = pick_expert(t, j, n_expert);
    size_t n_y = (size_t)(n_tok * k) * (size_t)n_out;
    float *y = malloc(sizeof(float) * n_y), *y_one = malloc(sizeof(float) * n_y), *y_ref = malloc(sizeof(float) * n_y);
    struct loom_weight lw = {type, n_in, n_out, loom_type_row_bytes(type, n_in), w, LOOM_WEIGHT_ROWS, 0, !repacked};
    loom_mul_mat_id(pool, &lw, n_expert, b, n_b, ids, k, n_tok, y, 0);
    ggml_mul_mat_id_ref(type, w, n_in, n_out, n_expert, b, n_b, ids, k, n_tok, y_ref, repacked && n_out % 8 == 0);
    int equal = count_equal(y, y_ref, (int64_t)n_y);
    /* rowwise: each token's pairs as if they were the ubatch's only ones */
    loom_mul_mat_id(pool, &lw, n_expert, b, n_b, ids, k, n_tok, y, 1);
    if (repacked)
        check_x16(pool, &lw, n_expert, b, n_b, ids, k, n_tok, y_ref, y);
    int equal_one = 0;
    for (int t = 0; t < n_tok; t++) {
        loom_mul_mat_id(pool, &lw, n_expert, b + (size_t)t * (size_t)(n_in * n_b), n_b, ids + t * k, k, 1, y_one, 0);
        equal_one += count_equal(y + (size_t)t * (size_t)(k * n_out), y_one, k * n_out);
    }
    printf("  %-6s %lldx%lld x%d n_tok %2d %s %-8s %-6s: %d/%zu bitwise equal to MUL_MAT_ID, rowwise %d/%zu equal to "
           "one token\n", loom_type_traits(type)->name, (long long)n_out, (long long)n_in, n_expert, n_tok,
           n_b > 1 ? "down" : "up  ", repacked ? "repacked" : "plain", loom_kernels_name(), equal, n_y, equal_one, n_y);
    /* F32, F16 and BF16 dots sum 8 lanes in the reference's AVX2 build (16 in its AVX-512 builds and in loom);
     * the quantized types' orders are the same in both */
    int float_type = type == LOOM_TYPE_F32 || type == LOOM_TYPE_F16 || type == LOOM_TYPE_BF16;
    if (float_type)
        PARITY_CHECK_BITWISE(equal == (int)n_y, "%s experts n_tok %d (%s, %s): %d of %zu bitwise equal",
                             loom_type_traits(type)->name, n_tok, repacked ? "repacked" : "plain", loom_kernels_name(),
                             equal, n_y);
    else
        CHECK(equal == (int)n_y, "%s experts n_tok %d (%s, %s): %d of %zu bitwise equal", loom_type_traits(type)->name,
              n_tok, repacked ? "repacked" : "plain", loom_kernels_name(), equal, n_y);
    CHECK(equal_one == (int)n_y, "%s experts rowwise n_tok %d (%s): %d of %zu equal to one token",
          loom_type_traits(type)->name, n_tok, loom_kernels_name(), equal_one, n_y);
    free(w);
    free(b);
    free(ids);
    free(y);
    free(y_one);
    free(y_ref);
}

/* The types the reference's CPU_REPACK buffer repacks: Q2_K only in its AVX-512 builds (set_tensor of a Q2_K
 * tensor crashes in its AVX2 build, whose repack has no Q2_K layout). */
static int repackable(uint32_t type)
{
    if (type == LOOM_TYPE_Q2_K)
        return parity_ref_avx512();
    return type == LOOM_TYPE_Q4_K || type == LOOM_TYPE_Q4_0 || type == LOOM_TYPE_IQ4_NL;
}

int main(void)
{
    if (!init_backend()) {
        CHECK(0, "the reference CPU backend must load");
        return test_finish();
    }
    const int ns[] = {8, 16, 60, 128, 256}, ks[] = {2, 4, 8, 8, 8};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int kind = 0; kind < 4; kind++)
            check_router(ns[i], ks[i], kind);

    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    const uint32_t types[] = {LOOM_TYPE_F32,  LOOM_TYPE_F16,  LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,   LOOM_TYPE_Q4_K,
                              LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_0, LOOM_TYPE_Q2_K,   LOOM_TYPE_Q3_K,
                              LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS};
    const int n_toks[] = {1, 5, 12}; /* 12: expert 0 gets 12 rows (the IQ panel's batch), the others 2 to 4 */
    struct loom_pool *pool = loom_pool_new(2);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        loom_error err;
        if (loom_kernels_select(modes[m], &err) != LOOM_OK)
            continue;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            for (size_t t = 0; t < sizeof n_toks / sizeof n_toks[0]; t++)
                for (int rep = 0; rep <= (repackable(types[i]) && repack_buft); rep++) {
                    check_experts(pool, types[i], 512, 64, n_toks[t], 1, rep);
                    check_experts(pool, types[i], 256, 40, n_toks[t], 4, rep); /* down-like: a row per slot */
                    check_experts(pool, types[i], 256, 12, n_toks[t], 4, rep); /* n_out % 8 != 0: not repacked */
                }
    }
    loom_pool_free(pool);
    return test_finish();
}
