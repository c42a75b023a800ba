/* quantize.c — `loom quantize [-t N] [--imatrix FILE] [--tensor-type PATTERN=TYPE]... IN.gguf OUT.gguf TYPE`:
 * convert an F32/F16/BF16 model with one of llama.cpp's recipes (loom_quantize), optionally steered by an
 * importance matrix and per-tensor type overrides as llama-quantize takes them, with a progress bar on stderr;
 * the output appears atomically (temporary file, fsync, rename). Ctrl+C, SIGTERM or SIGHUP stops it with
 * nothing written. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void quantize_usage(FILE *f)
{
    fprintf(f, "usage: loom quantize [-t THREADS] [--imatrix FILE] [--tensor-type PATTERN=TYPE]... IN.gguf OUT.gguf "
               "TYPE\n  TYPE:");
    for (int i = 0; loom_quantize_recipe(i); i++)
        fprintf(f, " %s", loom_quantize_recipe(i));
    fprintf(f, "\n  per-tensor types as llama.cpp's llama-quantize chooses them, the bytes it writes\n"
               "  -t THREADS                 worker threads (default: all online CPUs; --threads too)\n"
               "  --imatrix FILE             importance matrix (GGUF from llama-imatrix) steering the quantizers\n"
               "  --tensor-type PATTERN=TYPE tensors whose name matches PATTERN (a POSIX extended regular\n"
               "                             expression, lowercased; \\d is [0-9]) take TYPE (q8_0, q6_k, f16, ...);\n"
               "                             repeatable, the first match wins\n");
}

struct quantize_progress {
    int tty, last; /* last: percent drawn (tty) or decile printed */
    int open_line; /* a bar is drawn on a terminal line not yet ended */
    double t0; /* loom_cli_now() at the start */
};

/* A redrawn bar on a terminal, one line per tenth of the output otherwise. */
static void quantize_progress(void *ctx, uint64_t index, uint64_t n_tensors, uint64_t done, uint64_t total,
                              const char *name)
{
    struct quantize_progress *p = ctx;
    int pct = total ? (int)(100 * done / total) : 100;
    if (p->tty) {
        char bar[31];
        for (int i = 0; i < 30; i++)
            bar[i] = i < pct * 30 / 100 ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\rquantize [%s] %3d%%  %" PRIu64 "/%" PRIu64 " %-40.40s %6.1f s", bar, pct, index, n_tensors,
                name, loom_cli_now() - p->t0);
        if (index == n_tensors)
            fputc('\n', stderr);
        p->open_line = index != n_tensors;
        return;
    }
    if (pct / 10 == p->last && index < n_tensors)
        return;
    p->last = pct / 10;
    fprintf(stderr, "quantize: %3d%%  tensor %" PRIu64 "/%" PRIu64 " %s  (%.1f s)\n", pct, index, n_tensors, name,
            loom_cli_now() - p->t0);
}

/* What quantize takes besides IN.gguf OUT.gguf TYPE. */
static const struct loom_cli_option QUANTIZE_OPTIONS[] = {
    {"-t", LOOM_CLI_VALUE}, {"--threads", LOOM_CLI_VALUE}, {"--imatrix", LOOM_CLI_ONE},
    {"--tensor-type", LOOM_CLI_VALUE}, {NULL, LOOM_CLI_VALUE}};

/* One option with its value v (NULL: the command line ended) into *threads or o (tensor_types points into
 * types[]), each checked here, before any file is read. 0, or the exit status with the message printed. */
static int quantize_option(const char *opt, const char *v, int *threads, loom_quantize_options *o,
                           const char **types)
{
    long long t;
    loom_error err = {0};
    int imatrix = !strcmp(opt, "--imatrix");
    if (!imatrix && strcmp(opt, "-t") && strcmp(opt, "--threads") && strcmp(opt, "--tensor-type")) {
        loom_cli_unhandled("quantize", opt);
    } else if (!strcmp(opt, "-t") || !strcmp(opt, "--threads")) {
        if (!loom_cli_parse_int(v, 1, LOOM_CLI_THREADS_MAX, &t)) {
            *threads = (int)t;
            return 0;
        }
        fprintf(stderr, "loom quantize: %s expects an integer in [1, %d], found %s%s%s\n", opt, LOOM_CLI_THREADS_MAX,
                LOOM_CLI_FOUND(v));
    } else if (!v) {
        fprintf(stderr, "loom quantize: %s expects %s, found the end of the command line\n", opt,
                imatrix ? "an imatrix GGUF file" : "PATTERN=TYPE");
    } else if (imatrix) { /* a second, different one is refused by the parser (LOOM_CLI_ONE) */
        o->imatrix = v;
        return 0;
    } else if (loom_quantize_check_tensor_type(v, &err) != LOOM_OK) {
        fprintf(stderr, "loom quantize: --tensor-type: %s\n", err.msg);
        return err.code == LOOM_E_NOMEM ? 1 : 2;
    } else {
        types[o->n_tensor_types++] = v;
        return 0;
    }
    return 2;
}

/* Parse the options and the three operands into pos[]; 0, or the exit status for a usage error (-1: help printed). */
static int quantize_args(int argc, char **argv, int *threads, const char *pos[3], loom_quantize_options *o,
                         const char **types)
{
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const struct loom_cli_option *opt;
        const char *v;
        int rc = 0;
        switch (loom_cli_next_arg("quantize", QUANTIZE_OPTIONS, argc, argv, &i, &opt, &v)) {
        case LOOM_CLI_ARG_HELP:
            quantize_usage(stdout);
            return -1;
        case LOOM_CLI_ARG_OPTION:
            rc = quantize_option(opt->name, v, threads, o, types);
            break;
        case LOOM_CLI_ARG_OPERAND:
            if (n_pos == 3) {
                char why[512];
                snprintf(why, sizeof why, "IN.gguf OUT.gguf TYPE are '%.150s' '%.150s' '%.150s' already", pos[0],
                         pos[1], pos[2]);
                loom_cli_unexpected("quantize", QUANTIZE_OPTIONS, argv[i], why, "IN.gguf OUT.gguf TYPE");
                quantize_usage(stderr);
                return 2;
            }
            pos[n_pos++] = argv[i];
            break;
        default: /* an unknown option, named */
            quantize_usage(stderr);
            return 2;
        }
        if (rc)
            return rc;
    }
    if (n_pos != 3) {
        static const char *const missing[3] = {"IN.gguf, OUT.gguf and TYPE are", "OUT.gguf and TYPE are", "TYPE is"};
        fprintf(stderr, "loom quantize: %s missing (expected IN.gguf OUT.gguf TYPE)\n", missing[n_pos]);
        quantize_usage(stderr);
        return 2;
    }
    for (int k = 0; k < 2; k++)
        if (!*pos[k]) {
            fprintf(stderr, "loom quantize: %s expects a file name, found ''\n", k ? "OUT.gguf" : "IN.gguf");
            return 2;
        }
    return 0;
}

/* loom_quantize_options.notice: what llama-quantize warns about, and the closing counts, one line each. */
static void quantize_notice(void *ctx, const char *message)
{
    struct quantize_progress *p = ctx;
    fprintf(stderr, "%sloom quantize: %s\n", p->open_line ? "\n" : "", message);
    p->open_line = 0;
}

/* The conversion once the arguments are parsed: the exit status. */
static int quantize_run(const char *pos[3], int threads, loom_quantize_options *qo)
{
    int rc;
    const char *recipe = loom_cli_listed(pos[2], loom_quantize_recipe);
    if (!recipe) {
        fprintf(stderr, "loom quantize: TYPE expects one of the types listed below, found '%s'\n", pos[2]);
        quantize_usage(stderr);
        return 2;
    }
    const char *const inputs[2] = {pos[0], qo->imatrix}, *const what[2] = {"input", "importance matrix"};
    if ((rc = loom_cli_check_output("quantize", pos[1], inputs, what, 2)) != 0)
        return rc;
    loom_cli_signals_install();
    loom_error err = {0};
    loom_gguf *in = NULL;
    if (loom_gguf_open_model(pos[0], &in, &err) != LOOM_OK) {
        fprintf(stderr, "loom quantize: %s: %s\n", pos[0], err.msg);
        return 1;
    }
    loom_cli_gguf_warnings("quantize", pos[0], in);
    struct quantize_progress prog = {.tty = isatty(STDERR_FILENO), .last = -1};
    prog.t0 = loom_cli_now();
    qo->n_threads = threads;
    qo->progress = quantize_progress;
    qo->progress_ctx = &prog;
    qo->abort = loom_cli_abort;
    qo->notice = quantize_notice;
    qo->notice_ctx = &prog;
    rc = loom_quantize(in, recipe, pos[1], qo, &err);
    if (prog.open_line)
        fputc('\n', stderr);
    if (rc == LOOM_E_CANCELLED)
        fprintf(stderr, "loom quantize: interrupted (%s): %s not written\n", loom_cli_signal_name(), pos[1]);
    else if (rc != LOOM_OK)
        fprintf(stderr, "loom quantize: %s -> %s (%s): %s\n", pos[0], pos[1], recipe, err.msg);
    else
        fprintf(stderr, "loom quantize: wrote %s (%s) in %.1f s\n", pos[1], recipe, loom_cli_now() - prog.t0);
    loom_gguf_close(in);
    return rc == LOOM_OK ? 0 : rc == LOOM_E_CANCELLED ? loom_cli_stopped_status() : 1;
}

int loom_cli_quantize(int argc, char **argv)
{
    const char *pos[3];
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = n_cpu > 0 ? (int)n_cpu : 1;
    loom_quantize_options qo = {0};
    const char **types = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *types);
    if (!types) {
        fprintf(stderr, "loom quantize: out of memory\n");
        return 1;
    }
    qo.tensor_types = types;
    int rc = quantize_args(argc, argv, &threads, pos, &qo, types);
    if (!rc)
        rc = quantize_run(pos, threads, &qo);
    free(types);
    return rc < 0 ? 0 : rc;
}
