/* cli.h — the table of `loom` subcommands; each lives in its own file in src/cli/. */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

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

#endif
