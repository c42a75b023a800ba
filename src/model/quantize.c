/* quantize.c — model quantization: llama.cpp's per-tensor type recipes (llama-quant.cpp
 * llama_tensor_get_type, with or without an importance matrix, with llama-quantize's --tensor-type overrides
 * and the block-size fallbacks) and the conversion of a GGUF file, tensor by tensor, through the atomic GGUF
 * writer with each type's weight quantizer (the imatrix-weighted one where an importance matrix covers the
 * tensor), every source and output row validated as the reference does. */
#include "model/quantize.h"

#include <ctype.h>
#include <inttypes.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/protos.h"
#include "kernels/types.h"
#include "model/imatrix.h"
#include "model/model.h"
#include "util/error.h"

const struct loom_quant_recipe loom_quant_recipes[] = {
    {"Q8_0", 7, LOOM_TYPE_Q8_0},     {"Q6_K", 18, LOOM_TYPE_Q6_K},   {"Q5_K_M", 17, LOOM_TYPE_Q5_K},
    {"Q5_K_S", 16, LOOM_TYPE_Q5_K}, {"Q4_K_M", 15, LOOM_TYPE_Q4_K}, {"Q4_K_S", 14, LOOM_TYPE_Q4_K},
    {"Q4_0", 2, LOOM_TYPE_Q4_0},     {"IQ4_XS", 30, LOOM_TYPE_IQ4_XS},
    {"TQ1_0", 36, LOOM_TYPE_TQ1_0},   {"TQ2_0", 37, LOOM_TYPE_TQ2_0},   {"MXFP4_MOE", 38, LOOM_TYPE_MXFP4},
    {"IQ1_S", 24, LOOM_TYPE_IQ1_S},   {"IQ1_M", 31, LOOM_TYPE_IQ1_M},
    {"IQ3_S", 26, LOOM_TYPE_IQ3_S},   {"IQ3_M", 27, LOOM_TYPE_IQ3_S},   {"IQ3_XXS", 23, LOOM_TYPE_IQ3_XXS},
    {"IQ2_M", 29, LOOM_TYPE_IQ2_S},   {"IQ2_S", 28, LOOM_TYPE_IQ2_XS},  {"IQ2_XS", 20, LOOM_TYPE_IQ2_XS},
    {"IQ2_XXS", 19, LOOM_TYPE_IQ2_XXS}, {0, 0, 0},
};

/* llama_ftype numbers the rules below test */
enum { FT_Q4_0 = 2, FT_Q8_0 = 7, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_M = 17, FT_IQ4_XS = 30 };
enum { FT_IQ1_S = 24, FT_IQ1_M = 31, FT_TQ1_0 = 36, FT_TQ2_0 = 37, FT_MXFP4_MOE = 38 };
enum { FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_IQ3_XXS = 23, FT_IQ3_S = 26, FT_IQ3_M = 27, FT_IQ2_S = 28, FT_IQ2_M = 29 };

/* The recipes of the reference's very-low-bit IQ rules (IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M share one
 * branch of llama_tensor_get_type_impl). */
static int quant_ftype_iq_low(uint32_t ftype)
{
    return ftype == FT_IQ1_S || ftype == FT_IQ1_M || ftype == FT_IQ2_XXS || ftype == FT_IQ2_XS || ftype == FT_IQ2_S ||
           ftype == FT_IQ2_M;
}
/* IQ2_S and IQ2_M: the very-low-bit recipes whose promoted tensors go to IQ3_S (the others' to Q2_K). */
static int quant_ftype_iq2_sm(uint32_t ftype) { return ftype == FT_IQ2_S || ftype == FT_IQ2_M; }

const struct loom_quant_recipe *loom_quant_find_recipe(const char *name)
{
    for (const struct loom_quant_recipe *r = loom_quant_recipes; name && r->name; r++)
        if (!strcmp(r->name, name))
            return r;
    return 0;
}

/* The reference's broad tensor categories (llama-quant.cpp tensor_get_category). */
enum quant_category { CAT_OTHER, CAT_OUTPUT, CAT_TOKEN_EMBD, CAT_ATTN_V_LIKE, CAT_ATTN_K, CAT_ATTN_Q,
                      CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN };

static enum quant_category quant_category(const char *name)
{
    if (!strcmp(name, "output.weight"))
        return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight"))
        return CAT_TOKEN_EMBD;
    /* attn_qkv and attn_kv_b are ruled as attn_v (category_is_attn_v) */
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight"))
        return CAT_ATTN_V_LIKE;
    static const struct {
        const char *needle;
        enum quant_category cat;
    } rules[] = {{"attn_k.weight", CAT_ATTN_K},           {"attn_q.weight", CAT_ATTN_Q},
                 {"attn_output.weight", CAT_ATTN_OUTPUT}, {"ffn_up", CAT_FFN_UP},
                 {"ffn_gate", CAT_FFN_GATE},              {"ffn_down", CAT_FFN_DOWN}};
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strstr(name, rules[i].needle))
            return rules[i].cat;
    return CAT_OTHER;
}

/* ggml_n_dims: 1 + the index of the last dimension larger than 1. */
static uint32_t quant_n_dims(const struct loom_quant_tensor *t)
{
    uint32_t n = 1;
    for (uint32_t i = 1; i < t->n_dims && i < LOOM_GGUF_MAX_DIMS; i++)
        if (t->ne[i] > 1)
            n = i + 1;
    return n;
}

/* llama-quant.cpp tensor_allows_quantization with the default parameters: matrices whose name ends in
 * "weight", except norms, conv1d, routing and the small or positional tables it lists. */
static int quant_allowed(const struct loom_quant_tensor *t)
{
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
        "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
        "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
        "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    size_t len = strlen(t->name);
    if (quant_n_dims(t) < 2 || len < 6 || strcmp(t->name + len - 6, "weight"))
        return 0;
    if (!strcmp(t->name, "position_embd.weight") || !strcmp(t->name, "token_types.weight"))
        return 0;
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strstr(t->name, never[i]))
            return 0;
    return 1;
}

/* The reference's use_more_bits: the first and last eighth of the layers and every third in between. */
static int quant_more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* Counters the rules advance in the reference's tensor order, and what they test of the model. */
struct quant_state {
    int n_attn_v, i_attn_v, i_ffn_down, n_layer, n_expert, tied, gqa, imatrix;
    int n_fallback; /* tensors given another type than chosen (quant_fallback) */
};

/* The very-low-bit IQ branch (quant_ftype_iq_low) for tensors other than the output and token embedding:
 * attn_v-like Q4_K when n_gqa >= 4 or 4 or more experts, else Q2_K (IQ3_S under IQ2_S/IQ2_M); attn_k Q4_K with
 * 8 experts; the first eighth of ffn_down (by the running ffn_down count, also in a mixture-of-experts model)
 * Q2_K (IQ3_S under IQ2_S/IQ2_M); attn_output Q5_K with 8 experts, else IQ2_XXS under IQ1_S/IQ1_M and IQ3_S under
 * IQ2_S/IQ2_M. */
static uint32_t quant_rule_iq_low(struct quant_state *s, enum quant_category cat, uint32_t ftype, uint32_t type)
{
    if (cat == CAT_ATTN_V_LIKE) {
        type = s->gqa >= 4 || s->n_expert >= 4 ? LOOM_TYPE_Q4_K
             : quant_ftype_iq2_sm(ftype)     ? LOOM_TYPE_IQ3_S
                                             : LOOM_TYPE_Q2_K;
        s->i_attn_v++;
    } else if (s->n_expert == 8 && cat == CAT_ATTN_K) {
        type = LOOM_TYPE_Q4_K;
    } else if (cat == CAT_FFN_DOWN) {
        if (s->i_ffn_down < s->n_layer / 8)
            type = quant_ftype_iq2_sm(ftype) ? LOOM_TYPE_IQ3_S : LOOM_TYPE_Q2_K;
        s->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (s->n_expert == 8)
            type = LOOM_TYPE_Q5_K;
        else if (ftype == FT_IQ1_S || ftype == FT_IQ1_M)
            type = LOOM_TYPE_IQ2_XXS;
        else if (quant_ftype_iq2_sm(ftype))
            type = LOOM_TYPE_IQ3_S;
    }
    return type;
}

/* The IQ3_XXS, IQ3_S and IQ3_M rules (llama_tensor_get_type_impl) for a tensor outside the output and token
 * embedding, other than attn_k of an 8-expert model: attn_v-like under IQ3_XXS Q4_K when n_gqa >= 4, else IQ3_S
 * without an imatrix and IQ3_XXS with one; under IQ3_S Q4_K when n_gqa >= 4; under IQ3_M Q4_K. attn_k and attn_q
 * IQ2_S under IQ3_XXS. attn_output Q5_K with 8 experts, else IQ3_S under IQ3_XXS and Q4_K under IQ3_M. ffn_down
 * (layer: quant_ffn_layer) under IQ3_XXS without an imatrix Q4_K in the first eighth of the layers, Q3_K after;
 * under IQ3_M Q4_K in the first eighth and, with 8 experts, where use_more_bits. Other tensors keep type. */
static uint32_t quant_rule_iq3(const struct quant_state *s, enum quant_category cat, int layer, uint32_t ftype,
                               uint32_t type)
{
    int n = s->n_layer;
    switch (cat) {
    case CAT_ATTN_V_LIKE:
        if (ftype == FT_IQ3_XXS)
            return s->gqa >= 4 ? LOOM_TYPE_Q4_K : !s->imatrix ? LOOM_TYPE_IQ3_S : LOOM_TYPE_IQ3_XXS;
        return (ftype == FT_IQ3_S && s->gqa >= 4) || ftype == FT_IQ3_M ? LOOM_TYPE_Q4_K : type;
    case CAT_ATTN_K:
    case CAT_ATTN_Q:
        return ftype == FT_IQ3_XXS ? LOOM_TYPE_IQ2_S : type;
    case CAT_ATTN_OUTPUT:
        if (s->n_expert == 8)
            return LOOM_TYPE_Q5_K;
        return ftype == FT_IQ3_XXS ? LOOM_TYPE_IQ3_S : ftype == FT_IQ3_M ? LOOM_TYPE_Q4_K : type;
    case CAT_FFN_DOWN:
        if (ftype == FT_IQ3_XXS && !s->imatrix)
            return layer < n / 8 ? LOOM_TYPE_Q4_K : LOOM_TYPE_Q3_K;
        if (ftype == FT_IQ3_M && (layer < n / 8 || (s->n_expert == 8 && quant_more_bits(layer, n))))
            return LOOM_TYPE_Q4_K;
        return type;
    default:
        return type;
    }
}

static int quant_ftype_iq3(uint32_t ftype) { return ftype == FT_IQ3_XXS || ftype == FT_IQ3_S || ftype == FT_IQ3_M; }

/* llama_tensor_get_type_impl restricted to loom's recipes on a model that is not Falcon (nor Llama 70B).
 * layer: the ffn_down rule's layer (quant_ffn_layer). The 8-expert rules are the reference's: attn_v, attn_qkv
 * and attn_k go to Q8_0 under every recipe, attn_output to Q5_K under Q4_K_M, Q4_K_S and IQ4_XS. With an
 * importance matrix (s->imatrix) the first eighth of ffn_down stays IQ4_XS under IQ4_XS and becomes Q4_1
 * under Q4_0, as the reference's has_imatrix rules. */
static uint32_t quant_rule(struct quant_state *s, const struct loom_quant_tensor *t, enum quant_category cat,
                           int layer, uint32_t ftype, uint32_t type)
{
    if (cat == CAT_OUTPUT || (s->tied && cat == CAT_TOKEN_EMBD)) {
        const struct loom_type_traits *tr = loom_type_traits(type);
        if (ftype == FT_MXFP4_MOE || t->ne[0] % (uint64_t)tr->block_size)
            return LOOM_TYPE_Q8_0;
        if (quant_ftype_iq_low(ftype) || ftype == FT_IQ3_XXS)
            return LOOM_TYPE_Q5_K;
        return type == LOOM_TYPE_Q8_0 ? type : LOOM_TYPE_Q6_K;
    }
    if (ftype == FT_MXFP4_MOE) /* expert tensors (3-D, more than one matrix) MXFP4, the rest Q8_0 */
        return t->n_dims > 2 && t->ne[2] > 1 ? LOOM_TYPE_MXFP4 : LOOM_TYPE_Q8_0;
    if (cat == CAT_TOKEN_EMBD) /* untied */
        return quant_ftype_iq2_sm(ftype) || ftype == FT_IQ3_XXS ? LOOM_TYPE_IQ3_S
             : quant_ftype_iq_low(ftype) ? LOOM_TYPE_Q2_K
             : ftype == FT_TQ1_0 || ftype == FT_TQ2_0 ? LOOM_TYPE_Q4_K : type;
    if (quant_ftype_iq_low(ftype))
        return quant_rule_iq_low(s, cat, ftype, type);
    if (quant_ftype_iq3(ftype) && !(cat == CAT_ATTN_K && s->n_expert == 8))
        type = quant_rule_iq3(s, cat, layer, ftype, type);
    if (cat == CAT_ATTN_V_LIKE) {
        if (ftype == FT_IQ4_XS && s->gqa >= 4)
            type = LOOM_TYPE_Q5_K;
        else if ((ftype == FT_Q4_K_M || ftype == FT_Q5_K_M) && quant_more_bits(s->i_attn_v, s->n_attn_v))
            type = LOOM_TYPE_Q6_K;
        else if (ftype == FT_Q4_K_S && s->i_attn_v < 4)
            type = LOOM_TYPE_Q5_K;
        if (s->n_expert == 8)
            type = LOOM_TYPE_Q8_0;
        s->i_attn_v++;
    } else if (cat == CAT_ATTN_K) {
        if (s->n_expert == 8)
            type = LOOM_TYPE_Q8_0;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (s->n_expert == 8 && (ftype == FT_Q4_K_M || ftype == FT_Q4_K_S || ftype == FT_IQ4_XS))
            type = LOOM_TYPE_Q5_K;
    } else if (cat == CAT_FFN_DOWN) {
        int n = s->n_layer;
        if (ftype == FT_Q4_K_M) {
            if (quant_more_bits(layer, n))
                type = LOOM_TYPE_Q6_K;
        } else if (layer < n / 8 && ftype == FT_IQ4_XS && !s->imatrix) {
            type = LOOM_TYPE_Q5_K;
        } else if (ftype == FT_Q5_K_M && quant_more_bits(layer, n)) {
            type = LOOM_TYPE_Q6_K;
        } else if (ftype == FT_Q4_K_S && layer < n / 8) {
            type = LOOM_TYPE_Q5_K;
        } else if (ftype == FT_Q4_0 && s->imatrix && layer < n / 8) {
            type = LOOM_TYPE_Q4_1;
        }
        s->i_ffn_down++;
    }
    return type;
}

/* The reference's tensor order (llama_model_loader weight_name_comparer): by the N of "blk.N." (-1 for
 * other names), then by name. */
static int quant_layer(const char *name)
{
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1)
        layer = -1;
    return layer;
}

/* The layer the ffn rules see (llama-quant.cpp layer_info): in a dense model the running count of ffn_down
 * tensors; in a mixture-of-experts model (expert_count > 1) the N of the name's "blk.N.", so a layer's expert,
 * shared-expert and fused gate/up tensors all count as that layer. The reference refuses an ffn tensor
 * without a layer in [0, block_count) there, and so does loom. */
static int quant_ffn_layer(const struct quant_state *s, const char *name, enum quant_category cat, int *layer,
                           loom_error *err)
{
    *layer = s->i_ffn_down;
    if (s->n_expert <= 1 || (cat != CAT_FFN_DOWN && cat != CAT_FFN_GATE && cat != CAT_FFN_UP))
        return LOOM_OK;
    *layer = quant_layer(name);
    if (*layer < 0 || *layer >= s->n_layer)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "tensor '%s': expected a name 'blk.N.' with N in 0..%d (block_count %d; the expert "
                           "recipe reads the layer from the name)",
                           name, s->n_layer - 1, s->n_layer);
    return LOOM_OK;
}

struct quant_order {
    int layer;
    const char *name;
    size_t index;
};

static int quant_order_cmp(const void *a, const void *b)
{
    const struct quant_order *x = a, *y = b;
    return x->layer != y->layer ? (x->layer < y->layer ? -1 : 1) : strcmp(x->name, y->name);
}

int loom_quant_file_order(const struct loom_quant_tensor *t, size_t n, size_t *perm, loom_error *err)
{
    struct quant_order *order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for %zu tensor indices", n);
    for (size_t i = 0; i < n; i++)
        order[i] = (struct quant_order){quant_layer(t[i].name), t[i].name, i};
    qsort(order, n, sizeof *order, quant_order_cmp);
    for (size_t k = 0; k < n; k++)
        perm[k] = order[k].index;
    free(order);
    return LOOM_OK;
}

static int quant_is_float(uint32_t type)
{
    return type == LOOM_TYPE_F32 || type == LOOM_TYPE_F16 || type == LOOM_TYPE_BF16;
}

/* llama-quant.cpp tensor_type_fallback: a type whose block size does not divide the row length is replaced
 * by one of the same family with 32-element blocks, and by F16 when even that does not divide it. */
static int quant_fallback(const struct loom_quant_tensor *t, uint32_t type, uint32_t *out, loom_error *err)
{
    const struct loom_type_traits *tr = loom_type_traits(type);
    *out = type;
    if (tr && t->ne[0] % (uint64_t)tr->block_size == 0)
        return LOOM_OK;
    uint32_t fb;
    switch (type) {
    case LOOM_TYPE_IQ1_S: case LOOM_TYPE_IQ1_M: case LOOM_TYPE_IQ2_XXS: case LOOM_TYPE_IQ2_XS: case LOOM_TYPE_IQ2_S:
    case LOOM_TYPE_IQ3_XXS: case LOOM_TYPE_IQ3_S: case LOOM_TYPE_IQ4_XS: fb = LOOM_TYPE_IQ4_NL; break;
    case LOOM_TYPE_Q2_K: case LOOM_TYPE_Q3_K: case LOOM_TYPE_TQ1_0: case LOOM_TYPE_TQ2_0: fb = LOOM_TYPE_Q4_0; break;
    case LOOM_TYPE_Q4_K: fb = LOOM_TYPE_Q5_0; break;
    case LOOM_TYPE_Q5_K: fb = LOOM_TYPE_Q5_1; break;
    case LOOM_TYPE_Q6_K: fb = LOOM_TYPE_Q8_0; break;
    default:
        if (!tr || tr->block_size > 32)
            return loom_errorf(err, LOOM_E_ARG, "tensor '%s': row length %" PRIu64 " does not fit type %s, which has "
                               "no fallback type (the reference has none either)", t->name, t->ne[0],
                               tr ? tr->name : "unknown");
        fb = type;
    }
    if (t->ne[0] % (uint64_t)loom_type_traits(fb)->block_size)
        fb = LOOM_TYPE_F16;
    *out = fb;
    return LOOM_OK;
}

/* One line to x's notice callback (loom_quantize_options.notice); nothing without one. */
static void quant_notice(const struct loom_quant_extra *x, const char *fmt, ...)
{
    if (!x || !x->notice)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    x->notice(x->notice_ctx, line);
}

/* Notices held back while the types are chosen and checked, so that a refusal (a type that needs an importance
 * matrix, none given) comes alone, not after a screen of fallback notices; replayed in order once both pass. */
struct quant_held {
    char *text; /* the lines, each ended by '\0' */
    size_t len, cap;
    int lost; /* a line could not be kept (out of memory) */
};

static void quant_hold(void *ctx, const char *line)
{
    struct quant_held *h = ctx;
    size_t n = strlen(line) + 1;
    if (h->len + n > h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 4096;
        char *t = realloc(h->text, cap >= h->len + n ? cap : h->len + n);
        if (!t) {
            h->lost++;
            return;
        }
        h->text = t, h->cap = cap >= h->len + n ? cap : h->len + n;
    }
    memcpy(h->text + h->len, line, n);
    h->len += n;
}

static void quant_replay(const struct quant_held *h, const struct loom_quant_extra *x)
{
    for (size_t i = 0; i < h->len; i += strlen(h->text + i) + 1)
        x->notice(x->notice_ctx, h->text + i);
    if (h->lost)
        quant_notice(x, "%d notices lost (out of memory)", h->lost);
}

/* The first override whose pattern matches name (NULL: none). */
static const struct loom_quant_override *quant_override_find(const struct loom_quant_overrides *o, const char *name)
{
    for (size_t i = 0; o && i < o->n; i++)
        if (regexec(&o->o[i].re, name, 0, NULL, 0) == 0)
            return &o->o[i];
    return NULL;
}

/* The type of tensor t under recipe r, or an error naming it: as llama_tensor_get_type, an override (the first
 * whose pattern matches) replaces the recipe's rules for the tensor, whose counters then do not advance; the
 * block-size fallback applies to both. */
static int quant_choose_one(struct quant_state *s, const struct loom_quant_tensor *t,
                            const struct loom_quant_recipe *r, const struct loom_quant_extra *x, uint32_t *out,
                            loom_error *err)
{
    const struct loom_quant_overrides *ov = x ? x->overrides : NULL;
    if (!quant_allowed(t)) {
        *out = t->type;
        return LOOM_OK;
    }
    uint32_t type = r->default_type;
    const struct loom_quant_override *o = quant_override_find(ov, t->name);
    int rc = LOOM_OK;
    if (o) {
        type = o->type;
    } else {
        enum quant_category cat = quant_category(t->name);
        int layer;
        rc = quant_ffn_layer(s, t->name, cat, &layer, err);
        if (rc)
            return rc;
        type = quant_rule(s, t, cat, layer, r->ftype, type);
    }
    uint32_t chosen = type;
    rc = quant_fallback(t, type, &type, err);
    if (rc)
        return rc;
    if (type != chosen) { /* as tensor_type_fallback's warning */
        s->n_fallback++;
        quant_notice(x, "tensor '%s': row length %" PRIu64 " is not a multiple of %s's block size %d, using %s "
                     "instead", t->name, t->ne[0], loom_type_traits(chosen)->name,
                     (int)loom_type_traits(chosen)->block_size, loom_type_traits(type)->name);
    }
    if (type != t->type && !quant_is_float(t->type)) {
        const struct loom_type_traits *src = loom_type_traits(t->type);
        return loom_errorf(err, LOOM_E_ARG, "tensor '%s': source type %s, expected F32, F16 or BF16 (no requantizing)",
                           t->name, src ? src->name : "unknown");
    }
    *out = type;
    return LOOM_OK;
}

/* 1 when override i's pattern matches the name of a quantizable tensor of t[n]. */
static int quant_override_matches_any(const struct loom_quant_overrides *ov, size_t i,
                                      const struct loom_quant_tensor *t, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (quant_allowed(&t[k]) && regexec(&ov->o[i].re, t[k].name, 0, NULL, 0) == 0)
            return 1;
    return 0;
}

/* A notice for each override that chose no tensor's type: its pattern matches no quantizable tensor, or only
 * ones an earlier override took. */
static void quant_unused_overrides(const struct loom_quant_tensor *t, size_t n, const struct loom_quant_extra *x)
{
    const struct loom_quant_overrides *ov = x ? x->overrides : NULL;
    for (size_t i = 0; ov && x->notice && i < ov->n; i++) {
        size_t k = 0;
        while (k < n && !(quant_allowed(&t[k]) && quant_override_find(ov, t[k].name) == &ov->o[i]))
            k++;
        if (k == n)
            quant_notice(x, "--tensor-type pattern '%s'%s%s%s chose the type of no tensor: it matches %s",
                         ov->o[i].spec, strcmp(ov->o[i].spec, ov->o[i].pattern) ? " (as compiled: '" : "",
                         strcmp(ov->o[i].spec, ov->o[i].pattern) ? ov->o[i].pattern : "",
                         strcmp(ov->o[i].spec, ov->o[i].pattern) ? "')" : "",
                         quant_override_matches_any(ov, i, t, n) ? "only tensors an earlier pattern took"
                                                                 : "no quantizable tensor name");
    }
}

int loom_quant_choose_types_ex(const struct loom_quant_model *m, const struct loom_quant_tensor *t, size_t n,
                               const struct loom_quant_recipe *r, const struct loom_quant_extra *x, uint32_t *out,
                               loom_error *err)
{
    if (!m || !r || (n && (!t || !out)))
        return loom_errorf(err, LOOM_E_ARG, "quantize: missing model, tensors, recipe or output");
    struct quant_state s = {.n_layer = (int)m->n_layer, .n_expert = (int)m->n_expert, .tied = 1,
                            .gqa = m->n_head_kv ? (int)(m->n_head / m->n_head_kv) : 0,
                            .imatrix = x && x->imatrix};
    size_t *perm = malloc((n ? n : 1) * sizeof *perm);
    if (!perm)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for %zu tensor indices", n);
    for (size_t i = 0; i < n; i++) {
        s.n_attn_v += quant_category(t[i].name) == CAT_ATTN_V_LIKE;
        s.tied &= quant_category(t[i].name) != CAT_OUTPUT;
    }
    int rc = loom_quant_file_order(t, n, perm, err);
    for (size_t k = 0; k < n && rc == LOOM_OK; k++)
        rc = quant_choose_one(&s, &t[perm[k]], r, x, &out[perm[k]], err);
    free(perm);
    if (!rc)
        quant_unused_overrides(t, n, x);
    if (!rc && s.n_fallback)
        quant_notice(x, "%d of %zu tensors fell back to another type (their row length does not fit the type's "
                     "blocks)", s.n_fallback, n);
    return rc;
}

int loom_quant_choose_types(const struct loom_quant_model *m, const struct loom_quant_tensor *t, size_t n,
                            const struct loom_quant_recipe *r, uint32_t *out, loom_error *err)
{
    return loom_quant_choose_types_ex(m, t, n, r, NULL, out, err);
}

/* ---- overrides (llama-quantize --tensor-type PATTERN=TYPE) ------------------------------------------------ */

/* The types an override may name: those loom quantizes to, and the float types. NULL for any other. */
static const struct loom_type_traits *quant_override_type(const char *name, uint32_t *type)
{
    for (uint32_t i = 0; i < LOOM_TYPE_COUNT; i++) {
        const struct loom_type_traits *tr = loom_type_traits(i);
        if (tr && !strcasecmp(tr->name, name) && (tr->quantize || tr->quantize_w || quant_is_float(i))) {
            *type = i;
            return tr;
        }
    }
    return NULL;
}

/* pattern, lowercased whole as llama-quantize lowercases it (so "\D" reads as "\d"), in POSIX extended syntax:
 * ECMAScript's \d outside a bracket expression becomes [0-9]; everything else is passed as written. */
static int quant_override_regex(const char *pattern, size_t len, char *out, size_t cap)
{
    size_t k = 0;
    int bracket = 0;
    for (size_t i = 0; i < len; i++) {
        char c = (char)tolower((unsigned char)pattern[i]);
        const char *put = NULL;
        char one[3] = {c, 0, 0};
        if (c == '\\' && i + 1 < len) {
            char e = (char)tolower((unsigned char)pattern[++i]);
            one[1] = e;
            put = !bracket && e == 'd' ? "[0-9]" : one;
        } else {
            bracket = c == '[' ? 1 : c == ']' ? 0 : bracket;
            put = one;
        }
        size_t n = strlen(put);
        if (k + n + 1 > cap)
            return -1;
        memcpy(out + k, put, n);
        k += n;
    }
    out[k] = 0;
    return 0;
}

/* One "PATTERN=TYPE" into o. */
static int quant_override_parse(const char *spec, struct loom_quant_override *o, loom_error *err)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return loom_errorf(err, LOOM_E_ARG, "tensor type '%s': expected PATTERN=TYPE (e.g. attn_q=q8_0)%s", spec,
                           !eq ? "" : eq == spec ? ", found no pattern" : ", found no type");
    if (!quant_override_type(eq + 1, &o->type))
        return loom_errorf(err, LOOM_E_ARG, "tensor type '%s': type '%s', expected one loom quantizes to (Q4_0, Q4_1, "
                           "Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, IQ1_S, IQ1_M, "
                           "IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) or F32, F16, BF16", spec, eq + 1);
    size_t cap = 5 * (size_t)(eq - spec) + 1;
    o->pattern = malloc(cap);
    o->spec = malloc((size_t)(eq - spec) + 1);
    if (o->spec) {
        memcpy(o->spec, spec, (size_t)(eq - spec));
        o->spec[eq - spec] = 0;
    }
    if (!o->pattern || !o->spec) {
        free(o->pattern);
        free(o->spec);
        o->pattern = o->spec = NULL;
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for pattern '%s'", spec);
    }
    quant_override_regex(spec, (size_t)(eq - spec), o->pattern, cap);
    int rc = regcomp(&o->re, o->pattern, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        char why[128];
        regerror(rc, &o->re, why, sizeof why);
        int r = loom_errorf(err, LOOM_E_ARG, "tensor type '%s': pattern '%.*s' is not a POSIX extended regular "
                            "expression: %s", spec, (int)(eq - spec), spec, why);
        free(o->pattern);
        free(o->spec);
        o->pattern = o->spec = NULL;
        return r;
    }
    return LOOM_OK;
}

int loom_quant_overrides_parse(const char *const *specs, size_t n, struct loom_quant_overrides **out, loom_error *err)
{
    struct loom_quant_overrides *ov = calloc(1, sizeof *ov);
    if (!ov || !(ov->o = calloc(n ? n : 1, sizeof *ov->o))) {
        free(ov);
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for %zu tensor type overrides", n);
    }
    for (size_t i = 0; i < n; i++) {
        int rc = specs[i] ? quant_override_parse(specs[i], &ov->o[i], err)
                          : loom_errorf(err, LOOM_E_ARG, "tensor type %zu: NULL, expected PATTERN=TYPE", i);
        if (rc) {
            loom_quant_overrides_free(ov);
            return rc;
        }
        ov->n++;
    }
    *out = ov;
    return LOOM_OK;
}

void loom_quant_overrides_free(struct loom_quant_overrides *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->n; i++) {
        regfree(&o->o[i].re);
        free(o->o[i].pattern);
        free(o->o[i].spec);
    }
    free(o->o);
    free(o);
}

/* ---- file conversion ------------------------------------------------------------------------------ */

/* A u32 hyper-parameter "<arch>.<key>" (scalar, or the first element of a per-layer array); *out is left
 * untouched when the key is missing. */
static int quant_hparam(const struct loom_gguf *g, const char *arch, const char *key, uint32_t *out,
                        loom_error *err)
{
    char full[256];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, full);
    if (!kv)
        return LOOM_OK;
    if (kv->type == LOOM_GGUF_ARRAY && (kv->arr_type == LOOM_GGUF_UINT32 || kv->arr_type == LOOM_GGUF_INT32)) {
        if (kv->arr_n == 0)
            return loom_errorf(err, LOOM_E_FORMAT, "key '%s': empty array, expected one value per layer", full);
        memcpy(out, kv->data, 4);
        return LOOM_OK;
    }
    return loom_gguf_get_u32(g, full, 0, out, err);
}

static int quant_model_info(const struct loom_gguf *g, struct loom_quant_model *m, loom_error *err)
{
    struct loom_gguf_str a;
    char arch[128];
    int rc = loom_gguf_get_str(g, "general.architecture", 0, &a, err);
    if (rc)
        return rc;
    if (a.len >= sizeof arch)
        return loom_errorf(err, LOOM_E_FORMAT, "key 'general.architecture': %" PRIu64 " bytes, expected < %zu",
                           a.len, sizeof arch);
    memcpy(arch, a.ptr, (size_t)a.len);
    arch[a.len] = 0;
    char key[160];
    snprintf(key, sizeof key, "%s.block_count", arch);
    *m = (struct loom_quant_model){0};
    rc = loom_gguf_get_u32(g, key, 0, &m->n_layer, err);
    if (!rc)
        rc = quant_hparam(g, arch, "attention.head_count", &m->n_head, err);
    m->n_head_kv = m->n_head; /* the reference's default */
    if (!rc)
        rc = quant_hparam(g, arch, "attention.head_count_kv", &m->n_head_kv, err);
    if (!rc)
        rc = quant_hparam(g, arch, "expert_count", &m->n_expert, err);
    return rc;
}

int loom_quant_set_file_keys(struct loom_gguf_writer *w, const struct loom_quant_recipe *r)
{
    int rc = loom_gguf_writer_set_u32(w, "general.quantization_version", 2);
    return rc ? rc : loom_gguf_writer_set_u32(w, "general.file_type", r->ftype);
}

/* The keys llama-quantize passes as metadata overrides for an importance matrix, which llama_model_quantize
 * sets after the file type, in this order: the file as given (its first 127 bytes), the first dataset (if
 * any, 127 bytes), the entry count, the chunk count (if > 0). keys[] gets the names set; returns their count. */
static int quant_imatrix_keys(struct loom_gguf_writer *w, const struct loom_imatrix *m, const char *keys[4], int *rc)
{
    int n = 0;
    char v[128];
    keys[n++] = "quantize.imatrix.file";
    if (w) {
        snprintf(v, sizeof v, "%s", m->path);
        *rc = *rc ? *rc : loom_gguf_writer_set_str(w, keys[n - 1], v);
    }
    if (m->n_datasets) {
        keys[n++] = "quantize.imatrix.dataset";
        snprintf(v, sizeof v, "%s", m->datasets[0]);
        *rc = *rc || !w ? *rc : loom_gguf_writer_set_str(w, keys[n - 1], v);
    }
    keys[n++] = "quantize.imatrix.entries_count";
    *rc = *rc || !w ? *rc : loom_gguf_writer_set_u32(w, keys[n - 1], (uint32_t)m->n);
    if (m->chunk_count > 0 && m->chunk_count <= INT32_MAX) {
        keys[n++] = "quantize.imatrix.chunks_count";
        *rc = *rc || !w ? *rc : loom_gguf_writer_set_u32(w, keys[n - 1], m->chunk_count);
    }
    return n;
}

/* Keys llama_model_quantize drops (split info) or rewrites at the end (file type, quantization version, and
 * the imatrix keys it will set: a set key is removed and appended). */
static int quant_key_replaced(const struct loom_gguf_str k, const struct loom_imatrix *m)
{
    static const char *const keys[] = {"general.quantization_version", "general.file_type", "split.no",
                                       "split.count", "split.tensors.count"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (loom_gguf_str_eq(k, keys[i]))
            return 1;
    const char *set[4];
    int rc = 0, n = m ? quant_imatrix_keys(NULL, m, set, &rc) : 0;
    for (int i = 0; i < n; i++)
        if (loom_gguf_str_eq(k, set[i]))
            return 1;
    return 0;
}

/* The first invalid row one pool thread found in the current tensor (row INT64_MAX: none). */
struct quant_fault {
    int64_t row;
    uint32_t type;  /* the type of the bytes that failed: the source's, or the quantized output's */
    int quantized;  /* 0: the source row, 1: the row loom quantized */
    struct loom_row_fault f;
};

struct quant_job {
    const struct loom_gguf *in;
    const struct loom_imatrix *imatrix; /* NULL: none */
    const float **tensor_weights;       /* [input tensor] its importance weights, or NULL */
    const uint32_t *types; /* [input tensor] */
    const size_t *order;   /* [output tensor] its input tensor (the reference's order) */
    const struct loom_quant_tensor *desc; /* [input tensor] its descriptor: the name NUL-terminated, for progress */
    struct loom_pool *pool;
    float *rows; /* one row of floats per pool thread */
    int64_t row_cap;
    struct quant_fault *faults; /* one per pool thread */
    int n_threads;
    loom_progress_fn progress;
    void *progress_ctx;
    loom_abort_fn abort;
    void *abort_ctx;
    uint64_t done, total;
    uint64_t next_report; /* the bytes done from which progress is next reported within a tensor */
    /* the tensor being converted, and the first row of the slice in progress */
    const struct loom_gguf_tensor *t;
    const float *weights; /* the tensor's importance weights ([ne2][ne0]) or NULL */
    uint8_t *dst;
    size_t src_row, dst_row;
    int64_t row0;
};

/* Rows converted between two polls of the abort callback. */
#define QUANT_SLICE_ROWS 1024
/* Progress within tensors is reported at most about this many times a run (besides once before each tensor). */
#define QUANT_PROGRESS_STEPS 200

static int quant_cancelled(const struct quant_job *j) { return j->abort && j->abort(j->abort_ctx); }

/* Validate one row; on failure keep it in the thread's slot when it is the thread's lowest so far. */
static int quant_check(struct quant_job *j, int thread, int64_t r, uint32_t type, const void *row, int quantized)
{
    struct loom_row_fault f;
    if (loom_type_validate_rows(type, row, (int64_t)j->t->ne[0], 1, &f) < 0)
        return 1;
    if (r < j->faults[thread].row)
        j->faults[thread] = (struct quant_fault){r, type, quantized, f};
    return 0;
}

/* Row r of n floats into type dst_type at d: F32 copied, F16/BF16 rounded to nearest even (ggml_quantize_chunk's
 * conversions), other types by their quantizer, the weighted one with the row's expert's importance weights. */
static void quant_convert(const struct quant_job *j, uint32_t dst_type, const float *row, uint8_t *d, int64_t r,
                          int64_t n)
{
    const struct loom_type_traits *dst = loom_type_traits(dst_type);
    if (dst_type == LOOM_TYPE_F32)
        memcpy(d, row, (size_t)n * sizeof(float));
    else if (dst_type == LOOM_TYPE_F16)
        loom_f16_from_float(row, d, n);
    else if (dst_type == LOOM_TYPE_BF16)
        loom_bf16_from_float(row, d, n);
    else if (j->weights && dst->quantize_w)
        dst->quantize_w(row, d, n, j->weights + (r / (int64_t)j->t->ne[1]) * n);
    else
        dst->quantize(row, d, n);
}

/* Rows row0 + [begin, end) of the current tensor: validate the source row (as the reference's loader does
 * with check_tensors, which llama_model_quantize turns on), then copy it, or widen it to F32 (exactly), run
 * the target type's quantizer and validate what it wrote (llama_tensor_quantize_impl's check). */
static void quant_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct quant_job *j = ctx;
    int64_t n = (int64_t)j->t->ne[0];
    float *row = j->rows + (int64_t)thread * j->row_cap;
    uint32_t src_type = j->t->type, dst_type = j->types[j->t - j->in->tensors];
    const struct loom_type_traits *src = loom_type_traits(src_type);
    for (int64_t r = j->row0 + begin; r < j->row0 + end; r++) {
        const uint8_t *s = (const uint8_t *)j->t->data + (size_t)r * j->src_row;
        uint8_t *d = j->dst + (size_t)r * j->dst_row;
        if (!quant_check(j, thread, r, src_type, s, 0))
            continue;
        if (src_type == dst_type) {
            memcpy(d, s, j->src_row);
            continue;
        }
        if (src_type == LOOM_TYPE_F32)
            memcpy(row, s, (size_t)n * sizeof(float));
        else
            src->to_float(s, row, n);
        quant_convert(j, dst_type, row, d, r, n);
        quant_check(j, thread, r, dst_type, d, 1);
    }
}

/* The lowest invalid row of the current tensor as an error naming the tensor, the row and the finding. */
static int quant_report(const struct quant_job *j, loom_error *err)
{
    const struct quant_fault *first = &j->faults[0];
    for (int i = 1; i < j->n_threads; i++)
        if (j->faults[i].row < first->row)
            first = &j->faults[i];
    if (first->row == INT64_MAX)
        return LOOM_OK;
    char what[160], where[64];
    loom_row_fault_describe(first->type, &first->f, what, sizeof what);
    const struct loom_gguf_tensor *t = j->t;
    loom_row_where(t->n_dims, (int64_t)t->ne[1], first->row, where, sizeof where);
    if (first->quantized)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "tensor '%.*s' %s: quantized %s, expected finite (a value beyond the range of the "
                           "type's F16 scales; llama.cpp's quantized data validation fails too)",
                           (int)t->name.len, t->name.ptr, where, what);
    return loom_errorf(err, LOOM_E_FORMAT, "tensor '%.*s' %s: source %s, expected finite", (int)t->name.len,
                       t->name.ptr, where, what);
}

/* Progress within tensor out_index, the bytes done `done`: reported when they have moved a step
 * (1 / QUANT_PROGRESS_STEPS of the total) since the last such report. */
static void quant_progress_within(struct quant_job *j, uint64_t out_index, uint64_t done)
{
    if (!j->progress || done < j->next_report)
        return;
    j->progress(j->progress_ctx, out_index, j->in->n_tensors, done, j->total, j->desc[j->order[out_index]].name);
    j->next_report = done + j->total / QUANT_PROGRESS_STEPS + 1;
}

static int quant_fill(void *ctx, uint64_t out_index, void *buf, uint64_t nbytes, loom_error *err)
{
    struct quant_job *j = ctx;
    size_t index = j->order[out_index];
    const struct loom_gguf_tensor *t = &j->in->tensors[index];
    if (j->progress)
        j->progress(j->progress_ctx, out_index, j->in->n_tensors, j->done, j->total, j->desc[index].name);
    if (quant_cancelled(j))
        return loom_errorf(err, LOOM_E_CANCELLED, "quantize: cancelled by the abort callback before tensor '%.*s'",
                           (int)t->name.len, t->name.ptr);
    uint64_t n_rows = t->nbytes / loom_type_row_bytes(t->type, (int64_t)t->ne[0]);
    j->t = t;
    j->weights = j->tensor_weights[index];
    j->dst = buf;
    j->src_row = loom_type_row_bytes(t->type, (int64_t)t->ne[0]);
    j->dst_row = loom_type_row_bytes(j->types[index], (int64_t)t->ne[0]);
    if (j->dst_row * n_rows != nbytes)
        return loom_errorf(err, LOOM_E_INTERNAL, "tensor '%.*s': %" PRIu64 " rows of %zu bytes, writer expects %" PRIu64,
                           (int)t->name.len, t->name.ptr, n_rows, j->dst_row, nbytes);
    for (int i = 0; i < j->n_threads; i++)
        j->faults[i].row = INT64_MAX;
    for (j->row0 = 0; j->row0 < (int64_t)n_rows; j->row0 += QUANT_SLICE_ROWS) {
        if (j->row0 > 0)
            quant_progress_within(j, out_index, j->done + (uint64_t)j->row0 * j->dst_row);
        if (j->row0 > 0 && quant_cancelled(j))
            return loom_errorf(err, LOOM_E_CANCELLED, "quantize: cancelled by the abort callback in tensor '%.*s'",
                               (int)t->name.len, t->name.ptr);
        int64_t n = (int64_t)n_rows - j->row0 < QUANT_SLICE_ROWS ? (int64_t)n_rows - j->row0 : QUANT_SLICE_ROWS;
        loom_pool_parallel_for(j->pool, n, 1, quant_rows, j);
    }
    j->done += nbytes;
    return quant_report(j, err);
}

/* Tensor descriptors (NUL-terminated names) of a reader. names holds the strings. */
static int quant_describe(const struct loom_gguf *in, struct loom_quant_tensor *d, char **names, loom_error *err)
{
    size_t bytes = 0;
    for (uint64_t i = 0; i < in->n_tensors; i++)
        bytes += (size_t)in->tensors[i].name.len + 1;
    char *p = *names = malloc(bytes ? bytes : 1);
    if (!p)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for tensor names");
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const struct loom_gguf_tensor *t = &in->tensors[i];
        memcpy(p, t->name.ptr, (size_t)t->name.len);
        p[t->name.len] = 0;
        d[i] = (struct loom_quant_tensor){p, t->n_dims, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, t->type};
        p += t->name.len + 1;
    }
    return LOOM_OK;
}

/* 1 for the types whose reference quantizer ignores importance weights: the float types, Q8_0, TQ1_0, TQ2_0,
 * MXFP4. */
static int quant_ignores_weights(uint32_t type)
{
    return quant_is_float(type) || type == LOOM_TYPE_Q8_0 || type == LOOM_TYPE_TQ1_0 || type == LOOM_TYPE_TQ2_0 ||
           type == LOOM_TYPE_MXFP4;
}

/* The importance weights llama_model_quantize uses for tensor d converted to type: the entry of the same name
 * when its size is ne[0] * ne[2] (one row per expert), none when there is no entry or the tensor is a token
 * embedding of another size (the reference ignores those); an error for any other size, and for a type whose
 * reference quantizer uses the weights but that loom has no weighted quantizer for. */
static int quant_weights_for(const struct loom_quant_extra *x, const struct loom_quant_tensor *d, uint32_t type,
                             const float **out, loom_error *err)
{
    *out = NULL;
    const struct loom_imatrix_entry *e = loom_imatrix_find(x->imatrix, d->name);
    if (!e) /* the reference's "did not find weights for": the caller says so once the tensor is taken */
        return LOOM_OK;
    uint64_t want = d->ne[0] * (d->n_dims > 2 ? d->ne[2] : 1), have = e->n_per_row * e->n_mat;
    if (have != want) {
        if (!strcmp(d->name, "token_embd.weight") || !strcmp(d->name, "per_layer_token_embd.weight")) {
            quant_notice(x, "tensor '%s': the importance matrix has %" PRIu64 " weights for it, expected %" PRIu64
                         "; a token embedding is quantized without them (as the reference does)", d->name, have,
                         want);
            return LOOM_OK;
        }
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': the imatrix has %" PRIu64 " weights (%" PRIu64 " x %" PRIu64
                           "), expected ne[0] * ne[2] = %" PRIu64 " (llama_model_quantize refuses it too)", d->name,
                           have, e->n_mat, e->n_per_row, want);
    }
    const struct loom_type_traits *tr = loom_type_traits(type);
    if (!tr->quantize_w && !quant_ignores_weights(type))
        return loom_errorf(err, LOOM_E_ARG, "tensor '%s': loom has no %s quantizer that uses an importance matrix yet",
                           d->name, tr->name);
    *out = e->weights;
    return LOOM_OK;
}

/* llama-quant.cpp tensor_requires_imatrix (model/quantize.h says what it covers). */
int loom_quant_requires_imatrix(const char *name, uint32_t type, uint32_t ftype)
{
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight") ||
        !strcmp(name, "output.weight"))
        return 0;
    switch (type) {
    case LOOM_TYPE_IQ1_S: case LOOM_TYPE_IQ1_M: case LOOM_TYPE_IQ2_XXS: case LOOM_TYPE_IQ2_XS: case LOOM_TYPE_IQ2_S:
    case LOOM_TYPE_IQ3_XXS:
        return 1;
    case LOOM_TYPE_Q2_K:
        return ftype == 21;
    default:
        return 0;
    }
}

/* Writer with the input's metadata and the chosen tensor types, tensors in `order` (input indices); checks every
 * conversion has a quantizer and finds each one's importance weights (x->imatrix) into weights[input tensor]. */
static int quant_build_writer(const struct loom_gguf *in, const struct loom_quant_tensor *d, const uint32_t *types,
                              const size_t *order, const struct loom_quant_recipe *r, const struct loom_quant_extra *x,
                              struct loom_gguf_writer *w, int64_t *max_row, const float **weights, loom_error *err)
{
    const struct loom_imatrix *m = x ? x->imatrix : NULL;
    int rc = LOOM_OK;
    for (uint64_t i = 0; i < in->n_kv && !rc; i++)
        if (!quant_key_replaced(in->kv[i].key, m))
            rc = loom_gguf_writer_copy_kv(w, &in->kv[i]);
    if (!rc)
        rc = loom_quant_set_file_keys(w, r);
    const char *keys[4];
    if (m)
        quant_imatrix_keys(w, m, keys, &rc);
    if (rc)
        return loom_errorf(err, rc, "copying metadata to the output writer");
    *max_row = 1;
    for (uint64_t k = 0; k < in->n_tensors; k++) {
        size_t i = order[k];
        const struct loom_type_traits *tr = loom_type_traits(types[i]);
        weights[i] = NULL;
        if (types[i] != d[i].type) {
            if (!tr->quantize && !tr->quantize_w && !quant_is_float(types[i]))
                return loom_errorf(err, LOOM_E_ARG, "tensor '%s': loom has no %s quantizer yet (recipe %s)", d[i].name,
                                   tr->name, r->name);
            if (m && (rc = quant_weights_for(x, &d[i], types[i], &weights[i], err)) != LOOM_OK)
                return rc;
            if (!weights[i] && loom_quant_requires_imatrix(d[i].name, types[i], r->ftype))
                return loom_errorf(err, LOOM_E_ARG, "recipe %s: tensor '%s' goes to %s, which needs an importance "
                                   "matrix, found %s; llama_model_quantize refuses it too", r->name, d[i].name,
                                   tr->name, m ? "no entry for this tensor in the --imatrix file (made for another "
                                   "model?)" : "none (pass --imatrix FILE)");
            if (!weights[i] && !tr->quantize && !quant_is_float(types[i])) /* IQ2_XXS, IQ2_XS, IQ1_S */
                return loom_errorf(err, LOOM_E_ARG, "tensor '%s': type %s needs importance weights, found %s "
                                   "(llama.cpp's ggml_quantize_chunk aborts without them)", d[i].name, tr->name,
                                   m ? "no entry for this tensor in the --imatrix file (made for another model?)"
                                     : "no --imatrix");
            if (m && !weights[i] && !loom_imatrix_find(m, d[i].name))
                quant_notice(x, "tensor '%s': the importance matrix has no entry for it, quantized to %s without one",
                             d[i].name, tr->name);
            *max_row = (int64_t)d[i].ne[0] > *max_row ? (int64_t)d[i].ne[0] : *max_row;
        }
        if (loom_gguf_writer_add_tensor(w, d[i].name, types[i], d[i].n_dims, d[i].ne))
            return loom_errorf(err, LOOM_E_ARG, "tensor '%s': the writer refused type %s with row length %" PRIu64,
                               d[i].name, tr->name, d[i].ne[0]);
    }
    return LOOM_OK;
}

/* After a write with an importance matrix: how many converted tensors its weights steered (a type whose
 * quantizer ignores them, such as Q8_0, counts as found but not steered). */
static void quant_imatrix_summary(const struct loom_quant_tensor *d, const uint32_t *types, const float **weights,
                                  size_t n, const struct loom_quant_extra *x)
{
    size_t converted = 0, found = 0, used = 0;
    for (size_t i = 0; i < n; i++) {
        converted += types[i] != d[i].type;
        found += types[i] != d[i].type && weights[i];
        used += types[i] != d[i].type && weights[i] && !quant_ignores_weights(types[i]);
    }
    quant_notice(x, "importance matrix %s: %zu of %zu converted tensors quantized with its weights (%zu of its %zu "
                 "entries matched a tensor%s)", x->imatrix->path, used, converted, found, x->imatrix->n,
                 found > used ? "; the others' types ignore them" : "");
}

int loom_quant_write_ex(const struct loom_gguf *in, const struct loom_quant_recipe *r, const struct loom_quant_extra *x,
                        const char *out_path, struct loom_pool *pool, loom_progress_fn progress, void *progress_ctx,
                        loom_abort_fn abort, void *abort_ctx, loom_error *err)
{
    if (!in || !r || !out_path)
        return loom_errorf(err, LOOM_E_ARG, "quantize: missing input, recipe or output path");
    struct loom_quant_model m;
    int rc = quant_model_info(in, &m, err);
    if (rc)
        return rc;
    const struct loom_imatrix *im = x ? x->imatrix : NULL;
    struct quant_held held = {0};
    struct loom_quant_extra held_x = x ? *x : (struct loom_quant_extra){0};
    held_x.notice = quant_hold, held_x.notice_ctx = &held;
    size_t n = (size_t)in->n_tensors;
    struct loom_quant_tensor *d = malloc((n ? n : 1) * sizeof *d);
    uint32_t *types = malloc((n ? n : 1) * sizeof *types);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    const float **weights = malloc((n ? n : 1) * sizeof *weights);
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    char *names = 0;
    struct quant_job job = {.in = in, .imatrix = im, .tensor_weights = weights, .types = types, .order = order,
                            .desc = d, .pool = pool, .progress = progress, .progress_ctx = progress_ctx, .abort = abort,
                            .abort_ctx = abort_ctx};
    if (!d || !types || !order || !weights || !w)
        rc = loom_errorf(err, LOOM_E_NOMEM, "out of memory for %zu tensor descriptors", n);
    if (!rc)
        rc = quant_describe(in, d, &names, err);
    if (!rc)
        rc = loom_quant_choose_types_ex(&m, d, n, r, x && x->notice ? &held_x : x, types, err);
    if (!rc)
        rc = loom_quant_file_order(d, n, order, err);
    if (!rc)
        rc = quant_build_writer(in, d, types, order, r, x && x->notice ? &held_x : x, w, &job.row_cap, weights, err);
    if (!rc && x && x->notice)
        quant_replay(&held, x);
    free(held.text);
    if (!rc) {
        for (size_t i = 0; i < n; i++)
            job.total += loom_type_row_bytes(types[i], (int64_t)d[i].ne[0]) * (in->tensors[i].nbytes /
                         loom_type_row_bytes(d[i].type, (int64_t)d[i].ne[0]));
        job.n_threads = pool ? loom_pool_n_threads(pool) : 1;
        job.rows = malloc((size_t)job.row_cap * (size_t)job.n_threads * sizeof(float));
        job.faults = malloc((size_t)job.n_threads * sizeof *job.faults);
        if (!job.rows || !job.faults)
            rc = loom_errorf(err, LOOM_E_NOMEM, "out of memory for %d rows of %" PRId64 " floats", job.n_threads,
                             job.row_cap);
    }
    if (!rc)
        rc = loom_gguf_writer_write(w, out_path, quant_fill, &job, err);
    if (!rc && progress)
        progress(progress_ctx, n, n, job.total, job.total, "");
    if (!rc && im)
        quant_imatrix_summary(d, types, weights, n, x);
    free(job.rows);
    free(job.faults);
    free(names);
    loom_gguf_writer_free(w);
    free(weights);
    free(order);
    free(types);
    free(d);
    return rc;
}

int loom_quant_write(const struct loom_gguf *in, const struct loom_quant_recipe *r, const char *out_path,
                     struct loom_pool *pool, loom_progress_fn progress, void *progress_ctx, loom_abort_fn abort,
                     void *abort_ctx, loom_error *err)
{
    return loom_quant_write_ex(in, r, NULL, out_path, pool, progress, progress_ctx, abort, abort_ctx, err);
}

/* ---- public API (loom.h, "Quantization") ------------------------------------------------------------------ */

const char *loom_quantize_recipe(int i)
{
    static const int n = sizeof loom_quant_recipes / sizeof loom_quant_recipes[0] - 1;
    return i >= 0 && i < n ? loom_quant_recipes[i].name : NULL;
}

int loom_quantize(const loom_gguf *in, const char *recipe, const char *out_path, const loom_quantize_options *options,
                  loom_error *err)
{
    const loom_quantize_options o = options ? *options : (loom_quantize_options){0};
    const struct loom_quant_recipe *r = loom_quant_find_recipe(recipe);
    if (!r) {
        char names[128] = "";
        for (const struct loom_quant_recipe *q = loom_quant_recipes; q->name; q++)
            snprintf(names + strlen(names), sizeof names - strlen(names), " %s", q->name);
        return loom_errorf(err, LOOM_E_ARG, "recipe: expected one of%s, found '%s'", names,
                           recipe ? recipe : "(null)");
    }
    int n_threads;
    if (loom_pool_threads(o.n_threads, "quantize options n_threads", &n_threads, err))
        return LOOM_E_ARG;
    /* A file of an architecture loom runs is admitted first (as the reference's quantizer loads its
     * hyper-parameters), so that loom never writes a model it would refuse to load. */
    struct loom_gguf_str arch;
    if (loom_gguf_get_str(in, "general.architecture", 0, &arch, NULL) == LOOM_OK && loom_arch_find(arch)) {
        const struct loom_arch *a;
        struct loom_hparams hp;
        struct loom_geometry geo;
        int rc = loom_arch_admit(in, &a, &hp, &geo, err);
        if (rc)
            return rc;
    }
    struct loom_quant_extra x = {0};
    struct loom_quant_overrides *ov = NULL;
    struct loom_imatrix *im = NULL;
    int rc = o.n_tensor_types ? loom_quant_overrides_parse(o.tensor_types, o.n_tensor_types, &ov, err) : LOOM_OK;
    if (!rc && o.imatrix)
        rc = loom_imatrix_load(o.imatrix, &im, err);
    x.imatrix = im;
    x.overrides = ov;
    x.notice = o.notice;
    x.notice_ctx = o.notice_ctx;
    struct loom_pool *pool = rc ? NULL : loom_pool_new(n_threads);
    if (!rc && !pool)
        rc = loom_errorf(err, LOOM_E_NOMEM, "cannot start %d threads", n_threads);
    if (!rc)
        rc = loom_quant_write_ex(in, r, &x, out_path, pool, o.progress, o.progress_ctx, o.abort, o.abort_ctx, err);
    loom_pool_free(pool);
    loom_imatrix_free(im);
    loom_quant_overrides_free(ov);
    return rc;
}

int loom_quantize_check_tensor_type(const char *spec, loom_error *err)
{
    struct loom_quant_overrides *ov = NULL;
    int rc = loom_quant_overrides_parse(&spec, 1, &ov, err);
    loom_quant_overrides_free(ov);
    return rc;
}
