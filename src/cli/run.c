/* run.c — `loom run`: generate text from a prompt with one model and one session. The prompt is user data
 * (no special tokens), prefilled in one batch; then tokens are sampled and decoded one by one, streamed as text,
 * until N tokens, an end-of-generation token or the end of the context. Timing and peak RSS go to stderr. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/default_model.h"
#include "loom.h"
#include "model/model.h"
#include "sample/sample.h"
#include "text/tokenizer.h"
#include "util/error.h"

struct run_opts {
    const char *model;  /* -m; NULL = the default model */
    const char *prompt; /* -p */
    int n_gen;          /* -n: tokens to generate at most */
    int n_threads;      /* -t; 0 = all online CPUs */
    int n_ctx;          /* -c; 0 = prompt + n_gen */
    struct loom_sampler_params sp;
};

static const char RUN_SYNOPSIS[] =
    "usage: loom run [-m FILE] -p TEXT -n N [-t THREADS] [--temp T] [--seed S] [--top-k K] [--top-p P] [-c CTX]\n";

static void run_usage(FILE *f)
{
    fprintf(f, "%s"
               "  -m FILE     GGUF model (default: the synthetic default model, prepared on first use)\n"
               "  -p TEXT     prompt (plain text: special-token spellings stay text)\n"
               "  -n N        generate at most N tokens (stops early at end-of-generation)\n"
               "  -t THREADS  worker threads (default: all online CPUs)\n"
               "  --temp T    temperature, 0 = greedy (default 0.8)\n"
               "  --seed S    sampler seed (default 0)\n"
               "  --top-k K   keep the K most likely tokens, 0 = all (default 40)\n"
               "  --top-p P   keep the smallest set with probability >= P, 1 = all (default 0.95)\n"
               "  -c CTX      context positions (default: prompt tokens + N)\n"
               "The generated text goes to stdout; timing and peak memory to stderr.\n",
            RUN_SYNOPSIS);
}

static double run_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Parse a whole string as an integer in [lo, hi]. Returns 0 on success. */
static int run_parse_long(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Parse a whole string as a finite number in [lo, hi]. Returns 0 on success. */
static int run_parse_float(const char *s, double lo, double hi, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = (float)v;
    return 0;
}

static int run_bad_value(const char *opt, const char *val)
{
    fprintf(stderr, "loom run: invalid value '%s' for %s\n", val, opt);
    return -1;
}

/* Apply one option that takes a value. Returns 0, or -1 with a message when the option or value is invalid. */
static int run_set_option(struct run_opts *o, const char *opt, const char *val)
{
    long long v;
    if (!strcmp(opt, "-m") || !strcmp(opt, "-p")) {
        *(opt[1] == 'm' ? &o->model : &o->prompt) = val;
        return 0;
    }
    int *dst_int = !strcmp(opt, "-n") ? &o->n_gen
                 : !strcmp(opt, "-t") ? &o->n_threads
                 : !strcmp(opt, "-c") ? &o->n_ctx
                 : !strcmp(opt, "--top-k") ? &o->sp.top_k : NULL;
    if (dst_int) {
        long long lo = dst_int == &o->n_threads || dst_int == &o->n_ctx ? 1 : 0;
        if (run_parse_long(val, lo, dst_int == &o->n_threads ? 1024 : 1 << 24, &v) != 0)
            return run_bad_value(opt, val);
        *dst_int = (int)v;
        return 0;
    }
    if (!strcmp(opt, "--seed")) {
        if (run_parse_long(val, 0, INT64_MAX, &v) != 0)
            return run_bad_value(opt, val);
        o->sp.seed = (uint64_t)v;
        return 0;
    }
    float *dst_f = !strcmp(opt, "--temp") ? &o->sp.temp : !strcmp(opt, "--top-p") ? &o->sp.top_p : NULL;
    if (dst_f) {
        if (run_parse_float(val, 0.0, dst_f == &o->sp.temp ? 100.0 : 1.0, dst_f) != 0)
            return run_bad_value(opt, val);
        return 0;
    }
    fprintf(stderr, "loom run: unknown option '%s'\n", opt);
    return -1;
}

/* Returns 0 on success, 1 when help was asked for, -1 on bad arguments (message printed). */
static int run_parse_args(int argc, char **argv, struct run_opts *o)
{
    int have_n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
        if (i + 1 >= argc) {
            fprintf(stderr, "loom run: option '%s' needs a value\n", argv[i]);
            return -1;
        }
        have_n |= !strcmp(argv[i], "-n");
        if (run_set_option(o, argv[i], argv[i + 1]) != 0)
            return -1;
        i++;
    }
    if (!o->prompt || !have_n) {
        fprintf(stderr, "loom run: -p TEXT and -n N are required\n");
        return -1;
    }
    return 0;
}

/* Tokenize the prompt into a fresh array (*out, caller frees). Returns the token count or a negative code. */
static int run_tokenize(const loom_model *m, const char *text, int32_t **out, loom_error *err)
{
    size_t len = strlen(text);
    int cap = (int)(len < (1u << 24) ? len : (1u << 24)) + 16;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
        if (!ids)
            return loom_errorf(err, LOOM_E_NOMEM, "prompt: could not allocate %d token ids", cap);
        int n = loom_tokenize(m, text, len, 0, ids, cap, err);
        if (n >= 0 && n <= cap) {
            *out = ids;
            return n;
        }
        free(ids);
        if (n < 0)
            return n;
        cap = n;
    }
    return loom_errorf(err, LOOM_E_INTERNAL, "prompt: tokenizer gave a different count on the second pass");
}

struct run_stats {
    int n_prompt, n_generated, n_decoded;
    double t_prefill, t_decode;
};

/* Sample, stream and decode up to n_gen tokens after the prefill left its logits in logits[n_rows].
 * Allocates nothing. Returns LOOM_OK or a negative code. */
static int run_decode_loop(const loom_model *m, loom_session *s, struct loom_sampler *smp, float *logits,
                           int n_gen, struct run_stats *st, loom_error *err)
{
    struct loom_detok dt;
    char text[4096];
    loom_detok_init(&dt, m->tok);
    double t0 = run_now();
    int rc = LOOM_OK;
    for (int g = 0; g < n_gen; g++) {
        int32_t tok = loom_sampler_sample(smp, logits);
        if (tok < 0) {
            rc = loom_errorf(err, LOOM_E_INTERNAL, "sampler: no sampleable token in the logits row");
            break;
        }
        if (loom_model_token_is_eog(m, tok))
            break;
        int k = loom_detok_push(&dt, tok, text, (int)sizeof text);
        if (k < 0) {
            rc = loom_errorf(err, k, "detokenizer: token %d could not be decoded", (int)tok);
            break;
        }
        fwrite(text, 1, (size_t)k, stdout);
        fflush(stdout);
        st->n_generated++;
        if (g + 1 == n_gen)
            break;
        rc = loom_session_eval(s, &tok, 1, logits, LOOM_LOGITS_LAST, err);
        if (rc != LOOM_OK)
            break;
        st->n_decoded++;
    }
    st->t_decode = run_now() - t0;
    int k = loom_detok_flush(&dt, text, (int)sizeof text);
    if (k > 0)
        fwrite(text, 1, (size_t)k, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    return rc;
}

static double run_peak_rss_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

static void run_print_stats(const struct run_stats *st)
{
    fprintf(stderr, "loom run: prompt %d tokens, %.2f tok/s | decode %d tokens, %.2f tok/s (%d generated) | "
                    "peak RSS %.1f MiB\n",
            st->n_prompt, st->t_prefill > 0 ? st->n_prompt / st->t_prefill : 0.0, st->n_decoded,
            st->t_decode > 0 ? st->n_decoded / st->t_decode : 0.0, st->n_generated, run_peak_rss_mib());
}

/* Tokenize, prefill, generate. Returns LOOM_OK or a negative code with err filled. */
static int run_generate(const loom_model *m, const struct run_opts *o, loom_error *err)
{
    struct run_stats st = {0};
    int32_t *prompt = NULL;
    loom_session *s = NULL;
    struct loom_sampler *smp = NULL;
    int n_rows = loom_model_n_logits(m);
    float *logits = malloc((size_t)n_rows * sizeof(float));
    int rc = st.n_prompt = run_tokenize(m, o->prompt, &prompt, err);
    if (rc >= 0 && st.n_prompt == 0)
        rc = loom_errorf(err, LOOM_E_ARG, "-p: expected a prompt of at least one token, found empty text");
    int n_ctx = o->n_ctx ? o->n_ctx : st.n_prompt + (o->n_gen > 0 ? o->n_gen : 1);
    if (rc >= 0 && st.n_prompt > n_ctx)
        rc = loom_errorf(err, LOOM_E_RANGE, "-c: the prompt has %d tokens, the context only %d", st.n_prompt, n_ctx);
    int n_gen = o->n_gen;
    if (rc >= 0 && n_gen > n_ctx - st.n_prompt + 1) {
        n_gen = n_ctx - st.n_prompt + 1; /* the last generated token is never evaluated */
        fprintf(stderr, "loom run: the context of %d positions limits generation to %d tokens\n", n_ctx, n_gen);
    }
    if (rc >= 0 && !logits)
        rc = loom_errorf(err, LOOM_E_NOMEM, "logits: could not allocate %d floats", n_rows);
    if (rc >= 0) {
        loom_session_params sp = {.n_ctx = n_ctx, .n_threads = o->n_threads};
        s = loom_session_new(m, &sp, err);
        rc = s ? LOOM_OK : (err->code ? err->code : LOOM_E_NOMEM);
    }
    if (rc >= 0) {
        smp = loom_sampler_new(&o->sp, n_rows, loom_tokenizer_sampleable(m->tok));
        rc = smp ? LOOM_OK : loom_errorf(err, LOOM_E_NOMEM, "sampler: allocation failed");
    }
    if (rc >= 0) {
        double t0 = run_now();
        rc = loom_session_eval(s, prompt, st.n_prompt, logits, LOOM_LOGITS_LAST, err);
        st.t_prefill = run_now() - t0;
    }
    if (rc >= 0)
        rc = run_decode_loop(m, s, smp, logits, n_gen, &st, err);
    if (rc >= 0)
        run_print_stats(&st);
    loom_sampler_free(smp);
    loom_session_free(s);
    free(logits);
    free(prompt);
    return rc < 0 ? rc : LOOM_OK;
}

int loom_cli_run(int argc, char **argv)
{
    struct run_opts o = {.sp = {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 0}};
    int a = run_parse_args(argc, argv, &o);
    if (a > 0) {
        run_usage(stdout);
        return 0;
    }
    if (a < 0) {
        fprintf(stderr, "%s(loom run --help for details)\n", RUN_SYNOPSIS);
        return 2;
    }
    loom_error err = {0};
    char path[4096];
    if (!o.model) {
        if (loom_cli_default_model(path, sizeof path, &err) != LOOM_OK) {
            fprintf(stderr, "loom run: default model: %s\n", err.msg);
            return 1;
        }
        o.model = path;
    }
    loom_model *m = loom_model_load(o.model, &err);
    if (!m) {
        fprintf(stderr, "loom run: %s: %s\n", o.model, err.msg);
        return 1;
    }
    int rc = run_generate(m, &o, &err);
    loom_model_free(m);
    if (rc != LOOM_OK) {
        fprintf(stderr, "loom run: %s\n", err.msg);
        return 1;
    }
    return 0;
}
