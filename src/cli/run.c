/* run.c — `loom run`: generate text from a prompt with one model and one session. The prompt is user data
 * (no special tokens), prefilled in requests of RUN_PREFILL_TOKENS; then tokens are sampled and decoded one by one,
 * streamed as text, until N tokens, an end-of-generation token, a stop string or the end of the context. Timing
 * and peak RSS go to stderr. Ctrl+C, SIGTERM or SIGHUP stops it at the next layer: the text so far, the timing
 * line (during the prefill: how many prompt tokens were evaluated), status 130 / 143 / 129. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "loom.h"

#define RUN_TEXT_MAX 4096 /* bytes of decoded text per token */
/* Prompt tokens per prefill request: a multiple of the session's chunks in both numerics (128 tokens canonical, the
 * reference's 512-token micro-batches), so the split changes no bit, and an interrupted prefill keeps, and says,
 * what its finished requests evaluated (a request is all or nothing). */
#define RUN_PREFILL_TOKENS 512

struct run_opts {
    const char *model;  /* -m; NULL = the default model */
    const char *prompt; /* -p */
    int n_gen;          /* -n: tokens to generate at most; -1 until given */
    int n_threads;      /* -t; 0 = all online CPUs */
    int n_ctx;          /* -c; 0 = prompt + n_gen */
    struct loom_cli_sampler_opts so; /* --temp, --seed, --top-k, ..., --stop */
    enum loom_numerics numerics;   /* --numerics; 0 = canonical */
    struct loom_cli_model_opts mo; /* --check-tensors, --mem-budget, --stats */
};

static const char RUN_SYNOPSIS[] =
    "usage: loom run [-m FILE] -p TEXT -n N [-t THREADS] [-c CTX] [--temp T] [--seed S] [--top-k K] [--top-p P]\n"
    "                [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--presence-penalty A]\n"
    "                [--frequency-penalty A] [--stop STRING]... [--check-tensors]\n"
    "                [--mem-budget SIZE [--read-ahead MODE] [--stats]] [--numerics MODE] [--cache-type-k TYPE]\n";

static void run_usage(FILE *f)
{
    fprintf(f, "%s"
               "  -m FILE     GGUF model (default: the synthetic default model, prepared on first use)\n"
               "  -p TEXT     prompt (plain text: special-token spellings stay text)\n"
               "  -n N        generate at most N tokens (stops early at end-of-generation)\n"
               "  -t THREADS  worker threads (default: all online CPUs)\n"
               "  -c CTX      context positions (default: prompt tokens + N)\n"
               LOOM_CLI_SAMPLER_USAGE
               "  --numerics MODE        float order: canonical (default: every token in the one-token order,\n"
               "                         however the prompt is split) or reference (llama.cpp's batch orders in\n"
               "                         micro-batches of 512: greedy text equal to llama.cpp's with flash\n"
               "                         attention off, F16 K/V and ubatch 512)\n"
               LOOM_CLI_MODEL_USAGE
               "The generated text goes to stdout; timing and peak memory to stderr.\n",
            RUN_SYNOPSIS);
}

/* What run takes: run_set_option's options, then the model options. */
static const struct loom_cli_option RUN_OPTIONS[] = {
    {"-m", LOOM_CLI_ONE}, {"-p", LOOM_CLI_ONE_TEXT}, {"-n", LOOM_CLI_VALUE}, {"-t", LOOM_CLI_VALUE},
    {"-c", LOOM_CLI_VALUE}, {"--numerics", LOOM_CLI_VALUE}, LOOM_CLI_SAMPLER_TABLE, LOOM_CLI_MODEL_TABLE,
    {NULL, LOOM_CLI_VALUE}};

/* Apply one of run's own options (each takes a value). Returns 0, -1 with a message when the value is invalid, or
 * LOOM_CLI_UNHANDLED. */
static int run_set_option(void *opts, const char *opt, const char *val)
{
    struct run_opts *o = opts;
    long long v;
    if (!strcmp(opt, "-m") || !strcmp(opt, "-p")) {
        if (opt[1] == 'p' && !*val) {
            fputs("loom run: -p expects a prompt of at least one token, found ''\n", stderr);
            return -1;
        }
        *(opt[1] == 'm' ? &o->model : &o->prompt) = val;
        return 0;
    }
    if (!strcmp(opt, "--numerics"))
        return loom_cli_numerics("run", val, &o->numerics);
    int *dst_int = !strcmp(opt, "-n") ? &o->n_gen : !strcmp(opt, "-t") ? &o->n_threads
                 : !strcmp(opt, "-c") ? &o->n_ctx : NULL;
    if (dst_int) {
        long long lo = dst_int == &o->n_gen ? 0 : 1;
        long long hi = dst_int == &o->n_threads ? LOOM_CLI_THREADS_MAX : 1 << 24;
        if (loom_cli_parse_int(val, lo, hi, &v) != 0) {
            fprintf(stderr, "loom run: %s expects an integer in [%lld, %lld], found '%s'\n", opt, lo, hi, val);
            return -1;
        }
        *dst_int = (int)v;
        return 0;
    }
    int taken = loom_cli_sampler_option("run", &o->so, opt, val); /* the rest of the table */
    return taken > 0 ? 0 : taken < 0 ? -1 : LOOM_CLI_UNHANDLED;
}

/* Returns 0 on success, 1 when help was asked for, -1 on bad arguments (message printed). */
static int run_parse_args(int argc, char **argv, struct run_opts *o)
{
    static const char *const missing[3] = {
        "-p TEXT is required (the prompt)", "-n N is required (how many tokens to generate)",
        "-p TEXT and -n N are required (the prompt, and how many tokens to generate)"};
    int rc = loom_cli_parse_options("run", argc, argv, RUN_OPTIONS, &o->mo, run_set_option, o);
    if (rc == 0 && (!o->prompt || o->n_gen < 0)) {
        fprintf(stderr, "loom run: %s\n", missing[!o->prompt && o->n_gen < 0 ? 2 : !o->prompt ? 0 : 1]);
        return -1;
    }
    return rc;
}

/* Tokenize the prompt into a fresh array (*out, caller frees). Returns the token count or a negative code. */
static int run_tokenize(const loom_tokenizer *tok, const char *text, int32_t **out, loom_error *err)
{
    size_t len = strlen(text);
    int cap = (int)(len < (1u << 24) ? len : (1u << 24)) + 16;
    for (int attempt = 0; attempt < 2; attempt++) {
        int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
        if (!ids)
            return loom_errorf(err, LOOM_E_NOMEM, "prompt: could not allocate %d token ids", cap);
        int n = loom_tokenizer_encode(tok, text, len, LOOM_SPECIAL_DATA, ids, cap, err);
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
    int n_prompt, n_prefilled, n_generated, n_decoded; /* n_prefilled: prompt tokens evaluated (< n_prompt: stopped) */
    double t_prefill, t_decode;
    struct loom_cli_expert_trace trace; /* --stats under a memory budget: figures per token */
};

/* Pass decoded text[len] through the stop matcher and write what it releases to stdout.
 * Returns 1 when a stop string completed, 0, or a negative code. */
static int run_emit(loom_stop *stop, const char *text, int len, loom_error *err)
{
    char out[RUN_TEXT_MAX + LOOM_CLI_STOP_MAX_LEN];
    int stopped;
    int k = loom_stop_feed(stop, text, (size_t)len, out, sizeof out, &stopped, err);
    if (k < 0)
        return k;
    fwrite(out, 1, (size_t)k, stdout);
    fflush(stdout);
    return stopped;
}

/* End of generation without a stop string: the detokenizer's (unless dt is NULL) and the stop matcher's held
 * text. Returns LOOM_OK or a negative code. */
static int run_flush(loom_detok *dt, loom_stop *stop, loom_error *err)
{
    char text[RUN_TEXT_MAX];
    int k = dt ? loom_detok_flush(dt, text, (int)sizeof text) : 0;
    int rc = k > 0 ? run_emit(stop, text, k, err) : LOOM_OK;
    if (rc == 1)
        return LOOM_OK;
    k = rc < 0 ? rc : loom_stop_flush(stop, text, sizeof text, err);
    if (k > 0)
        fwrite(text, 1, (size_t)k, stdout);
    return k < 0 ? k : LOOM_OK;
}

/* Sample, stream and decode up to n_gen tokens after the prefill left its logits in logits[n_rows].
 * Allocates nothing. Returns LOOM_OK, LOOM_E_CANCELLED when a signal stopped it (the text so far printed, an
 * incomplete UTF-8 tail dropped), or a negative code. */
static int run_decode_loop(const loom_tokenizer *tok, loom_session *s, loom_sampler *smp, loom_stop *stop,
                           float *logits, int n_gen, struct run_stats *st, loom_error *err)
{
    loom_detok dt;
    char text[RUN_TEXT_MAX];
    loom_detok_init(&dt, tok);
    double t0 = loom_cli_now();
    int rc = LOOM_OK;
    for (int g = 0; g < n_gen; g++) {
        if (loom_cli_signal()) {
            rc = LOOM_E_CANCELLED;
            break;
        }
        int32_t id = loom_sampler_sample(smp, logits);
        if (id < 0) {
            rc = loom_errorf(err, LOOM_E_INTERNAL, "sampler: no sampleable token in the logits row");
            break;
        }
        if (loom_tokenizer_is_eog(tok, id))
            break;
        int k = loom_detok_push(&dt, id, text, (int)sizeof text);
        if (k < 0) {
            rc = loom_errorf(err, k, "detokenizer: token %d could not be decoded", (int)id);
            break;
        }
        loom_sampler_accept(smp, id);
        st->n_generated++;
        rc = run_emit(stop, text, k, err); /* 1: a stop string completed */
        if (rc != 0 || g + 1 == n_gen || ferror(stdout)) /* ferror: the text goes nowhere (main names stdout) */
            break;
        rc = loom_session_eval(s, &id, 1, logits, LOOM_LOGITS_LAST, err);
        if (rc != LOOM_OK)
            break;
        st->n_decoded++;
        loom_cli_expert_trace_add(&st->trace);
    }
    st->t_decode = loom_cli_now() - t0;
    if (rc == LOOM_OK)
        rc = run_flush(&dt, stop, err);
    else if (rc == LOOM_E_CANCELLED)
        run_flush(NULL, stop, err);
    fputc('\n', stdout);
    fflush(stdout);
    return rc < 0 ? rc : LOOM_OK;
}

/* Prefill the prompt[n] in requests of RUN_PREFILL_TOKENS, the last token's logits into logits: st->n_prefilled
 * and st->t_prefill count the requests that finished. LOOM_OK or the first request's failure (LOOM_E_CANCELLED when
 * a signal stopped it). */
static int run_prefill(loom_session *s, const int32_t *prompt, int n, float *logits, struct run_stats *st,
                       loom_error *err)
{
    double t0 = loom_cli_now();
    for (int done = 0, k; done < n; done += k) {
        k = n - done < RUN_PREFILL_TOKENS ? n - done : RUN_PREFILL_TOKENS;
        int rc = loom_session_eval(s, prompt + done, k, done + k == n ? logits : NULL, LOOM_LOGITS_LAST, err);
        if (rc != LOOM_OK)
            return rc;
        st->n_prefilled = loom_session_pos(s);
        st->t_prefill = loom_cli_now() - t0;
    }
    return LOOM_OK;
}

/* The timing line: a speed only for what was evaluated (none for a prefill stopped before its first request
 * finished, nor for a decode of 0 tokens). */
static void run_print_stats(const struct run_stats *st)
{
    char prompt[160], decode[64];
    int first = st->n_prompt < RUN_PREFILL_TOKENS ? st->n_prompt : RUN_PREFILL_TOKENS;
    double prefill_rate = st->t_prefill > 0 ? st->n_prefilled / st->t_prefill : 0.0;
    if (st->n_prefilled == 0)
        snprintf(prompt, sizeof prompt, "prompt interrupted after 0 of %d token%s, before its first request (%d "
                 "token%s) finished: no speed", st->n_prompt, st->n_prompt == 1 ? "" : "s", first,
                 first == 1 ? "" : "s");
    else if (st->n_prefilled < st->n_prompt)
        snprintf(prompt, sizeof prompt, "prompt interrupted after %d of %d tokens, %.2f tok/s", st->n_prefilled,
                 st->n_prompt, prefill_rate); /* 2 at least: some prefilled, not all */
    else
        snprintf(prompt, sizeof prompt, "prompt %d token%s, %.2f tok/s", st->n_prompt, st->n_prompt == 1 ? "" : "s",
                 prefill_rate);
    if (st->n_decoded == 0)
        snprintf(decode, sizeof decode, "decode 0 tokens");
    else
        snprintf(decode, sizeof decode, "decode %d token%s, %.2f tok/s", st->n_decoded, st->n_decoded == 1 ? "" : "s",
                 st->t_decode > 0 ? st->n_decoded / st->t_decode : 0.0);
    fprintf(stderr, "loom run: %s | %s (%d generated) | peak RSS %.1f MiB\n", prompt, decode, st->n_generated,
            loom_cli_peak_rss() / (1024.0 * 1024.0));
}

/* Tokenize, prefill, generate. Returns LOOM_OK or a negative code with err filled. */
static int run_generate(const loom_model *m, const struct run_opts *o, loom_error *err)
{
    struct run_stats st = {0};
    const loom_tokenizer *tok = loom_model_tokenizer(m);
    int32_t *prompt = NULL;
    loom_session *s = NULL;
    loom_sampler *smp = NULL;
    int n_rows = loom_model_n_logits(m);
    float *logits = malloc((size_t)n_rows * sizeof(float));
    loom_stop *stop = loom_stop_new(o->so.stops, o->so.n_stops, err);
    int rc = stop ? LOOM_OK : err->code;
    if (rc >= 0)
        rc = st.n_prompt = run_tokenize(tok, o->prompt, &prompt, err);
    if (rc >= 0 && st.n_prompt == 0)
        rc = loom_errorf(err, LOOM_E_ARG, "-p: expected a prompt of at least one token, found empty text");
    int n_ctx = o->n_ctx ? o->n_ctx : st.n_prompt + (o->n_gen > 0 ? o->n_gen : 1);
    int n_train = loom_model_n_ctx_train(m);
    if (!o->n_ctx && n_train > 0 && n_ctx > n_train) /* without -c, the model's context length bounds it */
        n_ctx = st.n_prompt > n_train ? st.n_prompt : n_train;
    if (rc >= 0 && n_train > 0 && n_ctx > n_train)
        rc = loom_errorf(err, LOOM_CLI_E_USAGE, "%s: expected at most the model's context_length %d, found %d",
                         o->n_ctx ? "-c" : "-p", n_train, n_ctx);
    if (rc >= 0 && st.n_prompt > n_ctx)
        rc = loom_errorf(err, LOOM_CLI_E_USAGE, "-c: expected at least the prompt's %d tokens, found %d", st.n_prompt,
                         n_ctx);
    int n_gen = o->n_gen;
    if (rc >= 0 && n_gen > n_ctx - st.n_prompt + 1) {
        n_gen = n_ctx - st.n_prompt + 1; /* the last generated token is never evaluated */
        fprintf(stderr, "loom run: the context of %d position%s limits generation to %d token%s\n", n_ctx,
                n_ctx == 1 ? "" : "s", n_gen, n_gen == 1 ? "" : "s");
    }
    if (rc >= 0 && !logits)
        rc = loom_errorf(err, LOOM_E_NOMEM, "logits: could not allocate %d floats", n_rows);
    if (rc >= 0) {
        /* one prompt, then decoding: nothing rewinds or reuses a prefix, so no prompt-end checkpoint */
        loom_session_params sp = {.n_ctx = n_ctx, .n_threads = o->n_threads, .numerics = o->numerics,
                                  .skip_prompt_checkpoints = 1, /* reference: n_ubatch 0 = 512 */
                                  .k_type = o->mo.k_type};
        s = loom_session_new(m, &sp, err);
        rc = s ? LOOM_OK : (err->code ? err->code : LOOM_E_NOMEM);
        if (s)
            fprintf(stderr, "loom run: context %d position%s, sequence state %.1f MiB (recurrent + KV)\n",
                    loom_session_n_ctx(s), loom_session_n_ctx(s) == 1 ? "" : "s",
                    (double)loom_session_state_bytes(s) / (1024.0 * 1024.0));
    }
    if (rc >= 0) {
        smp = loom_sampler_new(&o->so.sp, n_rows, loom_tokenizer_sampleable(tok), err);
        rc = smp ? LOOM_OK : err->code;
        for (int i = 0; smp && i < st.n_prompt; i++)
            loom_sampler_accept(smp, prompt[i]); /* the prompt is in the penalty window, as in llama-completion */
    }
    if (rc >= 0) {
        loom_session_set_abort(s, loom_cli_abort, NULL);
        rc = loom_cli_expert_trace_init(&st.trace, m, &o->mo, n_gen, err);
    }
    if (rc >= 0) {
        rc = run_prefill(s, prompt, st.n_prompt, logits, &st, err);
        loom_cli_expert_trace_add(&st.trace);
    }
    if (rc >= 0)
        rc = run_decode_loop(tok, s, smp, stop, logits, n_gen, &st, err);
    if (rc >= 0 || rc == LOOM_E_CANCELLED) {
        run_print_stats(&st);
        loom_cli_expert_stats("run", m, &o->mo, st.n_prefilled + st.n_decoded, &st.trace);
    }
    free(st.trace.at);
    loom_sampler_free(smp);
    loom_stop_free(stop);
    loom_session_free(s);
    free(logits);
    free(prompt);
    return rc < 0 ? rc : LOOM_OK;
}

int loom_cli_run(int argc, char **argv)
{
    struct run_opts o = {.n_gen = -1, .so = LOOM_CLI_SAMPLER_DEFAULTS};
    int a = run_parse_args(argc, argv, &o);
    if (a > 0) {
        run_usage(stdout);
        return 0;
    }
    if (a < 0) {
        fprintf(stderr, "%s(loom run --help for details)\n", RUN_SYNOPSIS);
        return 2;
    }
    loom_cli_check_threads("run", o.n_threads);
    loom_cli_signals_install();
    char path[4096];
    int status;
    loom_model *m = loom_cli_load_model("run", &o.model, path, sizeof path, &o.mo, o.n_threads, &status);
    if (!m)
        return status;
    loom_error err = {0};
    int rc = loom_cli_signal() ? LOOM_E_CANCELLED : run_generate(m, &o, &err);
    loom_model_free(m);
    return rc == LOOM_OK ? 0 : loom_cli_fail("run", rc, &err);
}
