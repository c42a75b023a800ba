/* serve.c — `loom serve`: the command line, and the HTTP side on libevent's evhttp (main thread): routes, API
 * key, body limit, handing generation requests to the engine thread (serve_engine.c) and their text back to the
 * client as one JSON reply or as server-sent events, client disconnects, and the drain on SIGTERM / SIGINT /
 * SIGHUP. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/serve.h"
#include "loom.h"

struct serve_opts {
    const char *model, *host, *api_key, *template_file;
    int port, n_parallel, n_ctx, n_threads, queue_max, prefill_chunk, drain_s, timeout_s;
    struct loom_cli_model_opts mo; /* --check-tensors, --mem-budget (--stats: at exit) */
    long long max_body;
};

struct server {
    const struct serve_opts *o;
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct event *ev_int, *ev_term, *ev_hup, *ev_drain, *ev_watch;
    struct serve_engine *eng;
    struct serve_ctx ctx;
    char model_id[256];
    long long started;
    struct serve_req *live; /* submitted requests not yet freed (doubly linked) */
    int n_live;
    int n_sending; /* generation replies not yet written out */
    int draining, cancelled_all, second_sig; /* second_sig: the signal that cut the drain short, else 0 */
    double drain_deadline;
    unsigned long long n_requests;
    struct serve_buf take_content, take_reasoning; /* text taken from a request under its lock */
    struct serve_buf parsed; /* content the tool-call parser passed on, not yet sent or kept */
    struct serve_lps take_lps; /* logprobs taken from a request under its lock */
};

static const char SERVE_SYNOPSIS[] =
    "usage: loom serve [-m FILE] [--host ADDR] [--port N] [--parallel N] [-c CTX] [-t THREADS] [--api-key KEY]\n"
    "                  [--max-body BYTES] [--queue N] [--prefill-chunk N] [--timeout S] [--drain-timeout S]\n"
    "                  [--chat-template-file FILE] [--check-tensors] [--mem-budget SIZE] [--read-ahead MODE]\n"
    "                  [--stats] [--cache-type-k TYPE]\n";

static void serve_usage(FILE *f)
{
    fprintf(f, "%s"
               "  -m FILE            GGUF model (default: the synthetic default model, prepared on first use)\n"
               "  --host ADDR        address to listen on (default 127.0.0.1: this machine only)\n"
               "  --port N           TCP port (default 8080; 0 = any free port, printed at start)\n"
               "  --parallel N       slots: requests generated at once, decoded as one batch (default 1)\n"
               "  -c CTX             context positions of each slot (default: min(model context, 4096))\n"
               "  -t THREADS         worker threads (default: all online CPUs)\n"
               "  --api-key KEY      require 'Authorization: Bearer KEY' (all endpoints but /health)\n"
               "  --max-body BYTES   largest request body (default 8388608; larger: 413)\n"
               "  --queue N          requests that may wait for a slot (default 64; more: 503)\n"
               "  --prefill-chunk N  prompt tokens per prefill step between decode steps (default 256)\n"
               "  --timeout S        seconds a request may take from its arrival, waiting included; then it ends\n"
               "                     as at max_tokens (finish_reason length; default 600, 0 = no limit)\n"
               "  --drain-timeout S  on SIGTERM / SIGINT / SIGHUP, seconds running requests may take to finish\n"
               "                     (default 30); then each ends with its text so far (finish_reason shutdown)\n"
               "  --chat-template-file FILE  the chat template to render with instead of the model file's own\n"
               "                     (any Jinja chat template: the official Qwen3.5 one renders built in, others\n"
               "                     through loom's Jinja interpreter; tool calls need the official Qwen3.5 one)\n"
               LOOM_CLI_MODEL_USAGE
               "Endpoints: GET / (a chat page), GET /health, GET /v1/models, POST /v1/chat/completions,\n"
               "POST /v1/completions, POST /tokenize, POST /detokenize. Of llama.cpp server's request fields,\n"
               "n_predict (max_tokens), repeat_penalty, repeat_last_n (-1: the slot's context) and seed -1 (a\n"
               "fresh one) are taken; the others loom does not implement (n_probs, typical_p, mirostat, grammar,\n"
               "...) only at their neutral values, else 400 naming the field (and the OpenAI one to use).\n",
            SERVE_SYNOPSIS);
}

/* What serve takes: serve_set_option's options (each takes a value; --api-key's no message shows), then the
 * model options. */
static const struct loom_cli_option SERVE_OPTIONS[] = {
    {"-m", LOOM_CLI_ONE}, {"--host", LOOM_CLI_VALUE}, {"--port", LOOM_CLI_VALUE}, {"--api-key", LOOM_CLI_SECRET},
    {"--chat-template-file", LOOM_CLI_ONE}, {"--parallel", LOOM_CLI_VALUE}, {"-c", LOOM_CLI_VALUE},
    {"-t", LOOM_CLI_VALUE}, {"--queue", LOOM_CLI_VALUE}, {"--prefill-chunk", LOOM_CLI_VALUE},
    {"--drain-timeout", LOOM_CLI_VALUE}, {"--timeout", LOOM_CLI_VALUE}, {"--max-body", LOOM_CLI_VALUE},
    LOOM_CLI_MODEL_TABLE, {NULL, LOOM_CLI_VALUE}};

/* 1 with the reason printed (never the key) when val cannot be an --api-key: holding white space at either end or a
 * control character, which no request could send back (the header's value is trimmed). A second, different key is
 * refused by the parser (the table's SECRET kind, loom_cli_next_arg). */
static int serve_bad_key(const char *val)
{
    size_t n = strlen(val);
    int ctl = 0;
    for (size_t i = 0; i < n; i++)
        ctl |= (unsigned char)val[i] < 0x20 || val[i] == 0x7f;
    if (ctl || val[0] == ' ' || val[n - 1] == ' ')
        fprintf(stderr, "loom serve: --api-key: expected a key without spaces at either end or control characters, "
                        "which no request could send (its value is not shown)\n");
    return ctl || val[0] == ' ' || val[n - 1] == ' ';
}

static int serve_set_option(void *opts, const char *opt, const char *val)
{
    struct serve_opts *o = opts;
    static const struct {
        const char *name;
        size_t off;
    } strs[] = {
        {"-m", offsetof(struct serve_opts, model)},
        {"--host", offsetof(struct serve_opts, host)},
        {"--api-key", offsetof(struct serve_opts, api_key)},
        {"--chat-template-file", offsetof(struct serve_opts, template_file)},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if (strcmp(opt, strs[i].name))
            continue;
        if (!*val && i > 0) {
            fprintf(stderr, "loom serve: %s expects a non-empty value\n", opt);
            return -1;
        }
        const char **slot = (const char **)((char *)o + strs[i].off);
        if (slot == &o->api_key && serve_bad_key(val))
            return -1;
        *slot = val;
        return 0;
    }
    static const struct {
        const char *name;
        size_t off;
        long long lo, hi;
    } ints[] = {
        {"--port", offsetof(struct serve_opts, port), 0, 65535},
        {"--parallel", offsetof(struct serve_opts, n_parallel), 1, 512},
        {"-c", offsetof(struct serve_opts, n_ctx), 1, LOOM_CLI_CTX_MAX},
        {"-t", offsetof(struct serve_opts, n_threads), 1, LOOM_CLI_THREADS_MAX},
        {"--queue", offsetof(struct serve_opts, queue_max), 0, 1 << 16},
        {"--prefill-chunk", offsetof(struct serve_opts, prefill_chunk), 1, 1 << 16},
        {"--drain-timeout", offsetof(struct serve_opts, drain_s), 0, 3600},
        {"--timeout", offsetof(struct serve_opts, timeout_s), 0, 1 << 24},
    };
    long long v;
    if (!strcmp(opt, "--max-body")) {
        if (loom_cli_parse_int(val, 1024, 1ll << 32, &v)) {
            fprintf(stderr, "loom serve: --max-body expects an integer in [1024, %lld], found '%s'\n", 1ll << 32, val);
            return -1;
        }
        o->max_body = v;
        return 0;
    }
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(opt, ints[i].name))
            continue;
        if (loom_cli_parse_int(val, ints[i].lo, ints[i].hi, &v)) {
            fprintf(stderr, "loom serve: %s expects an integer in [%lld, %lld], found '%s'\n", opt, ints[i].lo,
                    ints[i].hi, val);
            return -1;
        }
        *(int *)((char *)o + ints[i].off) = (int)v;
        return 0;
    }
    fprintf(stderr, "loom serve: %s is in serve's option table but no branch takes it (a bug in loom)\n", opt);
    return -1;
}

/* ---- replies ---- */

static const char *status_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

static void send_body(struct evhttp_request *h, int status, const char *body)
{
    struct evbuffer *b = evbuffer_new();
    if (b && body)
        evbuffer_add(b, body, strlen(body));
    evhttp_add_header(evhttp_request_get_output_headers(h), "Content-Type", "application/json");
    evhttp_send_reply(h, status, status_reason(status), b);
    if (b)
        evbuffer_free(b);
}

static void send_error(struct evhttp_request *h, const struct serve_err *e)
{
    char *body = serve_error_body(e);
    send_body(h, e->status ? e->status : 500, body ? body : "{\"error\":{\"message\":\"out of memory\"}}");
    free(body);
}

static void send_errorf(struct evhttp_request *h, int status, const char *param, const char *code, const char *msg)
{
    struct serve_err e = {0};
    serve_fail(&e, status, param, code, "%s", msg);
    send_error(h, &e);
}

/* One server-sent event: "data: TEXT\n\n". */
static void send_event(struct evhttp_request *h, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    if (!b || !text) {
        if (b)
            evbuffer_free(b);
        return;
    }
    evbuffer_add_printf(b, "data: %s\n\n", text);
    evhttp_send_reply_chunk(h, b);
    evbuffer_free(b);
}

/* ---- generation requests: text from the engine to the client ---- */

static void req_unlink_free(struct server *s, struct serve_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (s->live == r)
        s->live = r->next;
    if (r->next)
        r->next->prev = r->prev;
    s->n_live--;
    if (r->notify)
        event_free(r->notify);
    serve_req_free_fields(r);
    free(r);
}

/* Text and logprobs (lps may be NULL) for the client: one chunk event (streaming) or kept for the reply. */
static void req_emit(struct server *s, struct serve_req *r, const char *c, size_t n_c, const char *rs, size_t n_rs,
                     const struct serve_lps *lps)
{
    if (r->client_gone || (!n_c && !n_rs && !(lps && lps->n)))
        return;
    if (!r->stream) {
        if (serve_buf_put(&r->all_content, c ? c : "", n_c) != LOOM_OK ||
            serve_buf_put(&r->all_reasoning, rs ? rs : "", n_rs) != LOOM_OK ||
            (lps && serve_lps_put(&r->all_lps, lps->v, lps->n) != LOOM_OK))
            atomic_store(&r->cancelled, 1); /* out of memory: stop it; the reply says so below */
        return;
    }
    char *body = serve_chunk_json(r, s->model_id, c, n_c, rs, n_rs, lps, 0);
    send_event(r->http, body);
    free(body);
}

/* The tool-call parser's output for one delivery: content gathers in s->parsed; a call first sends what came
 * before it (the reasoning of the delivery, then that content), then itself. */
struct parsed_to {
    struct server *s;
    struct serve_req *r;
    const char *rs; /* the delivery's reasoning and logprobs, until sent */
    size_t n_rs;
    const struct serve_lps *lps;
};

static void parsed_flush(struct parsed_to *d)
{
    req_emit(d->s, d->r, d->s->parsed.p, d->s->parsed.len, d->rs, d->n_rs, d->lps);
    d->s->parsed.len = 0, d->n_rs = 0, d->lps = NULL;
}

static void on_parsed_content(void *ctx, const char *text, size_t n)
{
    struct parsed_to *d = ctx;
    if (serve_buf_put(&d->s->parsed, text, n) != LOOM_OK)
        atomic_store(&d->r->cancelled, 1);
}

static void on_parsed_call(void *ctx, const char *name, const char *arguments)
{
    struct parsed_to *d = ctx;
    parsed_flush(d);
    int dropped;
    char *chunk = serve_tool_call(d->r, d->s->model_id, name, arguments, &dropped);
    if (!chunk && !dropped)
        atomic_store(&d->r->cancelled, 1); /* out of memory */
    else if (chunk && d->r->stream && !d->r->client_gone)
        send_event(d->r->http, chunk);
    free(chunk);
}

/* Text the engine produced (content through the tool-call parser when the request offers tools), or with
 * at_end NULL texts, the end of the answer: what the parser held. */
static void req_deliver(struct server *s, struct serve_req *r, const struct serve_buf *c, const struct serve_buf *rs,
                        const struct serve_lps *lps, int at_end)
{
    if (!r->tools) {
        req_emit(s, r, c->p, c->len, rs->p, rs->len, lps);
        return;
    }
    struct parsed_to d = {s, r, rs->p, rs->len, lps};
    loom_tool_sink sink = {&d, on_parsed_content, on_parsed_call};
    loom_error err = {0};
    s->parsed.len = 0;
    int rc = at_end ? loom_tool_parser_end(r->tools, &sink, &err)
                    : loom_tool_parser_feed(r->tools, c->p ? c->p : "", c->len, &sink, &err);
    if (rc < 0)
        atomic_store(&r->cancelled, 1); /* out of memory */
    parsed_flush(&d);
}

/* The end of a stream: the last chunk (finish_reason, usage), OpenAI's usage chunk when asked, [DONE]. */
static void stream_end(struct server *s, struct serve_req *r)
{
    struct evhttp_request *h = r->http;
    if (r->finish == SERVE_FINISH_ERROR || r->finish == SERVE_FINISH_CANCELLED) {
        struct serve_err e = {0};
        serve_fail(&e, r->finish == SERVE_FINISH_ERROR ? 500 : 503, NULL, NULL, "%s",
                   r->finish == SERVE_FINISH_ERROR ? r->error : "the server is shutting down");
        char *body = serve_error_body(&e);
        send_event(h, body);
        free(body);
    } else {
        char *body = serve_final_chunk_json(r, s->model_id);
        send_event(h, body);
        free(body);
    }
    if (r->include_usage && r->finish != SERVE_FINISH_ERROR && r->finish != SERVE_FINISH_CANCELLED) {
        char *body = serve_usage_chunk_json(r, s->model_id);
        send_event(h, body);
        free(body);
    }
    send_event(h, "[DONE]");
    evhttp_send_reply_end(h);
}

static void on_reply_sent(struct evhttp_request *h, void *arg)
{
    (void)h;
    ((struct server *)arg)->n_sending--;
}

/* The engine released r: reply (or, for a client gone, let libevent free its detached request) and free r. */
static void req_finish(struct server *s, struct serve_req *r)
{
    struct evhttp_request *h = r->http;
    if (r->client_gone) {
        if (r->header_sent)
            evhttp_send_reply_end(h); /* frees the request libevent detached from the closed connection */
        else
            evhttp_send_reply(h, 503, status_reason(503), NULL);
    } else {
        if (r->finish != SERVE_FINISH_ERROR && r->finish != SERVE_FINISH_CANCELLED) { /* the parser's held text */
            struct serve_buf none = {0};
            req_deliver(s, r, &none, &none, NULL, 1);
        }
        evhttp_connection_set_closecb(evhttp_request_get_connection(h), NULL, NULL);
        s->n_sending++; /* until the reply is written out: the drain waits for it */
        evhttp_request_set_on_complete_cb(h, on_reply_sent, s);
        if (r->stream)
            stream_end(s, r);
        else if (r->finish == SERVE_FINISH_ERROR)
            send_errorf(h, 500, NULL, "engine_error", r->error);
        else if (r->finish == SERVE_FINISH_CANCELLED) /* queued when the drain began */
            send_errorf(h, 503, NULL, "cancelled", "the request was stopped: the server is shutting down");
        else {
            char *body = serve_response_json(r, s->model_id);
            if (body)
                send_body(h, 200, body);
            else
                send_errorf(h, 500, NULL, NULL, "out of memory");
            free(body);
        }
    }
    r->http = NULL;
    req_unlink_free(s, r);
}

/* The engine woke r (more text, or its end). */
static void on_notify(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct serve_req *r = arg;
    struct server *s = r->srv;
    s->take_content.len = s->take_reasoning.len = 0;
    s->take_lps.n = 0;
    pthread_mutex_lock(&r->mu);
    int ok = serve_buf_put(&s->take_content, r->content.p, r->content.len) == LOOM_OK &&
             serve_buf_put(&s->take_reasoning, r->reasoning.p, r->reasoning.len) == LOOM_OK &&
             serve_lps_put(&s->take_lps, r->lps.v, r->lps.n) == LOOM_OK;
    r->content.len = r->reasoning.len = 0;
    r->lps.n = 0;
    int released = r->released;
    pthread_mutex_unlock(&r->mu);
    if (ok)
        req_deliver(s, r, &s->take_content, &s->take_reasoning, &s->take_lps, 0);
    else
        atomic_store(&r->cancelled, 1);
    if (released)
        req_finish(s, r);
}

/* Called by the engine thread with r->mu held. */
static void req_wake(struct serve_req *r)
{
    event_active(r->notify, EV_READ, 0);
}

/* The client closed the connection: libevent keeps the request (detached) until we end it; the engine stops
 * generating for it at its next step. */
static void on_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct serve_req *r = arg;
    r->client_gone = 1;
    atomic_store(&r->cancelled, 1);
}

/* evhttp does not read a connection while its request is being answered, so a client that closes it before the
 * reply starts streaming goes unnoticed: every 100 ms, each waiting request's socket is peeked at, and one at its
 * end (or failed) cancels the request. Data there (a pipelined request) means the client is still there. */
static void on_watch_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct server *s = arg;
    for (struct serve_req *r = s->live; r; r = r->next) {
        if (!r->http || r->client_gone || atomic_load(&r->cancelled))
            continue;
        struct evhttp_connection *evcon = evhttp_request_get_connection(r->http);
        struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
        int sock = bev ? (int)bufferevent_getfd(bev) : -1;
        char c;
        ssize_t n = sock >= 0 ? recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT) : 1;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            atomic_store(&r->cancelled, 1); /* the reply goes to a closed socket; evhttp cleans up after it */
    }
}

static void handle_generate(struct server *s, struct evhttp_request *h, enum serve_kind kind, const char *body,
                            size_t len)
{
    struct serve_err e = {0};
    struct serve_req *r = serve_parse_request(&s->ctx, kind, body, len, &e);
    if (!r) {
        send_error(h, &e);
        return;
    }
    r->srv = s;
    r->wake = req_wake;
    r->created = (long long)time(NULL);
    r->deadline = s->o->timeout_s ? loom_cli_now() + s->o->timeout_s : 0;
    snprintf(r->id, sizeof r->id, "%s-%llx%08llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl", ++s->n_requests,
             (unsigned long long)(s->started & 0xffffffff));
    r->notify = event_new(s->base, -1, 0, on_notify, r);
    r->next = s->live; /* linked first, so that req_unlink_free undoes it on every path */
    if (s->live)
        s->live->prev = r;
    s->live = r;
    s->n_live++;
    if (!r->notify) {
        send_errorf(h, 500, NULL, NULL, "out of memory");
        req_unlink_free(s, r);
        return;
    }
    if (serve_engine_submit(s->eng, r) != 0) {
        char msg[160];
        int n = s->o->n_parallel, q = s->o->queue_max;
        snprintf(msg, sizeof msg, "the server is busy: %s %d slot%s generating and %d request%s waiting",
                 n == 1 ? "its" : "all", n, n == 1 ? " is" : "s are", q, q == 1 ? " is" : "s are");
        send_errorf(h, 503, NULL, "server_busy", msg);
        req_unlink_free(s, r);
        return;
    }
    r->http = h;
    evhttp_connection_set_closecb(evhttp_request_get_connection(h), on_close, r);
    if (r->stream) {
        struct evkeyvalq *hd = evhttp_request_get_output_headers(h);
        evhttp_add_header(hd, "Content-Type", "text/event-stream");
        evhttp_add_header(hd, "Cache-Control", "no-cache");
        evhttp_send_reply_start(h, 200, "OK");
        r->header_sent = 1;
        if (kind == SERVE_CHAT) {
            char *first = serve_chunk_json(r, s->model_id, "", 0, "", 0, NULL, 1);
            send_event(h, first);
            free(first);
        }
    }
}

/* ---- the other routes ---- */

/* GET /: the chat page (no API key needed: it holds nothing; its own requests carry the key the user types). Its
 * policy lets it load nothing from elsewhere. */
static void handle_page(struct server *s, struct evhttp_request *h, const char *body, size_t len)
{
    (void)s, (void)body, (void)len;
    struct evbuffer *b = evbuffer_new();
    struct evkeyvalq *hd = evhttp_request_get_output_headers(h);
    evhttp_add_header(hd, "Content-Type", "text/html; charset=utf-8");
    evhttp_add_header(hd, "Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; "
                                                     "style-src 'unsafe-inline'");
    evhttp_add_header(hd, "Cache-Control", "no-cache");
    if (b)
        evbuffer_add_reference(b, loom_web_page, loom_web_page_len, NULL, NULL);
    evhttp_send_reply(h, b ? 200 : 500, b ? "OK" : status_reason(500), b);
    if (b)
        evbuffer_free(b);
}

static void handle_health(struct server *s, struct evhttp_request *h, const char *body, size_t len)
{
    (void)s, (void)body, (void)len;
    send_body(h, 200, "{\"status\":\"ok\"}");
}

static void handle_models(struct server *s, struct evhttp_request *h, const char *body, size_t len)
{
    (void)body, (void)len;
    char buf[768];
    snprintf(buf, sizeof buf,
             "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\",\"created\":%lld,\"owned_by\":"
             "\"loom\",\"meta\":{\"n_ctx_slot\":%d,\"n_ctx_train\":%d,\"n_slots\":%d,\"kernels\":\"%s\","
             "\"orders\":\"%s\",\"orders_from\":\"%s\"}}]}",
             s->model_id, s->started, s->ctx.n_ctx, loom_model_n_ctx_train(s->ctx.m), s->o->n_parallel,
             loom_kernels_name(), loom_orders_name(), loom_cli_orders_from());
    send_body(h, 200, buf);
}

static void handle_chat(struct server *s, struct evhttp_request *h, const char *body, size_t len)
{
    handle_generate(s, h, SERVE_CHAT, body, len);
}

static void handle_completion(struct server *s, struct evhttp_request *h, const char *body, size_t len)
{
    handle_generate(s, h, SERVE_COMPLETION, body, len);
}

static void handle_tokens(struct server *s, struct evhttp_request *h, const char *body, size_t len, int detok)
{
    struct serve_err e = {0};
    char *out = detok ? serve_detokenize(&s->ctx, body, len, &e) : serve_tokenize(&s->ctx, body, len, &e);
    if (out)
        send_body(h, 200, out);
    else
        send_error(h, &e);
    free(out);
}

static void handle_tokenize(struct server *s, struct evhttp_request *h, const char *body, size_t len)
{
    handle_tokens(s, h, body, len, 0);
}

static void handle_detokenize(struct server *s, struct evhttp_request *h, const char *body, size_t len)
{
    handle_tokens(s, h, body, len, 1);
}

static const struct route {
    const char *path;
    enum evhttp_cmd_type method;
    void (*fn)(struct server *s, struct evhttp_request *h, const char *body, size_t len);
} ROUTES[] = {
    {"/", EVHTTP_REQ_GET, handle_page},
    {"/index.html", EVHTTP_REQ_GET, handle_page},
    {"/health", EVHTTP_REQ_GET, handle_health},
    {"/v1/health", EVHTTP_REQ_GET, handle_health},
    {"/v1/models", EVHTTP_REQ_GET, handle_models},
    {"/models", EVHTTP_REQ_GET, handle_models},
    {"/v1/chat/completions", EVHTTP_REQ_POST, handle_chat},
    {"/chat/completions", EVHTTP_REQ_POST, handle_chat},
    {"/v1/completions", EVHTTP_REQ_POST, handle_completion},
    {"/completions", EVHTTP_REQ_POST, handle_completion},
    {"/tokenize", EVHTTP_REQ_POST, handle_tokenize},
    {"/detokenize", EVHTTP_REQ_POST, handle_detokenize},
};

/* An HTTP method's name. */
static const char *method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return "another method";
    }
}

/* With --api-key, what is wrong with the request's credentials (NULL: nothing). RFC 6750 2.1 and RFC 7235 2.1:
 * "Authorization: Bearer KEY", the scheme's name in any case (as HTTP's are), one or more spaces, then the key,
 * compared exactly (in time independent of where it differs); the white space around the header's value is not
 * part of it (RFC 7230 3.2). A message never shows the value: it may be a key. *bad_key: the key was wrong. */
static const char *auth_problem(const struct server *s, struct evhttp_request *h, int *bad_key)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(h), "Authorization");
    *bad_key = 0;
    if (!v)
        return "missing API key: expected the header 'Authorization: Bearer KEY'";
    v += strspn(v, " \t");
    size_t n = strlen(v), scheme = strcspn(v, " \t");
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    if (scheme != 6 || strncasecmp(v, "Bearer", 6))
        return "Authorization: expected the scheme Bearer, then the key ('Bearer KEY'), found another scheme or none";
    size_t sp = strspn(v + 6, " ");
    if (6 + sp >= n)
        return "Authorization: expected 'Bearer KEY', found the scheme Bearer with no key";
    if (sp == 0)
        return "Authorization: expected one or more spaces between Bearer and the key, found a tab";
    const char *key = v + 6 + sp;
    size_t k = strlen(s->o->api_key);
    n -= 6 + sp;
    unsigned diff = n != k;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)s->o->api_key[i < k ? i : 0];
    *bad_key = diff != 0;
    return diff ? "Authorization: wrong API key (expected the one loom serve was given with --api-key)" : NULL;
}

/* 401 with RFC 6750's challenge (error="invalid_token" for a wrong key). */
static void send_unauthorized(struct evhttp_request *h, const char *msg, int bad_key)
{
    evhttp_add_header(evhttp_request_get_output_headers(h), "WWW-Authenticate",
                      bad_key ? "Bearer error=\"invalid_token\"" : "Bearer");
    send_errorf(h, 401, NULL, "invalid_api_key", msg);
}

static void on_request(struct evhttp_request *h, void *arg)
{
    struct server *s = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(h);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const struct route *rt = NULL, *known = NULL;
    for (size_t i = 0; path && i < sizeof ROUTES / sizeof ROUTES[0]; i++)
        if (!strcmp(path, ROUTES[i].path)) {
            known = &ROUTES[i];
            if (evhttp_request_get_command(h) == ROUTES[i].method)
                rt = &ROUTES[i];
        }
    if (s->draining)
        return send_errorf(h, 503, NULL, "shutting_down", "the server is shutting down");
    if (!known) {
        char shown[128]; /* the path as printable ASCII (others as '?'), cut to fit */
        size_t n = 0;
        for (const char *c = path ? path : ""; *c && n + 1 < sizeof shown; c++)
            shown[n++] = *c >= 0x20 && *c < 0x7f ? *c : '?';
        shown[n] = 0;
        struct serve_err e = {0};
        serve_fail(&e, 404, NULL, "not_found",
                   "no endpoint '%s%s' (loom serves /v1/chat/completions, /v1/completions, /v1/models, /health, "
                   "/tokenize, /detokenize and the web page at /)",
                   shown, path && strlen(path) >= sizeof shown ? "..." : "");
        return send_error(h, &e);
    }
    if (!rt) {
        struct serve_err e = {0};
        serve_fail(&e, 405, NULL, "method_not_allowed", "%s takes %s, found %s", known->path,
                   method_name(known->method), method_name(evhttp_request_get_command(h)));
        return send_error(h, &e);
    }
    int bad_key;
    const char *denied = rt->fn != handle_health && rt->fn != handle_page && s->o->api_key
                             ? auth_problem(s, h, &bad_key) : NULL;
    if (denied)
        return send_unauthorized(h, denied, bad_key);
    struct evbuffer *in = evhttp_request_get_input_buffer(h);
    size_t len = evbuffer_get_length(in);
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    if (!body)
        return send_errorf(h, 500, NULL, NULL, "out of memory");
    rt->fn(s, h, body, len);
}

/* ---- shutdown: SIGTERM / SIGINT / SIGHUP drain ---- */

static double now_s(void) { return loom_cli_now(); }

/* Count the live requests that are running (in a slot) and those still queued, not yet released; with
 * cancel_queued, the queued ones are cancelled: the engine answers them 503 at its next step (one it admits
 * meanwhile is stopped before its prefill). A request's n_cached is -1 until it takes a slot (under its mu). */
static void count_live(struct server *s, int *running, int *queued, int cancel_queued)
{
    *running = *queued = 0;
    for (struct serve_req *r = s->live; r; r = r->next) {
        pthread_mutex_lock(&r->mu);
        int started = r->n_cached >= 0, released = r->released;
        if (!started && !released && cancel_queued)
            atomic_store(&r->cancelled, 1);
        pthread_mutex_unlock(&r->mu);
        *running += started && !released;
        *queued += !started && !released;
    }
}

static void on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    struct server *s = arg;
    double t = now_s();
    if ((s->n_live == 0 && s->n_sending <= 0) || t > s->drain_deadline + 5) {
        event_base_loopexit(s->base, NULL);
        return;
    }
    if (t > s->drain_deadline && !s->cancelled_all) {
        int running, queued;
        count_live(s, &running, &queued, 0);
        char why[64] = "drain timeout";
        if (s->second_sig)
            snprintf(why, sizeof why, "a second signal (%s) during the drain",
                     loom_cli_handled_signal_name(s->second_sig));
        fprintf(stderr, "loom serve: %s: ending %d running request%s with the text so far (finish_reason "
                        "shutdown)\n", why, running, running == 1 ? "" : "s");
        s->cancelled_all = 1;
        serve_engine_cancel_all(s->eng);
    }
}

/* The first signal starts the drain: no new connections or requests; the queued requests (not yet started) are
 * answered 503 at once, the running ones may finish within --drain-timeout. A second one stops waiting. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct server *s = arg;
    if (s->draining) {
        s->second_sig = s->second_sig ? s->second_sig : (int)sig;
        s->drain_deadline = now_s() - 1;
        return;
    }
    s->draining = 1;
    s->drain_deadline = now_s() + s->o->drain_s;
    if (s->sock)
        evhttp_del_accept_socket(s->http, s->sock);
    s->sock = NULL;
    int running, queued;
    count_live(s, &running, &queued, 1);
    char q[80] = "none queued";
    if (queued)
        snprintf(q, sizeof q, "%d queued request%s not started: answered 503", queued, queued == 1 ? "" : "s");
    fprintf(stderr, "loom serve: %s: no new requests; waiting for %d running request%s (at most %d s); %s\n",
            loom_cli_handled_signal_name((int)sig), running, running == 1 ? "" : "s", s->o->drain_s, q);
    struct timeval tv = {0, 20000};
    event_add(s->ev_drain, &tv);
}

/* ---- setup and teardown ---- */

/* The HTTP server bound to host:port, before the model loads (a port in use is known at once); nothing accepted
 * until the event loop runs. */
static int serve_bind(struct server *s)
{
    if (evthread_use_pthreads() != 0 || !(s->base = event_base_new()) || !(s->http = evhttp_new(s->base))) {
        fprintf(stderr, "loom serve: could not set up libevent\n");
        return -1;
    }
    evhttp_set_max_body_size(s->http, (ev_ssize_t)s->o->max_body);
    evhttp_set_gencb(s->http, on_request, s);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int g = getaddrinfo(s->o->host, NULL, &hints, &ai); /* named here: libevent's own message is a bare warning */
    if (g) {
        fprintf(stderr, "loom serve: --host: expected an address or a name this machine resolves, found '%s' (%s)\n",
                s->o->host, gai_strerror(g));
        return -1;
    }
    freeaddrinfo(ai);
    errno = 0;
    s->sock = evhttp_bind_socket_with_handle(s->http, s->o->host, (ev_uint16_t)s->o->port);
    if (!s->sock) {
        fprintf(stderr, "loom serve: cannot listen on %s port %d: %s\n", s->o->host, s->o->port,
                errno ? strerror(errno) : "the address is not this machine's, or the port is taken");
        return -1;
    }
    return 0;
}

/* Print where the server listens (the port the system chose, for --port 0). */
static void serve_announce(const struct server *s)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int port = s->o->port;
    if (getsockname(evhttp_bound_socket_get_fd(s->sock), (struct sockaddr *)&ss, &sl) == 0)
        port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    int v6 = strchr(s->o->host, ':') != NULL; /* an IPv6 address goes in brackets in a URL */
    char orders[64];
    fprintf(stderr,
            "loom serve: listening on http://%s%s%s:%d (model %s, %d slot%s of %d position%s; kernels %s, %s)\n",
            v6 ? "[" : "", s->o->host, v6 ? "]" : "", port, s->model_id, s->o->n_parallel,
            s->o->n_parallel == 1 ? "" : "s", s->ctx.n_ctx, s->ctx.n_ctx == 1 ? "" : "s", loom_kernels_name(),
            loom_cli_orders_text(orders, sizeof orders));
}

/* A signal event added, unless the signal was ignored on entry (nohup, `trap '' INT`, a script's background job):
 * such a signal stays ignored, as in every other command. 0, or -1 when the event could not be made. */
static int serve_signal_event(struct server *s, struct event **ev, int sig)
{
    if (loom_cli_signal_ignored(sig))
        return 0;
    *ev = evsignal_new(s->base, sig, on_signal, s);
    return *ev && event_add(*ev, NULL) == 0 ? 0 : -1;
}

/* The signal and timer events (after the model loaded: until then Ctrl+C stops the load), then the announcement. */
static int serve_setup_events(struct server *s)
{
    s->ev_drain = event_new(s->base, -1, EV_PERSIST, on_drain_tick, s);
    s->ev_watch = event_new(s->base, -1, EV_PERSIST, on_watch_tick, s);
    struct timeval watch = {0, 100000};
    if (serve_signal_event(s, &s->ev_int, SIGINT) || serve_signal_event(s, &s->ev_term, SIGTERM) ||
        serve_signal_event(s, &s->ev_hup, SIGHUP) || !s->ev_drain || !s->ev_watch || event_add(s->ev_watch, &watch)) {
        fprintf(stderr, "loom serve: could not set up the signal events\n");
        return -1;
    }
    serve_announce(s);
    return 0;
}

/* Stop the engine, deliver or drop what is left, free the HTTP side. */
static void serve_teardown(struct server *s)
{
    serve_engine_stop(s->eng); /* every request released */
    s->eng = NULL;
    for (int i = 0; i < 50 && s->n_live > 0; i++) /* deliver the releases */
        event_base_loop(s->base, EVLOOP_NONBLOCK);
    while (s->live) {
        struct serve_req *r = s->live;
        if (r->http && r->client_gone)
            r->header_sent ? evhttp_send_reply_end(r->http) : evhttp_send_reply(r->http, 503, "", NULL);
        else if (r->http)
            evhttp_connection_set_closecb(evhttp_request_get_connection(r->http), NULL, NULL);
        req_unlink_free(s, r);
    }
    if (s->ev_int)
        event_free(s->ev_int);
    if (s->ev_term)
        event_free(s->ev_term);
    if (s->ev_hup)
        event_free(s->ev_hup);
    if (s->ev_drain)
        event_free(s->ev_drain);
    if (s->ev_watch)
        event_free(s->ev_watch);
    if (s->http)
        evhttp_free(s->http);
    if (s->base)
        event_base_free(s->base);
    serve_buf_free(&s->take_content);
    serve_buf_free(&s->take_reasoning);
    serve_buf_free(&s->parsed);
    free(s->take_lps.v);
    const struct serve_opts *o = s->o;
    *s = (struct server){.o = o}; /* torn down: a second call does nothing */
}

static void serve_model_id(struct server *s, const char *path)
{
    const char *base = strrchr(path, '/');
    snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : path);
    for (char *p = s->model_id; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x80)
            *p = '_'; /* written into JSON as is */
}

static int serve_run(struct server *s, const loom_model *m, const char *path)
{
    loom_error err = {0};
    const struct serve_opts *o = s->o;
    int n_train = loom_model_n_ctx_train(m);
    if (n_train > 0 && o->n_ctx > n_train) {
        fprintf(stderr, "loom serve: -c: expected at most the model's context_length %d, found %d\n", n_train,
                o->n_ctx);
        return 2; /* a usage error, as the other commands' */
    }
    serve_model_id(s, path);
    s->started = (long long)time(NULL);
    s->ctx.m = m;
    s->ctx.tok = loom_model_tokenizer(m);
    loom_chat_template *tmpl = loom_cli_chat_template("serve", s->ctx.tok, o->template_file);
    if (!tmpl)
        return 1;
    s->ctx.tmpl = tmpl;
    const char *forced = getenv("LOOM_SERVE_FORCED_OUTPUT");
    s->ctx.allow_forced = forced && !strcmp(forced, "1");
    if (s->ctx.allow_forced)
        fprintf(stderr, "loom serve: LOOM_SERVE_FORCED_OUTPUT=1: requests may dictate the answer (tests only)\n");
    struct serve_engine_opts eo = {.n_slots = o->n_parallel, .n_ctx = o->n_ctx, .n_threads = o->n_threads,
                                   .queue_max = o->queue_max, .prefill_chunk = o->prefill_chunk,
                                   .k_type = o->mo.k_type};
    int status = 1;
    if (serve_engine_start(&s->eng, m, &eo, &err) != LOOM_OK)
        fprintf(stderr, "loom serve: %s\n", err.msg);
    else {
        s->ctx.n_ctx = serve_engine_n_ctx(s->eng);
        if (serve_setup_events(s) == 0) {
            event_base_dispatch(s->base);
            fprintf(stderr, "loom serve: stopped\n");
            loom_cli_expert_stats("serve", m, &o->mo, (int)serve_engine_n_evaluated(s->eng), NULL); /* slots count */
            status = 0;
        }
    }
    serve_teardown(s); /* before the template goes: requests still arriving are parsed with it */
    loom_chat_template_free(tmpl);
    return status;
}

int loom_cli_serve(int argc, char **argv)
{
    struct serve_opts o = {.host = "127.0.0.1", .port = 8080, .n_parallel = 1, .n_ctx = 0, .queue_max = 64,
                           .prefill_chunk = 256, .drain_s = 30, .timeout_s = 600, .max_body = 8 << 20};
    int a = loom_cli_parse_options("serve", argc, argv, SERVE_OPTIONS, &o.mo, serve_set_option, &o);
    if (a != 0) {
        a > 0 ? serve_usage(stdout) : (void)fprintf(stderr, "%s(loom serve --help for details)\n", SERVE_SYNOPSIS);
        return a > 0 ? 0 : 2;
    }
    loom_cli_check_threads("serve", o.n_threads);
    if (loom_cli_select_kernels()) /* LOOM_KERNELS, LOOM_ORDERS: refused before the port is taken */
        return 2;
    loom_cli_signals_install(); /* Ctrl+C while the default model is prepared; libevent's handlers come after */
    char path[4096];
    int status = 1;
    struct server s = {.o = &o};
    loom_model *m = serve_bind(&s) == 0
                        ? loom_cli_load_model("serve", &o.model, path, sizeof path, &o.mo, o.n_threads, &status)
                        : NULL;
    if (m)
        status = loom_cli_signal() ? loom_cli_stopped_status() : serve_run(&s, m, o.model);
    serve_teardown(&s);
    loom_model_free(m);
    return status;
}
