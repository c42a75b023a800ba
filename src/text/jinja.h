/* jinja.h — inside loom: a Jinja interpreter for chat templates (the subset Hugging Face chat templates use),
 * rendering byte for byte as Python jinja2 3.x does under apply_chat_template's settings (sandboxed, trim_blocks,
 * lstrip_blocks, loopcontrols, raise_exception, strftime_now, tojson = json.dumps(ensure_ascii=False)), with
 * provenance: every output byte is DATA (it came from the caller's variables) or CONTROL (the template wrote it). */
#ifndef LOOM_TEXT_JINJA_H
#define LOOM_TEXT_JINJA_H

#include <jansson.h>
#include <stdint.h>

#include "text/chat.h"

struct loom_jinja; /* a parsed template: immutable, share it between threads */

/* Parse src[len] (UTF-8 template text). Syntax errors, unknown tags and unknown filter or test names fail here
 * with LOOM_E_FORMAT and a message "jinja: line N: ..." naming the construct ("jinja: line 12: filter 'wordwrap'
 * is not supported"); LOOM_E_NOMEM. On success *out is a fresh template (free with loom_jinja_free). */
int loom_jinja_parse(const char *src, size_t len, struct loom_jinja **out, loom_error *err);
void loom_jinja_free(struct loom_jinja *t);

/* Per-render limits, far above what chat templates need (a 4001-message Qwen3 conversation renders well within
 * them) so that a runaway template (a string doubled in a loop, nested loops of millions of iterations) fails
 * closed instead of freezing or exhausting the server: loom_jinja_render fails with LOOM_E_RANGE "jinja: line N:
 * the render exceeds 256 MiB of strings/values (loom's limit)" once its values, strings and output hold more than
 * LOOM_JINJA_MAX_BYTES bytes at once (each loop iteration frees what it made unless a namespace attribute or the
 * output kept it), or "jinja: line N: more than 1000000 loop iterations in one render (loom's limit)" past
 * LOOM_JINJA_MAX_ITERATIONS iterations of all loops together (a `for ... if` filter's tests count too). */
#define LOOM_JINJA_MAX_BYTES ((size_t)256 << 20)
#define LOOM_JINJA_MAX_ITERATIONS 1000000

/* Render options. now: the time strftime_now formats, seconds since the Unix epoch in local time; < 0: the
 * current time. */
struct loom_jinja_opts {
    int64_t now;
};

/* Render t with the variables of data_vars (a JSON object; every string in it is DATA) and control_vars (a JSON
 * object or NULL; its strings are CONTROL, for values the model file supplies such as bos_token). JSON numbers,
 * booleans, null, arrays and objects become Python's int, float, bool, None, list and dict (object keys in
 * order). On success *out is replaced (free with loom_chat_render_free). Errors: LOOM_E_ARG with the template's
 * own message for raise_exception("..."), LOOM_E_FORMAT "jinja: line N: ..." for an evaluation error (undefined
 * attribute of an undefined value, a type error, an unsupported method: "method 'format' of str is not supported
 * by loom's interpreter"), LOOM_E_RANGE past a limit above, LOOM_E_NOMEM; *out is then untouched. */
int loom_jinja_render(const struct loom_jinja *t, const json_t *data_vars, const json_t *control_vars,
                      const struct loom_jinja_opts *o, struct loom_chat_render *out, loom_error *err);

/* Render msgs[n] with params p (NULL: all zero) through template t, with the variables Hugging Face's
 * apply_chat_template passes: messages (each {"role", "content" (None when NULL), "reasoning_content" when given,
 * "tool_calls": [{"type": "function", "function": {"name", "arguments"}}] when any, arguments parsed from their
 * JSON text into an object}), add_generation_prompt, tools (when p->tools is a non-empty JSON array) and
 * enable_thinking (when p->think is set), all DATA; control (a JSON object or NULL) adds the model file's own
 * variables (bos_token, eos_token) as CONTROL. now: as loom_jinja_opts.now. Errors as loom_jinja_render, plus
 * LOOM_E_ARG naming a malformed message field or tools JSON. */
int loom_chat_render_jinja(const struct loom_jinja *t, const struct loom_chat_message *msgs, size_t n,
                           const struct loom_chat_params *p, const json_t *control, int64_t now,
                           struct loom_chat_render *out, loom_error *err);

#endif
