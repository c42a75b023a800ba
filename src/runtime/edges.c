/* edges.c — the edge registry of the qwen35 circuits: each edge's name, the layers that have it and its shape
 * from the model's hyper-parameters (loom_model_edges), and the session's edge observer
 * (loom_session_set_observer, loom_edge_emit). The circuits (qwen35.c, ffn.c, session.c) call the observer. */
#include "runtime/edges.h"

#include <stdio.h>

/* Which layers have an edge. */
enum edge_where { BEFORE, EVERY, RECURRENT, ATTENTION, DENSE, EXPERTS, AFTER };

static const struct edge_def {
    const char *name; /* after "blk.N." for a layer's edge */
    enum edge_where where;
    int per_step; /* one row per evaluation step: the state after the step's last token */
    int is_int;
} EDGES[LOOM_EDGE_KIND_COUNT] = {
    [LOOM_EDGE_TOKEN_EMBD] = {"embed", BEFORE, 0, 0},
    [LOOM_EDGE_ATTN_NORM] = {"attn_norm", EVERY, 0, 0},
    [LOOM_EDGE_GDN_QKV] = {"gdn.qkv", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_Z] = {"gdn.z", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_BETA] = {"gdn.beta", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_ALPHA] = {"gdn.alpha", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_CONV] = {"gdn.conv", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_CONV_STATE] = {"gdn.conv_state", RECURRENT, 1, 0},
    [LOOM_EDGE_GDN_BETA_SIGMOID] = {"gdn.beta_sigmoid", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_DECAY] = {"gdn.decay", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_Q] = {"gdn.q", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_K] = {"gdn.k", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_V] = {"gdn.v", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_DELTA] = {"gdn.delta", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_STATE] = {"gdn.state", RECURRENT, 1, 0},
    [LOOM_EDGE_GDN_GATED_NORM] = {"gdn.gated_norm", RECURRENT, 0, 0},
    [LOOM_EDGE_GDN_OUT] = {"gdn.out", RECURRENT, 0, 0},
    [LOOM_EDGE_ATTN_QG] = {"attn.qg", ATTENTION, 0, 0},
    [LOOM_EDGE_ATTN_K] = {"attn.k", ATTENTION, 0, 0},
    [LOOM_EDGE_ATTN_V] = {"attn.v", ATTENTION, 0, 0},
    [LOOM_EDGE_ATTN_Q_ROPE] = {"attn.q_rope", ATTENTION, 0, 0},
    [LOOM_EDGE_ATTN_K_ROPE] = {"attn.k_rope", ATTENTION, 0, 0},
    [LOOM_EDGE_ATTN_GATE] = {"attn.gate", ATTENTION, 0, 0},
    [LOOM_EDGE_ATTN_OUT] = {"attn.out", ATTENTION, 0, 0},
    [LOOM_EDGE_ATTN_RESIDUAL] = {"attn_residual", EVERY, 0, 0},
    [LOOM_EDGE_POST_NORM] = {"post_norm", EVERY, 0, 0},
    [LOOM_EDGE_FFN_GATE] = {"ffn.gate", DENSE, 0, 0},
    [LOOM_EDGE_FFN_UP] = {"ffn.up", DENSE, 0, 0},
    [LOOM_EDGE_FFN_ACT] = {"ffn.act", DENSE, 0, 0},
    [LOOM_EDGE_MOE_LOGITS] = {"moe.logits", EXPERTS, 0, 0},
    [LOOM_EDGE_MOE_PROBS] = {"moe.probs", EXPERTS, 0, 0},
    [LOOM_EDGE_MOE_TOPK] = {"moe.topk", EXPERTS, 0, 1},
    [LOOM_EDGE_MOE_WEIGHTS] = {"moe.weights", EXPERTS, 0, 0},
    [LOOM_EDGE_MOE_EXPERTS] = {"moe.experts", EXPERTS, 0, 0},
    [LOOM_EDGE_SHEXP_GATE_LOGIT] = {"shexp.gate_logit", EXPERTS, 0, 0},
    [LOOM_EDGE_SHEXP_GATE] = {"shexp.gate", EXPERTS, 0, 0},
    [LOOM_EDGE_SHEXP_UP] = {"shexp.up", EXPERTS, 0, 0},
    [LOOM_EDGE_SHEXP_ACT] = {"shexp.act", EXPERTS, 0, 0},
    [LOOM_EDGE_SHEXP_OUT] = {"shexp.out", EXPERTS, 0, 0},
    [LOOM_EDGE_FFN_OUT] = {"ffn.out", EVERY, 0, 0},
    [LOOM_EDGE_LAYER_OUT] = {"out", EVERY, 0, 0},
    [LOOM_EDGE_OUTPUT_NORM] = {"output_norm", AFTER, 0, 0},
    [LOOM_EDGE_LOGITS] = {"logits", AFTER, 0, 0},
};

/* One row's shape of edge kind k, outermost first, into shape[3]; returns the number of dimensions. */
static int edge_shape(const struct loom_model *m, enum loom_edge_kind k, int64_t shape[3])
{
    const struct loom_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, Hv = hp->ssm_n_v_heads, Hk = hp->ssm_n_k_heads, d = hp->ssm_head_dim;
    int64_t ch = (int64_t)m->geo.conv_channels, H = hp->n_head, Hkv = hp->n_head_kv, hd = hp->head_dim_k;
    int64_t hdv = hp->head_dim_v;
#define SHAPE(a, b, c) (shape[0] = (a), shape[1] = (b), shape[2] = (c), (c) != 0 ? 3 : (b) != 0 ? 2 : 1)
    switch (k) {
    case LOOM_EDGE_GDN_QKV:
    case LOOM_EDGE_GDN_CONV: return SHAPE(ch, 0, 0);
    case LOOM_EDGE_GDN_CONV_STATE: return SHAPE(ch, hp->ssm_conv_kernel - 1, 0);
    case LOOM_EDGE_GDN_BETA:
    case LOOM_EDGE_GDN_ALPHA:
    case LOOM_EDGE_GDN_BETA_SIGMOID:
    case LOOM_EDGE_GDN_DECAY: return SHAPE(Hv, 0, 0);
    case LOOM_EDGE_GDN_Q:
    case LOOM_EDGE_GDN_K: return SHAPE(Hk, d, 0);
    case LOOM_EDGE_GDN_Z:
    case LOOM_EDGE_GDN_V:
    case LOOM_EDGE_GDN_DELTA:
    case LOOM_EDGE_GDN_GATED_NORM: return SHAPE(Hv, d, 0);
    case LOOM_EDGE_GDN_STATE: return SHAPE(Hv, d, d);
    case LOOM_EDGE_ATTN_QG: return SHAPE(H, 2 * hd, 0);
    case LOOM_EDGE_ATTN_K:
    case LOOM_EDGE_ATTN_K_ROPE: return SHAPE(Hkv, hd, 0);
    case LOOM_EDGE_ATTN_V: return SHAPE(Hkv, hdv, 0);
    case LOOM_EDGE_ATTN_Q_ROPE: return SHAPE(H, hd, 0);
    case LOOM_EDGE_ATTN_GATE: return SHAPE(H, hdv, 0);
    case LOOM_EDGE_FFN_GATE:
    case LOOM_EDGE_FFN_UP:
    case LOOM_EDGE_FFN_ACT: return SHAPE(hp->n_ff, 0, 0);
    case LOOM_EDGE_MOE_LOGITS:
    case LOOM_EDGE_MOE_PROBS: return SHAPE(hp->n_expert, 0, 0);
    case LOOM_EDGE_MOE_TOPK:
    case LOOM_EDGE_MOE_WEIGHTS: return SHAPE(hp->n_expert_used, 0, 0);
    case LOOM_EDGE_SHEXP_GATE_LOGIT: return SHAPE(1, 0, 0);
    case LOOM_EDGE_SHEXP_GATE:
    case LOOM_EDGE_SHEXP_UP:
    case LOOM_EDGE_SHEXP_ACT: return SHAPE(hp->n_ff_shexp, 0, 0);
    case LOOM_EDGE_LOGITS: return SHAPE(hp->n_vocab, 0, 0);
    default: return SHAPE(E, 0, 0); /* the residual stream's width */
    }
#undef SHAPE
}

/* 1 when layer il (-1: outside the layers, before when !after) has edges of `where`. */
static int layer_has(const struct loom_model *m, int il, int after, enum edge_where where)
{
    if (il < 0)
        return where == (after ? AFTER : BEFORE);
    const struct loom_layer *L = &m->layers[il];
    switch (where) {
    case EVERY: return 1;
    case RECURRENT: return L->kind == LOOM_LAYER_RECURRENT;
    case ATTENTION: return L->kind != LOOM_LAYER_RECURRENT;
    case DENSE: return L->ffn_gate_inp.data == NULL;
    case EXPERTS: return L->ffn_gate_inp.data != NULL;
    default: return 0;
    }
}

/* Append the edges of layer il (before/after the layers when il < 0) to edges[*n..cap). */
static void add_layer(const struct loom_model *m, int il, int after, loom_edge *edges, int cap, int *n)
{
    for (int k = 0; k < LOOM_EDGE_KIND_COUNT; k++) {
        if (!layer_has(m, il, after, EDGES[k].where))
            continue;
        if (edges && *n < cap) {
            loom_edge *e = &edges[*n];
            if (il < 0)
                snprintf(e->name, sizeof e->name, "%s", EDGES[k].name);
            else
                snprintf(e->name, sizeof e->name, "blk.%d.%s", il, EDGES[k].name);
            e->layer = il;
            e->kind = k;
            e->per_step = EDGES[k].per_step;
            e->is_int = EDGES[k].is_int;
            e->n_dims = edge_shape(m, (enum loom_edge_kind)k, e->shape);
            e->width = 1;
            for (int i = 0; i < e->n_dims; i++)
                e->width *= e->shape[i];
        }
        (*n)++;
    }
}

int loom_model_edges(const loom_model *model, loom_edge *edges, int cap)
{
    int n = 0;
    add_layer(model, -1, 0, edges, cap, &n);
    for (uint32_t il = 0; il < model->hp.n_layer; il++)
        add_layer(model, (int)il, 0, edges, cap, &n);
    add_layer(model, -1, 1, edges, cap, &n);
    return n;
}

void loom_session_set_observer(loom_session *session, loom_edge_observer fn, void *ctx)
{
    session->observer = fn;
    session->observer_ctx = ctx;
}

void loom_edge_emit(struct loom_session *s, int layer, enum loom_edge_kind kind, struct loom_edge_rows rows)
{
    int64_t shape[3], width = 1;
    int nd = edge_shape(s->model, kind, shape);
    for (int i = 0; i < nd; i++)
        width *= shape[i];
    loom_edge_event ev = {.layer = layer, .kind = (int)kind, .pos0 = rows.pos0, .n_rows = rows.n_rows,
                          .row_stride = rows.row_stride, .n_seg = rows.n_seg, .seg_len = rows.seg_len,
                          .seg_stride = rows.seg_stride, .data = rows.data};
    if (!rows.n_seg)
        ev.n_seg = 1, ev.seg_len = width, ev.seg_stride = width;
    s->observer(s->observer_ctx, &ev);
}
