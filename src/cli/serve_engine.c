/* serve_engine.c — `loom serve`'s engine thread: owns the slots (one loom_session each) and the queue of
 * requests waiting for one, and runs the step loop: admit queued requests into free slots (the one whose history
 * shares the longest prefix with the prompt: the prompt cache), drop cancelled ones, run one bounded chunk of one
 * prompt's prefill, then the decode step of every generating slot as one batched loom_sessions_decode call;
 * sampled tokens become text that goes back to the HTTP side through the request. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/serve.h"

#define SERVE_TEXT_MAX 4096 /* bytes of one token's decoded text, with room for the stop matcher's held text */

enum slot_state { SLOT_FREE = 0, SLOT_PREFILL, SLOT_DECODE };

struct slot {
    loom_session *s;
    struct serve_req *r;
    enum slot_state state;
    int n_done;   /* prompt tokens evaluated */
    int n_gen;    /* tokens sampled */
    int32_t next; /* SLOT_DECODE: the sampled token to evaluate next */
    int in_think; /* text is reasoning until </think> */
    int nl_held;  /* reasoning: trailing newlines held back (dropped at </think>) */
    loom_stop *think_end; /* finds "</think>" in the text, however the vocabulary spells it */
    int content_begun; /* content after </think>: leading newlines are dropped */
    uint64_t used;     /* when its last request ended (engine ticks): the least recently used is taken first */
    loom_detok dt;
};

struct serve_engine {
    const loom_model *m;
    const loom_tokenizer *tok;
    int n_rows, n_ctx, prefill_chunk, n_slots, rr;
    uint64_t tick;           /* requests ended */
    _Atomic long long n_eval; /* tokens evaluated (prompts, decode steps, re-evaluations after a rewind) */
    int max_batch; /* sequences one loom_sessions_decode call takes */
    struct slot *slots;
    float *logits;           /* [n_slots][n_rows]: prefill rows and the batched decode's rows */
    loom_session **batch_s;  /* [n_slots] */
    int32_t *batch_tok;      /* [n_slots] */
    int *batch_slot;         /* [n_slots] */
    int32_t *history;        /* [n_ctx]: a slot's token history, to compare with a prompt */
    char text[SERVE_TEXT_MAX], out[SERVE_TEXT_MAX + SERVE_STOP_MAX_LEN];

    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* guards the queue, n_active and quit */
    pthread_cond_t cv;
    struct serve_req **queue;
    int q_head, q_len, q_cap, queue_max;
    int n_active;
    int cancel_all; /* serve_engine_cancel_all: stop every running request */
    int quit;       /* serve_engine_stop: release everything and end the thread */
};

int serve_buf_put(struct serve_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n + 1)
            nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p)
            return LOOM_E_NOMEM;
        b->p = p;
        b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return LOOM_OK;
}

void serve_buf_free(struct serve_buf *b)
{
    free(b->p);
    *b = (struct serve_buf){0};
}

int serve_lps_put(struct serve_lps *l, const struct serve_lp *x, int n)
{
    if (n == 0)
        return LOOM_OK;
    if (l->n + n > l->cap) {
        int nc = l->cap ? l->cap : 64;
        while (nc < l->n + n)
            nc *= 2;
        struct serve_lp *v = realloc(l->v, sizeof *v * (size_t)nc);
        if (!v)
            return LOOM_E_NOMEM;
        l->v = v, l->cap = nc;
    }
    memcpy(l->v + l->n, x, sizeof *x * (size_t)n);
    l->n += n;
    return LOOM_OK;
}

/* With logprobs: token id's log-probability under logits and the top alternatives, for the HTTP side. */
static void req_logprob(struct serve_engine *e, struct serve_req *r, const float *logits, int32_t id)
{
    struct serve_lp x = {.id = id};
    x.lp = loom_logprobs(logits, e->n_rows, loom_tokenizer_sampleable(e->tok), id, r->logprobs, x.top_id, x.top_lp);
    pthread_mutex_lock(&r->mu);
    if (serve_lps_put(&r->lps, &x, 1) != LOOM_OK && !r->error[0])
        snprintf(r->error, sizeof r->error, "out of memory while storing the answer");
    pthread_mutex_unlock(&r->mu);
}

/* ---- handing text and the end back to the HTTP side ---- */

static void req_append(struct serve_req *r, int reasoning, const char *s, size_t n)
{
    if (n == 0)
        return;
    pthread_mutex_lock(&r->mu);
    if (serve_buf_put(reasoning ? &r->reasoning : &r->content, s, n) != LOOM_OK && !r->error[0])
        snprintf(r->error, sizeof r->error, "out of memory while storing the answer");
    r->wake(r);
    pthread_mutex_unlock(&r->mu);
}

/* The request's end: after this the engine never touches r again (the HTTP side may free it). */
static void req_release(struct serve_req *r, enum serve_finish f, int n_gen, const char *error)
{
    pthread_mutex_lock(&r->mu);
    r->finish = r->error[0] ? SERVE_FINISH_ERROR : f;
    r->n_gen = n_gen;
    if (error && !r->error[0])
        snprintf(r->error, sizeof r->error, "%s", error);
    r->released = 1;
    r->wake(r);
    pthread_mutex_unlock(&r->mu);
}

/* ---- text routing: reasoning, content, stop strings ---- */

/* Content text through the stop matcher. Returns 1 when a stop string completed. */
static int slot_content(struct serve_engine *e, struct slot *sl, const char *s, size_t n)
{
    if (!sl->content_begun) { /* the newlines that follow </think> are the template's, not the answer's */
        while (sl->r->think_open && n && *s == '\n')
            s++, n--;
        if (n == 0)
            return 0;
        sl->content_begun = 1;
    }
    int stopped = 0;
    int k = loom_stop_feed(sl->r->stop, s, n, e->out, sizeof e->out, &stopped, NULL);
    if (k > 0)
        req_append(sl->r, 0, e->out, (size_t)k);
    return k < 0 ? 0 : stopped;
}

/* Reasoning text: trailing newlines are held back until more text follows (they end the block). */
static void slot_reasoning(struct slot *sl, const char *s, size_t n)
{
    size_t body = n;
    while (body && s[body - 1] == '\n')
        body--;
    if (body) {
        static const char nl[8] = "\n\n\n\n\n\n\n\n";
        for (; sl->nl_held > 0; sl->nl_held -= sl->nl_held < 8 ? sl->nl_held : 8)
            req_append(sl->r, 1, nl, (size_t)(sl->nl_held < 8 ? sl->nl_held : 8));
        req_append(sl->r, 1, s, body);
    }
    sl->nl_held += (int)(n - body);
}

/* Route text: reasoning until "</think>" (the text after it in the same piece is content), then content.
 * Returns 1 when a stop string completed. */
static int slot_emit(struct serve_engine *e, struct slot *sl, const char *s, size_t n)
{
    if (!sl->in_think)
        return slot_content(e, sl, s, n);
    int stopped = 0;
    size_t held = loom_stop_n_held(sl->think_end);
    int k = loom_stop_feed(sl->think_end, s, n, e->out, sizeof e->out, &stopped, NULL);
    if (k > 0)
        slot_reasoning(sl, e->out, (size_t)k);
    if (!stopped)
        return 0;
    sl->in_think = 0;
    sl->nl_held = 0;
    size_t rest = (size_t)(k > 0 ? k : 0) + 8 - held; /* where the text after "</think>" begins in s */
    return rest < n ? slot_content(e, sl, s + rest, n - rest) : 0;
}

/* Free the slot and release its request with f. On a normal end the held text comes out first. */
static void slot_finish(struct serve_engine *e, struct slot *sl, enum serve_finish f, const char *error)
{
    struct serve_req *r = sl->r;
    if (f == SERVE_FINISH_STOP || f == SERVE_FINISH_LENGTH || f == SERVE_FINISH_SHUTDOWN) {
        int k = loom_detok_flush(&sl->dt, e->text, (int)sizeof e->text);
        int stopped = k > 0 ? slot_emit(e, sl, e->text, (size_t)k) : 0;
        k = sl->in_think ? loom_stop_flush(sl->think_end, e->out, sizeof e->out, NULL) : 0;
        if (k > 0)
            slot_reasoning(sl, e->out, (size_t)k);
        k = stopped ? 0 : loom_stop_flush(r->stop, e->out, sizeof e->out, NULL);
        if (k > 0)
            req_append(r, 0, e->out, (size_t)k);
    }
    sl->r = NULL;
    sl->state = SLOT_FREE;
    sl->used = ++e->tick;
    pthread_mutex_lock(&e->mu); /* free before the client hears of the end: its next request finds the slot */
    e->n_active--;
    pthread_mutex_unlock(&e->mu);
    req_release(r, f, sl->n_gen, error);
}

/* Sample the next token from logits and emit it; either the slot goes on decoding (next set) or finishes. */
static void slot_sample(struct serve_engine *e, struct slot *sl, const float *logits)
{
    struct serve_req *r = sl->r;
    if (r->forced && sl->n_gen == r->n_forced) { /* a forced answer (tests) ends as if the model ended it */
        slot_finish(e, sl, SERVE_FINISH_STOP, NULL);
        return;
    }
    int32_t id = r->forced ? r->forced[sl->n_gen] : loom_sampler_sample(r->smp, logits);
    if (id < 0) {
        slot_finish(e, sl, SERVE_FINISH_ERROR, "sampler: no sampleable token in the logits row");
        return;
    }
    sl->n_gen++;
    if (loom_tokenizer_is_eog(e->tok, id)) {
        slot_finish(e, sl, SERVE_FINISH_STOP, NULL);
        return;
    }
    if (r->logprobs >= 0)
        req_logprob(e, r, logits, id); /* before its text: the same wake carries both */
    loom_sampler_accept(r->smp, id);
    int k = loom_detok_push(&sl->dt, id, e->text, (int)sizeof e->text);
    if (k < 0) {
        slot_finish(e, sl, SERVE_FINISH_ERROR, "detokenizer: a sampled token could not be decoded");
        return;
    }
    if (slot_emit(e, sl, e->text, (size_t)k)) {
        slot_finish(e, sl, SERVE_FINISH_STOP, NULL);
        return;
    }
    if ((r->max_tokens > 0 && sl->n_gen >= r->max_tokens) || loom_session_pos(sl->s) >= e->n_ctx ||
        (r->deadline > 0 && loom_cli_now() > r->deadline)) { /* a limit: tokens, context or time */
        slot_finish(e, sl, SERVE_FINISH_LENGTH, NULL);
        return;
    }
    sl->next = id;
    sl->state = SLOT_DECODE;
}

/* ---- the step loop ---- */

/* Tokens at the start of prompt[n] that slot sl's history holds. */
static int slot_common_prefix(struct serve_engine *e, const struct slot *sl, const int32_t *prompt, int n)
{
    int h = loom_session_tokens(sl->s, e->history, e->n_ctx), k = 0;
    while (k < h && k < n && e->history[k] == prompt[k])
        k++;
    return k;
}

/* Set r->n_cached under r->mu: the HTTP side reads it to tell a running request (>= 0) from a queued one (-1). */
static void req_set_cached(struct serve_req *r, int n)
{
    pthread_mutex_lock(&r->mu);
    r->n_cached = n;
    pthread_mutex_unlock(&r->mu);
}

/* The request r takes slot sl; its prefill starts with slot_reuse (n_done -1: not yet). */
static void slot_start(struct serve_engine *e, struct slot *sl, struct serve_req *r)
{
    *sl = (struct slot){.s = sl->s, .think_end = sl->think_end, .r = r, .state = SLOT_PREFILL, .n_done = -1,
                        .in_think = r->think_open};
    req_set_cached(r, 0); /* running from now on */
    loom_detok_init(&sl->dt, e->tok);
    loom_stop_reset(sl->think_end);
}

/* Keep what the slot's history shares with the prompt: the live state when the history is a prefix of the prompt
 * (all but its last token, which is evaluated for its logits); else the nearest checkpoint within the shared
 * prefix (kept at each prompt's end and cache mark), rewound to with one token re-evaluated (its logits into row:
 * the prompt's last token's when that was the one), the rest then prefilled in bounded chunks like any prompt;
 * else the empty state. In CANONICAL numerics the result is bitwise a fresh slot's. Outside the engine's lock. */
static void slot_reuse(struct serve_engine *e, struct slot *sl, float *row)
{
    struct serve_req *r = sl->r;
    int lcp = slot_common_prefix(e, sl, r->prompt, r->n_prompt), keep = lcp < r->n_prompt ? lcp : r->n_prompt - 1;
    int cached = keep; /* prompt tokens not evaluated again */
    if (keep < loom_session_pos(sl->s)) { /* the live state went past the shared prefix */
        int c = lcp > 1 ? loom_session_checkpoint_at(sl->s, lcp - 1) : 0; /* token c is the prompt's too */
        loom_error err = {0};
        keep = c > 0 && loom_session_rewind(sl->s, c + 1, row, &err) == LOOM_OK ? c + 1 : 0;
        cached = keep ? c : 0;
        e->n_eval += keep != 0;
    }
    req_set_cached(r, cached);
    if (keep == 0)
        loom_session_reset(sl->s);
    sl->n_done = keep;
}

/* Release the queued requests that were cancelled (their clients went away). Called with e->mu held. */
static void engine_drop_cancelled(struct serve_engine *e)
{
    int kept = 0;
    for (int i = 0; i < e->q_len; i++) {
        struct serve_req *r = e->queue[(e->q_head + i) % e->q_cap];
        if (atomic_load(&r->cancelled) || e->quit)
            req_release(r, SERVE_FINISH_CANCELLED, 0, NULL);
        else
            e->queue[(e->q_head + kept++) % e->q_cap] = r;
    }
    e->q_len = kept;
}

/* The free slot whose history shares the longest prefix with r's prompt (on a tie the least recently used, so
 * that other histories survive), or -1. */
static int engine_pick_slot(struct serve_engine *e, const struct serve_req *r)
{
    int best = -1, best_k = -1;
    for (int i = 0; i < e->n_slots; i++) {
        if (e->slots[i].state != SLOT_FREE)
            continue;
        int k = slot_common_prefix(e, &e->slots[i], r->prompt, r->n_prompt);
        if (k > best_k || (k == best_k && e->slots[i].used < e->slots[best].used))
            best = i, best_k = k;
    }
    return best;
}

/* Admit queued requests into free slots; with none running or queued, wait. *cancel becomes nonzero when every
 * running request is to stop (shutdown). Returns 0 when the engine is to end. Called with e->mu held. */
static int engine_admit(struct serve_engine *e, int *cancel)
{
    while (!e->quit && e->n_active == 0 && e->q_len == 0)
        pthread_cond_wait(&e->cv, &e->mu);
    engine_drop_cancelled(e);
    for (int i; e->q_len > 0 && (i = engine_pick_slot(e, e->queue[e->q_head])) >= 0;) {
        slot_start(e, &e->slots[i], e->queue[e->q_head]);
        e->q_head = (e->q_head + 1) % e->q_cap;
        e->q_len--;
        e->n_active++;
    }
    *cancel = e->quit || e->cancel_all;
    return !e->quit || e->n_active > 0;
}

/* Free the slots whose requests were cancelled, and with cancel_all (the drain's end) every other one too, as at a
 * limit: its text so far delivered, as --timeout's. */
static void engine_reap_cancelled(struct serve_engine *e, int cancel_all)
{
    for (int i = 0; i < e->n_slots; i++) {
        struct slot *sl = &e->slots[i];
        if (sl->state != SLOT_FREE && atomic_load(&sl->r->cancelled))
            slot_finish(e, sl, SERVE_FINISH_CANCELLED, NULL);
        else if (sl->state != SLOT_FREE && cancel_all)
            slot_finish(e, sl, SERVE_FINISH_SHUTDOWN, NULL);
    }
}

/* One chunk of one prompt (round robin over the slots in prefill), so that decoding slots keep streaming. */
static void engine_prefill_step(struct serve_engine *e)
{
    for (int k = 0; k < e->n_slots; k++) {
        int i = (e->rr + k) % e->n_slots;
        struct slot *sl = &e->slots[i];
        if (sl->state != SLOT_PREFILL)
            continue;
        e->rr = (i + 1) % e->n_slots;
        if (sl->r->deadline > 0 && loom_cli_now() > sl->r->deadline) { /* out of time before its first token */
            slot_finish(e, sl, SERVE_FINISH_LENGTH, NULL);
            return;
        }
        float *row = e->logits + (size_t)i * (size_t)e->n_rows;
        if (sl->n_done < 0)
            slot_reuse(e, sl, row);
        if (sl->n_done == sl->r->n_prompt) { /* the rewind evaluated the prompt's last token */
            slot_sample(e, sl, row);
            return;
        }
        int n = sl->r->n_prompt - sl->n_done, mark = sl->r->cache_mark;
        n = n < e->prefill_chunk ? n : e->prefill_chunk;
        n = sl->n_done < mark && mark < sl->n_done + n ? mark - sl->n_done : n; /* a request ends at the mark */
        loom_error err = {0};
        int rc = loom_session_eval(sl->s, sl->r->prompt + sl->n_done, n, row, LOOM_LOGITS_LAST, &err);
        if (rc != LOOM_OK) {
            slot_finish(e, sl, SERVE_FINISH_ERROR, err.msg);
            return;
        }
        sl->n_done += n;
        e->n_eval += n;
        if (sl->n_done == mark && loom_session_checkpoint_at(sl->s, mark) != mark)
            loom_session_checkpoint(sl->s, NULL); /* a cache: failing to keep one is not an error */
        if (sl->n_done == sl->r->n_prompt)
            slot_sample(e, sl, row);
        return;
    }
}

/* The next token of every decoding slot from slot `from` on, as one batched call of at most max_batch slots.
 * Returns the slot after the last one taken. */
static int engine_decode_batch(struct serve_engine *e, int from)
{
    int n = 0, i = from;
    for (; i < e->n_slots && n < e->max_batch; i++) {
        if (e->slots[i].state != SLOT_DECODE)
            continue;
        e->batch_s[n] = e->slots[i].s;
        e->batch_tok[n] = e->slots[i].next;
        e->batch_slot[n++] = i;
    }
    if (n == 0)
        return i;
    loom_error err = {0};
    int rc = loom_sessions_decode(e->batch_s, e->batch_tok, n, e->logits, &err);
    e->n_eval += rc == LOOM_OK ? n : 0;
    for (int j = 0; j < n; j++) {
        struct slot *sl = &e->slots[e->batch_slot[j]];
        if (rc != LOOM_OK)
            slot_finish(e, sl, SERVE_FINISH_ERROR, err.msg);
        else
            slot_sample(e, sl, e->logits + (size_t)j * (size_t)e->n_rows);
    }
    return i;
}

/* The decode step of every generating slot: one batched call (several when there are more slots than a step's
 * rows, loom_sessions_decode_max). */
static void engine_decode_step(struct serve_engine *e)
{
    for (int from = 0; from < e->n_slots;)
        from = engine_decode_batch(e, from);
}

static void *engine_main(void *arg)
{
    struct serve_engine *e = arg;
    for (;;) {
        int cancel = 0;
        pthread_mutex_lock(&e->mu);
        int go = engine_admit(e, &cancel);
        pthread_mutex_unlock(&e->mu);
        if (!go)
            break;
        engine_reap_cancelled(e, cancel);
        engine_prefill_step(e);
        engine_decode_step(e);
    }
    return NULL;
}

/* ---- the HTTP side's calls ---- */

int serve_engine_submit(struct serve_engine *e, struct serve_req *r)
{
    pthread_mutex_lock(&e->mu);
    int ok = !e->quit && e->q_len < e->queue_max + (e->n_slots - e->n_active); /* free slots take some */
    if (ok) {
        e->queue[(e->q_head + e->q_len) % e->q_cap] = r;
        e->q_len++;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return ok ? 0 : -1;
}

void serve_engine_cancel_all(struct serve_engine *e)
{
    pthread_mutex_lock(&e->mu);
    e->cancel_all = 1;
    for (int i = 0; i < e->q_len; i++)
        atomic_store(&e->queue[(e->q_head + i) % e->q_cap]->cancelled, 1);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

int serve_engine_n_ctx(const struct serve_engine *e) { return e->n_ctx; }

long long serve_engine_n_evaluated(const struct serve_engine *e) { return e->n_eval; }

static void engine_free(struct serve_engine *e)
{
    for (int i = 0; e->slots && i < e->n_slots; i++) {
        loom_session_free(e->slots[i].s);
        loom_stop_free(e->slots[i].think_end);
    }
    free(e->slots);
    free(e->logits);
    free(e->batch_s);
    free(e->batch_tok);
    free(e->batch_slot);
    free(e->history);
    free(e->queue);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

void serve_engine_stop(struct serve_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->quit = 1; /* the engine releases every request as cancelled at its next step, then ends */
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->started)
        pthread_join(e->thread, NULL);
    engine_free(e);
}

static int engine_alloc(struct serve_engine *e, const struct serve_engine_opts *o, loom_error *err)
{
    size_t ns = (size_t)o->n_slots;
    e->slots = calloc(ns, sizeof *e->slots);
    e->logits = malloc(ns * (size_t)e->n_rows * sizeof(float));
    e->batch_s = calloc(ns, sizeof *e->batch_s);
    e->batch_tok = calloc(ns, sizeof *e->batch_tok);
    e->batch_slot = calloc(ns, sizeof *e->batch_slot);
    e->queue = calloc((size_t)e->q_cap, sizeof *e->queue);
    if (!e->slots || !e->logits || !e->batch_s || !e->batch_tok || !e->batch_slot || !e->queue)
        return loom_errorf(err, LOOM_E_NOMEM, "could not allocate %d slots", o->n_slots);
    loom_session_params sp = {.n_ctx = o->n_ctx, .n_threads = o->n_threads, /* checkpoints at prompt ends */
                              .k_type = o->k_type};
    for (int i = 0; i < o->n_slots; i++) {
        static const char *const think_end[] = {"</think>"};
        e->slots[i].s = loom_session_new(e->m, &sp, err);
        if (!e->slots[i].s)
            return err->code ? err->code : LOOM_E_NOMEM;
        e->slots[i].think_end = loom_stop_new(think_end, 1, err);
        if (!e->slots[i].think_end)
            return err->code;
    }
    e->n_ctx = loom_session_n_ctx(e->slots[0].s);
    e->max_batch = loom_sessions_decode_max(e->slots[0].s); /* every slot has the same context */
    e->history = malloc(sizeof *e->history * (size_t)e->n_ctx);
    return e->history ? LOOM_OK : loom_errorf(err, LOOM_E_NOMEM, "could not allocate the token history");
}

int serve_engine_start(struct serve_engine **out, const loom_model *m, const struct serve_engine_opts *o,
                       loom_error *err)
{
    struct serve_engine *e = calloc(1, sizeof *e);
    if (!e)
        return loom_errorf(err, LOOM_E_NOMEM, "could not allocate the engine");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->m = m;
    e->tok = loom_model_tokenizer(m);
    e->n_rows = loom_model_n_logits(m);
    e->n_slots = o->n_slots;
    e->prefill_chunk = o->prefill_chunk;
    e->queue_max = o->queue_max;
    e->q_cap = o->queue_max + o->n_slots;
    int rc = engine_alloc(e, o, err);
    if (rc != LOOM_OK) {
        engine_free(e);
        return rc;
    }
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old); /* the engine (and its sessions' workers) never take a signal */
    rc = pthread_create(&e->thread, NULL, engine_main, e);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        engine_free(e);
        return loom_errorf(err, LOOM_E_NOMEM, "could not start the engine thread");
    }
    e->started = 1;
    *out = e;
    return LOOM_OK;
}
