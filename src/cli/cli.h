/* cli.h — the table of `loom` subcommands; each lives in its own file in src/cli/. */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include <stdint.h>

#include "loom.h"

struct loom_gguf;

struct loom_cli_command {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the subcommand name; returns the exit status */
};

extern const struct loom_cli_command loom_cli_commands[]; /* NULL-terminated, in commands.c */

int loom_cli_run(int argc, char **argv);
int loom_cli_inspect(int argc, char **argv);
int loom_cli_synth(int argc, char **argv);
int loom_cli_tokenize(int argc, char **argv);
int loom_cli_chat(int argc, char **argv);
int loom_cli_quantize(int argc, char **argv);
int loom_cli_bench(int argc, char **argv);

/* Seconds on the monotonic clock (CLOCK_MONOTONIC), for the subcommands' timings. commands.c. */
double loom_cli_now(void);

/* Warn on stderr (as `loom CMD: ...`) when n_threads exceeds the online CPUs: loom's workers spin briefly at
 * every step, so threads that must share cores slow a run down steeply. commands.c. */
void loom_cli_check_threads(const char *cmd, int n_threads);

/* Print a model file's warnings (what only the GGUF convention forbids) on stderr as `loom CMD: warning: PATH:
 * MSG`, then how many more were counted than kept: from a loaded model, or from an open GGUF. commands.c. */
void loom_cli_model_warnings(const char *cmd, const char *path, const loom_model *m);
void loom_cli_gguf_warnings(const char *cmd, const char *path, const struct loom_gguf *g);

/* Apply $LOOM_KERNELS (auto, scalar, avx2 or avx512) if set: the kernel set for every model loaded after.
 * Returns 0, or -1 with a message on stderr for an unknown value or one the CPU cannot run. commands.c. */
int loom_cli_select_kernels(void);

#endif
