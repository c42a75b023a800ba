/* main.c — the `loom` command: dispatches to one subcommand per file in src/cli/. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: loom COMMAND [options]\n"
               "commands:\n"
               "  run      generate text from a prompt (default model prepared if -m is not given)\n"
               "  inspect  print a GGUF model's architecture, layer plan, tensors and memory\n"
               "  synth    write a synthetic qwen35 or qwen35moe GGUF model (test models)\n"
               "  tokenize turn text on stdin into token ids or pieces, or ids back into text\n"
               "  chat     interactive chat with a model\n"
               "  quantize write a quantized copy of a GGUF model\n"
               "  bench    measure prefill and decode speed\n"
               "  serve    an OpenAI-compatible HTTP server (chat and text completions, streaming, N slots)\n"
               "  xray     compare every circuit edge with llama.cpp's tensors, naming the first divergent one\n"
               "  certify  teacher-forced logits against llama.cpp in both numerics, written as a certificate\n"
               "  version  print loom's version (as loom --version)\n"
               "  help     this help, or a command's options: loom help COMMAND (as loom COMMAND --help)\n"
               "environment (an empty value is as unset; the first two are read where a model runs, so help,\n"
               "version, inspect, synth, tokenize and quantize take any):\n"
               "  LOOM_KERNELS=NAME           kernel set: auto (default: the best this CPU runs), scalar, avx2, avx512\n"
               "  LOOM_ORDERS=avx512|haswell  float orders to reproduce: llama.cpp's AVX-512 or AVX2 build (default: "
               "this CPU's)\n"
               "  LOOM_REF_CPU=NAME           llama.cpp's CPU build for xray, certify and bench --ref (default: the best "
               "for this CPU)\n"
               "loom COMMAND --help (or loom help COMMAND) lists a command's options; loom --version prints the "
               "version.\n"
               "An option given twice takes its last value (--stop and --tensor-type add one each time), but a\n"
               "second, different file, prompt or key (-m, -p, -o, --prompts, --imatrix, --chat-template-file,\n"
               "--api-key) is refused: loom takes one (a file is the same by any path: -m F -m ./F is taken).\n");
}

static const char VERSION_USAGE[] = "usage: loom version (or loom --version)\n"
                                    "  print loom's version, as `loom MAJOR.MINOR.PATCH`\n";
static const char HELP_USAGE[] = "usage: loom help [COMMAND]\n"
                                 "  with no COMMAND the general help (the commands, the environment), as loom --help;\n"
                                 "  with one, that command's own, as loom COMMAND --help (loom help version too)\n";

/* Output a command wrote to stdout but could not deliver (a full disk, a closed pipe or descriptor) fails the
 * command: status `trouble` with the reason (loom_cli_stdout_failed), unless it already failed with another. */
static int check_stdout(const char *cmd, int status, int trouble)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return status;
    loom_cli_stdout_failed(cmd, errno);
    return status && status != 1 ? status : trouble;
}

static const struct loom_cli_option HELP_FLAGS[] = {
    {"-h", LOOM_CLI_FLAG}, {"--help", LOOM_CLI_FLAG}, {NULL, LOOM_CLI_FLAG}};

/* The own help of help (also as -h or --help) and version (also as --version), or NULL for another name. */
static const char *own_usage(const char *name)
{
    if (!strcmp(name, "help") || loom_cli_option_find(HELP_FLAGS, name))
        return HELP_USAGE;
    return !strcmp(name, "version") || !strcmp(name, "--version") ? VERSION_USAGE : NULL;
}

/* Whether arg is spelled as an option that loom help does not take (-h, --help and --version name topics). */
static int help_unknown_option(const char *arg)
{
    return arg[0] == '-' && arg[1] && !own_usage(arg);
}

/* The end of a line naming an argument (hidden: loom_cli_put_arg left its value out) and the nearest command (NULL:
 * none), in parentheses. */
static void end_named(int hidden, const char *near)
{
    fputs(hidden || near ? " (" : "", stderr);
    fputs(hidden ? "its value is not shown" : "", stderr);
    if (near)
        fprintf(stderr, "%sdid you mean %s?", hidden ? "; " : "", near);
    fputs(hidden || near ? ")\n" : "\n", stderr);
}

/* loom help's arguments argv[2..argc), not what it takes: an option named as loom_cli_unknown names one (its value
 * not shown), a second topic, or a topic that is no command (with the nearest when one is obvious); a topic
 * spelled NAME=VALUE named without its value (loom_cli_put_arg); then the general help. 2. */
static int help_refused(int argc, char **argv)
{
    const char *bad = argc > 3 && !help_unknown_option(argv[2]) ? argv[3] : argv[2];
    const char *near = argc == 3 && !help_unknown_option(bad) ? loom_cli_nearest_command(bad) : NULL;
    int hidden = 0;
    if (help_unknown_option(bad))
        loom_cli_unknown("help", HELP_FLAGS, bad, "one COMMAND is all loom help takes");
    else if (argc > 3) {
        fputs("loom help: expects at most one command, found ", stderr), hidden = loom_cli_put_arg(argv[3]);
        fputs(" after ", stderr), hidden += loom_cli_put_arg(argv[2]);
        fputs(hidden > 1 ? " (their values are not shown)\n" : hidden ? " (a value is not shown)\n" : "\n", stderr);
    } else {
        fputs("loom help: expects a command, found ", stderr);
        end_named(loom_cli_put_arg(bad), near);
    }
    usage(stderr);
    return 2;
}

/* loom help [COMMAND]: the general help, or the command's own (as its --help), version's and help's included; an
 * unknown one is refused. A failed write is help's: `loom help: writing standard output`, status 1. */
static int help(int argc, char **argv)
{
    if (argc < 3) {
        usage(stdout);
        return check_stdout("help", 0, 1);
    }
    if (argc == 3 && own_usage(argv[2])) {
        fputs(own_usage(argv[2]), stdout);
        return check_stdout("help", 0, 1);
    }
    for (const struct loom_cli_command *c = loom_cli_commands; c->name && argc == 3; c++)
        if (!strcmp(argv[2], c->name)) {
            char *args[] = {argv[2], "--help", NULL};
            return check_stdout("help", c->main(2, args), 1);
        }
    return help_refused(argc, argv);
}

/* loom version (or --version): the version, or with -h or --help its own help; any other argument refused (one
 * spelled NAME=VALUE named without its value, loom_cli_put_arg). A
 * failed write is the command's as given (`loom --version: ...`). */
static int version(int argc, char **argv)
{
    int asked_help = 0;
    for (int i = 2; i < argc; i++) {
        if (loom_cli_option_find(HELP_FLAGS, argv[i])) {
            asked_help = 1;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1])
            loom_cli_unknown(argv[1], HELP_FLAGS, argv[i], NULL);
        else {
            fprintf(stderr, "loom %s: unexpected argument ", argv[1]);
            fprintf(stderr, " (%sloom %s takes no arguments, only -h or --help)\n",
                    loom_cli_put_arg(argv[i]) ? "its value is not shown; " : "", argv[1]);
        }
        fputs(VERSION_USAGE, stderr);
        return 2;
    }
    if (asked_help)
        fputs(VERSION_USAGE, stdout);
    else
        printf("loom %s\n", loom_version());
    return check_stdout(argv[1], 0, 1);
}

/* A standard descriptor the caller closed (2>&-) stays unusable but taken: /dev/null opened the other way round
 * (read-only for output, write-only for input), so writes and reads there still fail with EBADF as before, while
 * no file loom opens (a GGUF's temporary) can land on it and receive the diagnostics. */
static void hold_closed_standard_descriptors(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY) != fd)
            return; /* /dev/null missing or another descriptor below: nothing more to do safely */
}

int main(int argc, char **argv)
{
    hold_closed_standard_descriptors();
    /* a reader that closes its end early (| head) makes a write fail with EPIPE, which each command's output path
     * reports (check_stdout: standard output), instead of ending loom silently with a temporary file left behind;
     * the one place: serve's client gone mid-reply is an error on its socket, and the default model's forked child
     * (its parent's stderr possibly a pipe nobody reads) keeps it */
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 2 && !strcmp(argv[1], "help"))
        return help(argc, argv);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : check_stdout(argv[1], 0, 1);
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))
        return version(argc, argv);
    for (const struct loom_cli_command *c = loom_cli_commands; c->name; c++)
        if (!strcmp(argv[1], c->name))
            return loom_cli_signal_exit(check_stdout(c->name, c->main(argc - 1, argv + 1), c->trouble));
    static const struct loom_cli_option top[] = {
        {"-h", LOOM_CLI_FLAG}, {"--help", LOOM_CLI_FLAG}, {"--version", LOOM_CLI_FLAG}, {NULL, LOOM_CLI_FLAG}};
    const char *near = loom_cli_nearest_command(argv[1]);
    if (argv[1][0] == '-')
        loom_cli_unknown(NULL, top, argv[1], "options come after the command: loom COMMAND --help lists them");
    else {
        fputs("loom: unknown command ", stderr);
        end_named(loom_cli_put_arg(argv[1]), near);
    }
    usage(stderr);
    return 2;
}
