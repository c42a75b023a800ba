/* commands.c — the subcommand table, and what the subcommands share: their clock, the thread-count check,
 * the model file's warnings and the kernel choice from the environment. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "loom.h"

const struct loom_cli_command loom_cli_commands[] = {
    {"run", loom_cli_run},
    {"inspect", loom_cli_inspect},
    {"synth", loom_cli_synth},
    {"tokenize", loom_cli_tokenize},
    {"chat", loom_cli_chat},
    {"quantize", loom_cli_quantize},
    {"bench", loom_cli_bench},
    {NULL, NULL},
};

double loom_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void loom_cli_check_threads(const char *cmd, int n_threads)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0 && n_threads > cpus)
        fprintf(stderr,
                "loom %s: warning: -t %d is more than the %ld online CPUs; threads that share cores make every step "
                "wait for each other (expect a much slower run)\n",
                cmd, n_threads, cpus);
}

/* n warnings of which the first `kept` are msg(src, i). */
static void print_warnings(const char *cmd, const char *path, uint64_t n, uint64_t kept,
                           const char *(*msg)(const void *src, uint64_t i), const void *src)
{
    for (uint64_t i = 0; i < kept && i < n; i++)
        fprintf(stderr, "loom %s: warning: %s: %s\n", cmd, path, msg(src, i));
    if (n > kept)
        fprintf(stderr, "loom %s: warning: %s: %llu more warnings like these\n", cmd, path,
                (unsigned long long)(n - kept));
}

static const char *model_warning(const void *m, uint64_t i) { return loom_model_warning(m, (int)i); }
static const char *gguf_warning(const void *g, uint64_t i) { return loom_gguf_warning(g, i); }

void loom_cli_model_warnings(const char *cmd, const char *path, const loom_model *m)
{
    print_warnings(cmd, path, (uint64_t)loom_model_n_warnings(m), LOOM_GGUF_WARNINGS_KEPT, model_warning, m);
}

void loom_cli_gguf_warnings(const char *cmd, const char *path, const struct loom_gguf *g)
{
    print_warnings(cmd, path, g->n_warnings, LOOM_GGUF_WARNINGS_KEPT, gguf_warning, g);
}

int loom_cli_select_kernels(void)
{
    static const struct {
        const char *name;
        enum loom_kernel_mode mode;
    } modes[] = {{"auto", LOOM_KERNELS_AUTO}, {"scalar", LOOM_KERNELS_SCALAR}, {"avx2", LOOM_KERNELS_AVX2},
                 {"avx512", LOOM_KERNELS_AVX512}};
    const char *v = getenv("LOOM_KERNELS");
    if (!v || !*v)
        return 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(v, modes[i].name))
            continue;
        loom_error err = {0};
        if (loom_kernels_select(modes[i].mode, &err) == LOOM_OK)
            return 0;
        fprintf(stderr, "loom: LOOM_KERNELS=%s: %s\n", v, err.msg);
        return -1;
    }
    fprintf(stderr, "loom: LOOM_KERNELS: expected auto, scalar, avx2 or avx512, found '%s'\n", v);
    return -1;
}
