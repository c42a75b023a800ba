/* loom.h — the public C API of loom, an LLM inference engine for GGUF models on CPU.
 * Two opaque handles: loom_model (immutable after load, shareable across sessions) and
 * loom_session (one sequence's mutable state: conv/recurrent state, KV cache, position). */
#ifndef LOOM_H
#define LOOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Every fallible function returns LOOM_OK (0) or a negative code, and fills a
 * loom_error (when non-NULL) with a message that names the field, what was expected, what was found. */
enum {
    LOOM_OK = 0,
    LOOM_E_IO = -1,       /* open/read/mmap/write failed */
    LOOM_E_FORMAT = -2,   /* malformed file or unsupported content */
    LOOM_E_NOMEM = -3,    /* allocation failed */
    LOOM_E_ARG = -4,      /* invalid argument from the caller */
    LOOM_E_RANGE = -5,    /* request exceeds a limit (context length, buffer size) */
    LOOM_E_INTERNAL = -6, /* broken invariant inside loom */
    LOOM_E_CANCELLED = -7, /* stopped because the caller's abort callback (loom_abort_fn) asked */
};

typedef struct loom_error {
    int code;
    char msg[512];
} loom_error;

typedef struct loom_model loom_model;
typedef struct loom_session loom_session;

/* Cancellation of long operations (a session's requests, synthesis, quantization): fn(ctx) is polled between
 * steps and returns nonzero to stop; the operation then returns LOOM_E_CANCELLED and leaves what any failure of
 * it leaves (a request publishes nothing, a file writer leaves no file). Polled from the thread that started the
 * operation, often (every layer of a request), so it must be cheap and must not call into loom: reading a flag
 * that a signal handler sets is the intended use. */
typedef int (*loom_abort_fn)(void *ctx);

/* Kernel selection: AUTO picks the widest SIMD the CPU has; SCALAR forces the reference kernels. */
enum loom_kernel_mode { LOOM_KERNELS_AUTO = 0, LOOM_KERNELS_SCALAR = 1, LOOM_KERNELS_AVX2 = 2, LOOM_KERNELS_AVX512 = 3 };

/* Choose the kernel set process-wide (call before loading models). Returns LOOM_E_ARG if the CPU
 * lacks the requested instructions. */
int loom_kernels_select(enum loom_kernel_mode mode, loom_error *err);
/* Name of the active kernel set ("scalar", "avx2", "avx512"). */
const char *loom_kernels_name(void);

/* Load a GGUF model (mmap, admission, tensor binding). NULL on failure with err filled. Equivalent to
 * loom_model_load_ex with params NULL (the defaults below). */
loom_model *loom_model_load(const char *path, loom_error *err);

typedef struct loom_model_params {
    /* Nonzero: before returning, validate every tensor's data by the rules of llama.cpp's check_tensors
     * (ggml_validate_row_data: every F32/F16/BF16 value and every quantized block's F16 or F32 scales
     * d, dmin, m are neither inf nor NaN), row by row; this reads the whole file once. 0 (the default):
     * no data check, and loading reads only what admission, binding and repacking need. */
    int check_tensors;
} loom_model_params;

/* loom_model_load with options (params may be NULL: all defaults). With check_tensors, a tensor that fails
 * is refused (LOOM_E_FORMAT) naming the tensor, the row, the block or element and what was found, e.g.
 * "tensor 'blk.0.ffn_up.weight' row 17: Q4_K block 3 scale d is inf, expected finite". */
loom_model *loom_model_load_ex(const char *path, const loom_model_params *params, loom_error *err);
void loom_model_free(loom_model *model);

/* Width of a logits row (rows of the output head; may exceed the tokenizer's real vocabulary). */
int loom_model_n_logits(const loom_model *model);
/* Nonzero when token id `tok` may ever be sampled (inside the vocabulary and not UNUSED). */
int loom_model_token_sampleable(const loom_model *model, int32_t tok);
/* Nonzero when `tok` is in the end-of-generation set. */
int loom_model_token_is_eog(const loom_model *model, int32_t tok);
/* Warnings about the model file: what only the GGUF convention forbids, which the reference engine accepts
 * (a key that is not lower_snake_case ASCII, a BOOL byte other than 0 or 1, ...). n_warnings counts them all;
 * loom_model_warning returns the i-th message for the first 8, NULL past them. */
int loom_model_n_warnings(const loom_model *model);
const char *loom_model_warning(const loom_model *model, int i);

/* Float order of a session's evaluation. CANONICAL (the default): every token row is computed in one
 * fixed order, each kernel's single-token (decode) order, however the tokens are split into requests
 * and chunks, so logits and state are bitwise partition invariant and equal to token-by-token
 * evaluation (and to the reference engine fed token by token). REFERENCE_BATCH: mirror llama.cpp's
 * ubatch-dependent kernel choice: each request is split into micro-batches of n_ubatch tokens, as one
 * llama_decode call is, and each micro-batch runs in the orders the reference picks for its size (e.g.
 * batched orders for >= 2 tokens), bitwise equal to the reference's logits when n_ubatch is the reference
 * context's; results then depend on how a prompt is split into requests and micro-batches. */
enum loom_numerics { LOOM_NUMERICS_CANONICAL = 0, LOOM_NUMERICS_REFERENCE_BATCH = 1 };

typedef struct loom_session_params {
    int n_ctx;     /* positions the KV cache holds; 0 = min(model context, 4096); at most the model context */
    int n_threads; /* worker threads; 0 = number of online CPUs */
    enum loom_numerics numerics; /* 0 = LOOM_NUMERICS_CANONICAL */
    int n_ubatch;  /* REFERENCE_BATCH: tokens per micro-batch, the reference context's effective n_ubatch (what
                    * llama_n_ubatch returns: min(n_ubatch, n_batch, n_ctx padded to 256)); 0 = 512, the
                    * reference's default; values above n_ctx act as n_ctx. CANONICAL ignores it (chunking
                    * changes no bit there). */
    int checkpoint_every;        /* also checkpoint when a request crosses a multiple of this many positions; 0 = off */
    uint64_t checkpoint_budget;  /* bytes all checkpoints may hold; 0 = 4 checkpoints' worth */
    int skip_prompt_checkpoints; /* nonzero: keep no checkpoint at a prompt's end, for one-shot use that never
                                  * rewinds or reuses a prefix (saves one recurrent state of memory); 0 = keep */
} loom_session_params;

loom_session *loom_session_new(const loom_model *model, const loom_session_params *params, loom_error *err);
void loom_session_free(loom_session *session);
/* Forget all state (position back to 0). */
void loom_session_reset(loom_session *session);
/* Number of tokens evaluated so far (the next token's position). */
int loom_session_pos(const loom_session *session);
/* Poll fn(ctx) during this session's requests: before each layer of each chunk of tokens and after the chunk's
 * last layer (fn NULL, the default: never cancelled). A cancelled request returns LOOM_E_CANCELLED and, like any
 * failed request, changes nothing (loom_session_eval, rewind, prefill_cached; loom_sessions_decode stops when
 * the callback of any of its sessions asks). */
void loom_session_set_abort(loom_session *session, loom_abort_fn fn, void *ctx);

enum loom_logits_mode { LOOM_LOGITS_LAST = 0, LOOM_LOGITS_ALL = 1 };

/* Evaluate tokens[n_tokens] at positions pos..pos+n_tokens-1 as one batch (prefill) or one token
 * (decode). logits: LOOM_LOGITS_ALL writes [n_tokens][n_logits], LOOM_LOGITS_LAST writes [n_logits]
 * for the last token; may be NULL. Returns LOOM_OK, or LOOM_E_RANGE past the context, LOOM_E_ARG
 * for a token id outside the embedding rows, LOOM_E_NOMEM when the all-token staging cannot grow,
 * LOOM_E_INTERNAL for non-finite results. All or nothing: the request runs on private state and
 * publishes the state owners, the position and the logits together; on any error neither the
 * session's public state nor the caller's logits buffer changes. */
int loom_session_eval(loom_session *session, const int32_t *tokens, int n_tokens, float *logits,
                      enum loom_logits_mode mode, loom_error *err);

/* Positions the session's KV cache holds (the context length it was created with). */
int loom_session_n_ctx(const loom_session *session);
/* Bytes of one sequence's public state at the session's context length: the recurrent layers' conv
 * state and recurrent matrices plus n_ctx positions of K and V rows in the attention layers. Equals
 * loom_qwen35_recurrent_state_bytes + n_ctx * loom_qwen35_kv_bytes_per_token (what `loom inspect`
 * prints). */
uint64_t loom_session_state_bytes(const loom_session *session);
/* XXH3-64 digest of all public state of the sequence: the position, every state owner (conv state,
 * recurrent matrices, the K/V rows of positions < pos) and the last logits row (or their absence). Two
 * sessions of the same model have equal digests iff (up to hash collisions) they would continue
 * identically. */
uint64_t loom_session_digest(const loom_session *session);
/* The logits row of the last evaluated token ([n_logits]), or NULL when the session is empty (new or
 * reset). Valid until the next call that changes the session. */
const float *loom_session_last_logits(const loom_session *session);

/* The token history: writes the ids at positions 0..pos-1 (at most cap) to out; returns pos. */
int loom_session_tokens(const loom_session *session, int32_t *out, int cap);

/* Checkpoints. The recurrent state cannot be un-updated, so a session keeps snapshots of it (the conv state
 * and recurrent matrices; KV rows below a checkpoint's position stay in the cache) at the end of every
 * request of more than one token (a prompt; not with skip_prompt_checkpoints), when a request crosses a
 * multiple of checkpoint_every, and when asked here; within checkpoint_budget bytes, the oldest evicted
 * first. Without one at or before the target, rewinding and the prompt cache re-evaluate from the empty
 * state (the prompt cache needs none to extend the live state: see loom_session_prefill_cached). Returns
 * LOOM_OK, or LOOM_E_NOMEM when the budget holds no checkpoint or allocation fails (state unchanged either
 * way). */
int loom_session_checkpoint(loom_session *session, loom_error *err);
/* Number of checkpoints held. */
int loom_session_n_checkpoints(const loom_session *session);

/* Rewind to position pos (1 <= pos <= current position): restores the nearest checkpoint at or before
 * pos - 1 (or the empty state) and re-evaluates the history from there to pos, so at least one token is
 * evaluated and the logits are fresh (never reused). logits: [n_logits] of the token at pos - 1, may be
 * NULL. pos 0 is loom_session_reset. Errors as loom_session_eval (LOOM_E_CANCELLED included); LOOM_E_ARG for
 * pos out of range. All or nothing: the checkpoint is restored into the request's private state, and the K/V
 * rows below the current position that the re-evaluation rewrites are kept aside (a transient
 * (pos - checkpoint) * kv_bytes_per_token allocation, LOOM_E_NOMEM if it fails) and put back on failure, so an
 * error leaves the position, history, state, held logits, checkpoints and the caller's buffer as they were. */
int loom_session_rewind(loom_session *session, int pos, float *logits, loom_error *err);

/* Prompt cache: make the session's sequence tokens[n] (n >= 1) reusing the longest common prefix with its
 * current history. When the whole history is a prefix of tokens (after a request, a decode turn, a rewind,
 * a restore or a failed request alike), the live state is reused as it is and only tokens[pos..n) are
 * evaluated; when tokens equal the history, nothing is evaluated and the held last logits are returned (if
 * the session holds none, the last token is re-evaluated as below). Otherwise the live state cannot be
 * rewound: the nearest checkpoint at or before the common prefix (and before n) is restored and the rest
 * evaluated, at least one token. logits: [n_logits] of the last token, may be NULL. Returns the number of
 * tokens reused (>= 0; n - reused were evaluated), or a negative code as loom_session_eval, all or nothing
 * as loom_session_rewind (the K/V rows kept aside are those of the restored checkpoint up to the smaller of
 * n and the current position). In CANONICAL numerics the logits and state are bitwise those of a fresh
 * session fed tokens[n]. In REFERENCE_BATCH numerics the reused prefix keeps the float order of the requests
 * that evaluated it and the rest is evaluated as one request, so the result equals a fresh session fed the
 * same requests, and equals one batch of tokens[n] only when nothing is reused (reset first to get that). */
int loom_session_prefill_cached(loom_session *session, const int32_t *tokens, int n, float *logits,
                                loom_error *err);

/* Save the sequence's public state (position, token history, every state owner, last logits) with the
 * model's identity digest to path: written to a temporary file in the same directory, fsynced, renamed
 * over path. Returns LOOM_OK or LOOM_E_IO / LOOM_E_NOMEM. */
int loom_session_save(const loom_session *session, const char *path, loom_error *err);
/* Replace the session's sequence with the one saved in path. Refuses (LOOM_E_FORMAT, session unchanged) a
 * file that is not a loom state file, is damaged (checksum), was saved from another model, or does not fit
 * the session's context. Checkpoints are dropped (loom_session_prefill_cached extends the restored state
 * without one). */
int loom_session_restore(loom_session *session, const char *path, loom_error *err);

/* One decode step for n sequences of the same model at once: tokens[i] is evaluated as the next token of
 * sessions[i] (distinct sessions, CANONICAL numerics, n at most 512), sharing every weight load. Each
 * sequence's logits and state are bitwise what a solo loom_session_eval of that token gives. logits:
 * [n][n_logits] or NULL. All or nothing: on error no session changes. */
int loom_sessions_decode(loom_session *const *sessions, const int32_t *tokens, int n, float *logits,
                         loom_error *err);

/* Tokenize UTF-8 text with the model's tokenizer. parse_special: nonzero lets spellings of special
 * tokens in `text` become special ids (only for trusted, template-authored text); with 0 (caller text) only
 * a vocabulary's plain-text added tokens match, never CONTROL tokens or added tokens spelled as a tag
 * ("<think>", "[PAD7]"). Writes at most cap ids; returns the number of ids the text needs (may exceed cap),
 * or a negative code. */
int loom_tokenize(const loom_model *model, const char *text, size_t len, int parse_special, int32_t *out,
                  int cap, loom_error *err);
/* Bytes of one token's text (byte-level BPE decoded). Returns the byte count (may exceed cap; nothing
 * past cap is written), or a negative code for an invalid id. */
int loom_token_to_piece(const loom_model *model, int32_t tok, char *buf, int cap);

#ifdef __cplusplus
}
#endif
#endif
