/* gguf_read.c — the GGUF reader: maps a file (or takes a buffer), walks the header, metadata and tensor
 * infos with a bounds-checked cursor, refuses what the reference engine's reader refuses (docs/gguf-checks.md
 * lists every check) with checked arithmetic before allocating, warns about what only the GGUF convention
 * forbids, and answers key/tensor look-ups by binary search over sorted indexes. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "util/error.h"

#define GGUF_HEADER_BYTES 24    /* magic, version, n_tensors, n_kv */
#define GGUF_MIN_KV_BYTES 14    /* key length 8, key 1 (never empty), type 4, smallest value 1 */
#define GGUF_MIN_TINFO_BYTES 24 /* name length 8, n_dims 4 (0 dims is a scalar), type 4, offset 8 */
#define NAME_SHOWN 96           /* longest name quoted in a message */
/* The reference reader's limits on any string (GGUF_MAX_STRING_LENGTH) and array (GGUF_MAX_ARRAY_ELEMENTS);
 * tensor names are shorter than LOOM_GGUF_MAX_NAME. */
#define GGUF_MAX_STRING_BYTES (1ull << 30)
#define GGUF_MAX_ARRAY_N (1ull << 30)
#define GGUF_CONVENTION_KEY_BYTES 65535 /* the GGUF convention's longest key (2^16 - 1) */

/* The handle plus what only the reader needs: whether it owns the map and the sorted indexes. */
struct gguf_impl {
    struct loom_gguf pub; /* first member: a loom_gguf pointer is a gguf_impl pointer */
    int owns_map;
    uint64_t *kv_order; /* kv indices sorted by key */
    uint64_t *t_order;  /* tensor indices sorted by name */
};

/* A bounds-checked reading position over the whole file; warnings go to g. */
struct cursor {
    const uint8_t *p;
    size_t size;
    size_t pos;
    loom_error *err;
    struct loom_gguf *g;
};

static const char *const vtype_names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                          "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
static const uint8_t vtype_sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}; /* 0: variable size */

static const char *vtype_name(uint32_t t)
{
    return t < sizeof vtype_names / sizeof vtype_names[0] ? vtype_names[t] : "unknown";
}

static int shown_len(struct loom_gguf_str s)
{
    return (int)(s.len < NAME_SHOWN ? s.len : NAME_SHOWN);
}

void loom_gguf_warnf(struct loom_gguf *g, const char *fmt, ...)
{
    if (g->n_warnings < LOOM_GGUF_WARNINGS_KEPT) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->warnings[g->n_warnings], sizeof g->warnings[0], fmt, ap);
        va_end(ap);
    }
    g->n_warnings++;
}

/* s for a message: printable ASCII as is, other bytes as \xNN, at most 48 bytes of s then "...". */
static const char *escaped(struct loom_gguf_str s, char *buf, size_t cap)
{
    size_t o = 0;
    for (uint64_t i = 0; i < s.len && o + 8 < cap; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (i == 48) {
            o += (size_t)snprintf(buf + o, cap - o, "...");
            break;
        }
        o += (size_t)(ch >= 0x20 && ch < 0x7f ? snprintf(buf + o, cap - o, "%c", ch)
                                              : snprintf(buf + o, cap - o, "\\x%02x", ch));
    }
    buf[o] = 0;
    return buf;
}

/* Offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms, surrogates or code points above
 * U+10FFFF), or s.len when s is valid. */
static uint64_t utf8_invalid_at(struct loom_gguf_str s)
{
    const unsigned char *p = (const unsigned char *)s.ptr;
    for (uint64_t i = 0; i < s.len;) {
        unsigned char b = p[i];
        /* continuation bytes that follow b; 9 marks a byte that cannot start a sequence */
        uint64_t n = b < 0x80 ? 0 : b < 0xc2 ? 9 : b <= 0xdf ? 1 : b <= 0xef ? 2 : b <= 0xf4 ? 3 : 9;
        if (n == 9 || n > s.len - i - 1)
            return i;
        unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
        if (b == 0xe0)
            lo = 0xa0;
        else if (b == 0xed)
            hi = 0x9f;
        else if (b == 0xf0)
            lo = 0x90;
        else if (b == 0xf4)
            hi = 0x8f;
        for (uint64_t k = 1; k <= n; k++)
            if (p[i + k] < (k == 1 ? lo : 0x80) || p[i + k] > (k == 1 ? hi : 0xbf))
                return i;
        i += n + 1;
    }
    return s.len;
}

static int cur_need(struct cursor *c, uint64_t n, const char *what, struct loom_gguf_str who)
{
    if (n <= c->size - c->pos)
        return LOOM_OK;
    return loom_errorf(c->err, LOOM_E_FORMAT,
                       "truncated file: %s%s%.*s%s needs %" PRIu64 " bytes at offset %zu, but only %zu remain", what,
                       who.len ? " of '" : "", shown_len(who), who.len ? who.ptr : "", who.len ? "'" : "", n, c->pos,
                       c->size - c->pos);
}

static int cur_u32(struct cursor *c, uint32_t *v, const char *what, struct loom_gguf_str who)
{
    int rc = cur_need(c, 4, what, who);
    if (rc)
        return rc;
    memcpy(v, c->p + c->pos, 4);
    c->pos += 4;
    return LOOM_OK;
}

static int cur_u64(struct cursor *c, uint64_t *v, const char *what, struct loom_gguf_str who)
{
    int rc = cur_need(c, 8, what, who);
    if (rc)
        return rc;
    memcpy(v, c->p + c->pos, 8);
    c->pos += 8;
    return LOOM_OK;
}

/* A length-prefixed string; the bytes must lie inside the file. */
static int cur_str(struct cursor *c, struct loom_gguf_str *s, const char *what, struct loom_gguf_str who)
{
    uint64_t len;
    int rc = cur_u64(c, &len, what, who);
    if (rc)
        return rc;
    if (len > GGUF_MAX_STRING_BYTES)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "%s%s%.*s%s has length %" PRIu64 " at offset %zu, expected at most %llu bytes (the "
                           "reference's limit on a string)",
                           what, who.len ? " of '" : "", shown_len(who), who.len ? who.ptr : "", who.len ? "'" : "",
                           len, c->pos - 8, GGUF_MAX_STRING_BYTES);
    if (len > c->size - c->pos)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "%s%s%.*s%s has length %" PRIu64 " at offset %zu, but only %zu bytes remain in the file",
                           what, who.len ? " of '" : "", shown_len(who), who.len ? who.ptr : "", who.len ? "'" : "",
                           len, c->pos - 8, c->size - c->pos);
    s->len = len;
    s->ptr = (const char *)c->p + c->pos;
    c->pos += (size_t)len;
    return LOOM_OK;
}

static const struct loom_gguf_str no_name = {0, NULL};

/* Skip `n` values of fixed-size type `t`; a BOOL byte other than 0 or 1 is warned about (the reference reads
 * it as true). */
static int skip_fixed(struct cursor *c, uint32_t t, uint64_t n, struct loom_gguf_str key)
{
    uint64_t bytes;
    if (__builtin_mul_overflow(n, (uint64_t)vtype_sizes[t], &bytes) || bytes > c->size - c->pos)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "key '%.*s': %" PRIu64 " %s values need more bytes than the %zu left at offset %zu",
                           shown_len(key), key.ptr, n, vtype_name(t), c->size - c->pos, c->pos);
    for (uint64_t i = 0; t == LOOM_GGUF_BOOL && i < n; i++)
        if (c->p[c->pos + i] > 1) {
            char shown[256];
            loom_gguf_warnf(c->g, "key '%s': BOOL value %" PRIu64 " is %u; the GGUF convention allows only 0 or 1 (read as true)",
                  escaped(key, shown, sizeof shown), i, c->p[c->pos + i]);
            break;
        }
    c->pos += (size_t)bytes;
    return LOOM_OK;
}

/* Walk one value of type t (or n elements of it for arrays); kv->data is set by the caller. */
static int skip_values(struct cursor *c, uint32_t t, uint64_t n, struct loom_gguf_str key)
{
    if (t == LOOM_GGUF_STRING) {
        /* each string is at least its 8-byte length: bound n before walking */
        if (n > (c->size - c->pos) / 8)
            return loom_errorf(c->err, LOOM_E_FORMAT,
                               "key '%.*s': %" PRIu64 " strings cannot fit in the %zu bytes left at offset %zu",
                               shown_len(key), key.ptr, n, c->size - c->pos, c->pos);
        for (uint64_t i = 0; i < n; i++) {
            struct loom_gguf_str s;
            int rc = cur_str(c, &s, "string value", key);
            if (rc)
                return rc;
        }
        return LOOM_OK;
    }
    return skip_fixed(c, t, n, key);
}

/* Why `s` breaks the GGUF convention for keys (at most 65535 bytes of ASCII, lower_snake_case segments
 * [a-z0-9_]+ separated by '.'), written into why; "" when it follows it. The first segment may also hold '-':
 * it is the architecture's name, and the reference names architectures so ("command-r", "gpt-oss"). */
static const char *key_convention(struct loom_gguf_str s, char *why, size_t cap)
{
    uint64_t bad, seg = 0;
    why[0] = 0;
    if (s.len > GGUF_CONVENTION_KEY_BYTES)
        snprintf(why, cap, "is %" PRIu64 " bytes long, more than %d", s.len, GGUF_CONVENTION_KEY_BYTES);
    else if ((bad = utf8_invalid_at(s)) < s.len)
        snprintf(why, cap, "is not valid UTF-8 (byte %" PRIu64 ")", bad);
    for (uint64_t i = 0; !why[0] && i <= s.len; i++) {
        char ch = i < s.len ? s.ptr[i] : '.';
        if (ch == '.' && i == seg)
            snprintf(why, cap, "has an empty segment at byte %" PRIu64, i);
        else if (ch == '.')
            seg = i + 1;
        else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || (ch == '-' && !seg)))
            snprintf(why, cap, "has byte 0x%02x at %" PRIu64 ", outside [a-z0-9_.]", (unsigned char)ch, i);
    }
    return why;
}

static int parse_kv(struct cursor *c, uint64_t i, struct loom_gguf_kv *kv)
{
    int rc = cur_str(c, &kv->key, "key name", no_name);
    if (rc)
        return rc;
    if (!kv->key.len)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "key #%" PRIu64 " at offset %zu: name is empty, expected 1 or more bytes", i, c->pos - 8);
    char why[96], shown[256];
    if (key_convention(kv->key, why, sizeof why)[0])
        loom_gguf_warnf(c->g, "key #%" PRIu64 " '%s' %s; the GGUF convention asks for lower_snake_case ASCII segments separated "
              "by '.'", i, escaped(kv->key, shown, sizeof shown), why);
    if ((rc = cur_u32(c, &kv->type, "value type", kv->key)))
        return rc;
    if (kv->type > LOOM_GGUF_FLOAT64)
        return loom_errorf(c->err, LOOM_E_FORMAT, "key #%" PRIu64 " '%.*s': value type %u is unknown (expected 0..12)",
                           i, shown_len(kv->key), kv->key.ptr, kv->type);
    if (kv->type != LOOM_GGUF_ARRAY) {
        kv->data = c->p + c->pos;
        return skip_values(c, kv->type, 1, kv->key);
    }
    if ((rc = cur_u32(c, &kv->arr_type, "array element type", kv->key)) ||
        (rc = cur_u64(c, &kv->arr_n, "array length", kv->key)))
        return rc;
    if (kv->arr_type == LOOM_GGUF_ARRAY)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "key '%.*s': array of arrays is not supported (element type ARRAY)", shown_len(kv->key),
                           kv->key.ptr);
    if (kv->arr_type > LOOM_GGUF_FLOAT64)
        return loom_errorf(c->err, LOOM_E_FORMAT, "key '%.*s': array element type %u is unknown (expected 0..12)",
                           shown_len(kv->key), kv->key.ptr, kv->arr_type);
    if (kv->arr_n > GGUF_MAX_ARRAY_N)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "key '%.*s': array length %" PRIu64 ", expected at most %llu (the reference's limit)",
                           shown_len(kv->key), kv->key.ptr, kv->arr_n, GGUF_MAX_ARRAY_N);
    kv->data = c->p + c->pos;
    return skip_values(c, kv->arr_type, kv->arr_n, kv->key);
}

/* Element count and byte size of a tensor from its shape and type, all checked. */
static int tensor_geometry(struct cursor *c, struct loom_gguf_tensor *t)
{
    int64_t nel = 1;
    for (uint32_t d = 0; d < LOOM_GGUF_MAX_DIMS; d++) {
        if (t->ne[d] > (uint64_t)INT64_MAX || __builtin_mul_overflow(nel, (int64_t)t->ne[d], &nel))
            return loom_errorf(c->err, LOOM_E_FORMAT,
                               "tensor '%.*s': shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                               "] has an element count that overflows int64",
                               shown_len(t->name), t->name.ptr, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    }
    const struct loom_type_traits *tr = loom_type_traits(t->type);
    if (!tr)
        return loom_errorf(c->err, LOOM_E_FORMAT, "tensor '%.*s': type id %u is unknown to loom",
                           shown_len(t->name), t->name.ptr, t->type);
    if (t->ne[0] % (uint64_t)tr->block_size)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "tensor '%.*s': ne[0] = %" PRIu64 " is not a multiple of the %s block size %" PRId64,
                           shown_len(t->name), t->name.ptr, t->ne[0], tr->name, tr->block_size);
    uint64_t bytes = t->ne[0] / (uint64_t)tr->block_size;
    int ovf = __builtin_mul_overflow(bytes, (uint64_t)tr->type_size, &bytes);
    for (uint32_t d = 1; d < LOOM_GGUF_MAX_DIMS; d++)
        ovf |= __builtin_mul_overflow(bytes, t->ne[d], &bytes);
    if (ovf)
        return loom_errorf(c->err, LOOM_E_FORMAT, "tensor '%.*s': byte size overflows 64 bits", shown_len(t->name),
                           t->name.ptr);
    t->nbytes = bytes;
    return LOOM_OK;
}

/* A tensor name: shorter than LOOM_GGUF_MAX_NAME (refused otherwise); one holding a NUL byte is read up to it, as
 * the reference reads it, with a warning (as is one that is not valid UTF-8). */
static int tensor_name(struct cursor *c, uint64_t i, struct loom_gguf_str *name)
{
    int rc = cur_str(c, name, "tensor name", no_name);
    if (rc)
        return rc;
    char shown[256];
    if (name->len >= LOOM_GGUF_MAX_NAME)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "tensor #%" PRIu64 " '%s': name is %" PRIu64 " bytes long, expected at most %d",
                           i, escaped(*name, shown, sizeof shown), name->len, LOOM_GGUF_MAX_NAME - 1);
    const char *nul = memchr(name->ptr, 0, (size_t)name->len);
    if (nul) {
        loom_gguf_warnf(c->g, "tensor #%" PRIu64 " name '%s' holds a NUL byte at %td; read as '%.*s', as the reference does", i,
              escaped(*name, shown, sizeof shown), nul - name->ptr, (int)(nul - name->ptr), name->ptr);
        name->len = (uint64_t)(nul - name->ptr);
    }
    uint64_t bad = utf8_invalid_at(*name);
    if (bad < name->len)
        loom_gguf_warnf(c->g, "tensor #%" PRIu64 " name '%s' is not valid UTF-8 (byte %" PRIu64 "), as GGUF strings should be",
              i, escaped(*name, shown, sizeof shown), bad);
    return LOOM_OK;
}

static int parse_tensor_info(struct cursor *c, uint64_t i, struct loom_gguf_tensor *t)
{
    int rc = tensor_name(c, i, &t->name);
    if (rc || (rc = cur_u32(c, &t->n_dims, "tensor n_dims", t->name)))
        return rc;
    if (t->n_dims > LOOM_GGUF_MAX_DIMS)
        return loom_errorf(c->err, LOOM_E_FORMAT, "tensor '%.*s': n_dims is %u, expected 0..%d", shown_len(t->name),
                           t->name.ptr, t->n_dims, LOOM_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < LOOM_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && (rc = cur_u64(c, &t->ne[d], "tensor dimension", t->name)))
            return rc;
    }
    if ((rc = cur_u32(c, &t->type, "tensor type", t->name)) || (rc = cur_u64(c, &t->offset, "tensor offset", t->name)))
        return rc;
    return tensor_geometry(c, t);
}

/* ---- sorted indexes -------------------------------------------------------------------------- */

static int str_cmp(struct loom_gguf_str a, struct loom_gguf_str b)
{
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int r = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (r)
        return r;
    return a.len < b.len ? -1 : a.len > b.len;
}

static int cmp_kv_idx(const void *a, const void *b, void *ctx)
{
    const struct loom_gguf *g = ctx;
    return str_cmp(g->kv[*(const uint64_t *)a].key, g->kv[*(const uint64_t *)b].key);
}

static int cmp_t_idx(const void *a, const void *b, void *ctx)
{
    const struct loom_gguf *g = ctx;
    return str_cmp(g->tensors[*(const uint64_t *)a].name, g->tensors[*(const uint64_t *)b].name);
}

/* Indices 0..n-1 sorted by cmp; NULL when out of memory. */
static uint64_t *index_sorted(const struct loom_gguf *g, uint64_t n,
                              int (*cmp)(const void *, const void *, void *))
{
    uint64_t *ix = malloc((n ? n : 1) * sizeof *ix);
    if (!ix)
        return NULL;
    for (uint64_t i = 0; i < n; i++)
        ix[i] = i;
    qsort_r(ix, (size_t)n, sizeof *ix, cmp, (void *)g);
    return ix;
}

/* Sorted key index; duplicate keys are rejected. */
static int build_kv_index(struct gguf_impl *im, loom_error *err)
{
    const struct loom_gguf *g = &im->pub;
    if (!(im->kv_order = index_sorted(g, g->n_kv, cmp_kv_idx)))
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory indexing %" PRIu64 " keys", g->n_kv);
    for (uint64_t i = 1; i < g->n_kv; i++) {
        struct loom_gguf_str k = g->kv[im->kv_order[i]].key;
        if (!str_cmp(g->kv[im->kv_order[i - 1]].key, k))
            return loom_errorf(err, LOOM_E_FORMAT, "duplicate key '%.*s'", shown_len(k), k.ptr);
    }
    return LOOM_OK;
}

/* Sorted tensor-name index; duplicate names are rejected. */
static int build_tensor_index(struct gguf_impl *im, loom_error *err)
{
    const struct loom_gguf *g = &im->pub;
    if (!(im->t_order = index_sorted(g, g->n_tensors, cmp_t_idx)))
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory indexing %" PRIu64 " tensors", g->n_tensors);
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        struct loom_gguf_str n = g->tensors[im->t_order[i]].name;
        if (!str_cmp(g->tensors[im->t_order[i - 1]].name, n))
            return loom_errorf(err, LOOM_E_FORMAT, "duplicate tensor name '%.*s'", shown_len(n), n.ptr);
    }
    return LOOM_OK;
}

int loom_gguf_adopt_tensors(struct loom_gguf *g, struct loom_gguf_tensor *tensors, uint64_t n, loom_error *err)
{
    struct gguf_impl *im = (struct gguf_impl *)g;
    free(g->tensors);
    free(im->t_order);
    im->t_order = NULL;
    g->tensors = tensors;
    g->n_tensors = n;
    return build_tensor_index(im, err);
}

/* ---- layout checks --------------------------------------------------------------------------- */

static int read_alignment(struct loom_gguf *g, loom_error *err)
{
    g->alignment = LOOM_GGUF_DEFAULT_ALIGNMENT;
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, "general.alignment");
    if (!kv)
        return LOOM_OK;
    if (kv->type != LOOM_GGUF_UINT32)
        return loom_errorf(err, LOOM_E_FORMAT, "key 'general.alignment': expected type UINT32, found %s",
                           vtype_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->data, 4);
    if (a == 0 || (a & (a - 1)))
        return loom_errorf(err, LOOM_E_FORMAT,
                           "key 'general.alignment': expected a nonzero power of two, found %u", a);
    if (a % 8)
        loom_gguf_warnf(g, "key 'general.alignment': %u is not a multiple of 8, as the GGUF convention asks", a);
    g->alignment = a;
    return LOOM_OK;
}

/* The reference's layout: the tensors' data follow one another in file order from the data section's start,
 * each padded to general.alignment, so each offset must be the sum of the padded sizes before it; and (its
 * model loader's check) every tensor's data lies inside the file. */
static int check_extents(struct loom_gguf *g, loom_error *err)
{
    uint64_t expected = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct loom_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (t->offset != expected)
            return loom_errorf(err, LOOM_E_FORMAT,
                               "tensor '%.*s': offset %" PRIu64 ", expected %" PRIu64 " (tensor data follows in file "
                               "order, each tensor padded to general.alignment %" PRIu64 ")",
                               shown_len(t->name), t->name.ptr, t->offset, expected, g->alignment);
        if (__builtin_add_overflow(g->data_offset, t->offset, &start) ||
            __builtin_add_overflow(start, t->nbytes, &end) || end > g->size)
            return loom_errorf(err, LOOM_E_FORMAT,
                               "tensor '%.*s': data at offset %" PRIu64 " + %" PRIu64 " bytes in the data section "
                               "(which starts at %" PRIu64 ") extends past the end of the file (%zu bytes)",
                               shown_len(t->name), t->name.ptr, t->offset, t->nbytes, g->data_offset, g->size);
        t->data = g->map + start;
        /* offset + nbytes <= file size and alignment <= 2^31 here, so this does not overflow */
        expected += (t->nbytes + g->alignment - 1) / g->alignment * g->alignment;
    }
    return LOOM_OK;
}

/* The header's first check on a file of size bytes starting with p[min(size, 4)]: the magic when the file has
 * its 4 bytes (a short text file is named as not GGUF, not as a truncated one), then the header's length. */
static int check_magic(const uint8_t *p, uint64_t size, loom_error *err)
{
    if (size >= 4 && memcmp(p, "GGUF", 4)) {
        char text[5] = {0};
        for (int i = 0; i < 4; i++)
            text[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '.';
        return loom_errorf(err, LOOM_E_FORMAT,
                           "magic: expected 'GGUF', found bytes %02x %02x %02x %02x ('%s'): not a GGUF file", p[0], p[1],
                           p[2], p[3], text);
    }
    if (size < GGUF_HEADER_BYTES)
        return loom_errorf(err, LOOM_E_FORMAT, "truncated header: the file has %llu bytes, a GGUF header needs %d",
                           (unsigned long long)size, GGUF_HEADER_BYTES);
    return LOOM_OK;
}

static int parse_header(struct cursor *c, struct loom_gguf *g)
{
    int rc = check_magic(c->p, c->size, c->err);
    if (rc != LOOM_OK)
        return rc;
    c->pos = 4;
    cur_u32(c, &g->version, "version", no_name);
    if (g->version && !(g->version & 0xffff))
        return loom_errorf(c->err, LOOM_E_FORMAT, "version: found %u, a big-endian GGUF file (not supported)",
                           g->version);
    if (g->version < 2 || g->version > 3)
        return loom_errorf(c->err, LOOM_E_FORMAT, "version: expected 2 or 3, found %u", g->version);
    cur_u64(c, &g->n_tensors, "n_tensors", no_name);
    cur_u64(c, &g->n_kv, "n_kv", no_name);
    /* bound the counts by the bytes left before allocating anything for them */
    uint64_t left = c->size - c->pos, need_kv, need_t, need;
    if (__builtin_mul_overflow(g->n_kv, (uint64_t)GGUF_MIN_KV_BYTES, &need_kv) ||
        __builtin_mul_overflow(g->n_tensors, (uint64_t)GGUF_MIN_TINFO_BYTES, &need_t) ||
        __builtin_add_overflow(need_kv, need_t, &need) || need > left)
        return loom_errorf(c->err, LOOM_E_FORMAT,
                           "header: n_kv %" PRIu64 " and n_tensors %" PRIu64 " need at least %d and %d bytes each, "
                           "but only %" PRIu64 " bytes follow the header",
                           g->n_kv, g->n_tensors, GGUF_MIN_KV_BYTES, GGUF_MIN_TINFO_BYTES, left);
    return LOOM_OK;
}

static int parse_all(struct gguf_impl *im, loom_error *err)
{
    struct loom_gguf *g = &im->pub;
    struct cursor c = {g->map, g->size, 0, err, g};
    int rc = parse_header(&c, g);
    if (rc)
        return rc;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for %" PRIu64 " keys and %" PRIu64 " tensors", g->n_kv,
                           g->n_tensors);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if ((rc = parse_kv(&c, i, &g->kv[i])))
            return rc;
    if ((rc = build_kv_index(im, err)) || (rc = read_alignment(g, err)))
        return rc;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if ((rc = parse_tensor_info(&c, i, &g->tensors[i])))
            return rc;
    if ((rc = build_tensor_index(im, err)))
        return rc;
    g->data_offset = c.pos;
    if (!g->n_tensors)
        return LOOM_OK;
    uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    if (pad > c.size - c.pos)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "data section: starts at %zu after padding to general.alignment %" PRIu64
                           ", past the end of the file (%zu bytes)",
                           c.pos + (size_t)pad, g->alignment, c.size);
    g->data_offset = c.pos + pad;
    return check_extents(g, err);
}

/* The handle's one part: the file itself (path NULL for a caller's buffer). */
static int single_part(struct loom_gguf *g, const char *path, loom_error *err)
{
    if (!(g->parts = calloc(1, sizeof *g->parts)) || (path && !(g->parts[0].path = strdup(path))))
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory opening a GGUF file");
    g->n_parts = 1;
    g->parts[0] = (struct loom_gguf_part){g->parts[0].path, NULL, g->size, g->data_offset, 0, g->n_tensors};
    return LOOM_OK;
}

static int open_impl(struct gguf_impl *im, const char *path, struct loom_gguf **out, loom_error *err)
{
    int rc = parse_all(im, err);
    if (!rc)
        rc = single_part(&im->pub, path, err);
    if (rc) {
        loom_gguf_close(&im->pub);
        return rc;
    }
    *out = &im->pub;
    return LOOM_OK;
}

int loom_gguf_open_buffer(const void *buf, size_t size, struct loom_gguf **out, loom_error *err)
{
    *out = NULL;
    struct gguf_impl *im = calloc(1, sizeof *im);
    if (!im)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory opening a GGUF buffer");
    im->pub.map = buf;
    im->pub.size = size;
    return open_impl(im, NULL, out, err);
}

int loom_gguf_open(const char *path, struct loom_gguf **out, loom_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return loom_errorf(err, LOOM_E_IO, "open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return loom_errorf(err, LOOM_E_IO, "stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return loom_errorf(err, LOOM_E_IO, "not a regular file");
    }
    if (st.st_size < GGUF_HEADER_BYTES) {
        uint8_t head[4] = {0};
        ssize_t want = st.st_size < 4 ? (ssize_t)st.st_size : 4, got = pread(fd, head, (size_t)want, 0);
        int e = errno;
        close(fd);
        if (got != want)
            return loom_errorf(err, LOOM_E_IO, "read of the first %zd bytes: %s", want, got < 0 ? strerror(e) : "short");
        return check_magic(head, (uint64_t)st.st_size, err);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return loom_errorf(err, LOOM_E_IO, "mmap of %lld bytes: %s", (long long)st.st_size, strerror(e));
    struct gguf_impl *im = calloc(1, sizeof *im);
    if (!im) {
        munmap(map, (size_t)st.st_size);
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory opening a GGUF file");
    }
    im->pub.map = map;
    im->pub.size = (size_t)st.st_size;
    im->owns_map = 1;
    return open_impl(im, path, out, err);
}

void loom_gguf_close(struct loom_gguf *g)
{
    if (!g)
        return;
    struct gguf_impl *im = (struct gguf_impl *)g;
    if (im->owns_map)
        munmap((void *)g->map, g->size);
    for (uint32_t i = 0; g->parts && i < g->n_parts; i++) {
        loom_gguf_close(g->parts[i].file);
        free(g->parts[i].path);
    }
    free(g->parts);
    free(g->kv);
    free(g->tensors);
    free(im->kv_order);
    free(im->t_order);
    free(im);
}

const char *loom_gguf_warning(const struct loom_gguf *g, uint64_t i)
{
    return i < g->n_warnings && i < LOOM_GGUF_WARNINGS_KEPT ? g->warnings[i] : NULL;
}

void loom_gguf_release(const struct loom_gguf *g, const void *ptr, uint64_t len)
{
    const struct gguf_impl *im = (const struct gguf_impl *)g;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), begin = (uintptr_t)ptr, map = (uintptr_t)g->map;
    if (!im->owns_map || begin < map || begin - map > g->size || len > g->size - (begin - map))
        return;
    uintptr_t end = (begin + len) / page * page;
    begin = (begin + page - 1) / page * page;
    if (end > begin)
        madvise((void *)begin, end - begin, MADV_DONTNEED); /* advice only: a failure leaves the pages in */
}

/* ---- look-ups and typed getters -------------------------------------------------------------- */

int loom_gguf_str_eq(struct loom_gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || !memcmp(s.ptr, c, n));
}

/* Binary search of a sorted index over tensor names (tensors != 0) or keys; -1 when absent. */
static int64_t index_find(const struct loom_gguf *g, const uint64_t *ix, uint64_t n, const char *name, int tensors)
{
    struct loom_gguf_str want = {strlen(name), name};
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        struct loom_gguf_str s = tensors ? g->tensors[ix[mid]].name : g->kv[ix[mid]].key;
        int r = str_cmp(s, want);
        if (!r)
            return (int64_t)ix[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const struct loom_gguf_kv *loom_gguf_find_kv(const struct loom_gguf *g, const char *key)
{
    const struct gguf_impl *im = (const struct gguf_impl *)g;
    if (!im->kv_order)
        return NULL;
    int64_t i = index_find(g, im->kv_order, g->n_kv, key, 0);
    return i < 0 ? NULL : &g->kv[i];
}

const struct loom_gguf_tensor *loom_gguf_find_tensor(const struct loom_gguf *g, const char *name)
{
    const struct gguf_impl *im = (const struct gguf_impl *)g;
    if (!im->t_order)
        return NULL;
    int64_t i = index_find(g, im->t_order, g->n_tensors, name, 1);
    return i < 0 ? NULL : &g->tensors[i];
}

/* Find key; LOOM_OK with *kv NULL when missing and optional. */
static int find_required(const struct loom_gguf *g, const char *key, int optional, const struct loom_gguf_kv **kv,
                         loom_error *err)
{
    *kv = loom_gguf_find_kv(g, key);
    if (!*kv && !optional)
        return loom_errorf(err, LOOM_E_FORMAT, "missing required key '%s'", key);
    return LOOM_OK;
}

static int wrong_type(const char *key, const char *want, const struct loom_gguf_kv *kv, loom_error *err)
{
    if (kv->type == LOOM_GGUF_ARRAY)
        return loom_errorf(err, LOOM_E_FORMAT, "key '%s': expected %s, found array of %s", key, want,
                           vtype_name(kv->arr_type));
    return loom_errorf(err, LOOM_E_FORMAT, "key '%s': expected %s, found %s", key, want, vtype_name(kv->type));
}

int loom_gguf_get_u32(const struct loom_gguf *g, const char *key, int optional, uint32_t *out, loom_error *err)
{
    const struct loom_gguf_kv *kv;
    int rc = find_required(g, key, optional, &kv, err);
    if (rc || !kv)
        return rc;
    if (kv->type == LOOM_GGUF_INT32) {
        int32_t v;
        memcpy(&v, kv->data, 4);
        if (v < 0)
            return loom_errorf(err, LOOM_E_FORMAT, "key '%s': expected a value >= 0, found %d", key, v);
        *out = (uint32_t)v;
        return LOOM_OK;
    }
    if (kv->type != LOOM_GGUF_UINT32)
        return wrong_type(key, "UINT32", kv, err);
    memcpy(out, kv->data, 4);
    return LOOM_OK;
}

int loom_gguf_get_f32(const struct loom_gguf *g, const char *key, int optional, float *out, loom_error *err)
{
    const struct loom_gguf_kv *kv;
    int rc = find_required(g, key, optional, &kv, err);
    if (rc || !kv)
        return rc;
    if (kv->type != LOOM_GGUF_FLOAT32)
        return wrong_type(key, "FLOAT32", kv, err);
    memcpy(out, kv->data, 4);
    return LOOM_OK;
}

int loom_gguf_get_str(const struct loom_gguf *g, const char *key, int optional, struct loom_gguf_str *out,
                      loom_error *err)
{
    const struct loom_gguf_kv *kv;
    int rc = find_required(g, key, optional, &kv, err);
    if (rc || !kv)
        return rc;
    if (kv->type != LOOM_GGUF_STRING)
        return wrong_type(key, "STRING", kv, err);
    memcpy(&out->len, kv->data, 8);
    out->ptr = (const char *)kv->data + 8;
    return LOOM_OK;
}

int loom_gguf_get_arr(const struct loom_gguf *g, const char *key, uint32_t elem_type, int optional,
                      const struct loom_gguf_kv **out, loom_error *err)
{
    const struct loom_gguf_kv *kv;
    int rc = find_required(g, key, optional, &kv, err);
    if (rc || !kv)
        return rc;
    if (kv->type != LOOM_GGUF_ARRAY || kv->arr_type != elem_type) {
        char want[32];
        snprintf(want, sizeof want, "array of %s", vtype_name(elem_type));
        return wrong_type(key, want, kv, err);
    }
    *out = kv;
    return LOOM_OK;
}

int loom_gguf_kv_strings(const struct loom_gguf_kv *kv, struct loom_gguf_str *out, uint64_t n, loom_error *err)
{
    if (kv->type != LOOM_GGUF_ARRAY || kv->arr_type != LOOM_GGUF_STRING)
        return loom_errorf(err, LOOM_E_ARG, "key '%.*s': expected array of STRING", shown_len(kv->key), kv->key.ptr);
    if (n != kv->arr_n)
        return loom_errorf(err, LOOM_E_ARG, "key '%.*s': asked for %" PRIu64 " strings, the array has %" PRIu64,
                           shown_len(kv->key), kv->key.ptr, n, kv->arr_n);
    const uint8_t *p = kv->data; /* validated by the reader: every length lies inside the map */
    for (uint64_t i = 0; i < n; i++) {
        memcpy(&out[i].len, p, 8);
        out[i].ptr = (const char *)p + 8;
        p += 8 + out[i].len;
    }
    return LOOM_OK;
}
