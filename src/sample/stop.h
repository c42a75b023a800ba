/* stop.h — stop strings that may span tokens: a matcher fed each token's text that holds back the bytes that
 * could still become a stop string, releases held text exactly once when it cannot, and reports the stop.
 * (The end-of-generation token set is checked on ids by the caller; this is the text side.) */
#ifndef LOOM_SAMPLE_STOP_H
#define LOOM_SAMPLE_STOP_H

#include <stddef.h>

#include "loom.h"

struct loom_stop {
    int n_stops;
    char **stops;   /* [n_stops] NUL-terminated copies */
    size_t *lens;   /* [n_stops], each >= 1 */
    size_t max_len; /* longest stop string; held text is always shorter */
    char *held;     /* [max_len] text that may be the start of a stop string */
    size_t n_held;
    int stopped;    /* a stop string was seen; feeds release nothing until loom_stop_reset */
};

/* Copy stops[n_stops] (non-empty strings; n_stops may be 0: every feed passes its text through).
 * Returns LOOM_OK, LOOM_E_ARG for an empty or NULL string, or LOOM_E_NOMEM. On failure *m needs no free. */
int loom_stop_init(struct loom_stop *m, const char *const *stops, int n_stops, loom_error *err);
void loom_stop_free(struct loom_stop *m);
/* Forget held text and a seen stop (a new generation). */
void loom_stop_reset(struct loom_stop *m);

/* Feed one token's text[len]. Writes the text that can no longer be part of a stop string to out and returns
 * its length (>= 0). When a stop string is complete, *stopped = 1 and out gets exactly the text before it (the
 * stop string and anything after it are dropped); otherwise *stopped = 0. The earliest-starting complete stop
 * string wins. Needs out_cap >= len + max_len (LOOM_E_RANGE otherwise, nothing consumed) and out apart from
 * text. Never allocates. */
int loom_stop_feed(struct loom_stop *m, const char *text, size_t len, char *out, size_t out_cap, int *stopped,
                   loom_error *err);
/* End of generation without a stop: write the held text to out (out_cap >= max_len) and return its length. */
int loom_stop_flush(struct loom_stop *m, char *out, size_t out_cap, loom_error *err);

#endif
