/* quantize.h — model quantization (`loom quantize`): llama.cpp's per-tensor type recipes (Q8_0, Q6_K,
 * Q5_K_M/S, Q4_K_M/S, Q4_0, IQ4_XS, without an importance matrix) and the file conversion, which writes
 * tensor data bytewise identical to the reference's llama_model_quantize through the atomic GGUF writer. */
#ifndef LOOM_MODEL_QUANTIZE_H
#define LOOM_MODEL_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "loom.h"
#include "util/pool.h"

/* A recipe: its name, the llama_ftype number stored in general.file_type, and the default tensor type. */
struct loom_quant_recipe {
    const char *name;      /* "Q4_K_M" */
    uint32_t ftype;        /* llama.h LLAMA_FTYPE_MOSTLY_* */
    uint32_t default_type; /* enum loom_type of most matrices */
};

/* The recipe called name (case-sensitive, e.g. "Q4_K_M"), or NULL. */
const struct loom_quant_recipe *loom_quant_find_recipe(const char *name);
/* The recipes, NULL-name terminated (for usage messages). */
extern const struct loom_quant_recipe loom_quant_recipes[];

/* What the type choice needs of the model: block count (MTP layers included), the head counts of layer 0
 * (their ratio is the reference's n_gqa) and the expert count (0 or 1: dense). */
struct loom_quant_model {
    uint32_t n_layer, n_head, n_head_kv, n_expert;
};

/* What the type choice needs of a tensor. */
struct loom_quant_tensor {
    const char *name; /* NUL-terminated */
    uint32_t n_dims;
    uint64_t ne[LOOM_GGUF_MAX_DIMS];
    uint32_t type;    /* current type */
};

/* Choose out[i], the stored type of each of the n tensors, as llama.cpp's llama_tensor_get_type does
 * (llama-quant.cpp, no imatrix, no overrides): tensors it does not quantize (fewer than 2 dims, names not
 * ending in "weight", norms, the expert router ffn_gate_inp, ssm_conv1d) keep their type; the token embedding
 * of a model without output.weight is treated as the output; attn_v/attn_qkv and ffn_down counters advance in
 * the reference's tensor order (layer number, then name). Mixture-of-experts models (n_expert > 1) take the
 * ffn rules' layer from the tensor name, so 3-D expert tensors (one [ne0, ne1] matrix per expert, ne[2]
 * experts), shared-expert tensors and the fused ffn_gate_up_exps follow their layer; an 8-expert model gets the
 * reference's 8-expert choices (attn_v, attn_qkv, attn_k in Q8_0; attn_output in Q5_K under Q4_K_M/S, IQ4_XS).
 * Errors naming the tensor: LOOM_E_ARG for a chosen type whose block size does not divide the row length
 * (loom rejects where the reference falls back to another type) or a quantized source tensor; LOOM_E_FORMAT
 * for an ffn tensor of a mixture-of-experts model without a "blk.N." name, N < n_layer (the reference fails). */
int loom_quant_choose_types(const struct loom_quant_model *m, const struct loom_quant_tensor *t, size_t n,
                            const struct loom_quant_recipe *r, uint32_t *out, loom_error *err);

/* perm[k] = the index in t[0..n) of the k-th tensor in the reference's order (llama_model_loader's
 * weight_name_comparer: by the N of "blk.N." (-1 for other names), then by name), the order in which
 * llama_model_quantize chooses types and writes tensors. LOOM_E_NOMEM or LOOM_OK. */
int loom_quant_file_order(const struct loom_quant_tensor *t, size_t n, size_t *perm, loom_error *err);

/* Append the keys llama_model_quantize writes last: general.quantization_version (2), then general.file_type
 * (r->ftype); the writer's error code (a caller must not have set either key before). */
int loom_quant_set_file_keys(struct loom_gguf_writer *w, const struct loom_quant_recipe *r);

/* Quantize the GGUF `in` (F32/F16/BF16 source tensors) with recipe r into out_path: metadata copied
 * verbatim in order, except general.quantization_version (2) and general.file_type (r->ftype), which are
 * appended last as the reference does, and split.* keys, which are dropped; tensors in the reference's order
 * (loom_quant_file_order), 32-byte aligned. The file appears atomically (temporary file, fsync, rename) and nothing is left behind
 * on failure. Rows are quantized in parallel over pool (may be NULL: the caller's thread); the bytes do
 * not depend on the thread count. Every row is validated by the trait table's validate_row
 * (ggml_validate_row_data's rules), as llama_model_quantize does: each source row as read (it loads with
 * check_tensors) and each quantized row as written; the first invalid row (lowest index in the first
 * such tensor) fails the conversion before the file appears. abort (may be NULL) is polled before each
 * tensor and every 1024 rows; progress (loom.h; may be NULL) before each tensor. Errors: as
 * loom_quant_choose_types;
 * LOOM_E_ARG when a chosen type has no quantizer yet or the model lacks <arch>.block_count;
 * LOOM_E_FORMAT naming the tensor, the row, the block or element and what was found ("tensor 'X' row 17:
 * quantized Q4_0 block 3 scale d is inf, ..."; in a 3-D expert tensor "expert 5 row 17"), for a NaN or inf source value or a quantized block whose
 * scale came out inf (source values beyond what the type's F16 scales reach); LOOM_E_IO, LOOM_E_NOMEM;
 * LOOM_E_CANCELLED when abort asked (out_path untouched). */
int loom_quant_write(const struct loom_gguf *in, const struct loom_quant_recipe *r, const char *out_path,
                     struct loom_pool *pool, loom_progress_fn progress, void *progress_ctx, loom_abort_fn abort,
                     void *abort_ctx, loom_error *err);

#endif
