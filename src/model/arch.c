/* arch.c — the registry of architecture instances (general.architecture -> struct loom_arch), the
 * admission steps every instance shares (each layer's tensors checked against its weight table, which
 * "blk.N." tensors a table expects) and the per-sequence state totals of a layer plan. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kernels/types.h"
#include "model/arch.h"
#include "model/model.h"
#include "util/error.h"

static const struct loom_arch *const archs[] = {&loom_arch_qwen35, &loom_arch_qwen35moe};
#define N_ARCHS (sizeof archs / sizeof archs[0])

const struct loom_arch *loom_arch_find(struct loom_gguf_str name)
{
    for (size_t i = 0; i < N_ARCHS; i++)
        if (loom_gguf_str_eq(name, archs[i]->name))
            return archs[i];
    return NULL;
}

/* The refusal of a file whose general.architecture names no instance: what the file is, and what loom runs. A
 * vision projector (llama.cpp's mmproj files: architecture "clip", clip.* keys) is named as such: it is a
 * companion of a text model, which loom would have to run with it. */
static int arch_refuse(const struct loom_gguf *g, struct loom_gguf_str name, loom_error *err)
{
    char runs[128];
    size_t at = 0;
    for (size_t i = 0; i < N_ARCHS && at < sizeof runs; i++)
        at += (size_t)snprintf(runs + at, sizeof runs - at, "%s'%s'", i ? " and " : "", archs[i]->name);
    int len = (int)(name.len < 64 ? name.len : 64);
    if (loom_gguf_str_eq(name, "clip")) {
        struct loom_gguf_str pt = {0, NULL};
        char kind[80] = "";
        if (loom_gguf_get_str(g, "clip.projector_type", 1, &pt, NULL) == LOOM_OK && pt.ptr)
            snprintf(kind, sizeof kind, ", clip.projector_type '%.*s'", (int)(pt.len < 48 ? pt.len : 48), pt.ptr);
        return loom_errorf(err, LOOM_E_FORMAT,
                           "key 'general.architecture': found 'clip'%s: this file is a vision projector (an mmproj "
                           "file), used together with its text model to read images; loom runs only the text models "
                           "%s and does not support vision projectors yet: give the text model's file instead",
                           kind, runs);
    }
    return loom_errorf(err, LOOM_E_FORMAT,
                       "key 'general.architecture': found '%.*s', a model of an architecture loom does not run; loom "
                       "runs only %s (Qwen3.5 dense and mixture-of-experts text models)", len, name.ptr, runs);
}

int loom_arch_admit(const struct loom_gguf *g, const struct loom_arch **arch, struct loom_hparams *hp,
                    struct loom_geometry *geo, loom_error *err)
{
    struct loom_gguf_str name;
    int rc = loom_gguf_get_str(g, "general.architecture", 0, &name, err);
    if (rc)
        return rc;
    *arch = loom_arch_find(name);
    if (!*arch)
        return arch_refuse(g, name, err);
    return (*arch)->admit(*arch, g, hp, geo, err);
}

int loom_geometry_state_totals(const struct loom_arch *arch, const struct loom_hparams *hp,
                               struct loom_geometry *geo)
{
    int ovf = 0;
    geo->recurrent_state_bytes = geo->kv_bytes_per_token = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        enum loom_layer_kind kind = arch->layer_kind(hp, il);
        for (int i = 0; i < arch->owners[kind].n; i++) {
            const struct loom_owner_shape *o = &geo->owner[arch->owners[kind].kinds[i]];
            uint64_t *total = o->pos_axis >= 0 ? &geo->kv_bytes_per_token : &geo->recurrent_state_bytes;
            ovf |= __builtin_add_overflow(*total, o->bytes, total);
        }
    }
    return ovf;
}

uint64_t loom_geometry_k_bytes(const struct loom_geometry *geo, enum loom_kv_type type)
{
    const struct loom_owner_shape *k = &geo->owner[LOOM_OWNER_K];
    int64_t heads = k->shape[0], dim = k->shape[2];
    if (type == LOOM_KV_F16)
        return k->bytes;
    if (type != LOOM_KV_Q8_0 || dim % 32 != 0)
        return 0;
    return (uint64_t)heads * (uint64_t)(dim / 32) * 34u;
}

uint64_t loom_geometry_k_bytes_per_token(const struct loom_arch *arch, const struct loom_hparams *hp,
                                         const struct loom_geometry *geo, enum loom_kv_type type)
{
    uint64_t total = 0, one = loom_geometry_k_bytes(geo, type);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        enum loom_layer_kind kind = arch->layer_kind(hp, il);
        for (int i = 0; i < arch->owners[kind].n; i++)
            total += arch->owners[kind].kinds[i] == LOOM_OWNER_K ? one : 0;
    }
    return total;
}

int loom_arch_check_tensor(const struct loom_gguf_tensor *t, const char *name, uint64_t ne0, uint64_t ne1,
                           uint64_t ne2, int f32, loom_error *err)
{
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1) {
        if (ne2 == 1)
            return loom_errorf(err, LOOM_E_FORMAT,
                               "tensor '%s': expected shape [%" PRIu64 ", %" PRIu64 "], found [%" PRIu64 ", %" PRIu64
                               ", %" PRIu64 ", %" PRIu64 "]",
                               name, ne0, ne1, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
        return loom_errorf(err, LOOM_E_FORMAT,
                           "tensor '%s': expected shape [%" PRIu64 " (row width), %" PRIu64 " (rows per expert), "
                           "%" PRIu64 " (expert_count)], found [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 "]",
                           name, ne0, ne1, ne2, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    }
    if (f32 && t->type != LOOM_TYPE_F32)
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': expected type F32, found %s", name,
                           loom_type_traits(t->type)->name);
    return LOOM_OK;
}

int loom_arch_expect_tensor(const struct loom_gguf *g, const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                            int f32, loom_error *err)
{
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
    char parts[48];
    if (!t)
        return loom_errorf(err, LOOM_E_FORMAT, "missing tensor '%s'%s", name,
                           loom_gguf_in_no_part(g, parts, sizeof parts));
    return loom_arch_check_tensor(t, name, ne0, ne1, ne2, f32, err);
}

int loom_arch_check_layer_tensors(const struct loom_arch *arch, const struct loom_gguf *g,
                                  const struct loom_hparams *hp, const struct loom_geometry *geo, loom_error *err)
{
    char name[128];
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        unsigned bit = 1u << arch->layer_kind(hp, il);
        for (int i = 0; i < arch->n_weights; i++) {
            const struct loom_weight_row *r = &arch->weights[i];
            if (!(r->kinds & bit))
                continue;
            snprintf(name, sizeof name, "blk.%u.%s", il, r->name);
            if (!r->required && !loom_gguf_find_tensor(g, name))
                continue;
            int rc = loom_arch_expect_tensor(g, name, geo->dim[r->ne[0]], geo->dim[r->ne[1]], geo->dim[r->ne[2]],
                                             r->vector, err);
            if (rc)
                return rc;
        }
    }
    return LOOM_OK;
}

int loom_arch_layer_expects(const struct loom_arch *arch, const struct loom_hparams *hp, uint32_t il,
                            struct loom_gguf_str suffix)
{
    unsigned bit = 1u << arch->layer_kind(hp, il);
    for (int i = 0; i < arch->n_weights; i++)
        if ((arch->weights[i].kinds & bit) && loom_gguf_str_eq(suffix, arch->weights[i].name))
            return 1;
    return 0;
}
