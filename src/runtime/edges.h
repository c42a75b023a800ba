/* edges.h — the named edges of the qwen35 circuits (internal): every step's output that X-ray and the edge
 * observer see, in circuit order, and the observation call the circuits make at each (a no-op unless a client
 * set an observer with loom_session_set_observer). */
#ifndef LOOM_RUNTIME_EDGES_H
#define LOOM_RUNTIME_EDGES_H

#include "runtime/session.h"

/* The edge kinds in circuit order (loom_edge.kind): the order X-ray's "first divergent edge" uses within a
 * layer. A layer has the edges of its branch (recurrent or attention) and of its FFN (dense or experts). */
enum loom_edge_kind {
    LOOM_EDGE_TOKEN_EMBD,
    LOOM_EDGE_ATTN_NORM,
    LOOM_EDGE_GDN_QKV,
    LOOM_EDGE_GDN_Z,
    LOOM_EDGE_GDN_BETA,
    LOOM_EDGE_GDN_ALPHA,
    LOOM_EDGE_GDN_CONV,
    LOOM_EDGE_GDN_CONV_STATE,
    LOOM_EDGE_GDN_BETA_SIGMOID,
    LOOM_EDGE_GDN_DECAY,
    LOOM_EDGE_GDN_Q,
    LOOM_EDGE_GDN_K,
    LOOM_EDGE_GDN_V,
    LOOM_EDGE_GDN_DELTA,
    LOOM_EDGE_GDN_STATE,
    LOOM_EDGE_GDN_GATED_NORM,
    LOOM_EDGE_GDN_OUT,
    LOOM_EDGE_ATTN_QG,
    LOOM_EDGE_ATTN_K,
    LOOM_EDGE_ATTN_V,
    LOOM_EDGE_ATTN_Q_ROPE,
    LOOM_EDGE_ATTN_K_ROPE,
    LOOM_EDGE_ATTN_GATE,
    LOOM_EDGE_ATTN_OUT,
    LOOM_EDGE_ATTN_RESIDUAL,
    LOOM_EDGE_POST_NORM,
    LOOM_EDGE_FFN_GATE,
    LOOM_EDGE_FFN_UP,
    LOOM_EDGE_FFN_ACT,
    LOOM_EDGE_MOE_LOGITS,
    LOOM_EDGE_MOE_PROBS,
    LOOM_EDGE_MOE_TOPK,
    LOOM_EDGE_MOE_WEIGHTS,
    LOOM_EDGE_MOE_EXPERTS,
    LOOM_EDGE_SHEXP_GATE_LOGIT,
    LOOM_EDGE_SHEXP_GATE,
    LOOM_EDGE_SHEXP_UP,
    LOOM_EDGE_SHEXP_ACT,
    LOOM_EDGE_SHEXP_OUT,
    LOOM_EDGE_FFN_OUT,
    LOOM_EDGE_LAYER_OUT,
    LOOM_EDGE_OUTPUT_NORM,
    LOOM_EDGE_LOGITS,
    LOOM_EDGE_KIND_COUNT
};

/* Report edge `kind` of layer `layer` (-1 outside the layers) to the session's observer (the caller checks
 * that there is one): n_rows rows from data, row t at data + t * row_stride values, row 0 at position pos0;
 * each row n_seg runs of seg_len values seg_stride apart, or (n_seg 0) one run of the edge's width. */
struct loom_edge_rows {
    void *data;
    int n_rows;
    int pos0;
    int64_t row_stride;
    int n_seg;
    int64_t seg_len, seg_stride;
};
void loom_edge_emit(struct loom_session *s, int layer, enum loom_edge_kind kind, struct loom_edge_rows rows);

#endif
