/* ffn.c — the FFN step of a layer (ffn.h): the dense SwiGLU FFN and the mixture-of-experts FFN of
 * qwen35moe. Follows llama.cpp's CPU graph op by op, with its rounding points:
 *
 * qwen35moe.cpp build_layer_ffn: moe_out = build_moe_ffn(x, ffn_gate_inp, up/gate/down_exps (or the fused
 * gate_up_exps), SILU, norm_w = true, scale = expert_weights_scale (not read for this architecture: 0, no
 * scale), SOFTMAX gating); shexp = build_ffn(x, up/gate/down_shexp, SILU, PAR); g = sigmoid(
 * ffn_gate_inp_shexp . x) (a MUL_MAT with one output row: vec_dot); out = moe_out + shexp * g.
 *
 * llama-graph.cpp build_moe_ffn, per token of the ubatch:
 *   logits = ffn_gate_inp . x   a MUL_MAT like any weight (F32 in the quantized files: tinyBLAS for a
 *                               batch, vec_dot for one row; loom_matmul's kernel choice)
 *   probs = soft_max(logits); ids = argsort_top_k(probs, k); w = get_rows(probs, ids);
 *   w = w / clamp(sum_rows(w), 6.103515625e-5, INF)       (loom_ops_moe_route: ops.h names each op)
 *   gate|up = MUL_MAT_ID(exps, x, ids)  [n_ff, k, n_tok] (fused: one MUL_MAT_ID, gate and up as the two
 *             halves of each row: ggml_view_3d at offset 0 and n_ff)
 *   h = swiglu_split(gate, up)          (ops.cpp ggml_compute_forward_swiglu_f32: ggml_vec_swiglu_f32 per row)
 *   d = MUL_MAT_ID(down_exps, h, ids)   [n_embd, k, n_tok]: slot j of token t reads row h[t][j]
 *   d = d * w                           (binary mul, w broadcast along n_embd)
 *   moe_out = ((d[0] + d[1]) + d[2]) + ...  views of d added in slot order (k == 1: ggml_cont of d[0])
 * MUL_MAT_ID on the CPU backend (ggml-cpu.c ggml_compute_forward_mul_mat_id): src1 converted to the
 * weight's vec_dot_type row by row; the ubatch's (token, slot) pairs grouped by expert (tokens in order, slots
 * in order: loom_ops_moe_group); expert after expert, every output one dot of a weight row with a pair's
 * row by vec_dot (never tinyBLAS, llamafile is not called for MUL_MAT_ID); experts in the CPU_REPACK
 * buffer (repack.cpp forward_mul_mat_id: Q4_0, Q4_K, IQ4_NL, MXFP4, Q2_K on AVX-512 with n_out % 8 == 0) by
 * gemv for every pair, never gemm; experts of the IQ panel types (IQ4_XS, IQ1_S, IQ1_M and the IQ2/IQ3 grid
 * types) with 8 pairs or more by the IQ panel (iqp.cpp). So a pair's outputs depend on the ubatch only for
 * those types (loom_matmul_dot_id). The CPU backend fuses none of these ops (ggml-cpu.c ggml_cpu_try_fuse_ops:
 * only RMS_NORM + MUL).
 *
 * loom groups a chunk's pairs as MUL_MAT_ID does and gathers each pair's converted activation row next to
 * the others of its expert, so that each expert reads its weights once for all its rows (loom_matmul_experts)
 * and decode reads only the selected experts. CANONICAL numerics multiply every pair in its one-row order
 * (rowwise), so a token's result does not depend on the chunk it is in. */
#include "runtime/ffn.h"

#include <string.h>

#include "kernels/ops.h"
#include "model/expert_cache.h"
#include "model/model.h"
#include "runtime/edges.h"
#include "util/pool.h"

_Static_assert(LOOM_MAX_EXPERTS <= LOOM_OPS_MAX_EXPERTS, "the router's sort buffer holds every expert");

/* Rows per item of the per-row loops run over the pool (each row is ~microseconds of work). */
#define ROW_GRAIN 4

static int rowwise(const struct loom_ffn *f) { return f->s->numerics == LOOM_NUMERICS_CANONICAL; }

static const struct loom_kernel_set *kset(const struct loom_ffn *f) { return f->s->model->kernels; }

void loom_ffn_init(struct loom_ffn *f, struct loom_session *s, const struct loom_layer *L, int n, const float *xn,
                   float *out)
{
    *f = (struct loom_ffn){.s = s, .L = L, .n = n, .xn = xn, .out = out, .act = {xn, n, LOOM_TYPE_COUNT, s->sc.mm}};
}

/* Edge `kind` of the FFN's layer for the session's observer: the chunk's rows at data, row_stride apart. */
static void edge(const struct loom_ffn *f, enum loom_edge_kind kind, void *data, int64_t row_stride)
{
    if (f->observe)
        loom_edge_emit(f->s, f->il, kind, (struct loom_edge_rows){data, f->n, f->pos0, row_stride, 0, 0, 0});
}

/* y[n][w->n_out] = w . xn rows (conversions shared through f->act). */
static void matmul_xn(struct loom_ffn *f, const struct loom_weight *w, float *y)
{
    loom_matmul_shared(kset(f), f->s->pool, w, &f->act, y, rowwise(f));
}

/* y[n][w->n_out] = w . x rows (x converted into the session's matmul scratch). */
static void matmul_rows(struct loom_ffn *f, const struct loom_weight *w, const float *x, float *y)
{
    struct loom_matmul_act act = {x, f->n, LOOM_TYPE_COUNT, f->s->sc.mm};
    loom_matmul_shared(kset(f), f->s->pool, w, &act, y, rowwise(f));
}

/* ---- SwiGLU rows ---------------------------------------------------------------------------------- */

/* Row r (< n rows) of width n_ff: y[r] = silu(g[r]) * u[r], rows at g + r * stride, u + r * stride, y + r *
 * y_stride. */
struct swiglu_job {
    const struct loom_ops_kernels *ops;
    int64_t n_ff, stride, y_stride;
    const float *g, *u;
    float *y;
};

static void swiglu_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct swiglu_job *j = ctx;
    for (int64_t r = begin; r < end; r++)
        j->ops->swiglu(j->n_ff, j->g + r * j->stride, j->u + r * j->stride, j->y + r * j->y_stride);
}

static void swiglu_rows(struct loom_ffn *f, int64_t n_rows, struct swiglu_job j)
{
    j.ops = f->s->ops;
    loom_pool_parallel_for(f->s->pool, n_rows, ROW_GRAIN, swiglu_task, &j);
}

/* out = down . (silu(gate . xn) * (up . xn)), the gate and up rows in sc.a and sc.b (build_ffn, PAR); their
 * edges are kinds edge_gate, the next (up) and the one after (the SwiGLU output). */
static void swiglu_ffn(struct loom_ffn *f, const struct loom_weight *gate, const struct loom_weight *up,
                       const struct loom_weight *down, float *out, enum loom_edge_kind edge_gate)
{
    struct loom_scratch *sc = &f->s->sc;
    int64_t n_ff = gate->n_out;
    const struct loom_weight *w[] = {gate, up};
    float *y[] = {sc->a, sc->b};
    loom_matmul_shared_n(kset(f), f->s->pool, 2, w, &f->act, y, rowwise(f)); /* one pass over the pool */
    edge(f, edge_gate, sc->a, n_ff);
    edge(f, edge_gate + 1, sc->b, n_ff);
    swiglu_rows(f, f->n, (struct swiglu_job){.n_ff = n_ff, .stride = n_ff, .y_stride = n_ff, .g = sc->a, .u = sc->b,
                                             .y = sc->a});
    edge(f, edge_gate + 2, sc->a, n_ff);
    matmul_rows(f, down, sc->a, out);
}

void loom_ffn_dense(struct loom_ffn *f)
{
    swiglu_ffn(f, &f->L->ffn_gate, &f->L->ffn_up, &f->L->ffn_down, f->out, LOOM_EDGE_FFN_GATE);
}

/* ---- router --------------------------------------------------------------------------------------- */

static void route_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct loom_ffn *f = ctx;
    const struct loom_hparams *hp = &f->s->model->hp;
    const struct loom_scratch *sc = &f->s->sc;
    int E = (int)hp->n_expert, k = (int)hp->n_expert_used;
    for (int64_t t = begin; t < end; t++)
        loom_ops_moe_route(f->s->ops->router_softmax, E, k, sc->moe_route + t * E, sc->moe_ids + t * k,
                           sc->moe_weights + t * k);
}

void loom_moe_route(struct loom_ffn *f)
{
    const struct loom_hparams *hp = &f->s->model->hp;
    struct loom_scratch *sc = &f->s->sc;
    int64_t E = hp->n_expert, k = hp->n_expert_used;
    matmul_xn(f, &f->L->ffn_gate_inp, sc->moe_route);
    edge(f, LOOM_EDGE_MOE_LOGITS, sc->moe_route, E);
    loom_pool_parallel_for(f->s->pool, f->n, ROW_GRAIN, route_task, f);
    edge(f, LOOM_EDGE_MOE_PROBS, sc->moe_route, E);
    edge(f, LOOM_EDGE_MOE_TOPK, sc->moe_ids, k);
    edge(f, LOOM_EDGE_MOE_WEIGHTS, sc->moe_weights, k);
    loom_ops_moe_group(f->n, (int)hp->n_expert_used, (int)hp->n_expert, sc->moe_ids, sc->moe_start, sc->moe_perm,
                       sc->moe_pos);
}

/* ---- routed experts ------------------------------------------------------------------------------- */

/* Grouped row p's activation: row perm[p] / k of src (bytes each) copied to dst + p * bytes. */
struct gather_job {
    const char *src;
    char *dst;
    size_t bytes;
    const int32_t *perm;
    int k;
};

static void gather_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct gather_job *j = ctx;
    for (int64_t p = begin; p < end; p++)
        memcpy(j->dst + (size_t)p * j->bytes, j->src + (size_t)(j->perm[p] / j->k) * j->bytes, j->bytes);
}

/* The grouped rows' activations in x's vec_dot_type in sc.moe_rows (each pair's token's xn row, gathered
 * unless *gathered says they are there already); returns the bytes per row. */
static size_t gather_xn(struct loom_ffn *f, const struct loom_experts *x, uint32_t *gathered)
{
    const struct loom_hparams *hp = &f->s->model->hp;
    struct loom_scratch *sc = &f->s->sc;
    const void *rows;
    size_t bytes = loom_matmul_act_rows(kset(f), f->s->pool, &x->w, &f->act, &rows);
    int64_t n_pairs = (int64_t)f->n * hp->n_expert_used;
    uint32_t vt = loom_type_traits(x->w.type)->vec_dot_type;
    if (*gathered != vt) {
        struct gather_job g = {rows, sc->moe_rows, bytes, sc->moe_perm, (int)hp->n_expert_used};
        loom_pool_parallel_for(f->s->pool, n_pairs, 64, gather_task, &g);
        *gathered = vt;
    }
    return bytes;
}

/* y[p] = experts x . (the token of grouped row p)'s xn row, for every grouped row p, as MUL_MAT_ID. The
 * gathered rows (sc.moe_rows) are kept for the next reader of the same vec_dot_type (*gathered). */
static void experts_xn(struct loom_ffn *f, const struct loom_experts *x, uint32_t *gathered, float *y)
{
    size_t bytes = gather_xn(f, x, gathered);
    loom_matmul_experts(kset(f), f->s->pool, &x->w, x->expert_bytes, (int)f->s->model->hp.n_expert,
                        f->s->sc.moe_start, f->s->sc.moe_rows, bytes, y, rowwise(f));
}

/* Per token: out[t] = sum over slots j in order of d[pos[t * k + j]] * w[t][j] (d: the down outputs, in
 * sc.moe_down when the experts are streamed, else in sc.moe_rows). */
static void combine_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct loom_ffn *f = ctx;
    const struct loom_scratch *sc = &f->s->sc;
    int64_t E = f->s->model->hp.n_embd, k = f->s->model->hp.n_expert_used;
    const float *d = f->s->model->experts ? sc->moe_down : (const float *)sc->moe_rows;
    for (int64_t t = begin; t < end; t++) {
        float *o = f->out + t * E;
        for (int64_t j = 0; j < k; j++) {
            const float *dj = d + (int64_t)sc->moe_pos[t * k + j] * E;
            float w = sc->moe_weights[t * k + j];
            for (int64_t i = 0; i < E; i++)
                o[i] = j == 0 ? dj[i] * w : o[i] + dj[i] * w;
        }
    }
}

/* ---- routed experts streamed from the file (loom_model_params.mem_budget) --------------------------- */

/* Expert r's rows, each step as the resident path computes it for them: gate and up (or gate_up) outputs
 * into sc.moe_gu, SwiGLU into sc.moe_h, those rows in down's vec_dot_type into sc.moe_hq, down's outputs
 * into sc.moe_down, all at the expert's grouped rows. */
static void streamed_expert(struct loom_ffn *f, const struct loom_expert_ready *r, size_t act_bytes)
{
    struct loom_scratch *sc = &f->s->sc;
    int64_t n_pairs = (int64_t)f->n * f->s->model->hp.n_expert_used, n_ff = f->s->model->hp.n_ff_exp;
    int64_t r0 = sc->moe_start[r->expert], n = sc->moe_start[r->expert + 1] - r0;
    const char *act = (const char *)sc->moe_rows + (size_t)r0 * act_bytes;
    struct swiglu_job sj = {.n_ff = n_ff, .y_stride = n_ff, .y = sc->moe_h + r0 * n_ff};
    if (r->n_mats == 2) { /* fused gate_up, down */
        sj.g = sc->moe_gu + r0 * 2 * n_ff, sj.u = sj.g + n_ff, sj.stride = 2 * n_ff;
        loom_matmul_expert(kset(f), f->s->pool, &r->mats[0], n, act, act_bytes, sc->moe_gu + r0 * 2 * n_ff,
                           rowwise(f));
    } else {
        sj.g = sc->moe_gu + r0 * n_ff, sj.u = sc->moe_gu + (n_pairs + r0) * n_ff, sj.stride = n_ff;
        loom_matmul_expert(kset(f), f->s->pool, &r->mats[0], n, act, act_bytes, sc->moe_gu + r0 * n_ff,
                           rowwise(f));
        loom_matmul_expert(kset(f), f->s->pool, &r->mats[1], n, act, act_bytes,
                           sc->moe_gu + (n_pairs + r0) * n_ff, rowwise(f));
    }
    swiglu_rows(f, n, sj);
    const struct loom_weight *down = &r->mats[r->n_mats - 1];
    size_t hq_bytes = loom_type_row_bytes(loom_type_traits(down->type)->vec_dot_type, n_ff);
    struct loom_matmul_act h = {sc->moe_h + r0 * n_ff, n, LOOM_TYPE_COUNT, (char *)sc->moe_hq + (size_t)r0 * hq_bytes};
    const void *rows;
    size_t bytes = loom_matmul_act_rows(kset(f), f->s->pool, down, &h, &rows);
    loom_matmul_expert(kset(f), f->s->pool, down, n, rows, bytes, sc->moe_down + r0 * f->s->model->hp.n_embd,
                       rowwise(f));
}

/* A prefill-sized step: its tokens route more pairs than half the layer's experts, so it reads nearly all of them
 * (the expert cache treats it as a scan; nothing is predicted for it). */
static int scan_sized(const struct loom_ffn *f)
{
    return 2 * (int64_t)f->n * f->s->model->hp.n_expert_used > (int64_t)f->s->model->hp.n_expert;
}

/* P1: the next layer's router applied to this layer's FFN input predicts the next layer's experts; in steps of
 * a few tokens (decode), their reads start now, behind this step's own. The prediction only chooses what to
 * read ahead: no result depends on it. */
static void predict_next(struct loom_ffn *f, uint32_t il)
{
    const struct loom_model *m = f->s->model;
    int E = (int)m->hp.n_expert, k = (int)m->hp.n_expert_used;
    if (il + 1 >= m->hp.n_layer || !m->layers[il + 1].ffn_gate_inp.data || scan_sized(f) ||
        !loom_expert_cache_prefetching(m->experts))
        return;
    float *logits = f->s->sc.moe_route; /* free again once this layer is routed */
    matmul_xn(f, &m->layers[il + 1].ffn_gate_inp, logits);
    int32_t ids[LOOM_MAX_EXPERTS], top[LOOM_MAX_EXPERTS];
    float w[LOOM_MAX_EXPERTS];
    uint8_t seen[LOOM_MAX_EXPERTS] = {0};
    int n = 0;
    for (int t = 0; t < f->n; t++) {
        loom_ops_moe_route(f->s->ops->router_softmax, E, k, logits + (int64_t)t * E, top, w);
        for (int j = 0; j < k; j++)
            if (!seen[top[j]])
                seen[top[j]] = 1, ids[n++] = top[j];
    }
    loom_expert_cache_prefetch(m->experts, il + 1, ids, n);
}

/* The routed experts through the model's expert cache: each computed as soon as its bytes are in (held ones
 * first), every row as the resident path computes it, so the sum (combine_task, in slot order) is bitwise the
 * resident one. A failed read fails the step: LOOM_E_IO with the message in s->fault. */
static int moe_experts_streamed(struct loom_ffn *f)
{
    const struct loom_layer *L = f->L;
    struct loom_session *s = f->s;
    const struct loom_scratch *sc = &s->sc;
    uint32_t gathered = LOOM_TYPE_COUNT;
    size_t bytes = gather_xn(f, L->ffn_gate_up_exps.n_expert ? &L->ffn_gate_up_exps : &L->ffn_gate_exps, &gathered);
    int32_t ids[LOOM_MAX_EXPERTS];
    int n = 0;
    for (int32_t e = 0; e < (int32_t)s->model->hp.n_expert; e++)
        if (sc->moe_start[e + 1] > sc->moe_start[e])
            ids[n++] = e;
    struct loom_expert_cache *c = s->model->experts;
    uint32_t il = (uint32_t)(L - s->model->layers);
    loom_expert_cache_begin(c, il, ids, n, scan_sized(f));
    predict_next(f, il);
    struct loom_expert_ready r;
    int rc;
    while ((rc = loom_expert_cache_next(c, &r, &s->fault)) > 0) {
        streamed_expert(f, &r, bytes);
        loom_expert_cache_done(c, r.expert);
    }
    loom_expert_cache_end(c);
    if (rc < 0)
        return rc;
    loom_pool_parallel_for(s->pool, f->n, ROW_GRAIN, combine_task, f);
    return LOOM_OK;
}

int loom_moe_experts(struct loom_ffn *f)
{
    if (f->s->model->experts)
        return moe_experts_streamed(f);
    const struct loom_layer *L = f->L;
    struct loom_scratch *sc = &f->s->sc;
    int64_t n_pairs = (int64_t)f->n * f->s->model->hp.n_expert_used, n_ff = f->s->model->hp.n_ff_exp;
    uint32_t gathered = LOOM_TYPE_COUNT;
    struct swiglu_job sj = {.n_ff = n_ff, .y_stride = n_ff, .g = sc->moe_gu, .y = sc->moe_h};
    if (L->ffn_gate_up_exps.n_expert) { /* fused: each row's n_ff gate outputs, then its n_ff up outputs */
        experts_xn(f, &L->ffn_gate_up_exps, &gathered, sc->moe_gu);
        sj.stride = 2 * n_ff, sj.u = sc->moe_gu + n_ff;
    } else {
        experts_xn(f, &L->ffn_gate_exps, &gathered, sc->moe_gu);
        experts_xn(f, &L->ffn_up_exps, &gathered, sc->moe_gu + n_pairs * n_ff);
        sj.stride = n_ff, sj.u = sc->moe_gu + n_pairs * n_ff;
    }
    swiglu_rows(f, n_pairs, sj);
    const struct loom_experts *down = &L->ffn_down_exps;
    struct loom_matmul_act h = {sc->moe_h, n_pairs, LOOM_TYPE_COUNT, sc->moe_hq};
    const void *rows;
    size_t bytes = loom_matmul_act_rows(kset(f), f->s->pool, &down->w, &h, &rows);
    loom_matmul_experts(kset(f), f->s->pool, &down->w, down->expert_bytes, (int)f->s->model->hp.n_expert,
                        sc->moe_start, rows, bytes, (float *)sc->moe_rows, rowwise(f));
    loom_pool_parallel_for(f->s->pool, f->n, ROW_GRAIN, combine_task, f);
    return LOOM_OK;
}

/* ---- shared expert -------------------------------------------------------------------------------- */

static void shared_add_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct loom_ffn *f = ctx;
    const struct loom_scratch *sc = &f->s->sc;
    int64_t E = f->s->model->hp.n_embd;
    for (int64_t t = begin; t < end; t++) {
        float g = loom_ops_sigmoid(sc->moe_gate[t]);
        for (int64_t i = 0; i < E; i++)
            f->out[t * E + i] = f->out[t * E + i] + sc->moe_shared[t * E + i] * g;
    }
}

void loom_moe_shared(struct loom_ffn *f)
{
    const struct loom_layer *L = f->L;
    struct loom_scratch *sc = &f->s->sc;
    matmul_xn(f, &L->ffn_gate_inp_shexp, sc->moe_gate);
    edge(f, LOOM_EDGE_SHEXP_GATE_LOGIT, sc->moe_gate, 1);
    swiglu_ffn(f, &L->ffn_gate_shexp, &L->ffn_up_shexp, &L->ffn_down_shexp, sc->moe_shared, LOOM_EDGE_SHEXP_GATE);
    edge(f, LOOM_EDGE_SHEXP_OUT, sc->moe_shared, f->s->model->hp.n_embd);
    loom_pool_parallel_for(f->s->pool, f->n, ROW_GRAIN, shared_add_task, f);
}
