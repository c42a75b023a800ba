/* chat_fixture.h — what the chat-template tests (test_chat, test_jinja) share: a fixture conversation ("input"
 * objects of tests/fixtures/chat/qwen35.json and tests/fixtures/jinja/renders.json) converted to the C API, and
 * the checks on a render's segments. */
#ifndef LOOM_TEST_CHAT_FIXTURE_H
#define LOOM_TEST_CHAT_FIXTURE_H

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"

#define MAX_MSGS 32
#define MAX_CALLS 8

/* One fixture conversation converted to the C API; strings point into the jansson tree or into owned[]. */
struct conv {
    struct loom_chat_message msgs[MAX_MSGS];
    struct loom_chat_tool_call calls[MAX_MSGS][MAX_CALLS];
    struct loom_chat_params p;
    char *owned[MAX_MSGS * MAX_CALLS + 2]; /* the calls' arguments, tools, chat_template_kwargs */
    int n_owned;
    size_t n;
};

static inline const char *str_or_null(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static inline char *conv_dump_owned(struct conv *c, const json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    c->owned[c->n_owned++] = s;
    return s;
}

/* Fill c from a fixture "input" object: tool calls wrapped in {"function": ...} or not, their arguments, the
 * tools and chat_template_kwargs as compact JSON text, each message's name. Returns 0, or -1 when the fixture exceeds MAX_MSGS or MAX_CALLS. */
static inline int conv_load(struct conv *c, const json_t *input)
{
    memset(c, 0, sizeof *c);
    const json_t *msgs = json_object_get(input, "messages");
    if (json_array_size(msgs) > MAX_MSGS)
        return -1;
    c->n = json_array_size(msgs);
    for (size_t i = 0; i < c->n; i++) {
        const json_t *m = json_array_get(msgs, i), *tcs = json_object_get(m, "tool_calls");
        struct loom_chat_message *cm = &c->msgs[i];
        cm->role = str_or_null(json_object_get(m, "role"));
        cm->content = str_or_null(json_object_get(m, "content"));
        cm->reasoning_content = str_or_null(json_object_get(m, "reasoning_content"));
        cm->name = str_or_null(json_object_get(m, "name"));
        if (json_array_size(tcs) > MAX_CALLS)
            return -1;
        for (size_t k = 0; k < json_array_size(tcs); k++) {
            const json_t *tc = json_array_get(tcs, k);
            const json_t *fn = json_object_get(tc, "function") ? json_object_get(tc, "function") : tc;
            const json_t *args = json_object_get(fn, "arguments");
            c->calls[i][k].name = str_or_null(json_object_get(fn, "name"));
            c->calls[i][k].arguments = args ? conv_dump_owned(c, args) : NULL;
        }
        cm->tool_calls = c->calls[i];
        cm->n_tool_calls = json_array_size(tcs);
    }
    const json_t *tools = json_object_get(input, "tools");
    c->p.tools = tools ? conv_dump_owned(c, tools) : NULL;
    c->p.add_generation_prompt = json_is_true(json_object_get(input, "add_generation_prompt"));
    const json_t *think = json_object_get(input, "enable_thinking");
    c->p.think = !think ? LOOM_CHAT_THINK_UNSET : json_is_true(think) ? LOOM_CHAT_THINK_ON : LOOM_CHAT_THINK_OFF;
    const json_t *kwargs = json_object_get(input, "chat_template_kwargs");
    c->p.kwargs = kwargs ? conv_dump_owned(c, kwargs) : NULL;
    return 0;
}

static inline void conv_free(struct conv *c)
{
    for (int i = 0; i < c->n_owned; i++)
        free(c->owned[i]);
}

/* 1 when r's segments tile its text, are non-empty and alternate in kind, and the text is NUL-terminated. */
static inline int segments_ok(const struct loom_chat_render *r)
{
    size_t off = 0;
    for (size_t i = 0; i < r->n_seg; i++) {
        if (r->seg[i].off != off || r->seg[i].len == 0 || (i && r->seg[i].kind == r->seg[i - 1].kind))
            return 0;
        off += r->seg[i].len;
    }
    return off == r->len && r->text[r->len] == '\0';
}

/* The bytes of r's segments of one kind (LOOM_CHAT_DATA or LOOM_CHAT_CONTROL), concatenated: a fresh
 * NUL-terminated string of *n bytes, or NULL when out of memory. */
static inline char *kind_text(const struct loom_chat_render *r, enum loom_chat_seg_kind kind, size_t *n)
{
    char *s = calloc(r->len + 1, 1);
    *n = 0;
    for (size_t i = 0; s && i < r->n_seg; i++)
        if (r->seg[i].kind == kind) {
            memcpy(s + *n, r->text + r->seg[i].off, r->seg[i].len);
            *n += r->seg[i].len;
        }
    return s;
}

#endif
