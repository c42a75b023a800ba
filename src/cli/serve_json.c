/* serve_json.c — `loom serve`'s JSON side (Jansson): request bodies checked field by field (an OpenAI-shaped
 * error naming the field, what was expected and what was found) and turned into a serve_req (chat rendered
 * with provenance, prompt tokenized, sampler and stop matcher made); /tokenize and /detokenize; the response
 * and stream-chunk shapes of OpenAI's chat.completion, chat.completion.chunk and text_completion. */
#include <jansson.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/serve.h"
#include "cli/serve_jnum.h"

void *serve_fail(struct serve_err *e, int status, const char *param, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code = code;
    e->type = status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error";
    return NULL;
}

/* ---- UTF-8 ---- */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when it is not one (overlong, surrogate, > U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (k == 0 || k > n || (k == 2 && c < 0xC2))
        return 0;
    unsigned cp = k == 1 ? c : c & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return k;
}

int serve_utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if ((k = utf8_seq((const unsigned char *)s + i, n - i)) == 0)
            return 0;
    return 1;
}

/* A JSON string of s[n], every byte that is not part of valid UTF-8 replaced by U+FFFD. */
static json_t *jtext(const char *s, size_t n)
{
    if (serve_utf8_valid(s, n))
        return json_stringn(s, n);
    struct serve_buf b = {0};
    for (size_t i = 0, k; i < n; i += k ? k : 1) {
        k = utf8_seq((const unsigned char *)s + i, n - i);
        serve_buf_put(&b, k ? s + i : "\xEF\xBF\xBD", k ? k : 3);
    }
    json_t *j = b.p ? json_stringn(b.p, b.len) : json_string("");
    serve_buf_free(&b);
    return j;
}

char *serve_error_body(const struct serve_err *e)
{
    json_t *o = json_pack("{s:{s:o,s:s,s:o,s:o}}", "error", "message", jtext(e->msg, strlen(e->msg)), "type",
                          e->type ? e->type : "invalid_request_error", "param",
                          e->param[0] ? json_string(e->param) : json_null(), "code",
                          e->code ? json_string(e->code) : json_null());
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* The path of v in x (as messages[2].content) into buf[at..cap); 0 when found, -1 (buf[at] cleared) when not. */
static int path_of(json_t *x, const json_t *v, char *buf, size_t cap, size_t at)
{
    const char *key;
    json_t *y;
    size_t i;
    if (x == v)
        return 0;
    if (json_is_object(x))
        json_object_foreach(x, key, y) {
            snprintf(buf + at, cap - at, "%s%s", at ? "." : "", key);
            if (path_of(y, v, buf, cap, strlen(buf)) == 0)
                return 0;
        }
    if (json_is_array(x))
        json_array_foreach(x, i, y) {
            snprintf(buf + at, cap - at, "[%zu]", i);
            if (path_of(y, v, buf, cap, strlen(buf)) == 0)
                return 0;
        }
    buf[at] = 0;
    return -1;
}

/* After a body's checks passed: -1 with e naming the first number beyond what loom reads that sits where no
 * check looked (a field loom does not read, a tool's schema, a chat_template_kwargs value), else 0. */
static int big_unread(json_t *o, struct serve_err *e)
{
    char path[96];
    const char *text;
    const json_t *v = serve_jnum_first_big(&text);
    if (!v)
        return 0;
    if (path_of(o, v, path, sizeof path, 0) != 0)
        path[0] = 0;
    return serve_fail(e, 400, path, "invalid_value", "%s: expected a number loom can hold (an integer within 64 "
                      "bits, a real within a double's range), found %s", path, text), -1;
}

/* ---- typed fields ---- */

/* The tail of a message refusing a number that a float holds only as a subnormal or 0: FLT_MIN as %.9g prints it. */
#define SERVE_LEAST_NORMAL " (its least normal number is 1.17549435e-38)"

/* What a JSON value is, for messages: "a string", "an array", or the number itself as the body writes it. */
static const char *jfound(const json_t *v, char *buf, size_t cap)
{
    if (serve_jnum_text(v, buf, cap))
        return buf;
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    case JSON_INTEGER: snprintf(buf, cap, "%lld", (long long)json_integer_value(v)); return buf;
    default: break;
    }
    int n = snprintf(buf, cap, "%.17g", json_real_value(v)); /* as a real: 5.0 shown as such, not as 5 */
    if (n > 0 && (size_t)n + 2 < cap && !strpbrk(buf, ".e"))
        memcpy(buf + n, ".0", 3);
    return buf;
}

/* Field `key` of o as a number in [lo, hi] ((lo, hi] when lo_open) into *out (float), checked as the float stored
 * (loom_cli_real_as_float: as run's options); note, when not "", follows the range in a message. Absent or null:
 * untouched. 0 or -1 (e filled). */
static int get_float_in(json_t *o, const char *key, double lo, int lo_open, double hi, const char *note, float *out,
                        struct serve_err *e)
{
    json_t *v = json_object_get(o, key);
    char buf[SERVE_JNUM_CAP];
    if (!v || json_is_null(v))
        return 0;
    const char *text = jfound(v, buf, sizeof buf);
    int nonzero = serve_jnum_written_nonzero(v);
    enum loom_cli_real r = !json_is_number(v) ? LOOM_CLI_REAL_RANGE
                           : loom_cli_real_as_float(json_number_value(v), nonzero, lo, lo_open, hi, out);
    if (r == LOOM_CLI_REAL_OK)
        return 0;
    serve_fail(e, 400, key, json_is_number(v) ? "invalid_value" : "invalid_type",
               "%s: expected a number in %c%g, %g]%s, found %s%s%s", key, lo_open ? '(' : '[', lo, hi, note, text,
               r == LOOM_CLI_REAL_TINY ? ", which a float holds only as a subnormal or 0" : "",
               r == LOOM_CLI_REAL_TINY ? SERVE_LEAST_NORMAL : "");
    return -1;
}

static int get_float(json_t *o, const char *key, double lo, double hi, float *out, struct serve_err *e)
{
    return get_float_in(o, key, lo, 0, hi, "", out, e);
}

/* v at path as an integer in [lo, hi] into *out, what it is named in the message ("an integer", "an integer token
 * id"). A JSON integer only: a number written with a fraction or an exponent (1.5, 5.0, 1e3) is refused, never
 * truncated, as OpenAI does. 0, or -1 with e filled (invalid_value for another number, invalid_type otherwise). */
static int want_int(json_t *v, const char *path, const char *what, long long lo, long long hi, long long *out,
                    struct serve_err *e)
{
    char buf[SERVE_JNUM_CAP];
    if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi) {
        *out = (long long)json_integer_value(v);
        return 0;
    }
    int whole = json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && !serve_jnum_big(v);
    return serve_fail(e, 400, path, json_is_number(v) ? "invalid_value" : "invalid_type",
                      "%s: expected %s in [%lld, %lld], found %s%s", path, what, lo, hi, jfound(v, buf, sizeof buf),
                      whole ? " (an integer is written without a fraction or an exponent)" : ""), -1;
}

/* As get_float, for an integer in [lo, hi] (want_int). */
static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, struct serve_err *e)
{
    json_t *v = json_object_get(o, key);
    return !v || json_is_null(v) ? 0 : want_int(v, key, "an integer", lo, hi, out, e);
}

/* As get_float, for a boolean. */
static int get_bool(json_t *o, const char *key, const char *name, int *out, struct serve_err *e)
{
    json_t *v = json_object_get(o, key);
    char buf[SERVE_JNUM_CAP];
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v)) {
        serve_fail(e, 400, name, "invalid_type", "%s: expected a boolean, found %s", name,
                   jfound(v, buf, sizeof buf));
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* Field `key` as an object (absent or null: *out NULL). */
static int get_object(json_t *o, const char *key, json_t **out, struct serve_err *e)
{
    json_t *v = json_object_get(o, key);
    char buf[SERVE_JNUM_CAP];
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v)) {
        serve_fail(e, 400, key, "invalid_type", "%s: expected an object, found %s", key, jfound(v, buf, sizeof buf));
        return -1;
    }
    *out = v;
    return 0;
}

/* Field `key` of obj, required, of type want (JSON_STRING or JSON_OBJECT), obj being at path `at` ("messages[2]";
 * "" for the body): 0, or -1 with e naming the path (missing_required_parameter when absent, invalid_type when of
 * another type, null included). */
static int need_field(json_t *obj, const char *at, const char *key, json_type want, struct serve_err *e)
{
    json_t *v = json_object_get(obj, key);
    char path[96], buf[SERVE_JNUM_CAP];
    if (v && json_typeof(v) == want)
        return 0;
    snprintf(path, sizeof path, "%s%s%s", at, *at ? "." : "", key);
    return serve_fail(e, 400, path, v ? "invalid_type" : "missing_required_parameter", "%s: expected %s, found %s",
                      path, want == JSON_STRING ? "a string" : "an object", v ? jfound(v, buf, sizeof buf) : "nothing"),
           -1;
}

/* ---- sampling, stop strings and the fields loom does not implement ---- */

/* A field that must be 1 if given (n, best_of): a number of another value is unsupported_value, another type
 * invalid_type. */
static int only_one(json_t *o, const char *key, const char *what, struct serve_err *e)
{
    long long n = 1;
    char buf[SERVE_JNUM_CAP];
    json_t *v = json_object_get(o, key);
    if (get_int(o, key, 1, 1, &n, e) == 0)
        return 0;
    if (!json_is_integer(v))
        return -1; /* get_int's: not an integer */
    return serve_fail(e, 400, key, "unsupported_value", "%s: only 1 %s is implemented, found %s", key, what,
                      jfound(v, buf, sizeof buf)), -1;
}

/* response_format: absent, null or {"type": "text"} (no JSON mode or schema yet). */
static int check_response_format(json_t *o, struct serve_err *e)
{
    json_t *v = json_object_get(o, "response_format"), *t = json_object_get(v, "type");
    char buf[SERVE_JNUM_CAP];
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return serve_fail(e, 400, "response_format", "invalid_type", "response_format: expected an object, found %s",
                          jfound(v, buf, sizeof buf)), -1;
    if (!json_is_string(t))
        return serve_fail(e, 400, "response_format.type", t ? "invalid_type" : "missing_required_parameter",
                          "response_format.type: expected a string, found %s", t ? jfound(t, buf, sizeof buf)
                                                                                 : "nothing"), -1;
    if (strcmp(json_string_value(t), "text"))
        return serve_fail(e, 400, "response_format", "unsupported_value",
                          "response_format: only {\"type\": \"text\"} is implemented (no JSON mode or schema yet), "
                          "found type \"%.40s\"", json_string_value(t)), -1;
    return 0;
}

/* llama.cpp server's own request fields for what loom does not implement (n_predict, repeat_penalty and
 * repeat_last_n map exactly and are taken: parse_sampling). Each is taken at its neutral value, the one that turns
 * it off (what loom does), and refused at any other, naming the field and the OpenAI field to use where there is
 * one; a field that only tunes another (T: dry_base tunes dry_multiplier) changes nothing while that one is off, as
 * in llama.cpp, and is taken. */
static const struct llama_field {
    const char *name;
    char kind;      /* 'n': a number, neutral; 'b': a boolean, neutral (0 or 1); 's': a string, "" neutral; 'x': only
                     * absent or null; 'T': tunes another */
    double neutral;
    const char *what, *instead; /* instead: the OpenAI field, or NULL */
} LLAMA_FIELDS[] = {
    {"n_probs", 'n', 0, "the top-N probabilities of each token", "logprobs (chat: with top_logprobs)"},
    {"post_sampling_probs", 'b', 0, "probabilities after the samplers", "logprobs"},
    {"n_cmpl", 'n', 1, "several completions", "n (1 only)"},
    {"json_schema", 'x', 0, "schema-constrained output", "response_format (only {\"type\": \"text\"} so far)"},
    {"dynatemp_range", 'n', 0, "dynamic temperature", "temperature"},
    {"dry_multiplier", 'n', 0, "the DRY repetition penalty", "frequency_penalty or presence_penalty"},
    {"t_max_predict_ms", 'n', 0, "a time limit on generation", "max_tokens (loom serve --timeout for time)"},
    {"typical_p", 'n', 1, "locally typical sampling", NULL},
    {"mirostat", 'n', 0, "Mirostat sampling", NULL},
    {"xtc_probability", 'n', 0, "XTC sampling", NULL},
    {"min_keep", 'n', 0, "a least number of candidates kept by the samplers", NULL},
    {"n_keep", 'n', 0, "prompt tokens kept when the context shifts (loom never shifts it)", NULL},
    {"n_indent", 'n', 0, "a least indentation", NULL},
    {"n_cache_reuse", 'n', 0, "cache reuse by shifting", NULL},
    {"id_slot", 'n', -1, "a chosen slot", NULL},
    {"cache_prompt", 'b', 1, "turning the prompt cache off", NULL},
    {"ignore_eos", 'b', 0, "generating past the end-of-generation token", NULL},
    {"return_tokens", 'b', 0, "the generated token ids", NULL},
    {"timings_per_token", 'b', 0, "timings in each chunk", NULL},
    {"return_progress", 'b', 0, "prompt progress in a stream", NULL},
    {"grammar", 's', 0, "grammar-constrained sampling", NULL},
    {"samplers", 'x', 0, "a sampler order", NULL},
    {"response_fields", 'x', 0, "a choice of response fields", NULL},
    {"lora", 'x', 0, "LoRA adapters", NULL},
    {"sse_ping_interval", 'x', 0, "stream pings", NULL},
    {"dynatemp_exponent", 'T', 0, NULL, NULL},
    {"mirostat_tau", 'T', 0, NULL, NULL},
    {"mirostat_eta", 'T', 0, NULL, NULL},
    {"dry_base", 'T', 0, NULL, NULL},
    {"dry_allowed_length", 'T', 0, NULL, NULL},
    {"dry_penalty_last_n", 'T', 0, NULL, NULL},
    {"dry_sequence_breakers", 'T', 0, NULL, NULL},
    {"xtc_threshold", 'T', 0, NULL, NULL},
};

/* 1 when v is field f's neutral value. */
static int llama_neutral(const struct llama_field *f, const json_t *v)
{
    switch (f->kind) {
    case 'n': return json_is_number(v) && !serve_jnum_big(v) && json_number_value(v) == f->neutral;
    case 'b': return json_is_boolean(v) && json_is_true(v) == (f->neutral != 0);
    case 's': return json_is_string(v) && json_string_length(v) == 0;
    case 'T': return 1;
    default: return 0;
    }
}

static int refuse_llama_fields(json_t *o, struct serve_err *e)
{
    char buf[SERVE_JNUM_CAP], neutral[48];
    for (size_t i = 0; i < sizeof LLAMA_FIELDS / sizeof LLAMA_FIELDS[0]; i++) {
        const struct llama_field *f = &LLAMA_FIELDS[i];
        json_t *v = json_object_get(o, f->name);
        if (!v || json_is_null(v) || llama_neutral(f, v))
            continue;
        if (f->kind == 'n')
            snprintf(neutral, sizeof neutral, "%g (off) or nothing", f->neutral);
        else
            snprintf(neutral, sizeof neutral, "%s", f->kind == 'b' ? (f->neutral ? "true or nothing" : "false or "
                     "nothing") : f->kind == 's' ? "an empty string or nothing" : "nothing");
        return serve_fail(e, 400, f->name, "unsupported_parameter", "%s: llama.cpp's field for %s, which loom does not "
                          "implement: expected %s, found %s%s%s%s", f->name, f->what, neutral,
                          jfound(v, buf, sizeof buf), f->instead ? "; use the OpenAI field " : "",
                          f->instead ? f->instead : "", f->instead ? " instead" : ""), -1;
    }
    return 0;
}

/* Fields that would change the answer's meaning and are not implemented: refused rather than ignored. */
static int refuse_unimplemented(json_t *o, enum serve_kind kind, struct serve_err *e)
{
    int flag = 0;
    json_t *v;
    char buf[SERVE_JNUM_CAP];
    if (refuse_llama_fields(o, e) != 0)
        return -1;
    if (only_one(o, "n", "choice per request", e) != 0)
        return -1;
    if (check_response_format(o, e) != 0)
        return -1;
    v = json_object_get(o, "tool_choice");
    if (v && !json_is_null(v) && !json_is_string(v) && !json_is_object(v))
        return serve_fail(e, 400, "tool_choice", "invalid_type",
                          "tool_choice: expected a string or an object, found %s", jfound(v, buf, sizeof buf)), -1;
    if (v && !json_is_null(v) && !(json_is_string(v) && (!strcmp(json_string_value(v), "none") ||
                                                        !strcmp(json_string_value(v), "auto"))))
        return serve_fail(e, 400, "tool_choice", "unsupported_value",
                          "tool_choice: expected \"auto\" or \"none\" (forcing a call, \"required\" or a named "
                          "function, is not implemented), found %s%.40s%s", json_is_string(v) ? "\"" : "",
                          json_is_string(v) ? json_string_value(v) : jfound(v, buf, sizeof buf),
                          json_is_string(v) ? "\"" : ""), -1;
    if ((v = json_object_get(o, "functions")) && !json_is_null(v))
        return serve_fail(e, 400, "functions", "unsupported_parameter", "functions: not implemented"), -1;
    if (kind == SERVE_COMPLETION) {
        if (get_bool(o, "echo", "echo", &flag, e) != 0 || flag)
            return flag ? serve_fail(e, 400, "echo", "unsupported_parameter", "echo: not implemented yet"), -1 : -1;
        if ((v = json_object_get(o, "suffix")) && !json_is_null(v))
            return serve_fail(e, 400, "suffix", "unsupported_parameter", "suffix: not implemented"), -1;
        if (only_one(o, "best_of", "candidate", e) != 0)
            return -1;
    }
    return 0;
}

/* A logit_bias key as a token id: decimal digits only, no sign, space or leading zero ("0" itself excepted), below
 * n_rows; -1 when it is not one. */
static long bias_key(const char *key, int n_rows)
{
    size_t n = strlen(key);
    if (n == 0 || n > 10 || strspn(key, "0123456789") != n || (key[0] == '0' && n > 1))
        return -1;
    long id = strtol(key, NULL, 10);
    return id < n_rows ? id : -1;
}

/* logit_bias: {"TOKEN_ID": BIAS, ...}, ids in [0, n_rows), biases numbers in [-100, 100]. */
static int get_bias(json_t *o, int n_rows, loom_logit_bias *bias, int *n_bias, struct serve_err *e)
{
    json_t *lb, *v;
    const char *key;
    char buf[SERVE_JNUM_CAP];
    if (get_object(o, "logit_bias", &lb, e) != 0)
        return -1;
    *n_bias = 0;
    if (!lb)
        return 0;
    if (json_object_size(lb) > SERVE_MAX_BIAS)
        return serve_fail(e, 400, "logit_bias", "invalid_value", "logit_bias: expected at most %d entries, found %zu",
                          SERVE_MAX_BIAS, json_object_size(lb)), -1;
    json_object_foreach(lb, key, v) {
        long id = bias_key(key, n_rows);
        if (id < 0)
            return serve_fail(e, 400, "logit_bias", "invalid_value",
                              "logit_bias: expected token ids in [0, %d] written in decimal digits as keys, found "
                              "\"%.40s\"", n_rows - 1, key), -1;
        const char *text = jfound(v, buf, sizeof buf);
        float d = 0;
        int nonzero = serve_jnum_written_nonzero(v);
        enum loom_cli_real r = !json_is_number(v) ? LOOM_CLI_REAL_RANGE
                               : loom_cli_real_as_float(json_number_value(v), nonzero, -100, 0, 100, &d);
        if (r != LOOM_CLI_REAL_OK)
            return serve_fail(e, 400, "logit_bias", json_is_number(v) ? "invalid_value" : "invalid_type",
                              "logit_bias: expected a number in [-100, 100] for token %ld, found %s%s%s", id, text,
                              r == LOOM_CLI_REAL_TINY ? ", which a float holds only as a subnormal or 0" : "",
                              r == LOOM_CLI_REAL_TINY ? SERVE_LEAST_NORMAL : ""), -1;
        bias[(*n_bias)++] = (loom_logit_bias){.id = (int32_t)id, .bias = d};
    }
    return 0;
}

/* stop: a string or an array of at most SERVE_MAX_STOPS non-empty strings. */
static int get_stops(json_t *o, const char **stops, int *n_stops, struct serve_err *e)
{
    json_t *v = json_object_get(o, "stop"), *s;
    char buf[SERVE_JNUM_CAP], at[32];
    size_t i;
    *n_stops = 0;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v))
        stops[(*n_stops)++] = json_string_value(v);
    else if (json_is_array(v) && json_array_size(v) <= SERVE_MAX_STOPS) {
        json_array_foreach(v, i, s) {
            snprintf(at, sizeof at, "stop[%zu]", i);
            if (!json_is_string(s))
                return serve_fail(e, 400, at, "invalid_type", "%s: expected a string, found %s", at,
                                  jfound(s, buf, sizeof buf)), -1;
            stops[(*n_stops)++] = json_string_value(s);
        }
    } else if (json_is_array(v))
        return serve_fail(e, 400, "stop", "invalid_value", "stop: expected at most %d strings, found %zu",
                          SERVE_MAX_STOPS, json_array_size(v)), -1;
    else
        return serve_fail(e, 400, "stop", "invalid_type", "stop: expected a string or an array of strings, found %s",
                          jfound(v, buf, sizeof buf)), -1;
    for (int k = 0; k < *n_stops; k++) {
        if (json_is_array(v))
            snprintf(at, sizeof at, "stop[%d]", k);
        else
            snprintf(at, sizeof at, "stop");
        if (!stops[k][0] || strlen(stops[k]) > SERVE_STOP_MAX_LEN)
            return serve_fail(e, 400, at, "invalid_value", "%s: expected a string of 1 to %d bytes, found %zu bytes",
                              at, SERVE_STOP_MAX_LEN, strlen(stops[k])), -1;
    }
    return 0;
}

/* logprobs: chat's boolean with top_logprobs (0..20), or /v1/completions' count of alternatives (0..20). */
static int parse_logprobs(json_t *o, struct serve_req *r, struct serve_err *e)
{
    long long top = 0;
    int on = 0;
    r->logprobs = -1;
    if (r->kind == SERVE_COMPLETION) {
        json_t *v = json_object_get(o, "logprobs");
        if (get_int(o, "logprobs", 0, LOOM_TOP_LOGPROBS_MAX, &top, e) != 0)
            return -1;
        r->logprobs = v && !json_is_null(v) ? (int)top : -1;
        return 0;
    }
    if (get_bool(o, "logprobs", "logprobs", &on, e) != 0 ||
        get_int(o, "top_logprobs", 0, LOOM_TOP_LOGPROBS_MAX, &top, e) != 0)
        return -1;
    if (top > 0 && !on)
        return serve_fail(e, 400, "top_logprobs", "invalid_value", "top_logprobs: expected logprobs true with it, "
                          "found logprobs %s", json_object_get(o, "logprobs") ? "false" : "absent"), -1;
    r->logprobs = on ? (int)top : -1;
    return 0;
}

/* repeat_penalty (llama.cpp's, loom run's --repeat-penalty): a divisor in (0, 100]; 1 is off. */
static int get_repeat_penalty(json_t *o, float *out, struct serve_err *e)
{
    return get_float_in(o, "repeat_penalty", 0, 1, 100, " (a divisor; 1 is off)", out, e);
}

/* llama.cpp's n_predict into *v: -1 (no limit) and -2 (until the context is filled) are loom's no limit, which
 * ends at the slot's context; 0, the prompt only, is not implemented. 0, or -1 with e filled. */
static int get_n_predict(json_t *x, long long *v, struct serve_err *e)
{
    char buf[SERVE_JNUM_CAP];
    long long n = json_is_integer(x) ? (long long)json_integer_value(x) : 0;
    if (json_is_integer(x) && n >= -2 && n <= 1 << 24 && n != 0) {
        *v = n < 0 ? 0 : n;
        return 0;
    }
    int zero = json_is_integer(x) && n == 0;
    int whole = json_is_real(x) && json_real_value(x) == floor(json_real_value(x)) && !serve_jnum_big(x);
    return serve_fail(e, 400, "n_predict", zero ? "unsupported_value" : json_is_number(x) ? "invalid_value"
                      : "invalid_type", "n_predict: expected -1 (no limit), -2 (until the context is filled, the same "
                      "in loom) or an integer in [1, %d], found %s%s", 1 << 24, jfound(x, buf, sizeof buf),
                      zero ? " (evaluating the prompt only is not implemented)" : whole ? " (an integer is written "
                      "without a fraction or an exponent)" : ""), -1;
}

/* The answer's length limit into *out (0: none): max_completion_tokens, max_tokens (its older name) or llama.cpp's
 * n_predict (get_n_predict); given twice, the values agree. */
static int get_max_tokens(json_t *o, long long *out, struct serve_err *e)
{
    static const char *const names[] = {"max_completion_tokens", "max_tokens", "n_predict"};
    long long v[3] = {0, 0, 0};
    const char *given = NULL;
    for (int i = 0; i < 3; i++) {
        json_t *x = json_object_get(o, names[i]);
        if (!x || json_is_null(x))
            continue;
        if (i == 2 ? get_n_predict(x, &v[2], e) != 0 : get_int(o, names[i], 1, 1 << 24, &v[i], e) != 0)
            return -1;
        if (given && v[i] != *out)
            return serve_fail(e, 400, names[i], "invalid_value", "%s: expected the value of %s (another name for the "
                              "same limit) when both are given, found %s %lld and %s %lld", names[i], given, given,
                              *out, names[i], (long long)json_integer_value(x)), -1;
        if (!given)
            given = names[i], *out = v[i];
    }
    return 0;
}

/* A seed for requests that give none: different for every request. */
static uint64_t fresh_seed(void)
{
    static _Atomic uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ (atomic_fetch_add(&counter, 1) << 40);
}

/* The sampling fields, max_tokens, stop and stream into r (sampler and stop matcher made). */
static int parse_sampling(const struct serve_ctx *c, json_t *o, struct serve_req *r, struct serve_err *e)
{
    /* llama.cpp server's defaults, run's and chat's; the penalties look at the last 64 tokens, the prompt's included */
    loom_sampler_params sp = LOOM_CLI_SAMPLER_PARAMS;
    long long top_k = sp.top_k, seed = -1, max_tokens = 0, last_n = sp.repeat_last_n;
    static loom_logit_bias bias_none[1];
    loom_logit_bias *bias = calloc(SERVE_MAX_BIAS, sizeof *bias);
    const char *stops[SERVE_MAX_STOPS];
    int n_stops = 0, rc = -1;
    json_t *so;
    if (!bias)
        return serve_fail(e, 500, NULL, NULL, "out of memory"), -1;
    if (get_float(o, "temperature", 0, 2, &sp.temp, e) || get_float(o, "top_p", 0, 1, &sp.top_p, e) ||
        get_int(o, "top_k", 0, 1 << 24, &top_k, e) || get_float(o, "min_p", 0, 1, &sp.min_p, e) ||
        get_int(o, "seed", -1, INT64_MAX, &seed, e) ||
        get_float(o, "presence_penalty", -2, 2, &sp.presence_penalty, e) ||
        get_float(o, "frequency_penalty", -2, 2, &sp.frequency_penalty, e) ||
        get_repeat_penalty(o, &sp.repeat_penalty, e) || get_int(o, "repeat_last_n", -1, 1 << 20, &last_n, e) ||
        get_max_tokens(o, &max_tokens, e) ||
        get_bias(o, loom_model_n_logits(c->m), bias, &sp.n_bias, e) || get_stops(o, stops, &n_stops, e) ||
        get_bool(o, "stream", "stream", &r->stream, e) || get_object(o, "stream_options", &so, e) ||
        (so && get_bool(so, "include_usage", "stream_options.include_usage", &r->include_usage, e)) ||
        get_bool(o, "return_prompt_tokens", "return_prompt_tokens", &r->return_prompt_tokens, e))
        goto out;
    sp.top_k = (int)top_k;
    sp.repeat_last_n = last_n >= 0 ? (int)last_n : c->n_ctx < 1 << 20 ? c->n_ctx : 1 << 20; /* -1: the context */
    sp.seed = seed >= 0 ? (uint64_t)seed : fresh_seed(); /* -1 or none: llama.cpp's random seed */
    sp.bias = sp.n_bias ? bias : bias_none;
    r->max_tokens = (int)max_tokens;
    loom_error err = {0};
    r->smp = loom_sampler_new(&sp, loom_model_n_logits(c->m), loom_tokenizer_sampleable(c->tok), &err);
    if (!r->smp) {
        serve_fail(e, err.code == LOOM_E_NOMEM ? 500 : 400, NULL, "invalid_value", "%s", err.msg);
        goto out;
    }
    r->stop = loom_stop_new(stops, n_stops, &err);
    if (!r->stop) {
        serve_fail(e, err.code == LOOM_E_NOMEM ? 500 : 400, "stop", "invalid_value", "stop: %s", err.msg);
        goto out;
    }
    rc = 0;
out:
    free(bias);
    return rc;
}

/* ---- chat messages ---- */

/* Field `key` of obj (at path `at`), optional: absent, null or a string (*out its value, else NULL). */
static int opt_string(json_t *obj, const char *at, const char *key, const char **out, struct serve_err *e)
{
    json_t *v = json_object_get(obj, key);
    *out = json_string_value(v);
    return !v || json_is_null(v) ? 0 : need_field(obj, at, key, JSON_STRING, e);
}

/* One part of a message's content array, messages[i].content[j]: {"type": "text", "text": STRING}. */
static int message_part(json_t *part, size_t i, size_t j, struct serve_err *e)
{
    char at[80], buf[SERVE_JNUM_CAP];
    int n = snprintf(at, sizeof at, "messages[%zu].content[%zu]", i, j);
    if (!json_is_object(part))
        return serve_fail(e, 400, at, "invalid_type", "%s: expected {\"type\": \"text\", \"text\": STRING}, found %s",
                          at, jfound(part, buf, sizeof buf)), -1;
    if (need_field(part, at, "type", JSON_STRING, e) != 0)
        return -1;
    const char *type = json_string_value(json_object_get(part, "type"));
    if (strcmp(type, "text")) {
        snprintf(at + n, sizeof at - (size_t)n, ".type");
        return serve_fail(e, 400, at, "unsupported_value", "%s: expected \"text\" (images and other parts are not "
                          "supported), found \"%.40s\"", at, type), -1;
    }
    return need_field(part, at, "text", JSON_STRING, e);
}

/* The text of messages[i].content: a string, null, or an array of {"type": "text", "text": ...} parts (joined).
 * *owned is set when the text was built (caller frees). */
static int message_content(json_t *v, size_t i, const char **out, char **owned, struct serve_err *e)
{
    char buf[SERVE_JNUM_CAP], at[48];
    json_t *part;
    size_t j;
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        *out = json_string_value(v);
        return 0;
    }
    snprintf(at, sizeof at, "messages[%zu].content", i);
    if (!json_is_array(v))
        return serve_fail(e, 400, at, "invalid_type", "%s: expected a string or an array of text parts, found %s", at,
                          jfound(v, buf, sizeof buf)), -1;
    struct serve_buf b = {0};
    serve_buf_put(&b, "", 0);
    json_array_foreach(v, j, part) {
        json_t *text = json_object_get(part, "text");
        if (message_part(part, i, j, e) != 0) {
            serve_buf_free(&b);
            return -1;
        }
        if (serve_buf_put(&b, json_string_value(text), json_string_length(text)) != LOOM_OK) {
            serve_buf_free(&b);
            return serve_fail(e, 500, NULL, NULL, "out of memory"), -1;
        }
    }
    *out = *owned = b.p;
    return 0;
}

/* One of an assistant message's tool calls, messages[i].tool_calls[j]: {"function": {"name": STRING, "arguments":
 * STRING, OBJECT or null}}; *name and *args set. */
static int message_tool_call(json_t *call, size_t i, size_t j, json_t **name, json_t **args, struct serve_err *e)
{
    char at[96], buf[SERVE_JNUM_CAP];
    int n = snprintf(at, sizeof at, "messages[%zu].tool_calls[%zu]", i, j);
    if (!json_is_object(call))
        return serve_fail(e, 400, at, "invalid_type", "%s: expected {\"function\": {\"name\": STRING, \"arguments\": "
                          "STRING or OBJECT}}, found %s", at, jfound(call, buf, sizeof buf)), -1;
    if (need_field(call, at, "function", JSON_OBJECT, e) != 0)
        return -1;
    json_t *f = json_object_get(call, "function");
    snprintf(at + n, sizeof at - (size_t)n, ".function");
    if (need_field(f, at, "name", JSON_STRING, e) != 0)
        return -1;
    *name = json_object_get(f, "name");
    *args = json_object_get(f, "arguments");
    if (!*args || json_is_string(*args) || json_is_object(*args) || json_is_null(*args))
        return 0;
    snprintf(at + strlen(at), sizeof at - strlen(at), ".arguments");
    return serve_fail(e, 400, at, "invalid_type", "%s: expected a string or an object, found %s", at,
                      jfound(*args, buf, sizeof buf)), -1;
}

/* An assistant message's tool_calls (messages[i].tool_calls): an array of calls (message_tool_call). */
static int message_tool_calls(json_t *v, size_t i, loom_chat_message *msg, char ***owned, size_t *n_owned,
                              struct serve_err *e)
{
    char buf[SERVE_JNUM_CAP], at[48];
    json_t *call, *name, *args;
    size_t j;
    if (!v || json_is_null(v))
        return 0;
    snprintf(at, sizeof at, "messages[%zu].tool_calls", i);
    if (!json_is_array(v))
        return serve_fail(e, 400, at, "invalid_type", "%s: expected an array, found %s", at,
                          jfound(v, buf, sizeof buf)), -1;
    loom_chat_tool_call *calls = calloc(json_array_size(v) + 1, sizeof *calls);
    char **own = realloc(*owned, (*n_owned + json_array_size(v) + 1) * sizeof *own);
    if (own)
        *owned = own;
    if (!calls || !own) {
        free(calls);
        return serve_fail(e, 500, NULL, NULL, "out of memory"), -1;
    }
    own[(*n_owned)++] = (char *)calls;
    json_array_foreach(v, j, call) {
        if (message_tool_call(call, i, j, &name, &args, e) != 0)
            return -1;
        calls[j].name = json_string_value(name);
        if (json_is_object(args)) {
            char *s = json_dumps(args, JSON_COMPACT);
            if (!s)
                return serve_fail(e, 500, NULL, NULL, "out of memory"), -1;
            own[(*n_owned)++] = s;
            calls[j].arguments = s;
        } else
            calls[j].arguments = json_string_value(args);
    }
    msg->tool_calls = calls;
    msg->n_tool_calls = json_array_size(v);
    return 0;
}

/* messages[i]'s role: system, developer (OpenAI's name for the system prompt), user, assistant or tool. */
static int message_role(json_t *m, const char *at, loom_chat_message *msg, struct serve_err *e)
{
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
    if (need_field(m, at, "role", JSON_STRING, e) != 0)
        return -1;
    const char *role = json_string_value(json_object_get(m, "role"));
    for (size_t k = 0; k < 5; k++)
        if (!strcmp(role, roles[k]))
            msg->role = k == 4 ? "system" : roles[k];
    if (msg->role)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "%s.role", at);
    return serve_fail(e, 400, path, "invalid_value", "%s: expected \"system\", \"developer\", \"user\", \"assistant\" "
                      "or \"tool\", found \"%.40s\"", path, role), -1;
}

/* A message's content left out or null where the message needs it (every message but an assistant's with
 * tool_calls): -1 with e naming its path. */
static int no_content(const char *path, json_t *content, struct serve_err *e)
{
    return serve_fail(e, 400, path, content ? "invalid_type" : "missing_required_parameter",
                      "%s: expected a string or an array of text parts (only an assistant message with tool_calls "
                      "may leave it out), found %s", path, content ? "null" : "nothing"), -1;
}

static int parse_message(json_t *m, size_t i, loom_chat_message *msg, char ***owned, size_t *n_owned,
                         struct serve_err *e)
{
    char buf[SERVE_JNUM_CAP], at[40], path[64];
    snprintf(at, sizeof at, "messages[%zu]", i);
    if (!json_is_object(m))
        return serve_fail(e, 400, at, "invalid_type", "%s: expected an object, found %s", at,
                          jfound(m, buf, sizeof buf)), -1;
    if (message_role(m, at, msg, e) != 0)
        return -1;
    char *own = NULL;
    json_t *content = json_object_get(m, "content");
    if (message_content(content, i, &msg->content, &own, e) != 0)
        return -1;
    snprintf(path, sizeof path, "%s.content", at);
    if (!msg->content && strcmp(msg->role, "assistant")) /* OpenAI: only an assistant's (tool calls) may be null */
        return no_content(path, content, e);
    if (own) {
        char **v = realloc(*owned, (*n_owned + 1) * sizeof *v);
        if (!v) {
            free(own);
            return serve_fail(e, 500, NULL, NULL, "out of memory"), -1;
        }
        *owned = v;
        v[(*n_owned)++] = own;
    }
    /* name: a speaker or tool name, which the template may print */
    if (opt_string(m, at, "reasoning_content", &msg->reasoning_content, e) != 0 ||
        opt_string(m, at, "name", &msg->name, e) != 0)
        return -1;
    if (message_tool_calls(json_object_get(m, "tool_calls"), i, msg, owned, n_owned, e) != 0)
        return -1;
    return msg->content || msg->n_tool_calls ? 0 : no_content(path, content, e);
}

/* tools[i]: {"type": "function" (or left out), "function": {"name": STRING, "parameters": SCHEMA (optional)}}. */
static int check_tool(json_t *t, size_t i, struct serve_err *e)
{
    char at[64], buf[SERVE_JNUM_CAP];
    int n = snprintf(at, sizeof at, "tools[%zu]", i);
    json_t *type = json_object_get(t, "type"), *fn = json_object_get(t, "function");
    if (!json_is_object(t))
        return serve_fail(e, 400, at, "invalid_type", "%s: expected {\"type\": \"function\", \"function\": {\"name\": "
                          "STRING, \"parameters\": SCHEMA}}, found %s", at, jfound(t, buf, sizeof buf)), -1;
    if (type && need_field(t, at, "type", JSON_STRING, e) != 0)
        return -1;
    if (type && strcmp(json_string_value(type), "function"))
        return serve_fail(e, 400, strcat(at, ".type"), "unsupported_value", "%s: expected \"function\" (the only "
                          "kind of tool loom calls), found \"%.40s\"", at, json_string_value(type)), -1;
    if (need_field(t, at, "function", JSON_OBJECT, e) != 0)
        return -1;
    snprintf(at + n, sizeof at - (size_t)n, ".function");
    json_t *name = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
    if (need_field(fn, at, "name", JSON_STRING, e) != 0)
        return -1;
    if (!json_string_length(name))
        return serve_fail(e, 400, strcat(at, ".name"), "invalid_value", "%s: expected a function name, found an "
                          "empty string", at), -1;
    return params && !json_is_object(params) ? need_field(fn, at, "parameters", JSON_OBJECT, e) : 0;
}

/* tools (OpenAI's [{"type": "function", "function": {"name": STRING, ...}}]), tool_choice and
 * parallel_tool_calls: *json the tools' text for the template (fresh, caller frees; NULL: none, or tool_choice
 * "none"), and r->tools the parser of the answer's calls. */
static int parse_tools(const struct serve_ctx *c, json_t *o, struct serve_req *r, char **json, struct serve_err *e)
{
    json_t *v = json_object_get(o, "tools"), *t, *choice = json_object_get(o, "tool_choice");
    char buf[SERVE_JNUM_CAP];
    size_t i;
    *json = NULL;
    r->parallel_tool_calls = 1;
    if (get_bool(o, "parallel_tool_calls", "parallel_tool_calls", &r->parallel_tool_calls, e) != 0)
        return -1;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return serve_fail(e, 400, "tools", "invalid_type", "tools: expected an array of tools, found %s",
                          jfound(v, buf, sizeof buf)), -1;
    json_array_foreach(v, i, t)
        if (check_tool(t, i, e) != 0)
            return -1;
    if (json_array_size(v) == 0 || (json_is_string(choice) && !strcmp(json_string_value(choice), "none")))
        return 0; /* no tools offered: the model is not told of any, and its answer is all content */
    loom_error err = {0};
    if (!(*json = json_dumps(v, JSON_COMPACT)) || !(r->tools = loom_tool_parser_new(c->tmpl, *json, &err)))
        return serve_fail(e, *json && err.code != LOOM_E_NOMEM ? 400 : 500, "tools", "invalid_value", "tools: %s",
                          *json ? err.msg : "out of memory"), -1;
    return 0;
}

/* 1 when ids[n] ends with the tokens of text (special tokens recognised): how a rendered prompt says where the
 * answer starts, whichever template rendered it (Qwen3.5's opens "<think>\n" unless thinking is off; Qwen3's and
 * ChatML ones leave <think> to the model). */
static int prompt_ends_with(const loom_tokenizer *tok, const int32_t *ids, int n, const char *text)
{
    int32_t t[8];
    int k = loom_tokenizer_encode(tok, text, strlen(text), LOOM_SPECIAL_ALL, t, 8, NULL);
    return k > 0 && k <= 8 && k <= n && !memcmp(ids + n - k, t, (size_t)k * sizeof *t);
}

/* messages, tools and chat_template_kwargs: render with provenance and tokenize into r->prompt. */
static int parse_chat(const struct serve_ctx *c, json_t *o, struct serve_req *r, struct serve_err *e)
{
    json_t *msgs = json_object_get(o, "messages"), *kw;
    char buf[SERVE_JNUM_CAP];
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return serve_fail(e, 400, "messages",
                          !msgs                 ? "missing_required_parameter"
                          : json_is_array(msgs) ? "invalid_value"
                                                : "invalid_type",
                          "messages: expected a non-empty array of messages, found %s",
                          !msgs                 ? "nothing"
                          : json_is_array(msgs) ? "an empty array"
                                                : jfound(msgs, buf, sizeof buf)), -1;
    int think = -1;
    if (!c->tmpl)
        return serve_fail(e, 400, "messages", "unsupported_model",
                          "messages: this model's chat template is not one loom renders (use /v1/completions)"), -1;
    char *tools = NULL, *kwargs = NULL; /* kwargs: every key reaches the template, as llama.cpp's server does */
    if (get_object(o, "chat_template_kwargs", &kw, e) != 0 ||
        (kw && get_bool(kw, "enable_thinking", "chat_template_kwargs.enable_thinking", &think, e) != 0) ||
        (kw && json_object_size(kw) && !(kwargs = json_dumps(kw, JSON_COMPACT)) &&
         (serve_fail(e, 500, NULL, NULL, "out of memory"), 1)) ||
        parse_tools(c, o, r, &tools, e) != 0) {
        free(tools);
        free(kwargs);
        return -1;
    }
    size_t n = json_array_size(msgs), n_owned = 0;
    loom_chat_message *m = calloc(n, sizeof *m);
    char **owned = NULL;
    int rc = m ? 0 : (serve_fail(e, 500, NULL, NULL, "out of memory"), -1);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = parse_message(json_array_get(msgs, i), i, &m[i], &owned, &n_owned, e);
    if (rc == 0) {
        loom_chat_params p = {.add_generation_prompt = 1, .tools = tools, .kwargs = kwargs,
                              .think = think < 0 ? LOOM_CHAT_THINK_UNSET : think ? LOOM_CHAT_THINK_ON
                                                                                  : LOOM_CHAT_THINK_OFF};
        loom_error err = {0};
        /* the template was parsed at startup: what fails now (raise_exception, a type error, Jinja's limits)
         * follows from the request, a 400; only memory and loom's own faults are the server's */
        if (loom_chat_template_apply(c->tmpl, m, n, &p, &r->prompt, &r->n_prompt, &err) != LOOM_OK) {
            int mine = err.code == LOOM_E_NOMEM || err.code == LOOM_E_INTERNAL;
            int kwarg = !strncmp(err.msg, "chat_template_kwargs", 20);
            rc = (serve_fail(e, mine ? 500 : 400, kwarg ? "chat_template_kwargs" : "messages", "invalid_value",
                             "%s%s", kwarg ? "" : "messages: ", err.msg), -1);
        }
        r->think_open = rc == 0 && prompt_ends_with(c->tok, r->prompt, r->n_prompt, "<think>\n");
        /* the next turn renders this one's thinking differently: its prompt follows this one's up to the start of
         * the assistant header, so the slot keeps a checkpoint just after that <|im_start|> */
        int32_t im_start = -1;
        if (rc == 0 && loom_tokenizer_encode(c->tok, "<|im_start|>", 12, LOOM_SPECIAL_ALL, &im_start, 1, NULL) == 1)
            for (int i = r->n_prompt - 1; i >= 0 && !r->cache_mark; i--)
                r->cache_mark = r->prompt[i] == im_start ? i + 1 : 0;
    }
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    free(m);
    free(tools);
    free(kwargs);
    return rc;
}

/* prompt: a string, tokenized as data (special-token spellings stay text), after the vocabulary's BOS. */
static int parse_completion(const struct serve_ctx *c, json_t *o, struct serve_req *r, struct serve_err *e)
{
    json_t *v = json_object_get(o, "prompt");
    char buf[SERVE_JNUM_CAP];
    if (!json_is_string(v))
        return serve_fail(e, 400, "prompt", v ? "invalid_type" : "missing_required_parameter",
                          "prompt: expected a string, found %s", v ? jfound(v, buf, sizeof buf) : "nothing"), -1;
    const char *text = json_string_value(v);
    size_t len = json_string_length(v);
    int32_t bos = loom_tokenizer_bos(c->tok);
    loom_error err = {0};
    int n = loom_tokenizer_encode(c->tok, text, len, LOOM_SPECIAL_DATA, NULL, 0, &err);
    if (n >= 0 && n + (bos >= 0) == 0)
        return serve_fail(e, 400, "prompt", "invalid_value",
                          "prompt: expected at least one token, found empty text"), -1;
    r->prompt = n >= 0 ? malloc(((size_t)n + 1) * sizeof *r->prompt) : NULL;
    if (!r->prompt)
        return serve_fail(e, 500, NULL, NULL, "prompt: %s", n < 0 ? err.msg : "out of memory"), -1;
    if (bos >= 0)
        r->prompt[0] = bos;
    int k = loom_tokenizer_encode(c->tok, text, len, LOOM_SPECIAL_DATA, r->prompt + (bos >= 0), n, &err);
    if (k != n)
        return serve_fail(e, 500, NULL, NULL, "prompt: the tokenizer counted %d token%s, then wrote %d", n,
                          n == 1 ? "" : "s", k), -1;
    r->n_prompt = n + (bos >= 0);
    r->cache_mark = r->n_prompt - 1; /* the same prompt again reuses all but its last token */
    return 0;
}

/* forced_output (tests only, with LOOM_SERVE_FORCED_OUTPUT=1): the text to generate, tokenized as the model
 * would write it (special-token spellings as their ids), instead of sampling. */
static int parse_forced(const struct serve_ctx *c, json_t *o, struct serve_req *r, struct serve_err *e)
{
    json_t *v = json_object_get(o, "forced_output");
    char buf[SERVE_JNUM_CAP];
    if (!v || json_is_null(v))
        return 0;
    if (!c->allow_forced)
        return serve_fail(e, 400, "forced_output", "unsupported_parameter", "forced_output: a test-only field, taken "
                          "only when the server runs with LOOM_SERVE_FORCED_OUTPUT=1"), -1;
    if (!json_is_string(v))
        return serve_fail(e, 400, "forced_output", "invalid_type", "forced_output: expected a string, found %s",
                          jfound(v, buf, sizeof buf)), -1;
    const char *text = json_string_value(v);
    size_t len = json_string_length(v);
    int n = loom_tokenizer_encode(c->tok, text, len, LOOM_SPECIAL_ALL, NULL, 0, NULL);
    r->forced = n >= 0 ? malloc(((size_t)n + 1) * sizeof *r->forced) : NULL;
    if (!r->forced || loom_tokenizer_encode(c->tok, text, len, LOOM_SPECIAL_ALL, r->forced, n, NULL) != n)
        return serve_fail(e, 500, NULL, NULL, "forced_output: could not tokenize"), -1;
    r->n_forced = n;
    return 0;
}

void serve_req_free_fields(struct serve_req *r)
{
    free(r->prompt);
    free(r->forced);
    free(r->lps.v);
    free(r->all_lps.v);
    loom_tool_parser_free(r->tools);
    json_decref(r->calls);
    loom_sampler_free(r->smp);
    loom_stop_free(r->stop);
    serve_buf_free(&r->content);
    serve_buf_free(&r->reasoning);
    serve_buf_free(&r->all_content);
    serve_buf_free(&r->all_reasoning);
    pthread_mutex_destroy(&r->mu);
}

/* The body as a JSON object, or NULL with e filled (400). */
static json_t *parse_body(const char *body, size_t len, struct serve_err *e)
{
    json_error_t je;
    const char *nul = memchr(body, 0, len);
    if (nul) /* Jansson's own words for it depend on where it is ("end of file expected near end of file") */
        return serve_fail(e, 400, NULL, "invalid_json", "the body is not valid JSON: it holds a NUL byte at "
                          "offset %zu (JSON text has none; a string would write it \\u0000, which loom refuses too)",
                          (size_t)(nul - body));
    json_t *o = serve_jnum_parse(body, len, &je); /* a JSON value that is not an object: named below */
    if (!o && json_error_code(&je) == json_error_null_character) /* its text names its JSON_ALLOW_NUL flag */
        return serve_fail(e, 400, NULL, "invalid_value", "the body's JSON is refused: a string holds a NUL character "
                          "(\\u0000), which loom does not take (the string ends at line %d, column %d)", je.line,
                          je.column);
    if (!o && json_error_code(&je) == json_error_numeric_overflow)
        return serve_fail(e, 400, NULL, "invalid_value", "the body holds more than %d numbers beyond what loom reads "
                          "(an integer within 64 bits, a real within a double's range): %s (line %d, column %d)",
                          SERVE_BIG_MAX, je.text, je.line, je.column);
    if (!o)
        return serve_fail(e, 400, NULL, "invalid_json", "the body is not valid JSON: %s (line %d, column %d)",
                          je.text, je.line, je.column);
    if (!json_is_object(o)) {
        char buf[SERVE_JNUM_CAP];
        serve_fail(e, 400, NULL, "invalid_json", "the body must be a JSON object, found %s",
                   jfound(o, buf, sizeof buf));
        serve_jnum_release(o);
        return NULL;
    }
    return o;
}

struct serve_req *serve_parse_request(const struct serve_ctx *c, enum serve_kind kind, const char *body,
                                      size_t len, struct serve_err *e)
{
    json_t *o = parse_body(body, len, e);
    if (!o)
        return NULL;
    struct serve_req *r = calloc(1, sizeof *r);
    if (!r) {
        serve_jnum_release(o);
        return serve_fail(e, 500, NULL, NULL, "out of memory");
    }
    pthread_mutex_init(&r->mu, NULL);
    r->n_cached = -1; /* queued: the engine sets it when the request takes a slot */
    r->kind = kind;
    r->tok = c->tok;
    int rc = refuse_unimplemented(o, kind, e);
    if (rc == 0)
        rc = parse_logprobs(o, r, e);
    if (rc == 0)
        rc = parse_sampling(c, o, r, e);
    if (rc == 0)
        rc = kind == SERVE_CHAT ? parse_chat(c, o, r, e) : parse_completion(c, o, r, e);
    if (rc == 0)
        rc = parse_forced(c, o, r, e);
    if (rc == 0)
        rc = big_unread(o, e);
    if (rc == 0 && r->n_prompt > c->n_ctx)
        rc = (serve_fail(e, 400, kind == SERVE_CHAT ? "messages" : "prompt", "context_length_exceeded",
                         "the prompt has %d tokens, a slot's context holds %d (loom serve -c)", r->n_prompt, c->n_ctx),
              -1);
    for (int i = 0; rc == 0 && i < r->n_prompt; i++)
        loom_sampler_accept(r->smp, r->prompt[i]); /* the prompt is in the penalty window, as in loom run */
    serve_jnum_release(o);
    if (rc != 0) {
        serve_req_free_fields(r);
        free(r);
        return NULL;
    }
    return r;
}

/* ---- /tokenize and /detokenize (llama.cpp server's shapes) ---- */

static char *dump_free(json_t *o, struct serve_err *e)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s ? s : serve_fail(e, 500, NULL, NULL, "out of memory");
}

static json_t *token_piece(const loom_tokenizer *tok, int32_t id)
{
    char piece[256];
    int k = loom_tokenizer_piece(tok, id, piece, (int)sizeof piece);
    k = k < 0 ? 0 : k > (int)sizeof piece ? (int)sizeof piece : k;
    json_t *p;
    if (serve_utf8_valid(piece, (size_t)k))
        p = json_stringn(piece, (size_t)k);
    else { /* bytes that are not UTF-8 on their own: their values */
        p = json_array();
        for (int i = 0; i < k; i++)
            json_array_append_new(p, json_integer((unsigned char)piece[i]));
    }
    return json_pack("{s:i,s:o}", "id", (int)id, "piece", p);
}

/* {"content": STRING, "add_special": false, "parse_special": false, "with_pieces": false}. parse_special
 * defaults to false here (llama.cpp: true): caller text is data unless asked otherwise. */
char *serve_tokenize(const struct serve_ctx *c, const char *body, size_t len, struct serve_err *e)
{
    json_t *o = parse_body(body, len, e), *v;
    int add_special = 0, parse_special = 0, with_pieces = 0;
    if (!o)
        return NULL;
    v = json_object_get(o, "content");
    json_t *tokens = json_array();
    int32_t *ids = NULL;
    if (need_field(o, "", "content", JSON_STRING, e) == 0 &&
        get_bool(o, "add_special", "add_special", &add_special, e) == 0 &&
        get_bool(o, "parse_special", "parse_special", &parse_special, e) == 0 &&
        get_bool(o, "with_pieces", "with_pieces", &with_pieces, e) == 0 && big_unread(o, e) == 0) {
        int32_t bos = add_special ? loom_tokenizer_bos(c->tok) : -1;
        int mode = parse_special ? LOOM_SPECIAL_ALL : LOOM_SPECIAL_DATA;
        int n = loom_tokenizer_encode(c->tok, json_string_value(v), json_string_length(v), mode, NULL, 0, NULL);
        ids = n >= 0 ? malloc(((size_t)n + 1) * sizeof *ids) : NULL;
        if (ids && bos >= 0)
            ids[0] = bos;
        if (ids && loom_tokenizer_encode(c->tok, json_string_value(v), json_string_length(v), mode, ids + (bos >= 0),
                                         n, NULL) == n)
            for (int i = 0; i < n + (bos >= 0); i++)
                json_array_append_new(tokens, with_pieces ? token_piece(c->tok, ids[i]) : json_integer(ids[i]));
        else
            serve_fail(e, 500, NULL, NULL, "content: could not tokenize");
    }
    int ok = e->status == 0;
    free(ids);
    serve_jnum_release(o);
    if (!ok) {
        json_decref(tokens);
        return NULL;
    }
    return dump_free(json_pack("{s:o}", "tokens", tokens), e);
}

/* {"tokens": [ID, ...]} -> {"content": TEXT}; bytes that are not UTF-8 come out as U+FFFD. */
char *serve_detokenize(const struct serve_ctx *c, const char *body, size_t len, struct serve_err *e)
{
    json_t *o = parse_body(body, len, e), *v, *t;
    char buf[SERVE_JNUM_CAP], at[32];
    size_t i;
    if (!o)
        return NULL;
    v = json_object_get(o, "tokens");
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    int n_vocab = (int)loom_tokenizer_n_vocab(c->tok), ok = ids != NULL;
    if (!json_is_array(v))
        ok = !!serve_fail(e, 400, "tokens", v ? "invalid_type" : "missing_required_parameter",
                          "tokens: expected an array of token ids, found %s", v ? jfound(v, buf, sizeof buf)
                                                                                  : "nothing");
    json_array_foreach(v, i, t) {
        long long id;
        snprintf(at, sizeof at, "tokens[%zu]", i);
        if (!ok || want_int(t, at, "an integer token id", 0, n_vocab - 1, &id, e) != 0) {
            ok = 0;
            break;
        }
        ids[i] = (int32_t)id;
    }
    if (ok && big_unread(o, e) != 0)
        ok = 0;
    char *text = NULL;
    int k = ok ? loom_tokenizer_detokenize(c->tok, ids, n, NULL, 0) : -1;
    if (ok && (k < 0 || !(text = malloc((size_t)k + 1)) ||
               loom_tokenizer_detokenize(c->tok, ids, n, text, (size_t)k) != k))
        ok = !!serve_fail(e, 500, NULL, NULL, "tokens: could not detokenize");
    free(ids);
    serve_jnum_release(o);
    char *out = ok ? dump_free(json_pack("{s:o}", "content", jtext(text, (size_t)k)), e)
                   : (e->status ? NULL : serve_fail(e, 500, NULL, NULL, "out of memory"));
    free(text);
    return out;
}

/* ---- response shapes ---- */

const char *serve_finish_name(const struct serve_req *r)
{
    return r->finish == SERVE_FINISH_SHUTDOWN ? "shutdown" : r->finish == SERVE_FINISH_LENGTH ? "length"
           : json_array_size(r->calls)       ? "tool_calls"
                                             : "stop";
}

static json_t *usage_json(const struct serve_req *r)
{
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", r->n_prompt, "completion_tokens", r->n_gen,
                     "total_tokens", r->n_prompt + r->n_gen, "prompt_tokens_details", "cached_tokens", r->n_cached);
}

static json_t *head_json(const struct serve_req *r, const char *model, const char *object)
{
    return json_pack("{s:s,s:s,s:I,s:s}", "id", r->id, "object", object, "created", (json_int_t)r->created, "model",
                     model);
}

char *serve_tool_call(struct serve_req *r, const char *model, const char *name, const char *arguments, int *dropped)
{
    size_t k = json_array_size(r->calls);
    *dropped = k > 0 && !r->parallel_tool_calls;
    if (*dropped || (!r->calls && !(r->calls = json_array())))
        return NULL;
    char id[96];
    snprintf(id, sizeof id, "call_%s_%zu", r->id, k);
    json_t *call = json_pack("{s:s,s:s,s:{s:o,s:o}}", "id", id, "type", "function", "function", "name",
                             jtext(name, strlen(name)), "arguments", jtext(arguments, strlen(arguments)));
    if (!call || json_array_append(r->calls, call)) {
        json_decref(call);
        return NULL;
    }
    json_t *delta = r->stream ? json_copy(call) : NULL; /* the stream's delta also has the call's index */
    json_decref(call);
    if (!r->stream)
        return strdup("");
    json_object_set_new(delta, "index", json_integer((json_int_t)k));
    json_t *o = head_json(r, model, "chat.completion.chunk");
    json_object_set_new(o, "choices", json_pack("[{s:i,s:{s:[o]},s:n}]", "index", 0, "delta", "tool_calls", delta,
                                                "finish_reason"));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* ---- logprobs ---- */

/* A token as logprobs show it: its piece (bytes that are not UTF-8 as U+FFFD) and log-probability (-9999 for a
 * token the distribution does not allow, as OpenAI writes it), with the piece's bytes when bytes is set; chars
 * (may be NULL) advanced by the characters the piece starts. */
static json_t *lp_token(const loom_tokenizer *tok, int32_t id, float lp, int bytes, size_t *chars)
{
    char piece[256];
    int k = loom_tokenizer_piece(tok, id, piece, (int)sizeof piece);
    k = k < 0 ? 0 : k > (int)sizeof piece ? (int)sizeof piece : k;
    for (int b = 0; chars && b < k; b++) /* characters: the bytes that start one */
        *chars += ((unsigned char)piece[b] & 0xC0) != 0x80;
    double v = isfinite(lp) ? (double)lp : -9999.0;
    json_t *t = json_pack("{s:o,s:f}", "token", jtext(piece, (size_t)k), "logprob", v);
    if (t && bytes) {
        json_t *b = json_array();
        for (int i = 0; i < k; i++)
            json_array_append_new(b, json_integer((unsigned char)piece[i]));
        json_object_set_new(t, "bytes", b);
    }
    return t;
}

/* Chat's {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...], "refusal": null}. */
static json_t *chat_logprobs(const struct serve_req *r, const struct serve_lps *l)
{
    json_t *content = json_array();
    for (int i = 0; i < l->n; i++) {
        const struct serve_lp *x = &l->v[i];
        json_t *t = lp_token(r->tok, x->id, x->lp, 1, NULL), *top = json_array();
        for (int j = 0; j < r->logprobs && x->top_id[j] >= 0; j++)
            json_array_append_new(top, lp_token(r->tok, x->top_id[j], x->top_lp[j], 1, NULL));
        json_object_set_new(t, "top_logprobs", top);
        json_array_append_new(content, t);
    }
    return json_pack("{s:o,s:n}", "content", content, "refusal");
}

/* /v1/completions' {"tokens", "token_logprobs", "top_logprobs": [{PIECE: LOGPROB}], "text_offset"}; *offset: the
 * offset in characters of the first token in the generated text (a token that ends inside a character counts it
 * when the character starts there), advanced past the last. */
static json_t *completion_logprobs(const struct serve_req *r, const struct serve_lps *l, size_t *offset)
{
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < l->n; i++) {
        const struct serve_lp *x = &l->v[i];
        json_array_append_new(offs, json_integer((json_int_t)*offset));
        json_t *t = lp_token(r->tok, x->id, x->lp, 0, offset), *top = json_object();
        json_array_append(tokens, json_object_get(t, "token"));
        json_array_append(lps, json_object_get(t, "logprob"));
        json_decref(t);
        for (int j = 0; j < r->logprobs && x->top_id[j] >= 0; j++) {
            json_t *a = lp_token(r->tok, x->top_id[j], x->top_lp[j], 0, NULL);
            json_object_set(top, json_string_value(json_object_get(a, "token")), json_object_get(a, "logprob"));
            json_decref(a);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

char *serve_chunk_json(struct serve_req *r, const char *model, const char *content, size_t n_content,
                       const char *reasoning, size_t n_reasoning, const struct serve_lps *lps, int first)
{
    int chat = r->kind == SERVE_CHAT;
    json_t *o = head_json(r, model, chat ? "chat.completion.chunk" : "text_completion"), *choice;
    if (chat) {
        json_t *delta = json_object();
        if (first)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (n_reasoning)
            json_object_set_new(delta, "reasoning_content", jtext(reasoning, n_reasoning));
        if (n_content || first)
            json_object_set_new(delta, "content", jtext(content, n_content));
        choice = json_pack("{s:i,s:o,s:n}", "index", 0, "delta", delta, "finish_reason");
        if (lps && lps->n)
            json_object_set_new(choice, "logprobs", chat_logprobs(r, lps));
    } else
        choice = json_pack("{s:i,s:o,s:o,s:n}", "index", 0, "text", jtext(content, n_content), "logprobs",
                           lps && lps->n ? completion_logprobs(r, lps, &r->lp_offset) : json_null(),
                           "finish_reason");
    json_object_set_new(o, "choices", json_pack("[o]", choice));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *serve_usage_chunk_json(const struct serve_req *r, const char *model)
{
    json_t *o = head_json(r, model, r->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage_json(r));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *serve_final_chunk_json(const struct serve_req *r, const char *model)
{
    int chat = r->kind == SERVE_CHAT;
    json_t *o = head_json(r, model, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choice = chat ? json_pack("{s:i,s:{},s:s}", "index", 0, "delta", "finish_reason", serve_finish_name(r))
                          : json_pack("{s:i,s:s,s:n,s:s}", "index", 0, "text", "", "logprobs", "finish_reason",
                                      serve_finish_name(r));
    json_object_set_new(o, "choices", json_pack("[o]", choice));
    json_object_set_new(o, "usage", usage_json(r));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

char *serve_response_json(const struct serve_req *r, const char *model)
{
    int chat = r->kind == SERVE_CHAT;
    json_t *o = head_json(r, model, chat ? "chat.completion" : "text_completion"), *choice;
    const struct serve_buf *c = &r->all_content, *rs = &r->all_reasoning;
    if (chat) {
        int calls = json_array_size(r->calls) > 0; /* with calls and no text, content is null (OpenAI's shape) */
        json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content",
                                calls && !c->len ? json_null() : jtext(c->p ? c->p : "", c->len));
        if (rs->len)
            json_object_set_new(msg, "reasoning_content", jtext(rs->p, rs->len));
        if (calls)
            json_object_set(msg, "tool_calls", r->calls);
        choice = json_pack("{s:i,s:o,s:s}", "index", 0, "message", msg, "finish_reason", serve_finish_name(r));
        if (r->logprobs >= 0)
            json_object_set_new(choice, "logprobs", chat_logprobs(r, &r->all_lps));
    } else {
        size_t offset = 0;
        choice = json_pack("{s:i,s:o,s:o,s:s}", "index", 0, "text", jtext(c->p ? c->p : "", c->len), "logprobs",
                           r->logprobs >= 0 ? completion_logprobs(r, &r->all_lps, &offset) : json_null(),
                           "finish_reason", serve_finish_name(r));
    }
    json_object_set_new(o, "choices", json_pack("[o]", choice));
    json_object_set_new(o, "usage", usage_json(r));
    if (r->return_prompt_tokens) {
        json_t *ids = json_array();
        for (int i = 0; i < r->n_prompt; i++)
            json_array_append_new(ids, json_integer(r->prompt[i]));
        json_object_set_new(o, "prompt_token_ids", ids);
    }
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}
