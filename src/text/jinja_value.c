/* jinja_value.c — the Jinja interpreter's values: the arena they live in, strings that carry one origin byte per
 * byte (template literal or caller data), lists and ordered dicts, and Python's str(), repr() and
 * json.dumps(ensure_ascii=False) of them (CPython's rules: repr quoting and escapes, float repr, separators). */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/chat_internal.h"
#include "text/jinja_internal.h"
#include "util/error.h"

/* ---- arena ---- */

struct jz_block {
    struct jz_block *next;
    size_t size; /* bytes counted in jz.used */
    max_align_t align[];
};

void *jz_alloc(struct jz *z, size_t n)
{
    if (n > SIZE_MAX / 2)
        jz_fail(z, LOOM_E_NOMEM, z->line, "out of memory (%zu bytes)", n);
    size_t size = sizeof(struct jz_block) + (n ? n : 1);
    if (z->limit && size > z->limit - z->used)
        jz_fail(z, LOOM_E_RANGE, z->line, "the render exceeds %zu MiB of strings/values (loom's limit)",
                z->limit >> 20);
    struct jz_block *b = calloc(1, size);
    if (!b)
        jz_fail(z, LOOM_E_NOMEM, z->line, "out of memory (%zu bytes)", n);
    b->next = z->head;
    b->size = size;
    z->head = b;
    z->used += size;
    return b->align;
}

struct jz_block *jz_mark(const struct jz *z)
{
    return z->head;
}

void jz_release(struct jz *z, struct jz_block *mark)
{
    while (z->head && z->head != mark) {
        struct jz_block *b = z->head;
        z->head = b->next;
        z->used -= b->size;
        free(b);
    }
}

void *jz_grow(struct jz *z, const void *old, size_t n, size_t cap, size_t elem)
{
    void *p = jz_alloc(z, cap * elem);
    if (n)
        memcpy(p, old, n * elem);
    return p;
}

void jz_free_all(struct jz *z)
{
    while (z->head) {
        struct jz_block *b = z->head;
        z->head = b->next;
        free(b);
    }
    z->used = 0;
}

void jz_fail(struct jz *z, int code, int line, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (code == LOOM_E_ARG) /* raise_exception: the template's own message */
        loom_errorf(z->err, code, "%s", msg);
    else if (line > 0)
        loom_errorf(z->err, code, "jinja: line %d: %s", line, msg);
    else
        loom_errorf(z->err, code, "jinja: %s", msg);
    z->code = code;
    longjmp(*z->fail, 1);
}

/* ---- strings ---- */

static void jsb_reserve(struct jz *z, struct jsb *b, size_t more)
{
    if (b->n + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->n + more + 1)
        cap *= 2;
    b->p = jz_grow(z, b->p, b->n, cap, 1);
    b->o = jz_grow(z, b->o, b->n, cap, 1);
    b->cap = cap;
}

void jsb_put(struct jz *z, struct jsb *b, const char *s, size_t n, int origin)
{
    if (!n)
        return;
    jsb_reserve(z, b, n);
    memcpy(b->p + b->n, s, n);
    memset(b->o + b->n, origin, n);
    b->n += n;
}

void jsb_puts(struct jz *z, struct jsb *b, const char *s, int origin)
{
    jsb_put(z, b, s, strlen(s), origin);
}

void jsb_str(struct jz *z, struct jsb *b, struct jstr s)
{
    if (!s.n)
        return;
    jsb_reserve(z, b, s.n);
    memcpy(b->p + b->n, s.p, s.n);
    memcpy(b->o + b->n, s.o, s.n);
    b->n += s.n;
}

struct jstr jsb_done(struct jz *z, struct jsb *b)
{
    jsb_reserve(z, b, 0);
    b->p[b->n] = '\0';
    struct jstr s = {b->p, b->o, b->n};
    *b = (struct jsb){0};
    return s;
}

struct jstr jstr_make(struct jz *z, const char *s, size_t n, int origin)
{
    struct jsb b = {0};
    jsb_put(z, &b, s, n, origin);
    return jsb_done(z, &b);
}

struct jstr jstr_sub(struct jz *z, struct jstr s, size_t off, size_t n)
{
    struct jsb b = {0};
    jsb_str(z, &b, (struct jstr){s.p + off, s.o + off, n});
    return jsb_done(z, &b);
}

/* ---- UTF-8 ---- */

size_t ju_len(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

size_t ju_off(const char *s, size_t n, size_t k)
{
    size_t i = 0;
    for (; i < n && k; k--)
        for (i++; i < n && ((unsigned char)s[i] & 0xc0) == 0x80; i++)
            ;
    return i;
}

/* Python's str.isspace(): ASCII \t..\r, \x1c..\x1f, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000. */
size_t ju_space_at(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20))
        return 1;
    if (c == 0xc2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if (n < 3 || (c & 0xf0) != 0xe0 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
        return 0;
    unsigned cp = ((c & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
    int ws = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
             cp == 0x205f || cp == 0x3000;
    return ws ? 3 : 0;
}

size_t ju_space_before(const char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (ju_space_at(s + n - k, k) == k)
            return k;
    return 0;
}

/* ---- values ---- */

struct jval jv_undef(const char *why)
{
    return (struct jval){.t = JT_UNDEF, .lit = JO_LIT, .u.why = why};
}

struct jval jv_none(int lit)
{
    return (struct jval){.t = JT_NONE, .lit = (uint8_t)lit};
}

struct jval jv_bool(int b, int lit)
{
    return (struct jval){.t = JT_BOOL, .lit = (uint8_t)lit, .u.i = !!b};
}

struct jval jv_int(int64_t i, int lit)
{
    return (struct jval){.t = JT_INT, .lit = (uint8_t)lit, .u.i = i};
}

struct jval jv_float(double f, int lit)
{
    return (struct jval){.t = JT_FLOAT, .lit = (uint8_t)lit, .u.f = f};
}

struct jval jv_str(struct jstr s)
{
    return (struct jval){.t = JT_STR, .lit = JO_LIT, .u.s = s};
}

struct jval jv_cstr(struct jz *z, const char *s, int origin)
{
    return jv_str(jstr_make(z, s, strlen(s), origin));
}

struct jval jv_list(struct jz *z, int lit)
{
    return (struct jval){.t = JT_LIST, .lit = (uint8_t)lit, .u.l = jz_alloc(z, sizeof(struct jlist))};
}

struct jval jv_dict(struct jz *z, int lit)
{
    return (struct jval){.t = JT_DICT, .lit = (uint8_t)lit, .u.d = jz_alloc(z, sizeof(struct jdict))};
}

void jl_push(struct jz *z, struct jlist *l, struct jval v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        l->v = jz_grow(z, l->v, l->n, cap, sizeof *l->v);
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

struct jval *jd_get(const struct jdict *d, struct jval key)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], key))
            return &d->v[i];
    return NULL;
}

struct jval *jd_getc(const struct jdict *d, const char *key)
{
    size_t n = strlen(key);
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JT_STR && d->k[i].u.s.n == n && !memcmp(d->k[i].u.s.p, key, n))
            return &d->v[i];
    return NULL;
}

void jd_set(struct jz *z, struct jdict *d, struct jval key, struct jval v)
{
    struct jval *old = jd_get(d, key);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        d->k = jz_grow(z, d->k, d->n, cap, sizeof *d->k);
        d->v = jz_grow(z, d->v, d->n, cap, sizeof *d->v);
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = v;
}

void jd_setc(struct jz *z, struct jdict *d, const char *key, struct jval v)
{
    jd_set(z, d, jv_cstr(z, key, JO_LIT), v);
}

int jv_truthy(struct jval v)
{
    switch (v.t) {
    case JT_UNDEF:
    case JT_NONE:
        return 0;
    case JT_BOOL:
    case JT_INT:
        return v.u.i != 0;
    case JT_FLOAT:
        return v.u.f != 0;
    case JT_STR:
        return v.u.s.n != 0;
    case JT_LIST:
        return v.u.l->n != 0;
    case JT_DICT:
        return v.u.d->n != 0;
    default:
        return 1;
    }
}

static int is_num(struct jval v)
{
    return v.t == JT_BOOL || v.t == JT_INT || v.t == JT_FLOAT;
}

int jv_eq(struct jval a, struct jval b)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT)
            return a.u.i == b.u.i;
        double x = a.t == JT_FLOAT ? a.u.f : (double)a.u.i, y = b.t == JT_FLOAT ? b.u.f : (double)b.u.i;
        return x == y;
    }
    if (a.t != b.t)
        return 0;
    switch (a.t) {
    case JT_UNDEF:
    case JT_NONE:
        return 1;
    case JT_STR:
        return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case JT_LIST:
        if (a.u.l->n != b.u.l->n || a.tuple != b.tuple)
            return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_eq(a.u.l->v[i], b.u.l->v[i]))
                return 0;
        return 1;
    case JT_DICT:
        if (a.u.d->n != b.u.d->n)
            return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            struct jval *o = jd_get(b.u.d, a.u.d->k[i]);
            if (!o || !jv_eq(a.u.d->v[i], *o))
                return 0;
        }
        return 1;
    case JT_NS:
        return a.u.d == b.u.d;
    case JT_MACRO:
        return a.u.m == b.u.m;
    default:
        return a.u.i == b.u.i;
    }
}

const char *jv_typename(struct jval v)
{
    static const char *names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list",
                                  "dict", "Namespace", "Macro", "builtin_function_or_method",
                                  "builtin_function_or_method"};
    return v.t == JT_LIST && v.tuple ? "tuple" : names[v.t];
}

int jv_is_seq(struct jval v)
{
    return v.t == JT_STR || v.t == JT_LIST;
}

/* ---- Python str() and repr() ---- */

static int str_origin(struct jstr s) /* DATA when any byte is */
{
    for (size_t i = 0; i < s.n; i++)
        if (s.o[i] == JO_DATA)
            return JO_DATA;
    return JO_LIT;
}

/* Python's repr of a str: single quotes unless it holds ' and no ", escapes for \\, the quote, \t \n \r and the
 * characters str.isprintable() rejects (categories Cc Cf Cs Co Cn Zl Zp Zs but the space). */
static void repr_str(struct jz *z, struct jsb *b, struct jstr s)
{
    int q = memchr(s.p, '\'', s.n) && !memchr(s.p, '"', s.n) ? '"' : '\'';
    char qs[2] = {(char)q, 0}, esc[16];
    int so = str_origin(s);
    jsb_puts(z, b, qs, so);
    for (size_t i = 0; i < s.n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s.p + i, (utf8proc_ssize_t)(s.n - i), &cp);
        if (k <= 0) { /* invalid UTF-8 (Python would not hold it): copy the byte */
            jsb_put(z, b, s.p + i, 1, s.o[i]);
            i++;
            continue;
        }
        const char *named = cp == '\\' ? "\\\\" : cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : cp == '\t' ? "\\t"
                          : cp == q ? (q == '\'' ? "\\'" : "\\\"") : NULL;
        utf8proc_category_t cat = utf8proc_category(cp);
        int unprintable = cp != ' ' && (cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
                                        cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO ||
                                        cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_ZL ||
                                        cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_ZS);
        if (!named && unprintable) {
            snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", (unsigned)cp);
            named = esc;
        }
        if (named)
            jsb_puts(z, b, named, s.o[i]);
        else
            jsb_str(z, b, (struct jstr){s.p + i, s.o + i, (size_t)k});
        i += (size_t)k;
    }
    jsb_puts(z, b, qs, so);
}

static void repr_to(struct jz *z, struct jsb *b, struct jval v, int line);

/* None, a bool, an int or a float as Python's str() writes it, or with json as json.dumps does. */
static void scalar_to(struct jz *z, struct jsb *b, struct jval v, int json)
{
    char num[64];
    switch (v.t) {
    case JT_NONE:
        jsb_puts(z, b, json ? "null" : "None", v.lit);
        return;
    case JT_BOOL:
        jsb_puts(z, b, v.u.i ? (json ? "true" : "True") : (json ? "false" : "False"), v.lit);
        return;
    case JT_INT:
        snprintf(num, sizeof num, "%lld", (long long)v.u.i);
        jsb_puts(z, b, num, v.lit);
        return;
    case JT_FLOAT:
        loom_chat_float_repr(v.u.f, json, num, sizeof num);
        jsb_puts(z, b, num, v.lit);
        return;
    default:
        return;
    }
}

static void repr_to(struct jz *z, struct jsb *b, struct jval v, int line)
{
    switch (v.t) {
    case JT_STR:
        repr_str(z, b, v.u.s);
        return;
    case JT_UNDEF:
        jsb_puts(z, b, "Undefined", JO_LIT);
        return;
    case JT_LIST:
        jsb_puts(z, b, v.tuple ? "(" : "[", v.lit);
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jsb_puts(z, b, ", ", v.lit);
            repr_to(z, b, v.u.l->v[i], line);
        }
        jsb_puts(z, b, v.tuple ? (v.u.l->n == 1 ? ",)" : ")") : "]", v.lit);
        return;
    case JT_DICT:
    case JT_NS:
        jsb_puts(z, b, v.t == JT_NS ? "<Namespace {" : "{", v.lit);
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i)
                jsb_puts(z, b, ", ", v.lit);
            repr_to(z, b, v.u.d->k[i], line);
            jsb_puts(z, b, ": ", v.lit);
            repr_to(z, b, v.u.d->v[i], line);
        }
        jsb_puts(z, b, v.t == JT_NS ? "}>" : "}", v.lit);
        return;
    case JT_MACRO:
    case JT_FUNC:
    case JT_METHOD:
        jz_fail(z, LOOM_E_FORMAT, line, "printing a %s is not supported", jv_typename(v));
    default:
        scalar_to(z, b, v, 0);
    }
}

void jv_str_to(struct jz *z, struct jsb *b, struct jval v, int line)
{
    if (v.t == JT_STR)
        jsb_str(z, b, v.u.s);
    else if (v.t != JT_UNDEF)
        repr_to(z, b, v, line);
}

struct jstr jv_to_str(struct jz *z, struct jval v, int line)
{
    if (v.t == JT_STR)
        return v.u.s;
    struct jsb b = {0};
    jv_str_to(z, &b, v, line);
    return jsb_done(z, &b);
}

/* ---- json.dumps(ensure_ascii=False) ---- */

static void jstr_json(struct jz *z, struct jsb *b, struct jstr s)
{
    int so = str_origin(s);
    char esc[8];
    jsb_puts(z, b, "\"", so);
    for (size_t i = 0, run = 0; i <= s.n; i++) {
        const char *e = i < s.n ? loom_chat_json_escape((unsigned char)s.p[i], esc) : NULL;
        if (i < s.n && !e)
            continue;
        if (i > run)
            jsb_str(z, b, (struct jstr){s.p + run, s.o + run, i - run});
        if (e)
            jsb_puts(z, b, e, s.o[i]);
        run = i + 1;
    }
    jsb_puts(z, b, "\"", so);
}

static void json_indent(struct jz *z, struct jsb *b, int indent, int level, int lit)
{
    jsb_puts(z, b, "\n", lit);
    for (int i = 0; i < indent * level; i++)
        jsb_puts(z, b, " ", lit);
}

static struct jstr json_key(struct jz *z, struct jval k, int line)
{
    char num[64];
    switch (k.t) {
    case JT_STR:
        return k.u.s;
    case JT_NONE:
        return jstr_make(z, "null", 4, k.lit);
    case JT_BOOL:
        return jstr_make(z, k.u.i ? "true" : "false", k.u.i ? 4 : 5, k.lit);
    case JT_INT:
        snprintf(num, sizeof num, "%lld", (long long)k.u.i);
        return jstr_make(z, num, strlen(num), k.lit);
    case JT_FLOAT:
        loom_chat_float_repr(k.u.f, 0, num, sizeof num); /* Python's json would spell NaN/Infinity here */
        return jstr_make(z, num, strlen(num), k.lit);
    default:
        jz_fail(z, LOOM_E_FORMAT, line, "tojson: keys must be str, int, float, bool or None, not %s",
                jv_typename(k));
    }
}

static int key_cmp(const void *a, const void *b)
{
    const struct jstr *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void json_level(struct jz *z, struct jsb *b, struct jval v, int indent, int sort, int level, int line);

static void json_dict(struct jz *z, struct jsb *b, struct jval v, int indent, int sort, int level, int line)
{
    const struct jdict *d = v.u.d;
    if (!d->n) {
        jsb_puts(z, b, "{}", v.lit);
        return;
    }
    /* pairs as (key text, value index), sorted when asked */
    struct kv {
        struct jstr k;
        size_t i;
    } *kv = jz_alloc(z, d->n * sizeof *kv);
    for (size_t i = 0; i < d->n; i++)
        kv[i] = (struct kv){json_key(z, d->k[i], line), i};
    if (sort)
        qsort(kv, d->n, sizeof *kv, key_cmp);
    jsb_puts(z, b, "{", v.lit);
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            jsb_puts(z, b, indent >= 0 ? "," : ", ", v.lit);
        if (indent >= 0)
            json_indent(z, b, indent, level + 1, v.lit);
        jstr_json(z, b, kv[i].k);
        jsb_puts(z, b, ": ", v.lit);
        json_level(z, b, d->v[kv[i].i], indent, sort, level + 1, line);
    }
    if (indent >= 0)
        json_indent(z, b, indent, level, v.lit);
    jsb_puts(z, b, "}", v.lit);
}

static void json_level(struct jz *z, struct jsb *b, struct jval v, int indent, int sort, int level, int line)
{
    switch (v.t) {
    case JT_STR:
        jstr_json(z, b, v.u.s);
        return;
    case JT_NONE:
    case JT_BOOL:
    case JT_INT:
    case JT_FLOAT:
        scalar_to(z, b, v, 1);
        return;
    case JT_LIST:
        if (!v.u.l->n) {
            jsb_puts(z, b, "[]", v.lit);
            return;
        }
        jsb_puts(z, b, "[", v.lit);
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i)
                jsb_puts(z, b, indent >= 0 ? "," : ", ", v.lit);
            if (indent >= 0)
                json_indent(z, b, indent, level + 1, v.lit);
            json_level(z, b, v.u.l->v[i], indent, sort, level + 1, line);
        }
        if (indent >= 0)
            json_indent(z, b, indent, level, v.lit);
        jsb_puts(z, b, "]", v.lit);
        return;
    case JT_DICT:
        json_dict(z, b, v, indent, sort, level, line);
        return;
    default:
        jz_fail(z, LOOM_E_FORMAT, line, "tojson: Object of type %s is not JSON serializable", jv_typename(v));
    }
}

void jv_json_to(struct jz *z, struct jsb *b, struct jval v, int indent, int sort_keys, int line)
{
    json_level(z, b, v, indent, sort_keys, 0, line);
}

struct jval jv_from_json(struct jz *z, const void *json, int origin)
{
    const json_t *j = json;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        struct jval d = jv_dict(z, origin);
        const char *key;
        size_t klen;
        json_t *val;
        json_object_keylen_foreach((json_t *)j, key, klen, val)
            jd_set(z, d.u.d, jv_str(jstr_make(z, key, klen, origin)), jv_from_json(z, val, origin));
        return d;
    }
    case JSON_ARRAY: {
        struct jval l = jv_list(z, origin);
        for (size_t i = 0; i < json_array_size(j); i++)
            jl_push(z, l.u.l, jv_from_json(z, json_array_get(j, i), origin));
        return l;
    }
    case JSON_STRING:
        return jv_str(jstr_make(z, json_string_value(j), json_string_length(j), origin));
    case JSON_INTEGER:
        return jv_int(json_integer_value(j), origin);
    case JSON_REAL:
        return jv_float(json_real_value(j), origin);
    case JSON_TRUE:
        return jv_bool(1, origin);
    case JSON_FALSE:
        return jv_bool(0, origin);
    default:
        return jv_none(origin);
    }
}
