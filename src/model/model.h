/* model.h — the immutable loaded model: its architecture instance (model/arch.h), hyper-parameters and
 * the geometry derived from them, the layer execution plan (which layers are Gated DeltaNet recurrent
 * layers, which are gated full-attention layers) and weight views into the GGUF mmap. Nothing here is
 * mutated after loom_model_load returns. */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "loom.h"
#include "model/arch.h"

/* Most blocks attention.recurrent_layers may describe (llama.cpp's LLAMA_MAX_LAYERS, llama-hparams.h). */
#define LOOM_MAX_PLAN_LAYERS 512

/* Hyper-parameters of the qwen35 family: qwen35 and qwen35moe (GGUF keys under "<general.architecture>.";
 * see ../shared/REFERENCE.md for the mapping). */
struct loom_hparams {
    char arch[32];          /* general.architecture */
    uint32_t n_vocab;       /* rows of token_embd (= logits width) */
    uint32_t n_ctx_train;   /* context_length */
    uint32_t n_embd;        /* embedding_length */
    uint32_t n_layer;       /* block_count */
    uint32_t n_ff;          /* feed_forward_length */
    uint32_t n_head;        /* attention.head_count */
    uint32_t n_head_kv;     /* attention.head_count_kv */
    uint32_t head_dim_k;    /* attention.key_length (256) */
    uint32_t head_dim_v;    /* attention.value_length (256) */
    uint32_t n_rot;         /* rope.dimension_count (64): leading dims of each head that rotate */
    uint32_t rope_sections[4]; /* rope.dimension_sections */
    float rope_freq_base;   /* rope.freq_base */
    float rms_eps;          /* attention.layer_norm_rms_epsilon */
    uint32_t full_attn_interval; /* full_attention_interval: layer il is attention iff (il+1) % interval == 0 */
    /* attention.recurrent_layers gives the plan instead when present (the reference follows it): custom_plan is 1
     * when it marks some layer otherwise than the interval rule does, and then bit il of attn_layer_bits says
     * layer il is attention; 0 (bits all clear) when it is absent or agrees with the rule. */
    int custom_plan;
    uint8_t attn_layer_bits[LOOM_MAX_PLAN_LAYERS / 8];
    uint32_t ssm_conv_kernel; /* ssm.conv_kernel (4) */
    uint32_t ssm_inner;     /* ssm.inner_size = ssm_n_v_heads * ssm_head_dim */
    uint32_t ssm_head_dim;  /* ssm.state_size: linear-attention head dim (key dim = value dim) */
    uint32_t ssm_n_v_heads; /* ssm.time_step_rank */
    uint32_t ssm_n_k_heads; /* ssm.group_count */
    int tied_output;        /* no output.weight: the head is token_embd */
    uint32_t n_nextn;       /* nextn_predict_layers: multi-token-prediction blocks after the n_layer layers
                             * loom runs (admitted by name, never loaded) */
    /* Mixture of experts (qwen35moe; all 0 in a dense model, whose layers have ffn_gate/up/down instead).
     * The router is the reference's for qwen35moe (llama.cpp qwen35moe.cpp build_layer_ffn -> llama-graph.cpp
     * build_moe_ffn): probs = softmax(ffn_gate_inp . x) over n_expert, the top n_expert_used by prob, their
     * probs divided by their sum (clamped below at 6.103515625e-5), no further scale (the reference does not
     * read expert_weights_scale or expert_gating_func for this architecture); each selected expert
     * down(silu(gate . x) * (up . x)) weighted and summed; plus the shared expert's
     * down(silu(gate_shexp . x) * (up_shexp . x)) times sigmoid(ffn_gate_inp_shexp . x). Expert groups
     * (expert_group_count > 1), which would change the selection, are refused at admission. */
    uint32_t n_expert;      /* expert_count: routed experts per layer (1..LOOM_MAX_EXPERTS) */
    uint32_t n_expert_used; /* expert_used_count: experts each token is routed to (1..n_expert) */
    uint32_t n_ff_exp;      /* expert_feed_forward_length: one routed expert's hidden width */
    uint32_t n_ff_shexp;    /* expert_shared_feed_forward_length: the shared expert's hidden width */
};

/* Most routed experts per layer loom admits (llama.cpp's LLAMA_MAX_EXPERTS, llama-hparams.h). */
#define LOOM_MAX_EXPERTS 1024

/* A 3-D expert tensor, ne = [n_in, n_out, n_expert]: n_expert matrices W_e[n_out][n_in] stored one after
 * another, expert e's bytes at (const char *)w.data + e * expert_bytes. In the GGUF layout, or (w.layout X16:
 * Q4_K experts with n_out % 16 == 0 when the kernel set has x16 kernels) each expert repacked at load into
 * groups of 16 rows, the same bytes per expert, the file's bytes still at w.rows with the same stride. w comes
 * first so a pointer to the struct is also a pointer to expert 0's matrix (the shape every expert shares:
 * matmul scratch sizing reads it that way). */
struct loom_experts {
    struct loom_weight w; /* expert 0: type, n_in, n_out, row_bytes, data, layout, rows */
    uint32_t n_expert;
    size_t expert_bytes;  /* n_out * row_bytes: the stride between experts (in either layout) */
};

/* Expert e (< x->n_expert) of x as a matrix: y[n_out] = W_e[n_out, n_in] . x[n_in] by loom_matmul. */
static inline struct loom_weight loom_experts_get(const struct loom_experts *x, uint32_t e)
{
    struct loom_weight w = x->w;
    w.data = (const char *)x->w.data + (size_t)e * x->expert_bytes;
    if (w.rows)
        w.rows = (const char *)x->w.rows + (size_t)e * x->expert_bytes;
    return w;
}

/* Weights of one layer: the binding fields of the architectures' weight tables (a layer binds the rows of
 * its kind; the others stay empty). Norm vectors are F32 arrays in the map. */
struct loom_layer {
    enum loom_layer_kind kind;
    const float *attn_norm;      /* [n_embd] */
    const float *post_norm;      /* [n_embd] post_attention_norm */
    struct loom_weight ffn_gate, ffn_up, ffn_down; /* dense FFN: gate/up n_out = n_ff, down n_in = n_ff */
    /* recurrent (Gated DeltaNet) */
    struct loom_weight qkv;      /* attn_qkv: n_out = 2*n_k_heads*d + n_v_heads*d (q | k | v) */
    struct loom_weight z;        /* attn_gate: n_out = ssm_inner */
    struct loom_weight alpha;    /* ssm_alpha: n_out = n_v_heads */
    struct loom_weight beta;     /* ssm_beta: n_out = n_v_heads */
    const float *conv1d;         /* ssm_conv1d [channels][conv_kernel] (ne = [kernel, channels]) */
    const float *dt_bias;        /* ssm_dt.bias [n_v_heads] */
    const float *ssm_a;          /* ssm_a [n_v_heads] = -exp(A_log) */
    const float *ssm_norm;       /* [ssm_head_dim] */
    struct loom_weight ssm_out;  /* n_in = ssm_inner, n_out = n_embd */
    /* attention */
    struct loom_weight wq;       /* attn_q: n_out = n_head * 2 * head_dim_k (per head: query rows then gate rows) */
    struct loom_weight wk, wv;   /* n_out = n_head_kv * head_dim */
    struct loom_weight wqkv;     /* attn_qkv (the converter's --fuse-qkv form): wq's, wk's then wv's rows in one
                                  * matrix; a layer has it or wq/wk/wv, never both (the other form stays empty) */
    struct loom_weight wo;       /* attn_output: n_in = n_head * head_dim_v */
    const float *q_norm, *k_norm; /* [head_dim_k] */
    /* mixture of experts (qwen35moe, every layer; llama.cpp qwen35moe.cpp load_block_trunk) */
    struct loom_weight ffn_gate_inp;      /* router: n_in = n_embd, n_out = n_expert (logits per expert) */
    struct loom_experts ffn_gate_exps;    /* [n_expert] x (n_in = n_embd, n_out = n_ff_exp); empty when fused */
    struct loom_experts ffn_up_exps;      /* [n_expert] x (n_in = n_embd, n_out = n_ff_exp); empty when fused */
    struct loom_experts ffn_gate_up_exps; /* fused: [n_expert] x (n_in = n_embd, n_out = 2 * n_ff_exp): per
                                           * expert the n_ff_exp gate rows, then the n_ff_exp up rows; empty
                                           * when separate (a file has exactly one of the two forms) */
    struct loom_experts ffn_down_exps;    /* [n_expert] x (n_in = n_ff_exp, n_out = n_embd) */
    struct loom_weight ffn_gate_inp_shexp; /* shared expert gate: ne [n_embd] (n_in = n_embd, n_out = 1; the
                                            * reference multiplies it as a matrix, so any type) */
    struct loom_weight ffn_gate_shexp, ffn_up_shexp; /* n_in = n_embd, n_out = n_ff_shexp */
    struct loom_weight ffn_down_shexp;    /* n_in = n_ff_shexp, n_out = n_embd */
};

struct loom_tokenizer;

struct loom_model {
    struct loom_gguf *gguf;
    const struct loom_arch *arch;
    struct loom_hparams hp;
    struct loom_geometry geo;
    struct loom_weight tok_embd;   /* [n_vocab][n_embd] */
    const float *output_norm;      /* [n_embd] */
    struct loom_weight output;     /* = tok_embd when tied */
    struct loom_layer *layers;     /* [hp.n_layer] */
    struct loom_tokenizer *tok;
    void *x16_store;               /* the X16 copies of the weights repacked at load (one allocation), or NULL */
    size_t x16_bytes;              /* its size */
    struct loom_expert_cache *experts; /* loaded with a memory budget: the routed experts' cache (their
                                        * loom_experts keep type and shape, data NULL); NULL when resident */
    const struct loom_kernel_set *kernels; /* the kernel set chosen when it was loaded (loom_kernels_active) */
};

/* The binding field of weight table row r in layer L: a matrix (for an expert row, expert 0's), the experts of
 * an expert row, or an F32 vector. */
static inline const struct loom_weight *loom_layer_matrix(const struct loom_layer *L, const struct loom_weight_row *r)
{
    return (const struct loom_weight *)(const void *)((const char *)L + r->field);
}
static inline const struct loom_experts *loom_layer_experts(const struct loom_layer *L, const struct loom_weight_row *r)
{
    return (const struct loom_experts *)(const void *)((const char *)L + r->field);
}
static inline const float *loom_layer_vector(const struct loom_layer *L, const struct loom_weight_row *r)
{
    return *(const float *const *)(const void *)((const char *)L + r->field);
}

/* Give back the file-map pages that lie wholly inside the part of an X16 weight's GGUF bytes (w->rows)
 * that its groups replace, so that the process does not keep both copies resident (the map re-reads them
 * from the file if they are touched again). Nothing for other layouts. */
void loom_weight_release_rows(const struct loom_weight *w);
/* The same for every expert of an X16 expert tensor (its GGUF bytes at x->w.rows). */
void loom_experts_release_rows(const struct loom_experts *x);

/* Validate every tensor of g, row by row, with its type's validate_row (ggml_validate_row_data's rules,
 * what llama.cpp's check_tensors runs); reads all tensor data. LOOM_OK, or LOOM_E_FORMAT naming the first
 * failing tensor (file order), its row, and the block or element and what was found. */
int loom_model_check_tensors(const struct loom_gguf *g, loom_error *err);

#endif
