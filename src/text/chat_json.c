/* chat_json.c — JSON text as the chat template writes it: Python's json.dumps(ensure_ascii=False) with the
 * default separators (", " and ": ", keys in insertion order) and str() for scalars, over jansson values.
 * Floats use Python's repr (shortest round-trip digits; exponent form below 1e-4 and from 1e16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"
#include "text/chat_internal.h"
#include "util/array.h"
#include "util/error.h"

int loom_chat_buf_put(struct loom_chat_buf *b, const char *s, size_t n)
{
    char *p = n <= SIZE_MAX - 1 - b->len ? loom_grow(b->p, &b->cap, b->len + n + 1, 1) : NULL;
    if (!p)
        return LOOM_E_NOMEM;
    b->p = p;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return LOOM_OK;
}

static int buf_puts(struct loom_chat_buf *b, const char *s)
{
    return loom_chat_buf_put(b, s, strlen(s));
}

void loom_chat_float_repr(double x, int json, char *out, size_t cap)
{
    if (isnan(x) || isinf(x)) {
        snprintf(out, cap, "%s", isnan(x) ? (json ? "NaN" : "nan") : x > 0 ? (json ? "Infinity" : "inf")
                                                                              : (json ? "-Infinity" : "-inf"));
        return;
    }
    char sci[40];
    for (int prec = 0; prec < 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec, x);
        if (strtod(sci, NULL) == x)
            break;
    }
    /* sci = [-]d[.ddd]e[+-]XX: gather the digits without trailing zeros and the exponent */
    const char *s = sci;
    int neg = *s == '-';
    s += neg;
    char digits[24];
    int nd = 0;
    for (; *s != 'e'; s++)
        if (*s != '.')
            digits[nd++] = *s;
    int e = atoi(s + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (e < -4 || e >= 16) {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, (size_t)nd - 1);
            o += (size_t)nd - 1;
        }
        snprintf(out + o, cap - o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        return;
    }
    if (e < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int k = -1; k > e; k--)
            out[o++] = '0';
        memcpy(out + o, digits, (size_t)nd);
        o += (size_t)nd;
    } else {
        for (int k = 0; k <= e; k++)
            out[o++] = k < nd ? digits[k] : '0';
        out[o++] = '.';
        if (nd > e + 1) {
            memcpy(out + o, digits + e + 1, (size_t)(nd - e - 1));
            o += (size_t)(nd - e - 1);
        } else {
            out[o++] = '0';
        }
    }
    out[o] = '\0';
}

const char *loom_chat_json_escape(unsigned char c, char esc[8])
{
    if (c >= 0x20 && c != '"' && c != '\\')
        return NULL;
    const char *named = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
    if (named)
        return named;
    snprintf(esc, 8, "\\u%04x", c);
    return esc;
}

/* A JSON string literal as json.dumps writes it with ensure_ascii=False. */
static int write_string(struct loom_chat_buf *b, const char *s, size_t n)
{
    int rc = loom_chat_buf_put(b, "\"", 1);
    size_t run = 0;
    char esc[8];
    for (size_t i = 0; rc == LOOM_OK && i < n; i++) {
        const char *e = loom_chat_json_escape((unsigned char)s[i], esc);
        if (!e)
            continue;
        rc = loom_chat_buf_put(b, s + run, i - run);
        if (rc == LOOM_OK)
            rc = buf_puts(b, e);
        run = i + 1;
    }
    if (rc == LOOM_OK)
        rc = loom_chat_buf_put(b, s + run, n - run);
    return rc == LOOM_OK ? loom_chat_buf_put(b, "\"", 1) : rc;
}

static int write_container(struct loom_chat_buf *b, const json_t *v)
{
    int is_obj = json_is_object(v);
    int rc = loom_chat_buf_put(b, is_obj ? "{" : "[", 1);
    size_t i = 0;
    if (is_obj) {
        const char *key;
        size_t klen;
        json_t *val;
        json_object_keylen_foreach((json_t *)v, key, klen, val) {
            if (rc == LOOM_OK && i++)
                rc = loom_chat_buf_put(b, ", ", 2);
            if (rc == LOOM_OK)
                rc = write_string(b, key, klen);
            if (rc == LOOM_OK)
                rc = loom_chat_buf_put(b, ": ", 2);
            if (rc == LOOM_OK)
                rc = loom_chat_json_write(b, val, 0);
        }
    } else {
        for (; rc == LOOM_OK && i < json_array_size(v); i++) {
            if (i)
                rc = loom_chat_buf_put(b, ", ", 2);
            if (rc == LOOM_OK)
                rc = loom_chat_json_write(b, json_array_get(v, i), 0);
        }
    }
    return rc == LOOM_OK ? loom_chat_buf_put(b, is_obj ? "}" : "]", 1) : rc;
}

int loom_chat_json_write(struct loom_chat_buf *b, const json_t *v, int as_str)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        return write_container(b, v);
    case JSON_STRING:
        if (as_str)
            return loom_chat_buf_put(b, json_string_value(v), json_string_length(v));
        return write_string(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf_puts(b, num);
    case JSON_REAL:
        loom_chat_float_repr(json_real_value(v), 1, num, sizeof num);
        return buf_puts(b, num);
    case JSON_TRUE:
        return buf_puts(b, as_str ? "True" : "true");
    case JSON_FALSE:
        return buf_puts(b, as_str ? "False" : "false");
    case JSON_NULL:
        return buf_puts(b, as_str ? "None" : "null");
    }
    return LOOM_E_INTERNAL;
}

json_t *loom_chat_json_parse(const char *json, size_t len, const char *what, loom_error *err)
{
    json_error_t je;
    json_t *v = json_loadb(json, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!v)
        loom_errorf(err, LOOM_E_ARG, "%s: expected valid JSON, found an error at line %d column %d: %s", what,
                    je.line, je.column, je.text);
    return v;
}

json_t *loom_chat_json_arguments(const char *text, const char *what, loom_error *err)
{
    json_t *v = loom_chat_json_parse(text, strlen(text), what, err);
    if (v && json_is_string(v)) {
        json_t *inner = loom_chat_json_parse(json_string_value(v), json_string_length(v), what, err);
        json_decref(v);
        v = inner;
    }
    if (v && !json_is_object(v)) {
        loom_errorf(err, LOOM_E_ARG, "%s: expected a JSON object (or a string holding one), found JSON type %d",
                    what, (int)json_typeof(v));
        json_decref(v);
        v = NULL;
    }
    return v;
}

int loom_chat_json_python(const char *json, size_t len, int as_str, const char *what, char **out, loom_error *err)
{
    json_t *v = loom_chat_json_parse(json, len, what, err);
    if (!v)
        return LOOM_E_ARG;
    struct loom_chat_buf b = {0};
    int rc = loom_chat_json_write(&b, v, as_str);
    if (rc == LOOM_OK && !b.p)
        rc = loom_chat_buf_put(&b, "", 0);
    json_decref(v);
    if (rc != LOOM_OK) {
        free(b.p);
        return loom_errorf(err, rc, "%s: out of memory writing JSON", what);
    }
    *out = b.p;
    return LOOM_OK;
}
