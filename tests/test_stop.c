/* test_stop.c — the stop-string matcher: stops across token boundaries, overlapping prefixes, several stop
 * strings, the earliest complete stop winning, and a randomized check that text is released exactly once and
 * held back no longer than needed (released + stop string = the input up to the stop). */
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "test.h"

/* Feed the tokens toks[n] (NULL-terminated strings); the released text goes to got (NUL-terminated).
 * Returns the index of the feed that reported the stop, or -1 when none did (then the held text is flushed). */
static int run_tokens(loom_stop *m, const char *const *toks, int n, char *got, size_t cap)
{
    char out[256];
    size_t len = 0;
    int at = -1;
    for (int i = 0; i < n && at < 0; i++) {
        int stopped;
        int k = loom_stop_feed(m, toks[i], strlen(toks[i]), out, sizeof out, &stopped, NULL);
        if (k < 0 || len + (size_t)k >= cap)
            return -2;
        memcpy(got + len, out, (size_t)k);
        len += (size_t)k;
        at = stopped ? i : -1;
    }
    if (at < 0) {
        int k = loom_stop_flush(m, out, sizeof out, NULL);
        if (k < 0 || len + (size_t)k >= cap)
            return -2;
        memcpy(got + len, out, (size_t)k);
        len += (size_t)k;
    }
    got[len] = 0;
    return at;
}

static void test_cases(void)
{
    loom_stop *m;
    char got[256];
    const char *eos[] = {"</s>"};
    CHECK((m = loom_stop_new(eos, 1, NULL)) != NULL, "init");
    const char *t1[] = {"hel", "lo<", "/", "s>", "more"};
    int at = run_tokens(m, t1, 5, got, sizeof got);
    CHECK(at == 3 && !strcmp(got, "hello"), "stop across three tokens: at %d, released '%s'", at, got);
    const char *t1b[] = {"x"};
    CHECK(run_tokens(m, t1b, 1, got, sizeof got) == 0 && !got[0], "after a stop, feeds release nothing");
    loom_stop_reset(m);
    const char *t2[] = {"a<", "/b", "></", "s", "x"};
    at = run_tokens(m, t2, 5, got, sizeof got);
    CHECK(at == -1 && !strcmp(got, "a</b></sx"), "a broken prefix is released: at %d, '%s'", at, got);
    loom_stop_reset(m);
    const char *t3[] = {"tail <"};
    CHECK(run_tokens(m, t3, 1, got, sizeof got) == -1 && !strcmp(got, "tail <"), "held text flushed at the end");
    loom_stop_free(m);

    const char *abc[] = {"abc"};
    m = loom_stop_new(abc, 1, NULL);
    const char *t4[] = {"a", "a", "b", "c", "d"};
    at = run_tokens(m, t4, 5, got, sizeof got);
    CHECK(at == 3 && !strcmp(got, "a"), "overlapping prefix 'aabc': at %d, '%s'", at, got);
    loom_stop_reset(m);
    const char *t5[] = {"xaab", "abcz"};
    at = run_tokens(m, t5, 2, got, sizeof got);
    CHECK(at == 1 && !strcmp(got, "xaab"), "'xaababcz': at %d, '%s'", at, got);
    loom_stop_free(m);

    const char *many[] = {"STOP", "END", "abcd", "bc"};
    m = loom_stop_new(many, 4, NULL);
    const char *t6[] = {"one E", "N", "two STOP"};
    at = run_tokens(m, t6, 3, got, sizeof got);
    CHECK(at == 2 && !strcmp(got, "one ENtwo "), "a broken prefix, then the other stop string: at %d, '%s'", at, got);
    loom_stop_reset(m);
    const char *t7[] = {"xST", "OPxEND"};
    at = run_tokens(m, t7, 2, got, sizeof got);
    CHECK(at == 1 && !strcmp(got, "x"), "the earliest of two complete stops wins: at %d, '%s'", at, got);
    loom_stop_reset(m);
    const char *t8[] = {"zab", "c"};
    at = run_tokens(m, t8, 2, got, sizeof got);
    CHECK(at == 1 && !strcmp(got, "za"), "a complete 'bc' beats a still-forming 'abcd': at %d, '%s'", at, got);
    loom_stop_free(m);
}

static void test_edges(void)
{
    loom_stop *m;
    const char *none[] = {NULL};
    CHECK((m = loom_stop_new(none, 0, NULL)) != NULL, "no stop strings");
    char got[64];
    const char *t[] = {"a", "", "bc"};
    CHECK(run_tokens(m, t, 3, got, sizeof got) == -1 && !strcmp(got, "abc"), "no stop strings: pass-through");
    loom_stop_free(m);
    const char *empty[] = {"ok", ""};
    loom_error err = {0};
    CHECK(loom_stop_new(empty, 2, &err) == NULL && err.code == LOOM_E_ARG && err.msg[0],
          "an empty stop string is refused: %s", err.msg);
    CHECK(loom_stop_new(none, 1, NULL) == NULL, "a NULL stop string is refused");
    const char *s[] = {"abcdef"};
    m = loom_stop_new(s, 1, NULL);
    char out[8];
    int stopped;
    CHECK(loom_stop_feed(m, "abc", 3, out, sizeof out, &stopped, NULL) == 0 && loom_stop_n_held(m) == 3, "held 'abc'");
    CHECK(loom_stop_feed(m, "xxxxxx", 6, out, sizeof out, &stopped, &err) == LOOM_E_RANGE && loom_stop_n_held(m) == 3,
          "too small an output buffer: LOOM_E_RANGE, nothing consumed");
    int k = loom_stop_feed(m, "dx", 2, out, sizeof out, &stopped, NULL);
    CHECK(k == 5 && !memcmp(out, "abcdx", 5) && !stopped && loom_stop_n_held(m) == 0, "released once the prefix breaks");
    loom_stop_free(m);
}

/* Random texts over {a, b, c} cut into random tokens against random stop strings over the same letters.
 * Oracle: the first feed whose cumulative text contains a complete stop string reports it, and the released
 * text is the input up to the earliest start of a complete stop string inside that text; after every other
 * feed, exactly the longest tail that is a proper prefix of a stop string is held. */
static size_t longest_prefix_tail(const char *t, size_t n, char stops[][8], int n_stops)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < n_stops; k++)
            if (n - i < strlen(stops[k]) && !memcmp(t + i, stops[k], n - i))
                return n - i;
    return 0;
}

static size_t first_full(const char *t, size_t n, char stops[][8], int n_stops)
{
    size_t best = n;
    for (int k = 0; k < n_stops; k++) {
        size_t l = strlen(stops[k]);
        for (size_t i = 0; i + l <= n && i < best; i++)
            if (!memcmp(t + i, stops[k], l))
                best = i;
    }
    return best;
}

static void test_random(void)
{
    uint64_t x = 12345;
    int bad = 0, n_stopped = 0, trials = 3000;
    for (int trial = 0; trial < trials; trial++) {
        char stops[3][8], text[64], released[64], out[64];
        const char *sp[3];
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int n_stops = 1 + (int)(x >> 62) % 3;
        for (int k = 0; k < n_stops; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            int l = 1 + (int)((x >> 40) % 5);
            for (int j = 0; j < l; j++)
                stops[k][j] = (char)('a' + (x >> (8 + 3 * j)) % 3);
            stops[k][l] = 0;
            sp[k] = stops[k];
        }
        size_t n = 0;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = 5 + (size_t)((x >> 33) % 40);
        for (; n < len; n++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            text[n] = (char)('a' + (x >> 50) % 3);
        }
        loom_stop *m;
        m = loom_stop_new(sp, n_stops, NULL);
        size_t pos = 0, n_rel = 0;
        int stopped = 0;
        while (pos < n && !stopped) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t step = 1 + (size_t)((x >> 45) % 4);
            step = step > n - pos ? n - pos : step;
            int k = loom_stop_feed(m, text + pos, step, out, sizeof out, &stopped, NULL);
            pos += step;
            bad += k < 0;
            if (k < 0)
                break;
            memcpy(released + n_rel, out, (size_t)k);
            n_rel += (size_t)k;
            size_t full = first_full(text, pos, stops, n_stops);
            if (stopped) {
                bad += full == pos || n_rel != full;
            } else {
                bad += full != pos || n_rel + longest_prefix_tail(text, pos, stops, n_stops) != pos;
            }
            bad += memcmp(released, text, n_rel) != 0;
        }
        if (!stopped) {
            int k = loom_stop_flush(m, out, sizeof out, NULL);
            memcpy(released + n_rel, out, (size_t)(k > 0 ? k : 0));
            n_rel += (size_t)(k > 0 ? k : 0);
            bad += n_rel != n || memcmp(released, text, n) != 0;
        }
        n_stopped += stopped;
        loom_stop_free(m);
    }
    CHECK(bad == 0, "%d violations over %d random texts (%d stopped)", bad, trials, n_stopped);
    CHECK(n_stopped > trials / 4 && n_stopped < trials, "the random texts exercise both outcomes: %d stopped",
          n_stopped);
}

int main(void)
{
    test_cases();
    test_edges();
    test_random();
    return test_finish();
}
