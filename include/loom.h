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
};

typedef struct loom_error {
    int code;
    char msg[512];
} loom_error;

typedef struct loom_model loom_model;
typedef struct loom_session loom_session;

/* Kernel selection: AUTO picks the widest SIMD the CPU has; SCALAR forces the reference kernels. */
enum loom_kernel_mode { LOOM_KERNELS_AUTO = 0, LOOM_KERNELS_SCALAR = 1, LOOM_KERNELS_AVX2 = 2, LOOM_KERNELS_AVX512 = 3 };

/* Choose the kernel set process-wide (call before loading models). Returns LOOM_E_ARG if the CPU
 * lacks the requested instructions. */
int loom_kernels_select(enum loom_kernel_mode mode, loom_error *err);
/* Name of the active kernel set ("scalar", "avx2", "avx512"). */
const char *loom_kernels_name(void);

/* Load a GGUF model (mmap, admission, tensor binding). NULL on failure with err filled. */
loom_model *loom_model_load(const char *path, loom_error *err);
void loom_model_free(loom_model *model);

/* Width of a logits row (rows of the output head; may exceed the tokenizer's real vocabulary). */
int loom_model_n_logits(const loom_model *model);
/* Nonzero when token id `tok` may ever be sampled (inside the vocabulary and not UNUSED). */
int loom_model_token_sampleable(const loom_model *model, int32_t tok);
/* Nonzero when `tok` is in the end-of-generation set. */
int loom_model_token_is_eog(const loom_model *model, int32_t tok);

typedef struct loom_session_params {
    int n_ctx;     /* positions the KV cache holds; 0 = min(model context, 4096) */
    int n_threads; /* worker threads; 0 = number of online CPUs */
} loom_session_params;

loom_session *loom_session_new(const loom_model *model, const loom_session_params *params, loom_error *err);
void loom_session_free(loom_session *session);
/* Forget all state (position back to 0). */
void loom_session_reset(loom_session *session);
/* Number of tokens evaluated so far (the next token's position). */
int loom_session_pos(const loom_session *session);

enum loom_logits_mode { LOOM_LOGITS_LAST = 0, LOOM_LOGITS_ALL = 1 };

/* Evaluate tokens[n_tokens] at positions pos..pos+n_tokens-1 as one batch (prefill) or one token
 * (decode). logits: LOOM_LOGITS_ALL writes [n_tokens][n_logits], LOOM_LOGITS_LAST writes [n_logits]
 * for the last token; may be NULL. Returns LOOM_OK, or LOOM_E_RANGE past the context, LOOM_E_ARG
 * for a token id outside the embedding rows. */
int loom_session_eval(loom_session *session, const int32_t *tokens, int n_tokens, float *logits,
                      enum loom_logits_mode mode, loom_error *err);

/* Tokenize UTF-8 text with the model's tokenizer. parse_special: nonzero lets spellings of special
 * tokens in `text` become special ids (only for trusted, template-authored text). Writes at most cap
 * ids; returns the number of ids the text needs (may exceed cap), or a negative code. */
int loom_tokenize(const loom_model *model, const char *text, size_t len, int parse_special, int32_t *out,
                  int cap, loom_error *err);
/* Bytes of one token's text (byte-level BPE decoded). Returns the byte count (may exceed cap; nothing
 * past cap is written), or a negative code for an invalid id. */
int loom_token_to_piece(const loom_model *model, int32_t tok, char *buf, int cap);

#ifdef __cplusplus
}
#endif
#endif
