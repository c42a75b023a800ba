/* refengine.h — a run-time binding to the reference engine (llama.cpp v0.5.0, its prebuilt libraries) through
 * dlopen/dlsym, so that `loom bench --ref` runs it in the same process while the loom binary never links it.
 * Holds loom's own declarations of the few reference structs passed by value; tests/parity/test_refengine.c
 * checks every field's offset and size against the reference's include/llama.h. */
#ifndef LOOM_CLI_REFENGINE_H
#define LOOM_CLI_REFENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* Opaque reference objects (llama_model, llama_context, llama_memory_i). */
struct loom_ref_model;
struct loom_ref_context;
struct loom_ref_memory;

/* struct llama_model_params of llama.h v0.5.0, field for field (enums are 4-byte ints, callbacks are
 * function pointers that loom leaves NULL). Get it from llama_model_default_params, change only what is needed. */
struct loom_ref_model_params {
    void *devices;
    const void *tensor_buft_overrides;
    int32_t n_gpu_layers;
    int32_t split_mode;
    int32_t load_mode;
    int32_t lazy_mode;
    int32_t main_gpu;
    const float *tensor_split;
    bool (*progress_callback)(float progress, void *user_data);
    void *progress_callback_user_data;
    const void *kv_overrides;
    bool vocab_only;
    bool check_tensors;
    bool use_extra_bufts;
    bool no_host;
    bool no_alloc;
    bool load_mtp;
};

/* struct llama_context_params of llama.h v0.5.0, field for field. */
struct loom_ref_context_params {
    uint32_t n_ctx;
    uint32_t n_batch;
    uint32_t n_ubatch;
    uint32_t n_seq_max;
    uint32_t n_rs_seq;
    uint32_t n_outputs_max;
    uint32_t n_outputs_max_per_seq;
    int32_t n_threads;
    int32_t n_threads_batch;
    int32_t ctx_type;
    int32_t rope_scaling_type;
    int32_t pooling_type;
    int32_t attention_type;
    int32_t flash_attn_type;
    float rope_freq_base;
    float rope_freq_scale;
    float yarn_ext_factor;
    float yarn_attn_factor;
    float yarn_beta_fast;
    float yarn_beta_slow;
    uint32_t yarn_orig_ctx;
    float defrag_thold;
    bool (*cb_eval)(void *tensor, bool ask, void *user_data);
    void *cb_eval_user_data;
    int32_t type_k;
    int32_t type_v;
    bool (*abort_callback)(void *data);
    void *abort_callback_data;
    bool embeddings;
    bool offload_kqv;
    bool no_perf;
    bool op_offload;
    bool swa_full;
    bool kv_unified;
    void *samplers;
    size_t n_samplers;
    struct loom_ref_context *ctx_other;
};

/* struct llama_batch of llama.h v0.5.0 (token ids and positions are int32). */
struct loom_ref_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
};

/* The leading fields of struct ggml_tensor (ggml.h v0.5.0), as an eval callback (cb_eval) reads a computed
 * tensor: ne[0] is the fastest axis, nb[i] the byte stride of axis i, data in host memory (CPU backend). */
struct loom_ref_tensor {
    int32_t type; /* enum ggml_type: LOOM_REF_F32, LOOM_REF_F16, LOOM_REF_I32, ... */
    void *buffer;
    int64_t ne[4];
    size_t nb[4];
    int32_t op;
    int32_t op_params[16];
    int32_t flags;
    void *src[10];
    void *view_src;
    size_t view_offs;
    void *data;
    char name[64]; /* graph names: "attn_norm-3" (name-layer), "result_output" */
};
enum { LOOM_REF_F32 = 0, LOOM_REF_F16 = 1, LOOM_REF_Q8_0 = 8, LOOM_REF_I32 = 26 };

/* The resolved entry points (names as in llama.h / ggml-backend.h without the prefix). */
struct loom_ref {
    void *lib; /* dlopen handle of libllama.v0.5.0.so (stays loaded for the life of the process) */
    char bins[1024];
    void (*load_all_from_path)(const char *dir); /* ggml_backend_load_all_from_path (libggml) */
    void *(*backend_load)(const char *path);     /* ggml_backend_load (libggml): one backend library */
    char cpu[64];  /* LOOM_REF_CPU: the one CPU build loaded (haswell, zen4, ...); empty: the best for the CPU */
    char best[64]; /* without LOOM_REF_CPU, the build the reference picked as the best (from /proc/self/maps) */
    int repack;    /* LOOM_REF_REPACK: 1 (unset, its default) repacks weights into its CPU_REPACK buffer (anonymous
                    * memory) at load; 0 leaves them in the file map (use_extra_bufts off) */
    void (*backend_init)(void);
    void (*backend_free)(void);
    void (*log_set)(void (*cb)(int level, const char *text, void *user), void *user);
    struct loom_ref_model_params (*model_default_params)(void);
    struct loom_ref_context_params (*context_default_params)(void);
    struct loom_ref_model *(*model_load_from_file)(const char *path, struct loom_ref_model_params params);
    void (*model_free)(struct loom_ref_model *model);
    uint64_t (*model_size)(const struct loom_ref_model *model);
    uint64_t (*model_n_params)(const struct loom_ref_model *model);
    struct loom_ref_context *(*init_from_model)(struct loom_ref_model *model, struct loom_ref_context_params p);
    void (*free)(struct loom_ref_context *ctx);
    struct loom_ref_batch (*batch_get_one)(int32_t *tokens, int32_t n_tokens);
    int32_t (*decode)(struct loom_ref_context *ctx, struct loom_ref_batch batch);
    void (*synchronize)(struct loom_ref_context *ctx);
    struct loom_ref_memory *(*get_memory)(const struct loom_ref_context *ctx);
    void (*memory_clear)(struct loom_ref_memory *mem, bool data);
    float *(*get_logits_ith)(struct loom_ref_context *ctx, int32_t i);
    uint32_t (*n_ubatch)(const struct loom_ref_context *ctx);
    const void *(*model_get_vocab)(const struct loom_ref_model *model);
    int32_t (*vocab_n_tokens)(const void *vocab);
    const char *(*print_system_info)(void);
    size_t (*state_seq_get_size)(struct loom_ref_context *ctx, int32_t seq_id);
    size_t (*state_seq_get_data)(struct loom_ref_context *ctx, uint8_t *dst, size_t size, int32_t seq_id);
    size_t (*state_seq_set_data)(struct loom_ref_context *ctx, const uint8_t *src, size_t size, int32_t dest_seq_id);
};

/* Folder of the reference's prebuilt libraries into buf[cap]: $LOOM_REF/bins/package/bins/linux-x64, where
 * LOOM_REF defaults to $LOOM_CACHE/ref and LOOM_CACHE to ~/.cache/loom. Returns buf. */
const char *loom_ref_bins_dir(char *buf, size_t cap);

/* dlopen libllama.v0.5.0.so from loom_ref_bins_dir (its RUNPATH finds libggml beside it), resolve every entry
 * point of struct loom_ref, route the reference's log to stderr (errors only), load its CPU backends from the
 * same folder and initialise it (LOOM_REF_CPU=NAME, in any case: that one CPU build alone). Once per process.
 * Returns LOOM_OK, or LOOM_E_IO naming the library or the missing symbol; for a LOOM_REF_CPU build that is not
 * there (LOOM_E_ARG) or does not load (LOOM_E_IO), why (for one that needs AVX-512 on a CPU without it, so), and
 * the builds this CPU can load. */
int loom_ref_open(struct loom_ref *r, loom_error *err);
/* Whether the reference's CPU build has AVX-512 (its system info's "AVX512 = 1"): loom's reference numerics are
 * the float orders of those builds, so only against one of them are its logits bitwise; a CPU without AVX-512
 * runs the AVX2 build, whose orders differ (docs/haswell-numerics.md). After loom_ref_open. */
int loom_ref_avx512(const struct loom_ref *r);
/* The CPU build the reference runs, for a report, in buf (cap bytes): "NAME, forced by LOOM_REF_CPU", or "NAME, the
 * best for this CPU" when it picked the best itself. */
const char *loom_ref_cpu_build(const struct loom_ref *r, char *buf, size_t cap);
/* NULL when loom's float-order profile `orders` (loom_orders_name: "avx512", "haswell") reproduces the reference's
 * CPU build (avx512: a build with AVX-512; haswell: the haswell or alderlake build), else why its logits are expected
 * to differ, one sentence in buf (cap bytes), naming the build and, where one does, the profile that reproduces it. */
const char *loom_ref_orders_note(const struct loom_ref *r, const char *orders, char *buf, size_t cap);
/* llama_backend_free. The library stays mapped (the reference keeps process-wide state). */
void loom_ref_close(struct loom_ref *r);

/* Load a GGUF with the reference's default model parameters (mmap, weight repacking on). NULL with err filled. */
struct loom_ref_model *loom_ref_model_load(const struct loom_ref *r, const char *path, loom_error *err);

/* A one-sequence context: n_ctx positions, batches of up to n_batch tokens (micro-batches of at most 512, the
 * reference's default), n_threads for both decode and batches, flash attention as llama_flash_attn_type
 * (-1 auto, its default; 0 off; 1 on), the K cache type k_type (its type_k: F16, or Q8_0 for LOOM_KV_Q8_0);
 * everything else at the reference's defaults (F16 V). NULL with err filled. */
struct loom_ref_context *loom_ref_context_new(const struct loom_ref *r, struct loom_ref_model *model, int n_ctx,
                                              int n_batch, int n_threads, int flash_attn, enum loom_kv_type k_type,
                                              loom_error *err);

/* The exact configuration loom's REFERENCE_BATCH numerics mirror: one sequence of n_ctx positions, batches
 * of n_batch tokens split into micro-batches of n_ubatch, flash attention off, an F16 V cache and a K cache of
 * k_type (loom_ref_context_new), n_threads; cb (may be NULL) sees every computed tensor (ask true: whether to
 * see t's values; then once more with ask false). NULL with err filled. */
struct loom_ref_context *loom_ref_context_exact(const struct loom_ref *r, struct loom_ref_model *model, int n_ctx,
                                                int n_batch, int n_ubatch, int n_threads, enum loom_kv_type k_type,
                                                bool (*cb)(void *t, bool ask, void *user), void *user,
                                                loom_error *err);

/* Evaluate tokens[n] at positions pos0.. as one llama_decode with the logits of every token, and wait. The
 * rows are then at r->get_logits_ith(ctx, i). Returns LOOM_OK, or LOOM_E_NOMEM / LOOM_E_INTERNAL (llama_decode's
 * status) with err filled. */
int loom_ref_eval_all(const struct loom_ref *r, struct loom_ref_context *ctx, const int32_t *tokens, int n, int pos0,
                      loom_error *err);

/* Evaluate tokens[n] at the next positions of the sequence (llama_batch_get_one: logits of the last token
 * only) and wait for the result. Returns LOOM_OK, or LOOM_E_INTERNAL with llama_decode's status. */
int loom_ref_eval(const struct loom_ref *r, struct loom_ref_context *ctx, int32_t *tokens, int n, loom_error *err);

/* Forget the sequence (KV cache and recurrent state), back to position 0. */
void loom_ref_reset(const struct loom_ref *r, struct loom_ref_context *ctx);

/* The sequence's state (KV cache and recurrent state, llama_state_seq_get_data) into a new buffer: *buf (free
 * it) of *size bytes. Returns LOOM_OK, LOOM_E_NOMEM, or LOOM_E_INTERNAL when the reference wrote nothing. */
int loom_ref_state_save(const struct loom_ref *r, struct loom_ref_context *ctx, uint8_t **buf, size_t *size,
                        loom_error *err);

/* Forget the sequence, then restore a state loom_ref_state_save took from this context (llama-bench comes back
 * to a depth this way). Returns LOOM_OK, or LOOM_E_INTERNAL when the reference refused it. */
int loom_ref_state_restore(const struct loom_ref *r, struct loom_ref_context *ctx, const uint8_t *buf, size_t size,
                           loom_error *err);

#endif
