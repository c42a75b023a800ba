/* model.c — loading a model: open the GGUF (mmap), run its architecture's admission, bind every tensor to
 * the layer plan by the architecture's weight table (struct loom_model / loom_layer as views into the map,
 * expert tensors as struct loom_experts), optionally validate every tensor's data (check_tensors), repack
 * the matrices (not the experts) the active kernel set multiplies faster in the X16 layout,
 * and load the tokenizer. Also the model file's warnings (the text-side queries are in src/api/model_info.c).
 * The model is immutable once returned. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/types.h"
#include "model/expert_cache.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "util/error.h"
#include "util/pool.h"

/* Bind the tensor `name` as n_mats = ne[2] matrices of one shape (admission has checked its shape; it admits
 * any type): w gets the first, n_in = ne[0], n_out = ne[1]. A weight that loom_matmul multiplies (matmul != 0)
 * needs its type's dot product: an activation-only type (Q8_K, Q8_1) is rejected here, naming the tensor. */
static int bind_matrices(const struct loom_gguf *g, const char *name, int matmul, uint32_t max_dims,
                         struct loom_weight *w, uint64_t *n_mats, loom_error *err)
{
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
    if (!t)
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': expected present, found missing", name);
    const struct loom_type_traits *tr = loom_type_traits(t->type);
    if (!tr || !tr->to_float)
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': type %u is not supported for matrices", name, t->type);
    if (matmul && !loom_kernels_active()->types[t->type].vec_dot.row)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "tensor '%s': expected a weight type with a dot product, found %s (an activation type)",
                           name, tr->name);
    if (t->n_dims > max_dims)
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': expected 1 to %u dims, found %u", name, max_dims,
                           t->n_dims);
    w->type = t->type;
    w->n_in = (int64_t)t->ne[0];
    w->n_out = (int64_t)t->ne[1];
    w->row_bytes = loom_type_row_bytes(t->type, w->n_in);
    *n_mats = t->ne[2];
    if (w->row_bytes == 0 || w->row_bytes * (uint64_t)w->n_out * *n_mats != t->nbytes)
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': row of %lld elements does not fit type %s", name,
                           (long long)w->n_in, tr->name);
    w->data = t->data;
    return LOOM_OK;
}

/* Bind a 2-D weight `name` (n_in = ne[0], n_out = ne[1]). */
static int bind_weight(const struct loom_gguf *g, const char *name, int matmul, struct loom_weight *w,
                       loom_error *err)
{
    uint64_t n_mats;
    return bind_matrices(g, name, matmul, 2, w, &n_mats, err);
}

/* Bind a 3-D expert tensor `name` (ne = [n_in, n_out, n_expert]) in the file layout (repack_weights may
 * repack it). */
static int bind_experts(const struct loom_gguf *g, const char *name, struct loom_experts *x, loom_error *err)
{
    uint64_t n_mats;
    int rc = bind_matrices(g, name, 1, 3, &x->w, &n_mats, err);
    x->n_expert = (uint32_t)n_mats; /* admission bounded it by expert_count */
    x->expert_bytes = x->w.row_bytes * (size_t)x->w.n_out;
    return rc;
}

/* Bind an F32 vector `name` of exactly n elements. */
static int bind_f32(const struct loom_gguf *g, const char *name, uint64_t n, const float **out, loom_error *err)
{
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
    if (!t)
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': expected present, found missing", name);
    if (t->type != LOOM_TYPE_F32 || t->nbytes != n * sizeof(float))
        return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': expected F32 with %llu elements, found type %u, %llu bytes",
                           name, (unsigned long long)n, t->type, (unsigned long long)t->nbytes);
    *out = t->data;
    return LOOM_OK;
}

/* Bind layer il's weight table rows of its kind (admission has checked every shape and vector type). */
static int bind_layer(const struct loom_model *m, uint32_t il, struct loom_layer *L, loom_error *err)
{
    const struct loom_arch *a = m->arch;
    L->kind = a->layer_kind(&m->hp, il);
    char name[128];
    int rc;
    for (int i = 0; i < a->n_weights; i++) {
        const struct loom_weight_row *r = &a->weights[i];
        if (!(r->kinds & (1u << L->kind)))
            continue;
        snprintf(name, sizeof name, "blk.%u.%s", il, r->name);
        const struct loom_gguf_tensor *t = loom_gguf_find_tensor(m->gguf, name);
        void *field = (char *)L + r->field;
        if (!t) /* an optional row the file lacks */
            continue;
        if (r->vector)
            *(const float **)field = t->data;
        else if ((rc = r->experts ? bind_experts(m->gguf, name, field, err)
                                  : bind_weight(m->gguf, name, 1, field, err)))
            return rc;
    }
    return LOOM_OK;
}

/* The layers, sized by the admitted block_count, and the global tensors. */
static int bind_model(struct loom_model *m, loom_error *err)
{
    const struct loom_hparams *hp = &m->hp;
    int rc = bind_weight(m->gguf, "token_embd.weight", hp->tied_output, &m->tok_embd, err);
    if (!rc)
        rc = bind_f32(m->gguf, "output_norm.weight", hp->n_embd, &m->output_norm, err);
    if (rc)
        return rc;
    if (hp->tied_output)
        m->output = m->tok_embd;
    else if ((rc = bind_weight(m->gguf, "output.weight", 1, &m->output, err)))
        return rc;
    if ((rc = m->arch->check_circuits(hp, err)))
        return rc;
    if (!(m->layers = calloc(hp->n_layer, sizeof *m->layers)))
        return loom_errorf(err, LOOM_E_NOMEM, "model: allocating %u layers failed", hp->n_layer);
    for (uint32_t il = 0; il < hp->n_layer; il++)
        if ((rc = bind_layer(m, il, &m->layers[il], err)))
            return rc;
    return LOOM_OK;
}

/* Give back the file-map pages wholly inside [begin, begin + bytes). */
static void release_pages(const void *at, size_t bytes)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), begin = (uintptr_t)at, end = begin + bytes;
    begin = (begin + page - 1) / page * page;
    end = end / page * page;
    if (end > begin)
        madvise((void *)begin, end - begin, MADV_DONTNEED); /* advice only: a failure leaves the pages in */
}

void loom_weight_release_rows(const struct loom_weight *w)
{
    if (w->layout == LOOM_WEIGHT_X16)
        release_pages(w->rows, (size_t)(w->n_out / 16) * 16 * w->row_bytes);
}

void loom_experts_release_rows(const struct loom_experts *x)
{
    if (x->w.layout == LOOM_WEIGHT_X16)
        release_pages(x->w.rows, x->expert_bytes * x->n_expert);
}

/* A matrix, or an expert tensor's n_mats matrices expert_bytes apart, that loom_matmul or
 * loom_matmul_experts multiplies and that may be repacked. */
struct repack_item {
    struct loom_weight *w;
    struct loom_experts *x; /* the expert tensor w belongs to, or NULL */
};

/* The weights that may be repacked: the head, and per layer its weight table's matrices and expert
 * tensors. */
static int repack_items(struct loom_model *m, struct repack_item *it)
{
    int n = 0;
    it[n++] = (struct repack_item){&m->output, 0};
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        for (int i = 0; i < m->arch->n_weights; i++) {
            const struct loom_weight_row *r = &m->arch->weights[i];
            char *field = (char *)&m->layers[il] + r->field;
            struct loom_experts *x = r->experts ? (struct loom_experts *)(void *)field : 0;
            struct loom_weight *w = x ? &x->w : (struct loom_weight *)(void *)field;
            if (!r->vector && w->data)
                it[n++] = (struct repack_item){w, x};
        }
    return n;
}

/* Bytes of item it's X16 copy: loom_weight_x16_bytes of each matrix; an expert tensor only when its rows
 * fill whole groups (n_out % 16 == 0), so that every expert keeps its stride, and not when the experts are
 * streamed (streamed: they are read into the expert cache in the file's layout). */
static size_t repack_bytes(const struct loom_model *m, const struct repack_item *it, int streamed)
{
    size_t bytes = loom_weight_x16_bytes(m->kernels, it->w);
    if (!it->x)
        return bytes;
    return it->w->n_out % 16 == 0 && !streamed ? bytes * it->x->n_expert : 0;
}

/* Repack item it into dst (repack_bytes) and give back its file pages. */
static void repack_item(struct loom_pool *pool, struct repack_item *it, char *dst)
{
    if (!it->x) {
        loom_weight_repack_x16(pool, it->w, dst);
        loom_weight_release_rows(it->w);
        return;
    }
    struct loom_experts *x = it->x;
    const void *rows = x->w.data;
    for (uint32_t e = 0; e < x->n_expert; e++) {
        struct loom_weight we = loom_experts_get(x, e);
        loom_weight_repack_x16(pool, &we, dst + (size_t)e * x->expert_bytes);
    }
    x->w.layout = LOOM_WEIGHT_X16;
    x->w.data = dst;
    x->w.rows = rows;
    loom_experts_release_rows(x);
}

#define HUGE_PAGE ((size_t)2 << 20)

/* Repack every weight the model's kernel set has x16 kernels for (repack_bytes) into one allocation (2 MiB
 * aligned, advised for huge pages; each copy 64-byte aligned), releasing each tensor's file pages once it is
 * copied: the peak during load is about the final resident size plus one tensor. Each tensor's groups are
 * shared among n_threads threads (a pool for the load only; on the caller alone if it cannot start): they also
 * share the first touch of the copy's pages, which the kernel zeroes. A head tied to the token embeddings is
 * repacked once and the embedding lookups read its copy (their file pages stay released). */
static int repack_weights(struct loom_model *m, int streamed, int n_threads, loom_error *err)
{
    struct repack_item *it = malloc(sizeof *it * (1 + (size_t)m->arch->n_weights * m->hp.n_layer));
    if (!it)
        return loom_errorf(err, LOOM_E_NOMEM, "repacking weights: allocating the weight list failed");
    int n = repack_items(m, it);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (repack_bytes(m, &it[i], streamed) + 63) / 64 * 64;
    total = (total + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (total && !(m->x16_store = aligned_alloc(HUGE_PAGE, total))) {
        free(it);
        return loom_errorf(err, LOOM_E_NOMEM, "repacked weights: allocating %zu bytes failed", total);
    }
    m->x16_bytes = total;
    if (total)
        madvise(m->x16_store, total, MADV_HUGEPAGE); /* advice only: fewer page faults and TLB misses */
    char *at = m->x16_store;
    struct loom_pool *pool = total && n_threads > 1 ? loom_pool_new(n_threads) : NULL;
    for (int i = 0; i < n; i++) {
        size_t bytes = repack_bytes(m, &it[i], streamed);
        if (!bytes)
            continue;
        repack_item(pool, &it[i], at);
        at += (bytes + 63) / 64 * 64;
    }
    loom_pool_free(pool);
    free(it);
    if (m->hp.tied_output)
        m->tok_embd = m->output;
    return LOOM_OK;
}

int loom_model_check_tensors(const struct loom_gguf *g, loom_error *err)
{
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct loom_gguf_tensor *t = &g->tensors[i];
        size_t row_bytes = loom_type_row_bytes(t->type, (int64_t)t->ne[0]);
        struct loom_row_fault f;
        int64_t r = row_bytes ? loom_type_validate_rows(t->type, t->data, (int64_t)t->ne[0],
                                                        (int64_t)(t->nbytes / row_bytes), &f)
                              : -1;
        if (r >= 0) {
            char what[160], where[64];
            loom_row_fault_describe(t->type, &f, what, sizeof what);
            loom_row_where(t->n_dims, (int64_t)t->ne[1], r, where, sizeof where);
            return loom_errorf(err, LOOM_E_FORMAT, "tensor '%.*s' %s: %s, expected finite (tensor check)",
                               (int)t->name.len, t->name.ptr, where, what);
        }
    }
    return LOOM_OK;
}

loom_model *loom_model_load(const char *path, loom_error *err) { return loom_model_load_ex(path, NULL, err); }

/* Refuse a sparse synthetic file (loom synth --sparse writes LOOM_SYNTH_SPARSE_KEY = true): its tensor data is a hole
 * of zeros, a geometry for loom inspect, not weights to run. LOOM_E_FORMAT naming the key. */
static int refuse_sparse(const struct loom_gguf *g, loom_error *err)
{
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, LOOM_SYNTH_SPARSE_KEY);
    if (kv && kv->type == LOOM_GGUF_BOOL && kv->data[0])
        return loom_errorf(err, LOOM_E_FORMAT, "key " LOOM_SYNTH_SPARSE_KEY ": expected absent or false, found true (a sparse "
                           "synthetic file: its tensor data is a hole of zeros, for `loom inspect` only, not a model "
                           "to run)");
    return LOOM_OK;
}

loom_model *loom_model_load_ex(const char *path, const loom_model_params *params, loom_error *err)
{
    if (!path) {
        loom_errorf(err, LOOM_E_ARG, "model path: expected a file name, found NULL");
        return NULL;
    }
    enum loom_read_ahead ahead = params ? params->read_ahead : LOOM_READ_AHEAD_DEFAULT;
    if ((unsigned)ahead > LOOM_READ_AHEAD_ALL) {
        loom_errorf(err, LOOM_E_ARG, "read_ahead: expected a loom_read_ahead value (0 to %d), found %d",
                    (int)LOOM_READ_AHEAD_ALL, (int)ahead);
        return NULL;
    }
    int n_threads;
    if (loom_pool_threads(params ? params->n_threads : 0, "model params n_threads", &n_threads, err))
        return NULL;
    if (ahead && !params->mem_budget) {
        loom_errorf(err, LOOM_E_ARG, "read_ahead: expected mem_budget with it (it chooses what the expert cache reads "
                    "ahead), found mem_budget 0");
        return NULL;
    }
    struct loom_model *m = calloc(1, sizeof *m);
    if (!m) {
        loom_errorf(err, LOOM_E_NOMEM, "model: allocating %zu bytes failed", sizeof *m);
        return NULL;
    }
    m->kernels = loom_kernels_active();
    int rc = loom_gguf_open_model(path, &m->gguf, err);
    if (!rc)
        rc = refuse_sparse(m->gguf, err);
    if (!rc)
        rc = loom_arch_admit(m->gguf, &m->arch, &m->hp, &m->geo, err);
    if (!rc)
        rc = bind_model(m, err);
    if (!rc && params && params->check_tensors)
        rc = loom_model_check_tensors(m->gguf, err);
    uint64_t budget = params ? params->mem_budget : 0;
    if (!rc)
        rc = repack_weights(m, budget != 0, n_threads, err);
    if (!rc) /* before the dense part is held: the tokenizer gives back the file pages it has read */
        rc = loom_tokenizer_load(m->gguf, (uint32_t)m->output.n_out, &m->tok, err);
    if (!rc && budget)
        rc = loom_expert_cache_open(m, budget, m->x16_bytes, &m->experts, err);
    if (!rc && budget)
        loom_expert_cache_set_read_ahead(m->experts, ahead);
    if (rc) {
        loom_model_free(m);
        return NULL;
    }
    return m;
}

void loom_model_free(loom_model *model)
{
    if (!model)
        return;
    if (model->tok)
        loom_tokenizer_free(model->tok);
    loom_expert_cache_free(model->experts);
    if (model->gguf)
        loom_gguf_close(model->gguf);
    free(model->x16_store);
    free(model->layers);
    free(model);
}

int loom_model_n_warnings(const loom_model *model)
{
    return model->gguf->n_warnings > INT32_MAX ? INT32_MAX : (int)model->gguf->n_warnings;
}

const char *loom_model_warning(const loom_model *model, int i)
{
    return i < 0 ? NULL : loom_gguf_warning(model->gguf, (uint64_t)i);
}

int loom_model_expert_stats(const loom_model *model, loom_expert_stats *out)
{
    if (!model || !model->experts || !out)
        return LOOM_E_ARG;
    loom_expert_cache_stats(model->experts, out);
    return LOOM_OK;
}
