/* gguf_view.c — the public read-only view of a GGUF file (loom.h, "GGUF files"): header figures, metadata keys
 * with typed values and the tensor table, copied out of the reader's structures (src/gguf), and the tensor data
 * check of src/model. */
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/model.h"
#include "util/error.h"

_Static_assert(LOOM_TYPE_COUNT <= LOOM_GGUF_TYPE_LIMIT, "public type id limit below the kernels' type count");

const loom_gguf *loom_model_gguf(const loom_model *model) { return model->gguf; }

void loom_gguf_get_info(const loom_gguf *g, loom_gguf_info *out)
{
    *out = (loom_gguf_info){.file_bytes = g->size, .version = g->version, .n_kv = g->n_kv,
                            .n_tensors = g->n_tensors, .alignment = g->alignment, .data_offset = g->data_offset,
                            .n_warnings = g->n_warnings};
}

int64_t loom_gguf_find_key(const loom_gguf *g, const char *key)
{
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, key);
    return kv ? kv - g->kv : -1;
}

/* The little-endian scalar of `bytes` bytes at p, widened: unsigned, or sign-extended when is_signed. */
static uint64_t read_scalar(const uint8_t *p, unsigned bytes, int is_signed)
{
    uint64_t v = 0;
    for (unsigned b = 0; b < bytes; b++)
        v |= (uint64_t)p[b] << (8 * b);
    if (is_signed && bytes < 8 && (v >> (8 * bytes - 1)) & 1)
        v |= ~(uint64_t)0 << (8 * bytes);
    return v;
}

static int index_error(const char *what, const char *count, uint64_t n, uint64_t i, loom_error *err)
{
    return loom_errorf(err, LOOM_E_RANGE, "%s index: expected < %llu (%s), found %llu", what, (unsigned long long)n,
                       count, (unsigned long long)i);
}

int loom_gguf_kv_at(const loom_gguf *g, uint64_t i, loom_gguf_kv_info *out, loom_error *err)
{
    if (i >= g->n_kv)
        return index_error("key", "n_kv", g->n_kv, i, err);
    const struct loom_gguf_kv *kv = &g->kv[i];
    *out = (loom_gguf_kv_info){.key = kv->key.ptr, .key_len = kv->key.len, .type = kv->type};
    switch (kv->type) {
    case LOOM_GGUF_UINT8: case LOOM_GGUF_BOOL: out->u64 = read_scalar(kv->data, 1, 0); break;
    case LOOM_GGUF_UINT16: out->u64 = read_scalar(kv->data, 2, 0); break;
    case LOOM_GGUF_UINT32: out->u64 = read_scalar(kv->data, 4, 0); break;
    case LOOM_GGUF_UINT64: out->u64 = read_scalar(kv->data, 8, 0); break;
    case LOOM_GGUF_INT8: out->i64 = (int64_t)read_scalar(kv->data, 1, 1); break;
    case LOOM_GGUF_INT16: out->i64 = (int64_t)read_scalar(kv->data, 2, 1); break;
    case LOOM_GGUF_INT32: out->i64 = (int64_t)read_scalar(kv->data, 4, 1); break;
    case LOOM_GGUF_INT64: out->i64 = (int64_t)read_scalar(kv->data, 8, 1); break;
    case LOOM_GGUF_FLOAT32: {
        float f;
        memcpy(&f, kv->data, sizeof f);
        out->f64 = f;
        break;
    }
    case LOOM_GGUF_FLOAT64: memcpy(&out->f64, kv->data, sizeof out->f64); break;
    case LOOM_GGUF_STRING:
        out->str_len = read_scalar(kv->data, 8, 0);
        out->str = (const char *)kv->data + 8;
        break;
    case LOOM_GGUF_ARRAY: out->arr_type = kv->arr_type, out->arr_n = kv->arr_n; break;
    default: break; /* the reader refuses other types */
    }
    return LOOM_OK;
}

int loom_gguf_tensor_at(const loom_gguf *g, uint64_t i, loom_gguf_tensor_info *out, loom_error *err)
{
    if (i >= g->n_tensors)
        return index_error("tensor", "n_tensors", g->n_tensors, i, err);
    const struct loom_gguf_tensor *t = &g->tensors[i];
    *out = (loom_gguf_tensor_info){.type = t->type, .type_name = loom_type_traits(t->type)->name,
                                   .n_dims = t->n_dims, .n_elements = 1, .n_bytes = t->nbytes,
                                   .part = t->part, .file_offset = g->parts[t->part].data_offset + t->offset};
    memcpy(out->name, t->name.ptr, t->name.len); /* shorter than LOOM_GGUF_MAX_NAME: the reader refuses longer */
    for (int d = 0; d < LOOM_GGUF_MAX_DIMS; d++)
        out->n_elements *= out->ne[d] = t->ne[d];
    return LOOM_OK;
}

int loom_gguf_check_tensors(const loom_gguf *g, loom_error *err) { return loom_model_check_tensors(g, err); }
