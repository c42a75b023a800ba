/* chat_internal.h — shared between the chat renderer files: a growable byte buffer and the Python-compatible
 * JSON writer (json.dumps(ensure_ascii=False) and str()) over jansson values, whose float repr and string
 * escapes the Jinja interpreter (jinja_value.c) uses too. */
#ifndef LOOM_TEXT_CHAT_INTERNAL_H
#define LOOM_TEXT_CHAT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "loom.h"

struct loom_chat_buf {
    char *p; /* NUL-terminated when non-NULL */
    size_t len, cap;
};

/* Append s[n] to b (keeps b NUL-terminated). Returns LOOM_OK or LOOM_E_NOMEM. */
int loom_chat_buf_put(struct loom_chat_buf *b, const char *s, size_t n);

/* Append Python's json.dumps(v, ensure_ascii=False) of v to b, or when as_str and v is not an object or
 * array, Python's str(v) (strings raw, True/False/None, ints, floats in repr form). Returns LOOM_OK or
 * LOOM_E_NOMEM. */
int loom_chat_json_write(struct loom_chat_buf *b, const json_t *v, int as_str);

/* Python's repr of a float x into out[cap] (cap >= 32): the shortest digit string that reads back as x, in
 * fixed notation when the decimal exponent e (x = d.ddd * 10^e) satisfies -4 <= e < 16, else d.ddde+XX
 * (source: CPython float_repr_style 'short', format code 'r'). NaN and infinities: "nan", "inf", "-inf", or
 * with json as json.dumps writes them, "NaN", "Infinity", "-Infinity". */
void loom_chat_float_repr(double x, int json, char *out, size_t cap);

/* The escape json.dumps(ensure_ascii=False) writes for byte c inside a string literal: NULL when c stands as
 * itself, else \", \\, \n, \r, \t, \b, \f, or \u00XX for the other control bytes (written into esc). */
const char *loom_chat_json_escape(unsigned char c, char esc[8]);

/* Parse json[len] (any JSON value, NUL allowed in strings). NULL with err naming `what` when malformed. */
json_t *loom_chat_json_parse(const char *json, size_t len, const char *what, loom_error *err);

/* A tool call's arguments object from text: JSON of an object, or of a string holding an object's JSON (as
 * Hugging Face templates accept both). NULL with err naming `what` when malformed or not an object. */
json_t *loom_chat_json_arguments(const char *text, const char *what, loom_error *err);

/* loom_chat_params.kwargs (NULL: none) parsed into *out (NULL when none; caller decrefs): LOOM_E_ARG naming
 * chat_template_kwargs when the text is malformed, not an object, or sets messages, tools or
 * add_generation_prompt (variables the request itself gives); LOOM_E_NOMEM. chat_template.c. */
int loom_chat_kwargs_parse(const char *text, json_t **out, loom_error *err);

#endif
