/* chat_template.c — the public chat renderer (loom.h, "Text: chat rendering"): which format a template names or
 * is, and messages to token ids through that format's render with provenance (chat.h). A template recognised by
 * its digest uses its built-in renderer (today the Qwen3.5 one); any other template text is rendered by the Jinja
 * interpreter (jinja.h) from the messages and parameters as Hugging Face's apply_chat_template passes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "text/chat.h"
#include "text/chat_internal.h"
#include "text/jinja.h"
#include "text/text_internal.h"
#include "util/error.h"

/* A built-in format: its name, the XXH3-64 digest of the template text it renders exactly, and its renderer. */
struct chat_format {
    const char *name;
    uint64_t digest;
    int (*render)(const struct loom_chat_message *msgs, size_t n, const struct loom_chat_params *p,
                  struct loom_chat_render *out, loom_error *err);
};

static const struct chat_format k_formats[] = {
    /* Qwen3.5: the official template, llama.cpp v0.5.0 models/templates/Qwen3.5-4B.jinja (7756 bytes) */
    {"qwen35", 0x0ed0a1d8b9d7e0beull, loom_chat_render_qwen35},
};

struct loom_chat_template {
    const struct loom_tokenizer *tok;
    const struct chat_format *format; /* NULL: the Jinja template below */
    struct loom_jinja *jinja;
    json_t *control; /* the model's own variables: bos_token, eos_token (CONTROL text) */
};

/* The format tmpl names or is (its digest), or NULL. */
static const struct chat_format *find_format(const char *tmpl)
{
    uint64_t d = XXH3_64bits(tmpl, strlen(tmpl));
    for (size_t i = 0; i < sizeof k_formats / sizeof *k_formats; i++) {
        const struct chat_format *f = &k_formats[i];
        if (!strcmp(tmpl, f->name) || d == f->digest)
            return f;
    }
    return NULL;
}

/* The spelling of the file's special token `which` as a JSON string into vars[name]; nothing when absent. */
static void set_token_var(json_t *vars, const loom_tokenizer *tok, enum loom_special_token which, const char *name)
{
    char piece[256];
    int32_t id = loom_tokenizer_special(tok, which);
    int k = id >= 0 ? loom_tokenizer_piece(tok, id, piece, (int)sizeof piece) : -1;
    if (k >= 0 && k < (int)sizeof piece)
        json_object_set_new(vars, name, json_stringn(piece, (size_t)k));
}

/* A template that is no built-in: parsed now, so syntax errors and unsupported tags, filters and tests refuse it
 * here; what only evaluation finds (an unsupported method, a type error) fails the render. */
static loom_chat_template *jinja_template_new(const loom_tokenizer *tok, const char *text, int named,
                                              loom_error *err)
{
    loom_chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        loom_errorf(err, LOOM_E_NOMEM, "chat template: cannot allocate");
        return NULL;
    }
    t->tok = tok;
    if (loom_jinja_parse(text, strlen(text), &t->jinja, err) != LOOM_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        loom_errorf(err, err->code, "%s: %s", named ? "chat template" : "tokenizer.chat_template", msg);
        free(t);
        return NULL;
    }
    t->control = json_object();
    if (!t->control) {
        loom_jinja_free(t->jinja);
        free(t);
        loom_errorf(err, LOOM_E_NOMEM, "chat template: cannot allocate");
        return NULL;
    }
    set_token_var(t->control, tok, LOOM_SPECIAL_ID_BOS, "bos_token");
    set_token_var(t->control, tok, LOOM_SPECIAL_ID_EOS, "eos_token");
    return t;
}

loom_chat_template *loom_chat_template_new(const loom_tokenizer *tok, const char *tmpl, loom_error *err)
{
    if (!tok) {
        loom_errorf(err, LOOM_E_ARG, "chat template: expected a tokenizer, found NULL");
        return NULL;
    }
    const char *text = tmpl ? tmpl : loom_tokenizer_chat_template(tok);
    if (text && !text[strspn(text, " \t\r\n")]) { /* renders no turn at all: a mistake, never a format */
        loom_errorf(err, LOOM_E_FORMAT, "%s: expected a template, found %s", tmpl ? "chat template" :
                    "tokenizer.chat_template", *text ? "only whitespace" : "an empty text");
        return NULL;
    }
    if (!text) {
        loom_errorf(err, LOOM_E_FORMAT, "tokenizer.chat_template: expected a chat template, found none (name a "
                                        "built-in format: qwen35)");
        return NULL;
    }
    const struct chat_format *f = find_format(text);
    if (!f)
        return jinja_template_new(tok, text, tmpl != NULL, err);
    loom_chat_template *t = calloc(1, sizeof *t);
    if (!t) {
        loom_errorf(err, LOOM_E_NOMEM, "chat template: cannot allocate");
        return NULL;
    }
    t->tok = tok;
    t->format = f;
    return t;
}

void loom_chat_template_free(loom_chat_template *t)
{
    if (!t)
        return;
    loom_jinja_free(t->jinja);
    json_decref(t->control);
    free(t);
}

const char *loom_chat_template_name(const loom_chat_template *t)
{
    return t->format ? t->format->name : "jinja";
}

/* A built-in format's render, with p->kwargs checked as the Jinja path checks them; their enable_thinking (a
 * boolean) sets the thinking mode over p->think, as the Jinja path sets kwargs last (the only variable of these
 * formats a kwarg can name). */
static int builtin_render(const struct chat_format *f, const struct loom_chat_message *msgs, size_t n,
                          const struct loom_chat_params *p, struct loom_chat_render *out, loom_error *err)
{
    json_t *kw = NULL;
    int rc = p ? loom_chat_kwargs_parse(p->kwargs, &kw, err) : LOOM_OK;
    if (rc)
        return rc;
    json_t *think = json_object_get(kw, "enable_thinking");
    struct loom_chat_params q = p ? *p : (struct loom_chat_params){0};
    if (json_is_boolean(think))
        q.think = json_is_true(think) ? LOOM_CHAT_THINK_ON : LOOM_CHAT_THINK_OFF;
    json_decref(kw);
    return f->render(msgs, n, p ? &q : NULL, out, err);
}

int loom_chat_template_apply(const loom_chat_template *t, const loom_chat_message *msgs, size_t n,
                             const loom_chat_params *p, int32_t **ids, int *n_ids, loom_error *err)
{
    struct loom_chat_render r = {0};
    int rc = t->format ? builtin_render(t->format, msgs, n, p, &r, err)
                       : loom_chat_render_jinja(t->jinja, msgs, n, p, t->control, -1, &r, err);
    if (rc == LOOM_OK)
        rc = loom_chat_tokenize(t->tok, &r, ids, n_ids, err);
    loom_chat_render_free(&r);
    return rc;
}

/* ---- messages and parameters as the template's variables ---- */

static int fail_nomem(loom_error *err)
{
    return loom_errorf(err, LOOM_E_NOMEM, "chat render: out of memory");
}

/* A JSON string of a message's text s: s itself when it is valid UTF-8; else s as the tokenizer reads it
 * (loom_utf8_decode_lenient: a byte that starts no sequence, or a sequence cut short, is U+FFFD), surrogates and
 * code points past U+10FFFF as U+FFFD too (a JSON string holds neither), so that the caller's bad bytes render as
 * run's prompt takes them. NULL when memory runs out. */
static json_t *json_text(const char *s)
{
    json_t *j = json_string(s);
    if (j)
        return j;
    size_t n = strlen(s), o = 0;
    uint32_t *cps = malloc((n ? n : 1) * sizeof *cps);
    char *out = malloc(3 * n + 1);
    size_t k = cps && out ? loom_utf8_decode_lenient(s, n, cps) : 0;
    for (size_t i = 0; i < k; i++) {
        uint32_t cp = cps[i] > 0x10FFFF || (cps[i] >= 0xD800 && cps[i] <= 0xDFFF) ? 0xFFFD : cps[i];
        o += (size_t)loom_utf8_encode(cp, (unsigned char *)out + o);
    }
    j = cps && out ? json_stringn(out, o) : NULL;
    free(cps);
    free(out);
    return j;
}

/* A tool call's arguments: JSON text of an object, or of a string holding an object's JSON. */
static json_t *call_arguments(const char *text, size_t i, size_t k, loom_error *err)
{
    char what[112];
    snprintf(what, sizeof what, "messages[%zu].tool_calls[%zu].function.arguments", i, k);
    return loom_chat_json_arguments(text, what, err);
}

/* {"role", "content" (null when NULL), "reasoning_content" (when given), "name" (when given), "tool_calls":
 * [{"type": "function", "function": {"name", "arguments" (an object, when given)}}] (when any)}; NULL with err
 * on failure. */
static json_t *message_json(const struct loom_chat_message *m, size_t i, int *rc, loom_error *err)
{
    *rc = LOOM_E_ARG;
    if (!m->role) {
        loom_errorf(err, LOOM_E_ARG, "messages[%zu].role: expected a string, found NULL", i);
        return NULL;
    }
    json_t *o = json_object();
    int bad = !o || json_object_set_new(o, "role", json_text(m->role)) ||
              json_object_set_new(o, "content", m->content ? json_text(m->content) : json_null()) ||
              (m->reasoning_content && json_object_set_new(o, "reasoning_content", json_text(m->reasoning_content))) ||
              (m->name && json_object_set_new(o, "name", json_text(m->name)));
    json_t *calls = m->n_tool_calls ? json_array() : NULL;
    bad |= m->n_tool_calls && (!calls || json_object_set_new(o, "tool_calls", calls));
    for (size_t k = 0; !bad && k < m->n_tool_calls; k++) {
        const struct loom_chat_tool_call *tc = &m->tool_calls[k];
        if (!tc->name) {
            json_decref(o);
            loom_errorf(err, LOOM_E_ARG, "messages[%zu].tool_calls[%zu]: expected a function name, found none", i, k);
            return NULL;
        }
        json_t *args = NULL;
        if (tc->arguments && !(args = call_arguments(tc->arguments, i, k, err))) {
            json_decref(o);
            return NULL;
        }
        json_t *fn = json_object(), *call = json_object();
        bad |= !fn || !call || json_array_append_new(calls, call) || json_object_set_new(call, "type", json_string("function")) ||
               json_object_set_new(call, "function", fn) || json_object_set_new(fn, "name", json_text(tc->name)) ||
               (args && json_object_set_new(fn, "arguments", args));
    }
    if (bad) {
        json_decref(o);
        *rc = fail_nomem(err);
        return NULL;
    }
    return o;
}

int loom_chat_kwargs_parse(const char *text, json_t **out, loom_error *err)
{
    static const char *const own[] = {"messages", "tools", "add_generation_prompt"};
    *out = NULL;
    if (!text)
        return LOOM_OK;
    json_t *kw = loom_chat_json_parse(text, strlen(text), "chat_template_kwargs", err);
    if (!kw)
        return err && err->code ? err->code : LOOM_E_ARG;
    if (!json_is_object(kw)) {
        const char *found = json_is_array(kw) ? "an array" : json_is_string(kw) ? "a string" : "another JSON value";
        json_decref(kw);
        return loom_errorf(err, LOOM_E_ARG, "chat_template_kwargs: expected a JSON object, found %s", found);
    }
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (json_object_get(kw, own[i])) {
            json_decref(kw);
            return loom_errorf(err, LOOM_E_ARG, "chat_template_kwargs.%s: expected variables the request does not "
                               "set itself, found %s (give it as the request's own field)", own[i], own[i]);
        }
    *out = kw;
    return LOOM_OK;
}

/* The variables Hugging Face's apply_chat_template passes: messages, add_generation_prompt, tools (only when
 * non-empty: NULL and [] both mean no tools, as for the built-in renderer) and enable_thinking (only when set),
 * then each of p->kwargs (llama.cpp server's chat_template_kwargs: set after, so enable_thinking there wins). */
static int chat_vars(const struct loom_chat_message *msgs, size_t n, const struct loom_chat_params *p,
                     json_t **out, loom_error *err)
{
    json_t *vars = json_object(), *list = json_array();
    if (!vars || !list || json_object_set_new(vars, "messages", list)) {
        json_decref(vars);
        return fail_nomem(err);
    }
    for (size_t i = 0; i < n; i++) {
        int rc;
        json_t *m = message_json(&msgs[i], i, &rc, err);
        if (!m || json_array_append_new(list, m)) {
            json_decref(vars);
            return m ? fail_nomem(err) : rc;
        }
    }
    int bad = json_object_set_new(vars, "add_generation_prompt", json_boolean(p->add_generation_prompt));
    if (p->think != LOOM_CHAT_THINK_UNSET)
        bad |= json_object_set_new(vars, "enable_thinking", json_boolean(p->think == LOOM_CHAT_THINK_ON));
    if (p->tools) {
        json_t *tools = loom_chat_json_parse(p->tools, strlen(p->tools), "tools", err);
        if (!tools || !json_is_array(tools)) {
            if (tools)
                loom_errorf(err, LOOM_E_ARG, "tools: expected a JSON array of tool descriptions, found JSON type %d",
                            (int)json_typeof(tools));
            json_decref(tools);
            json_decref(vars);
            return LOOM_E_ARG;
        }
        if (json_array_size(tools))
            bad |= json_object_set_new(vars, "tools", tools);
        else
            json_decref(tools);
    }
    json_t *kw = NULL;
    int rc = loom_chat_kwargs_parse(p->kwargs, &kw, err);
    if (rc) {
        json_decref(vars);
        return rc;
    }
    bad |= kw && json_object_update(vars, kw);
    json_decref(kw);
    if (bad) {
        json_decref(vars);
        return fail_nomem(err);
    }
    *out = vars;
    return LOOM_OK;
}

int loom_chat_render_jinja(const struct loom_jinja *t, const struct loom_chat_message *msgs, size_t n,
                           const struct loom_chat_params *p, const json_t *control, int64_t now,
                           struct loom_chat_render *out, loom_error *err)
{
    static const struct loom_chat_params defaults = {0};
    if ((!msgs && n) || !out || !t)
        return loom_errorf(err, LOOM_E_ARG, "chat render: template, msgs or out is NULL");
    json_t *vars = NULL;
    int rc = chat_vars(msgs, n, p ? p : &defaults, &vars, err);
    if (rc != LOOM_OK)
        return rc;
    struct loom_jinja_opts o = {now};
    rc = loom_jinja_render(t, vars, control, &o, out, err);
    json_decref(vars);
    return rc;
}
