/* gguf_split.c — split models (llama.cpp's gguf-split layout): opening a model by its first part, which admits
 * every part with the single-file reader, checks the split keys across parts and merges the tensor tables into
 * one handle (loom_gguf_open_model); and writing a split model's parts, all of them or none (for tests and
 * tools). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/error.h"

#define SPLIT_SUFFIX_FMT "-%05u-of-%05u.gguf"

/* The split keys of one file: each present or not, with its value. */
struct split_keys {
    int has_no, has_count, has_tensors;
    uint16_t no, count;
    int32_t tensors;
};

static const char *const vtype_names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                          "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};

/* Key `key` of g as a scalar of type `type` (UINT16 or INT32) into out; *present 0 when g lacks it. */
static int read_key(const struct loom_gguf *g, const char *file, const char *key, uint32_t type, int *present,
                    void *out, loom_error *err)
{
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, key);
    *present = kv != NULL;
    if (!kv)
        return LOOM_OK;
    if (kv->type != type)
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '%s': expected %s (as gguf-split writes it), found %s",
                           file, key, vtype_names[type], kv->type < 13 ? vtype_names[kv->type] : "unknown");
    memcpy(out, kv->data, type == LOOM_GGUF_UINT16 ? 2 : 4);
    return LOOM_OK;
}

static int read_split_keys(const struct loom_gguf *g, const char *file, struct split_keys *k, loom_error *err)
{
    int rc = read_key(g, file, LOOM_SPLIT_NO, LOOM_GGUF_UINT16, &k->has_no, &k->no, err);
    if (!rc)
        rc = read_key(g, file, LOOM_SPLIT_COUNT, LOOM_GGUF_UINT16, &k->has_count, &k->count, err);
    if (!rc)
        rc = read_key(g, file, LOOM_SPLIT_TENSORS, LOOM_GGUF_INT32, &k->has_tensors, &k->tensors, err);
    return rc;
}

int loom_split_path(char *buf, size_t cap, const char *prefix, uint32_t index, uint32_t n_parts, loom_error *err)
{
    int n = snprintf(buf, cap, "%s" SPLIT_SUFFIX_FMT, prefix, index + 1, n_parts);
    if (n < 0 || (size_t)n >= cap)
        return loom_errorf(err, LOOM_E_ARG, "split part name: '%s' plus its suffix is longer than %zu bytes", prefix,
                           cap - 1);
    return LOOM_OK;
}

/* The prefix of path when it ends in the name of part index of n_parts (llama_split_prefix), into buf; 0 when
 * it does not. */
static int split_prefix(const char *path, uint32_t index, uint32_t n_parts, char *buf, size_t cap)
{
    char suffix[48];
    snprintf(suffix, sizeof suffix, SPLIT_SUFFIX_FMT, index + 1, n_parts);
    size_t n = strlen(path), s = strlen(suffix);
    if (n <= s || strcmp(path + n - s, suffix) || n - s >= cap)
        return 0;
    memcpy(buf, path, n - s);
    buf[n - s] = 0;
    return 1;
}

/* A file that is not part of a split model (split.count absent, 0 as gguf-split --merge leaves it, or 1): any
 * other split key it carries must describe it as the whole model. */
static int check_whole(const struct loom_gguf *g, const char *path, const struct split_keys *k, loom_error *err)
{
    if (k->has_no && k->no != 0)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "'%s': key '" LOOM_SPLIT_NO "': expected 0 in a file that is not split (split.count %u), "
                           "found %u", path, k->has_count ? k->count : 0u, k->no);
    if (k->has_tensors && (k->tensors < 0 || (uint64_t)k->tensors != g->n_tensors))
        return loom_errorf(err, LOOM_E_FORMAT,
                           "'%s': key '" LOOM_SPLIT_TENSORS "': expected the file's %" PRIu64 " tensors (it is not "
                           "split), found %d", path, g->n_tensors, k->tensors);
    return LOOM_OK;
}

/* The first part's own keys: split.no 0 (else the name of the file to give instead), its name in the pattern,
 * split.tensors.count present. prefix receives the name's prefix. */
static int check_first(const char *path, const struct split_keys *k, char *prefix, size_t cap, loom_error *err)
{
    if (!k->has_no)
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_NO "': expected UINT16 in a split model "
                           "(split.count %u), found missing", path, k->count);
    if (k->no != 0) {
        char first[4096];
        if (k->no >= k->count || !split_prefix(path, k->no, k->count, prefix, cap) ||
            loom_split_path(first, sizeof first, prefix, 0, k->count, NULL))
            return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_NO "': expected 0, found %u: this is part "
                               "%u of %u of a split model; name its first part (split.no 0) instead", path, k->no,
                               k->no + 1u, k->count);
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_NO "': expected 0, found %u: this is part %u "
                           "of %u of a split model; name its first part instead: %s", path, k->no, k->no + 1u,
                           k->count, first);
    }
    if (!split_prefix(path, 0, k->count, prefix, cap))
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': file name: expected PREFIX" SPLIT_SUFFIX_FMT " for the first "
                           "part of a split model of split.count %u (the other parts are found by that name), found "
                           "another name", path, 1u, (unsigned)k->count, k->count);
    if (!k->has_tensors)
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_TENSORS "': expected INT32 in a split model, "
                           "found missing", path);
    return LOOM_OK;
}

/* A later part's keys against its position and the first part's. */
static int check_part_keys(const char *path, uint32_t index, const struct split_keys *first, const char *first_path,
                           const struct split_keys *k, loom_error *err)
{
    if (!k->has_no || k->no != index) {
        char found[16] = "missing";
        if (k->has_no)
            snprintf(found, sizeof found, "%u", k->no);
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_NO "': expected %u (its position: part %u of "
                           "%u, as its name says), found %s", path, index, index + 1, first->count, found);
    }
    if (!k->has_count || k->count != first->count)
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_COUNT "': expected %u (as in the first part "
                           "'%s'), found %s%u", path, first->count, first_path, k->has_count ? "" : "missing ",
                           k->has_count ? k->count : 0u);
    if (k->has_tensors && k->tensors != first->tensors)
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_TENSORS "': expected %d (as in the first "
                           "part '%s'), found %d", path, first->tensors, first_path, k->tensors);
    return LOOM_OK;
}

/* Open part index (>= 1) of g's split model, named after prefix, check it and keep it in g->parts[index]. */
static int open_part(struct loom_gguf *g, uint32_t index, const char *prefix, const struct split_keys *first,
                     loom_error *err)
{
    char path[4096];
    const char *first_path = g->parts[0].path;
    int rc = loom_split_path(path, sizeof path, prefix, index, first->count, err);
    if (rc)
        return rc;
    struct loom_gguf *f = NULL;
    loom_error e = {0};
    if ((rc = loom_gguf_open(path, &f, &e)) == LOOM_E_IO)
        return loom_errorf(err, LOOM_E_IO, "split part %u of %u: expected file '%s' (split.count %u in '%s'): %s",
                           index + 1, first->count, path, first->count, first_path, e.msg);
    if (rc)
        return loom_errorf(err, rc, "split part %u of %u '%s': %s", index + 1, first->count, path, e.msg);
    struct loom_gguf_part *p = &g->parts[index];
    *p = (struct loom_gguf_part){f->parts[0].path, f, f->size, f->data_offset, 0, f->n_tensors};
    f->parts[0].path = NULL; /* the name moves to g's part */
    for (uint64_t w = 0; w < f->n_warnings && w < LOOM_GGUF_WARNINGS_KEPT; w++)
        loom_gguf_warnf(g, "part '%s': %s", p->path, f->warnings[w]);
    struct split_keys k = {0};
    if (!(rc = read_split_keys(f, p->path, &k, err)))
        rc = check_part_keys(p->path, index, first, first_path, &k, err);
    return rc;
}

static int cmp_name(const void *a, const void *b)
{
    const struct loom_gguf_tensor *x = *(const struct loom_gguf_tensor *const *)a;
    const struct loom_gguf_tensor *y = *(const struct loom_gguf_tensor *const *)b;
    size_t n = x->name.len < y->name.len ? (size_t)x->name.len : (size_t)y->name.len;
    int r = n ? memcmp(x->name.ptr, y->name.ptr, n) : 0;
    return r ? r : (x->name.len > y->name.len) - (x->name.len < y->name.len);
}

/* A tensor named in two parts, reported with both part files. */
static int check_duplicates(const struct loom_gguf *g, const struct loom_gguf_tensor *all, uint64_t n,
                            loom_error *err)
{
    const struct loom_gguf_tensor **order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return loom_errorf(err, LOOM_E_NOMEM, "split model: out of memory indexing %" PRIu64 " tensors", n);
    for (uint64_t i = 0; i < n; i++)
        order[i] = &all[i];
    qsort(order, (size_t)n, sizeof *order, cmp_name);
    int rc = LOOM_OK;
    for (uint64_t i = 1; i < n && !rc; i++)
        if (!cmp_name(&order[i - 1], &order[i]))
            rc = loom_errorf(err, LOOM_E_FORMAT, "tensor '%.*s': expected in one part of the split model, found in "
                             "'%s' and in '%s'", (int)order[i]->name.len, order[i]->name.ptr,
                             g->parts[order[i - 1]->part].path, g->parts[order[i]->part].path);
    free(order);
    return rc;
}

/* Replace g's tensor table by every part's, part by part; the count must be split.tensors.count. */
static int merge_tensors(struct loom_gguf *g, const struct split_keys *first, loom_error *err)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < g->n_parts; i++)
        n += g->parts[i].n_tensors;
    if ((uint64_t)first->tensors != n || first->tensors < 0)
        return loom_errorf(err, LOOM_E_FORMAT, "'%s': key '" LOOM_SPLIT_TENSORS "': expected the %" PRIu64 " tensors "
                           "its %u parts hold, found %d", g->parts[0].path, n, g->n_parts, first->tensors);
    struct loom_gguf_tensor *all = calloc(n ? n : 1, sizeof *all);
    if (!all)
        return loom_errorf(err, LOOM_E_NOMEM, "split model: out of memory for %" PRIu64 " tensors", n);
    uint64_t at = 0;
    for (uint32_t i = 0; i < g->n_parts; i++) {
        const struct loom_gguf *f = i ? g->parts[i].file : g;
        g->parts[i].first_tensor = at;
        for (uint64_t t = 0; t < f->n_tensors; t++, at++) {
            all[at] = f->tensors[t];
            all[at].part = i;
        }
    }
    int rc = check_duplicates(g, all, n, err);
    if (rc) {
        free(all);
        return rc;
    }
    return loom_gguf_adopt_tensors(g, all, n, err);
}

/* g, the first part, grows into the whole split model of k->count parts. */
static int open_parts(struct loom_gguf *g, const struct split_keys *k, loom_error *err)
{
    char prefix[4096];
    int rc = check_first(g->parts[0].path, k, prefix, sizeof prefix, err);
    if (rc)
        return rc;
    struct loom_gguf_part *parts = calloc(k->count, sizeof *parts);
    if (!parts)
        return loom_errorf(err, LOOM_E_NOMEM, "split model: out of memory for %u parts", k->count);
    parts[0] = g->parts[0];
    free(g->parts);
    g->parts = parts;
    g->n_parts = k->count;
    for (uint32_t i = 1; i < k->count; i++)
        if ((rc = open_part(g, i, prefix, k, err)))
            return rc;
    return merge_tensors(g, k, err);
}

int loom_gguf_open_model(const char *path, loom_gguf **out, loom_error *err)
{
    *out = NULL;
    struct loom_gguf *g = NULL;
    int rc = loom_gguf_open(path, &g, err);
    if (rc)
        return rc;
    struct split_keys k = {0};
    rc = read_split_keys(g, path, &k, err);
    if (!rc)
        rc = k.has_count && k.count > 1 ? open_parts(g, &k, err) : check_whole(g, path, &k, err);
    if (rc) {
        loom_gguf_close(g);
        return rc;
    }
    *out = g;
    return LOOM_OK;
}

const char *loom_gguf_in_no_part(const struct loom_gguf *g, char *buf, size_t cap)
{
    if (g->n_parts < 2)
        return "";
    snprintf(buf, cap, " (in none of the %u parts)", g->n_parts);
    return buf;
}

uint32_t loom_gguf_n_parts(const loom_gguf *g) { return g->n_parts; }

int loom_gguf_part_at(const loom_gguf *g, uint32_t i, loom_gguf_part_info *out, loom_error *err)
{
    if (i >= g->n_parts)
        return loom_errorf(err, LOOM_E_RANGE, "part index: expected < %u (parts), found %u", g->n_parts, i);
    const struct loom_gguf_part *p = &g->parts[i];
    *out = (loom_gguf_part_info){.path = p->path, .file_bytes = p->size, .data_offset = p->data_offset,
                                 .first_tensor = p->first_tensor, .n_tensors = p->n_tensors};
    return LOOM_OK;
}

/* ---- writing one part ------------------------------------------------------------------------ */

struct part_fill {
    const struct loom_gguf *in;
    uint64_t first;
};

static int fill_part(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)err;
    const struct part_fill *f = ctx;
    memcpy(buf, f->in->tensors[f->first + index].data, (size_t)nbytes);
    return LOOM_OK;
}

static int is_split_key(struct loom_gguf_str key)
{
    return loom_gguf_str_eq(key, LOOM_SPLIT_NO) || loom_gguf_str_eq(key, LOOM_SPLIT_COUNT) ||
           loom_gguf_str_eq(key, LOOM_SPLIT_TENSORS);
}

/* The metadata (when with_meta), split keys and tensor infos of part p. */
static int build_part(struct loom_gguf_writer *w, const struct loom_gguf *in, const struct loom_split_part *p)
{
    int rc = LOOM_OK;
    for (uint64_t i = 0; p->with_meta && i < in->n_kv && !rc; i++)
        if (!is_split_key(in->kv[i].key))
            rc = loom_gguf_writer_copy_kv(w, &in->kv[i]);
    if (!rc && !(rc = loom_gguf_writer_set_u16(w, LOOM_SPLIT_NO, (uint16_t)p->part_no)) &&
        !(rc = loom_gguf_writer_set_u16(w, LOOM_SPLIT_COUNT, (uint16_t)p->n_parts)))
        rc = loom_gguf_writer_set_i32(w, LOOM_SPLIT_TENSORS, p->n_total);
    char name[LOOM_GGUF_MAX_NAME];
    for (uint64_t i = p->first; i < p->first + p->count && !rc; i++) {
        const struct loom_gguf_tensor *t = &in->tensors[i];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        rc = loom_gguf_writer_add_tensor(w, name, t->type, t->n_dims ? t->n_dims : 1, t->ne);
    }
    return rc;
}

/* Part p of in, written to its temporary file beside path (loom_gguf_writer_stage). */
static int stage_part(const struct loom_gguf *in, const struct loom_split_part *p, const char *path,
                      struct loom_gguf_staged *staged, loom_error *err)
{
    if (p->first > in->n_tensors || p->count > in->n_tensors - p->first)
        return loom_errorf(err, LOOM_E_ARG, "split part: tensors [%" PRIu64 ", +%" PRIu64 ") outside the %" PRIu64
                           " of the input", p->first, p->count, in->n_tensors);
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    if (!w)
        return loom_errorf(err, LOOM_E_NOMEM, "split part: out of memory");
    int rc = build_part(w, in, p);
    if (rc)
        loom_errorf(err, rc, "split part '%s': building its metadata failed", path);
    struct part_fill f = {in, p->first};
    if (!rc)
        rc = loom_gguf_writer_stage(w, path, fill_part, &f, staged, err);
    loom_gguf_writer_free(w);
    return rc;
}

int loom_gguf_write_part(const struct loom_gguf *in, const struct loom_split_part *p, const char *path,
                         loom_error *err)
{
    struct loom_gguf_staged staged;
    int rc = stage_part(in, p, path, &staged, err);
    return rc ? rc : loom_gguf_publish(&staged, 1, err);
}

/* The path of part k of n under prefix into path[cap], checked as an output (loom_gguf_check_output). */
static int part_output(const char *prefix, uint32_t k, uint32_t n, char *path, size_t cap, loom_error *err)
{
    int rc = loom_split_path(path, cap, prefix, k, n, err);
    return rc ? rc : loom_gguf_check_output(path, err);
}

int loom_gguf_write_split(const struct loom_gguf *in, const struct loom_split_part *p, uint32_t n, const char *prefix,
                          loom_error *err)
{
    char path[PATH_MAX];
    int rc = n ? LOOM_OK : loom_errorf(err, LOOM_E_ARG, "split parts: expected at least 1, found 0");
    for (uint32_t k = 0; k < n && !rc; k++) /* every name refused before any part is written */
        rc = part_output(prefix, k, n, path, sizeof path, err);
    struct loom_gguf_staged *staged = rc ? NULL : calloc(n, sizeof *staged);
    if (!rc && !staged)
        rc = loom_errorf(err, LOOM_E_NOMEM, "split model: out of memory for %u parts", n);
    for (uint32_t k = 0; k < n && !rc; k++)
        if (!(rc = loom_split_path(path, sizeof path, prefix, k, n, err)))
            rc = stage_part(in, &p[k], path, &staged[k], err);
    if (staged && rc)
        loom_gguf_discard(staged, n);
    else if (staged)
        rc = loom_gguf_publish(staged, n, err);
    free(staged);
    return rc;
}
