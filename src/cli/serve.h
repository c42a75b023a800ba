/* serve.h — what the three parts of `loom serve` share: the generation request (serve_req) that the HTTP side
 * (serve.c) parses (serve_json.c) and hands to the engine thread (serve_engine.c), and through which the engine
 * hands text back. The fields are split by owner: the HTTP side's, the engine's, and those shared under mu. */
#ifndef LOOM_CLI_SERVE_H
#define LOOM_CLI_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "loom.h"

#define SERVE_MAX_STOPS 16      /* stop strings per request */
#define SERVE_STOP_MAX_LEN 256  /* bytes of one stop string */
#define SERVE_MAX_BIAS 1024     /* logit_bias entries per request */

enum serve_kind { SERVE_CHAT = 0, SERVE_COMPLETION = 1 };

/* How a generation ended. NONE while it runs. */
enum serve_finish {
    SERVE_FINISH_NONE = 0,
    SERVE_FINISH_STOP,      /* end-of-generation token or a stop string */
    SERVE_FINISH_LENGTH,    /* max_tokens or the end of the slot's context */
    SERVE_FINISH_SHUTDOWN,  /* the drain ran out of time (serve_engine_cancel_all): ends as at a limit, its text so
                             * far delivered (finish_reason "shutdown") */
    SERVE_FINISH_CANCELLED, /* the client went away, or a queued request the drain answers 503 */
    SERVE_FINISH_ERROR,     /* the engine failed (message in error) */
};

/* A growable byte buffer. */
struct serve_buf {
    char *p;
    size_t len, cap;
};
int serve_buf_put(struct serve_buf *b, const char *s, size_t n); /* LOOM_OK or LOOM_E_NOMEM; keeps p NUL-ended */
void serve_buf_free(struct serve_buf *b);

/* One generated token's log-probability and its most likely alternatives (logprobs, top_logprobs). */
struct serve_lp {
    int32_t id;
    float lp;
    int32_t top_id[LOOM_TOP_LOGPROBS_MAX]; /* -1 past the last */
    float top_lp[LOOM_TOP_LOGPROBS_MAX];
};
struct serve_lps {
    struct serve_lp *v;
    int n, cap;
};
int serve_lps_put(struct serve_lps *l, const struct serve_lp *x, int n); /* LOOM_OK or LOOM_E_NOMEM */

struct serve_req;
/* Called by the engine thread, with r->mu held, after it changed the shared fields: wakes the HTTP side. */
typedef void (*serve_wake_fn)(struct serve_req *r);

struct serve_req {
    /* Set by the HTTP side before submission, then read-only. */
    enum serve_kind kind;
    int stream;
    int32_t *prompt; /* [n_prompt] ids, rendered with provenance (caller text is data) */
    int n_prompt;
    int max_tokens;  /* 0 = until the end of the slot's context */
    int cache_mark;  /* a position the slot keeps a checkpoint at, for the prompt cache: where the next request's
                      * prompt will likely differ (the current turn's assistant header; the last token) */
    double deadline; /* loom_cli_now() time past which it ends as at max_tokens (serve --timeout); 0 = none */
    int think_open;  /* the prompt ends inside <think>: text before </think> is reasoning */
    int logprobs;    /* -1: not asked; else the alternatives per token to report (0..LOOM_TOP_LOGPROBS_MAX) */
    const loom_tokenizer *tok;
    int32_t *forced; /* tests only (LOOM_SERVE_FORCED_OUTPUT): the tokens to generate instead of sampling */
    int n_forced;
    loom_sampler *smp; /* owned; used by the engine only after submission */
    loom_stop *stop;   /* owned; likewise */
    serve_wake_fn wake;

    /* Shared between the engine and the HTTP side, under mu. The engine appends text and, at the end, sets
     * finish, n_gen, error and released (after which it never touches the request again). */
    pthread_mutex_t mu;
    struct serve_buf content, reasoning; /* produced and not yet taken by the HTTP side */
    struct serve_lps lps;                /* likewise, with logprobs: one per generated token */
    enum serve_finish finish;
    int n_gen; /* tokens sampled */
    int n_cached; /* prompt tokens the slot already held (set by the engine when the request starts) */
    char error[256];
    int released;
    atomic_int cancelled; /* set by the HTTP side (client gone, shutdown): the engine stops it at its next step */

    /* The HTTP side's own (serve.c): connection, notification event, accumulated text, list links. */
    void *http;   /* struct evhttp_request *, NULL once replied to or once the client went away */
    void *notify; /* struct event * that wake makes active */
    void *srv;
    struct serve_req *prev, *next;
    struct serve_buf all_content, all_reasoning; /* non-streaming: the whole answer */
    struct serve_lps all_lps;
    size_t lp_offset;        /* /v1/completions logprobs: text_offset of the next token */
    loom_tool_parser *tools; /* with tools (tool_choice not "none"): content goes through it */
    void *calls;             /* the tool calls recognised, a JSON array (json_t *, serve_json.c) */
    int parallel_tool_calls; /* 0: calls after the first are dropped */
    int include_usage, return_prompt_tokens, header_sent;
    int client_gone; /* the connection closed: libevent keeps http detached until we end it */
    char id[48];
    long long created;
};

/* ---- serve_json.c ---- */

/* What request parsing needs to know about the server. */
struct serve_ctx {
    const loom_model *m;
    const loom_tokenizer *tok;
    const loom_chat_template *tmpl;
    int n_ctx;          /* positions of a slot */
    int allow_forced;   /* tests only: requests may give "forced_output" (LOOM_SERVE_FORCED_OUTPUT=1) */
};

/* An HTTP error to send: status, OpenAI error type, the field it concerns (its path, as messages[2].content; empty
 * when none), a code and a message. */
struct serve_err {
    int status;
    const char *type;
    char param[96];
    const char *code;
    char msg[600];
};

/* Parse a POST body of /v1/chat/completions (kind SERVE_CHAT) or /v1/completions into a fresh request (prompt
 * rendered and tokenized, sampler and stop matcher made). NULL with e filled when the body is refused. */
struct serve_req *serve_parse_request(const struct serve_ctx *c, enum serve_kind kind, const char *body,
                                      size_t len, struct serve_err *e);
/* Free what serve_parse_request allocated (not the HTTP side's objects). */
void serve_req_free_fields(struct serve_req *r);
/* /tokenize and /detokenize: the response body (fresh, caller frees) or NULL with e filled. */
char *serve_tokenize(const struct serve_ctx *c, const char *body, size_t len, struct serve_err *e);
char *serve_detokenize(const struct serve_ctx *c, const char *body, size_t len, struct serve_err *e);
/* The body of an error response (fresh, caller frees; NULL only when out of memory). */
char *serve_error_body(const struct serve_err *e);
/* Fill e and return NULL, for one-line refusals. */
void *serve_fail(struct serve_err *e, int status, const char *param, const char *code, const char *fmt, ...)
    LOOM_PRINTF_FORMAT(5, 6);

/* Response shapes. model is the served model's id. */
char *serve_chunk_json(struct serve_req *r, const char *model, const char *content, size_t n_content,
                       const char *reasoning, size_t n_reasoning, const struct serve_lps *lps, int first);
/* Record a tool call (name, arguments JSON text) in r->calls; with streaming, the delta chunk that carries it
 * (fresh, caller frees), else an empty string's copy; NULL when out of memory or dropped (parallel_tool_calls
 * false and a call already made: *dropped set). */
char *serve_tool_call(struct serve_req *r, const char *model, const char *name, const char *arguments, int *dropped);
char *serve_final_chunk_json(const struct serve_req *r, const char *model);
/* OpenAI's usage chunk of a stream (stream_options.include_usage): no choices, the usage. */
char *serve_usage_chunk_json(const struct serve_req *r, const char *model);
char *serve_response_json(const struct serve_req *r, const char *model);
/* finish_reason: "shutdown" when the drain ended it, "tool_calls" when the answer made calls and ended on its own,
 * else "stop" or "length". */
const char *serve_finish_name(const struct serve_req *r);
/* Nonzero when s[n] is valid UTF-8. */
int serve_utf8_valid(const char *s, size_t n);

/* ---- the chat page (web/index.html, built into the binary by the Makefile) ---- */
extern const unsigned char loom_web_page[];
extern const unsigned long loom_web_page_len;

/* ---- serve_engine.c ---- */

struct serve_engine;
struct serve_engine_opts {
    int n_slots;       /* --parallel */
    int n_ctx;         /* positions per slot */
    int n_threads;     /* per slot session; 0 = online CPUs */
    int queue_max;     /* requests waiting beyond the slots */
    int prefill_chunk; /* prompt tokens per prefill step */
    enum loom_kv_type k_type; /* --cache-type-k: the slots' K cache type */
};
/* Make the slots and start the engine thread (signals blocked in it). LOOM_OK or a code with err filled. */
int serve_engine_start(struct serve_engine **out, const loom_model *m, const struct serve_engine_opts *o,
                       loom_error *err);
/* Queue r for a slot (the engine owns it until it sets r->released). Returns 0, or -1 when the queue is full
 * (r untouched). */
int serve_engine_submit(struct serve_engine *e, struct serve_req *r);
/* Ask every queued and running request to stop (at the engine's next step): a running one ends as at a limit
 * (SERVE_FINISH_SHUTDOWN, its text so far delivered), a queued one is cancelled. */
void serve_engine_cancel_all(struct serve_engine *e);
/* Positions of one slot's context. */
int serve_engine_n_ctx(const struct serve_engine *e);
/* Tokens the engine evaluated so far (prompts, decode steps, re-evaluations after a rewind). */
long long serve_engine_n_evaluated(const struct serve_engine *e);
/* Cancel everything, release every request, join the thread and free the slots. */
void serve_engine_stop(struct serve_engine *e);

#endif
