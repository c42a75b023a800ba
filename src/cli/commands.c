/* commands.c — the subcommand table, and what the subcommands share: their clock, the thread-count check,
 * the model file's warnings and the kernel choice from the environment. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
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

void loom_cli_gguf_warnings(const char *cmd, const char *path, const loom_gguf *g)
{
    loom_gguf_info info;
    loom_gguf_get_info(g, &info);
    for (uint64_t i = 0; i < info.n_warnings && i < LOOM_GGUF_WARNINGS_KEPT; i++)
        fprintf(stderr, "loom %s: warning: %s: %s\n", cmd, path, loom_gguf_warning(g, i));
    if (info.n_warnings > LOOM_GGUF_WARNINGS_KEPT)
        fprintf(stderr, "loom %s: warning: %s: %llu more warnings like these\n", cmd, path,
                (unsigned long long)(info.n_warnings - LOOM_GGUF_WARNINGS_KEPT));
}

void loom_cli_model_warnings(const char *cmd, const char *path, const loom_model *m)
{
    loom_cli_gguf_warnings(cmd, path, loom_model_gguf(m));
}

int loom_cli_listed(const char *name, const char *(*list)(int i))
{
    for (int i = 0; list(i); i++)
        if (!strcmp(name, list(i)))
            return 1;
    return 0;
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
