/* gqa_fixture.h — grouped-query attention test models: geometries of the synthetic generator's kind that no preset
 * has (the presets' tiny models have one KV head; their bits stay as they are), with 2 KV heads of 3 query heads
 * each and an attention layer every second layer, and the same model rewritten with every KV head repeated for
 * its query heads (n_head_kv = n_head), which attention must make no different. For tests/test_gqa.c and
 * tests/parity/test_parity_qwen35.c. Include after test.h. */
#ifndef LOOM_TEST_GQA_FIXTURE_H
#define LOOM_TEST_GQA_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "loom.h"
#include "model/synth.h"

/* micro's trunk (head_dim 64, two Gated DeltaNet and two attention layers) with 6 query heads on 2 KV heads. */
static const struct loom_synth_preset gqa_micro = {
    "micro-gqa", 4, 256, 512, 6, 2, 64, 16, {3, 3, 2, 0}, 1e7f, 1e-6f, 2, 32, 1, 2, 4, 4096, 0, 0, 0, 0, 0, 0, 0};
/* tiny's trunk (head_dim 256 as the real models) with 6 query heads on 2 KV heads, attention every second layer. */
static const struct loom_synth_preset gqa_tiny = {
    "tiny-gqa", 4, 256, 512, 6, 2, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 2, 64, 2, 4, 4, 32768, 0, 0, 0, 0, 0, 0, 0};

/* Synthesize geometry p over vocabulary `vocab` into path: weights of wtype (F32, F16, BF16), or with recipe
 * (e.g. "Q4_K_M"; wtype then F32) the quantized file. LOOM_OK or the error (also reported with CHECK). */
static inline int gqa_write(const struct loom_synth_preset *p, const char *vocab, uint32_t wtype, const char *recipe,
                            const char *path)
{
    loom_error err = {0};
    struct loom_synth_params par = {p, wtype, 7, vocab, NULL, NULL, NULL, NULL, 0, NULL};
    par.recipe = recipe ? loom_quant_find_recipe(recipe) : NULL;
    int rc = recipe && !par.recipe ? loom_errorf(&err, LOOM_E_ARG, "recipe '%s' unknown", recipe)
                                   : loom_synth_write(&par, path, &err);
    CHECK(rc == LOOM_OK, "synth %s %s: %s", p->name, recipe ? recipe : "", err.msg);
    return rc;
}

/* ---- the same model with its KV heads repeated ------------------------------------------------------------ */

struct gqa_expand {
    const loom_gguf *in;
    uint64_t group; /* query heads per KV head */
    uint64_t head_bytes; /* one KV head's rows of attn_k / attn_v */
};

static inline int gqa_is_kv(struct loom_gguf_str name)
{
    static const char *const suffix[] = {".attn_k.weight", ".attn_v.weight"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(suffix[i]);
        if (name.len > n && !memcmp(name.ptr + name.len - n, suffix[i], n))
            return 1;
    }
    return 0;
}

/* Tensor `index`: attn_k / attn_v with KV head h / group at the place of head h; every other tensor as it is. */
static inline int gqa_expand_fill(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)err;
    const struct gqa_expand *x = ctx;
    const struct loom_gguf_tensor *t = &x->in->tensors[index];
    if (!gqa_is_kv(t->name)) {
        memcpy(buf, t->data, (size_t)nbytes);
        return LOOM_OK;
    }
    for (uint64_t h = 0; h < nbytes / x->head_bytes; h++)
        memcpy((char *)buf + h * x->head_bytes, (const char *)t->data + h / x->group * x->head_bytes,
               (size_t)x->head_bytes);
    return LOOM_OK;
}

/* The writer for `in` (a dense qwen35 file of p's geometry) with head_count_kv = n_head and attn_k / attn_v of
 * n_head heads. */
static inline int gqa_expand_build(struct loom_gguf_writer *w, const loom_gguf *in, const struct loom_synth_preset *p)
{
    int rc = LOOM_OK;
    for (uint64_t i = 0; i < in->n_kv && !rc; i++)
        rc = loom_gguf_str_eq(in->kv[i].key, "qwen35.attention.head_count_kv")
                 ? loom_gguf_writer_set_u32(w, "qwen35.attention.head_count_kv", p->n_head)
                 : loom_gguf_writer_copy_kv(w, &in->kv[i]);
    for (uint64_t i = 0; i < in->n_tensors && !rc; i++) {
        const struct loom_gguf_tensor *t = &in->tensors[i];
        char name[LOOM_GGUF_MAX_NAME];
        uint64_t ne[LOOM_GGUF_MAX_DIMS] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (gqa_is_kv(t->name))
            ne[1] = (uint64_t)p->n_head * p->head_dim;
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        rc = loom_gguf_writer_add_tensor(w, name, t->type, t->n_dims ? t->n_dims : 1, ne);
    }
    return rc;
}

/* Write to out the model `in` (of geometry p) with each of its n_head_kv KV heads repeated for its query heads.
 * LOOM_OK or the error (also reported with CHECK). */
static inline int gqa_write_expanded(const char *in, const struct loom_synth_preset *p, const char *out)
{
    loom_gguf *g = NULL;
    loom_error err = {0};
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    int rc = w ? loom_gguf_open(in, &g, &err) : LOOM_E_NOMEM;
    if (!rc && (rc = gqa_expand_build(w, g, p)) != LOOM_OK)
        loom_errorf(&err, rc, "building the expanded model's header");
    struct gqa_expand x = {g, p->n_head / p->n_head_kv, 0};
    const struct loom_gguf_tensor *k = g ? loom_gguf_find_tensor(g, "blk.1.attn_k.weight") : NULL;
    if (!rc && !k)
        rc = loom_errorf(&err, LOOM_E_FORMAT, "%s: expected blk.1.attn_k.weight (an attention layer)", in);
    if (!rc) {
        x.head_bytes = k->nbytes / p->n_head_kv;
        rc = loom_gguf_writer_write(w, out, gqa_expand_fill, &x, &err);
    }
    CHECK(rc == LOOM_OK, "expanding %s into %s: %s", in, out, err.msg);
    loom_gguf_writer_free(w);
    loom_gguf_close(g);
    return rc;
}

#endif
