/* ref_imatrix.h — what llama.cpp's llama-quantize does with --imatrix FILE and --tensor-type PATTERN=TYPE before it
 * calls llama_model_quantize (tools/quantize/quantize.cpp: load_imatrix over common_imatrix_load, the
 * quantize.imatrix.* metadata overrides, parse_tensor_type), written in C over ggml's own GGUF reader so that
 * tools/ref_quantize.c and the parity tests drive the reference exactly as its command-line tool does. The
 * reference is the oracle here: nothing of loom is used. */
#ifndef LOOM_REF_IMATRIX_H
#define LOOM_REF_IMATRIX_H

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ggml.h"
#include "gguf.h"
#include "llama.h"

/* The arrays params point into; free with ref_quant_args_free. */
struct ref_quant_args {
    struct llama_model_imatrix_data *imatrix; /* entries, then {NULL, NULL, 0} */
    size_t n_imatrix;
    struct llama_model_kv_override kv[5];     /* the quantize.imatrix.* keys, then key[0] = 0 */
    struct llama_model_tensor_override *tt;   /* overrides, then {NULL, GGML_TYPE_COUNT} */
    size_t n_tt;
};

static void ref_quant_args_free(struct ref_quant_args *a)
{
    for (size_t i = 0; a->imatrix && i < a->n_imatrix; i++) {
        free((void *)a->imatrix[i].name);
        free((void *)a->imatrix[i].data);
    }
    free(a->imatrix);
    for (size_t i = 0; a->tt && i < a->n_tt; i++)
        free((void *)a->tt[i].pattern);
    free(a->tt);
    memset(a, 0, sizeof *a);
}

/* One entry: weights = in_sum2 / lround(count) per expert row, 1 where the count is 0 (load_imatrix). */
static int ref_imatrix_entry(struct ggml_context *ctx, struct ggml_tensor *sums, struct llama_model_imatrix_data *e)
{
    char base[GGML_MAX_NAME], cname[GGML_MAX_NAME + 16];
    size_t len = strlen(sums->name) - strlen(".in_sum2");
    memcpy(base, sums->name, len);
    base[len] = 0;
    snprintf(cname, sizeof cname, "%s.counts", base);
    struct ggml_tensor *counts = ggml_get_tensor(ctx, cname);
    if (!counts || sums->type != GGML_TYPE_F32 || counts->type != GGML_TYPE_F32)
        return -1;
    int64_t nval = ggml_nelements(sums), ncounts = ggml_nelements(counts), ne0 = nval / ncounts;
    float *w = malloc((size_t)nval * sizeof *w);
    if (!w)
        return -1;
    for (int64_t j = 0; j < ncounts; j++) {
        float count = (float)(int64_t)lroundf(((const float *)counts->data)[j]);
        for (int64_t i = 0; i < ne0; i++)
            w[j * ne0 + i] = count > 0.0f ? ((const float *)sums->data)[j * ne0 + i] / count : 1.0f;
    }
    e->name = strdup(base);
    e->data = w;
    e->size = (size_t)nval;
    return 0;
}

/* The metadata override key k (LLAMA_KV_OVERRIDE_TYPE_STR with the first 127 bytes of s, or _INT with v). */
static void ref_kv(struct llama_model_kv_override *kv, const char *key, const char *s, int64_t v)
{
    memset(kv, 0, sizeof *kv);
    snprintf(kv->key, sizeof kv->key, "%s", key);
    kv->tag = s ? LLAMA_KV_OVERRIDE_TYPE_STR : LLAMA_KV_OVERRIDE_TYPE_INT;
    if (s)
        snprintf(kv->val_str, sizeof kv->val_str, "%s", s);
    else
        kv->val_i64 = v;
}

/* Load the imatrix GGUF at path into a and point qp->imatrix and qp->kv_overrides at it. 0, or -1 with a message. */
static int ref_quant_imatrix(struct ref_quant_args *a, llama_model_quantize_params *qp, const char *path)
{
    struct ggml_context *ctx = NULL;
    struct gguf_init_params ip = {.no_alloc = false, .ctx = &ctx};
    struct gguf_context *g = gguf_init_from_file(path, ip);
    if (!g) {
        fprintf(stderr, "ref_imatrix: %s is not a GGUF file\n", path);
        return -1;
    }
    int64_t kd = gguf_find_key(g, "imatrix.datasets"), kc = gguf_find_key(g, "imatrix.chunk_count");
    int64_t ks = gguf_find_key(g, "imatrix.chunk_size");
    int n = 0, rc = kd < 0 || kc < 0 || ks < 0 ? -1 : 0; /* load_imatrix: missing imatrix metadata */
    a->imatrix = calloc((size_t)gguf_get_n_tensors(g) + 1, sizeof *a->imatrix);
    for (struct ggml_tensor *t = ggml_get_first_tensor(ctx); !rc && t; t = ggml_get_next_tensor(ctx, t)) {
        size_t len = strlen(t->name);
        if (len > 8 && !strcmp(t->name + len - 8, ".in_sum2"))
            rc = ref_imatrix_entry(ctx, t, &a->imatrix[a->n_imatrix++]);
    }
    if (!rc) {
        ref_kv(&a->kv[n++], "quantize.imatrix.file", path, 0);
        if (gguf_get_kv_type(g, kd) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g, kd) == GGUF_TYPE_STRING &&
            gguf_get_arr_n(g, kd) > 0)
            ref_kv(&a->kv[n++], "quantize.imatrix.dataset", gguf_get_arr_str(g, kd, 0), 0);
        ref_kv(&a->kv[n++], "quantize.imatrix.entries_count", NULL, (int64_t)a->n_imatrix);
        int32_t chunks = (int32_t)gguf_get_val_u32(g, kc);
        if (chunks > 0)
            ref_kv(&a->kv[n++], "quantize.imatrix.chunks_count", NULL, chunks);
        a->kv[n].key[0] = 0;
        qp->imatrix = a->imatrix;
        qp->kv_overrides = a->kv;
    } else {
        fprintf(stderr, "ref_imatrix: %s: missing imatrix metadata or a bad sums/counts pair\n", path);
    }
    gguf_free(g);
    ggml_free(ctx);
    return rc;
}

/* spec[n] "PATTERN=TYPE" into a and qp->tt_overrides: the pattern lowercased, the type any ggml type name in
 * any case (parse_tensor_type). 0, or -1 with a message. */
static int ref_quant_tensor_types(struct ref_quant_args *a, llama_model_quantize_params *qp, const char *const *spec,
                                  size_t n)
{
    a->tt = calloc(n + 1, sizeof *a->tt);
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(spec[i], '=');
        int type = GGML_TYPE_COUNT;
        for (int k = 0; eq && k < GGML_TYPE_COUNT; k++)
            if (ggml_type_name((enum ggml_type)k) && !strcasecmp(ggml_type_name((enum ggml_type)k), eq + 1))
                type = k;
        if (!eq || eq == spec[i] || type == GGML_TYPE_COUNT) {
            fprintf(stderr, "ref_imatrix: bad tensor type '%s'\n", spec[i]);
            return -1;
        }
        char *p = strndup(spec[i], (size_t)(eq - spec[i]));
        for (char *c = p; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        a->tt[a->n_tt++] = (struct llama_model_tensor_override){p, (enum ggml_type)type};
    }
    a->tt[n] = (struct llama_model_tensor_override){NULL, GGML_TYPE_COUNT};
    if (n)
        qp->tt_overrides = a->tt;
    return 0;
}

#endif
