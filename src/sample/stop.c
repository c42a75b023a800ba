/* stop.c — the stop-string matcher: held text + a token's text are scanned for the earliest complete stop
 * string; failing that, the shortest tail that could still grow into one is held back and the rest released.
 * Every byte is released at most once, and a stop string's own bytes never. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "util/error.h"

struct loom_stop {
    int n_stops;
    char **stops;   /* [n_stops] NUL-terminated copies */
    size_t *lens;   /* [n_stops], each >= 1 */
    size_t max_len; /* longest stop string; held text is always shorter */
    char *held;     /* [max_len] text that may be the start of a stop string */
    size_t n_held;
    int stopped;    /* a stop string was seen; feeds release nothing until loom_stop_reset */
};

loom_stop *loom_stop_new(const char *const *stops, int n_stops, loom_error *err)
{
    if (n_stops < 0 || (n_stops > 0 && !stops)) {
        loom_errorf(err, LOOM_E_ARG, "stop strings: expected a count >= 0 and an array, found %d", n_stops);
        return NULL;
    }
    for (int i = 0; i < n_stops; i++)
        if (!stops[i] || !stops[i][0]) {
            loom_errorf(err, LOOM_E_ARG, "stop string %d: expected a non-empty string, found %s", i,
                        stops[i] ? "\"\"" : "NULL");
            return NULL;
        }
    struct loom_stop *m = calloc(1, sizeof *m);
    int ok = m != NULL;
    if (ok && n_stops > 0) {
        m->stops = calloc((size_t)n_stops, sizeof *m->stops);
        m->lens = calloc((size_t)n_stops, sizeof *m->lens);
        ok = m->stops && m->lens;
        m->n_stops = ok ? n_stops : 0;
    }
    for (int i = 0; ok && i < n_stops; i++) {
        m->lens[i] = strlen(stops[i]);
        m->max_len = m->lens[i] > m->max_len ? m->lens[i] : m->max_len;
        ok = (m->stops[i] = strdup(stops[i])) != NULL;
    }
    if (ok && n_stops > 0)
        ok = (m->held = malloc(m->max_len)) != NULL;
    if (!ok) {
        loom_stop_free(m);
        loom_errorf(err, LOOM_E_NOMEM, "stop strings: could not allocate %d copies", n_stops);
        return NULL;
    }
    return m;
}

void loom_stop_free(struct loom_stop *m)
{
    if (!m)
        return;
    for (int i = 0; m->stops && i < m->n_stops; i++)
        free(m->stops[i]);
    free(m->stops);
    free(m->lens);
    free(m->held);
    free(m);
}

size_t loom_stop_max_len(const struct loom_stop *m)
{
    return m->max_len;
}

size_t loom_stop_n_held(const struct loom_stop *m)
{
    return m->n_held;
}

void loom_stop_reset(struct loom_stop *m)
{
    m->n_held = 0;
    m->stopped = 0;
}

/* Start of the earliest complete stop string in t[n], or n when there is none. */
static size_t stop_find_full(const struct loom_stop *m, const char *t, size_t n)
{
    size_t best = n;
    for (int k = 0; k < m->n_stops; k++) {
        const char *p = memmem(t, n, m->stops[k], m->lens[k]);
        if (p && (size_t)(p - t) < best)
            best = (size_t)(p - t);
    }
    return best;
}

/* Start of the longest tail of t[n] that is a proper prefix of some stop string, or n when none is. */
static size_t stop_find_partial(const struct loom_stop *m, const char *t, size_t n)
{
    size_t i = n >= m->max_len ? n - m->max_len + 1 : 0;
    for (; i < n; i++)
        for (int k = 0; k < m->n_stops; k++)
            if (n - i < m->lens[k] && memcmp(t + i, m->stops[k], n - i) == 0)
                return i;
    return n;
}

int loom_stop_feed(struct loom_stop *m, const char *text, size_t len, char *out, size_t out_cap, int *stopped,
                   loom_error *err)
{
    *stopped = m->stopped;
    if (m->stopped)
        return 0;
    size_t n = m->n_held + len;
    if (n > out_cap || n > (size_t)INT32_MAX)
        return loom_errorf(err, LOOM_E_RANGE, "stop matcher: %zu bytes of output needed, buffer holds %zu", n,
                           out_cap);
    if (m->n_held)
        memcpy(out, m->held, m->n_held);
    if (len)
        memcpy(out + m->n_held, text, len);
    m->n_held = 0;
    size_t at = stop_find_full(m, out, n);
    if (at < n) {
        m->stopped = *stopped = 1;
        return (int)at;
    }
    at = stop_find_partial(m, out, n);
    m->n_held = n - at;
    if (m->n_held)
        memcpy(m->held, out + at, m->n_held);
    return (int)at;
}

int loom_stop_flush(struct loom_stop *m, char *out, size_t out_cap, loom_error *err)
{
    if (m->stopped)
        return 0;
    if (m->n_held > out_cap)
        return loom_errorf(err, LOOM_E_RANGE, "stop matcher: %zu held bytes, buffer holds %zu", m->n_held, out_cap);
    size_t n = m->n_held;
    if (n)
        memcpy(out, m->held, n);
    m->n_held = 0;
    return (int)n;
}
