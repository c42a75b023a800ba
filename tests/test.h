/* test.h — the tiny test harness every loom test binary uses: CHECK counts passes and failures,
 * and test_finish prints the closing line "N passed, N failed" that the runner and CI read. */
#ifndef LOOM_TEST_H
#define LOOM_TEST_H

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

static inline int test_finish(void)
{
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

#endif
