/* error.h — filling loom_error: every fallible internal function returns an int status and, on
 * failure, writes one message naming the field, what was expected and what was found. */
#ifndef LOOM_UTIL_ERROR_H
#define LOOM_UTIL_ERROR_H

#include "loom.h"

/* Format a message into err (if non-NULL) and return code, so callers can write
 * `return loom_errorf(err, LOOM_E_FORMAT, "tensor '%s': ...", name);`. */
int loom_errorf(loom_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
