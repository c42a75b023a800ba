/* quantize.h — model quantization (`loom quantize`): llama.cpp's per-tensor type recipes (Q8_0, Q6_K,
 * Q5_K_M/S, Q4_K_M/S, Q4_0, IQ4_XS, the grid IQ recipes, TQ1_0, TQ2_0, MXFP4_MOE; with or without an importance
 * matrix (IQ1, IQ2 and IQ3_XXS refuse to run without one, as the reference), with llama-quantize's per-tensor type
 * overrides) and the file conversion, which writes tensor data bytewise identical to the reference's
 * llama_model_quantize through the atomic GGUF writer. */
#ifndef LOOM_MODEL_QUANTIZE_H
#define LOOM_MODEL_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include <regex.h>

#include "gguf/gguf.h"
#include "loom.h"
#include "util/pool.h"

struct loom_imatrix; /* model/imatrix.h */

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
 * that has no fallback (IQ4_XS and the K-quants fall back as loom_quant_choose_types_ex says) or a quantized
 * source tensor; LOOM_E_FORMAT
 * for an ffn tensor of a mixture-of-experts model without a "blk.N." name, N < n_layer (the reference fails). */
int loom_quant_choose_types(const struct loom_quant_model *m, const struct loom_quant_tensor *t, size_t n,
                            const struct loom_quant_recipe *r, uint32_t *out, loom_error *err);

/* One --tensor-type PATTERN=TYPE of llama-quantize: the pattern as compiled (see loom_quant_overrides_parse) and
 * the type. */
struct loom_quant_override {
    char *spec;    /* the pattern as given (before '=') */
    char *pattern; /* the POSIX form compiled */
    regex_t re;
    uint32_t type;
};
struct loom_quant_overrides {
    size_t n;
    struct loom_quant_override *o;
};

/* Parse specs[n] ("PATTERN=TYPE", e.g. "attn_q=q8_0", "blk\.[0-3]\.ffn_down=Q6_K") as llama-quantize's
 * --tensor-type: PATTERN is lowercased whole, then compiled as a POSIX extended regular expression (regcomp
 * REG_EXTENDED) where the reference compiles an ECMAScript std::regex; the one translation is \d outside a
 * bracket expression to [0-9] (after lowercasing, \D is \d there too). The syntaxes agree on what such
 * patterns use (literals, ., [], ^ $, |, (), * + ? {m,n}); ECMAScript-only forms ((?:...), lookaheads, \b,
 * lazy quantifiers) are refused by regcomp or read differently. Matching searches the tensor name anywhere
 * (std::regex_search, regexec). TYPE is a type name, any case, that loom quantizes to (Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS) or F32, F16, BF16. Errors (LOOM_E_ARG) name the spec and the part at fault:
 * no '=', an empty pattern or type, an unknown type or one loom cannot quantize to, a pattern regcomp refuses
 * (with its reason); LOOM_E_NOMEM. Free with loom_quant_overrides_free. */
int loom_quant_overrides_parse(const char *const *specs, size_t n, struct loom_quant_overrides **out, loom_error *err);
void loom_quant_overrides_free(struct loom_quant_overrides *o);

/* What a quantization takes beyond the recipe. */
struct loom_quant_extra {
    const struct loom_imatrix *imatrix;           /* NULL: none */
    const struct loom_quant_overrides *overrides; /* NULL: none */
    void (*notice)(void *ctx, const char *message); /* NULL: silent; else as loom_quantize_options.notice */
    void *notice_ctx;
};

/* loom_quant_choose_types with an importance matrix and overrides (x may be NULL: neither), as
 * llama_tensor_get_type: a quantizable tensor (as above) whose name the first of x->overrides matches takes
 * that type instead of the recipe's rules, and the attn_v / ffn_down counters do not advance for it; with an
 * imatrix the rules that test has_imatrix change (under IQ4_XS the first eighth of ffn_down stays IQ4_XS;
 * under Q4_0 it becomes Q4_1). Either way a type whose block size does not divide the row length falls back
 * as tensor_type_fallback does (IQ4_XS -> IQ4_NL, Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * then F16 when the 32-block type does not divide it either). Errors as loom_quant_choose_types. */
int loom_quant_choose_types_ex(const struct loom_quant_model *m, const struct loom_quant_tensor *t, size_t n,
                               const struct loom_quant_recipe *r, const struct loom_quant_extra *x, uint32_t *out,
                               loom_error *err);

/* Whether llama.cpp quantizes tensor `name` to `type` under the recipe of llama_ftype `ftype` only with an
 * importance matrix (llama-quant.cpp tensor_requires_imatrix: the very-low-bit types IQ1_S, IQ1_M, IQ2_XXS,
 * IQ2_XS, IQ2_S and IQ3_XXS, and Q2_K under Q2_K_S, except for the token embedding and the output), which
 * llama_model_quantize refuses without one (and loom_quant_write_ex too). Synth's recipes ask it as well. */
int loom_quant_requires_imatrix(const char *name, uint32_t type, uint32_t ftype);

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

/* loom_quant_write with an importance matrix and overrides (x may be NULL), as llama_model_quantize with
 * params.imatrix and params.tt_overrides as llama-quantize fills them: types by loom_quant_choose_types_ex; each
 * converted tensor with an imatrix entry of its name quantized by its type's weighted quantizer (quantize_w;
 * Q8_0 and the float types ignore the weights, as the reference's do), expert e of a 3-D tensor with the
 * entry's row e; after general.file_type the keys quantize.imatrix.file (x->imatrix->path, first 127 bytes),
 * quantize.imatrix.dataset (the first dataset, if any, 127 bytes), quantize.imatrix.entries_count and
 * quantize.imatrix.chunks_count (when > 0), in that order (an input key of the same name is dropped, as a set
 * key is moved to the end). Further errors: LOOM_E_FORMAT naming the tensor when its imatrix entry's size is
 * not ne[0] * ne[2] (token embeddings excepted: quantized without, as the reference does); LOOM_E_ARG when the
 * chosen type's reference quantizer uses the weights and loom has no weighted one (Q5_0, Q5_1: fallbacks of
 * Q4_K and Q5_K). */
int loom_quant_write_ex(const struct loom_gguf *in, const struct loom_quant_recipe *r, const struct loom_quant_extra *x,
                        const char *out_path, struct loom_pool *pool, loom_progress_fn progress, void *progress_ctx,
                        loom_abort_fn abort, void *abort_ctx, loom_error *err);

#endif
