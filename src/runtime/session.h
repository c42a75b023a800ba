/* session.h — what a session owns (internal): the per-layer state owners (conv state and recurrent
 * matrices for Gated DeltaNet layers, the F16 KV cache for attention layers), the frontier position, the
 * last logits, the thread pool, and the scratch plan allocated once at creation so that evaluation never
 * allocates. Public state changes only by publishing a whole request (see loom_session_eval). */
#ifndef LOOM_RUNTIME_SESSION_H
#define LOOM_RUNTIME_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "loom.h"
#include "model/model.h"

/* Tokens per forward chunk in REFERENCE_BATCH numerics unless the session asks for another n_ubatch: a
 * longer request runs as consecutive chunks of at most this many tokens, as the reference splits one
 * llama_decode batch into micro-batches of n_ubatch (default 512). */
#define LOOM_CHUNK_TOKENS 512
/* Tokens per chunk in CANONICAL numerics, where chunking does not change a bit: smaller chunks keep the
 * per-chunk scratch (activations of every row) small at the same prefill speed. */
#define LOOM_CHUNK_TOKENS_CANONICAL 128

/* Appended to the errors of a step whose hidden state or logits are not finite: the usual cause is a weight
 * that holds inf or NaN, which loom_model_params.check_tensors finds at load. */
#define LOOM_NONFINITE_HINT                                                                                   \
    " (inf or NaN in the weights? loading with check_tensors, `--check-tensors`, names the tensor)"

/* State of one layer: the owners its kind keeps (model/arch.h), the others NULL. The fixed-size owners
 * (conv, recurrent) are double buffered: copy [cur] (struct loom_session) is public, the other is the private copy a request works
 * on; publishing flips cur. K/V rows at positions >= pos are private (never read as public state), so a
 * request writes its rows in place. */
struct loom_layer_state {
    float *conv[2]; /* recurrent: [channels][conv_kernel - 1], the last inputs of each channel, oldest first */
    float *rec[2];  /* recurrent: [n_v_heads][d][d], M[h][j][i] = S_h[i][j] (value index j, key index i) */
    uint16_t *k;    /* attention: [n_head_kv][n_ctx][head_dim_k] F16, or for a Q8_0 K cache (session k_type)
                     * [n_head_kv][n_ctx][head_dim_k / 32] struct loom_block_q8_0 (bytes, read through a cast):
                     * each KV head's rows one contiguous stream (with the heads interleaved per position, as
                     * the reference stores K, decode's scores at 16k positions ran at half the speed) */
    uint16_t *v;    /* attention: [n_head_kv][head_dim_v][n_ctx] F16 (transposed, as the reference stores V) */
};

/* One persistent state owner of a sequence (src/runtime/state.c), made from the architecture's owner list
 * of the layer's kind and the model's geometry. Shapes are outermost first; for K/V the position axis
 * (pos_axis) is the one that grows, and bytes counts n_ctx positions. */
struct loom_state_owner {
    int layer;
    enum loom_owner_kind kind;
    const char *name;        /* "conv", "recurrent", "k", "v" */
    uint32_t dtype;          /* LOOM_TYPE_F32 or LOOM_TYPE_F16 */
    int64_t shape[3];        /* conv [channels][K-1][1]; recurrent [heads][d][d]; k [heads][n_ctx][dim];
                              * v [heads][dim][n_ctx] */
    uint64_t bytes;          /* whole owner */
    uint64_t bytes_per_pos;  /* K/V: bytes one position adds; 0 for fixed-size owners */
    int pos_axis;            /* K/V: the index of the n_ctx axis in shape; -1 for fixed-size owners */
};

/* Fill owners[0..cap) with the state owners of model m's layers at context n_ctx, in layer order (owners
 * may be NULL to count them); returns how many there are. */
int loom_state_owners_list(const struct loom_model *m, int64_t n_ctx, enum loom_kv_type k_type,
                           struct loom_state_owner *owners, int cap);
/* Fill owners[0..cap) with the session's state owners in layer order; returns how many there are. */
int loom_session_state_owners(const struct loom_session *s, struct loom_state_owner *owners, int cap);
/* The buffer of owner o in s: copy `copy` of a fixed-size owner, the one buffer of a K/V owner. */
void *loom_owner_data(const struct loom_session *s, const struct loom_state_owner *o, int copy);
/* Visit the bytes of positions [lo, hi) of K/V owner o as runs of contiguous bytes, in storage order. */
void loom_owner_runs(const struct loom_session *s, const struct loom_state_owner *o, int lo, int hi,
                     void (*fn)(void *ctx, void *at, size_t bytes), void *ctx);

/* Test hook, called after every stage of a request (layer -1 outside the layers; stage names are the
 * step just finished: "alloc" before the staging buffer grows or the K/V rows a rewind rewrites are kept
 * aside, "embed", per layer "norm", "proj", "conv",
 * "delta", "gated_norm", "kv_write", "attend", "gate", "out", "residual", "post_norm", "mlp" (dense) or
 * "route", "experts", "shared" (mixture of experts), "residual2",
 * then "output_norm", "logits"). x is the chunk's residual stream [n_values] which the hook may overwrite
 * (e.g. with NaN). A nonzero return fails the request with that code (at "alloc": as a failed allocation). */
typedef int (*loom_stage_hook_fn)(void *ctx, int layer, const char *stage, float *x, int64_t n_values);

/* A checkpoint: the recurrent owners (every recurrent layer's conv state then recurrent matrices, in layer
 * order) at position pos; K/V rows below pos are in the cache. (src/runtime/checkpoint.c) */
#define LOOM_MAX_CHECKPOINTS 64
struct loom_checkpoint {
    int pos;
    uint64_t seq; /* creation order, for eviction */
    float *data;  /* geo.recurrent_state_bytes */
};

/* Copy the K/V rows of positions [lo, hi) of every attention layer to buf (to_state 0) or buf to them (1);
 * buf holds (hi - lo) * geo.kv_bytes_per_token bytes. (src/runtime/state.c) */
void loom_session_copy_kv_rows(struct loom_session *s, int lo, int hi, uint16_t *buf, int to_state);
/* Set recurrent owner copy `copy` to the empty state (zeros). */
void loom_session_clear_recurrent(struct loom_session *s, int copy);
/* Run tokens[0..n) (checked by the caller, pos0 + n <= n_ctx) as one request starting at position pos0 <=
 * s->pos from recurrent copy src (s->cur, or the private copy cur ^ 1 holding a restored checkpoint) and
 * publish it: position pos0 + n, the history, the logits (LOGITS_ALL rows into logits when all), the
 * checkpoints past pos0 dropped. On any error the session is as it was: the public recurrent copy is never
 * written, and the public K/V rows of [pos0, s->pos) the request overwrites are saved first and put back.
 * (src/runtime/session.c) */
int loom_session_request(struct loom_session *s, int pos0, int src, const int32_t *tokens, int n, float *logits,
                         int all, loom_error *err);
/* Copy recurrent owner copy `copy` (s->cur: the public one) to buf (to_state 0) or buf to it (to_state 1). */
void loom_session_copy_recurrent(struct loom_session *s, int copy, float *buf, int to_state);
/* Snapshot the private recurrent copy of a running request at position pos (s->pending), to become a
 * checkpoint if the request publishes. Best effort (skipped when the buffer cannot be allocated). */
void loom_session_snapshot_work(struct loom_session *s, int pos);
/* After a published request of n tokens: the automatic checkpoints (the pending snapshot, the prompt end
 * when prompt_checkpoints, checkpoint_every). */
void loom_session_auto_checkpoint(struct loom_session *s, int n_tokens);
/* Drop every checkpoint past pos (their history is about to change); all when pos < 0. */
void loom_session_drop_checkpoints(struct loom_session *s, int pos);

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
    /* mixture of experts (qwen35moe; none in a dense model): k = n_expert_used, pairs = n_chunk * k */
    float *moe_route;    /* [n_chunk][n_expert] router logits, then probabilities */
    int32_t *moe_ids;    /* [n_chunk][k] the selected experts, best first */
    float *moe_weights;  /* [n_chunk][k] their normalized weights */
    int32_t *moe_start;  /* [n_expert + 1] each expert's grouped rows */
    int32_t *moe_perm;   /* [pairs] token * k + slot of each grouped row */
    int32_t *moe_pos;    /* [pairs] grouped row of each token * k + slot */
    void *moe_rows;      /* [pairs][n_embd] floats: the grouped rows' activations (any vec_dot_type), then
                          * their down outputs */
    float *moe_gu;       /* [pairs][2 * n_ff_exp] gate and up outputs */
    float *moe_h;        /* [pairs][n_ff_exp] SwiGLU outputs */
    void *moe_hq;        /* [pairs][n_ff_exp] floats: the same rows in down's vec_dot_type */
    float *moe_down;     /* [pairs][n_embd] the down outputs of streamed experts (NULL when resident: they go
                          * to moe_rows, whose gathered rows streamed experts still read) */
    float *moe_shared;   /* [n_chunk][n_embd] the shared expert's output */
    float *moe_gate;     /* [n_chunk] the shared expert's gate logit */
    struct loom_row *rows; /* [n_chunk] rows of a multi-sequence step */
    /* per worker thread */
    float *scores;     /* [n_threads][LOOM_OPS_ATTN_ROWS][n_ctx] */
    uint16_t *probs16; /* [n_threads][LOOM_OPS_ATTN_ROWS][n_ctx] */
    uint16_t *q16;     /* [n_threads][LOOM_OPS_ATTN_ROWS][head_dim_k]; a Q8_0 K cache's query rows in
                        * Q8_0 blocks (head_dim_k / 32 * 34 bytes each) use the same room */
    float *attn_out;   /* [n_threads][LOOM_OPS_ATTN_ROWS][head_dim_v] one item's rows before the output gate */
    float *qrot;       /* [n_threads][head_dim_k] a Q or K row being rotated (Q8_0 K cache, session k_rot) */
};

struct loom_circuits;

struct loom_session {
    const struct loom_model *model;
    const struct loom_circuits *circuits; /* the model architecture's circuits */
    const struct loom_ops_kernels *ops; /* per-head kernels of the model's kernel set */
    struct loom_pool *pool;
    int n_threads;
    int n_ctx;
    enum loom_numerics numerics;
    enum loom_kv_type k_type;    /* K cache element type (V is F16) */
    uint64_t kv_bytes_per_token; /* K and V rows of every attention layer at one position, in this cache */
    int k_rot;                   /* Q8_0 K: the Hadamard rotation's size the reference applies to Q and K rows
                                  * (loom_ops_fwht over each k_rot values), 0 = none */
    int n_logits;
    /* public state: the frontier, the recurrent owners [cur], K/V rows below pos, the last logits */
    int pos;
    int cur;
    int has_logits;
    float *logits;      /* [n_logits] last logits (public) */
    float *logits_work; /* [n_logits] the request's last logits before publishing */
    struct loom_layer_state *layers; /* [n_layer] */
    struct loom_state_owner *owners; /* [n_owners]: every layer's state owners, in layer order */
    int n_owners;
    struct loom_scratch sc;
    float *stage;       /* [stage_rows][n_embd] final normalized rows of a LOGITS_ALL request */
    int64_t stage_rows;
    int32_t *history;   /* [n_ctx] token at each position < pos */
    struct loom_checkpoint *ckpt; /* [LOOM_MAX_CHECKPOINTS] */
    int n_ckpt;
    int checkpoint_every;
    uint64_t checkpoint_budget;
    int prompt_checkpoints; /* keep a checkpoint at each prompt's end (not skip_prompt_checkpoints) */
    float *pending;     /* snapshot of the private recurrent copy before a prompt's last token */
    int pending_pos;    /* its position, or -1 */
    loom_stage_hook_fn hook; /* tests only; NULL in normal use */
    void *hook_ctx;
    loom_edge_observer observer; /* loom_session_set_observer; NULL = none */
    void *observer_ctx;
    loom_abort_fn abort;     /* loom_session_set_abort; NULL = never cancelled */
    void *abort_ctx;
    loom_error fault;        /* why a chunk's step failed in the expert cache (a read), for its error; code 0 else */
    void *arena; /* one allocation holding state and scratch */
    size_t arena_bytes;
    uint64_t reserved; /* bytes reserved in the model's memory budget (arena and checkpoint budget), or 0 */
};

/* One row of a multi-sequence step: the sequence whose next token (at its position) the row is. */
struct loom_row {
    struct loom_session *s;
};

/* An architecture's circuits (the runtime half of the architecture interface, model/arch.h). */
struct loom_circuits {
    const struct loom_arch *arch;
    /* One chunk of a request: tokens[0..n) at positions pos0..pos0+n-1 (1 <= n <= sc.n_chunk, pos0 + n <=
     * n_ctx, ids checked by the caller). Reads the recurrent owners from copy `src` and leaves the updated
     * ones in copy `dst` (src may equal dst), writes K/V rows at pos0.. in place, leaves the final residual
     * rows in sc.x. Returns LOOM_OK, the code a stage hook returned, or LOOM_E_CANCELLED when the abort
     * callback, polled before each layer and after the last, asked to stop. */
    int (*forward)(struct loom_session *s, const int32_t *tokens, int n, int pos0, int src, int dst);
    /* One decode step for n sequences at once (src/runtime/batch.c checks them): row t is the next token of
     * rows[t].s at its position, read from its public recurrent copy and written to the other; lead
     * provides the scratch, pool and hook and has the largest context; every row's abort callback is
     * polled. */
    int (*forward_rows)(struct loom_session *lead, const int32_t *tokens, int n, const struct loom_row *rows);
    /* rows[n][n_embd] = output RMSNorm of x[n][n_embd]. */
    void (*output_norm)(const struct loom_session *s, const float *x, int n, float *rows);
    /* out[n][n_logits] = output head of rows[n][n_embd] (already output-normalized), n <= sc.n_chunk, in the
     * session's numerics order for a chunk of n rows. */
    void (*head)(struct loom_session *s, const float *rows, int n, float *out);
};

/* The instances (src/runtime/qwen35.c) and the one for an architecture (NULL when loom has none). */
extern const struct loom_circuits loom_circuits_qwen35, loom_circuits_qwen35moe;
const struct loom_circuits *loom_circuits_find(const struct loom_arch *arch);

#endif
