/* test.h — the tiny test harness every loom test binary uses: CHECK counts passes and failures,
 * and test_finish prints the closing line "N passed, N failed" that the runner and CI read. */
#ifndef LOOM_TEST_H
#define LOOM_TEST_H

#include <dirent.h>
#include <glob.h>
#include <string.h>
#include <stdio.h>

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (cond) {                                                                        \
            test_passed++;                                                                 \
        } else {                                                                           \
            test_failed++;                                                                 \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

#ifdef LOOM_SANITIZED
/* Read by the UBSan runtime (GCC's and clang's) at start: the first report fails the test. */
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }
#endif

/* Whether the GGUF writer left a temporary file for path (its path.<pid>.tmp, or path.<pid>-<n>.tmp). */
static inline int test_temporary_left(const char *path)
{
    char pattern[4200];
    glob_t g;
    if (snprintf(pattern, sizeof pattern, "%s.*.tmp", path) >= (int)sizeof pattern)
        return 1; /* a path this long is not a test's */
    int found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    if (found)
        globfree(&g);
    return found;
}

/* Entries of directory d (besides . and ..). */
static inline int dir_entries(const char *d)
{
    DIR *h = opendir(d);
    int n = 0;
    for (struct dirent *e; h && (e = readdir(h)) != NULL;)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (h)
        closedir(h);
    return n;
}

static inline int test_finish(void)
{
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

#endif
