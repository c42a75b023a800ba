/* arch_qwen35_common.c — what the qwen35 family's instances (arch_qwen35.c dense, arch_qwen35moe.c mixture of
 * experts) share: admission (required keys and their types, the relationships between hyper-parameters,
 * every tensor's name, shape and type: no missing, no extra; an attention layer's q/k/v split or fused, never
 * both; the tokenizer array lengths), the layer plan
 * (every full_attention_interval-th layer is attention, unless attention.recurrent_layers marks the layers
 * otherwise), and the geometry derived once from the keys (conv channels, weight shapes, state sizes, scratch
 * widths). Keys are read under the instance's name. Names and shapes follow llama.cpp's loaders
 * (src/models/qwen35.cpp, qwen35moe.cpp load_arch_hparams / load_arch_tensors, tensor names in
 * src/llama-arch.cpp). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kernels/ops.h"
#include "kernels/types.h"
#include "model/arch_qwen35_common.h"
#include "model/model.h"
#include "util/error.h"

/* ---- keys ------------------------------------------------------------------------------------ */

struct u32_key {
    const char *suffix; /* after "<arch>." */
    size_t field;       /* offsetof in struct loom_hparams */
};

static const struct u32_key u32_keys[] = {
    {"context_length", offsetof(struct loom_hparams, n_ctx_train)},
    {"embedding_length", offsetof(struct loom_hparams, n_embd)},
    {"block_count", offsetof(struct loom_hparams, n_layer)},
    {"feed_forward_length", offsetof(struct loom_hparams, n_ff)},
    {"attention.head_count", offsetof(struct loom_hparams, n_head)},
    {"attention.head_count_kv", offsetof(struct loom_hparams, n_head_kv)},
    {"attention.key_length", offsetof(struct loom_hparams, head_dim_k)},
    {"attention.value_length", offsetof(struct loom_hparams, head_dim_v)},
    {"rope.dimension_count", offsetof(struct loom_hparams, n_rot)},
    {"full_attention_interval", offsetof(struct loom_hparams, full_attn_interval)},
    {"ssm.conv_kernel", offsetof(struct loom_hparams, ssm_conv_kernel)},
    {"ssm.inner_size", offsetof(struct loom_hparams, ssm_inner)},
    {"ssm.state_size", offsetof(struct loom_hparams, ssm_head_dim)},
    {"ssm.time_step_rank", offsetof(struct loom_hparams, ssm_n_v_heads)},
    {"ssm.group_count", offsetof(struct loom_hparams, ssm_n_k_heads)},
};

static void arch_key(char *buf, size_t cap, const struct loom_hparams *hp, const char *suffix)
{
    snprintf(buf, cap, "%s.%s", hp->arch, suffix);
}

int loom_qwen35_key_errorf(loom_error *err, const struct loom_hparams *hp, const char *suffix, const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return loom_errorf(err, LOOM_E_FORMAT, "key '%s.%s': %s", hp->arch, suffix, what);
}

/* rope.dimension_sections: an array of 4 INT32 or UINT32 values, each >= 0. */
static int read_rope_sections(const struct loom_gguf *g, struct loom_hparams *hp, loom_error *err)
{
    char key[96];
    arch_key(key, sizeof key, hp, "rope.dimension_sections");
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, key);
    if (!kv)
        return loom_errorf(err, LOOM_E_FORMAT, "missing required key '%s'", key);
    if (kv->type != LOOM_GGUF_ARRAY || (kv->arr_type != LOOM_GGUF_INT32 && kv->arr_type != LOOM_GGUF_UINT32) ||
        kv->arr_n != 4)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "key '%s': expected an array of 4 INT32 or UINT32, found type %u (element type %u, "
                           "%" PRIu64 " elements)",
                           key, kv->type, kv->type == LOOM_GGUF_ARRAY ? kv->arr_type : 0,
                           kv->type == LOOM_GGUF_ARRAY ? kv->arr_n : 1);
    for (int i = 0; i < 4; i++) {
        int32_t v;
        memcpy(&v, kv->data + 4 * i, 4);
        if (kv->arr_type == LOOM_GGUF_INT32 && v < 0)
            return loom_errorf(err, LOOM_E_FORMAT, "key '%s': element %d is %d, expected >= 0", key, i, v);
        memcpy(&hp->rope_sections[i], kv->data + 4 * i, 4);
    }
    return LOOM_OK;
}

/* Layers [n_layer, block_count) are multi-token-prediction blocks loom does not run. Every layer has
 * tensors, so a block_count above the file's tensor count is refused here, before anything is sized by it. */
static int read_layer_counts(const struct loom_gguf *g, struct loom_hparams *hp, loom_error *err)
{
    char key[96];
    arch_key(key, sizeof key, hp, "nextn_predict_layers");
    hp->n_nextn = 0;
    int rc = loom_gguf_get_u32(g, key, 1, &hp->n_nextn, err);
    if (rc)
        return rc;
    if (hp->n_nextn >= hp->n_layer || hp->n_layer - hp->n_nextn > g->n_tensors)
        return loom_qwen35_key_errorf(err, hp, "block_count",
                                      "expected 1..%" PRIu64 " layers (at most one per tensor) plus %u nextn layers, "
                                      "found %u",
                                      g->n_tensors, hp->n_nextn, hp->n_layer);
    hp->n_layer -= hp->n_nextn;
    return LOOM_OK;
}

/* attention.recurrent_layers (optional: one BOOL per block, nextn blocks included) gives the layer plan when
 * present, as in the reference (qwen35.cpp load_arch_hparams). A plan the full_attention_interval rule also gives
 * changes nothing; any other is kept in hp (custom_plan, attn_layer_bits) for loom_qwen35_layer_kind. The marks
 * of nextn blocks, which loom does not run, are not read. */
static int read_recurrent_layers(const struct loom_gguf *g, struct loom_hparams *hp, loom_error *err)
{
    char key[96];
    arch_key(key, sizeof key, hp, "attention.recurrent_layers");
    const struct loom_gguf_kv *kv = NULL;
    int rc = loom_gguf_get_arr(g, key, LOOM_GGUF_BOOL, 1, &kv, err);
    if (rc || !kv)
        return rc;
    if (kv->arr_n != (uint64_t)hp->n_layer + hp->n_nextn)
        return loom_errorf(err, LOOM_E_FORMAT, "key '%s': expected %u elements (block_count), found %" PRIu64, key,
                           hp->n_layer + hp->n_nextn, kv->arr_n);
    if (kv->arr_n > LOOM_MAX_PLAN_LAYERS)
        return loom_errorf(err, LOOM_E_FORMAT, "key '%s': expected at most %d elements (llama.cpp's layer limit), "
                           "found %" PRIu64, key, LOOM_MAX_PLAN_LAYERS, kv->arr_n);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        int attn = kv->data[il] == 0;
        int by_rule = hp->full_attn_interval && (il + 1) % hp->full_attn_interval == 0;
        hp->attn_layer_bits[il / 8] |= (uint8_t)(attn << (il % 8));
        hp->custom_plan |= attn != by_rule;
    }
    if (!hp->custom_plan)
        memset(hp->attn_layer_bits, 0, sizeof hp->attn_layer_bits);
    return LOOM_OK;
}

/* The family's keys under "<arch>." (hp->arch; general.architecture was checked by loom_arch_admit). */
static int read_keys(const struct loom_qwen35_variant *v, const struct loom_gguf *g, struct loom_hparams *hp,
                     loom_error *err)
{
    int rc;
    char key[96];
    for (size_t i = 0; i < sizeof u32_keys / sizeof u32_keys[0]; i++) {
        int optional = v->n_ff_optional && u32_keys[i].field == offsetof(struct loom_hparams, n_ff);
        arch_key(key, sizeof key, hp, u32_keys[i].suffix);
        if ((rc = loom_gguf_get_u32(g, key, optional, (uint32_t *)((char *)hp + u32_keys[i].field), err)))
            return rc;
    }
    arch_key(key, sizeof key, hp, "attention.layer_norm_rms_epsilon");
    if ((rc = loom_gguf_get_f32(g, key, 0, &hp->rms_eps, err)))
        return rc;
    arch_key(key, sizeof key, hp, "rope.freq_base");
    if ((rc = loom_gguf_get_f32(g, key, 0, &hp->rope_freq_base, err)) || (rc = read_rope_sections(g, hp, err)) ||
        (rc = read_layer_counts(g, hp, err)) || (rc = read_recurrent_layers(g, hp, err)))
        return rc;
    return LOOM_OK;
}

/* ---- hyper-parameter relationships ------------------------------------------------------------ */

int loom_qwen35_need_dim(const struct loom_hparams *hp, uint32_t v, const char *suffix, loom_error *err)
{
    if (v && v <= LOOM_Q35_MAX_DIM)
        return LOOM_OK;
    return loom_qwen35_key_errorf(err, hp, suffix, "expected 1..%u, found %u", LOOM_Q35_MAX_DIM, v);
}

/* ---- what the tensors say ------------------------------------------------------------------------
 * A relationship between keys that does not hold (value_length = key_length, head_count_kv dividing head_count,
 * inner_size = time_step_rank x state_size, ...) names the key that is wrong: the one that disagrees with the
 * size the file's tensors give it (its witness, read from the first layer of the kind that has the tensor);
 * when no witness disagrees (or the tensors are absent) the error names the key it always named. */

static const struct loom_gguf_tensor *layer_tensor(const struct loom_gguf *g, uint32_t il, const char *suffix)
{
    char name[128];
    snprintf(name, sizeof name, "blk.%u.%s", il, suffix);
    return loom_gguf_find_tensor(g, name);
}

/* The kind of layer il's tensors show: attention (attn_q.weight, or the fused attn_qkv.weight next to
 * attn_output.weight; no ssm_conv1d.weight), recurrent (the reverse), or -1 (neither or both: left to the tensor
 * checks). */
static int shown_kind(const struct loom_gguf *g, uint32_t il)
{
    int att = layer_tensor(g, il, "attn_q.weight") != NULL ||
              (layer_tensor(g, il, "attn_qkv.weight") && layer_tensor(g, il, "attn_output.weight"));
    int rec = layer_tensor(g, il, "ssm_conv1d.weight") != NULL;
    return att == rec ? -1 : att ? LOOM_LAYER_ATTENTION : LOOM_LAYER_RECURRENT;
}

static uint32_t first_layer(const struct loom_hparams *hp, enum loom_layer_kind kind)
{
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if (loom_qwen35_layer_kind(hp, il) == kind)
            return il;
    return UINT32_MAX;
}

/* A key the tensors measure, and what they say. */
enum witness_key { W_KEY_LENGTH, W_VALUE_LENGTH, W_HEAD_COUNT, W_HEAD_COUNT_KV, W_STATE_SIZE, W_TIME_STEP_RANK,
                   W_INNER_SIZE, W_GROUP_COUNT };

static const char *const witness_suffix[] = {
    "attention.key_length", "attention.value_length", "attention.head_count", "attention.head_count_kv",
    "ssm.state_size",       "ssm.time_step_rank",     "ssm.inner_size",       "ssm.group_count",
};

struct witness {
    uint64_t value; /* 0: the tensors say nothing */
    char what[96];  /* where it comes from */
};

/* ne[axis] of blk.il.suffix (0 when absent or il is no layer), divided by div (0 unless it divides). */
static uint64_t measure(const struct loom_gguf *g, uint32_t il, const char *suffix, int axis, uint64_t sub,
                        uint64_t div, struct witness *w)
{
    const struct loom_gguf_tensor *t = il == UINT32_MAX ? NULL : layer_tensor(g, il, suffix);
    if (!t || !div || t->ne[axis] <= sub || (t->ne[axis] - sub) % div)
        return 0;
    snprintf(w->what, sizeof w->what, "blk.%u.%s", il, suffix);
    return (t->ne[axis] - sub) / div;
}

static struct witness witness_of(const struct loom_gguf *g, const struct loom_hparams *hp, enum witness_key k)
{
    struct witness w = {0, ""}, tmp;
    uint32_t att = first_layer(hp, LOOM_LAYER_ATTENTION), rec = first_layer(hp, LOOM_LAYER_RECURRENT);
    uint64_t dk = measure(g, att, "attn_k_norm.weight", 0, 0, 1, &tmp);
    uint64_t kv_heads = measure(g, att, "attn_k.weight", 1, 0, dk, &tmp);
    uint64_t d = measure(g, rec, "ssm_norm.weight", 0, 0, 1, &tmp), inner = measure(g, rec, "attn_gate.weight", 1, 0,
                                                                                     1, &tmp);
    switch (k) {
    case W_KEY_LENGTH: w.value = measure(g, att, "attn_k_norm.weight", 0, 0, 1, &w); break;
    case W_VALUE_LENGTH: w.value = measure(g, att, "attn_v.weight", 1, 0, kv_heads, &w); break;
    case W_HEAD_COUNT: w.value = measure(g, att, "attn_q.weight", 1, 0, 2 * dk, &w); break;
    case W_HEAD_COUNT_KV: w.value = kv_heads ? measure(g, att, "attn_k.weight", 1, 0, dk, &w) : 0; break;
    case W_STATE_SIZE: w.value = measure(g, rec, "ssm_norm.weight", 0, 0, 1, &w); break;
    case W_TIME_STEP_RANK: w.value = measure(g, rec, "ssm_a", 0, 0, 1, &w); break;
    case W_INNER_SIZE: w.value = measure(g, rec, "attn_gate.weight", 1, 0, 1, &w); break;
    case W_GROUP_COUNT: w.value = inner ? measure(g, rec, "attn_qkv.weight", 1, inner, 2 * d, &w) : 0; break;
    }
    return w;
}

/* The first of keys[n] (values vals) whose witness disagrees with it: its error, "expected W (from TENSOR; rule),
 * found V"; LOOM_OK when none does. */
static int blame(const struct loom_gguf *g, const struct loom_hparams *hp, const enum witness_key *keys,
                 const uint32_t *vals, int n, const char *rule, loom_error *err)
{
    for (int i = 0; i < n; i++) {
        struct witness w = witness_of(g, hp, keys[i]);
        if (w.value && w.value != vals[i])
            return loom_qwen35_key_errorf(err, hp, witness_suffix[keys[i]],
                                          "expected %" PRIu64 " (from %s's shape; %s), found %u", w.value, w.what,
                                          rule, vals[i]);
    }
    return LOOM_OK;
}

/* full_attention_interval against the file: a layer whose tensors are clearly the other kind's than the plan
 * gives it is refused here, naming the key and the interval the tensors imply, instead of as a missing tensor.
 * Every interval >= 1 is a plan loom runs (1: every layer attention, no Gated DeltaNet layer; above the layer
 * count: no attention layer), as the reference's qwen35 graph does (is_recr per layer, one hybrid memory); so
 * is any plan attention.recurrent_layers gives, whose disagreement with the tensors names that key. */
static int check_layer_plan(const struct loom_gguf *g, const struct loom_hparams *hp, loom_error *err)
{
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        int shown = shown_kind(g, il), kind = (int)loom_qwen35_layer_kind(hp, il);
        if (shown < 0 || shown == kind)
            continue;
        const char *const names[] = {"recurrent (Gated DeltaNet)", "attention"};
        if (hp->custom_plan)
            return loom_qwen35_key_errorf(err, hp, "attention.recurrent_layers",
                                          "layer %u is marked %s, but it has the tensors of a%s %s layer", il,
                                          names[kind], shown == LOOM_LAYER_ATTENTION ? "n" : "", names[shown]);
        uint32_t first = UINT32_MAX;
        for (uint32_t j = 0; j < hp->n_layer && first == UINT32_MAX; j++)
            if (shown_kind(g, j) == LOOM_LAYER_ATTENTION)
                first = j;
        char expected[96];
        if (first == UINT32_MAX)
            snprintf(expected, sizeof expected, "a value above block_count %u (no layer has attention tensors)",
                     hp->n_layer);
        else
            snprintf(expected, sizeof expected, "%u (the first layer with attention tensors is %u)", first + 1,
                     first);
        return loom_qwen35_key_errorf(err, hp, "full_attention_interval",
                                      "expected %s, found %u, which makes layer %u %s, but it has the tensors of "
                                      "a%s %s layer",
                                      expected, hp->full_attn_interval, il, names[kind],
                                      shown == LOOM_LAYER_ATTENTION ? "n" : "", names[shown]);
    }
    return LOOM_OK;
}

/* Every rotated pair must take the text position: with interleaved multi-section RoPE a pair whose sector
 * falls in no t/h/w section uses the 4th position, which is 0 for text (llama-graph.cpp), so it would not
 * rotate; loom rotates all n_rot/2 pairs and therefore requires full coverage (ggml-cpu ops.cpp mrope). */
static int check_rope_sections(const struct loom_hparams *hp, loom_error *err)
{
    const uint32_t *s = hp->rope_sections;
    uint64_t sum = (uint64_t)s[0] + s[1] + s[2] + s[3];
    if (sum == 0 || sum > hp->head_dim_k || (s[0] == 0 && s[1] == 0 && s[2] == 0))
        return loom_qwen35_key_errorf(err, hp, "rope.dimension_sections",
                                      "[%u, %u, %u, %u] must have a nonzero t/h/w section and sum to 1..%u "
                                      "(key_length)",
                                      s[0], s[1], s[2], s[3], hp->head_dim_k);
    for (uint64_t i = 0; i < hp->n_rot / 2; i++) {
        uint64_t sec = i % sum, m = sec % 3;
        if (!(sec < 3 * (uint64_t)s[m]))
            return loom_qwen35_key_errorf(err, hp, "rope.dimension_sections",
                                          "[%u, %u, %u, %u] leaves rotary pair %" PRIu64
                                          " of %u without a text position section",
                                          s[0], s[1], s[2], s[3], i, hp->n_rot / 2);
    }
    return LOOM_OK;
}

static int check_attention_keys(const struct loom_gguf *g, const struct loom_hparams *hp, loom_error *err)
{
    int rc;
    if (hp->n_head % hp->n_head_kv) {
        const enum witness_key k[] = {W_HEAD_COUNT, W_HEAD_COUNT_KV};
        const uint32_t v[] = {hp->n_head, hp->n_head_kv};
        if ((rc = blame(g, hp, k, v, 2, "head_count_kv must divide head_count", err)))
            return rc;
        return loom_qwen35_key_errorf(err, hp, "attention.head_count_kv", "%u does not divide head_count %u",
                                      hp->n_head_kv, hp->n_head);
    }
    if (hp->head_dim_k != hp->head_dim_v) {
        const enum witness_key k[] = {W_KEY_LENGTH, W_VALUE_LENGTH};
        const uint32_t v[] = {hp->head_dim_k, hp->head_dim_v};
        if ((rc = blame(g, hp, k, v, 2, "key_length must equal value_length", err)))
            return rc;
        return loom_qwen35_key_errorf(err, hp, "attention.value_length", "expected %u (= key_length), found %u",
                                      hp->head_dim_k, hp->head_dim_v);
    }
    if (hp->n_rot == 0 || hp->n_rot % 2 || hp->n_rot > hp->head_dim_k) {
        const enum witness_key k[] = {W_KEY_LENGTH};
        if (hp->n_rot && hp->n_rot % 2 == 0 && (rc = blame(g, hp, k, &hp->head_dim_k, 1,
                                                           "rope.dimension_count must not exceed it", err)))
            return rc;
        return loom_qwen35_key_errorf(err, hp, "rope.dimension_count",
                                      "expected an even value in 2..%u (key_length), found %u", hp->head_dim_k,
                                      hp->n_rot);
    }
    if (!(hp->rms_eps > 0.0f) || !isfinite(hp->rms_eps))
        return loom_qwen35_key_errorf(err, hp, "attention.layer_norm_rms_epsilon",
                                      "expected a finite value > 0, found %g", (double)hp->rms_eps);
    if (!(hp->rope_freq_base > 0.0f) || !isfinite(hp->rope_freq_base))
        return loom_qwen35_key_errorf(err, hp, "rope.freq_base", "expected a finite value > 0, found %g",
                                      (double)hp->rope_freq_base);
    return check_rope_sections(hp, err);
}

static int check_ssm_keys(const struct loom_gguf *g, const struct loom_hparams *hp, loom_error *err)
{
    int rc;
    if ((uint64_t)hp->ssm_n_v_heads * hp->ssm_head_dim != hp->ssm_inner) {
        const enum witness_key k[] = {W_TIME_STEP_RANK, W_STATE_SIZE, W_INNER_SIZE};
        const uint32_t v[] = {hp->ssm_n_v_heads, hp->ssm_head_dim, hp->ssm_inner};
        if ((rc = blame(g, hp, k, v, 3, "inner_size must be time_step_rank x state_size", err)))
            return rc;
        return loom_qwen35_key_errorf(err, hp, "ssm.inner_size",
                                      "expected time_step_rank %u x state_size %u = %" PRIu64 ", found %u",
                                      hp->ssm_n_v_heads, hp->ssm_head_dim,
                                      (uint64_t)hp->ssm_n_v_heads * hp->ssm_head_dim, hp->ssm_inner);
    }
    if (hp->ssm_n_v_heads % hp->ssm_n_k_heads) {
        const enum witness_key k[] = {W_TIME_STEP_RANK, W_GROUP_COUNT};
        const uint32_t v[] = {hp->ssm_n_v_heads, hp->ssm_n_k_heads};
        if ((rc = blame(g, hp, k, v, 2, "group_count must divide time_step_rank", err)))
            return rc;
        return loom_qwen35_key_errorf(err, hp, "ssm.group_count", "%u does not divide time_step_rank %u",
                                      hp->ssm_n_k_heads, hp->ssm_n_v_heads);
    }
    return LOOM_OK;
}

static int check_hparams(const struct loom_qwen35_variant *v, const struct loom_gguf *g, const struct loom_hparams *hp,
                         loom_error *err)
{
    static const char *const dims[] = {"embedding_length", "feed_forward_length", "attention.head_count",
                                       "attention.head_count_kv", "attention.key_length", "attention.value_length",
                                       "ssm.conv_kernel", "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank",
                                       "ssm.group_count"};
    const uint32_t vals[] = {hp->n_embd,          hp->n_ff,         hp->n_head,        hp->n_head_kv,
                             hp->head_dim_k,      hp->head_dim_v,   hp->ssm_conv_kernel, hp->ssm_inner,
                             hp->ssm_head_dim,    hp->ssm_n_v_heads, hp->ssm_n_k_heads};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        int absent = i == 1 && v->n_ff_optional && vals[i] == 0; /* an optional feed_forward_length */
        int rc = absent ? LOOM_OK : loom_qwen35_need_dim(hp, vals[i], dims[i], err);
        if (rc)
            return rc;
    }
    if (!hp->n_ctx_train || !hp->full_attn_interval)
        return loom_qwen35_key_errorf(err, hp, hp->n_ctx_train ? "full_attention_interval" : "context_length",
                                      "expected > 0, found 0");
    int rc = check_layer_plan(g, hp, err);
    if (!rc)
        rc = check_attention_keys(g, hp, err);
    return rc ? rc : check_ssm_keys(g, hp, err);
}

/* ---- layer plan, geometry -------------------------------------------------------------------- */

enum loom_layer_kind loom_qwen35_layer_kind(const struct loom_hparams *hp, uint32_t il)
{
    if (hp->custom_plan)
        return hp->attn_layer_bits[il / 8] >> (il % 8) & 1 ? LOOM_LAYER_ATTENTION : LOOM_LAYER_RECURRENT;
    return (il + 1) % hp->full_attn_interval == 0 ? LOOM_LAYER_ATTENTION : LOOM_LAYER_RECURRENT;
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Every size derived from the keys, in one place; nonzero when a state size overflows 64 bits (the
 * dimensions themselves are bounded by LOOM_Q35_MAX_DIM and experts by LOOM_MAX_EXPERTS, so the weight
 * shapes fit). The FFN scratch width is the widest of the dense FFN, the shared expert and one routed
 * expert's fused gate and up rows (the MoE widths are 0 in a dense model). */
static int derive_geometry(const struct loom_arch *arch, const struct loom_hparams *hp, struct loom_geometry *geo)
{
    memset(geo, 0, sizeof *geo);
    uint64_t d = hp->ssm_head_dim, Hv = hp->ssm_n_v_heads, Hkv = hp->n_head_kv, H = hp->n_head;
    uint64_t chan = 2 * d * hp->ssm_n_k_heads + hp->ssm_inner, kv_k = Hkv * hp->head_dim_k, kv_v = Hkv * hp->head_dim_v;
    uint64_t ffn = max3(hp->n_ff, hp->n_ff_shexp, 2 * (uint64_t)hp->n_ff_exp);
    geo->conv_channels = chan;
    uint64_t *dim = geo->dim;
    dim[D_ONE] = 1, dim[D_EMBD] = hp->n_embd, dim[D_FF] = hp->n_ff, dim[D_CONV_CH] = chan;
    dim[D_CONV_K] = hp->ssm_conv_kernel, dim[D_INNER] = hp->ssm_inner, dim[D_V_HEADS] = Hv, dim[D_SSM_HEAD] = d;
    dim[D_Q_ROWS] = (uint64_t)hp->head_dim_k * H * 2, dim[D_K_ROWS] = kv_k, dim[D_V_ROWS] = kv_v;
    dim[D_ATTN_IN] = (uint64_t)hp->head_dim_k * H, dim[D_HEAD_K] = hp->head_dim_k;
    dim[D_EXPERT] = hp->n_expert, dim[D_FF_EXP] = hp->n_ff_exp, dim[D_FF_EXP2] = 2 * (uint64_t)hp->n_ff_exp;
    dim[D_FF_SHEXP] = hp->n_ff_shexp, dim[D_QKV_ROWS] = dim[D_Q_ROWS] + kv_k + kv_v;
    uint64_t conv, mat;
    int ovf = __builtin_mul_overflow(chan, (uint64_t)(hp->ssm_conv_kernel - 1) * 4, &conv);
    ovf |= __builtin_mul_overflow(d * d, Hv * 4, &mat);
    geo->owner[LOOM_OWNER_CONV] = (struct loom_owner_shape){
        LOOM_TYPE_F32, -1, {(int64_t)chan, (int64_t)hp->ssm_conv_kernel - 1, 1}, conv};
    geo->owner[LOOM_OWNER_RECURRENT] = (struct loom_owner_shape){
        LOOM_TYPE_F32, -1, {(int64_t)Hv, (int64_t)d, (int64_t)d}, mat};
    geo->owner[LOOM_OWNER_K] = (struct loom_owner_shape){
        LOOM_TYPE_F16, 1, {(int64_t)Hkv, 0, hp->head_dim_k}, kv_k * 2};
    geo->owner[LOOM_OWNER_V] = (struct loom_owner_shape){
        LOOM_TYPE_F16, 2, {(int64_t)Hkv, hp->head_dim_v, 0}, kv_v * 2};
    geo->scratch = (struct loom_scratch_widths){
        .a = max3(chan, 2 * H * hp->head_dim_k, ffn), .b = max3(chan, kv_k, ffn),
        .c = max3(hp->ssm_inner, kv_v, 0), .o = max3(hp->ssm_inner, H * hp->head_dim_v, 0), .gates = Hv,
        .rope = hp->n_rot, .head_dim = hp->head_dim_k, .head_dim_v = hp->head_dim_v, .experts = hp->n_expert,
        .slots = hp->n_expert_used, .expert_ff = hp->n_ff_exp};
    uint64_t fixed;
    ovf |= __builtin_add_overflow(conv, mat, &fixed); /* one recurrent layer's state */
    return ovf || loom_geometry_state_totals(arch, hp, geo);
}

/* ---- tensors --------------------------------------------------------------------------------- */

/* Tensors of a multi-token-prediction block besides its FFN (the variant's): accepted by name, not used. */
static const char *const nextn_suffixes[] = {
    "attn_norm.weight",          "post_attention_norm.weight",    "attn_q.weight",
    "attn_k.weight",             "attn_v.weight",                 "attn_qkv.weight",
    "attn_output.weight",        "attn_q_norm.weight",            "attn_k_norm.weight",
    "nextn.eh_proj.weight",      "nextn.enorm.weight",            "nextn.hnorm.weight",
    "nextn.embed_tokens.weight", "nextn.shared_head_head.weight", "nextn.shared_head_norm.weight",
};

static int check_global_tensors(const struct loom_gguf *g, struct loom_hparams *hp, loom_error *err)
{
    const struct loom_gguf_tensor *emb = loom_gguf_find_tensor(g, "token_embd.weight");
    char parts[48];
    if (!emb)
        return loom_errorf(err, LOOM_E_FORMAT, "missing tensor 'token_embd.weight'%s",
                           loom_gguf_in_no_part(g, parts, sizeof parts));
    if (emb->ne[1] == 0 || emb->ne[1] > INT32_MAX)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "tensor 'token_embd.weight': expected 1..%d rows (vocabulary), found %" PRIu64, INT32_MAX,
                           emb->ne[1]);
    hp->n_vocab = (uint32_t)emb->ne[1];
    int rc = loom_arch_check_tensor(emb, "token_embd.weight", hp->n_embd, hp->n_vocab, 1, 0, err);
    if (!rc)
        rc = loom_arch_expect_tensor(g, "output_norm.weight", hp->n_embd, 1, 1, 1, err);
    if (rc)
        return rc;
    hp->tied_output = loom_gguf_find_tensor(g, "output.weight") == NULL;
    if (hp->tied_output)
        return LOOM_OK;
    return loom_arch_expect_tensor(g, "output.weight", hp->n_embd, hp->n_vocab, 1, 0, err);
}

static int in_list(struct loom_gguf_str name, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (loom_gguf_str_eq(name, list[k]))
            return 1;
    return 0;
}

/* Whether a file tensor is one admission expects (or a known nextn tensor). */
static int tensor_expected(const struct loom_arch *arch, const struct loom_hparams *hp, struct loom_gguf_str name)
{
    const struct loom_qwen35_variant *v = arch->variant;
    if (loom_gguf_str_eq(name, "token_embd.weight") || loom_gguf_str_eq(name, "output_norm.weight") ||
        (!hp->tied_output && loom_gguf_str_eq(name, "output.weight")))
        return 1;
    if (name.len < 6 || memcmp(name.ptr, "blk.", 4) || name.ptr[4] < '0' || name.ptr[4] > '9')
        return 0;
    uint64_t il = 0;
    size_t i = 4;
    for (; i < name.len && name.ptr[i] >= '0' && name.ptr[i] <= '9' && il <= UINT32_MAX; i++)
        il = il * 10 + (uint64_t)(name.ptr[i] - '0');
    if (i >= name.len || name.ptr[i] != '.' || il >= (uint64_t)hp->n_layer + hp->n_nextn ||
        (name.ptr[4] == '0' && i > 5))
        return 0;
    struct loom_gguf_str suffix = {name.len - i - 1, name.ptr + i + 1};
    if (il >= hp->n_layer)
        return in_list(suffix, nextn_suffixes, sizeof nextn_suffixes / sizeof nextn_suffixes[0]) ||
               in_list(suffix, v->nextn_ffn, (size_t)v->n_nextn_ffn);
    return loom_arch_layer_expects(arch, hp, (uint32_t)il, suffix);
}

static int check_no_extra(const struct loom_arch *arch, const struct loom_gguf *g, const struct loom_hparams *hp,
                          loom_error *err)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct loom_gguf_str n = g->tensors[i].name;
        if (!tensor_expected(arch, hp, n))
            return loom_errorf(err, LOOM_E_FORMAT,
                               "unexpected tensor '%.*s' (not part of a %s model with %u layers, "
                               "full_attention_interval %u)",
                               (int)(n.len < 96 ? n.len : 96), n.ptr, hp->arch, hp->n_layer, hp->full_attn_interval);
    }
    return LOOM_OK;
}

/* An attention layer's q/k/v projection is attn_q, attn_k and attn_v, or the fused attn_qkv, never a mixture
 * (llama-model.cpp create_tensor_qkv takes attn_qkv when the file has it and then reads none of the three; the
 * converter writes it with --fuse-qkv). The table checks each present tensor's shape. The circuit multiplies
 * the fused matrix once into scratch o and copies each token's rows out of it (runtime/qwen35.c), so a file with
 * a fused layer widens o to the fused rows. */
static int admit_qkv_forms(const struct loom_gguf *g, const struct loom_hparams *hp, struct loom_geometry *geo,
                           loom_error *err)
{
    static const char *const split[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight"};
    char fused[64], name[64], parts[48];
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (loom_qwen35_layer_kind(hp, il) != LOOM_LAYER_ATTENTION)
            continue;
        snprintf(fused, sizeof fused, "blk.%u.attn_qkv.weight", il);
        int has_fused = loom_gguf_find_tensor(g, fused) != NULL;
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof name, "blk.%u.%s", il, split[i]);
            int has = loom_gguf_find_tensor(g, name) != NULL;
            if (has && has_fused)
                return loom_errorf(err, LOOM_E_FORMAT,
                                   "tensor '%s': expected absent next to the fused '%s', found present", name, fused);
            if (!has && !has_fused)
                return loom_errorf(err, LOOM_E_FORMAT, "missing tensor '%s' (or the fused '%s')%s", name, fused,
                                   loom_gguf_in_no_part(g, parts, sizeof parts));
        }
        if (has_fused && geo->scratch.o < geo->dim[D_QKV_ROWS])
            geo->scratch.o = geo->dim[D_QKV_ROWS];
    }
    return LOOM_OK;
}

/* ---- tokenizer ------------------------------------------------------------------------------- */

static int check_tokenizer(const struct loom_gguf *g, const struct loom_hparams *hp, loom_error *err)
{
    const struct loom_gguf_kv *tokens = NULL, *types = NULL, *scores = NULL;
    int rc = loom_gguf_get_arr(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, 0, &tokens, err);
    if (rc)
        return rc;
    if (tokens->arr_n == 0 || tokens->arr_n > hp->n_vocab)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "key 'tokenizer.ggml.tokens': expected 1..%u strings (token_embd rows), found %" PRIu64,
                           hp->n_vocab, tokens->arr_n);
    if ((rc = loom_gguf_get_arr(g, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, 1, &types, err)) ||
        (rc = loom_gguf_get_arr(g, "tokenizer.ggml.scores", LOOM_GGUF_FLOAT32, 1, &scores, err)))
        return rc;
    if (types && types->arr_n != tokens->arr_n)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "key 'tokenizer.ggml.token_type': expected %" PRIu64 " elements (one per token), "
                           "found %" PRIu64,
                           tokens->arr_n, types->arr_n);
    if (scores && scores->arr_n != tokens->arr_n)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "key 'tokenizer.ggml.scores': expected %" PRIu64 " elements (one per token), "
                           "found %" PRIu64,
                           tokens->arr_n, scores->arr_n);
    return LOOM_OK;
}

/* ---- admission ------------------------------------------------------------------------------- */

int loom_qwen35_admit(const struct loom_arch *arch, const struct loom_gguf *g, struct loom_hparams *hp,
                      struct loom_geometry *geo, loom_error *err)
{
    const struct loom_qwen35_variant *v = arch->variant;
    memset(hp, 0, sizeof *hp);
    snprintf(hp->arch, sizeof hp->arch, "%s", arch->name);
    int rc = read_keys(v, g, hp, err);
    if (!rc)
        rc = check_hparams(v, g, hp, err);
    if (!rc && v->read_keys)
        rc = v->read_keys(g, hp, err);
    if (!rc && derive_geometry(arch, hp, geo))
        rc = loom_errorf(err, LOOM_E_FORMAT, "hyper-parameters: per-sequence state size overflows 64 bits");
    if (!rc)
        rc = check_global_tensors(g, hp, err);
    if (!rc)
        rc = admit_qkv_forms(g, hp, geo, err);
    if (!rc)
        rc = loom_arch_check_layer_tensors(arch, g, hp, geo, err);
    if (!rc && v->check_layers)
        rc = v->check_layers(g, hp, err);
    if (!rc)
        rc = check_no_extra(arch, g, hp, err);
    if (!rc)
        rc = check_tokenizer(g, hp, err);
    return rc;
}

int loom_qwen35_check_circuits(const struct loom_hparams *hp, loom_error *err)
{
    if (hp->ssm_conv_kernel < 1 || hp->ssm_conv_kernel > LOOM_OPS_MAX_CONV_KERNEL)
        return loom_errorf(err, LOOM_E_FORMAT, "%s.ssm.conv_kernel: expected 1..%d, found %u", hp->arch,
                           LOOM_OPS_MAX_CONV_KERNEL, hp->ssm_conv_kernel);
    return LOOM_OK;
}
