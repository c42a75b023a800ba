/* error.h — filling loom_error: every fallible internal function returns an int status and, on
 * failure, writes one message naming the field, what was expected and what was found, with loom_errorf
 * (declared in loom.h, public, so that clients report in the same form). */
#ifndef LOOM_UTIL_ERROR_H
#define LOOM_UTIL_ERROR_H

#include "loom.h"

#endif
