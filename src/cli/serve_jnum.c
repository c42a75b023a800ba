/* serve_jnum.c — `loom serve`'s request bodies parsed with their numbers as written (serve_jnum.h): stand-ins for
 * the numbers Jansson cannot hold, and each number's JSON text found again by walking the body's text alongside
 * the parsed value (a key given twice: the last one, as Jansson keeps). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/serve_jnum.h"

/* A valid number that Jansson cannot hold (an integer beyond 64 bits, a real beyond a double: 9223372036854775808,
 * 1e400) fails the whole body. serve_jnum_parse puts a stand-in real in its place and keeps the number's text
 * here, for the parse of this one body (the HTTP side's thread), so that the field's own check names it, its range
 * and what was found; one in a field no check reads is refused after the checks (serve_jnum_first_big). The body's
 * text (the caller's, or the copy with stand-ins owned here) stays too, for serve_jnum_text. */
static _Thread_local struct {
    const json_t *v[SERVE_BIG_MAX];
    char text[SERVE_BIG_MAX][SERVE_JNUM_CAP];
    int n;
    const char *body; /* the body parsed, stand-ins in place */
    size_t body_len;
    char *copy;       /* the text when stand-ins made one: freed by serve_jnum_release */
    const json_t *root;
} g_big;

/* text[len] into buf[cap] (cap at least SERVE_JNUM_CAP) as a message shows it: whole up to SERVE_JNUM_SHOWN bytes,
 * else its first SERVE_JNUM_SHOWN and "...". */
static void shown_text(char *buf, size_t cap, const char *text, size_t len)
{
    int cut = len > SERVE_JNUM_SHOWN;
    snprintf(buf, cap, "%.*s%s", (int)(cut ? SERVE_JNUM_SHOWN : len), text, cut ? "..." : "");
}

/* The i-th stand-in's magnitude: DBL_MAX, then one ulp below for each next one (each tells which number it is). */
static double big_standin(int i)
{
    double d = DBL_MAX;
    while (i-- > 0)
        d = nextafter(d, 0);
    return d;
}

const char *serve_jnum_big(const json_t *v)
{
    for (int i = 0; v && i < g_big.n; i++)
        if (g_big.v[i] == v)
            return g_big.text[i];
    return NULL;
}

/* Find the stand-ins in the parsed body. */
static void big_find(json_t *x)
{
    const char *key;
    json_t *y;
    size_t i;
    if (json_is_real(x))
        for (int k = 0; k < g_big.n; k++)
            if (fabs(json_real_value(x)) == big_standin(k))
                g_big.v[k] = x;
    if (json_is_object(x))
        json_object_foreach(x, key, y)
            big_find(y);
    if (json_is_array(x))
        json_array_foreach(x, i, y)
            big_find(y);
}

json_t *serve_jnum_parse(const char *body, size_t len, json_error_t *je)
{
    char *copy = NULL;
    const char *t = body;
    size_t n = len;
    json_t *o;
    g_big.n = 0;
    while (!(o = json_loadb(t, n, JSON_DECODE_ANY, je)) && json_error_code(je) == json_error_numeric_overflow &&
           g_big.n < SERVE_BIG_MAX && je->position > 0 && (size_t)je->position <= n) {
        size_t end = (size_t)je->position, start = end; /* Jansson stops just past the number */
        while (start > 0 && t[start - 1] && strchr("0123456789+-.eE", t[start - 1]))
            start--;
        int k = g_big.n++;
        shown_text(g_big.text[k], sizeof g_big.text[k], t + start, end - start);
        char standin[40];
        int m = snprintf(standin, sizeof standin, "%s%.17g", t[start] == '-' ? "-" : "", big_standin(k));
        char *next = malloc(n - (end - start) + (size_t)m + 1);
        if (!next)
            break;
        memcpy(next, t, start);
        memcpy(next + start, standin, (size_t)m);
        memcpy(next + start + m, t + end, n - end);
        n = n - (end - start) + (size_t)m;
        free(copy);
        t = copy = next;
    }
    if (o && g_big.n)
        big_find(o);
    else if (!o)
        g_big.n = 0;
    if (!o)
        free(copy);
    g_big.body = o ? t : NULL, g_big.body_len = o ? n : 0, g_big.copy = o ? copy : NULL, g_big.root = o;
    return o;
}

void serve_jnum_release(json_t *o)
{
    free(g_big.copy);
    g_big.n = 0, g_big.body = NULL, g_big.body_len = 0, g_big.copy = NULL, g_big.root = NULL;
    json_decref(o);
}

const json_t *serve_jnum_first_big(const char **text)
{
    *text = g_big.n ? g_big.text[0] : NULL;
    return g_big.n ? g_big.v[0] : NULL;
}

/* ---- a number's text: the body's text walked alongside its parsed value ---- */

struct jwalk {
    const char *t;
    size_t n, i;         /* the text, its length, where the walk is */
    const json_t *want;  /* the number looked for */
    size_t at, len;      /* its text's span, len 0 until found */
};

static void skip_blank(struct jwalk *w)
{
    while (w->i < w->n && (w->t[w->i] == ' ' || w->t[w->i] == '\t' || w->t[w->i] == '\n' || w->t[w->i] == '\r'))
        w->i++;
}

/* Past the string token at w->i (its quotes included). */
static size_t string_end(const struct jwalk *w)
{
    size_t i = w->i + 1;
    while (i < w->n && w->t[i] != '"')
        i += w->t[i] == '\\' ? 2 : 1;
    return i + 1 < w->n ? i + 1 : w->n;
}

/* Past the separator after a member or an element (",": on to the next one). */
static void next_item(struct jwalk *w)
{
    skip_blank(w);
    if (w->i < w->n && w->t[w->i] == ',')
        w->i++;
    skip_blank(w);
}

static void walk(struct jwalk *w, const json_t *node);

/* The object at w->i, node its parsed value where the text matches one (NULL otherwise). */
static void walk_object(struct jwalk *w, const json_t *node)
{
    w->i++;
    skip_blank(w);
    while (w->i < w->n && w->t[w->i] == '"') {
        size_t end = string_end(w);
        json_t *key = json_is_object(node) ? json_loadb(w->t + w->i, end - w->i, JSON_DECODE_ANY, NULL) : NULL;
        const json_t *child = json_is_string(key) ? json_object_get(node, json_string_value(key)) : NULL;
        json_decref(key);
        w->i = end;
        skip_blank(w);
        w->i += w->i < w->n && w->t[w->i] == ':';
        walk(w, child);
        next_item(w);
    }
    w->i++; /* } */
}

static void walk_array(struct jwalk *w, const json_t *node)
{
    w->i++;
    skip_blank(w);
    for (size_t k = 0; w->i < w->n && w->t[w->i] != ']'; k++) {
        size_t from = w->i;
        walk(w, json_is_array(node) ? json_array_get(node, k) : NULL);
        next_item(w);
        if (w->i == from)
            return; /* no progress: not the text Jansson parsed */
    }
    w->i++; /* ] */
}

static void walk(struct jwalk *w, const json_t *node)
{
    skip_blank(w);
    if (w->i >= w->n)
        return;
    if (w->t[w->i] == '{')
        return walk_object(w, node);
    if (w->t[w->i] == '[')
        return walk_array(w, node);
    if (w->t[w->i] == '"') {
        w->i = string_end(w);
        return;
    }
    size_t start = w->i; /* a number, true, false or null */
    while (w->i < w->n && w->t[w->i] && strchr("+-.0123456789eEtrufalsn", w->t[w->i]))
        w->i++;
    if (node && node == w->want)
        w->at = start, w->len = w->i - start; /* a later one of a key given twice overwrites an earlier one's */
}

int serve_jnum_written_nonzero(const json_t *v)
{
    if (serve_jnum_big(v))
        return 1;
    struct jwalk w = {.t = g_big.body, .n = g_big.body_len, .want = v};
    if (!json_is_number(v) || !g_big.root)
        return 0;
    walk(&w, g_big.root);
    return loom_cli_written_nonzero(w.t + w.at, w.len);
}

const char *serve_jnum_text(const json_t *v, char *buf, size_t cap)
{
    const char *big = serve_jnum_big(v);
    struct jwalk w = {.t = g_big.body, .n = g_big.body_len, .want = v};
    if (cap < SERVE_JNUM_CAP || (!big && (!json_is_number(v) || !g_big.root)))
        return NULL;
    if (!big)
        walk(&w, g_big.root);
    if (big)
        snprintf(buf, cap, "%s", big);
    else if (w.len == 0)
        return NULL;
    else
        shown_text(buf, cap, w.t + w.at, w.len);
    return buf;
}
