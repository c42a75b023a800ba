/* qwen35.c — the circuits of the qwen35 family (loom_circuits_qwen35, loom_circuits_qwen35moe): token embedding,
 * then per layer RMSNorm -> (Gated DeltaNet branch | gated full-attention branch, its q/k/v projection three
 * matmuls or one of a fused attn_qkv) -> residual ->
 * post-attention RMSNorm -> FFN (qwen35: SwiGLU MLP; qwen35moe: mixture of experts, runtime/ffn.c) ->
 * residual, then the final RMSNorm and the output head. A chunk of n tokens goes through each layer before the next one
 * (prefill); decode is the same code with n = 1. Follows llama.cpp src/models/qwen35.cpp and
 * delta-net-base.cpp (fused gated-delta-net path), with its rounding points (see kernels/ops.h). The
 * session's numerics pick the float order of matmuls and attention: CANONICAL uses the single-token
 * kernels for every row (chunking-independent), REFERENCE_BATCH the reference's ubatch-dependent ones. */
#include <math.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "runtime/edges.h"
#include "runtime/ffn.h"
#include "runtime/session.h"
#include "util/pool.h"
#include "util/fp16.h"

/* One chunk being evaluated: the session, its model, and where the chunk sits. */
struct chunk {
    struct loom_session *s;
    const struct loom_model *m;
    const struct loom_hparams *hp;
    const struct loom_layer *L;
    int il;   /* layer being evaluated */
    int n;    /* tokens in the chunk */
    int pos0; /* position of the first */
    int src, dst; /* recurrent owners are read from copy src and updated in copy dst */
    const struct loom_row *rows; /* several sequences, one row each (NULL: every row is s's, at pos0 + t) */
};

/* Where row t's state lives: its sequence's layer state, the copy to update and whether it must first be
 * copied from the public one, its position and KV stride. */
struct row_state {
    struct loom_layer_state *ls;
    int src, dst, copy;
    int pos;
    int64_t n_ctx;
};

static struct row_state row_at(const struct chunk *c, int t)
{
    if (!c->rows)
        return (struct row_state){&c->s->layers[c->il], c->src, c->dst, t == 0 && c->src != c->dst, c->pos0 + t,
                                  c->s->n_ctx};
    struct loom_session *s = c->rows[t].s;
    return (struct row_state){&s->layers[c->il], s->cur, s->cur ^ 1, 1, s->pos, s->n_ctx};
}

/* The end of the run of tokens from t0 on that update the same state copy as t0 (r0 = row_at(c, t0)):
 * the kernels may take a run in one call. A token that first copies the public state starts a new run. */
static int run_end(const struct chunk *c, int t0, struct row_state r0)
{
    int t = t0 + 1;
    for (; t < c->n; t++) {
        struct row_state r = row_at(c, t);
        if (r.copy || r.ls != r0.ls || r.dst != r0.dst)
            break;
    }
    return t;
}

/* Tokens per item of the per-token loops run over the pool (each token is ~microseconds of work). */
#define TOKEN_GRAIN 4

static void for_tokens(const struct chunk *c, loom_task_fn fn, void *ctx)
{
    loom_pool_parallel_for(c->s->pool, c->n, TOKEN_GRAIN, fn, ctx);
}

static void matmul_n(const struct loom_session *s, const struct loom_weight *w, const float *x, int n, float *y)
{
    if (s->numerics == LOOM_NUMERICS_CANONICAL)
        loom_matmul_rowwise(s->model->kernels, s->pool, w, x, n, y, s->sc.mm);
    else
        loom_matmul(s->model->kernels, s->pool, w, x, n, y, s->sc.mm);
}

static void matmul(const struct chunk *c, const struct loom_weight *w, const float *x, float *y)
{
    matmul_n(c->s, w, x, c->n, y);
}

/* The chunk's rows x as activations shared by the matrices that read them (converted once per type). */
static struct loom_matmul_act shared_rows(const struct chunk *c, const float *x)
{
    return (struct loom_matmul_act){x, c->n, LOOM_TYPE_COUNT, c->s->sc.mm};
}

static void matmul_shared(const struct chunk *c, const struct loom_weight *w, struct loom_matmul_act *act, float *y)
{
    loom_matmul_shared(c->s->model->kernels, c->s->pool, w, act, y, c->s->numerics == LOOM_NUMERICS_CANONICAL);
}

/* matmul_shared for n matrices reading the same rows, in one pass over the pool. */
static void matmul_shared_n(const struct chunk *c, int n, const struct loom_weight *const *w,
                            struct loom_matmul_act *act, float *const *y)
{
    loom_matmul_shared_n(c->s->model->kernels, c->s->pool, n, w, act, y, c->s->numerics == LOOM_NUMERICS_CANONICAL);
}

/* The test hook after a stage; nonzero fails the request. */
static int stage(const struct chunk *c, const char *name)
{
    struct loom_session *s = c->s;
    if (!s->hook)
        return 0;
    return s->hook(s->hook_ctx, c->il, name, s->sc.x, (int64_t)c->n * c->hp->n_embd);
}

/* Edge `kind` of the current layer for the edge observer: the chunk's rows at data, row_stride values apart
 * (single-sequence chunks only: a multi-sequence step's rows belong to several sessions). */
static void edge(const struct chunk *c, enum loom_edge_kind kind, void *data, int64_t row_stride)
{
    if (c->s->observer && !c->rows)
        loom_edge_emit(c->s, c->il, kind, (struct loom_edge_rows){data, c->n, c->pos0, row_stride, 0, 0, 0});
}

/* A per-step edge: the state data after the chunk's last token. */
static void edge_state(const struct chunk *c, enum loom_edge_kind kind, void *data)
{
    if (c->s->observer && !c->rows)
        loom_edge_emit(c->s, c->il, kind, (struct loom_edge_rows){data, 1, c->pos0 + c->n - 1, 0, 0, 0, 0});
}

#define STAGE(c, name)                                                                                             \
    do {                                                                                                           \
        int stage_rc_ = stage(c, name);                                                                            \
        if (stage_rc_)                                                                                             \
            return stage_rc_;                                                                                      \
    } while (0)

/* Rows of width E, one token per item: out[t] = rmsnorm(in[t]) * w, or out[t] = in[t] + out[t] (the
 * residual add, in the reference's operand order). */
struct rows_job {
    const struct loom_ops_kernels *ops;
    int64_t E;
    float eps;
    const float *in;
    const float *w;
    float *out;
};

static void norm_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct rows_job *j = ctx;
    j->ops->rmsnorm_rows(end - begin, j->E, j->in + begin * j->E, j->E, j->w, j->eps, j->out + begin * j->E, j->E);
}

static void add_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct rows_job *j = ctx;
    for (int64_t i = begin * j->E; i < end * j->E; i++)
        j->out[i] = j->in[i] + j->out[i];
}

/* y[t] = rmsnorm(x[t]) * w for each row t of width n_embd. */
static void norm_rows(const struct chunk *c, const float *x, const float *w, float *y)
{
    struct rows_job j = {c->s->ops, c->hp->n_embd, c->hp->rms_eps, x, w, y};
    for_tokens(c, norm_task, &j);
}

/* x[t] = y[t] + x[t] for each row t of width n_embd. */
static void add_rows(const struct chunk *c, float *x, const float *y)
{
    struct rows_job j = {c->s->ops, c->hp->n_embd, 0.0f, y, NULL, x};
    for_tokens(c, add_task, &j);
}

/* ---- Gated DeltaNet branch ------------------------------------------------------------------------ */

/* Causal conv1d of channels [begin, end); each channel walks the chunk's tokens in order, on the private copy
 * of its conv state (first copied from the public one when the request starts), a run of tokens sharing
 * a state per kernel call. Channels are independent: any split gives the same results. */
static void conv_channels(const struct chunk *c, int64_t begin, int64_t end)
{
    int64_t ch = (int64_t)c->m->geo.conv_channels;
    int K = (int)c->hp->ssm_conv_kernel;
    for (int t = 0; t < c->n;) {
        struct row_state r = row_at(c, t);
        int t1 = run_end(c, t, r);
        float *state = r.ls->conv[r.dst] + begin * (K - 1);
        if (r.copy)
            memcpy(state, r.ls->conv[r.src] + begin * (K - 1), (size_t)(end - begin) * (size_t)(K - 1) * sizeof(float));
        c->s->ops->conv1d_chunk(end - begin, K, t1 - t, state, c->L->conv1d + begin * K, c->s->sc.a + t * ch + begin,
                                ch, c->s->sc.b + t * ch + begin, ch);
        t = t1;
    }
}

static void conv_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    conv_channels(ctx, begin, end);
}

/* Token t's gates of value head h: beta = sigmoid(beta), g = softplus(alpha + dt_bias) * A. */
static void head_gates(const struct chunk *c, int64_t t, int64_t h)
{
    const struct loom_scratch *sc = &c->s->sc;
    int64_t Hv = c->hp->ssm_n_v_heads;
    float *b = sc->beta + t * Hv + h, *g = sc->alpha + t * Hv + h;
    *b = loom_ops_sigmoid(*b);
    *g = loom_ops_softplus(*g + c->L->dt_bias[h]) * c->L->ssm_a[h];
}

/* Per token, before the delta rule: the gates of every value head; the conv output through SiLU, then q and
 * k L2-normalized per key head. */
static void qk_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct chunk *c = ctx;
    const struct loom_hparams *hp = c->hp;
    const struct loom_scratch *sc = &c->s->sc;
    int64_t ch = (int64_t)c->m->geo.conv_channels, d = hp->ssm_head_dim, Hv = hp->ssm_n_v_heads;
    int64_t Hk = hp->ssm_n_k_heads;
    for (int64_t t = begin; t < end; t++) {
        for (int64_t h = 0; h < Hv; h++)
            head_gates(c, t, h);
        float *row = sc->b + t * ch; /* q heads, then k heads, then v */
        c->s->ops->silu(ch, row, row);
        c->s->ops->l2norm_rows(2 * Hk, d, row, d, hp->rms_eps, row, d);
    }
}

/* Gated delta rule of value head h: token after token through the head's state, a run of tokens sharing a
 * state per kernel call. Value head h reads key head h % n_k_heads (tiled, as the reference's fused op). */
static void delta_head(const struct chunk *c, int64_t h)
{
    const struct loom_hparams *hp = c->hp;
    const struct loom_scratch *sc = &c->s->sc;
    int d = (int)hp->ssm_head_dim;
    int64_t ch = (int64_t)c->m->geo.conv_channels, key_dim = (int64_t)hp->ssm_n_k_heads * d, Hv = hp->ssm_n_v_heads;
    int64_t kh = h % hp->ssm_n_k_heads;
    for (int t = 0; t < c->n;) {
        struct row_state r = row_at(c, t);
        int t1 = run_end(c, t, r);
        float *M = r.ls->rec[r.dst] + h * d * d;
        const float *M_src = r.copy ? r.ls->rec[r.src] + h * d * d : M; /* read there, written to M */
        const float *row = sc->b + t * ch;
        c->s->ops->delta_rule_chunk(d, t1 - t, M_src, M, row + kh * d, row + key_dim + kh * d, row + 2 * key_dim + h * d,
                                    ch, sc->alpha + t * Hv + h, sc->beta + t * Hv + h, Hv,
                                    sc->o + (int64_t)t * hp->ssm_inner + h * d, hp->ssm_inner);
        t = t1;
    }
}

static void delta_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    for (int64_t h = begin; h < end; h++)
        delta_head(ctx, h);
}

/* Token t's gated RMSNorm of value head h's output row: rmsnorm(o) * ssm_norm * silu(z). */
static void gated_norm_head(const struct chunk *c, int64_t t, int64_t h)
{
    const struct loom_hparams *hp = c->hp;
    const struct loom_scratch *sc = &c->s->sc;
    int64_t d = hp->ssm_head_dim, inner = hp->ssm_inner;
    float *o = sc->o + t * inner + h * d, *z = sc->c + t * inner + h * d;
    c->s->ops->rmsnorm_rows(1, d, o, d, c->L->ssm_norm, hp->rms_eps, o, d);
    c->s->ops->silu(d, z, z);
    for (int64_t j = 0; j < d; j++)
        o[j] *= z[j];
}

/* Gated RMSNorm per token: rmsnorm(o) * ssm_norm * silu(z), per head row of d. */
static void gated_norm_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct chunk *c = ctx;
    for (int64_t t = begin; t < end; t++)
        for (int64_t h = 0; h < c->hp->ssm_n_v_heads; h++)
            gated_norm_head(c, t, h);
}

/* The steps from conv to gated norm for key head kh and the value heads that read it (kh, kh + n_k_heads, ...)
 * in one pass: its q, k and v channels through the conv, then per token the heads' gates, SiLU and the q/k
 * L2 norm, then the delta rule, then the gated norm. Each value is computed by the same kernel calls as in the
 * step-by-step path (SiLU on whole 16-lane blocks: d % 16 == 0), so the results are the same bits. */
static void gdn_heads_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct chunk *c = ctx;
    const struct loom_hparams *hp = c->hp;
    const struct loom_ops_kernels *ops = c->s->ops;
    int64_t ch = (int64_t)c->m->geo.conv_channels, d = hp->ssm_head_dim, Hv = hp->ssm_n_v_heads;
    int64_t Hk = hp->ssm_n_k_heads, key_dim = Hk * d;
    for (int64_t kh = begin; kh < end; kh++) {
        conv_channels(c, kh * d, (kh + 1) * d);
        conv_channels(c, key_dim + kh * d, key_dim + (kh + 1) * d);
        for (int64_t h = kh; h < Hv; h += Hk)
            conv_channels(c, 2 * key_dim + h * d, 2 * key_dim + (h + 1) * d);
        for (int64_t t = 0; t < c->n; t++) {
            float *row = c->s->sc.b + t * ch;
            for (int64_t h = kh; h < Hv; h += Hk) {
                head_gates(c, t, h);
                ops->silu(d, row + 2 * key_dim + h * d, row + 2 * key_dim + h * d);
            }
            for (int64_t part = 0; part < 2; part++) { /* q, then k */
                float *x = row + part * key_dim + kh * d;
                ops->silu(d, x, x);
                ops->l2norm_rows(1, d, x, d, hp->rms_eps, x, d);
            }
        }
        for (int64_t h = kh; h < Hv; h += Hk)
            delta_head(c, h);
        for (int64_t t = 0; t < c->n; t++)
            for (int64_t h = kh; h < Hv; h += Hk)
                gated_norm_head(c, t, h);
    }
}

/* The branch's output projection of the gated rows. */
static int gated_tail(struct chunk *c)
{
    struct loom_scratch *sc = &c->s->sc;
    matmul(c, &c->L->ssm_out, sc->o, sc->proj);
    edge(c, LOOM_EDGE_GDN_OUT, sc->proj, c->hp->n_embd);
    STAGE(c, "out");
    return 0;
}

static int recurrent_branch(struct chunk *c)
{
    const struct loom_hparams *hp = c->hp;
    const struct loom_layer *L = c->L;
    struct loom_scratch *sc = &c->s->sc;
    struct loom_matmul_act xn = shared_rows(c, sc->xn);
    const struct loom_weight *w[] = {&L->qkv, &L->z, &L->beta, &L->alpha};
    float *y[] = {sc->a, sc->c, sc->beta, sc->alpha};
    matmul_shared_n(c, 4, w, &xn, y);
    int64_t ch = (int64_t)c->m->geo.conv_channels, Hv = hp->ssm_n_v_heads, inner = hp->ssm_inner;
    int64_t key_dim = (int64_t)hp->ssm_n_k_heads * hp->ssm_head_dim;
    edge(c, LOOM_EDGE_GDN_QKV, sc->a, ch);
    edge(c, LOOM_EDGE_GDN_Z, sc->c, inner);
    edge(c, LOOM_EDGE_GDN_BETA, sc->beta, Hv);
    edge(c, LOOM_EDGE_GDN_ALPHA, sc->alpha, Hv);
    STAGE(c, "proj");
    if (c->n <= TOKEN_GRAIN && !c->s->observer && !c->s->hook && hp->ssm_head_dim % 16 == 0) {
        /* decode: one pass over the pool (the per-token steps would run on one thread) */
        loom_pool_parallel_for(c->s->pool, hp->ssm_n_k_heads, 1, gdn_heads_task, c);
        return gated_tail(c);
    }
    loom_pool_parallel_for(c->s->pool, ch, 64, conv_task, c);
    edge(c, LOOM_EDGE_GDN_CONV, sc->b, ch);
    edge_state(c, LOOM_EDGE_GDN_CONV_STATE, c->s->layers[c->il].conv[c->dst]);
    STAGE(c, "conv");
    for_tokens(c, qk_task, c);
    edge(c, LOOM_EDGE_GDN_BETA_SIGMOID, sc->beta, Hv);
    edge(c, LOOM_EDGE_GDN_DECAY, sc->alpha, Hv);
    edge(c, LOOM_EDGE_GDN_Q, sc->b, ch);
    edge(c, LOOM_EDGE_GDN_K, sc->b + key_dim, ch);
    edge(c, LOOM_EDGE_GDN_V, sc->b + 2 * key_dim, ch);
    loom_pool_parallel_for(c->s->pool, Hv, 1, delta_task, c);
    edge(c, LOOM_EDGE_GDN_DELTA, sc->o, inner);
    edge_state(c, LOOM_EDGE_GDN_STATE, c->s->layers[c->il].rec[c->dst]);
    STAGE(c, "delta");
    for_tokens(c, gated_norm_task, c);
    edge(c, LOOM_EDGE_GDN_GATED_NORM, sc->o, inner);
    STAGE(c, "gated_norm");
    return gated_tail(c);
}

/* ---- gated attention branch ----------------------------------------------------------------------- */

/* The query rows attn_task takes together (they share one KV cache, which the kernel then reads once for all
 * of them): in prefill LOOM_OPS_ATTN_GROUP consecutive tokens of one sequence times the heads of one KV head
 * (grouped-query attention; as many as fit in LOOM_OPS_ATTN_ROWS, dividing them evenly); in decode (and a chunk of
 * several sequences' rows) one token and LOOM_OPS_ATTN_GROUP heads of the same KV head; one row when neither
 * fits. The kernel's result per row does not depend on the grouping. */
struct attn_plan {
    int tokens, heads; /* rows per item: tokens x heads */
};

static struct attn_plan attn_plan(const struct chunk *c)
{
    int G = LOOM_OPS_ATTN_GROUP, per_kv = (int)(c->hp->n_head / c->hp->n_head_kv);
    if (!c->rows && c->n >= G) {
        int heads = per_kv; /* the most heads of one KV head that fit, dividing its heads evenly */
        while (G * heads > LOOM_OPS_ATTN_ROWS || per_kv % heads)
            heads--;
        return (struct attn_plan){G, heads};
    }
    return per_kv % G == 0 ? (struct attn_plan){1, G} : (struct attn_plan){1, 1};
}

/* Work items of the plan: the chunk's token groups times the head groups. */
static int64_t attn_items(const struct chunk *c, struct attn_plan p)
{
    return (int64_t)((c->n + p.tokens - 1) / p.tokens) * (c->hp->n_head / p.heads);
}

/* Bytes of one head's K row in a Q8_0 K cache (head_dim / 32 blocks), 0 for an F16 one. */
static int64_t k_q8_row(const struct loom_session *s)
{
    return s->k_type == LOOM_KV_Q8_0
               ? (int64_t)s->model->hp.head_dim_k / LOOM_QK8_0 * (int64_t)sizeof(struct loom_block_q8_0)
               : 0;
}

/* The row x[hd] (a RoPEd query or K row) as a Q8_0 K cache takes it into dst: rotated first, in a copy at tmp,
 * where the reference rotates (session k_rot, loom_ops_fwht), then quantized by from_float. */
static void q8_row_from(const struct loom_session *s, loom_from_float_fn from_float, const float *x, float *tmp,
                        void *dst, int64_t hd)
{
    if (s->k_rot) {
        memcpy(tmp, x, (size_t)hd * sizeof(float));
        for (int64_t i = 0; i < hd; i += s->k_rot)
            loom_ops_fwht(s->k_rot, tmp + i);
        x = tmp;
    }
    from_float(x, dst, hd);
}

/* One item of the plan per index: causal attention over positions 0..pos of each row's token, times the
 * output gate. */
static void attn_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct chunk *c = ctx;
    const struct loom_hparams *hp = c->hp;
    const struct loom_scratch *sc = &c->s->sc;
    int hd = (int)hp->head_dim_k, hdv = (int)hp->head_dim_v, H = (int)hp->n_head, Hkv = (int)hp->n_head_kv;
    int64_t n_ctx = c->s->n_ctx; /* the scratch's stride (the largest context of the chunk's sequences) */
    struct attn_plan p = attn_plan(c);
    int head_groups = H / p.heads;
    uint16_t *q16 = sc->q16 + (int64_t)thread * LOOM_OPS_ATTN_ROWS * hd;
    float *scores = sc->scores + (int64_t)thread * LOOM_OPS_ATTN_ROWS * n_ctx;
    uint16_t *probs16 = sc->probs16 + (int64_t)thread * LOOM_OPS_ATTN_ROWS * n_ctx;
    float *out = sc->attn_out + (int64_t)thread * LOOM_OPS_ATTN_ROWS * hdv;
    enum loom_attn_order order = c->n > 1 && c->s->numerics == LOOM_NUMERICS_REFERENCE_BATCH
                                     ? LOOM_ATTN_ORDER_BATCH
                                     : LOOM_ATTN_ORDER_SINGLE;
    float scale = 1.0f / sqrtf((float)hdv);
    int64_t q8_row = k_q8_row(c->s); /* 0: F16 K cache */
    loom_from_float_fn q8_from_float = c->s->model->kernels->types[LOOM_TYPE_Q8_0].from_float;
    for (int64_t item = begin; item < end; item++) {
        int t0 = (int)(item / head_groups) * p.tokens, h0 = (int)(item % head_groups) * p.heads;
        int n_t = c->n - t0 < p.tokens ? c->n - t0 : p.tokens, n_q = n_t * p.heads;
        int64_t n_kv[LOOM_OPS_ATTN_ROWS];
        /* row g: token t0 + g % n_t of head h0 + g / n_t; its query and gate rows follow each other */
        const float *qg[LOOM_OPS_ATTN_ROWS];
        float *og[LOOM_OPS_ATTN_ROWS];
        for (int g = 0; g < n_q; g++) {
            int t = t0 + g % n_t, h = h0 + g / n_t;
            qg[g] = sc->a + (int64_t)t * 2 * H * hd + (int64_t)h * 2 * hd;
            og[g] = sc->o + (int64_t)t * H * hdv + (int64_t)h * hdv;
            if (q8_row)
                q8_row_from(c->s, q8_from_float, qg[g], sc->qrot + (int64_t)thread * hd, (char *)q16 + g * q8_row, hd);
            else
                for (int i = 0; i < hd; i++)
                    q16[g * hd + i] = loom_f32_to_f16(qg[g][i]);
            n_kv[g] = row_at(c, t).pos + 1;
        }
        struct row_state r = row_at(c, t0);
        int kvh = h0 / (H / Hkv);
        if (q8_row) /* Q8_0 K cache: the query rows in Q8_0, each KV head's K rows q8_row bytes apart */
            c->s->ops->attn_heads_q8(n_q, n_kv, hd, q16, (const char *)r.ls->k + kvh * r.n_ctx * q8_row, q8_row,
                                     r.ls->v + (int64_t)kvh * hdv * r.n_ctx, r.n_ctx, hdv, scale, order, scores,
                                     probs16, n_ctx, out, hdv);
        else
            c->s->ops->attn_heads(n_q, n_kv, hd, q16, r.ls->k + kvh * r.n_ctx * hd, hd,
                                  r.ls->v + (int64_t)kvh * hdv * r.n_ctx, r.n_ctx, hdv, scale, order, scores, probs16,
                                  n_ctx, out, hdv);
        /* output gate: attn * sigmoid(gate), the gate row following each query row */
        for (int g = 0; g < n_q; g++)
            for (int j = 0; j < hdv; j++)
                og[g][j] = out[g * hdv + j] * loom_ops_sigmoid(qg[g][hd + j]);
    }
}

/* Per token: q/k RMSNorm, partial NEOX RoPE, and the token's K/V rows appended to the cache (K in F16, or
 * for a Q8_0 K cache each head's RoPEd row, rotated where the reference rotates it, quantized as its set_rows
 * does, from_float of Q8_0). */
static void prepare_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct chunk *c = ctx;
    const struct loom_hparams *hp = c->hp;
    const struct loom_layer *L = c->L;
    const struct loom_scratch *sc = &c->s->sc;
    int64_t hd = hp->head_dim_k, hdv = hp->head_dim_v, H = hp->n_head, Hkv = hp->n_head_kv;
    int n_rot = (int)hp->n_rot;
    int64_t q8_row = k_q8_row(c->s); /* 0: F16 K cache */
    loom_from_float_fn q8_from_float = c->s->model->kernels->types[LOOM_TYPE_Q8_0].from_float;
    for (int t = (int)begin; t < end; t++) {
        float *cache = sc->rope + (int64_t)t * n_rot;
        struct row_state r = row_at(c, t);
        loom_ops_rope_cache(r.pos, n_rot, hp->rope_freq_base, cache);
        float *qt = sc->a + t * 2 * H * hd, *kt = sc->b + t * Hkv * hd; /* query rows interleaved with gates */
        c->s->ops->rmsnorm_rows(H, hd, qt, 2 * hd, L->q_norm, hp->rms_eps, qt, 2 * hd);
        c->s->ops->rmsnorm_rows(Hkv, hd, kt, hd, L->k_norm, hp->rms_eps, kt, hd);
        for (int64_t h = 0; h < H; h++)
            loom_ops_rope_neox(qt + h * 2 * hd, n_rot, cache);
        int64_t p = r.pos, n_ctx = r.n_ctx;
        for (int64_t h = 0; h < Hkv; h++) {
            float *k = kt + h * hd;
            const float *v = sc->c + t * Hkv * hdv + h * hdv;
            loom_ops_rope_neox(k, n_rot, cache);
            if (q8_row) {
                char *kc = (char *)r.ls->k + (h * n_ctx + p) * q8_row;
                q8_row_from(c->s, q8_from_float, k, sc->qrot + (int64_t)thread * hd, kc, hd);
            } else {
                uint16_t *kc = r.ls->k + (h * n_ctx + p) * hd;
                for (int64_t i = 0; i < hd; i++)
                    kc[i] = loom_f32_to_f16(k[i]);
            }
            uint16_t *vc = r.ls->v + h * hdv * n_ctx + p;
            for (int64_t j = 0; j < hdv; j++)
                vc[j * n_ctx] = loom_f32_to_f16(v[j]);
        }
    }
}

/* The fused projection's output (attn_qkv: per token its query+gate rows, then K, then V, in o) copied to where
 * the three projections put theirs (a, b, c), one token per item: the reference's Q, K and V views of its one
 * matmul, made contiguous (llama-graph.cpp build_qkv, fused path). */
static void split_qkv_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct chunk *c = ctx;
    const struct loom_hparams *hp = c->hp;
    const struct loom_scratch *sc = &c->s->sc;
    int64_t qg = 2 * (int64_t)hp->n_head * hp->head_dim_k, k = (int64_t)hp->n_head_kv * hp->head_dim_k;
    int64_t v = (int64_t)hp->n_head_kv * hp->head_dim_v, row = qg + k + v;
    for (int64_t t = begin; t < end; t++) {
        const float *src = sc->o + t * row;
        memcpy(sc->a + t * qg, src, (size_t)qg * sizeof(float));
        memcpy(sc->b + t * k, src + qg, (size_t)k * sizeof(float));
        memcpy(sc->c + t * v, src + qg + k, (size_t)v * sizeof(float));
    }
}

/* The query+gate, K and V projections of the chunk's normed rows into a, b and c: three matmuls, or one of the
 * fused matrix (its float order the reference's for the fused shape) into o, whose rows are then split. */
static void attention_projections(struct chunk *c)
{
    const struct loom_layer *L = c->L;
    struct loom_scratch *sc = &c->s->sc;
    struct loom_matmul_act xn = shared_rows(c, sc->xn);
    if (L->wqkv.data) {
        matmul_shared(c, &L->wqkv, &xn, sc->o);
        for_tokens(c, split_qkv_task, c);
        return;
    }
    const struct loom_weight *w[] = {&L->wq, &L->wk, &L->wv};
    float *y[] = {sc->a, sc->b, sc->c};
    matmul_shared_n(c, 3, w, &xn, y);
}

static int attention_branch(struct chunk *c)
{
    const struct loom_layer *L = c->L;
    struct loom_scratch *sc = &c->s->sc;
    attention_projections(c);
    const struct loom_hparams *hp = c->hp;
    int64_t H = hp->n_head, hd = hp->head_dim_k, kv = (int64_t)hp->n_head_kv * hd;
    edge(c, LOOM_EDGE_ATTN_QG, sc->a, 2 * H * hd);
    edge(c, LOOM_EDGE_ATTN_K, sc->b, kv);
    edge(c, LOOM_EDGE_ATTN_V, sc->c, (int64_t)hp->n_head_kv * hp->head_dim_v);
    STAGE(c, "proj");
    for_tokens(c, prepare_task, c);
    if (c->s->observer && !c->rows) /* the query rows, each head's followed by its gate */
        loom_edge_emit(c->s, c->il, LOOM_EDGE_ATTN_Q_ROPE,
                       (struct loom_edge_rows){sc->a, c->n, c->pos0, 2 * H * hd, (int)H, hd, 2 * hd});
    edge(c, LOOM_EDGE_ATTN_K_ROPE, sc->b, kv);
    STAGE(c, "kv_write");
    loom_pool_parallel_for(c->s->pool, attn_items(c, attn_plan(c)), 1, attn_task, c);
    STAGE(c, "attend");
    edge(c, LOOM_EDGE_ATTN_GATE, sc->o, H * hp->head_dim_v); /* attn_task applied the output gate */
    STAGE(c, "gate");
    matmul(c, &L->wo, sc->o, sc->proj);
    edge(c, LOOM_EDGE_ATTN_OUT, sc->proj, hp->n_embd);
    STAGE(c, "out");
    return 0;
}

/* ---- the FFN step and the whole network ---------------------------------------------------------- */

/* The dense SwiGLU MLP (qwen35). */
static int ffn_dense(struct chunk *c, struct loom_ffn *f)
{
    loom_ffn_dense(f);
    edge(c, LOOM_EDGE_FFN_OUT, f->out, c->hp->n_embd);
    STAGE(c, "mlp");
    return 0;
}

/* The mixture-of-experts FFN (qwen35moe): router, routed experts, shared expert. */
static int ffn_moe(struct chunk *c, struct loom_ffn *f)
{
    loom_moe_route(f);
    STAGE(c, "route");
    int rc = loom_moe_experts(f);
    if (rc)
        return rc;
    edge(c, LOOM_EDGE_MOE_EXPERTS, f->out, c->hp->n_embd);
    STAGE(c, "experts");
    loom_moe_shared(f);
    edge(c, LOOM_EDGE_FFN_OUT, f->out, c->hp->n_embd);
    STAGE(c, "shared");
    return 0;
}

static int layer_forward(struct chunk *c, uint32_t il)
{
    struct loom_scratch *sc = &c->s->sc;
    c->il = (int)il;
    c->L = &c->m->layers[il];
    int64_t E = c->hp->n_embd;
    norm_rows(c, sc->x, c->L->attn_norm, sc->xn);
    edge(c, LOOM_EDGE_ATTN_NORM, sc->xn, E);
    STAGE(c, "norm");
    int rc = c->L->kind == LOOM_LAYER_RECURRENT ? recurrent_branch(c) : attention_branch(c);
    if (rc)
        return rc;
    add_rows(c, sc->x, sc->proj);
    edge(c, LOOM_EDGE_ATTN_RESIDUAL, sc->x, E);
    STAGE(c, "residual");
    norm_rows(c, sc->x, c->L->post_norm, sc->xn);
    edge(c, LOOM_EDGE_POST_NORM, sc->xn, E);
    STAGE(c, "post_norm");
    struct loom_ffn f;
    loom_ffn_init(&f, c->s, c->L, c->n, sc->xn, sc->proj);
    f.observe = c->s->observer && !c->rows, f.il = c->il, f.pos0 = c->pos0;
    rc = c->L->ffn_gate_inp.data ? ffn_moe(c, &f) : ffn_dense(c, &f); /* a router: the mixture of experts */
    if (rc)
        return rc;
    add_rows(c, sc->x, sc->proj);
    edge(c, LOOM_EDGE_LAYER_OUT, sc->x, E);
    STAGE(c, "residual2");
    return 0;
}

/* The chunk's token embeddings into the residual stream, one token per item. */
struct embed_job {
    const struct chunk *c;
    const int32_t *tokens;
};

static void embed_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct embed_job *j = ctx;
    int64_t E = j->c->hp->n_embd;
    for (int64_t t = begin; t < end; t++)
        loom_weight_get_row(&j->c->m->tok_embd, j->tokens[t], j->c->s->sc.x + t * E);
}

/* Nonzero when the request is to stop: the session's abort callback asks (in a multi-sequence step, any row's). */
static int cancelled(const struct chunk *c)
{
    if (!c->rows)
        return c->s->abort && c->s->abort(c->s->abort_ctx);
    for (int t = 0; t < c->n; t++) {
        const struct loom_session *s = c->rows[t].s;
        if (s->abort && s->abort(s->abort_ctx))
            return 1;
    }
    return 0;
}

static int forward(struct chunk c, const int32_t *tokens)
{
    struct embed_job ej = {&c, tokens};
    for_tokens(&c, embed_task, &ej);
    edge(&c, LOOM_EDGE_TOKEN_EMBD, c.s->sc.x, c.hp->n_embd);
    STAGE(&c, "embed");
    for (uint32_t il = 0; il < c.hp->n_layer; il++) {
        if (cancelled(&c))
            return LOOM_E_CANCELLED;
        int rc = layer_forward(&c, il);
        if (rc)
            return rc;
    }
    return cancelled(&c) ? LOOM_E_CANCELLED : 0;
}

static void output_norm(const struct loom_session *s, const float *x, int n, float *rows)
{
    struct rows_job j = {s->ops, s->model->hp.n_embd, s->model->hp.rms_eps, x, s->model->output_norm, rows};
    loom_pool_parallel_for(s->pool, n, TOKEN_GRAIN, norm_task, &j);
}

static void head(struct loom_session *s, const float *rows, int n, float *out)
{
    matmul_n(s, &s->model->output, rows, n, out);
}

static int forward_chunk(struct loom_session *s, const int32_t *tokens, int n, int pos0, int src, int dst)
{
    struct chunk c = {.s = s, .m = s->model, .hp = &s->model->hp, .il = -1, .n = n, .pos0 = pos0, .src = src,
                      .dst = dst};
    return forward(c, tokens);
}

static int forward_rows(struct loom_session *lead, const int32_t *tokens, int n, const struct loom_row *rows)
{
    struct chunk c = {.s = lead, .m = lead->model, .hp = &lead->model->hp, .il = -1, .n = n, .rows = rows};
    return forward(c, tokens);
}

const struct loom_circuits loom_circuits_qwen35 = {
    .arch = &loom_arch_qwen35,
    .forward = forward_chunk,
    .forward_rows = forward_rows,
    .output_norm = output_norm,
    .head = head,
};

/* qwen35moe (llama.cpp src/models/qwen35moe.cpp): the same circuits; its layers have a router, so their FFN
 * step is the mixture of experts. */
const struct loom_circuits loom_circuits_qwen35moe = {
    .arch = &loom_arch_qwen35moe,
    .forward = forward_chunk,
    .forward_rows = forward_rows,
    .output_norm = output_norm,
    .head = head,
};
