/* arch_qwen35moe.c — the qwen35moe (mixture of experts) architecture instance: the expert keys (expert_count,
 * expert_used_count, expert_feed_forward_length, expert_shared_feed_forward_length; expert groups refused),
 * its weight table (the family's Gated DeltaNet and attention rows; a router, routed experts as 3-D tensors
 * with gate and up separate or fused, and a gated shared expert in every layer), the rule that a layer has
 * exactly one form of gate/up experts, and the FFN tensors of its nextn blocks. Admission, the layer plan and
 * the geometry are the family's (arch_qwen35_common.c). Keys and shapes follow llama.cpp's qwen35moe.cpp
 * load_arch_hparams / load_arch_tensors and llama-model.cpp's generic expert keys. */
#include <stdio.h>

#include "model/arch_qwen35_common.h"
#include "model/model.h"
#include "util/error.h"

#define ALL LOOM_Q35_ALL
#define MAT LOOM_Q35_MAT
#define VEC LOOM_Q35_VEC
#define EXPS LOOM_Q35_EXPS

/* The tensors of every layer (both kinds have the same MoE FFN). Admission checks a layer's rows in this
 * order; the model identity digest hashes every matrix and expert row, then every vector row, in this order. */
static const struct loom_weight_row weights[] = {
    VEC("attn_norm.weight", ALL, D_EMBD, D_ONE, attn_norm),
    VEC("post_attention_norm.weight", ALL, D_EMBD, D_ONE, post_norm),
    LOOM_Q35_GDN_ROWS,
    LOOM_Q35_ATTN_ROWS,
    MAT("ffn_gate_inp.weight", ALL, D_EMBD, D_EXPERT, ffn_gate_inp),
    EXPS("ffn_gate_exps.weight", D_EMBD, D_FF_EXP, 0, ffn_gate_exps),
    EXPS("ffn_up_exps.weight", D_EMBD, D_FF_EXP, 0, ffn_up_exps),
    EXPS("ffn_gate_up_exps.weight", D_EMBD, D_FF_EXP2, 0, ffn_gate_up_exps),
    EXPS("ffn_down_exps.weight", D_FF_EXP, D_EMBD, 1, ffn_down_exps),
    MAT("ffn_gate_inp_shexp.weight", ALL, D_EMBD, D_ONE, ffn_gate_inp_shexp),
    MAT("ffn_gate_shexp.weight", ALL, D_EMBD, D_FF_SHEXP, ffn_gate_shexp),
    MAT("ffn_up_shexp.weight", ALL, D_EMBD, D_FF_SHEXP, ffn_up_shexp),
    MAT("ffn_down_shexp.weight", ALL, D_FF_SHEXP, D_EMBD, ffn_down_shexp),
};

/* The expert keys; every one required, as a single UINT32 (a per-layer array is refused by type). */
static int read_keys(const struct loom_gguf *g, struct loom_hparams *hp, loom_error *err)
{
    static const struct {
        const char *suffix;
        size_t field;
    } keys[] = {
        {"expert_count", offsetof(struct loom_hparams, n_expert)},
        {"expert_used_count", offsetof(struct loom_hparams, n_expert_used)},
        {"expert_feed_forward_length", offsetof(struct loom_hparams, n_ff_exp)},
        {"expert_shared_feed_forward_length", offsetof(struct loom_hparams, n_ff_shexp)},
    };
    char key[96];
    int rc;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", hp->arch, keys[i].suffix);
        if ((rc = loom_gguf_get_u32(g, key, 0, (uint32_t *)((char *)hp + keys[i].field), err)))
            return rc;
    }
    if (hp->n_expert == 0 || hp->n_expert > LOOM_MAX_EXPERTS)
        return loom_qwen35_key_errorf(err, hp, "expert_count", "expected 1..%d, found %u", LOOM_MAX_EXPERTS,
                                      hp->n_expert);
    if (hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
        return loom_qwen35_key_errorf(err, hp, "expert_used_count", "expected 1..%u (expert_count), found %u",
                                      hp->n_expert, hp->n_expert_used);
    if ((rc = loom_qwen35_need_dim(hp, hp->n_ff_exp, "expert_feed_forward_length", err)) ||
        (rc = loom_qwen35_need_dim(hp, hp->n_ff_shexp, "expert_shared_feed_forward_length", err)))
        return rc;
    /* Expert groups (llama-graph.cpp build_moe_ffn, n_expert_groups > 1) would select among groups first. */
    uint32_t groups = 0;
    snprintf(key, sizeof key, "%s.expert_group_count", hp->arch);
    if ((rc = loom_gguf_get_u32(g, key, 1, &groups, err)))
        return rc;
    if (groups > 1 || (groups == 1 && hp->n_expert == 1))
        return loom_qwen35_key_errorf(err, hp, "expert_group_count",
                                      "expected 0 or 1 below expert_count %u (loom routes without expert groups), "
                                      "found %u",
                                      hp->n_expert, groups);
    return LOOM_OK;
}

/* Each layer has its gate and up experts either fused (ffn_gate_up_exps) or as the two separate tensors,
 * never both (llama-model.cpp create_tensor_gate_up_exps). */
static int check_layers(const struct loom_gguf *g, const struct loom_hparams *hp, loom_error *err)
{
    char fused[64], gate[64], up[64], parts[48];
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        snprintf(fused, sizeof fused, "blk.%u.ffn_gate_up_exps.weight", il);
        snprintf(gate, sizeof gate, "blk.%u.ffn_gate_exps.weight", il);
        snprintf(up, sizeof up, "blk.%u.ffn_up_exps.weight", il);
        int has_fused = loom_gguf_find_tensor(g, fused) != NULL, has_gate = loom_gguf_find_tensor(g, gate) != NULL;
        int has_up = loom_gguf_find_tensor(g, up) != NULL;
        if (has_fused && (has_gate || has_up))
            return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': expected absent next to the fused '%s', found present",
                               has_gate ? gate : up, fused);
        if (!has_fused && !(has_gate && has_up))
            return loom_errorf(err, LOOM_E_FORMAT, "missing tensor '%s' (or the fused '%s')%s", has_gate ? up : gate,
                               fused, loom_gguf_in_no_part(g, parts, sizeof parts));
    }
    return LOOM_OK;
}

static const char *const nextn_ffn[] = {
    "ffn_gate_inp.weight",       "ffn_gate_exps.weight",  "ffn_up_exps.weight",  "ffn_gate_up_exps.weight",
    "ffn_down_exps.weight",      "ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
    "ffn_down_shexp.weight",
};

/* feed_forward_length is optional: llama.cpp reads it optionally and converters write it only when the
 * source config has one; no qwen35moe tensor is sized by it. */
static const struct loom_qwen35_variant variant = {
    .n_ff_optional = 1,
    .read_keys = read_keys,
    .check_layers = check_layers,
    .nextn_ffn = nextn_ffn,
    .n_nextn_ffn = (int)(sizeof nextn_ffn / sizeof nextn_ffn[0]),
};

const struct loom_arch loom_arch_qwen35moe = LOOM_Q35_ARCH("qwen35moe", weights, variant);
