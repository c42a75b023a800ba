/* imatrix.c — reading llama-imatrix's GGUF importance matrices (imatrix.h): the file checked whole (type,
 * metadata, every sums/counts pair, every value) before the weights are allocated, then the per-expert weights
 * sum / count computed as llama.cpp's tools/quantize/quantize.cpp load_imatrix does. */
#include "model/imatrix.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "util/error.h"

#define SUFFIX_SUMS ".in_sum2"
#define SUFFIX_COUNTS ".counts"

/* A pair of tensors found for one entry. */
struct pair {
    char name[LOOM_GGUF_MAX_NAME + 1];
    const struct loom_gguf_tensor *sums, *counts;
};

static uint64_t n_elements(const struct loom_gguf_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims && d < LOOM_GGUF_MAX_DIMS; d++)
        n *= t->ne[d];
    return n;
}

/* 1 and the base name in out when name (len bytes) ends in suffix. */
static int strip_suffix(struct loom_gguf_str name, const char *suffix, char *out)
{
    size_t s = strlen(suffix);
    if (name.len <= s || name.len > LOOM_GGUF_MAX_NAME || memcmp(name.ptr + name.len - s, suffix, s))
        return 0;
    memcpy(out, name.ptr, (size_t)name.len - s);
    out[name.len - s] = 0;
    return 1;
}

/* The file must say it is an importance matrix and carry the metadata llama-quantize requires. */
static int check_metadata(const struct loom_gguf *g, const char *path, const struct loom_gguf_kv **datasets,
                          uint32_t *chunk_count, uint32_t *chunk_size, loom_error *err)
{
    struct loom_gguf_str type;
    char why[sizeof err->msg];
    int rc = loom_gguf_get_str(g, "general.type", 0, &type, err);
    if (rc) {
        snprintf(why, sizeof why, "%s", err->msg);
        return loom_errorf(err, rc, "%s: not an imatrix file: %s (llama-imatrix writes general.type 'imatrix')", path,
                           why);
    }
    if (!loom_gguf_str_eq(type, "imatrix"))
        return loom_errorf(err, LOOM_E_FORMAT, "%s: not an imatrix file: general.type is '%.*s', expected 'imatrix'",
                           path, (int)(type.len > 64 ? 64 : type.len), type.ptr);
    rc = loom_gguf_get_arr(g, "imatrix.datasets", LOOM_GGUF_STRING, 0, datasets, err);
    if (!rc)
        rc = loom_gguf_get_u32(g, "imatrix.chunk_count", 0, chunk_count, err);
    if (!rc)
        rc = loom_gguf_get_u32(g, "imatrix.chunk_size", 0, chunk_size, err);
    if (rc) {
        snprintf(why, sizeof why, "%s", err->msg);
        return loom_errorf(err, rc, "%s: imatrix metadata: %s (llama-quantize refuses a file without it)", path, why);
    }
    return LOOM_OK;
}

/* Pair every "N.in_sum2" with its "N.counts" into p[*n] (p has room for every tensor). */
static int find_pairs(const struct loom_gguf *g, const char *path, struct pair *p, size_t *n, loom_error *err)
{
    *n = 0;
    char base[LOOM_GGUF_MAX_NAME + 1], other[LOOM_GGUF_MAX_NAME + 16];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct loom_gguf_tensor *t = &g->tensors[i];
        if (strip_suffix(t->name, SUFFIX_COUNTS, base)) {
            snprintf(other, sizeof other, "%s%s", base, SUFFIX_SUMS);
            if (!loom_gguf_find_tensor(g, other))
                return loom_errorf(err, LOOM_E_FORMAT, "%s: tensor '%s%s' has no '%s', expected the pair", path, base,
                                   SUFFIX_COUNTS, other);
            continue;
        }
        if (!strip_suffix(t->name, SUFFIX_SUMS, base))
            continue;
        snprintf(other, sizeof other, "%s%s", base, SUFFIX_COUNTS);
        const struct loom_gguf_tensor *c = loom_gguf_find_tensor(g, other);
        if (!c)
            return loom_errorf(err, LOOM_E_FORMAT, "%s: tensor '%s%s' has no '%s', expected the pair", path, base,
                               SUFFIX_SUMS, other);
        memcpy(p[*n].name, base, strlen(base) + 1);
        p[*n].sums = t;
        p[*n].counts = c;
        ++*n;
    }
    if (*n == 0)
        return loom_errorf(err, LOOM_E_FORMAT, "%s: no '<tensor>%s' / '<tensor>%s' pairs, expected at least one entry",
                           path, SUFFIX_SUMS, SUFFIX_COUNTS);
    return LOOM_OK;
}

/* Types, lengths and values of one pair. */
static int check_pair(const struct pair *p, const char *path, loom_error *err)
{
    const struct loom_gguf_tensor *ts[2] = {p->sums, p->counts};
    for (int k = 0; k < 2; k++)
        if (ts[k]->type != LOOM_TYPE_F32)
            return loom_errorf(err, LOOM_E_FORMAT, "%s: tensor '%s%s': type %u, expected F32 (0)", path, p->name,
                               k ? SUFFIX_COUNTS : SUFFIX_SUMS, ts[k]->type);
    uint64_t n_sums = n_elements(p->sums), n_counts = n_elements(p->counts);
    if (n_counts == 0 || n_sums == 0 || n_sums % n_counts)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "%s: entry '%s': %" PRIu64 " sums and %" PRIu64 " counts, expected one or more counts and "
                           "a whole number of sums per count", path, p->name, n_sums, n_counts);
    const float *c = p->counts->data, *s = p->sums->data;
    for (uint64_t j = 0; j < n_counts; j++) {
        float v;
        memcpy(&v, c + j, sizeof v);
        if (!isfinite(v) || v < 0 || v > 9e18f)
            return loom_errorf(err, LOOM_E_FORMAT, "%s: entry '%s' count %" PRIu64 ": %g, expected a finite count >= 0",
                               path, p->name, j, (double)v);
    }
    for (uint64_t j = 0; j < n_sums; j++) {
        float v;
        memcpy(&v, s + j, sizeof v);
        if (!isfinite(v))
            return loom_errorf(err, LOOM_E_FORMAT, "%s: entry '%s' sum %" PRIu64 " (expert %" PRIu64 " column %" PRIu64
                               "): %g, expected finite", path, p->name, j, j / (n_sums / n_counts),
                               j % (n_sums / n_counts), (double)v);
    }
    return LOOM_OK;
}

/* weights[e][i] = sums[e][i] / count[e] with count rounded to an integer (lround, then as float), or 1 for
 * every column of an expert whose count is 0 (quantize.cpp load_imatrix). */
static void compute_weights(const struct pair *p, float *w, struct loom_imatrix_entry *e)
{
    e->n_mat = n_elements(p->counts);
    e->n_per_row = n_elements(p->sums) / e->n_mat;
    e->weights = w;
    const float *c = p->counts->data, *s = p->sums->data;
    for (uint64_t j = 0; j < e->n_mat; j++) {
        float cj, sj;
        memcpy(&cj, c + j, sizeof cj);
        float count = (float)(int64_t)lroundf(cj);
        for (uint64_t i = 0; i < e->n_per_row; i++) {
            memcpy(&sj, s + j * e->n_per_row + i, sizeof sj);
            w[j * e->n_per_row + i] = count > 0.0f ? sj / count : 1.0f;
        }
    }
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct loom_imatrix_entry *)a)->name, ((const struct loom_imatrix_entry *)b)->name);
}

/* Copy the checked file into m: names, weights, datasets. */
static int build(const struct pair *p, size_t n, const struct loom_gguf_kv *ds, struct loom_imatrix *m,
                 loom_error *err)
{
    size_t n_floats = 0, name_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        n_floats += (size_t)n_elements(p[i].sums);
        name_bytes += strlen(p[i].name) + 1;
    }
    m->e = calloc(n, sizeof *m->e);
    float *w = m->weights_ = malloc(n_floats * sizeof *w);
    char *names = m->names_ = malloc(name_bytes);
    m->datasets = calloc(ds->arr_n ? (size_t)ds->arr_n : 1, sizeof *m->datasets);
    struct loom_gguf_str *strs = calloc(ds->arr_n ? (size_t)ds->arr_n : 1, sizeof *strs);
    if (!m->e || !w || !names || !m->datasets || !strs) {
        free(strs);
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for %zu imatrix entries (%zu weights)", n, n_floats);
    }
    m->n = n;
    int rc = loom_gguf_kv_strings(ds, strs, ds->arr_n, err);
    for (uint64_t i = 0; !rc && i < ds->arr_n; i++) {
        if (!(m->datasets[i] = strndup(strs[i].ptr, (size_t)strs[i].len)))
            rc = loom_errorf(err, LOOM_E_NOMEM, "out of memory for imatrix dataset names");
        else
            m->n_datasets++;
    }
    free(strs);
    char *q = names;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(p[i].name) + 1;
        memcpy(q, p[i].name, len);
        m->e[i].name = q;
        q += len;
        compute_weights(&p[i], w, &m->e[i]);
        w += m->e[i].n_per_row * m->e[i].n_mat;
    }
    qsort(m->e, n, sizeof *m->e, entry_cmp);
    return rc;
}

/* "GGUF" at the start of the file, or an error saying what was found (the legacy .dat format has none). A file
 * too short to hold it, or one that cannot be read (a folder), is left to the GGUF reader, which says so. */
static int check_magic(const char *path, loom_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return loom_errorf(err, LOOM_E_IO, "%s: cannot open the imatrix file: %s", path, strerror(errno));
    unsigned char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    if (got == 4 && memcmp(magic, "GGUF", 4))
        return loom_errorf(err, LOOM_E_FORMAT,
                           "%s: first bytes %02x %02x %02x %02x, expected 'GGUF': not a GGUF imatrix file (loom does "
                           "not read the legacy .dat format; llama-imatrix writes GGUF by default)",
                           path, magic[0], magic[1], magic[2], magic[3]);
    return LOOM_OK;
}

int loom_imatrix_load(const char *path, struct loom_imatrix **out, loom_error *err)
{
    if (!path || !out)
        return loom_errorf(err, LOOM_E_ARG, "imatrix: missing path or output");
    int rc = check_magic(path, err);
    struct loom_gguf *g = NULL;
    if (!rc && (rc = loom_gguf_open(path, &g, err)) != LOOM_OK && err) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        loom_errorf(err, rc, "imatrix %s: %s", path, why);
    }
    if (rc)
        return rc;
    const struct loom_gguf_kv *ds = NULL;
    uint32_t chunk_count = 0, chunk_size = 0;
    struct pair *p = malloc((g->n_tensors ? (size_t)g->n_tensors : 1) * sizeof *p);
    struct loom_imatrix *m = calloc(1, sizeof *m);
    size_t n = 0;
    if (!p || !m)
        rc = loom_errorf(err, LOOM_E_NOMEM, "out of memory for %" PRIu64 " imatrix tensors", g->n_tensors);
    if (!rc)
        rc = check_metadata(g, path, &ds, &chunk_count, &chunk_size, err);
    if (!rc)
        rc = find_pairs(g, path, p, &n, err);
    for (size_t i = 0; !rc && i < n; i++)
        rc = check_pair(&p[i], path, err);
    if (!rc) {
        m->chunk_count = chunk_count;
        m->chunk_size = chunk_size;
        if (!(m->path = strdup(path)))
            rc = loom_errorf(err, LOOM_E_NOMEM, "out of memory for the imatrix path");
    }
    if (!rc)
        rc = build(p, n, ds, m, err);
    free(p);
    loom_gguf_close(g);
    if (rc) {
        loom_imatrix_free(m);
        return rc;
    }
    *out = m;
    return LOOM_OK;
}

void loom_imatrix_free(struct loom_imatrix *m)
{
    if (!m)
        return;
    free(m->names_);
    free(m->weights_);
    for (size_t i = 0; i < m->n_datasets; i++)
        free(m->datasets[i]);
    free(m->datasets);
    free(m->e);
    free(m->path);
    free(m);
}

const struct loom_imatrix_entry *loom_imatrix_find(const struct loom_imatrix *m, const char *name)
{
    if (!m || !name)
        return NULL;
    struct loom_imatrix_entry key = {.name = name};
    return bsearch(&key, m->e, m->n, sizeof *m->e, entry_cmp);
}
