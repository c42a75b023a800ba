/* arch_qwen35_common.h — the admission steps, layer plan and geometry that the qwen35 family's instances share
 * (arch_qwen35.c dense, arch_qwen35moe.c mixture of experts): what an instance adds is a struct
 * loom_qwen35_variant (its keys beyond the family's, its per-layer rules, the FFN tensors of its nextn blocks)
 * and its weight table over the dim ids below. Internal to src/model. */
#ifndef LOOM_MODEL_ARCH_QWEN35_COMMON_H
#define LOOM_MODEL_ARCH_QWEN35_COMMON_H

#include <stddef.h>

#include "model/arch.h"

struct loom_hparams;

/* Shape sizes of the family's weight tables (ids into loom_geometry.dim; D_ONE is 0, so a row that leaves
 * ne[2] out names a dimension of size 1). */
enum { D_ONE, D_EMBD, D_FF, D_CONV_CH, D_CONV_K, D_INNER, D_V_HEADS, D_SSM_HEAD, D_Q_ROWS, D_K_ROWS, D_V_ROWS,
       D_ATTN_IN, D_HEAD_K, D_EXPERT, D_FF_EXP, D_FF_EXP2, D_FF_SHEXP, D_QKV_ROWS, D_COUNT };
_Static_assert(D_COUNT <= LOOM_ARCH_MAX_DIMS, "the family's dim ids fit struct loom_geometry.dim");

#define LOOM_Q35_REC (1u << LOOM_LAYER_RECURRENT)
#define LOOM_Q35_ATT (1u << LOOM_LAYER_ATTENTION)
#define LOOM_Q35_ALL (LOOM_Q35_REC | LOOM_Q35_ATT)
/* Weight table rows: a required matrix, a matrix a file may leave out (a rule beyond the table says when), an
 * F32 vector, an expert tensor [ne0, ne1, n_expert] (required or not), bound at field of struct loom_layer. */
#define LOOM_Q35_MAT(nm, k, ne0, ne1, f) \
    {.name = nm, .kinds = k, .ne = {ne0, ne1, D_ONE}, .required = 1, .field = offsetof(struct loom_layer, f)}
#define LOOM_Q35_OPT(nm, k, ne0, ne1, f) \
    {.name = nm, .kinds = k, .ne = {ne0, ne1, D_ONE}, .field = offsetof(struct loom_layer, f)}
#define LOOM_Q35_VEC(nm, k, ne0, ne1, f) \
    {.name = nm, .kinds = k, .ne = {ne0, ne1, D_ONE}, .vector = 1, .required = 1, \
     .field = offsetof(struct loom_layer, f)}
#define LOOM_Q35_EXPS(nm, ne0, ne1, req, f) \
    {.name = nm, .kinds = LOOM_Q35_ALL, .ne = {ne0, ne1, D_EXPERT}, .experts = 1, .required = req, \
     .field = offsetof(struct loom_layer, f)}

/* The Gated DeltaNet (recurrent) and gated attention rows every instance's table has, after its FFN rows
 * (llama.cpp qwen35.cpp / qwen35moe.cpp load_block_trunk). An attention layer's q/k/v projection is attn_q,
 * attn_k and attn_v, or the one attn_qkv (their rows in that order) that the converter's --fuse-qkv writes
 * (llama-model.cpp create_tensor_qkv); admission requires exactly one form per layer (the family's rule), so the
 * four rows are optional here. attn_qkv of a recurrent layer is another tensor: the Gated DeltaNet's q|k|v. */
#define LOOM_Q35_GDN_ROWS                                                                  \
    LOOM_Q35_MAT("attn_qkv.weight", LOOM_Q35_REC, D_EMBD, D_CONV_CH, qkv),               \
    LOOM_Q35_MAT("attn_gate.weight", LOOM_Q35_REC, D_EMBD, D_INNER, z),                  \
    LOOM_Q35_VEC("ssm_conv1d.weight", LOOM_Q35_REC, D_CONV_K, D_CONV_CH, conv1d),        \
    LOOM_Q35_VEC("ssm_dt.bias", LOOM_Q35_REC, D_V_HEADS, D_ONE, dt_bias),                \
    LOOM_Q35_VEC("ssm_a", LOOM_Q35_REC, D_V_HEADS, D_ONE, ssm_a),                        \
    LOOM_Q35_MAT("ssm_alpha.weight", LOOM_Q35_REC, D_EMBD, D_V_HEADS, alpha),            \
    LOOM_Q35_MAT("ssm_beta.weight", LOOM_Q35_REC, D_EMBD, D_V_HEADS, beta),              \
    LOOM_Q35_VEC("ssm_norm.weight", LOOM_Q35_REC, D_SSM_HEAD, D_ONE, ssm_norm),          \
    LOOM_Q35_MAT("ssm_out.weight", LOOM_Q35_REC, D_INNER, D_EMBD, ssm_out)
#define LOOM_Q35_ATTN_ROWS                                                                 \
    LOOM_Q35_OPT("attn_q.weight", LOOM_Q35_ATT, D_EMBD, D_Q_ROWS, wq),                   \
    LOOM_Q35_OPT("attn_k.weight", LOOM_Q35_ATT, D_EMBD, D_K_ROWS, wk),                   \
    LOOM_Q35_OPT("attn_v.weight", LOOM_Q35_ATT, D_EMBD, D_V_ROWS, wv),                   \
    LOOM_Q35_OPT("attn_qkv.weight", LOOM_Q35_ATT, D_EMBD, D_QKV_ROWS, wqkv),             \
    LOOM_Q35_MAT("attn_output.weight", LOOM_Q35_ATT, D_ATTN_IN, D_EMBD, wo),             \
    LOOM_Q35_VEC("attn_q_norm.weight", LOOM_Q35_ATT, D_HEAD_K, D_ONE, q_norm),           \
    LOOM_Q35_VEC("attn_k_norm.weight", LOOM_Q35_ATT, D_HEAD_K, D_ONE, k_norm)

/* What an instance of the family adds to the shared admission (its struct loom_arch's variant). */
struct loom_qwen35_variant {
    int n_ff_optional; /* feed_forward_length may be absent (0) */
    /* Keys beyond the family's, read and checked into hp after the family's (NULL: none). */
    int (*read_keys)(const struct loom_gguf *g, struct loom_hparams *hp, loom_error *err);
    /* Per-layer rules beyond the weight table, after every layer's tensors were checked (NULL: none). */
    int (*check_layers)(const struct loom_gguf *g, const struct loom_hparams *hp, loom_error *err);
    const char *const *nextn_ffn; /* the FFN tensor suffixes a nextn block may carry */
    int n_nextn_ffn;
};

/* The family's admission with the additions of arch's variant: fills *hp (hp->arch = arch->name) and *geo. */
int loom_qwen35_admit(const struct loom_arch *arch, const struct loom_gguf *g, struct loom_hparams *hp,
                      struct loom_geometry *geo, loom_error *err);

/* An instance of the family named nm with weight table `table` and struct loom_qwen35_variant `var`. */
#define LOOM_Q35_ARCH(nm, table, var)                                                                    \
    {.name = nm, .admit = loom_qwen35_admit, .check_circuits = loom_qwen35_check_circuits,                  \
     .layer_kind = loom_qwen35_layer_kind, .weights = table, .n_weights = (int)(sizeof table / sizeof table[0]), \
     .owners = {[LOOM_LAYER_RECURRENT] = {2, {LOOM_OWNER_CONV, LOOM_OWNER_RECURRENT}},                        \
                [LOOM_LAYER_ATTENTION] = {2, {LOOM_OWNER_K, LOOM_OWNER_V}}},                                    \
     .variant = &var}

/* "key '<arch>.<suffix>': " followed by the formatted rest, as LOOM_E_FORMAT. */
int loom_qwen35_key_errorf(loom_error *err, const struct loom_hparams *hp, const char *suffix, const char *fmt, ...)
    LOOM_PRINTF_FORMAT(4, 5);

/* Dimensions are bounded so every derived size (products of up to three) fits in 64 bits. */
#define LOOM_Q35_MAX_DIM (1u << 20)
/* LOOM_OK when 1 <= v <= LOOM_Q35_MAX_DIM, else the key's error. */
int loom_qwen35_need_dim(const struct loom_hparams *hp, uint32_t v, const char *suffix, loom_error *err);

/* The layer plan: layer il is attention iff (il + 1) % full_attention_interval == 0, or as
 * attention.recurrent_layers marks it when the marks differ from that rule (hp->custom_plan). */
enum loom_layer_kind loom_qwen35_layer_kind(const struct loom_hparams *hp, uint32_t il);

/* The Gated DeltaNet conv kernels keep at most LOOM_OPS_MAX_CONV_KERNEL - 1 past inputs per channel. */
int loom_qwen35_check_circuits(const struct loom_hparams *hp, loom_error *err);

#endif
