/* synth.c — `loom synth`: write a synthetic random-weight qwen35 / qwen35moe GGUF model of a preset geometry
 * (test models; loom_synthesize), or with --sparse only its metadata and tensor table (split with --split),
 * printing progress on stderr. Ctrl+C, SIGTERM or SIGHUP stops it with nothing written. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "cli/default_model.h"

static void synth_usage(FILE *f)
{
    fprintf(f, "usage: loom synth --preset NAME [--type f32|f16|bf16|TYPE] [--router uniform|skewed] [--seed N] "
               "[--vocab FILE] [--sparse [--split N]] -o OUT.gguf\n"
               "       loom synth --generator-version\n"
               "  -o OUT.gguf: the file written (--output OUT.gguf too)\n"
               "  TYPE: a loom quantize TYPE (Q4_K_M, ...), written directly: the bytes of f32 then loom quantize\n"
               "  --sparse: metadata and tensor table only; the tensor data is a hole that reads as zeros (almost no\n"
               "            disk, no generation time): any geometry for admission and loom inspect, not a model to run\n"
               "  --split N: with --sparse, N parts OUT-0000k-of-0000N.gguf as llama.cpp's gguf-split writes them\n"
               "  presets:");
    for (int i = 0; loom_synth_preset(i); i++)
        fprintf(f, " %s", loom_synth_preset(i));
    fprintf(f, "\n  --router: the experts' router of a MoE preset (default uniform)\n"
               "  --vocab defaults to $LOOM_REF/src/models/ggml-vocab-qwen35.gguf (LOOM_REF defaults to $LOOM_CACHE/ref, LOOM_CACHE to ~/.cache/loom)\n");
}

struct synth_cli_progress {
    const loom_synth_options *par; /* for the opening line */
    const char *vocab, *out;
    int last_decile;               /* -1 before the first call */
    double t0;                     /* loom_cli_now() at the start */
};

/* The opening line once writing starts (after loom_synthesize checked the options), then one line per tenth
 * of the data written. */
static void synth_cli_progress(void *ctx, uint64_t index, uint64_t n_tensors, uint64_t done, uint64_t total,
                               const char *name)
{
    struct synth_cli_progress *p = ctx;
    if (p->last_decile < 0)
        fprintf(stderr, "synth: preset %s, type %s, seed %llu, vocab %s -> %s%s\n", p->par->preset, p->par->type,
                (unsigned long long)p->par->seed, p->vocab, p->out, p->par->sparse ? " (sparse: no tensor data)" : "");
    int decile = total ? (int)(10 * done / total) : 10;
    if (decile == p->last_decile && index < n_tensors)
        return;
    p->last_decile = decile;
    if (index < n_tensors)
        fprintf(stderr, "synth: %3d%%  tensor %" PRIu64 "/%" PRIu64 " %s  (%.1f s)\n", decile * 10, index, n_tensors,
                name, loom_cli_now() - p->t0);
    else /* the closing call */
        fprintf(stderr, "synth: %3d%%  all %" PRIu64 " tensors  (%.1f s)\n", decile * 10, n_tensors,
                loom_cli_now() - p->t0);
}

/* The file's type name ("F16") for a --type value ("f16", or a quantization recipe "Q4_K_M"), or NULL. */
static const char *synth_cli_type(const char *s)
{
    static const char *const types[][2] = {{"f32", "F32"}, {"f16", "F16"}, {"bf16", "BF16"}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcasecmp(s, types[i][0]))
            return types[i][1];
    return loom_cli_listed(s, loom_quantize_recipe);
}

/* What synth takes. */
static const struct loom_cli_option SYNTH_OPTIONS[] = {
    {"--preset", LOOM_CLI_VALUE}, {"--type", LOOM_CLI_VALUE}, {"--router", LOOM_CLI_VALUE},
    {"--seed", LOOM_CLI_VALUE}, {"--vocab", LOOM_CLI_VALUE}, {"--sparse", LOOM_CLI_FLAG}, {"--split", LOOM_CLI_VALUE},
    {"-o", LOOM_CLI_ONE}, {"--output", LOOM_CLI_ONE}, {"--generator-version", LOOM_CLI_FLAG},
    {NULL, LOOM_CLI_VALUE}};

struct synth_args {
    loom_synth_options par;
    const char *out, *vocab;
    int version; /* --generator-version */
};

/* Apply one option (v NULL for a flag) to the synth_args at ctx. 0, -1 with the message printed, or
 * LOOM_CLI_UNHANDLED. */
static int synth_set(void *ctx, const char *a, const char *v)
{
    struct synth_args *s = ctx;
    const char *expected = NULL; /* set when v is not what a takes */
    long long n;
    int *flag = !strcmp(a, "--sparse") ? &s->par.sparse : !strcmp(a, "--generator-version") ? &s->version : NULL;
    if (flag)
        *flag = 1;
    else if (!strcmp(a, "--preset"))
        s->par.preset = v;
    else if ((!strcmp(a, "--vocab") || !strcmp(a, "-o") || !strcmp(a, "--output")) && !*v)
        expected = "a file name"; /* never empty */
    else if (!strcmp(a, "--vocab") || !strcmp(a, "-o") || !strcmp(a, "--output"))
        *(a[2] == 'v' ? &s->vocab : &s->out) = v;
    else if (!strcmp(a, "--router") && (!strcmp(v, "uniform") || !strcmp(v, "skewed")))
        s->par.router = v;
    else if (!strcmp(a, "--router"))
        expected = "uniform or skewed";
    else if (!strcmp(a, "--type"))
        expected = (s->par.type = synth_cli_type(v)) ? NULL : "f32, f16, bf16 or a quantize TYPE (Q4_K_M, ...)";
    else if (!strcmp(a, "--split") && loom_cli_parse_int(v, 1, 65535, &n))
        expected = "an integer in [1, 65535]";
    else if (!strcmp(a, "--split"))
        s->par.n_split = (uint32_t)n;
    else if (!strcmp(a, "--seed"))
        expected = loom_cli_parse_u64(v, &s->par.seed) ? "an integer in [0, 2^64)" : NULL;
    else
        return LOOM_CLI_UNHANDLED;
    if (!expected)
        return 0;
    fprintf(stderr, "loom synth: %s expects %s, found '%s'\n", a, expected, v);
    return -1;
}

/* The options that go together, and the preset (its spelling in the list put in s->par.preset): 0, or 2 with the
 * message printed. */
static int synth_check_args(struct synth_args *s)
{
    if (s->par.n_split > 1 && !s->par.sparse) {
        fprintf(stderr, "loom synth: --split %u needs --sparse (split a generated model with tools/split_model)\n",
                s->par.n_split);
        return 2;
    }
    if (!s->par.preset || !s->out) {
        fprintf(stderr, "loom synth: %s required\n", !s->par.preset && !s->out ? "--preset NAME and -o OUT.gguf are"
                                                     : !s->out ? "-o OUT.gguf is" : "--preset NAME is");
        synth_usage(stderr);
        return 2;
    }
    const char *preset = loom_cli_listed(s->par.preset, loom_synth_preset);
    if (!preset) {
        fprintf(stderr, "loom synth: --preset expects one of the presets listed below, found '%s'\n", s->par.preset);
        synth_usage(stderr);
        return 2;
    }
    s->par.preset = preset;
    return 0;
}

/* Part k (1-based) of n of OUT into buf[cap], as llama.cpp's gguf-split names it: OUT less .gguf, then
 * -0000k-of-0000n.gguf. */
static void synth_part_name(const char *out, uint32_t k, uint32_t n, char *buf, size_t cap)
{
    size_t len = strlen(out);
    if (len >= 5 && !strcmp(out + len - 5, ".gguf"))
        len -= 5;
    snprintf(buf, cap, "%.*s-%05u-of-%05u.gguf", (int)len, out, k, n);
}

/* Each file synth is to write (OUT, or each part of a split), checked before any work (loom_cli_check_output):
 * 0, or the exit status with the message printed. */
static int synth_check_outputs(const struct synth_args *s, const char *vocab)
{
    const char *const what[1] = {"vocabulary"};
    char part[4200];
    if (s->par.n_split <= 1)
        return loom_cli_check_output("synth", s->out, &vocab, what, 1);
    for (uint32_t k = 1; k <= s->par.n_split; k++) {
        synth_part_name(s->out, k, s->par.n_split, part, sizeof part);
        int rc = loom_cli_check_output("synth", part, &vocab, what, 1);
        if (rc)
            return rc;
    }
    return 0;
}

/* Write the model, with progress on stderr: the exit status. */
static int synth_write(loom_synth_options *par, const char *out)
{
    loom_error err = {0};
    struct synth_cli_progress prog = {.par = par, .vocab = par->vocab_path, .out = out, .last_decile = -1};
    prog.t0 = loom_cli_now();
    par->progress = synth_cli_progress;
    par->progress_ctx = &prog;
    par->abort = loom_cli_abort;
    loom_cli_signals_install();
    int rc = loom_synthesize(par, out, &err);
    if (rc == LOOM_E_CANCELLED) {
        fprintf(stderr, "loom synth: interrupted (%s): %s not written\n", loom_cli_signal_name(), out);
        return loom_cli_stopped_status();
    }
    if (rc != LOOM_OK) { /* the library's synth messages open with "synth: ": say it once */
        fprintf(stderr, "loom synth: %s\n", strncmp(err.msg, "synth: ", 7) ? err.msg : err.msg + 7);
        return rc == LOOM_E_ARG ? 2 : 1; /* an option the preset does not take is a usage error */
    }
    if (par->n_split <= 1) {
        fprintf(stderr, "synth: wrote %s%s in %.1f s\n", out, par->sparse ? " (sparse)" : "", loom_cli_now() - prog.t0);
        return 0;
    }
    char first[4200]; /* the part a reader opens */
    synth_part_name(out, 1, par->n_split, first, sizeof first);
    fprintf(stderr, "synth: wrote %u sparse parts, the first %s, in %.1f s\n", par->n_split, first,
            loom_cli_now() - prog.t0);
    return 0;
}

int loom_cli_synth(int argc, char **argv)
{
    struct synth_args s = {.par = {.type = "F16", .seed = LOOM_SYNTH_DEFAULT_SEED}};
    int rc = loom_cli_parse_options("synth", argc, argv, SYNTH_OPTIONS, NULL, synth_set, &s);
    if (rc) {
        synth_usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    if (s.version && argc > 2) {
        fputs("loom synth: --generator-version comes alone (it prints the generator's version)\n", stderr);
        return 2;
    }
    if (s.version) {
        printf("%d\n", LOOM_SYNTH_VERSION);
        return 0;
    }
    if ((rc = synth_check_args(&s)) != 0)
        return rc;
    char vocab_buf[4096];
    loom_error err = {0};
    if (!s.vocab && loom_cli_default_vocab(vocab_buf, sizeof vocab_buf, &err) != LOOM_OK) {
        fprintf(stderr, "loom synth: %s\n", err.msg);
        return 1;
    }
    s.par.vocab_path = s.vocab ? s.vocab : vocab_buf;
    if ((rc = synth_check_outputs(&s, s.par.vocab_path)) != 0)
        return rc;
    return synth_write(&s.par, s.out);
}
