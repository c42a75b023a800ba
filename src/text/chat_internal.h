/* chat_internal.h — shared between the chat renderer files: a growable byte buffer and the Python-compatible
 * JSON writer (json.dumps(ensure_ascii=False) and str()) over jansson values. */
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

/* Parse json[len] (any JSON value, NUL allowed in strings). NULL with err naming `what` when malformed. */
json_t *loom_chat_json_parse(const char *json, size_t len, const char *what, loom_error *err);

#endif
