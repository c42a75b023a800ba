/* commands.c — the subcommand table, and the clock the subcommands time themselves with. */
#include <stddef.h>
#include <time.h>

#include "cli/cli.h"

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
