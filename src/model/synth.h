/* synth.h — the synthetic qwen35 / qwen35moe GGUF generator: random-weight models of exact Qwen3.5 geometry
 * (presets), built with a seeded deterministic PRNG and a well-conditioned recipe, streamed tensor by
 * tensor through the GGUF writer. Test models only: no trained weights are reachable offline. */
#ifndef LOOM_MODEL_SYNTH_H
#define LOOM_MODEL_SYNTH_H

#include <stdint.h>

#include "loom.h"
#include "model/quantize.h"

/* LOOM_SYNTH_VERSION and LOOM_SYNTH_DEFAULT_SEED are public (loom.h). */

/* Geometry of a preset (qwen35 hyper-parameters; see ../shared/REFERENCE.md for the key mapping). */
struct loom_synth_preset {
    const char *name;
    uint32_t n_layer, n_embd, n_ff;
    uint32_t n_head, n_head_kv, head_dim;   /* full-attention layers; key_length = value_length = head_dim */
    uint32_t n_rot, sections[4];            /* rope.dimension_count, rope.dimension_sections (sum = n_rot/2) */
    float rope_base, rms_eps;
    uint32_t full_attn_interval;            /* layer il is full attention iff (il+1) % interval == 0 */
    uint32_t ssm_head_dim, ssm_k_heads, ssm_v_heads, ssm_conv; /* state_size, group_count, time_step_rank */
    uint32_t n_ctx_train;
    uint32_t n_rows;                        /* embedding rows; 0 = vocab tokens padded up to a multiple of 256 */
    /* mixture of experts (n_expert 0: a dense qwen35 model; else qwen35moe, whose n_ff is 0: no
     * feed_forward_length key) */
    uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    uint32_t fused_gate_up;                 /* 1: ffn_gate_up_exps; 0: ffn_gate_exps + ffn_up_exps */
    uint32_t untied_output;                 /* 1: an output.weight head [n_embd, n_rows]; 0: tied to token_embd */
};

/* The router of a qwen35moe preset (loom.h loom_synth_options.router; README "Synthetic MoE models"). */
enum loom_synth_router {
    LOOM_SYNTH_ROUTER_UNIFORM = 0, /* every expert equally popular in expectation */
    LOOM_SYNTH_ROUTER_SKEWED = 1,  /* Zipf-like expert popularity per layer, through a direction shared by
                                    * every token's embedding */
};

/* The preset called `name` ("micro", "tiny", "0.8b", "tiny-moe", ...), or NULL. */
const struct loom_synth_preset *loom_synth_find_preset(const char *name);

struct loom_synth_params {
    const struct loom_synth_preset *preset;
    uint32_t wtype;          /* storage of the 2-D matrices: LOOM_TYPE_F32, LOOM_TYPE_F16 or LOOM_TYPE_BF16 */
    uint64_t seed;
    const char *vocab_path;  /* a GGUF with tokenizer.ggml.* keys (e.g. ggml-vocab-qwen35.gguf) */
    loom_progress_fn progress; /* may be NULL (loom.h) */
    void *progress_ctx;
    loom_abort_fn abort;     /* polled before each tensor and every 64 rows; NULL = never cancelled */
    void *abort_ctx;
    uint32_t router;         /* enum loom_synth_router (MoE presets only; 0 = uniform) */
    const struct loom_quant_recipe *recipe; /* NULL, or (with wtype F32) the quantization recipe whose file is
                                             * written directly: each tensor generated in F32 and quantized as
                                             * it is written, the bytes of loom_quant_write on the F32 file */
};

/* Write the model to out_path (atomically: the GGUF writer renames a temporary file into place).
 * Deterministic: the same params give the same bytes. Norm weights are stored as llama.cpp's converter
 * stores them (1 + w for the zero-centred RMSNorms; ssm_norm as is); ssm_a holds -A. Returns LOOM_OK, or
 * LOOM_E_ARG for a bad type/preset, LOOM_E_IO / LOOM_E_FORMAT for the vocab file, LOOM_E_NOMEM, LOOM_E_CANCELLED
 * when the abort callback asked (no file left behind: the temporary file is removed, out_path untouched). */
int loom_synth_write(const struct loom_synth_params *params, const char *out_path, loom_error *err);

/* The model's metadata and tensor table only, its tensor data a hole that reads as zeros (the GGUF writer's NULL
 * fill): a file of any preset's geometry for admission and `loom inspect`, at almost no disk and no generation
 * time, not a model to run (every weight 0). n_split 0 or 1: one file at out_path; N > 1: N parts
 * PREFIX-0000k-of-0000N.gguf (PREFIX: out_path without its ".gguf"), laid out as llama.cpp's gguf-split writes
 * them (every key in the first part, split.no / split.count / split.tensors.count in each, the tensors in file
 * order in runs of about equal bytes). Errors as loom_synth_write, and LOOM_E_ARG for more parts than tensors. */
int loom_synth_write_sparse(const struct loom_synth_params *params, uint32_t n_split, const char *out_path,
                            loom_error *err);

#endif
