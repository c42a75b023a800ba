/* ffn.h — the FFN step of a layer on a chunk's post-attention-normalized rows: the dense SwiGLU FFN (qwen35)
 * and the mixture-of-experts FFN (qwen35moe) in three steps, the router, the routed experts and the shared
 * expert, which the layer circuit (qwen35.c) runs in that order with its stage hooks between them. */
#ifndef LOOM_RUNTIME_FFN_H
#define LOOM_RUNTIME_FFN_H

#include "kernels/matmul.h"
#include "runtime/session.h"

/* One chunk's FFN: n rows xn[n][n_embd] in, out[n][n_embd] written; act shares xn's activation
 * conversions between the matrices that read it (loom_ffn_init sets it up). */
struct loom_ffn {
    struct loom_session *s;
    const struct loom_layer *L;
    int n;
    const float *xn;
    float *out;
    struct loom_matmul_act act;
    int observe; /* report the FFN's edges to the session's observer (a single-sequence chunk with one) */
    int il, pos0; /* the layer, the chunk's first position (for the observer) */
};

void loom_ffn_init(struct loom_ffn *f, struct loom_session *s, const struct loom_layer *L, int n, const float *xn,
                   float *out);

/* out[t] = ffn_down . (silu(ffn_gate . xn[t]) * (ffn_up . xn[t])) (llama-graph.cpp build_ffn, SILU, PAR). */
void loom_ffn_dense(struct loom_ffn *f);

/* The router: per row the top n_expert_used experts and their weights, then the rows grouped by expert
 * (sc.moe_*). */
void loom_moe_route(struct loom_ffn *f);
/* out[t] = the selected experts' outputs times their weights, added in slot order. LOOM_OK, or (experts
 * streamed from the file) the expert cache's error (LOOM_E_IO: a read failed), with its message in the session's
 * fault. */
int loom_moe_experts(struct loom_ffn *f);
/* out[t] = out[t] + shared expert(xn[t]) * sigmoid(ffn_gate_inp_shexp . xn[t]). */
void loom_moe_shared(struct loom_ffn *f);

#endif
