/* session.h — what a session owns (internal): the per-layer state owners (conv state and recurrent
 * matrices for Gated DeltaNet layers, the F16 KV cache for attention layers), the position, the thread
 * pool, and the scratch plan allocated once at creation so that evaluation never allocates. */
#ifndef LOOM_RUNTIME_SESSION_H
#define LOOM_RUNTIME_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "loom.h"
#include "model/model.h"

/* Tokens per forward chunk: a longer request runs as consecutive chunks of at most this many tokens, as
 * the reference splits a batch into micro-batches of n_ubatch = 512. */
#define LOOM_CHUNK_TOKENS 512

/* State of one layer; only the fields of its kind are allocated. */
struct loom_layer_state {
    float *conv;   /* recurrent: [channels][conv_kernel - 1], the last inputs of each channel, oldest first */
    float *rec;    /* recurrent: [n_v_heads][d][d], M[h][j][i] = S_h[i][j] (value index j, key index i) */
    uint16_t *k;   /* attention: [n_ctx][n_head_kv][head_dim_k] F16 */
    uint16_t *v;   /* attention: [n_head_kv][head_dim_v][n_ctx] F16 (transposed, as the reference stores V) */
};

/* Scratch for one chunk of up to n_chunk tokens (rows contiguous, sized once from the model geometry). */
struct loom_scratch {
    int n_chunk;
    float *x;       /* [n_chunk][n_embd] residual stream */
    float *xn;      /* [n_chunk][n_embd] normalized input of a branch */
    float *proj;    /* [n_chunk][n_embd] branch output */
    float *a;       /* [n_chunk][wide_a]: qkv (recurrent) | q+gate (attention) | ffn gate */
    float *b;       /* [n_chunk][wide_b]: conv output | K rows | ffn up */
    float *c;       /* [n_chunk][wide_c]: z | V rows */
    float *o;       /* [n_chunk][wide_o]: gated DeltaNet / attention output before the out projection */
    float *alpha;   /* [n_chunk][n_v_heads] */
    float *beta;    /* [n_chunk][n_v_heads] */
    float *rope;    /* [n_chunk][n_rot] cos/sin pairs */
    void *mm;       /* loom_matmul scratch */
    /* per worker thread */
    float *scores;     /* [n_threads][n_ctx] */
    uint16_t *probs16; /* [n_threads][n_ctx] */
    uint16_t *q16;     /* [n_threads][head_dim_k] */
};

struct loom_session {
    const struct loom_model *model;
    const struct loom_ops_kernels *ops; /* per-head kernels of the active kernel set */
    struct loom_pool *pool;
    int n_threads;
    int n_ctx;
    int pos;
    struct loom_layer_state *layers; /* [n_layer] */
    struct loom_scratch sc;
    void *arena; /* one allocation holding state and scratch */
    size_t arena_bytes;
};

/* Run tokens[0..n) (1 <= n <= sc.n_chunk, pos + n <= n_ctx, ids checked by the caller) through the
 * network at positions pos..pos+n-1, updating the state in place. logits: NULL, [n][n_logits] when
 * all is nonzero, or [n_logits] for the last token. Cannot fail. (src/runtime/qwen35.c) */
void loom_qwen35_forward(struct loom_session *s, const int32_t *tokens, int n, float *logits, int all);

#endif
