/* tool_call.c — tool calls in generated text (loom.h, "Text: tool calls"): the Qwen3.5 format's calls, as its
 * template renders an assistant's tool_calls, recognised in text that arrives in pieces of any size; each call's
 * arguments typed by the tool's JSON Schema; everything else passed on as content, byte for byte. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_internal.h"
#include "util/error.h"

#define OPEN "<tool_call>"
#define CLOSE "</tool_call>"
#define PARSE_BUDGET 4096 /* parameter-end candidates one call may try (values may spell "</parameter>") */

struct loom_tool_parser {
    json_t *tools;             /* the tools array (owned) */
    struct loom_chat_buf held; /* text not passed on yet */
    size_t scanned;            /* inside: held[0, scanned) holds no CLOSE that ends a well-formed call */
    int inside;                /* held starts with a call: whitespace, then OPEN */
    int after_call;            /* whitespace right after a call is the template's: dropped */
    int n_calls;
    int budget;                /* what is left of PARSE_BUDGET for the call being parsed */
};

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

static int starts(const char *s, size_t i, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n - i >= k && !memcmp(s + i, lit, k);
}

/* The tool named name[n] (its "function" object, or the element itself when it has no "function"), or NULL. */
static json_t *find_tool(const json_t *tools, const char *name, size_t n)
{
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function") ? json_object_get(t, "function") : t;
        json_t *fname = json_object_get(f, "name");
        if (json_is_string(fname) && json_string_length(fname) == n && !memcmp(json_string_value(fname), name, n))
            return f;
    }
    return NULL;
}

/* A parameter's value as the tool's schema types it: text as is for type "string", else its text as JSON when it
 * parses (a number, an object, ...), else the text. NULL when the text is not valid UTF-8. */
static json_t *typed(const json_t *fn, const char *name, const char *v, size_t n)
{
    json_t *props = json_object_get(json_object_get(fn, "parameters"), "properties");
    json_t *type = json_object_get(json_object_get(props, name), "type"), *t;
    int text = json_is_string(type) && !strcmp(json_string_value(type), "string");
    size_t i;
    json_array_foreach(type, i, t) /* a list of types: text if "string" is one */
        text |= json_is_string(t) && !strcmp(json_string_value(t), "string");
    json_t *j = text ? NULL : json_loadb(v, n, JSON_DECODE_ANY, NULL);
    return j ? j : json_stringn(v, n);
}

/* s[i, n): parameters, then "</function>" and nothing but whitespace, into args. Each "</parameter>" that may
 * end a value is tried in turn (a value may spell one), within p->budget. 1 when it all parses. */
static int parse_params(struct loom_tool_parser *p, const json_t *fn, const char *s, size_t i, size_t n, json_t *args)
{
    i = skip_ws(s, i, n);
    if (starts(s, i, n, "</function>"))
        return skip_ws(s, i + 11, n) == n;
    if (!starts(s, i, n, "<parameter="))
        return 0;
    size_t b = i + 11, e = b;
    while (e < n && s[e] != '>' && s[e] != '\n' && s[e] != '<')
        e++;
    if (e == b || e >= n || s[e] != '>')
        return 0;
    char name[256];
    if (e - b >= sizeof name)
        return 0;
    memcpy(name, s + b, e - b);
    name[e - b] = '\0';
    size_t v = e + 1 + (e + 1 < n && s[e + 1] == '\n'); /* the value: after ">\n", before "\n</parameter>" */
    for (size_t q = v; q + 12 <= n && p->budget > 0; q++) {
        if (memcmp(s + q, "</parameter>", 12))
            continue;
        p->budget--;
        size_t end = q > v && s[q - 1] == '\n' ? q - 1 : q;
        json_t *val = typed(fn, name, s + v, end - v);
        if (!val || json_object_get(args, name)) { /* not UTF-8, or the parameter twice: not a call */
            json_decref(val);
            return 0;
        }
        if (json_object_set_new(args, name, val))
            return 0;
        if (parse_params(p, fn, s, q + 12, n, args))
            return 1;
        json_object_del(args, name); /* the deeper levels took theirs back */
    }
    return 0;
}

/* s[n], the text between OPEN and CLOSE: "\n<function=NAME>\n", parameters, "</function>\n", NAME one of the
 * tools. 1 with *name and *args (JSON object text) fresh (caller frees), 0 when it is not such a call. */
static int parse_call(struct loom_tool_parser *p, const char *s, size_t n, char **name, char **args)
{
    size_t i = skip_ws(s, 0, n), e;
    if (!starts(s, i, n, "<function="))
        return 0;
    i += 10;
    for (e = i; e < n && s[e] != '>' && s[e] != '\n' && s[e] != '<'; e++)
        ;
    const json_t *fn = e > i && e < n && s[e] == '>' ? find_tool(p->tools, s + i, e - i) : NULL;
    json_t *a = fn ? json_object() : NULL;
    p->budget = PARSE_BUDGET;
    int ok = a && parse_params(p, fn, s, e + 1, n, a);
    *args = ok ? json_dumps(a, JSON_COMPACT) : NULL;
    *name = ok ? strndup(s + i, e - i) : NULL;
    json_decref(a);
    if (ok && (!*args || !*name)) {
        free(*args), free(*name);
        return -1;
    }
    return ok;
}

/* Drop held[0, k). */
static void consume(struct loom_tool_parser *p, size_t k)
{
    memmove(p->held.p, p->held.p + k, p->held.len - k + 1);
    p->held.len -= k;
}

static void pass_content(struct loom_tool_parser *p, const loom_tool_sink *sink, size_t k)
{
    if (k && sink->content)
        sink->content(sink->ctx, p->held.p, k);
    consume(p, k);
}

/* Outside a call: pass on what cannot begin one (a call's opening, with the whitespace before it, is held). 1
 * when a call begins at held[0]. */
static int outside(struct loom_tool_parser *p, const loom_tool_sink *sink, int at_end)
{
    const char *h = p->held.p;
    size_t n = p->held.len, k;
    if (p->after_call) {
        k = skip_ws(h, 0, n);
        consume(p, k);
        if (k == n)
            return 0;
        h = p->held.p, n = p->held.len, p->after_call = 0;
    }
    const char *open = memmem(h, n, OPEN, sizeof OPEN - 1);
    if (at_end && !open) {
        for (k = n; p->n_calls && k > 0 && is_ws(h[k - 1]);) /* after calls, trailing whitespace is the template's */
            k--;
        pass_content(p, sink, k);
        consume(p, p->held.len);
        return 0;
    }
    k = open ? (size_t)(open - h) : n;
    for (size_t m = open ? 0 : sizeof OPEN - 2; m > 0; m--) /* a held suffix that may begin OPEN */
        if (m <= n && !memcmp(h + n - m, OPEN, m)) {
            k = n - m;
            break;
        }
    while (k > 0 && is_ws(h[k - 1])) /* whitespace before a call is the template's */
        k--;
    pass_content(p, sink, k);
    p->scanned = 0;
    return open != NULL;
}

/* Whether s[n], what follows an OPEN so far, may still begin a call: whitespace, then "<function=" (or a part of
 * it at the end). */
static int may_begin_call(const char *s, size_t n)
{
    size_t i = skip_ws(s, 0, n), k = n - i < 10 ? n - i : 10;
    return !memcmp(s + i, "<function=", k);
}

/* Inside a call: the first CLOSE that ends a well-formed call makes it one. An OPEN that cannot begin a call (prose
 * that mentions the tag), and at the end an unfinished call, is content through that OPEN, and what follows is
 * looked at anew. 1 when the text after what was passed on is to be looked at, 0 to wait, <0 on NOMEM. */
static int inside(struct loom_tool_parser *p, const loom_tool_sink *sink, int at_end)
{
    const char *h = p->held.p, *open = memmem(h, p->held.len, OPEN, sizeof OPEN - 1);
    size_t body = (size_t)(open - h) + sizeof OPEN - 1;
    if (!may_begin_call(h + body, p->held.len - body)) { /* text through this OPEN; the rest is looked at anew */
        pass_content(p, sink, body);
        p->inside = 0, p->scanned = 0;
        return 1;
    }
    for (size_t q = p->scanned > body ? p->scanned : body; q + sizeof CLOSE - 1 <= p->held.len; q++) {
        if (memcmp(h + q, CLOSE, sizeof CLOSE - 1))
            continue;
        char *name, *args;
        int rc = parse_call(p, h + body, q - body, &name, &args);
        if (rc < 0)
            return LOOM_E_NOMEM;
        if (rc) {
            if (sink->call)
                sink->call(sink->ctx, name, args);
            free(name), free(args);
            consume(p, q + sizeof CLOSE - 1);
            p->n_calls++, p->after_call = 1, p->inside = 0;
            return 1;
        }
        p->scanned = q + 1;
    }
    if (at_end) { /* never closed as a call: text through this OPEN; the rest (a later OPEN may begin one) anew */
        pass_content(p, sink, body);
        p->inside = 0, p->scanned = 0;
        return 1;
    }
    return 0;
}

static int step(struct loom_tool_parser *p, const loom_tool_sink *sink, int at_end)
{
    for (;;) {
        int rc = p->inside ? inside(p, sink, at_end) : (p->inside = outside(p, sink, at_end));
        if (rc <= 0)
            return rc < 0 ? rc : LOOM_OK;
    }
}

loom_tool_parser *loom_tool_parser_new(const loom_chat_template *t, const char *tools_json, loom_error *err)
{
    if (!t || strcmp(loom_chat_template_name(t), "qwen35")) {
        loom_errorf(err, LOOM_E_ARG, "tool calls: expected the official Qwen3.5 chat template (tool calls are parsed "
                    "only in its format), found %s; to use tools, pass --chat-template-file with the official Qwen3.5 "
                    "template", t ? "this model's template, which renders through the Jinja interpreter"
                                  : "no template");
        return NULL;
    }
    json_t *tools = loom_chat_json_parse(tools_json ? tools_json : "[]", tools_json ? strlen(tools_json) : 2,
                                         "tools", err);
    if (tools && !json_is_array(tools)) {
        json_decref(tools);
        loom_errorf(err, LOOM_E_ARG, "tools: expected a JSON array of tools, found another JSON value");
        return NULL;
    }
    struct loom_tool_parser *p = tools ? calloc(1, sizeof *p) : NULL;
    if (tools && (!p || loom_chat_buf_put(&p->held, "", 0))) {
        free(p);
        json_decref(tools);
        loom_errorf(err, LOOM_E_NOMEM, "tool calls: cannot allocate the parser");
        return NULL;
    }
    if (p)
        p->tools = tools;
    return p;
}

void loom_tool_parser_free(loom_tool_parser *p)
{
    if (!p)
        return;
    json_decref(p->tools);
    free(p->held.p);
    free(p);
}

int loom_tool_parser_feed(loom_tool_parser *p, const char *text, size_t n, const loom_tool_sink *sink,
                          loom_error *err)
{
    int rc = loom_chat_buf_put(&p->held, text, n);
    if (rc == LOOM_OK)
        rc = step(p, sink, 0);
    return rc == LOOM_OK ? LOOM_OK : loom_errorf(err, rc, "tool calls: out of memory");
}

int loom_tool_parser_end(loom_tool_parser *p, const loom_tool_sink *sink, loom_error *err)
{
    int rc = step(p, sink, 1);
    return rc == LOOM_OK ? p->n_calls : loom_errorf(err, rc, "tool calls: out of memory");
}
