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

/* One option with its value v (NULL: the command line ended) into par, *out or *vocab. 0, or -1 with the message
 * printed. */
static int synth_option(const char *a, const char *v, loom_synth_options *par, const char **out, const char **vocab)
{
    static const struct {
        const char *name, *expected; /* the option, what its value must be */
    } opts[] = {{"--preset", "a preset name"}, {"-o", "a file name"}, {"--output", "a file name"},
                {"--vocab", "a file name"}, {"--router", "uniform or skewed"},
                {"--type", "f32, f16, bf16 or a quantize TYPE (Q4_K_M, ...)"}, {"--split", "an integer in [1, 65535]"},
                {"--seed", "an integer in [0, 2^64)"}};
    size_t k = 0;
    while (k < sizeof opts / sizeof opts[0] && strcmp(a, opts[k].name))
        k++;
    if (k == sizeof opts / sizeof opts[0]) {
        if (a[0] == '-')
            loom_cli_unknown_option("synth", a, NULL);
        else
            fprintf(stderr, "loom synth: unexpected argument '%s'\n", a);
        return -1;
    }
    long long n;
    int file = !strcmp(opts[k].expected, "a file name"), ok = v && (*v || !file); /* a file name is never empty */
    if (ok && !strcmp(a, "--preset"))
        par->preset = v;
    else if (ok && file)
        *(strcmp(a, "--vocab") ? out : vocab) = v;
    else if (ok && !strcmp(a, "--router"))
        ok = (!strcmp(v, "uniform") || !strcmp(v, "skewed")) && (par->router = v);
    else if (ok && !strcmp(a, "--type"))
        ok = (par->type = synth_cli_type(v)) != NULL;
    else if (ok && !strcmp(a, "--split"))
        ok = !loom_cli_parse_int(v, 1, 65535, &n) && (par->n_split = (uint32_t)n);
    else if (ok) /* --seed */
        ok = !loom_cli_parse_u64(v, &par->seed);
    if (ok)
        return 0;
    fprintf(stderr, "loom synth: %s expects %s, found %s%s%s\n", a, opts[k].expected, LOOM_CLI_FOUND(v));
    return -1;
}

int loom_cli_synth(int argc, char **argv)
{
    const char *out = NULL, *vocab = NULL;
    loom_synth_options par = {.type = "F16", .seed = LOOM_SYNTH_DEFAULT_SEED};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--generator-version")) {
            if (argc == 2) {
                printf("%d\n", LOOM_SYNTH_VERSION);
                return 0;
            }
            fputs("loom synth: --generator-version comes alone (it prints the generator's version)\n", stderr);
            return 2;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            synth_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--sparse")) { /* the one option without a value */
            par.sparse = 1;
        } else if (synth_option(a, i + 1 < argc ? argv[i + 1] : NULL, &par, &out, &vocab) != 0) {
            synth_usage(stderr);
            return 2;
        } else {
            i++;
        }
    }
    if (par.n_split > 1 && !par.sparse) {
        fprintf(stderr, "loom synth: --split %u needs --sparse (split a generated model with tools/split_model)\n",
                par.n_split);
        return 2;
    }
    if (!par.preset || !out) {
        fprintf(stderr, "loom synth: %s required\n", !par.preset && !out ? "--preset NAME and -o OUT.gguf are"
                                                   : !out ? "-o OUT.gguf is" : "--preset NAME is");
        synth_usage(stderr);
        return 2;
    }
    const char *preset = loom_cli_listed(par.preset, loom_synth_preset);
    if (!preset) {
        fprintf(stderr, "loom synth: --preset expects one of the presets listed below, found '%s'\n", par.preset);
        synth_usage(stderr);
        return 2;
    }
    par.preset = preset;
    char vocab_buf[4096];
    loom_error err = {0};
    if (!vocab) {
        if (loom_cli_default_vocab(vocab_buf, sizeof vocab_buf, &err) != LOOM_OK) {
            fprintf(stderr, "loom synth: %s\n", err.msg);
            return 1;
        }
        vocab = vocab_buf;
    }
    par.vocab_path = vocab;
    struct synth_cli_progress prog = {.par = &par, .vocab = vocab, .out = out, .last_decile = -1};
    prog.t0 = loom_cli_now();
    par.progress = synth_cli_progress;
    par.progress_ctx = &prog;
    par.abort = loom_cli_abort;
    loom_cli_signals_install();
    int rc = loom_synthesize(&par, out, &err);
    if (rc == LOOM_E_CANCELLED) {
        fprintf(stderr, "loom synth: interrupted (%s): %s not written\n", loom_cli_signal_name(), out);
        return loom_cli_stopped_status();
    }
    if (rc != LOOM_OK) { /* the library's synth messages open with "synth: ": say it once */
        fprintf(stderr, "loom synth: %s\n", strncmp(err.msg, "synth: ", 7) ? err.msg : err.msg + 7);
        return rc == LOOM_E_ARG ? 2 : 1; /* an option the preset does not take is a usage error */
    }
    if (par.n_split > 1) { /* name the first part, the file a reader opens (OUT less .gguf, plus the split suffix) */
        size_t len = strlen(out);
        if (len >= 5 && !strcmp(out + len - 5, ".gguf"))
            len -= 5;
        fprintf(stderr, "synth: wrote %u sparse parts, the first %.*s-%05u-of-%05u.gguf, in %.1f s\n", par.n_split,
                (int)len, out, 1u, par.n_split, loom_cli_now() - prog.t0);
    } else
        fprintf(stderr, "synth: wrote %s%s in %.1f s\n", out, par.sparse ? " (sparse)" : "", loom_cli_now() - prog.t0);
    return 0;
}
