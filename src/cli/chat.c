/* chat.c — `loom chat`: an interactive terminal chat. Keeps the conversation, renders it with the file's chat
 * template or --chat-template-file's and provenance (loom_chat_template: the built-in Qwen3.5 renderer or the
 * Jinja interpreter), brings the session to the render through its prompt cache (which evaluates only the tokens
 * its history lacks, restoring the checkpoint kept at the last answer's start where the render diverges), samples
 * (run's sampler options) and streams the answer through the streaming detokenizer until an end-of-generation
 * token or a --stop string. Commands: /reset, /system TEXT, /think on|off, /timing, /history, /quit. When stdin
 * is not a terminal, each line is one user message (a line holding a NUL byte is refused). Ctrl+C stops an answer
 * (what was printed stays in the conversation; a turn stopped before its answer began is dropped, saying how far
 * its prefill, in requests of 512 tokens, got) and returns to the prompt; a second Ctrl+C, one at the prompt,
 * SIGTERM or SIGHUP ends the chat. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "loom.h"

#define CHAT_TEXT_MAX 4096 /* bytes of decoded text per token */
/* Tokens per prefill request, as run's: a multiple of both numerics' chunk sizes, so the float order is that of one
 * request, and a signal between requests can say how far the prefill got. */
#define CHAT_PREFILL_TOKENS 512

struct chat_opts {
    const char *model; /* -m; NULL = the default model */
    int n_threads;     /* -t; 0 = all online CPUs */
    int n_ctx;         /* -c */
    int n_max;         /* -n: tokens per answer at most */
    struct loom_cli_sampler_opts so; /* --temp, --seed, --top-k, ..., --stop */
    const char *template_file;       /* --chat-template-file; NULL = the model file's own template */
    enum loom_numerics numerics;   /* --numerics; 0 = canonical */
    struct loom_cli_model_opts mo; /* --check-tensors, --mem-budget, --stats */
};

/* Timing of one turn. */
struct chat_turn_stats {
    int n_reused, n_prefill, n_generated, reset; /* reset: turns that restored a checkpoint (render diverged) */
    int stopped;   /* the prefill stopped (a signal, a failure): n_prefill counts the tokens it evaluated and kept */
    int n_to_prefill; /* the tokens the turn's prefill had to evaluate (n_prefill of them when it finished) */
    double t_prefill, t_decode;
};

struct chat {
    const struct chat_opts *o;
    loom_model *m;
    const loom_tokenizer *tok;
    loom_chat_template *tmpl; /* --chat-template-file's, the file's own, or the built-in Qwen3.5 format */
    loom_session *s;
    loom_sampler *smp;
    loom_stop *stop; /* the --stop strings (none: every answer's text passes through) */
    float *logits;
    int32_t *history;              /* [the session's n_ctx]: its token history, for chat_cache_start */
    char *system;                  /* NULL = none */
    enum loom_chat_think think;
    loom_chat_message *msgs; /* user and assistant turns (role points at a literal, content owned) */
    size_t n_msgs;
    struct chat_turn_stats last, total;
    int interactive;
    int answer_begun; /* the turn reached generation, which ends the answer line */
    int turn_kept;    /* the turn's messages stayed in the conversation */
};

static const char CHAT_SYNOPSIS[] =
    "usage: loom chat [-m FILE] [-t N] [-c CTX] [-n MAX] [--temp T] [--seed S] [--top-k K] [--top-p P]\n"
    "                 [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--presence-penalty A]\n"
    "                 [--frequency-penalty A] [--stop STRING]... [--chat-template-file FILE] [--check-tensors]\n"
    "                 [--mem-budget SIZE] [--read-ahead MODE] [--stats] [--numerics MODE] [--cache-type-k TYPE]\n";

static void chat_usage(FILE *f)
{
    fprintf(f, "%s"
               "  -m FILE    GGUF model (default: the synthetic default model, prepared on first use)\n"
               "  -t N       worker threads (default: all online CPUs)\n"
               "  -n MAX     tokens per answer at most (default 1024)\n"
               "  -c CTX     context positions for the whole conversation (default 4096)\n"
               LOOM_CLI_SAMPLER_USAGE
               "  --chat-template-file FILE  the chat template to render with instead of the model file's own\n"
               "                         (any Jinja chat template: the official Qwen3.5 one renders built in,\n"
               "                         others through loom's Jinja interpreter)\n"
               "  --numerics MODE        float order: canonical (default: every token in the one-token order)\n"
               "                         or reference (llama.cpp's batch orders in micro-batches of 512)\n"
               LOOM_CLI_MODEL_USAGE
               "An answer ends at the template's end of turn, or before the first --stop string (not printed and\n"
               "not kept); the penalties' recent tokens are the rendered conversation's, then the answer's.\n"
               "Commands: /reset (forget the conversation), /system TEXT (set the system prompt; empty TEXT\n"
               "removes it), /think on|off (thinking in answers), /timing (last and total timing), /history\n"
               "(the conversation so far, on stderr), /quit.\n"
               "Ctrl+C stops an answer: the text printed so far stays in the conversation (a turn stopped before\n"
               "its answer began is dropped) and the prompt returns; Ctrl+C at the prompt, a second Ctrl+C,\n"
               "SIGTERM or SIGHUP ends the chat (status 130 / 143 / 129).\n"
               "When stdin is not a terminal, each input line is one user message (or one command) and one\n"
               "answer is printed per message, as the model wrote it (its own newlines kept), then a newline;\n"
               "a message refused or failed (a NUL byte in it, a conversation beyond -c) still prints one line,\n"
               "empty, so that each message has its answer (the exit\n"
               "status is then 1), and so does a line starting with / that is no command; empty lines and commands\n"
               "print nothing.\n",
            CHAT_SYNOPSIS);
}

/* What chat takes: chat_set_option's options (each takes a value), then the model options. */
static const struct loom_cli_option CHAT_OPTIONS[] = {
    {"-m", LOOM_CLI_ONE}, {"-n", LOOM_CLI_VALUE}, {"-t", LOOM_CLI_VALUE}, {"-c", LOOM_CLI_VALUE},
    {"--numerics", LOOM_CLI_VALUE}, {"--chat-template-file", LOOM_CLI_ONE}, LOOM_CLI_SAMPLER_TABLE,
    LOOM_CLI_MODEL_TABLE, {NULL, LOOM_CLI_VALUE}};

/* --chat-template-file FILE: a non-empty name (the file is read once the model's tokenizer is there; a second,
 * different one is refused by the parser: LOOM_CLI_ONE). */
static int chat_template_file(struct chat_opts *o, const char *val)
{
    if (!*val) {
        fputs("loom chat: --chat-template-file expects a template file, found ''\n", stderr);
        return -1;
    }
    o->template_file = val;
    return 0;
}

/* Apply one option that takes a value. Returns 0, or -1 with a message. */
static int chat_set_option(void *opts, const char *opt, const char *val)
{
    struct chat_opts *o = opts;
    if (!strcmp(opt, "-m")) {
        o->model = val;
        return 0;
    }
    if (!strcmp(opt, "--numerics"))
        return loom_cli_numerics("chat", val, &o->numerics);
    if (!strcmp(opt, "--chat-template-file"))
        return chat_template_file(o, val);
    int taken = loom_cli_sampler_option("chat", &o->so, opt, val);
    if (taken)
        return taken < 0 ? -1 : 0;
    int *dst = !strcmp(opt, "-t") ? &o->n_threads : !strcmp(opt, "-n") ? &o->n_max : !strcmp(opt, "-c") ? &o->n_ctx
                                                                                                          : NULL;
    if (!dst) {
        fprintf(stderr, "loom chat: %s is in chat's option table but no branch takes it (a bug in loom)\n", opt);
        return -1;
    }
    long long v, hi = dst == &o->n_threads ? LOOM_CLI_THREADS_MAX : 1 << 24;
    if (loom_cli_parse_int(val, 1, hi, &v)) {
        fprintf(stderr, "loom chat: %s expects an integer in [1, %lld], found '%s'\n", opt, hi, val);
        return -1;
    }
    *dst = (int)v;
    return 0;
}

/* Append role/content (content copied) to the conversation. Returns LOOM_OK or LOOM_E_NOMEM. */
static int chat_push_message(struct chat *c, const char *role, const char *content, size_t len)
{
    loom_chat_message *v = realloc(c->msgs, (c->n_msgs + 1) * sizeof *v); /* a conversation is short */
    if (!v)
        return LOOM_E_NOMEM;
    c->msgs = v;
    char *copy = malloc(len + 1);
    if (!copy)
        return LOOM_E_NOMEM;
    memcpy(copy, content, len);
    copy[len] = '\0';
    c->msgs[c->n_msgs++] = (loom_chat_message){.role = role, .content = copy};
    return LOOM_OK;
}

static void chat_pop_message(struct chat *c)
{
    free((char *)c->msgs[--c->n_msgs].content);
}

/* Render the conversation (system prompt first) with a generation prompt and tokenize it. */
static int chat_render_ids(struct chat *c, int32_t **ids, int *n, loom_error *err)
{
    loom_chat_message *all = malloc((c->n_msgs + 1) * sizeof *all);
    if (!all)
        return loom_errorf(err, LOOM_E_NOMEM, "could not allocate %zu messages", c->n_msgs + 1);
    size_t k = 0;
    if (c->system)
        all[k++] = (loom_chat_message){.role = "system", .content = c->system};
    memcpy(all + k, c->msgs, c->n_msgs * sizeof *all);
    loom_chat_params p = {.add_generation_prompt = 1, .think = c->think};
    int rc = loom_chat_template_apply(c->tmpl, all, k + c->n_msgs, &p, ids, n, err);
    free(all);
    return rc;
}

/* Where the generation prompt's "<|im_start|>assistant\n" ends in ids[n]: the next turn's render shares the
 * tokens up to there and no further (the template re-renders this answer without its <think> block), so the
 * session keeps a checkpoint at that position; n when the header ends the render (a ChatML turn without a think
 * block), n - 1 when there is no header. Always in [1, n] for n >= 2. */
static int chat_turn_start(const struct chat *c, const int32_t *ids, int n)
{
    static const char head_text[] = "<|im_start|>assistant\n";
    int32_t head[8];
    int k = loom_tokenizer_encode(c->tok, head_text, sizeof head_text - 1, LOOM_SPECIAL_ALL, head, 8, NULL);
    for (int i = n - k; k > 0 && k <= 8 && i >= 0; i--)
        if (!memcmp(ids + i, head, (size_t)k * sizeof *ids))
            return i + k;
    return n - 1;
}

/* Where loom_session_prefill_cached(ids, n) starts evaluating: the session's position when its history is a prefix
 * of ids[n], else the nearest checkpoint at or before the prefix they share (and before n). */
static int chat_cache_start(struct chat *c, const int32_t *ids, int n)
{
    int pos = loom_session_tokens(c->s, c->history, loom_session_n_ctx(c->s)), lcp = 0;
    while (lcp < pos && lcp < n && c->history[lcp] == ids[lcp])
        lcp++;
    return lcp == pos ? pos : loom_session_checkpoint_at(c->s, lcp < n - 1 ? lcp : n - 1);
}

/* Evaluate ids[from, to) in requests of CHAT_PREFILL_TOKENS, the last token's logits into c->logits when last;
 * c->last.n_prefill counts the tokens evaluated. */
static int chat_eval_chunks(struct chat *c, const int32_t *ids, int from, int to, int last, loom_error *err)
{
    for (int k; from < to; from += k) {
        k = to - from < CHAT_PREFILL_TOKENS ? to - from : CHAT_PREFILL_TOKENS;
        int rc = loom_session_eval(c->s, ids + from, k, last && from + k == to ? c->logits : NULL, LOOM_LOGITS_LAST,
                                   err);
        if (rc != LOOM_OK)
            return rc;
        c->last.n_prefill += k;
    }
    return LOOM_OK;
}

/* Bring the session to ids[n] (n >= 2) and leave the last token's logits in c->logits. The prompt cache
 * evaluates only what the session's history (the last render and answer) lacks, or restores the nearest
 * checkpoint where the render diverges from it, in requests of CHAT_PREFILL_TOKENS from where it starts (the first
 * through loom_session_prefill_cached); a checkpoint is then taken where the next turn's render will diverge. On
 * failure the session holds a consistent prefix, the requests that completed, which the next turn's prompt cache
 * reuses. */
static int chat_prefill(struct chat *c, const int32_t *ids, int n, loom_error *err)
{
    int split = chat_turn_start(c, ids, n), held = loom_session_pos(c->s), start = chat_cache_start(c, ids, split);
    double t0 = loom_cli_now();
    c->last.n_to_prefill = n - start;
    int first = split - start < CHAT_PREFILL_TOKENS ? split : start + CHAT_PREFILL_TOKENS;
    int reused = loom_session_prefill_cached(c->s, ids, first, first == n ? c->logits : NULL, err);
    int rc = reused < 0 ? reused : LOOM_OK;
    if (rc == LOOM_OK) {
        c->last.n_reused = reused;
        c->last.reset = reused < held;
        c->last.n_to_prefill = n - reused;
        c->last.n_prefill = first - reused;
        rc = chat_eval_chunks(c, ids, first, split, split == n, err);
    }
    if (rc == LOOM_OK) {
        if (loom_session_checkpoint_at(c->s, split) != split) /* one request's end keeps one already */
            loom_session_checkpoint(c->s, NULL); /* a cache: without it the next turn prefills more */
        rc = chat_eval_chunks(c, ids, split, n, 1, err);
    }
    c->last.t_prefill = loom_cli_now() - t0;
    c->last.stopped = rc != LOOM_OK;
    return rc;
}

/* An answer as it is printed: text[len] (NUL-terminated once anything was added; NULL before). */
struct chat_answer {
    char *text;
    size_t len, cap;
};

static int chat_answer_put(struct chat_answer *a, const char *s, size_t n)
{
    if (a->len + n + 1 > a->cap) {
        size_t nc = a->cap ? a->cap : 1024;
        while (nc < a->len + n + 1)
            nc *= 2;
        char *v = realloc(a->text, nc);
        if (!v)
            return LOOM_E_NOMEM;
        a->text = v;
        a->cap = nc;
    }
    memcpy(a->text + a->len, s, n);
    a->len += n;
    a->text[a->len] = '\0';
    return LOOM_OK;
}

/* Print decoded text[len] and add it to the answer, through the stop strings: they hold back what may begin one.
 * Returns 1 when one completed (it and what follows are dropped), 0, or a negative code with err filled. */
static int chat_emit(struct chat *c, struct chat_answer *a, const char *text, size_t len, loom_error *err)
{
    char out[CHAT_TEXT_MAX + LOOM_CLI_STOP_MAX_LEN];
    int stopped;
    int k = loom_stop_feed(c->stop, text, len, out, sizeof out, &stopped, err);
    if (k < 0)
        return k;
    fwrite(out, 1, (size_t)k, stdout);
    fflush(stdout);
    if (chat_answer_put(a, out, (size_t)k) != LOOM_OK)
        return loom_errorf(err, LOOM_E_NOMEM, "could not grow the answer");
    return stopped;
}

/* The end of an answer no stop string ended: the detokenizer's held bytes (dt NULL after a signal: an incomplete
 * character is dropped), then the text the stop strings held back. Returns LOOM_OK or a negative code. */
static int chat_flush(struct chat *c, struct chat_answer *a, loom_detok *dt, loom_error *err)
{
    char text[CHAT_TEXT_MAX];
    int k = dt ? loom_detok_flush(dt, text, (int)sizeof text) : 0;
    int rc = k > 0 ? chat_emit(c, a, text, (size_t)k, err) : LOOM_OK;
    if (rc != LOOM_OK) /* 1: a stop string completed in the flushed bytes */
        return rc < 0 ? rc : LOOM_OK;
    k = loom_stop_flush(c->stop, text, sizeof text, err);
    if (k <= 0)
        return k;
    fwrite(text, 1, (size_t)k, stdout);
    if (chat_answer_put(a, text, (size_t)k) != LOOM_OK)
        return loom_errorf(err, LOOM_E_NOMEM, "could not grow the answer");
    return LOOM_OK;
}

/* Sample and stream up to -n tokens (until an end-of-generation token, a stop string or the end of the context)
 * into the answer a (empty on entry; freed by the caller). A signal stops it with LOOM_E_CANCELLED: a then holds
 * what was printed (whole UTF-8 characters: an incomplete tail is dropped). */
static int chat_generate(struct chat *c, struct chat_answer *a, loom_error *err)
{
    loom_detok dt;
    char text[CHAT_TEXT_MAX];
    int rc = LOOM_OK, cut = 0;
    loom_detok_init(&dt, c->tok);
    loom_stop_reset(c->stop);
    double t0 = loom_cli_now();
    for (int g = 0; g < c->o->n_max && rc == LOOM_OK; g++) {
        if (loom_cli_signal()) {
            rc = LOOM_E_CANCELLED;
            break;
        }
        int32_t id = loom_sampler_sample(c->smp, c->logits);
        if (id < 0)
            rc = loom_errorf(err, LOOM_E_INTERNAL, "sampler: no sampleable token in the logits row");
        if (rc != LOOM_OK || loom_tokenizer_is_eog(c->tok, id))
            break;
        int k = loom_detok_push(&dt, id, text, (int)sizeof text);
        loom_sampler_accept(c->smp, id);
        c->last.n_generated++;
        rc = k < 0 ? loom_errorf(err, k, "detokenizer: token %d could not be decoded", (int)id)
                   : chat_emit(c, a, text, (size_t)k, err); /* 1: a stop string completed */
        cut = rc == LOOM_OK && g + 1 < c->o->n_max && loom_session_pos(c->s) >= c->o->n_ctx;
        if (rc != LOOM_OK || g + 1 == c->o->n_max || cut)
            break;
        rc = loom_session_eval(c->s, &id, 1, c->logits, LOOM_LOGITS_LAST, err);
    }
    c->last.t_decode = loom_cli_now() - t0;
    if (rc == LOOM_OK)
        rc = chat_flush(c, a, &dt, err);
    else if (rc == LOOM_E_CANCELLED)
        chat_flush(c, a, NULL, err);
    fputc('\n', stdout);
    fflush(stdout);
    if (cut)
        fprintf(stderr, "loom chat: the answer was cut where the context ends (-c %d position%s; %s)\n", c->o->n_ctx,
                c->o->n_ctx == 1 ? "" : "s", c->interactive ? "use /reset, or a larger -c" : "give a larger -c");
    if (rc >= 0 && !a->text && chat_answer_put(a, "", 0) != LOOM_OK)
        return loom_errorf(err, LOOM_E_NOMEM, "could not grow the answer");
    return rc < 0 ? rc : LOOM_OK;
}

static void chat_add_stats(struct chat_turn_stats *t, const struct chat_turn_stats *s)
{
    t->n_reused += s->n_reused;
    t->n_prefill += s->n_prefill;
    t->n_generated += s->n_generated;
    t->reset += s->reset;
    t->t_prefill += s->t_prefill;
    t->t_decode += s->t_decode;
}

/* One user message: render, prefill, generate, keep the answer. On failure the user message is dropped. A
 * signal stops the turn (LOOM_E_CANCELLED): an answer that has begun (some text printed) stays in the
 * conversation as far as it got; a turn stopped before that is dropped, user message included. */
static int chat_turn(struct chat *c, const char *line, size_t len, loom_error *err)
{
    int32_t *ids = NULL;
    int n = 0;
    struct chat_answer ans = {0};
    c->last = (struct chat_turn_stats){0};
    c->answer_begun = c->turn_kept = 0;
    int rc = chat_push_message(c, "user", line, len);
    if (rc != LOOM_OK)
        return loom_errorf(err, rc, "chat: could not store the message");
    rc = chat_render_ids(c, &ids, &n, err);
    if (rc == LOOM_OK && n < 2) /* chat_prefill: a token at least through the prompt cache, then one at least */
        rc = loom_errorf(err, LOOM_E_RANGE, "the chat template rendered the conversation as %d token%s, expected at "
                         "least 2 (a template that prints too little to answer from)", n, n == 1 ? "" : "s");
    else if (rc == LOOM_OK && n >= c->o->n_ctx)
        rc = loom_errorf(err, LOOM_E_RANGE,
                         "the conversation needs %d tokens plus room to reply, the context holds %d (use /reset, or a "
                         "larger -c)",
                         n, c->o->n_ctx);
    if (rc == LOOM_OK)
        rc = chat_prefill(c, ids, n, err);
    if (rc == LOOM_OK) {
        c->answer_begun = 1;
        loom_sampler_reset(c->smp); /* the penalties' window: the render, as run's prompt, then the answer */
        for (int i = 0; i < n; i++)
            loom_sampler_accept(c->smp, ids[i]);
        rc = chat_generate(c, &ans, err);
    }
    int keep = rc == LOOM_OK || (rc == LOOM_E_CANCELLED && ans.len > 0);
    if (keep && chat_push_message(c, "assistant", ans.text, ans.len) != LOOM_OK) {
        rc = loom_errorf(err, LOOM_E_NOMEM, "could not store the answer");
        keep = 0;
    }
    if (!keep)
        chat_pop_message(c);
    else
        chat_add_stats(&c->total, &c->last);
    c->turn_kept = keep; /* the session keeps what it evaluated: the next turn's prompt cache sorts it out */
    free(ans.text);
    free(ids);
    return rc;
}

/* /history: the conversation the next turn renders, one "[role] content" block per message, on stderr. */
static void chat_print_history(const struct chat *c)
{
    if (c->system)
        fprintf(stderr, "[system] %s\n", c->system);
    for (size_t i = 0; i < c->n_msgs; i++)
        fprintf(stderr, "[%s] %s\n", c->msgs[i].role, c->msgs[i].content);
    size_t n = c->n_msgs + (c->system != NULL);
    fprintf(stderr, "(%zu message%s)\n", n, n == 1 ? "" : "s");
}

/* "prefill N tokens" or, for one that stopped, "prefill stopped after K of N tokens". */
static void chat_prefill_words(const struct chat_turn_stats *t, char *buf, size_t cap)
{
    if (t->stopped)
        snprintf(buf, cap, "prefill stopped after %d of %d token%s", t->n_prefill, t->n_to_prefill,
                 t->n_to_prefill == 1 ? "" : "s");
    else
        snprintf(buf, cap, "prefill %d token%s", t->n_prefill, t->n_prefill == 1 ? "" : "s");
}

/* No speed for what was not evaluated (as run's timing line): a prefill that stopped (its last request's time
 * counts) or of no tokens, a decode of no tokens. */
static void chat_print_stats(const char *what, const struct chat_turn_stats *t)
{
    char speed[48] = "", prefill[80], decode[48] = "";
    if (!t->stopped && t->n_prefill > 0 && t->t_prefill > 0)
        snprintf(speed, sizeof speed, " (%.2f tok/s)", t->n_prefill / t->t_prefill);
    if (t->n_generated > 0 && t->t_decode > 0)
        snprintf(decode, sizeof decode, " (%.2f tok/s)", t->n_generated / t->t_decode);
    chat_prefill_words(t, prefill, sizeof prefill);
    fprintf(stderr, "%s: %s in %.3f s%s, %d reused from the session, %d cache restore(s) | "
                    "decode %d token%s in %.3f s%s\n",
            what, prefill, t->t_prefill, speed, t->n_reused, t->reset, t->n_generated,
            t->n_generated == 1 ? "" : "s", t->t_decode, decode);
}

/* Run a /command. Returns 1 to quit, -1 for an unknown one (refused, named with the commands), 0 otherwise. */
static int chat_command(struct chat *c, const char *line)
{
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit"))
        return 1;
    if (!strcmp(line, "/reset")) {
        while (c->n_msgs)
            chat_pop_message(c);
        loom_session_reset(c->s);
        c->total = (struct chat_turn_stats){0};
        fprintf(stderr, "(conversation reset)\n");
    } else if (!strncmp(line, "/system", 7) && (line[7] == ' ' || line[7] == '\0')) {
        const char *text = line[7] ? line + 8 : "";
        char *copy = *text ? strdup(text) : NULL;
        if (*text && !copy) {
            fprintf(stderr, "loom chat: out of memory\n");
            return 0;
        }
        free(c->system);
        c->system = copy;
        fprintf(stderr, copy ? "(system prompt set)\n" : "(system prompt removed)\n");
    } else if (!strcmp(line, "/think on") || !strcmp(line, "/think off")) {
        c->think = line[8] == 'n' ? LOOM_CHAT_THINK_ON : LOOM_CHAT_THINK_OFF;
        fprintf(stderr, "(thinking %s)\n", line + 7);
    } else if (!strcmp(line, "/timing")) {
        chat_print_stats("last turn", &c->last);
        chat_print_stats("conversation", &c->total);
    } else if (!strcmp(line, "/history")) {
        chat_print_history(c);
    } else {
        fprintf(stderr, "unknown command '%s' (commands: /reset, /system TEXT, /think on|off, /timing, /history, "
                        "/quit)\n", line);
        return -1;
    }
    return 0;
}

/* What a signal stopped: the prefill (how far it got), the answer before its first character (the turn dropped) or
 * after (kept); and whether the chat goes on (one Ctrl+C) or ends (SIGTERM, SIGHUP, a second Ctrl+C). */
static void chat_print_stopped(const struct chat *c, int ends)
{
    char by[40] = "", prefill[80];
    if (ends)
        snprintf(by, sizeof by, " by %s", loom_cli_signal() == SIGINT ? "a second Ctrl+C" : loom_cli_signal_name());
    const char *then = ends ? "the chat ends" : c->turn_kept ? "the answer so far stays in the conversation"
                                                             : "the message was dropped";
    if (!c->answer_begun) {
        chat_prefill_words(&c->last, prefill, sizeof prefill);
        fprintf(stderr, "(stopped%s before the answer began: %s; %s)\n", by, prefill, then);
    } else
        fprintf(stderr, "(stopped%s%s: %s)\n", by, c->turn_kept ? "" : " before the answer began", then);
}

/* After a turn: a failure's message, or what a signal stopped. Returns 1 when the chat is to end: a second
 * signal during the turn, or any but SIGINT (one Ctrl+C only ends the turn, even one that came as it finished). */
static int chat_after_turn(struct chat *c, int rc, const loom_error *err)
{
    int sig = loom_cli_signal(), ends = sig && (sig != SIGINT || loom_cli_signal_count() > 1);
    if (rc == LOOM_E_CANCELLED)
        chat_print_stopped(c, ends);
    else if (rc != LOOM_OK)
        loom_cli_fail("chat", rc, err);
    if (!ends)
        loom_cli_signals_clear();
    return ends;
}

/* A line holding a NUL byte is refused whole (a message and a command are C strings: the bytes after it would be
 * lost), with an empty answer line when stdin is not a terminal (one per input line). Returns 1 when refused. */
static int chat_refuse_nul(const struct chat *c, const char *line, size_t len, long long n_line)
{
    const char *nul = memchr(line, 0, len);
    if (!nul)
        return 0;
    fprintf(stderr, "loom chat: input line %lld: expected text, found a NUL byte at offset %zu (the line was not "
                    "sent)\n", n_line, (size_t)(nul - line));
    if (!c->interactive) {
        fputc('\n', stdout);
        fflush(stdout);
    }
    return 1;
}

/* Read lines until /quit, the end of input or a signal at the prompt. Returns 0, 1 (an answer failed) or the
 * status of a signal that ended the chat. stdin is unbuffered, so that waiting for it sees every line. */
static int chat_loop(struct chat *c)
{
    char *line = NULL;
    size_t cap = 0;
    int status = 0;
    long long n_line = 0;
    for (;;) {
        if (c->interactive) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        ssize_t len = loom_cli_wait_readable(STDIN_FILENO) ? -1 : getline(&line, &cap, stdin);
        if (len < 0) {
            if (loom_cli_signal())
                status = loom_cli_stopped_status();
            break;
        }
        n_line++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (chat_refuse_nul(c, line, (size_t)len, n_line)) {
            status = 1;
            continue;
        }
        if (line[0] == '/') {
            int cmd = chat_command(c, line);
            if (cmd > 0)
                break;
            if (cmd < 0 && !c->interactive) { /* a message that may have meant one (a path): refused as one is */
                fputc('\n', stdout);
                status = 1;
            }
            continue;
        }
        loom_error err = {0};
        int rc = chat_turn(c, line, (size_t)len, &err);
        if (rc != LOOM_OK && !c->answer_begun && (!c->interactive || rc == LOOM_E_CANCELLED))
            fputc('\n', stdout); /* still one answer line per input line; after a ^C echo, a fresh line */
        if (rc != LOOM_OK && rc != LOOM_E_CANCELLED)
            status = 1;
        if (chat_after_turn(c, rc, &err)) {
            status = loom_cli_stopped_status();
            break;
        }
    }
    if (c->interactive)
        fputc('\n', stdout);
    free(line);
    return status;
}

static int chat_setup(struct chat *c, loom_error *err)
{
    int n_rows = loom_model_n_logits(c->m), n_train = loom_model_n_ctx_train(c->m);
    if (n_train > 0 && c->o->n_ctx > n_train)
        return loom_errorf(err, LOOM_CLI_E_USAGE, "-c: expected at most the model's context_length %d, found %d",
                           n_train, c->o->n_ctx);
    c->tmpl = loom_cli_chat_template("chat", c->tok, c->o->template_file); /* FILE, the file's own, or built in */
    if (!c->tmpl) /* the failure is printed, err left empty */
        return LOOM_E_ARG;
    c->stop = loom_stop_new(c->o->so.stops, c->o->so.n_stops, err);
    if (!c->stop)
        return err->code;
    loom_session_params sp = {.n_ctx = c->o->n_ctx, .n_threads = c->o->n_threads, .numerics = c->o->numerics,
                              .k_type = c->o->mo.k_type};
    c->logits = malloc((size_t)n_rows * sizeof(float));
    if (!c->logits)
        return loom_errorf(err, LOOM_E_NOMEM, "logits: could not allocate %d floats", n_rows);
    c->s = loom_session_new(c->m, &sp, err);
    if (!c->s)
        return err->code ? err->code : LOOM_E_NOMEM;
    c->history = malloc(sizeof *c->history * (size_t)loom_session_n_ctx(c->s));
    if (!c->history)
        return loom_errorf(err, LOOM_E_NOMEM, "could not allocate the token history");
    loom_session_set_abort(c->s, loom_cli_abort, NULL);
    c->smp = loom_sampler_new(&c->o->so.sp, n_rows, loom_tokenizer_sampleable(c->tok), err);
    return c->smp ? LOOM_OK : err->code;
}

static void chat_teardown(struct chat *c)
{
    while (c->n_msgs)
        chat_pop_message(c);
    free(c->msgs);
    free(c->system);
    free(c->logits);
    free(c->history);
    loom_sampler_free(c->smp);
    loom_stop_free(c->stop);
    loom_chat_template_free(c->tmpl);
    loom_session_free(c->s);
}

int loom_cli_chat(int argc, char **argv)
{
    struct chat_opts o = {.n_ctx = 4096, .n_max = 1024, .so = LOOM_CLI_SAMPLER_DEFAULTS};
    int a = loom_cli_parse_options("chat", argc, argv, CHAT_OPTIONS, &o.mo, chat_set_option, &o);
    if (a != 0) {
        a > 0 ? chat_usage(stdout) : (void)fprintf(stderr, "%s(loom chat --help for details)\n", CHAT_SYNOPSIS);
        return a > 0 ? 0 : 2;
    }
    loom_cli_check_threads("chat", o.n_threads);
    loom_cli_signals_install();
    setvbuf(stdin, NULL, _IONBF, 0); /* chat_loop waits for the descriptor: no lines may wait in a buffer */
    char path[4096];
    int status;
    struct chat c = {.o = &o, .interactive = isatty(STDIN_FILENO)};
    c.m = loom_cli_load_model("chat", &o.model, path, sizeof path, &o.mo, o.n_threads, &status);
    if (!c.m)
        return status;
    c.tok = loom_model_tokenizer(c.m);
    loom_error err = {0};
    if (chat_setup(&c, &err) != LOOM_OK) {
        status = err.code ? loom_cli_fail("chat", err.code, &err) : 1; /* 0: the chat template's, printed */
    } else {
        if (c.interactive)
            fprintf(stderr, "loom chat: %s (Ctrl+C stops an answer; /quit or Ctrl+C at the prompt leaves; /reset, "
                            "/system TEXT, /think on|off, /timing, /history)\n", o.model);
        status = chat_loop(&c);
    }
    loom_cli_expert_stats("chat", c.m, &o.mo, c.total.n_prefill + c.total.n_generated, NULL);
    chat_teardown(&c);
    loom_model_free(c.m);
    return status;
}
