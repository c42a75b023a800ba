/* error.c — formatting of loom_error messages. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>

int loom_errorf(loom_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}
