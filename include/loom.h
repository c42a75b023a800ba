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

#if defined(__GNUC__) || defined(__clang__)
#define LOOM_PRINTF_FORMAT(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define LOOM_PRINTF_FORMAT(fmt, args)
#endif
/* Format a message (printf) into err, when non-NULL, set err->code, and return code, so that a caller writes
 * `return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': expected ..., found ...", name);`. loom fills every
 * loom_error this way; clients use it to report their own steps in the same form. */
int loom_errorf(loom_error *err, int code, const char *fmt, ...) LOOM_PRINTF_FORMAT(3, 4);

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
/* 1 when this CPU runs kernel set mode (which loom_kernels_select then takes; SCALAR and AUTO always), else 0. */
int loom_kernels_runs(enum loom_kernel_mode mode);

/* Float-order profile: the reference CPU build whose float orders loom's reference numerics reproduce. AVX512:
 * llama.cpp's AVX-512 builds (libggml-cpu-zen4 and kin); HASWELL: its AVX2 build (libggml-cpu-haswell), the one
 * a CPU without AVX-512 loads (docs/haswell-numerics.md). The default follows the CPU, as the reference's build
 * choice does: HASWELL without AVX-512F, else AVX512. Every kernel set runs either profile. Process-wide; a model
 * runs in the profile active when it was loaded (LOOM_ORDERS=avx512|haswell in the CLI); LOOM_E_ARG for an
 * unknown value. */
enum loom_orders { LOOM_ORDERS_AVX512 = 0, LOOM_ORDERS_HASWELL = 1 };
int loom_orders_select(enum loom_orders orders, loom_error *err);
/* Name of the active float-order profile ("avx512", "haswell"). */
const char *loom_orders_name(void);

/* Load a GGUF model (mmap, admission, tensor binding). NULL on failure with err filled. Equivalent to
 * loom_model_load_ex with params NULL (the defaults below). */
loom_model *loom_model_load(const char *path, loom_error *err);

/* The most threads an n_threads field below may ask for: more (or a negative number) is refused with LOOM_E_ARG
 * naming the field, before any thread starts; 0 asks for the online CPUs, at most this many. */
#define LOOM_MAX_THREADS 1024

/* The library's version, "MAJOR.MINOR.PATCH" (LOOM_VERSION; the API may change while MAJOR is 0). */
#define LOOM_VERSION "0.6.0"
const char *loom_version(void);

typedef struct loom_model_params {
    /* Nonzero: before returning, validate every tensor's data by the rules of llama.cpp's check_tensors
     * (ggml_validate_row_data: every F32/F16/BF16 value and every quantized block's F16 or F32 scales
     * d, dmin, m are neither inf nor NaN), row by row; this reads the whole file once. 0 (the default):
     * no data check, and loading reads only what admission, binding and repacking need. */
    int check_tensors;
    /* Nonzero: the bytes of memory the process may hold for this model, its
     * sessions and the page cache it causes. The routed experts are then not mapped: they are read from the file
     * into an expert cache of fixed-size slots (io_uring, O_DIRECT where the file system allows; pread when
     * io_uring is unavailable), evicted least frequently needed (README: the policy), while the dense part (every other tensor and the
     * file's metadata) is copied into anonymous memory at load, so the file's pages are neither kept nor mapped
     * (a file truncated under a running model then fails the request that reads it, never the process).
     * Logits are bitwise those of the resident model. The slots get what the budget leaves after the dense
     * part, LOOM_MEM_RESERVE for the process and every live session's arena (loom_session_arena_bytes) and
     * checkpoint budget; a budget
     * that does not hold the dense part and one step's experts (expert_used_count slots) is refused with the
     * numbers (LOOM_E_RANGE), at load, or at loom_session_new for the session that would not fit. A dense
     * model (no routed experts) streams nothing: all its weights are the dense part, held as above, and the
     * budget must hold them, LOOM_MEM_RESERVE and the sessions (its figures show no slot). 0 (the
     * default): everything mapped and resident. With a budget, the routed experts' data (and the full groups of
     * repacked matrices) cannot be read through loom_model_gguf's tensors: read such a model's file with its own
     * loom_gguf_open_model. */
    uint64_t mem_budget;
    /* With mem_budget: what the expert cache reads ahead of the steps that need it (README: reads ahead). */
    enum loom_read_ahead {
        LOOM_READ_AHEAD_DEFAULT = 0, /* = LOOM_READ_AHEAD_PREDICTED (bench/bench_read_ahead.c measured them) */
        LOOM_READ_AHEAD_NONE,        /* only what a step needs, when it needs it (P0) */
        LOOM_READ_AHEAD_PREDICTED,   /* P1: in decode, the next layer's router applied to this layer's FFN input
                                      * predicts its experts, read while this layer computes */
        LOOM_READ_AHEAD_HISTORY,     /* P2: between steps, with no read in flight, the expert decode needed most
                                      * that no slot holds, into the slot of one needed less than half as often */
        LOOM_READ_AHEAD_ALL,         /* P1 and P2 */
    } read_ahead;
    /* Threads that repack the weights into the kernels' x16 layout at load (a pool of them lives only while the
     * model loads), 0 to LOOM_MAX_THREADS; 0 = the number of online CPUs. The bytes are the same for any number. */
    int n_threads;
} loom_model_params;

/* The part of mem_budget set aside for the process itself: code, libraries, thread stacks, the tokenizer's tables
 * and allocator slack. */
#define LOOM_MEM_RESERVE ((uint64_t)64 << 20)

/* What streaming the experts (mem_budget) holds and did, counted since load. */
typedef struct loom_expert_stats {
    uint64_t budget_bytes;  /* mem_budget */
    uint64_t dense_bytes;   /* the dense part held: the file's other tensors and metadata, and repacked copies */
    uint64_t session_bytes; /* the arenas and checkpoint budgets of the model's live sessions */
    uint64_t slot_bytes;    /* one slot: one expert of a layer, all its matrices */
    int n_slots;            /* slots the budget leaves now */
    int n_slots_used;       /* slots in use now (taken as first needed; a new session may give some back) */
    int direct_io;          /* reads bypass the page cache (O_DIRECT); else each read's pages are dropped after it */
    int io_uring;           /* reads go through io_uring; else pread on the computing thread */
    uint64_t steps;         /* layer steps that needed routed experts */
    uint64_t hits;          /* experts a step needed that a slot held */
    uint64_t misses;        /* experts a step needed that were read for it (P0, exact) */
    uint64_t prefetches;    /* experts read ahead on a prediction (P1: the next layer's router applied to this
                             * layer's input, in decode steps) */
    uint64_t prefetch_hits; /* of them, needed by their layer's step (counted in hits too) */
    uint64_t prefetch_stale; /* of them, not needed by their layer's step: their reads cancelled where still
                              * queued in the kernel, else the expert put first in the eviction order */
    uint64_t prefetch_cancelled; /* of the stale ones, whose reads the kernel cancelled before they ran */
    uint64_t warms;         /* experts read ahead from history (P2: the experts decode steps needed most, not held,
                             * into a slot of one needed less, only while no read is in flight) */
    uint64_t warm_hits;     /* of them, needed by a step before being evicted (counted in hits too) */
    uint64_t reads;         /* read requests completed (one per matrix of an expert read, reads ahead included) */
    uint64_t bytes_read;    /* bytes those reads asked for (the experts' bytes, alignment padding excluded), every
                             * kind */
    uint64_t bytes_prefetched; /* of them, read ahead on predictions */
    uint64_t bytes_warmed;  /* of them, read ahead from history */
    uint64_t bytes_wasted;  /* of the bytes read ahead, those no step used: stale predictions, and experts read
                             * ahead that were evicted before any step needed them */
    uint64_t read_errors;   /* reads that failed (short, EIO, ...) */
    uint64_t wait_ns;       /* time the computing thread waited for reads: exposed I/O wait */
    uint64_t busy_ns;       /* time at least one read was in flight until the computing thread saw it land (an
                             * upper bound: bytes_read / busy_ns is a lower bound of the bandwidth achieved) */
    double latency_p50_us, latency_p95_us, latency_p99_us; /* per expert read (predictions included), issue to
                                                             * ready as the computing thread saw it land */
} loom_expert_stats;

/* The expert streaming figures of a model loaded with mem_budget (a dense model's: no slot, no read): LOOM_OK, or
 * LOOM_E_ARG for a model loaded without one. */
int loom_model_expert_stats(const loom_model *model, loom_expert_stats *out);

/* loom_model_load with options (params may be NULL: all defaults). With check_tensors, a tensor that fails
 * is refused (LOOM_E_FORMAT) naming the tensor, the row, the block or element and what was found, e.g.
 * "tensor 'blk.0.ffn_up.weight' row 17: Q4_K block 3 scale d is inf, expected finite". */
loom_model *loom_model_load_ex(const char *path, const loom_model_params *params, loom_error *err);
void loom_model_free(loom_model *model);

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

/* Element type of the attention layers' K cache (V stays F16). F16 (the default) or Q8_0: each K row (the
 * RoPEd F32 row of one KV head) quantized to blocks of 32 as the reference's set_rows does (its CPU
 * quantize_row_q8_0, round half to even), and each query row quantized to Q8_0 before its dot with the K rows
 * (the reference's vec_dot_type of Q8_0), half the K bytes plus 1/16. Bitwise the reference with
 * type_k = GGML_TYPE_Q8_0 and flash attention off, in both numerics (its one-token and batched Q8_0 dots share
 * one order). Needs a head dimension that is a multiple of 32. */
enum loom_kv_type { LOOM_KV_F16 = 0, LOOM_KV_Q8_0 = 1 };
#define LOOM_KV_TYPES 2
/* "f16" / "q8_0" (the reference's --cache-type-k spellings), or NULL for another value. */
const char *loom_kv_type_name(enum loom_kv_type type);
/* The type spelled name ("f16", "q8_0", any case) into *type: LOOM_OK, or LOOM_E_ARG naming the value found
 * and the ones expected. */
int loom_kv_type_parse(const char *name, enum loom_kv_type *type, loom_error *err);

typedef struct loom_session_params {
    int n_ctx;     /* positions the KV cache holds; 0 = min(model context, 4096); at most the model context */
    int n_threads; /* worker threads, 0 to LOOM_MAX_THREADS; 0 = number of online CPUs */
    enum loom_numerics numerics; /* 0 = LOOM_NUMERICS_CANONICAL */
    int n_ubatch;  /* REFERENCE_BATCH: tokens per micro-batch, the reference context's effective n_ubatch (what
                    * llama_n_ubatch returns: min(n_ubatch, n_batch, n_ctx padded to 256)); 0 = 512, the
                    * reference's default; values above n_ctx act as n_ctx. CANONICAL ignores it (chunking
                    * changes no bit there). */
    int checkpoint_every;        /* also checkpoint when a request crosses a multiple of this many positions; 0 = off */
    uint64_t checkpoint_budget;  /* bytes all checkpoints may hold; 0 = 4 checkpoints' worth */
    int skip_prompt_checkpoints; /* nonzero: keep no checkpoint at a prompt's end, for one-shot use that never
                                  * rewinds or reuses a prefix (saves one recurrent state of memory); 0 = keep */
    enum loom_kv_type k_type;    /* K cache element type; 0 = LOOM_KV_F16 */
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
 * recurrent_state_bytes + n_ctx * kv_bytes_per_token of the model's description (loom_model_describe, what
 * `loom inspect` prints). */
uint64_t loom_session_state_bytes(const loom_session *session);
/* The K cache element type the session was created with. */
enum loom_kv_type loom_session_k_type(const loom_session *session);
/* Bytes of the one allocation a session makes when created (its state, scratch and staging buffers), which it
 * holds until freed: with the model file, what a session costs in memory. */
uint64_t loom_session_arena_bytes(const loom_session *session);
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
/* Position of the nearest checkpoint at or before pos (0 when none: the empty state). loom_session_rewind to
 * that position + 1 then evaluates one token; a caller that evaluates the rest in bounded requests of its own
 * (a server between other sequences' decode steps) rewinds there rather than to a farther target. */
int loom_session_checkpoint_at(const loom_session *session, int pos);

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
 * file that is not a loom state file, is damaged (checksum), was saved from another model, with another K cache
 * type or by a model loaded in the other float-order profile (its sums would continue in other orders), or does
 * not fit the session's context. Checkpoints are dropped (loom_session_prefill_cached extends the restored state
 * without one). */
int loom_session_restore(loom_session *session, const char *path, loom_error *err);

/* One decode step for n sequences of the same model at once: tokens[i] is evaluated as the next token of
 * sessions[i] (distinct sessions, CANONICAL numerics, one K cache type (k_type), n at most
 * loom_sessions_decode_max of the one with the
 * largest context, else LOOM_E_RANGE), sharing every weight load. Each
 * sequence's logits and state are bitwise what a solo loom_session_eval of that token gives. logits:
 * [n][n_logits] or NULL. All or nothing: on error no session changes. */
int loom_sessions_decode(loom_session *const *sessions, const int32_t *tokens, int n, float *logits,
                         loom_error *err);
/* The most sequences one loom_sessions_decode call takes when session is the one with the largest context among
 * them: the token rows of its step, min(n_ctx, 128) for a CANONICAL session. A server with more sequences than
 * this runs their step as several calls. */
int loom_sessions_decode_max(const loom_session *session);

/* ---- X-ray: named circuit edges -----------------------------------------------------------------------------
 * Every step of the circuits has a stable name (`blk.3.gdn.conv`, `blk.7.attn.gate`, `blk.7.ffn.out`, `logits`)
 * and shape; `loom xray --list` prints them. A session's edge observer sees each edge's values as a request
 * computes them (src/runtime/edges.c). */

typedef struct loom_edge {
    char name[48];    /* "embed", "blk.N.<step>", "output_norm", "logits" */
    int layer;        /* -1 outside the layers */
    int kind;         /* the step; within a layer, edges come in increasing kind (circuit order) */
    int per_step;     /* 1: one row per request chunk, the state after its last token (conv state, recurrent
                       * state); 0: one row per token */
    int is_int;       /* values are int32 (the selected experts), else float */
    int n_dims;
    int64_t shape[3]; /* one row, outermost first (e.g. gdn.state [n_v_heads][d][d], value index before key) */
    int64_t width;    /* values in one row: the product of shape */
} loom_edge;

/* The model's edges in circuit order (embed, layer 0's, ..., output_norm, logits) into edges[0..cap) (edges
 * may be NULL to count them). Returns how many there are. */
int loom_model_edges(const loom_model *model, loom_edge *edges, int cap);

/* What the observer sees at one edge of one chunk: n_rows rows (tokens at positions pos0.., or the one state
 * row of a per_step edge with pos0 the chunk's last position), row t at (float or int32) data + t *
 * row_stride; a row is n_seg runs of seg_len values, seg_stride apart, in the shape's order. The values may be
 * changed (the rest of the request then reads the changed values): X-ray plants faults this way. */
typedef struct loom_edge_event {
    int layer, kind;
    int pos0, n_rows;
    int64_t row_stride;
    int n_seg;
    int64_t seg_len, seg_stride;
    void *data;
} loom_edge_event;

typedef void (*loom_edge_observer)(void *ctx, const loom_edge_event *event);

/* Call fn(ctx, event) at every edge of this session's single-sequence requests (loom_session_eval, rewind,
 * prefill_cached; not loom_sessions_decode), on the calling thread between the circuit's steps; NULL (the
 * default) observes nothing and costs one test per edge. */
void loom_session_set_observer(loom_session *session, loom_edge_observer fn, void *ctx);

/* ---- Text: model metadata ---------------------------------------------------------------------------------
 * What a client needs to know about a loaded model besides its weights. Strings returned here live as long as
 * the model. */

/* general.architecture, e.g. "qwen35". */
const char *loom_model_arch(const loom_model *model);
/* {arch}.context_length: the positions the model was trained for (loom_session_params.n_ctx's upper bound). */
int loom_model_n_ctx_train(const loom_model *model);
/* Width of a logits row (rows of the output head; may exceed the tokenizer's real vocabulary: rows past it, and
 * rows of UNUSED tokens, are never sampleable). */
int loom_model_n_logits(const loom_model *model);
/* The value of a string metadata key of the model's file (e.g. "general.name"), NUL-terminated into buf[cap]
 * (truncated to cap - 1 bytes when longer; nothing written when cap is 0). Returns the value's length in bytes
 * (>= cap means truncated), or LOOM_E_ARG when the key is absent or not a string. As llama_model_meta_val_str. */
int loom_model_meta_str(const loom_model *model, const char *key, char *buf, size_t cap);
/* Nonzero when token id `tok` may ever be sampled (inside the vocabulary and not UNUSED): the model's
 * tokenizer's LOOM_TOKEN_SAMPLEABLE attribute, 0 for ids outside [0, n_logits). */
int loom_model_token_sampleable(const loom_model *model, int32_t tok);
/* Nonzero when `tok` is in the end-of-generation set (loom_tokenizer_is_eog of the model's tokenizer). */
int loom_model_token_is_eog(const loom_model *model, int32_t tok);

/* ---- Text: tokenizer ---------------------------------------------------------------------------------------
 * The tokenizer of a GGUF file, built from its tokenizer.ggml.* metadata: byte-level BPE with the qwen35, qwen2,
 * llama-bpe, gpt-2, starcoder or deepseek-coder pre-tokenizer, or a SentencePiece vocabulary; token ids and
 * pieces equal llama.cpp's (llama-vocab.cpp). Immutable once made: share it freely between threads. */
typedef struct loom_tokenizer loom_tokenizer;

/* The model's tokenizer, owned by the model (valid until loom_model_free; never pass it to loom_tokenizer_free).
 * Its rows (loom_tokenizer_n_rows) are the model's logits rows. */
const loom_tokenizer *loom_model_tokenizer(const loom_model *model);
/* The tokenizer of any GGUF file with tokenizer.ggml.* metadata, vocabulary-only files included (no tensors are
 * read or checked); its rows are its tokens. NULL on failure with err filled (LOOM_E_IO, LOOM_E_FORMAT naming
 * the key, LOOM_E_NOMEM). The file stays mapped until loom_tokenizer_free. */
loom_tokenizer *loom_tokenizer_open(const char *path, loom_error *err);
/* Free a tokenizer from loom_tokenizer_open (NULL is a no-op). */
void loom_tokenizer_free(loom_tokenizer *tok);
/* Warnings about the file of a tokenizer from loom_tokenizer_open (what only the GGUF convention forbids, as
 * loom_model_n_warnings): the count, and the i-th message for the first 8 (NULL past them). A model's tokenizer
 * reports its model file's. */
int loom_tokenizer_n_warnings(const loom_tokenizer *tok);
const char *loom_tokenizer_warning(const loom_tokenizer *tok, int i);

/* Tokens in the vocabulary (tokenizer.ggml.tokens); ids are [0, n_vocab). */
uint32_t loom_tokenizer_n_vocab(const loom_tokenizer *tok);
/* Rows of a logits row this tokenizer masks (>= n_vocab): the model's n_logits, or n_vocab for a file's. */
uint32_t loom_tokenizer_n_rows(const loom_tokenizer *tok);
/* Per-row flags [n_rows]: 1 where the row may be sampled (inside the vocabulary, not UNUSED, not a CONTROL
 * token spelling "unused"), 0 elsewhere. The mask loom_sampler_new takes. */
const uint8_t *loom_tokenizer_sampleable(const loom_tokenizer *tok);

/* Token attributes (bits). One type bit (tokenizer.ggml.token_type after llama.cpp's name-based fixes, e.g.
 * "<|im_end|>" is CONTROL; none for a type outside GGUF's 1..6) for an id inside the vocabulary; EOG and
 * SAMPLEABLE may be added. */
enum loom_token_attr {
    LOOM_TOKEN_NORMAL = 1 << 0,
    LOOM_TOKEN_UNKNOWN = 1 << 1,
    LOOM_TOKEN_CONTROL = 1 << 2,
    LOOM_TOKEN_USER_DEFINED = 1 << 3,
    LOOM_TOKEN_UNUSED = 1 << 4,
    LOOM_TOKEN_BYTE = 1 << 5,
    LOOM_TOKEN_EOG = 1 << 8,        /* in the end-of-generation set */
    LOOM_TOKEN_SAMPLEABLE = 1 << 9, /* loom_tokenizer_sampleable(tok)[id] */
};
/* The attribute bits of id; 0 for an id outside the vocabulary. */
unsigned loom_tokenizer_token_attr(const loom_tokenizer *tok, int32_t id);

/* Special tokens a file declares by id (tokenizer.ggml.<name>_token_id, as llama-vocab.cpp reads them). An id
 * outside the vocabulary refuses the file when loom acts on it (bos and the end-of-generation ids: eos, eot, eom,
 * fim_pad, fim_rep, fim_sep); any other (unk, sep, pad, mask, fim_pre, fim_suf, fim_mid) counts as absent, with
 * a warning (loom_tokenizer_warning, loom_model_warning). */
enum loom_special_token {
    LOOM_SPECIAL_ID_BOS = 0, /* bos_token_id */
    LOOM_SPECIAL_ID_EOS,     /* eos_token_id */
    LOOM_SPECIAL_ID_EOT,     /* eot_token_id */
    LOOM_SPECIAL_ID_EOM,     /* eom_token_id */
    LOOM_SPECIAL_ID_UNK,     /* unknown_token_id */
    LOOM_SPECIAL_ID_SEP,     /* seperator_token_id (the key's spelling) */
    LOOM_SPECIAL_ID_PAD,     /* padding_token_id */
    LOOM_SPECIAL_ID_MASK,    /* mask_token_id */
    LOOM_SPECIAL_ID_COUNT
};
/* The id the file declares for `which`, or -1 when it declares none (or `which` is out of range). */
int32_t loom_tokenizer_special(const loom_tokenizer *tok, enum loom_special_token which);
/* Beginning-of-sequence id to prepend to a prompt, or -1 when the vocabulary adds none
 * (tokenizer.ggml.add_bos_token; default on for SentencePiece and llama3 vocabularies, as the reference). */
int32_t loom_tokenizer_bos(const loom_tokenizer *tok);
/* Nonzero when id is in the end-of-generation set: the eos, eot and eom ids, the FIM ids that end a
 * generation, and the tokens whose spelling llama-vocab.cpp treats as end of generation ("<|im_end|>",
 * "<|endoftext|>", "<end_of_turn>", ...). */
int loom_tokenizer_is_eog(const loom_tokenizer *tok, int32_t id);
/* The end-of-generation set: writes at most cap ids to out, returns its size (at most 40). */
int loom_tokenizer_eog(const loom_tokenizer *tok, int32_t *out, int cap);
/* The file's chat template (tokenizer.chat_template, a Jinja text), NUL-terminated; NULL when absent. */
const char *loom_tokenizer_chat_template(const loom_tokenizer *tok);

/* Which spellings of special tokens in a text become their ids (rule: caller text stays data).
 * DATA: for anything a user, tool or file wrote. Only a vocabulary's plain-text added tokens match:
 * USER_DEFINED tokens not spelled as a tag (MPT's runs of spaces, DeepSeek-Coder's "õ"), exactly as the
 * reference matches them with parse_special = false. A USER_DEFINED token spelled as a tag — "<" ... ">" or
 * "[" ... "]", three bytes or more (Qwen's <think> and <tool_call>, [PAD151646]) — is a control marker and,
 * like every CONTROL token, stays text. ALL: CONTROL and USER_DEFINED tokens — only for trusted,
 * template-authored text (the reference's parse_special = true). USER_DEFINED: every USER_DEFINED token,
 * markers included, which is what the reference (and Hugging Face) do with parse_special = false; kept for
 * parity tests against it. */
enum loom_special_mode { LOOM_SPECIAL_DATA = 0, LOOM_SPECIAL_ALL = 1, LOOM_SPECIAL_USER_DEFINED = 2 };

/* Encode UTF-8 text[len] (invalid bytes read as U+FFFD, as the reference) into ids, no BOS added; mode is an
 * enum loom_special_mode. Writes at most cap ids to out (out may be NULL when cap is 0); returns the number of
 * ids the text needs (may exceed cap: call again with that much room), or a negative code (LOOM_E_ARG for an
 * unknown mode, LOOM_E_NOMEM). Semantics: llama_tokenize (llama-vocab.cpp) without add_special. */
int loom_tokenizer_encode(const loom_tokenizer *tok, const char *text, size_t len, int mode, int32_t *out, int cap,
                          loom_error *err);
/* Raw bytes of one token (byte-level BPE decoded; SentencePiece spaces and <0xXX> bytes decoded; control tokens
 * give their spelling; UNUSED tokens nothing): llama_token_to_piece with special = true. Writes at most cap
 * bytes (no NUL); returns the byte count (may exceed cap), or LOOM_E_ARG for an id outside the vocabulary. */
int loom_tokenizer_piece(const loom_tokenizer *tok, int32_t id, char *buf, int cap);
/* Text of ids[n]: the pieces back to back, less the one leading space a SentencePiece vocabulary's space prefix
 * added (llama_detokenize without its clean-up of spaces). Writes at most cap bytes (no NUL); returns the byte
 * count the text needs (may exceed cap), LOOM_E_ARG for an id outside the vocabulary. */
int loom_tokenizer_detokenize(const loom_tokenizer *tok, const int32_t *ids, size_t n, char *out, size_t cap);

/* ---- Text: streaming detokenizer ---------------------------------------------------------------------------
 * Feed generated ids one by one; only complete UTF-8 characters come out, an incomplete tail is held back until
 * it completes, and bytes that can never form a valid character come out as U+FFFD (one per maximal invalid
 * subpart, as Unicode recommends). A plain value owned by the caller (one per sequence; copy it to snapshot
 * it): no allocation, ever. The fields are private. */
typedef struct loom_detok {
    const loom_tokenizer *tok;
    unsigned char pending[8];
    int n_pending;
} loom_detok;

void loom_detok_init(loom_detok *d, const loom_tokenizer *tok);
/* Write to out[cap] the text that id completes. Returns the bytes written (>= 0), LOOM_E_ARG for an id outside
 * the vocabulary, LOOM_E_RANGE when cap is too small (nothing consumed; 3 x (the piece's length + 4) bytes always
 * suffice, every byte at worst becoming a U+FFFD). */
int loom_detok_push(loom_detok *d, int32_t id, char *out, int cap);
/* End of generation: whatever is held back comes out as U+FFFD (3 bytes; out needs cap >= 3 then, else
 * LOOM_E_RANGE). Returns the bytes written. */
int loom_detok_flush(loom_detok *d, char *out, int cap);

/* ---- Text: sampler chain -----------------------------------------------------------------------------------
 * The next token from a logits row. The stages run in llama.cpp's default order (common/common.h,
 * common_params_sampling::samplers): logit bias, repetition / presence / frequency penalties over a window of
 * accepted tokens, top-k, top-p, min-p, temperature, then a draw from a seeded xoshiro256** generator; greedy
 * (argmax) when the temperature is 0. Only sampleable rows are ever candidates. One sampler per sequence (a
 * server holds one per request): it carries the penalty window and the generator. */
typedef struct loom_sampler loom_sampler;

/* Added to one row's logit before every other stage; -INFINITY bans the token. */
typedef struct loom_logit_bias {
    int32_t id;
    float bias;
} loom_logit_bias;

/* Zero-initialised fields beyond seed switch their stage off, so `{temp, top_k, top_p, seed}` describes the
 * plain chain. */
typedef struct loom_sampler_params {
    float temp;   /* <= 0: greedy (argmax of the biased, penalized logits) */
    int top_k;    /* 0: no limit */
    float top_p;  /* in [0, 1]; 1: no limit; 0: the argmax only */
    uint64_t seed;
    float min_p;             /* in [0, 1]; keep logits >= max + ln(min_p); 0: off */
    float repeat_penalty;    /* divides positive, multiplies non-positive logits of tokens in the window; 0, 1: off */
    int repeat_last_n;       /* the penalty window: the last N accepted tokens (at most 2^20); 0: penalties off */
    float presence_penalty;  /* subtracted once from a logit whose token is in the window */
    float frequency_penalty; /* subtracted once per occurrence in the window */
    const loom_logit_bias *bias; /* [n_bias], copied by loom_sampler_new; ids repeat: biases add up */
    int n_bias;
} loom_sampler_params;

/* A sampler for logits rows of n_rows floats; sampleable[n_rows] (1 where a row may be chosen; usually
 * loom_tokenizer_sampleable of the model's tokenizer, n_rows = loom_model_n_logits) must outlive it. Allocates
 * its scratch (about 12 bytes per row) once here: sampling and accepting never allocate. NULL with err filled:
 * LOOM_E_ARG naming the parameter out of range (a range above, a bias id outside [0, n_rows), a NaN, a bias of
 * +INFINITY), LOOM_E_NOMEM. */
loom_sampler *loom_sampler_new(const loom_sampler_params *p, int n_rows, const uint8_t *sampleable,
                               loom_error *err);
/* An independent copy of s: parameters, penalty window and generator state (the copy draws what s would). NULL
 * on LOOM_E_NOMEM. */
loom_sampler *loom_sampler_clone(const loom_sampler *s, loom_error *err);
void loom_sampler_free(loom_sampler *s);
/* Pick a token from logits[n_rows] (left unchanged); returns its id, or -1 when no row is sampleable. If every
 * sampleable logit is infinite or NaN after the bias and penalties, the greedy choice is returned. Advances the
 * generator (when temp > 0); does not accept the token. */
int32_t loom_sampler_sample(loom_sampler *s, const float *logits);
/* The token was accepted (generated, or a prompt token): it enters the penalty window and the oldest leaves once
 * the window holds repeat_last_n. Ids outside [0, n_rows) are ignored. */
void loom_sampler_accept(loom_sampler *s, int32_t token);
/* Empty the penalty window (a new conversation). The generator's state is kept. */
void loom_sampler_reset(loom_sampler *s);
/* Restart the generator from seed (as loom_sampler_new seeds it: splitmix64 of the seed fills the state). */
void loom_sampler_seed(loom_sampler *s, uint64_t seed);

/* Log-probabilities of the model's distribution over the sampleable rows of logits[n_rows] (log-softmax at
 * temperature 1, before biases, penalties and truncation: what OpenAI's logprobs report): returns that of
 * token id (-INFINITY when id is not sampleable or out of range), and writes the k most likely sampleable
 * tokens, most likely first (ties: the lower id), to top_ids[k] and top_lp[k] (k <= LOOM_TOP_LOGPROBS_MAX; fewer
 * rows than k: the rest get id -1). Sums in row order (double), so results do not depend on threads. */
#define LOOM_TOP_LOGPROBS_MAX 20
float loom_logprobs(const float *logits, int n_rows, const uint8_t *sampleable, int32_t id, int k,
                    int32_t *top_ids, float *top_lp);

/* ---- Text: stop strings ------------------------------------------------------------------------------------
 * Stop strings that may span tokens: a matcher fed each token's text holds back the bytes that could still
 * become a stop string, releases held text exactly once when it cannot, and reports the stop. (The
 * end-of-generation token set is checked on ids with loom_tokenizer_is_eog; this is the text side.) */
typedef struct loom_stop loom_stop;

/* Copy stops[n_stops] (non-empty NUL-terminated strings; n_stops may be 0: every feed passes its text
 * through). NULL with err filled: LOOM_E_ARG for an empty or NULL string, LOOM_E_NOMEM. */
loom_stop *loom_stop_new(const char *const *stops, int n_stops, loom_error *err);
void loom_stop_free(loom_stop *m);
/* Forget held text and a seen stop (a new generation). */
void loom_stop_reset(loom_stop *m);
/* Length of the longest stop string: held text is always shorter, so out_cap >= len + this always suffices. */
size_t loom_stop_max_len(const loom_stop *m);
/* Bytes held back now (text that may still begin a stop string). */
size_t loom_stop_n_held(const loom_stop *m);
/* Feed one token's text[len]. Writes the text that can no longer be part of a stop string to out and returns
 * its length (>= 0). When a stop string is complete, *stopped = 1 and out gets exactly the text before it (the
 * stop string and anything after it are dropped; later feeds release nothing until loom_stop_reset); otherwise
 * *stopped = 0. The earliest-starting complete stop string wins. Needs out_cap >= held + len (LOOM_E_RANGE
 * otherwise, nothing consumed) and out apart from text. Never allocates. */
int loom_stop_feed(loom_stop *m, const char *text, size_t len, char *out, size_t out_cap, int *stopped,
                   loom_error *err);
/* End of generation without a stop: write the held text to out (LOOM_E_RANGE when out_cap is below it) and
 * return its length. */
int loom_stop_flush(loom_stop *m, char *out, size_t out_cap, loom_error *err);

/* ---- Text: chat rendering ----------------------------------------------------------------------------------
 * A conversation becomes token ids with provenance: the caller's text (contents, reasoning, tool names and
 * arguments, tool descriptions) is always data, encoded with LOOM_SPECIAL_DATA, so a "<|im_end|>" a user typed
 * stays text; only markers the template itself writes become special token ids. A chat template object is made
 * once per tokenizer and is immutable (share it). */
typedef struct loom_chat_template loom_chat_template;

typedef struct loom_chat_tool_call {
    const char *name;      /* function name (required) */
    const char *arguments; /* JSON text: an object, or a JSON string whose content is an object; NULL = none */
} loom_chat_tool_call;

typedef struct loom_chat_message {
    const char *role;              /* "system", "user", "assistant" or "tool" */
    const char *content;           /* NULL = no content (renders as empty) */
    const char *reasoning_content; /* assistant only; NULL = not given (then <think>..</think> in content counts) */
    const loom_chat_tool_call *tool_calls; /* assistant only: [n_tool_calls] */
    size_t n_tool_calls;
    const char *name;              /* NULL = not given; else the message's "name" (a speaker, or the tool a
                                    * result comes from), passed to a Jinja template as message.name as Hugging
                                    * Face's apply_chat_template passes every key (the built-in qwen35 format,
                                    * like the official template, does not print it) */
} loom_chat_message;

/* enable_thinking: UNSET renders as the template does when the variable is undefined. */
enum loom_chat_think { LOOM_CHAT_THINK_UNSET = 0, LOOM_CHAT_THINK_ON = 1, LOOM_CHAT_THINK_OFF = 2 };

typedef struct loom_chat_params {
    const char *tools;          /* JSON array of tool descriptions; NULL or an empty array = no tools */
    int add_generation_prompt;  /* nonzero: end with the opening of an assistant turn */
    enum loom_chat_think think;
    const char *kwargs;         /* NULL, or the JSON text of an object whose keys become top-level template
                                 * variables, set after the others (llama.cpp server's chat_template_kwargs): a
                                 * boolean enable_thinking there wins over think, in the built-in format too.
                                 * LOOM_E_ARG from loom_chat_template_apply naming chat_template_kwargs when it is
                                 * not a JSON object or sets messages, tools or add_generation_prompt (given by
                                 * the fields above) */
} loom_chat_params;

/* The renderer for tok. tmpl names a built-in format or is a template's text; NULL means the file's own
 * template (loom_tokenizer_chat_template). Built-in today: "qwen35", the Qwen3.5 chat format, rendered byte for
 * byte as the official template (llama.cpp's models/templates/Qwen3.5-4B.jinja) renders under Hugging Face's
 * Jinja settings (trim_blocks, lstrip_blocks, tojson = json.dumps(ensure_ascii=False)); a template text that is
 * that template (compared by XXH3-64 digest) uses it. Any other template text renders through loom's Jinja
 * interpreter as Python jinja2 renders it under those settings (name "jinja"); a template it cannot parse or that
 * uses a tag, filter or test it lacks is refused with LOOM_E_FORMAT "...: jinja: line N: ..." naming the
 * construct, as is NULL when the file has none and a text that is empty or only whitespace. tok must outlive the
 * template. */
loom_chat_template *loom_chat_template_new(const loom_tokenizer *tok, const char *tmpl, loom_error *err);
void loom_chat_template_free(loom_chat_template *t);
/* The format it renders: "qwen35" (built-in) or "jinja" (the template through the interpreter). */
const char *loom_chat_template_name(const loom_chat_template *t);
/* Render msgs[n] with params p (NULL: all zero) and tokenize the result: *ids becomes a fresh array of *n_ids
 * ids (caller frees with free()). Text content only (no images or videos). Where the template raises, returns
 * LOOM_E_ARG with the template's message ("No messages provided.", "No user query found in messages.", "System
 * message must be at the beginning.", "Unexpected message role.") or a message naming the malformed field
 * (tool-call name or arguments, tools JSON); LOOM_E_NOMEM. On failure *ids and *n_ids are untouched. The ids
 * equal those of the whole rendered text tokenized with LOOM_SPECIAL_ALL whenever the caller's text spells no
 * special token. */
int loom_chat_template_apply(const loom_chat_template *t, const loom_chat_message *msgs, size_t n,
                             const loom_chat_params *p, int32_t **ids, int *n_ids, loom_error *err);

/* ---- Text: tool calls -------------------------------------------------------------------------------------------
 * The calls a model writes in its chat format's syntax, recognised in generated text that arrives in pieces of any
 * size (a streamed answer, token by token). Qwen3.5 writes them as its template renders an assistant's tool_calls:
 * "<tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call>". */
typedef struct loom_tool_parser loom_tool_parser;

/* Where the parser's output goes, in the order of the text: content (plain text of the answer, in pieces of any
 * size) and complete calls (the function's name; its arguments as compact JSON object text). Either may be NULL. */
typedef struct loom_tool_sink {
    void *ctx;
    void (*content)(void *ctx, const char *text, size_t n);
    void (*call)(void *ctx, const char *name, const char *arguments);
} loom_tool_sink;

/* A parser for calls, in template t's format, to the tools of tools_json (the JSON array given as
 * loom_chat_params.tools: OpenAI's [{"type": "function", "function": {"name": ..., "parameters": SCHEMA}}]; NULL:
 * none). A call counts when it is complete, well formed and names one of the tools; a parameter's value is typed
 * by the tool's schema: for type "string" its text as is, for any other its text parsed as JSON when it is JSON,
 * else the text. A value may hold newlines, quotes and tag-like text, "</parameter>" included: each place a value
 * may end is tried in turn. Everything else, a malformed call or one to an unknown function included, is
 * content, byte for byte, except the whitespace between content and a call (the template's). NULL with err:
 * LOOM_E_ARG (t's format has no tool calls; tools_json not a JSON array), LOOM_E_NOMEM. */
loom_tool_parser *loom_tool_parser_new(const loom_chat_template *t, const char *tools_json, loom_error *err);
void loom_tool_parser_free(loom_tool_parser *p);
/* Generated text[n] in; content and calls out through sink as soon as they are certain (text that may begin a
 * call is held until the call completes or cannot). LOOM_OK or LOOM_E_NOMEM. */
int loom_tool_parser_feed(loom_tool_parser *p, const char *text, size_t n, const loom_tool_sink *sink,
                          loom_error *err);
/* The end of the text: what is held comes out (an unfinished call as content). Returns the number of calls in the
 * whole text, or LOOM_E_NOMEM. */
int loom_tool_parser_end(loom_tool_parser *p, const loom_tool_sink *sink, loom_error *err);

/* ---- GGUF files ---------------------------------------------------------------------------------------------
 * A read-only view of a GGUF file (v2 or v3; the format of ggml's docs/gguf.md as the reference's gguf.cpp reads
 * it): its header, its metadata keys with typed values, its tensor table and its warnings. Opening checks the
 * whole container (every count, size, offset and tensor type) and loads no model. */
typedef struct loom_gguf loom_gguf;

/* Metadata value types, numbered as in the GGUF specification. */
enum loom_gguf_vtype {
    LOOM_GGUF_UINT8 = 0, LOOM_GGUF_INT8 = 1, LOOM_GGUF_UINT16 = 2, LOOM_GGUF_INT16 = 3,
    LOOM_GGUF_UINT32 = 4, LOOM_GGUF_INT32 = 5, LOOM_GGUF_FLOAT32 = 6, LOOM_GGUF_BOOL = 7,
    LOOM_GGUF_STRING = 8, LOOM_GGUF_ARRAY = 9, LOOM_GGUF_UINT64 = 10, LOOM_GGUF_INT64 = 11,
    LOOM_GGUF_FLOAT64 = 12,
};

#define LOOM_GGUF_MAX_DIMS 4
#define LOOM_GGUF_MAX_NAME 64     /* tensor names are shorter: the reference's GGML_MAX_NAME, with its NUL */
#define LOOM_GGUF_WARNINGS_KEPT 8 /* warning messages a handle keeps (it counts them all) */
#define LOOM_GGUF_TYPE_LIMIT 64   /* tensor type ids (ggml's, as GGUF stores them) that loom knows are below this */

/* Open path (mmap) and validate the container: refuse what the reference engine refuses (docs/gguf-checks.md
 * lists every check), and warn about what only the GGUF convention forbids. Returns LOOM_OK and *out, or
 * LOOM_E_IO / LOOM_E_FORMAT / LOOM_E_NOMEM naming the field, what was expected and what was found. */
int loom_gguf_open(const char *path, loom_gguf **out, loom_error *err);
void loom_gguf_close(loom_gguf *g);
/* Open a model as loom_model_load reads it. A single file is loom_gguf_open's view (a file that carries split
 * keys must describe itself as whole: split.count absent, 0 or 1, split.no 0, split.tensors.count its tensor
 * count). The first part of a split model (split.count > 1, as llama.cpp's gguf-split writes it:
 * PREFIX-00001-of-0000N.gguf, the metadata in the first part, every part a complete GGUF file) opens every part
 * PREFIX-0000K-of-0000N.gguf in the same folder, each admitted as loom_gguf_open admits a file; the view has the
 * first part's metadata and header figures and every part's tensors, part by part in file order (parts:
 * loom_gguf_part_at). Refused, naming the part file and the field: a part missing (the file name expected), a
 * part whose split.no is not its position or whose split.count differs, a tensor in two parts, a tensor count
 * other than split.tensors.count, and any part but the first named (the message names the first). */
int loom_gguf_open_model(const char *path, loom_gguf **out, loom_error *err);
/* The files a handle's tensors come from: 1, or the parts of a split model opened by loom_gguf_open_model. */
uint32_t loom_gguf_n_parts(const loom_gguf *g);
typedef struct loom_gguf_part_info {
    const char *path;      /* the file's name (the first part's as given; NULL for a buffer) */
    uint64_t file_bytes;   /* its size */
    uint64_t data_offset;  /* file offset of its tensor data section */
    uint64_t first_tensor; /* its tensors are loom_gguf_tensor_at first_tensor .. first_tensor + n_tensors - 1 */
    uint64_t n_tensors;
} loom_gguf_part_info;
/* Part i (0 <= i < loom_gguf_n_parts, split.no order) into *out. LOOM_E_RANGE when out of range. */
int loom_gguf_part_at(const loom_gguf *g, uint32_t i, loom_gguf_part_info *out, loom_error *err);
/* The file a loaded model was read from (all its parts); valid while the model lives. */
const loom_gguf *loom_model_gguf(const loom_model *model);

typedef struct loom_gguf_info {
    uint64_t file_bytes;  /* size of the file */
    uint32_t version;     /* GGUF version: 2 or 3 */
    uint64_t n_kv;        /* metadata keys */
    uint64_t n_tensors;
    uint64_t alignment;   /* of every tensor's data, bytes (general.alignment, default 32) */
    uint64_t data_offset; /* file offset of the tensor data section */
    uint64_t n_warnings;  /* what only the GGUF convention forbids (a key that is not lower_snake_case ASCII, a
                           * BOOL byte other than 0 or 1, ...): all counted, the first LOOM_GGUF_WARNINGS_KEPT kept */
} loom_gguf_info;
void loom_gguf_get_info(const loom_gguf *g, loom_gguf_info *out);
/* The i-th kept warning message, or NULL when i >= min(n_warnings, LOOM_GGUF_WARNINGS_KEPT). */
const char *loom_gguf_warning(const loom_gguf *g, uint64_t i);

/* One metadata key and its value. Strings point into the file's map (valid until loom_gguf_close) and are not
 * NUL-terminated. The value field that holds it follows the type: u64 for UINT8/16/32/64 and BOOL (the byte
 * as stored), i64 for INT8/16/32/64, f64 for FLOAT32/64, str/str_len for STRING, arr_type/arr_n for ARRAY (the
 * elements are not exposed here). */
typedef struct loom_gguf_kv_info {
    const char *key;
    uint64_t key_len;
    uint32_t type; /* enum loom_gguf_vtype */
    uint64_t u64;
    int64_t i64;
    double f64;
    const char *str;
    uint64_t str_len;
    uint32_t arr_type; /* enum loom_gguf_vtype of the elements */
    uint64_t arr_n;    /* element count */
} loom_gguf_kv_info;
/* Key i (0 <= i < n_kv, file order) into *out. LOOM_E_RANGE naming i and n_kv when out of range. */
int loom_gguf_kv_at(const loom_gguf *g, uint64_t i, loom_gguf_kv_info *out, loom_error *err);
/* Index of the key spelled `key` (NUL-terminated), or -1 when the file has none. */
int64_t loom_gguf_find_key(const loom_gguf *g, const char *key);

typedef struct loom_gguf_tensor_info {
    char name[LOOM_GGUF_MAX_NAME]; /* NUL-terminated copy */
    uint32_t type;                 /* ggml type id as stored, < LOOM_GGUF_TYPE_LIMIT */
    const char *type_name;         /* "Q4_K", static */
    uint32_t n_dims;               /* 1..LOOM_GGUF_MAX_DIMS */
    uint64_t ne[LOOM_GGUF_MAX_DIMS]; /* shape in ggml order: ne[0] is the contiguous (row) dimension; unused = 1 */
    uint64_t n_elements;           /* product of ne */
    uint64_t n_bytes;              /* bytes of its data (from type and shape) */
    uint32_t part;                 /* the file it is in (loom_gguf_part_at; 0 unless split) */
    uint64_t file_offset;          /* offset of its data in that file (its data_offset + the offset stored) */
} loom_gguf_tensor_info;
/* Tensor i (0 <= i < n_tensors, file order) into *out. LOOM_E_RANGE naming i and n_tensors when out of range. */
int loom_gguf_tensor_at(const loom_gguf *g, uint64_t i, loom_gguf_tensor_info *out, loom_error *err);

/* Validate every tensor's data, row by row, by the rules of llama.cpp's check_tensors (ggml_validate_row_data,
 * as loom_model_params.check_tensors does); reads all tensor data. LOOM_OK, or LOOM_E_FORMAT naming the first
 * failing tensor (file order), its row, the block or element and what was found. */
int loom_gguf_check_tensors(const loom_gguf *g, loom_error *err);

/* ---- Model files ---------------------------------------------------------------------------------------------
 * What a GGUF model file holds, read without loading its weights: admission (every key, tensor name, shape and
 * type checked as loom_model_load checks them) and a description in the architecture's own terms. */
#define LOOM_DESC_MAX_HPARAMS 24
#define LOOM_DESC_MAX_KINDS 4

/* A named item of a description: a hyper-parameter (name as the file's keys say it, value as text) or a layer
 * kind (its name and the state one such layer owns: shapes, element types, bytes). */
typedef struct loom_desc_item {
    char name[40];
    char value[200];
} loom_desc_item;

typedef struct loom_model_desc {
    char arch[32];                  /* general.architecture */
    uint32_t n_layer;               /* layers loom runs */
    uint32_t n_nextn;               /* nextn (multi-token prediction) layers in the file, which loom does not run */
    uint64_t n_tokens;              /* tokenizer vocabulary (tokenizer.ggml.tokens) */
    uint64_t kv_bytes_per_token;    /* K and V rows of every attention layer at one position (F16 K) */
    uint64_t k_bytes_per_token[LOOM_KV_TYPES]; /* the K rows alone per K cache type (enum loom_kv_type), as a
                                                * session sizes them; 0 where the type cannot hold them */
    uint64_t recurrent_state_bytes; /* conv and recurrent state of every recurrent layer, per sequence */
    /* The expert plan of a mixture-of-experts model (all 0 for a dense one): routed experts per layer, experts each
     * token is routed to, the bytes of one routed expert of one layer (its gate, up and down rows in the file's
     * types; smallest and largest over the layers, as quantization recipes give some layers wider types) and of
     * one layer's shared expert (its gate, up and down matrices and its gate vector; largest over the layers). */
    uint32_t n_expert, n_expert_used;
    uint64_t expert_bytes_min, expert_bytes_max;
    uint64_t shared_expert_bytes;
    char plan[128];                 /* the layer plan in words: "24 layers (18 Gated DeltaNet recurrent, 6 ...)" */
    int n_hparams;
    loom_desc_item hparams[LOOM_DESC_MAX_HPARAMS];
    int n_kinds;
    loom_desc_item kinds[LOOM_DESC_MAX_KINDS];
    uint8_t *layer_kind; /* [n_layer]: kinds[] index of each layer (owned: loom_model_desc_free) */
} loom_model_desc;

/* Admit g as a model of an architecture loom runs and describe it into *out. Returns LOOM_OK, or LOOM_E_FORMAT
 * naming the key or tensor, what was expected and what was found (what loom_model_load refuses), or
 * LOOM_E_NOMEM; on failure *out holds nothing to free. Free a description with loom_model_desc_free. */
int loom_model_describe(const loom_gguf *g, loom_model_desc *out, loom_error *err);
void loom_model_desc_free(loom_model_desc *d);

/* ---- Synthetic models ----------------------------------------------------------------------------------------
 * Random-weight qwen35 and qwen35moe models of exact Qwen3.5 geometry (presets), from a seeded deterministic
 * generator and a well-conditioned recipe: test models only (no trained weights are reachable offline). */

/* Bumped whenever the bytes written for a given (preset, type, seed, vocabulary) change. */
#define LOOM_SYNTH_VERSION 2
#define LOOM_SYNTH_DEFAULT_SEED 1234u

/* Progress of a file writer (synthesis, quantization), called on the caller's thread:
 * - before each tensor: index = its position in the output file (0-based) of n_tensors, name = its name;
 * - within a tensor as its rows are produced (same index and name): synthesis looks every 64 rows (or columns),
 *   quantization every 1024 rows, and reports only when done_bytes has grown by more than 1/200 of total_bytes
 *   since the previous such call, so at most about 200 such calls per file (besides one per tensor);
 * - once when the file is in place (not after a failure): index = n_tensors, done_bytes = total_bytes, name "".
 * Sizes are bytes of tensor data as stored in the output file (quantized sizes for quantization; header,
 * metadata and alignment padding not counted): total_bytes is the sum over all tensors, done_bytes that of the
 * tensors written before this one plus, within a tensor, the share of it produced so far; done_bytes never
 * decreases. A sparse synthesis (no tensor data) gets only the last call. */
typedef void (*loom_progress_fn)(void *ctx, uint64_t index, uint64_t n_tensors, uint64_t done_bytes,
                                 uint64_t total_bytes, const char *name);

/* The presets' names, i = 0, 1, ... ("micro", "tiny", "0.8b", "tiny-moe", ..., "35b-a3b"); NULL past the last. */
const char *loom_synth_preset(int i);

/* The BOOL key a sparse synthetic file carries (true): loom_model_load refuses such a file, description admits it. */
#define LOOM_SYNTH_SPARSE_KEY "loom.synth.sparse"

typedef struct loom_synth_options {
    const char *preset;     /* a name loom_synth_preset lists */
    const char *type;       /* storage of the 2-D matrices: "F32", "F16" or "BF16"; or a quantization recipe
                             * (loom_quantize_recipe: "Q4_K_M", ...), written directly tensor by tensor in
                             * bounded memory, the bytes loom_quantize writes for the F32 file (and so
                             * llama_model_quantize's tensor data and metadata) */
    uint64_t seed;          /* e.g. LOOM_SYNTH_DEFAULT_SEED */
    const char *vocab_path; /* a GGUF with tokenizer.ggml.* keys (e.g. the reference's ggml-vocab-qwen35.gguf) */
    loom_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    loom_abort_fn abort;    /* polled before each tensor and every 64 rows; NULL = never cancelled */
    void *abort_ctx;
    const char *router;     /* qwen35moe presets: "uniform" (NULL too) or "skewed" (README "Synthetic MoE models") */
    int sparse;             /* nonzero: the metadata and tensor table only, the data a hole reading as zeros (almost
                             * no disk, no generation): for admission and `loom inspect` of any geometry, not to run;
                             * marked with the key LOOM_SYNTH_SPARSE_KEY, which loom_model_load refuses */
    uint32_t n_split;       /* with sparse, N > 1: N parts OUT-0000k-of-0000N.gguf (out_path's ".gguf" dropped), as
                             * llama.cpp's gguf-split lays them out; 0 or 1: one file */
} loom_synth_options;

/* Write the model to out_path, atomically (a temporary file, fsync, rename). Deterministic: the same options
 * give the same bytes. Returns LOOM_OK, or LOOM_E_ARG for an unknown preset or type, LOOM_E_IO / LOOM_E_FORMAT
 * for the vocabulary file, LOOM_E_NOMEM, LOOM_E_CANCELLED when abort asked (no file left, out_path untouched). */
int loom_synthesize(const loom_synth_options *options, const char *out_path, loom_error *err);

/* ---- Quantization --------------------------------------------------------------------------------------------
 * llama.cpp's quantization recipes, with or without an importance matrix and per-tensor type overrides: per-tensor
 * types as llama_tensor_get_type chooses them, tensor data bytewise equal to llama_model_quantize's. */

/* The recipes' names, i = 0, 1, ... ("Q8_0", "Q6_K", "Q5_K_M", ...); NULL past the last. */
const char *loom_quantize_recipe(int i);

typedef struct loom_quantize_options {
    int n_threads;             /* rows are quantized in parallel, 0 to LOOM_MAX_THREADS; 0 = number of online CPUs.
                                * The bytes written do not depend on it. */
    loom_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    loom_abort_fn abort;       /* polled before each tensor and every 1024 rows; NULL = never cancelled */
    void *abort_ctx;
    const char *imatrix;       /* NULL, or an importance matrix GGUF from llama-imatrix (llama-quantize --imatrix):
                                * its weights steer the quantizers, its name and counts go into quantize.imatrix.*
                                * keys; errors name the file and what is wrong with it */
    const char *const *tensor_types; /* n_tensor_types "PATTERN=TYPE" overrides (llama-quantize --tensor-type):
                                * a tensor whose name the pattern (lowercased; a POSIX extended regular expression,
                                * \d read as [0-9]) matches takes TYPE instead of the recipe's choice */
    size_t n_tensor_types;
    void (*notice)(void *ctx, const char *message); /* may be NULL; called before the data is written with one
                                * line (no newline) for each thing llama-quantize warns about: a converted tensor the
                                * importance matrix has no entry for (or, a token embedding, one of another size), a
                                * --tensor-type pattern that chose no tensor's type, a block-size fallback ("tensor
                                * 'X': row length 64 is not a multiple of Q4_K's block size 256, using Q5_0
                                * instead") and their count; after a successful write with an importance matrix,
                                * how many converted tensors its weights steered */
    void *notice_ctx;
} loom_quantize_options;

/* Check one --tensor-type "PATTERN=TYPE" as loom_quantize will parse it (pattern syntax, known type) without
 * reading any file: LOOM_OK, or LOOM_E_ARG naming the spec and the part at fault; LOOM_E_NOMEM. */
int loom_quantize_check_tensor_type(const char *spec, loom_error *err);

/* Quantize the F32/F16/BF16 model `in` with the recipe named `recipe` (case-sensitive, as loom_quantize_recipe
 * lists) into out_path: metadata copied in order (general.quantization_version and general.file_type appended
 * last, split.* dropped), the file written atomically, nothing left behind on failure. A file of an
 * architecture loom runs (qwen35, qwen35moe) is admitted first, as loom_model_load admits it; every source row and
 * every quantized row is validated as llama_model_quantize does. options may be NULL (all defaults). Returns
 * LOOM_OK, or LOOM_E_ARG for an unknown recipe or a tensor the recipe cannot take, LOOM_E_FORMAT naming the key
 * or tensor admission refuses, or the tensor, row, block and what was found for a value the type cannot hold
 * ("tensor 'X' row 17: quantized Q4_0 block 3 scale d is inf, expected finite"), LOOM_E_IO, LOOM_E_NOMEM (also
 * when the threads cannot start), LOOM_E_CANCELLED when abort asked (out_path untouched). */
int loom_quantize(const loom_gguf *in, const char *recipe, const char *out_path, const loom_quantize_options *options,
                  loom_error *err);

/* ---- Machine probes ------------------------------------------------------------------------------------------
 * The rooflines a benchmark sets its figures against: streaming read bandwidth (what decode is bound by) and
 * the arithmetic peaks of FP32 fused multiply-adds and of int8 dot products (what prefill is bound by), run with
 * the widest instruction set of the CPU among AVX-512 (with VNNI for the int8 peak), AVX2 + FMA, and plain C
 * (the read only). */
typedef struct loom_probe_options {
    int n_threads;       /* threads that run the probes together, 0 to LOOM_MAX_THREADS; 0 = number of online CPUs */
    loom_abort_fn abort; /* polled between passes and rounds; NULL = never cancelled */
    void *abort_ctx;
} loom_probe_options;

typedef struct loom_machine_probe {
    const char *isa;        /* "AVX-512", "AVX2" or "scalar" (static) */
    uint64_t read_bytes;    /* size of the buffer read (1 GiB), resident before the first pass */
    double read_seconds;    /* time given to read passes (2 s; at least 3 passes, at most 400) */
    double read_best;       /* streaming read, GB/s (1e9 bytes/s): the fastest pass */
    double read_median;     /* and the median pass */
    double fma_peak;        /* FP32 FMA peak, GFLOP/s (2 FLOP per FMA), best of 3 rounds; 0 without AVX2 */
    double dot_i8_peak;     /* int8 multiply-add peak through AVX-512 VNNI (vpdpbusd, the K-quant prefill
                             * kernels' instruction), GOP/s (2 ops each), best of 3 rounds; 0 without VNNI */
} loom_machine_probe;

/* Measure into *out (options may be NULL: all defaults). Allocates the 1 GiB buffer and n_threads - 1 worker
 * threads for the call. Returns LOOM_OK, LOOM_E_NOMEM when the buffer or threads cannot be had, LOOM_E_CANCELLED
 * when abort asked (nothing measured is returned). */
int loom_probe_machine(const loom_probe_options *options, loom_machine_probe *out, loom_error *err);

#ifdef __cplusplus
}
#endif
#endif
