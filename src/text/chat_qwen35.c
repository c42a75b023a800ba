/* chat_qwen35.c — the Qwen3.5 chat format rendered natively, byte for byte as the official template
 * (models/templates/Qwen3.5-4B.jinja) renders under Hugging Face's Jinja settings, with every byte marked DATA
 * (caller text) or CONTROL (template text). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"
#include "text/chat_internal.h"
#include "util/array.h"
#include "util/error.h"

/* A byte slice of caller or template text. */
struct slice {
    const char *p;
    size_t n;
};

struct render {
    struct loom_chat_buf text;
    struct loom_chat_segment *seg;
    size_t n_seg, cap_seg;
    int rc; /* first failure; once set, emits do nothing */
};

static struct slice slice_of(const char *s)
{
    return (struct slice){s ? s : "", s ? strlen(s) : 0};
}

/* Append s[n] as kind; adjacent bytes of the same kind share one segment. */
static void emit(struct render *r, enum loom_chat_seg_kind kind, const char *s, size_t n)
{
    if (r->rc != LOOM_OK || n == 0)
        return;
    size_t off = r->text.len;
    if ((r->rc = loom_chat_buf_put(&r->text, s, n)) != LOOM_OK)
        return;
    if (r->n_seg && r->seg[r->n_seg - 1].kind == kind) {
        r->seg[r->n_seg - 1].len += n;
        return;
    }
    struct loom_chat_segment *seg = loom_grow(r->seg, &r->cap_seg, r->n_seg + 1, sizeof *seg);
    if (!seg) {
        r->rc = LOOM_E_NOMEM;
        return;
    }
    r->seg = seg;
    r->seg[r->n_seg++] = (struct loom_chat_segment){off, n, kind};
}

static void ctl(struct render *r, const char *s)
{
    emit(r, LOOM_CHAT_CONTROL, s, strlen(s));
}

static void data(struct render *r, struct slice s)
{
    emit(r, LOOM_CHAT_DATA, s.p, s.n);
}

/* Length of the UTF-8 character at s[0..n) when it is one of Python's str.isspace() characters, else 0. */
static size_t space_at(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20))
        return 1;
    if (c == 0xc2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xa0))
        return 2;
    if (n < 3)
        return 0;
    unsigned cp = ((c & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
    if ((c & 0xf0) != 0xe0 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
        return 0;
    int ws = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
             cp == 0x205f || cp == 0x3000;
    return ws ? 3 : 0;
}

/* Byte count of the whitespace character ending at s[n-1], else 0. */
static size_t space_before(const unsigned char *s, size_t n)
{
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        size_t w = space_at(s + n - k, k);
        if (w == k)
            return k;
    }
    return 0;
}

/* Jinja's trim filter: Python's str.strip() with no argument. */
static struct slice trim(struct slice s)
{
    const unsigned char *u = (const unsigned char *)s.p;
    size_t a = 0, b = s.n, w;
    while (a < b && (w = space_at(u + a, b - a)) > 0)
        a += w;
    while (b > a && (w = space_before(u + a, b - a)) > 0)
        b -= w;
    return (struct slice){s.p + a, b - a};
}

static struct slice strip_nl(struct slice s, int left)
{
    while (s.n && (left ? s.p[0] : s.p[s.n - 1]) == '\n') {
        s.p += left;
        s.n--;
    }
    return s;
}

/* Offset of the first (last) occurrence of pat in s, or -1. */
static long find(struct slice s, const char *pat, int last)
{
    size_t m = strlen(pat);
    long at = -1;
    for (size_t i = 0; i + m <= s.n; i++) {
        if (memcmp(s.p + i, pat, m) == 0) {
            at = (long)i;
            if (!last)
                break;
        }
    }
    return at;
}

static int starts_ends(struct slice s, const char *head, const char *tail)
{
    size_t h = strlen(head), t = strlen(tail);
    return s.n >= h && s.n >= t && !memcmp(s.p, head, h) && !memcmp(s.p + s.n - t, tail, t);
}

static int role_is(const struct loom_chat_message *m, const char *role)
{
    return m->role && !strcmp(m->role, role);
}

/* The template's "last query": the last user message whose trimmed content is not entirely a
 * <tool_response>...</tool_response>. Returns its index or -1. */
static long last_query_index(const struct loom_chat_message *msgs, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        if (!role_is(&msgs[i], "user"))
            continue;
        if (!starts_ends(trim(slice_of(msgs[i].content)), "<tool_response>", "</tool_response>"))
            return (long)i;
    }
    return -1;
}

/* System turn with the tool list (tools[] non-empty) and the first message's system text. */
static void render_tools_header(struct render *r, const json_t *tools, const struct loom_chat_message *first)
{
    ctl(r, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
    for (size_t i = 0; i < json_array_size(tools); i++) {
        ctl(r, "\n");
        struct loom_chat_buf b = {0};
        int rc = loom_chat_json_write(&b, json_array_get(tools, i), 0);
        if (rc == LOOM_OK)
            data(r, (struct slice){b.p, b.len});
        else if (r->rc == LOOM_OK)
            r->rc = rc;
        free(b.p);
    }
    ctl(r, "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
           "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
           "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\n"
           "multiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
           "- Function calls MUST follow the specified format: an inner <function=...></function> block must be "
           "nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n"
           "- You may provide optional reasoning for your function call in natural language BEFORE the function "
           "call, but NOT after\n- If there is no function call available, answer the question like normal with "
           "your current knowledge and do not tell the user about function calls\n</IMPORTANT>");
    if (role_is(first, "system")) {
        struct slice c = trim(slice_of(first->content));
        if (c.n) {
            ctl(r, "\n\n");
            data(r, c);
        }
    }
    ctl(r, "<|im_end|>\n");
}

/* The arguments object of a tool call: JSON text of an object, or of a string holding an object's JSON
 * (rendered as that object). NULL with err filled otherwise. */
static json_t *tool_call_arguments(const struct loom_chat_tool_call *tc, size_t k, loom_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "tool call %zu arguments", k);
    return loom_chat_json_arguments(tc->arguments, what, err);
}

/* <parameter=NAME>\nVALUE\n</parameter>\n for each argument: objects and arrays as JSON, scalars as str(). */
static void render_arguments(struct render *r, const json_t *args)
{
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach((json_t *)args, key, klen, val) {
        ctl(r, "<parameter=");
        data(r, (struct slice){key, klen});
        ctl(r, ">\n");
        struct loom_chat_buf b = {0};
        int rc = loom_chat_json_write(&b, val, !json_is_object(val) && !json_is_array(val));
        if (rc == LOOM_OK)
            data(r, (struct slice){b.p ? b.p : "", b.len});
        else if (r->rc == LOOM_OK)
            r->rc = rc;
        free(b.p);
        ctl(r, "\n</parameter>\n");
    }
}

static int render_tool_calls(struct render *r, const struct loom_chat_message *m, struct slice content,
                             loom_error *err)
{
    for (size_t k = 0; k < m->n_tool_calls; k++) {
        const struct loom_chat_tool_call *tc = &m->tool_calls[k];
        if (!tc->name)
            return loom_errorf(err, LOOM_E_ARG, "tool call %zu: expected a function name, found none", k);
        json_t *args = NULL;
        if (tc->arguments && !(args = tool_call_arguments(tc, k, err)))
            return LOOM_E_ARG;
        ctl(r, k > 0 ? "\n<tool_call>\n<function=" : trim(content).n ? "\n\n<tool_call>\n<function="
                                                                     : "<tool_call>\n<function=");
        data(r, slice_of(tc->name));
        ctl(r, ">\n");
        if (args)
            render_arguments(r, args);
        json_decref(args);
        ctl(r, "</function>\n</tool_call>");
    }
    return LOOM_OK;
}

/* An assistant turn: reasoning split from content (or given), a <think> block after the last query. */
static int render_assistant(struct render *r, const struct loom_chat_message *m, struct slice content,
                            int after_last_query, loom_error *err)
{
    struct slice reasoning = {"", 0};
    if (m->reasoning_content) {
        reasoning = slice_of(m->reasoning_content);
    } else if (find(content, "</think>", 0) >= 0) {
        struct slice before = strip_nl((struct slice){content.p, (size_t)find(content, "</think>", 0)}, 0);
        long open = find(before, "<think>", 1);
        if (open >= 0)
            before = (struct slice){before.p + open + 7, before.n - (size_t)open - 7};
        reasoning = strip_nl(before, 1);
        size_t close = (size_t)find(content, "</think>", 1) + 8;
        content = strip_nl((struct slice){content.p + close, content.n - close}, 1);
    }
    reasoning = trim(reasoning);
    if (after_last_query) {
        ctl(r, "<|im_start|>assistant\n<think>\n");
        data(r, reasoning);
        ctl(r, "\n</think>\n\n");
    } else {
        ctl(r, "<|im_start|>assistant\n");
    }
    data(r, content);
    int rc = render_tool_calls(r, m, content, err);
    ctl(r, "<|im_end|>\n");
    return rc;
}

static int template_error(loom_error *err, const char *msg)
{
    return loom_errorf(err, LOOM_E_ARG, "%s", msg);
}

static int render_messages(struct render *r, const struct loom_chat_message *msgs, size_t n, long last_query,
                           loom_error *err)
{
    for (size_t i = 0; i < n && r->rc == LOOM_OK; i++) {
        const struct loom_chat_message *m = &msgs[i];
        struct slice content = trim(slice_of(m->content));
        if (role_is(m, "system")) {
            if (i != 0)
                return template_error(err, "System message must be at the beginning.");
        } else if (role_is(m, "user")) {
            ctl(r, "<|im_start|>user\n");
            data(r, content);
            ctl(r, "<|im_end|>\n");
        } else if (role_is(m, "assistant")) {
            int rc = render_assistant(r, m, content, (long)i > last_query, err);
            if (rc != LOOM_OK)
                return rc;
        } else if (role_is(m, "tool")) {
            if (i > 0 && !role_is(&msgs[i - 1], "tool"))
                ctl(r, "<|im_start|>user");
            ctl(r, "\n<tool_response>\n");
            data(r, content);
            ctl(r, "\n</tool_response>");
            if (i + 1 == n || !role_is(&msgs[i + 1], "tool"))
                ctl(r, "<|im_end|>\n");
        } else {
            return template_error(err, "Unexpected message role.");
        }
    }
    return LOOM_OK;
}

/* Parse the tools JSON: *tools is NULL when there are none. */
static int parse_tools(const char *text, json_t **tools, loom_error *err)
{
    *tools = NULL;
    if (!text)
        return LOOM_OK;
    json_t *v = loom_chat_json_parse(text, strlen(text), "tools", err);
    if (!v)
        return LOOM_E_ARG;
    if (!json_is_array(v)) {
        int type = (int)json_typeof(v);
        json_decref(v);
        return loom_errorf(err, LOOM_E_ARG, "tools: expected a JSON array of tool descriptions, found JSON type %d",
                           type);
    }
    if (json_array_size(v) == 0)
        json_decref(v);
    else
        *tools = v;
    return LOOM_OK;
}

static int render_all(struct render *r, const struct loom_chat_message *msgs, size_t n,
                      const struct loom_chat_params *p, loom_error *err)
{
    if (n == 0)
        return template_error(err, "No messages provided.");
    json_t *tools;
    int rc = parse_tools(p->tools, &tools, err);
    if (rc != LOOM_OK)
        return rc;
    if (tools) {
        render_tools_header(r, tools, &msgs[0]);
        json_decref(tools);
    } else if (role_is(&msgs[0], "system")) {
        ctl(r, "<|im_start|>system\n");
        data(r, trim(slice_of(msgs[0].content)));
        ctl(r, "<|im_end|>\n");
    }
    long last_query = last_query_index(msgs, n);
    if (last_query < 0)
        return template_error(err, "No user query found in messages.");
    rc = render_messages(r, msgs, n, last_query, err);
    if (rc != LOOM_OK)
        return rc;
    if (p->add_generation_prompt)
        ctl(r, p->think == LOOM_CHAT_THINK_OFF ? "<|im_start|>assistant\n<think>\n\n</think>\n\n"
                                               : "<|im_start|>assistant\n<think>\n");
    if (r->rc == LOOM_OK && !r->text.p)
        r->rc = loom_chat_buf_put(&r->text, "", 0);
    return r->rc == LOOM_OK ? LOOM_OK : loom_errorf(err, r->rc, "chat render: out of memory");
}

int loom_chat_render_qwen35(const struct loom_chat_message *msgs, size_t n, const struct loom_chat_params *p,
                            struct loom_chat_render *out, loom_error *err)
{
    static const struct loom_chat_params defaults = {0};
    if ((!msgs && n) || !out)
        return loom_errorf(err, LOOM_E_ARG, "chat render: msgs or out is NULL");
    struct render r = {0};
    int rc = render_all(&r, msgs, n, p ? p : &defaults, err);
    if (rc != LOOM_OK) {
        free(r.text.p);
        free(r.seg);
        return rc;
    }
    *out = (struct loom_chat_render){r.text.p, r.text.len, r.seg, r.n_seg};
    return LOOM_OK;
}

void loom_chat_render_free(struct loom_chat_render *r)
{
    if (!r)
        return;
    free(r->text);
    free(r->seg);
    *r = (struct loom_chat_render){0};
}
