/* qwen35_describe.c — loom_model_describe (loom.h, "Model files"): admission of a file without loading its
 * weights, and its description in the qwen35 family's terms: hyper-parameters as its keys name them, the layer
 * plan, the state each kind of layer owns, whose sizes come from the geometry its admission derived
 * (arch_qwen35_common.c), and for qwen35moe the expert plan (experts, used per token, bytes per expert). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

static void desc_item(loom_desc_item *it, const char *name, const char *fmt, ...) LOOM_PRINTF_FORMAT(3, 4);
static void desc_item(loom_desc_item *it, const char *name, const char *fmt, ...)
{
    va_list ap;
    snprintf(it->name, sizeof it->name, "%s", name);
    va_start(ap, fmt);
    vsnprintf(it->value, sizeof it->value, fmt, ap);
    va_end(ap);
}

static void desc_hparams(const struct loom_hparams *hp, loom_model_desc *d)
{
    const uint32_t *s = hp->rope_sections;
    loom_desc_item *h = d->hparams;
    desc_item(h++, "n_vocab (token_embd rows)", "%u (tokenizer: %llu tokens)", hp->n_vocab,
              (unsigned long long)d->n_tokens);
    desc_item(h++, "context_length", "%u", hp->n_ctx_train);
    desc_item(h++, "embedding_length", "%u", hp->n_embd);
    desc_item(h++, "block_count (layers run)", "%u", hp->n_layer);
    if (hp->n_ff || !hp->n_expert) /* optional in a MoE model, which sizes no tensor by it */
        desc_item(h++, "feed_forward_length", "%u", hp->n_ff);
    desc_item(h++, "attention.head_count / _kv", "%u / %u", hp->n_head, hp->n_head_kv);
    desc_item(h++, "attention.key_length / value_len", "%u / %u", hp->head_dim_k, hp->head_dim_v);
    desc_item(h++, "attention.layer_norm_rms_epsilon", "%g", (double)hp->rms_eps);
    desc_item(h++, "rope.dimension_count", "%u", hp->n_rot);
    desc_item(h++, "rope.dimension_sections", "[%u, %u, %u, %u]", s[0], s[1], s[2], s[3]);
    desc_item(h++, "rope.freq_base", "%g", (double)hp->rope_freq_base);
    desc_item(h++, "full_attention_interval", hp->custom_plan ? "%u (the plan is attention.recurrent_layers')" : "%u",
              hp->full_attn_interval);
    desc_item(h++, "ssm.conv_kernel", "%u", hp->ssm_conv_kernel);
    desc_item(h++, "ssm.inner_size", "%u", hp->ssm_inner);
    desc_item(h++, "ssm.state_size (head dim)", "%u", hp->ssm_head_dim);
    desc_item(h++, "ssm.time_step_rank (value heads)", "%u", hp->ssm_n_v_heads);
    desc_item(h++, "ssm.group_count (key heads)", "%u", hp->ssm_n_k_heads);
    desc_item(h++, "output head", "%s", hp->tied_output ? "tied to token_embd" : "output.weight");
    if (hp->n_expert) {
        desc_item(h++, "expert_count / expert_used_count", "%u / %u", hp->n_expert, hp->n_expert_used);
        desc_item(h++, "expert_feed_forward_length", "%u", hp->n_ff_exp);
        desc_item(h++, "expert_shared_feed_forward_length", "%u", hp->n_ff_shexp);
    }
    d->n_hparams = (int)(h - d->hparams);
}

/* The two kinds of layer (0 recurrent, 1 attention), the state each owns, and the plan. */
static void desc_layers(const struct loom_arch *arch, const struct loom_hparams *hp, const struct loom_geometry *geo,
                        loom_model_desc *d)
{
    unsigned long long d_head = hp->ssm_head_dim;
    uint64_t chan = geo->conv_channels, conv = geo->owner[LOOM_OWNER_CONV].bytes;
    uint64_t mat = geo->owner[LOOM_OWNER_RECURRENT].bytes;
    uint64_t kv = geo->owner[LOOM_OWNER_K].bytes + geo->owner[LOOM_OWNER_V].bytes;
    desc_item(&d->kinds[0], "recurrent",
              "conv state [%llu][%u] F32 = %llu B + recurrent state [%u][%llu][%llu] F32 = %llu B; writes no KV",
              (unsigned long long)chan, hp->ssm_conv_kernel - 1, (unsigned long long)conv, hp->ssm_n_v_heads, d_head,
              d_head, (unsigned long long)mat);
    desc_item(&d->kinds[1], "attention", "KV rows F16: K [%u][%u] + V [%u][%u] per position = %llu B/token; writes KV",
              hp->n_head_kv, hp->head_dim_k, hp->n_head_kv, hp->head_dim_v, (unsigned long long)kv);
    d->n_kinds = 2;
    uint32_t n_attn = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        n_attn += d->layer_kind[il] = arch->layer_kind(hp, il) == LOOM_LAYER_ATTENTION;
    snprintf(d->plan, sizeof d->plan, "%u layers (%u Gated DeltaNet recurrent, %u gated full attention)",
             hp->n_layer, hp->n_layer - n_attn, n_attn);
}

/* The bytes of one routed expert (each expert row's tensor bytes over its expert count) and of the shared expert
 * (the "_shexp" rows) of every layer, smallest and largest over the layers. */
static void desc_experts(const struct loom_gguf *g, const struct loom_arch *arch, const struct loom_hparams *hp,
                         loom_model_desc *d)
{
    d->n_expert = hp->n_expert;
    d->n_expert_used = hp->n_expert_used;
    if (!hp->n_expert)
        return;
    char name[128];
    d->expert_bytes_min = UINT64_MAX;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        uint64_t routed = 0, shared = 0;
        for (int i = 0; i < arch->n_weights; i++) {
            const struct loom_weight_row *r = &arch->weights[i];
            snprintf(name, sizeof name, "blk.%u.%s", il, r->name);
            const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
            if (t && r->experts)
                routed += t->nbytes / t->ne[2];
            else if (t && strstr(r->name, "_shexp."))
                shared += t->nbytes;
        }
        d->expert_bytes_min = routed < d->expert_bytes_min ? routed : d->expert_bytes_min;
        d->expert_bytes_max = routed > d->expert_bytes_max ? routed : d->expert_bytes_max;
        d->shared_expert_bytes = shared > d->shared_expert_bytes ? shared : d->shared_expert_bytes;
    }
}

int loom_model_describe(const loom_gguf *g, loom_model_desc *out, loom_error *err)
{
    const struct loom_arch *arch;
    struct loom_hparams hp;
    struct loom_geometry geo;
    memset(out, 0, sizeof *out);
    int rc = loom_arch_admit(g, &arch, &hp, &geo, err);
    if (rc != LOOM_OK)
        return rc;
    out->layer_kind = malloc(hp.n_layer); /* admission bounded n_layer by the file's tensor count */
    if (!out->layer_kind)
        return loom_errorf(err, LOOM_E_NOMEM, "describe: %u layer kinds", hp.n_layer);
    const struct loom_gguf_kv *tokens = loom_gguf_find_kv(g, "tokenizer.ggml.tokens");
    snprintf(out->arch, sizeof out->arch, "%s", hp.arch);
    out->n_layer = hp.n_layer;
    out->n_nextn = hp.n_nextn;
    out->n_tokens = tokens ? tokens->arr_n : 0;
    out->kv_bytes_per_token = geo.kv_bytes_per_token;
    for (int t = 0; t < LOOM_KV_TYPES; t++)
        out->k_bytes_per_token[t] = loom_geometry_k_bytes_per_token(arch, &hp, &geo, (enum loom_kv_type)t);
    out->recurrent_state_bytes = geo.recurrent_state_bytes;
    desc_hparams(&hp, out);
    desc_layers(arch, &hp, &geo, out);
    desc_experts(g, arch, &hp, out);
    return LOOM_OK;
}

void loom_model_desc_free(loom_model_desc *d)
{
    if (d) {
        free(d->layer_kind);
        d->layer_kind = NULL;
    }
}
