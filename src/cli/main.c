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
               "  help     this help, or a command's options: loom help COMMAND (as loom COMMAND --help)\n"
               "environment:\n"
               "  LOOM_KERNELS=NAME           kernel set: auto (default: the best this CPU runs), scalar, avx2, avx512\n"
               "  LOOM_ORDERS=avx512|haswell  float orders to reproduce: llama.cpp's AVX-512 or AVX2 build (default: "
               "this CPU's)\n"
               "  LOOM_REF_CPU=NAME           llama.cpp's CPU build for xray, certify and bench --ref (default: the best "
               "for this CPU)\n"
               "loom COMMAND --help (or loom help COMMAND) lists a command's options; loom --version prints the "
               "version.\n"
               "An option given twice takes its last value (--stop and --tensor-type add one each time), but a\n"
               "second, different file, prompt or key (-m, -p, -o, --prompts, --imatrix, --chat-template-file,\n"
               "--api-key) is refused: loom takes one.\n");
}

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

/* Whether name is one of what the general help describes besides the commands: help, version and their option
 * spellings (loom help help: the general help). */
static int general_topic(const char *name)
{
    static const char *const topics[] = {"help", "-h", "--help", "version", "--version"};
    for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++)
        if (!strcmp(name, topics[i]))
            return 1;
    return 0;
}

/* loom help [COMMAND]: the general help (also for help and version themselves), or the command's own (as its
 * --help); an unknown one is refused. A failed write is help's: `loom help: writing standard output`, status 1. */
static int help(int argc, char **argv)
{
    if (argc < 3 || (argc == 3 && general_topic(argv[2]))) {
        usage(stdout);
        return check_stdout("help", 0, 1);
    }
    for (const struct loom_cli_command *c = loom_cli_commands; c->name && argc == 3; c++)
        if (!strcmp(argv[2], c->name)) {
            char *args[] = {argv[2], "--help", NULL};
            return check_stdout("help", c->main(2, args), 1);
        }
    const char *near = argc == 3 ? loom_cli_nearest_command(argv[2]) : NULL;
    if (argc > 3)
        fprintf(stderr, "loom help: expects at most one command, found '%s' after '%s'\n", argv[3], argv[2]);
    else
        fprintf(stderr, "loom help: expects a command, found '%s'%s%s%s\n", argv[2], near ? " (did you mean " : "",
                near ? near : "", near ? "?)" : "");
    usage(stderr);
    return 2;
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
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        if (argc > 2) {
            fprintf(stderr, "loom: %s takes no arguments, found '%s'\n", argv[1], argv[2]);
            return 2;
        }
        printf("loom %s\n", loom_version());
        return check_stdout(argv[1], 0, 1);
    }
    for (const struct loom_cli_command *c = loom_cli_commands; c->name; c++)
        if (!strcmp(argv[1], c->name))
            return loom_cli_select_kernels()
                       ? 2
                       : loom_cli_signal_exit(check_stdout(c->name, c->main(argc - 1, argv + 1), c->trouble));
    static const struct loom_cli_option top[] = {
        {"-h", LOOM_CLI_FLAG}, {"--help", LOOM_CLI_FLAG}, {"--version", LOOM_CLI_FLAG}, {NULL, LOOM_CLI_FLAG}};
    const char *near = loom_cli_nearest_command(argv[1]);
    if (argv[1][0] == '-')
        loom_cli_unknown(NULL, top, argv[1], "options come after the command: loom COMMAND --help lists them");
    else
        fprintf(stderr, "loom: unknown command '%s'%s%s%s\n", argv[1], near ? " (did you mean " : "",
                near ? near : "", near ? "?)" : "");
    usage(stderr);
    return 2;
}
