/* arch_qwen35.c — the qwen35 (dense) architecture instance: its weight table (llama.cpp qwen35.cpp
 * load_block_trunk) and the FFN tensors of its nextn blocks; admission, the layer plan, the state owners and
 * the geometry are the family's (arch_qwen35_common.c). */
#include "model/arch_qwen35_common.h"
#include "model/model.h"

#define REC LOOM_Q35_REC
#define ATT LOOM_Q35_ATT
#define MAT LOOM_Q35_MAT
#define VEC LOOM_Q35_VEC

/* The tensors of each layer kind. Admission checks a layer's rows in this order; the model identity digest
 * (runtime/state_file.c) hashes every matrix row, then every vector row, in this order. */
static const struct loom_weight_row weights[] = {
    VEC("attn_norm.weight", REC | ATT, D_EMBD, D_ONE, attn_norm),
    VEC("post_attention_norm.weight", REC | ATT, D_EMBD, D_ONE, post_norm),
    MAT("ffn_gate.weight", REC | ATT, D_EMBD, D_FF, ffn_gate),
    MAT("ffn_up.weight", REC | ATT, D_EMBD, D_FF, ffn_up),
    MAT("ffn_down.weight", REC | ATT, D_FF, D_EMBD, ffn_down),
    LOOM_Q35_GDN_ROWS,
    LOOM_Q35_ATTN_ROWS,
};

static const char *const nextn_ffn[] = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};

static const struct loom_qwen35_variant variant = {
    .nextn_ffn = nextn_ffn,
    .n_nextn_ffn = (int)(sizeof nextn_ffn / sizeof nextn_ffn[0]),
};

const struct loom_arch loom_arch_qwen35 = LOOM_Q35_ARCH("qwen35", weights, variant);
