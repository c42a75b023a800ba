/* test_state.c — session state you can trust, on a synthetic micro model written by the test (and the cached
 * tiny / 0.8b models when present): the state owner list and its bytes against the admission formula,
 * partition-invariant prefill in CANONICAL numerics (logits and digests bitwise equal for one chunk, token by
 * token, 1/2/1, 3/3/3/1, 7 and random splits), transactional requests under failure injection after every
 * stage and cancellation at every poll of the abort callback, the context limit, save/restore (64 greedy
 * tokens), checkpoints/rewind and the prompt cache, and many sequences decoded together (each bitwise its solo
 * run). LOOM_TEST_SKIP_08B skips the 0.8b model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "runtime/session.h"
#include "test.h"
#include "model_fixture.h"
#include "util/error.h"

enum { NP = 23 };

static loom_session *new_session(const loom_model *m, int n_ctx, int n_threads)
{
    loom_session_params p = {.n_ctx = n_ctx, .n_threads = n_threads, .numerics = LOOM_NUMERICS_CANONICAL};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &p, &err);
    CHECK(s != NULL, "session: %s", err.msg);
    return s;
}

/* ---- state owners ------------------------------------------------------------------------------------ */

static void test_owners(const loom_model *m)
{
    loom_session *s = new_session(m, 40, 1);
    if (!s)
        return;
    const struct loom_hparams *hp = &m->hp;
    struct loom_state_owner o[2 * LOOM_MAX_LAYERS];
    int n = loom_session_state_owners(s, o, 2 * LOOM_MAX_LAYERS);
    CHECK(n == 2 * (int)hp->n_layer, "%d owners for %u layers", n, hp->n_layer);
    uint64_t rec = 0, kv_pos = 0, total = 0;
    for (int i = 0; i < n; i++) {
        int attn = m->layers[o[i].layer].kind == LOOM_LAYER_ATTENTION;
        int is_kv = o[i].kind == LOOM_OWNER_K || o[i].kind == LOOM_OWNER_V;
        CHECK(attn == is_kv, "layer %d owner %s: KV owners exactly in attention layers", o[i].layer, o[i].name);
        CHECK(o[i].bytes == (uint64_t)(o[i].shape[0] * o[i].shape[1] * o[i].shape[2]) *
                                (o[i].dtype == LOOM_TYPE_F16 ? 2u : 4u),
              "owner %s of layer %d: bytes %llu do not match its shape", o[i].name, o[i].layer,
              (unsigned long long)o[i].bytes);
        rec += is_kv ? 0 : o[i].bytes;
        kv_pos += o[i].bytes_per_pos;
        total += o[i].bytes;
    }
    CHECK(rec == loom_qwen35_recurrent_state_bytes(hp), "recurrent bytes %llu vs formula %llu",
          (unsigned long long)rec, (unsigned long long)loom_qwen35_recurrent_state_bytes(hp));
    CHECK(kv_pos == loom_qwen35_kv_bytes_per_token(hp), "KV bytes per position %llu vs formula %llu",
          (unsigned long long)kv_pos, (unsigned long long)loom_qwen35_kv_bytes_per_token(hp));
    CHECK(total == loom_session_state_bytes(s) && total == rec + 40 * kv_pos, "state bytes %llu vs %llu",
          (unsigned long long)loom_session_state_bytes(s), (unsigned long long)(rec + 40 * kv_pos));
    printf("owners: %d, recurrent %llu B, KV %llu B/position, %llu B at n_ctx 40\n", n, (unsigned long long)rec,
           (unsigned long long)kv_pos, (unsigned long long)total);
    loom_session_free(s);
}

/* ---- partition invariance ---------------------------------------------------------------------------- */

struct result {
    uint64_t digest;
    float *rows; /* [n][nv] every token's logits */
};

/* Feed tokens[0..n) in parts sizes[] (summing to n, LOGITS_ALL) into a fresh session of `threads`. */
static int run_parts(const loom_model *m, const int32_t *tokens, int n, const int *sizes, int n_sizes, int threads,
                     struct result *r)
{
    int nv = loom_model_n_logits(m), rc = LOOM_OK, done = 0;
    loom_session *s = new_session(m, n + 8, threads);
    r->rows = malloc(sizeof(float) * (size_t)n * (size_t)nv);
    if (!s || !r->rows)
        rc = LOOM_E_NOMEM;
    loom_error err = {0};
    for (int i = 0; i < n_sizes && rc == LOOM_OK; i++) {
        rc = loom_session_eval(s, tokens + done, sizes[i], r->rows + (size_t)done * (size_t)nv, LOOM_LOGITS_ALL, &err);
        done += sizes[i];
    }
    CHECK(rc == LOOM_OK && done == n, "partitioned prefill: %s", err.msg);
    if (rc == LOOM_OK) {
        const float *last = loom_session_last_logits(s);
        CHECK(last && !memcmp(last, r->rows + (size_t)(n - 1) * (size_t)nv, sizeof(float) * (size_t)nv),
              "last logits equal the last row returned");
        r->digest = loom_session_digest(s);
    }
    loom_session_free(s);
    return rc;
}

/* Sizes for one partition scheme: a repeating pattern, cut to sum to n. */
static int pattern_sizes(const int *pat, int n_pat, int n, int *sizes)
{
    int k = 0;
    for (int done = 0; done < n; k++) {
        int want = pat[k % n_pat], left = n - done;
        sizes[k] = want < left ? want : left;
        done += sizes[k];
    }
    return k;
}

static void check_partitions(const char *model, const loom_model *m, const int32_t *tokens, int n, int n_random)
{
    int nv = loom_model_n_logits(m);
    int *sizes = malloc(sizeof(int) * (size_t)n);
    struct result base = {0}, r = {0};
    if (!sizes || run_parts(m, tokens, n, &n, 1, 1, &base))
        goto out;
    static const int pats[][4] = {{1}, {1, 2, 1}, {3, 3, 3, 1}, {7}};
    static const int npat[] = {1, 3, 4, 1};
    static const char *names[] = {"token by token", "1/2/1", "3/3/3/1", "7"};
    uint64_t rng = 0x1234567ull;
    for (int p = 0; p < 4 + n_random; p++) {
        int k;
        char name[64];
        if (p < 4) {
            k = pattern_sizes(pats[p], npat[p], n, sizes);
            snprintf(name, sizeof name, "%s", names[p]);
        } else {
            k = 0;
            for (int done = 0; done < n; k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                int want = 1 + (int)((rng >> 33) % 9);
                sizes[k] = want < n - done ? want : n - done;
                done += sizes[k];
            }
            snprintf(name, sizeof name, "random split %d (%d parts)", p - 3, k);
        }
        int threads = 1 + p % 2;
        if (run_parts(m, tokens, n, sizes, k, threads, &r) == LOOM_OK) {
            CHECK(!memcmp(base.rows, r.rows, sizeof(float) * (size_t)n * (size_t)nv),
                  "%s: %s (%d threads): logits differ from one chunk", model, name, threads);
            CHECK(base.digest == r.digest, "%s: %s: digest %016llx differs from one chunk's %016llx", model, name,
                  (unsigned long long)r.digest, (unsigned long long)base.digest);
        }
        free(r.rows);
        r.rows = NULL;
    }
    printf("%s: %d tokens, %d partitions bitwise equal (digest %016llx)\n", model, n, 4 + n_random,
           (unsigned long long)base.digest);
out:
    free(base.rows);
    free(sizes);
}

/* ---- failure injection ------------------------------------------------------------------------------- */

struct inject {
    int calls;      /* stage calls seen */
    int fail_at;    /* call index that fails (-1: none) */
    int poison;     /* fail by writing NaN instead of returning an error */
    int code;       /* code returned at the failing call */
    char stage[32]; /* name of the failing stage */
    int layer;
};

static int inject_hook(void *ctx, int layer, const char *stage, float *x, int64_t n)
{
    struct inject *in = ctx;
    int at = in->calls++;
    if (at != in->fail_at)
        return 0;
    snprintf(in->stage, sizeof in->stage, "%s", stage);
    in->layer = layer;
    if (in->poison && x && n > 0) {
        x[n - 1] = NAN; /* the last row: the one LAST-mode logits come from */
        return 0;
    }
    return in->code;
}

/* One request of tokens[0..n) in `mode` against session s (pos p0, warm) with a failure injected at every
 * stage in turn: the request fails, the digest, position and the caller's buffer stay as they were, and the
 * next request gives what a fresh session fed the same tokens gives. */
static void check_injection(const loom_model *m, const int32_t *tokens, int p0, int n, enum loom_logits_mode mode,
                            int poison)
{
    int nv = loom_model_n_logits(m), rows = mode == LOOM_LOGITS_ALL ? n : 1;
    size_t bytes = sizeof(float) * (size_t)rows * (size_t)nv;
    loom_session *s = new_session(m, 64, 2), *fresh = new_session(m, 64, 1);
    float *out = malloc(bytes), *want = malloc(bytes);
    loom_error err = {0};
    struct inject in = {0, -1, poison, LOOM_E_INTERNAL, "", 0};
    if (!s || !fresh || !out || !want || loom_session_eval(s, tokens, p0, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(fresh, tokens, p0, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(fresh, tokens + p0, n, want, mode, &err)) {
        CHECK(0, "injection setup: %s", err.msg);
        goto out;
    }
    /* count the stages of the request (on a second run: the first may grow the staging buffer, whose
     * allocation failure check_alloc_failure covers) */
    if (loom_session_eval(s, tokens + p0, n, out, mode, &err) != LOOM_OK) {
        CHECK(0, "request failed: %s", err.msg);
        goto out;
    }
    loom_session_reset(s);
    loom_session_eval(s, tokens, p0, NULL, LOOM_LOGITS_LAST, &err);
    s->hook = inject_hook;
    s->hook_ctx = &in;
    if (loom_session_eval(s, tokens + p0, n, out, mode, &err) != LOOM_OK) {
        CHECK(0, "request without injection failed: %s", err.msg);
        goto out;
    }
    int n_stages = in.calls;
    loom_session_reset(s);
    s->hook = NULL;
    loom_session_eval(s, tokens, p0, NULL, LOOM_LOGITS_LAST, &err);
    uint64_t before = loom_session_digest(s);
    int failures = 0;
    for (int k = 0; k < n_stages; k++) {
        memset(out, 0xA5, bytes);
        in = (struct inject){0, k, poison, LOOM_E_INTERNAL, "", 0};
        s->hook = inject_hook;
        int rc = loom_session_eval(s, tokens + p0, n, out, mode, &err);
        s->hook = NULL;
        int untouched = 1;
        for (size_t i = 0; i < bytes; i++)
            untouched &= ((unsigned char *)out)[i] == 0xA5;
        /* poisoning a stage whose NaN cannot reach the checked rows is not a failure */
        if (rc == LOOM_OK && poison) {
            loom_session_reset(s);
            loom_session_eval(s, tokens, p0, NULL, LOOM_LOGITS_LAST, &err);
            continue;
        }
        failures++;
        CHECK(rc != LOOM_OK, "injection at stage %d (%s, layer %d) did not fail the request", k, in.stage, in.layer);
        CHECK(untouched, "injection at %s layer %d: the caller's buffer changed", in.stage, in.layer);
        CHECK(loom_session_digest(s) == before && loom_session_pos(s) == p0,
              "injection at %s layer %d: public state changed (pos %d)", in.stage, in.layer, loom_session_pos(s));
    }
    CHECK(failures > 0, "no injection failed");
    /* the next request behaves as if the failed ones never happened */
    if (loom_session_eval(s, tokens + p0, n, out, mode, &err) == LOOM_OK) {
        CHECK(!memcmp(out, want, bytes), "after failures: logits differ from a fresh session");
        CHECK(loom_session_digest(s) == loom_session_digest(fresh), "after failures: digest differs from fresh");
    } else {
        CHECK(0, "request after failures: %s", err.msg);
    }
    printf("injection (%s, %s, %d tokens at %d): %d stages, %d failed requests, state untouched\n",
           poison ? "NaN" : "error", mode == LOOM_LOGITS_ALL ? "all" : "last", n, p0, n_stages, failures);
out:
    free(out);
    free(want);
    loom_session_free(s);
    loom_session_free(fresh);
}

/* An all-token request whose staging buffer cannot grow fails with LOOM_E_NOMEM and changes nothing. */
static void check_alloc_failure(const loom_model *m, const int32_t *tokens)
{
    int nv = loom_model_n_logits(m);
    loom_session *s = new_session(m, 64, 1);
    float *out = malloc(sizeof(float) * 8 * (size_t)nv);
    loom_error err = {0};
    if (!s || !out || loom_session_eval(s, tokens, 3, NULL, LOOM_LOGITS_LAST, &err))
        goto out;
    uint64_t before = loom_session_digest(s);
    struct inject in = {0, 0, 0, LOOM_E_NOMEM, "", 0};
    s->hook = inject_hook;
    s->hook_ctx = &in;
    memset(out, 0xA5, sizeof(float) * 8 * (size_t)nv);
    int rc = loom_session_eval(s, tokens + 3, 8, out, LOOM_LOGITS_ALL, &err);
    s->hook = NULL;
    CHECK(rc == LOOM_E_NOMEM && !strcmp(in.stage, "alloc"), "allocation failure: rc %d at %s", rc, in.stage);
    CHECK(loom_session_digest(s) == before && loom_session_pos(s) == 3 && ((unsigned char *)out)[0] == 0xA5,
          "allocation failure changed the session or the output");
    CHECK(loom_session_eval(s, tokens + 3, 8, out, LOOM_LOGITS_ALL, &err) == LOOM_OK, "retry: %s", err.msg);
out:
    free(out);
    loom_session_free(s);
}

/* ---- cancellation ------------------------------------------------------------------------------------ */

/* An abort callback that asks to stop from its poll number stop_at on (-1: never), counting its polls. */
struct abort_at {
    int polls;
    int stop_at;
};

static int abort_at(void *ctx)
{
    struct abort_at *a = ctx;
    int poll = a->polls++;
    return a->stop_at >= 0 && poll >= a->stop_at;
}

/* A request of tokens[p0..p0+n) in `mode` on a session at p0, cancelled at each poll of the abort callback in
 * turn: LOOM_E_CANCELLED, no poll after the one that asked, and the digest, the position and the caller's buffer
 * as they were. The callback is polled before each layer of each chunk and after its last layer (a prompt of
 * n > 1 tokens runs as two chunks in CANONICAL numerics: its last token alone). The next request, not
 * cancelled, gives what a fresh session gives. */
static void check_cancel(const loom_model *m, const int32_t *tokens, int p0, int n, enum loom_logits_mode mode)
{
    int nv = loom_model_n_logits(m), rows = mode == LOOM_LOGITS_ALL ? n : 1;
    int want_polls = (n > 1 ? 2 : 1) * ((int)m->hp.n_layer + 1);
    size_t bytes = sizeof(float) * (size_t)rows * (size_t)nv;
    loom_session *s = new_session(m, 64, 2), *fresh = new_session(m, 64, 1);
    float *out = malloc(bytes), *want = malloc(bytes);
    loom_error err = {0};
    struct abort_at a = {0, -1};
    if (!s || !fresh || !out || !want || loom_session_eval(s, tokens, p0, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(fresh, tokens, p0, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(fresh, tokens + p0, n, want, mode, &err)) {
        CHECK(0, "cancel setup: %s", err.msg);
        goto out;
    }
    uint64_t before = loom_session_digest(s);
    loom_session_set_abort(s, abort_at, &a);
    int rc = loom_session_eval(s, tokens + p0, n, out, mode, &err);
    CHECK(rc == LOOM_OK && a.polls == want_polls, "cancel: an uncancelled request: rc %d, %d polls, expected %d", rc,
          a.polls, want_polls);
    loom_session_reset(s);
    loom_session_eval(s, tokens, p0, NULL, LOOM_LOGITS_LAST, &err);
    for (int k = 0; k < want_polls; k++) {
        memset(out, 0xA5, bytes);
        a = (struct abort_at){0, k};
        rc = loom_session_eval(s, tokens + p0, n, out, mode, &err);
        int untouched = 1;
        for (size_t i = 0; i < bytes; i++)
            untouched &= ((unsigned char *)out)[i] == 0xA5;
        CHECK(rc == LOOM_E_CANCELLED && strstr(err.msg, "cancelled"), "cancel at poll %d: rc %d (%s)", k, rc, err.msg);
        CHECK(a.polls == k + 1, "cancel at poll %d: polled %d times, expected no poll after the one that asked", k,
              a.polls);
        CHECK(untouched, "cancel at poll %d: the caller's buffer changed", k);
        CHECK(loom_session_digest(s) == before && loom_session_pos(s) == p0,
              "cancel at poll %d: public state changed (pos %d)", k, loom_session_pos(s));
    }
    a = (struct abort_at){0, -1};
    if (loom_session_eval(s, tokens + p0, n, out, mode, &err) == LOOM_OK) {
        CHECK(!memcmp(out, want, bytes), "after cancels: logits differ from a fresh session");
        CHECK(loom_session_digest(s) == loom_session_digest(fresh), "after cancels: digest differs from fresh");
    } else {
        CHECK(0, "request after cancels: %s", err.msg);
    }
    printf("cancel (%s, %d tokens at %d): cancelled at each of %d polls, state untouched\n",
           mode == LOOM_LOGITS_ALL ? "all" : "last", n, p0, want_polls);
out:
    free(out);
    free(want);
    loom_session_free(s);
    loom_session_free(fresh);
}

/* A multi-sequence step stops when any session's callback asks, and changes no session. */
static void check_cancel_many(const loom_model *m, const int32_t *tok)
{
    loom_session *ss[2] = {new_session(m, 32, 1), new_session(m, 48, 2)};
    loom_error err = {0};
    struct abort_at a = {0, -1};
    if (!ss[0] || !ss[1] || loom_session_eval(ss[0], tok, 3, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(ss[1], tok + 5, 4, NULL, LOOM_LOGITS_LAST, &err)) {
        CHECK(0, "cancel many setup: %s", err.msg);
        goto out;
    }
    uint64_t d0 = loom_session_digest(ss[0]), d1 = loom_session_digest(ss[1]);
    int32_t next[2] = {tok[1], tok[2]};
    loom_session_set_abort(ss[1], abort_at, &a);
    for (int k = 0; k <= (int)m->hp.n_layer; k++) {
        a = (struct abort_at){0, k};
        int rc = loom_sessions_decode(ss, next, 2, NULL, &err);
        CHECK(rc == LOOM_E_CANCELLED && loom_session_digest(ss[0]) == d0 && loom_session_digest(ss[1]) == d1,
              "batched decode cancelled at poll %d: rc %d, or a session changed", k, rc);
    }
    a = (struct abort_at){0, -1};
    CHECK(loom_sessions_decode(ss, next, 2, NULL, &err) == LOOM_OK && loom_session_pos(ss[1]) == 5,
          "batched decode after cancels: %s", err.msg);
out:
    loom_session_free(ss[0]);
    loom_session_free(ss[1]);
}

/* The prompt cache cancelled while it evaluates: the session keeps the checkpoint it restored (a prefix of both
 * histories, no logits); the same request then equals a fresh run. Likewise a cancelled rewind. */
static void check_cancel_cached(const loom_model *m, const int32_t *P)
{
    int nv = loom_model_n_logits(m);
    loom_session_params sp = {.n_ctx = 64, .n_threads = 1, .checkpoint_every = 4};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &sp, &err), *g = new_session(m, 64, 1);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    int32_t Q[9], hist[9];
    memcpy(Q, P, sizeof Q);
    Q[6] = P[7], Q[7] = P[6], Q[8] = P[0]; /* shares 6 tokens with P */
    struct abort_at ab = {0, 0};
    /* P in two requests: the first ends at 4, a multiple of checkpoint_every, where it keeps a checkpoint */
    if (!s || !g || !a || !b || loom_session_eval(s, P, 4, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(s, P + 4, 5, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(g, Q, 9, b, LOOM_LOGITS_LAST, &err)) {
        CHECK(0, "cancel cached setup: %s", err.msg);
        goto out;
    }
    loom_session_set_abort(s, abort_at, &ab);
    int rc = loom_session_prefill_cached(s, Q, 9, a, &err), pos = loom_session_pos(s);
    CHECK(rc == LOOM_E_CANCELLED && pos == 4 && !loom_session_last_logits(s),
          "cancelled prompt cache: rc %d, position %d, expected the checkpoint at 4 without logits", rc, pos);
    CHECK(loom_session_tokens(s, hist, 9) == pos && !memcmp(hist, Q, sizeof(int32_t) * (size_t)pos),
          "cancelled prompt cache: the history is not a prefix of the request");
    ab = (struct abort_at){0, -1};
    rc = loom_session_prefill_cached(s, Q, 9, a, &err);
    CHECK(rc == 4 && !memcmp(a, b, sizeof(float) * (size_t)nv) && loom_session_digest(s) == loom_session_digest(g),
          "prompt cache after a cancel: reused %d, or differs from a fresh run (%s)", rc, err.msg);
    ab = (struct abort_at){0, 0};
    rc = loom_session_rewind(s, 7, NULL, &err);
    CHECK(rc == LOOM_E_CANCELLED && loom_session_pos(s) == 4, "cancelled rewind: rc %d, position %d, expected 4", rc,
          loom_session_pos(s));
out:
    free(a);
    free(b);
    loom_session_free(s);
    loom_session_free(g);
}

/* ---- context length ---------------------------------------------------------------------------------- */

static void test_context(const loom_model *m, const int32_t *tokens)
{
    loom_session *d = new_session(m, 0, 1);
    if (d) {
        int want = m->hp.n_ctx_train < 4096 ? (int)m->hp.n_ctx_train : 4096;
        CHECK(loom_session_n_ctx(d) == want, "default context %d, expected min(model %u, 4096)",
              loom_session_n_ctx(d), m->hp.n_ctx_train);
        CHECK(loom_session_state_bytes(d) == loom_qwen35_recurrent_state_bytes(&m->hp) +
                                                 (uint64_t)want * loom_qwen35_kv_bytes_per_token(&m->hp),
              "default state bytes follow the formula");
    }
    loom_session_free(d);
    loom_session *s = new_session(m, 12, 1);
    loom_error err = {0};
    if (!s || loom_session_eval(s, tokens, 10, NULL, LOOM_LOGITS_LAST, &err))
        goto out;
    uint64_t before = loom_session_digest(s);
    int rc = loom_session_eval(s, tokens + 10, 3, NULL, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_E_RANGE && strstr(err.msg, "context"), "past the context: rc %d (%s)", rc, err.msg);
    CHECK(loom_session_digest(s) == before && loom_session_pos(s) == 10, "a request past the context changed state");
    CHECK(loom_session_eval(s, tokens + 10, 2, NULL, LOOM_LOGITS_LAST, &err) == LOOM_OK, "filling the context: %s",
          err.msg);
    CHECK(loom_session_eval(s, tokens, 1, NULL, LOOM_LOGITS_LAST, &err) == LOOM_E_RANGE, "full context took more");
    loom_session_params bad = {.n_ctx = 8, .n_threads = 1, .numerics = (enum loom_numerics)9};
    loom_session *b = loom_session_new(m, &bad, &err);
    CHECK(!b && err.code == LOOM_E_ARG && strstr(err.msg, "numerics"), "bad numerics rejected: %s", err.msg);
    loom_session_free(b);
    loom_session_params huge = {.n_ctx = (int)m->hp.n_ctx_train + 1, .n_threads = 1};
    b = loom_session_new(m, &huge, &err);
    CHECK(!b && err.code == LOOM_E_RANGE && strstr(err.msg, "context_length"),
          "a context past the model's context_length is refused before allocation: %s", err.msg);
    loom_session_free(b);
out:
    loom_session_free(s);
}

/* Digest: reset gives a fresh session's digest; other tokens give another digest; the same tokens in
 * REFERENCE_BATCH numerics in one chunk are (in general) not bitwise the canonical result. */
static void test_digest(const loom_model *m, const int32_t *tokens)
{
    loom_session *a = new_session(m, 32, 1), *b = new_session(m, 32, 1);
    loom_error err = {0};
    if (!a || !b)
        goto out;
    uint64_t empty = loom_session_digest(a);
    CHECK(loom_session_last_logits(a) == NULL, "an empty session has no logits");
    loom_session_eval(a, tokens, 6, NULL, LOOM_LOGITS_LAST, &err);
    int32_t other[6];
    memcpy(other, tokens, sizeof other);
    other[2] = (other[2] + 1) % MINI_TOKENS;
    loom_session_eval(b, other, 6, NULL, LOOM_LOGITS_LAST, &err);
    CHECK(loom_session_digest(a) != loom_session_digest(b), "different tokens, same digest");
    CHECK(loom_session_digest(a) != empty, "evaluation did not change the digest");
    loom_session_reset(a);
    CHECK(loom_session_digest(a) == empty, "reset digest differs from a fresh session's");
out:
    loom_session_free(a);
    loom_session_free(b);
}

/* ---- save/restore, checkpoints, rewind, prompt cache ------------------------------------------------- */

/* Greedy argmax over sampleable tokens. */
static int32_t greedy(const loom_model *m, const float *logits)
{
    int nv = loom_model_n_logits(m);
    int32_t best = -1;
    for (int32_t i = 0; i < nv; i++)
        if (loom_model_token_sampleable(m, i) && (best < 0 || logits[i] > logits[best]))
            best = i;
    return best;
}

/* n greedy steps from the session's last logits: ids into toks[n], every step's logits into rows[n][nv]. */
static int generate(const loom_model *m, loom_session *s, int n, int32_t *toks, float *rows)
{
    int nv = loom_model_n_logits(m);
    loom_error err = {0};
    for (int i = 0; i < n; i++) {
        const float *last = loom_session_last_logits(s);
        CHECK(last != NULL, "no logits to continue from");
        if (!last)
            return -1;
        toks[i] = greedy(m, last);
        int rc = loom_session_eval(s, &toks[i], 1, rows + (size_t)i * (size_t)nv, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_OK, "generate step %d: %s", i, err.msg);
        if (rc)
            return rc;
    }
    return 0;
}

static int write_all(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, n, f) == n;
    if (f)
        ok &= fclose(f) == 0;
    return ok ? 0 : -1;
}

/* Save after a prompt, continue n_gen greedy tokens; a restored session continues bitwise the same. Damaged
 * files and another model's files are refused with the session unchanged. */
static void check_save_restore(const char *name, const loom_model *m, const loom_model *other, const int32_t *prompt,
                               int n_prompt, int n_gen, const char *dir)
{
    int nv = loom_model_n_logits(m);
    char path[256], bad[256];
    snprintf(path, sizeof path, "%s/seq.state", dir);
    snprintf(bad, sizeof bad, "%s/bad.state", dir);
    loom_session *a = new_session(m, 128, 1), *b = new_session(m, 128, 2);
    float *ra = malloc(sizeof(float) * (size_t)n_gen * (size_t)nv), *rb = malloc(sizeof(float) * (size_t)n_gen * (size_t)nv);
    int32_t ta[128], tb[128], hist[128];
    loom_error err = {0};
    char *img = NULL;
    if (!a || !b || !ra || !rb || loom_session_eval(a, prompt, n_prompt, NULL, LOOM_LOGITS_LAST, &err))
        goto out;
    int rc = loom_session_save(a, path, &err);
    CHECK(rc == LOOM_OK, "%s: save: %s", name, err.msg);
    uint64_t saved = loom_session_digest(a);
    if (rc || generate(m, a, n_gen, ta, ra))
        goto out;
    loom_session_eval(b, prompt + 1, 3, NULL, LOOM_LOGITS_LAST, &err); /* something to replace */
    rc = loom_session_restore(b, path, &err);
    CHECK(rc == LOOM_OK, "%s: restore: %s", name, err.msg);
    CHECK(loom_session_digest(b) == saved && loom_session_pos(b) == n_prompt, "%s: restored digest/position differ",
          name);
    CHECK(loom_session_tokens(b, hist, 128) == n_prompt && !memcmp(hist, prompt, sizeof(int32_t) * (size_t)n_prompt),
          "%s: restored token history differs", name);
    if (rc || generate(m, b, n_gen, tb, rb))
        goto out;
    CHECK(!memcmp(ta, tb, sizeof(int32_t) * (size_t)n_gen) &&
              !memcmp(ra, rb, sizeof(float) * (size_t)n_gen * (size_t)nv),
          "%s: restored continuation of %d tokens differs from the original", name, n_gen);
    CHECK(loom_session_digest(a) == loom_session_digest(b), "%s: digests after continuation differ", name);
    /* damaged and foreign files */
    FILE *f = fopen(path, "rb");
    size_t len = 0;
    if (f && fseek(f, 0, SEEK_END) == 0 && (len = (size_t)ftell(f)) > 64 && (img = malloc(len)) &&
        fseek(f, 0, SEEK_SET) == 0 && fread(img, 1, len, f) == len) {
        uint64_t before = loom_session_digest(b);
        img[len / 2] ^= 0x40;
        write_all(bad, img, len);
        rc = loom_session_restore(b, bad, &err);
        CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, "damaged"), "%s: damaged file: rc %d (%s)", name, rc, err.msg);
        img[len / 2] ^= 0x40;
        write_all(bad, img, len - 5);
        rc = loom_session_restore(b, bad, &err);
        CHECK(rc == LOOM_E_FORMAT, "%s: truncated file: rc %d (%s)", name, rc, err.msg);
        write_all(bad, "hello", 5);
        CHECK(loom_session_restore(b, bad, &err) == LOOM_E_FORMAT, "%s: junk file accepted", name);
        CHECK(loom_session_digest(b) == before, "%s: refused restores changed the session", name);
        unlink(bad);
    }
    if (f)
        fclose(f);
    if (other) {
        loom_session *o = new_session(other, 128, 1);
        rc = o ? loom_session_restore(o, path, &err) : LOOM_OK;
        CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, "another model"), "%s: another model's file: rc %d (%s)", name,
              rc, err.msg);
        loom_session_free(o);
    }
    printf("%s: save/restore after %d tokens, %d greedy tokens bitwise equal\n", name, n_prompt, n_gen);
out:
    unlink(path);
    free(img);
    free(ra);
    free(rb);
    loom_session_free(a);
    loom_session_free(b);
}

/* Counts the tokens a request embeds (a stage hook). */
struct embed_count {
    int64_t tokens;
    int64_t n_embd;
};

static int count_embedded(void *ctx, int layer, const char *stage, float *x, int64_t n)
{
    struct embed_count *c = ctx;
    (void)layer, (void)x;
    if (!strcmp(stage, "embed"))
        c->tokens += n / c->n_embd;
    return 0;
}

/* Rewind to the prompt end and regenerate vs a fresh run; the prompt cache scenario: P (9 tokens) generates
 * 5, then P's first 8 tokens, then P again: each result equals a fresh session's. */
static void check_rewind_cache(const char *name, const loom_model *m, const int32_t *P)
{
    int nv = loom_model_n_logits(m);
    loom_session_params sp = {.n_ctx = 64, .n_threads = 1, .checkpoint_every = 4};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &sp, &err), *f = new_session(m, 64, 1);
    float *a = malloc(sizeof(float) * 5 * (size_t)nv), *b = malloc(sizeof(float) * 5 * (size_t)nv);
    int32_t ga[5], gb[5];
    if (!s || !f || !a || !b)
        goto out;
    int reused = loom_session_prefill_cached(s, P, 9, a, &err);
    CHECK(reused == 0, "%s: first prefill reused %d (%s)", name, reused, err.msg);
    if (generate(m, s, 5, ga, a) || loom_session_eval(f, P, 9, NULL, LOOM_LOGITS_LAST, &err) || generate(m, f, 5, gb, b))
        goto out;
    CHECK(!memcmp(a, b, sizeof(float) * 5 * (size_t)nv), "%s: generation differs from a fresh session", name);
    CHECK(loom_session_n_checkpoints(s) >= 1, "%s: no checkpoint kept at the prompt end", name);
    /* rewind to the prompt end and regenerate: one token re-evaluated from the checkpoint before it */
    struct embed_count ec = {0, m->hp.n_embd};
    s->hook = count_embedded;
    s->hook_ctx = &ec;
    int rc = loom_session_rewind(s, 9, NULL, &err);
    s->hook = NULL;
    CHECK(rc == LOOM_OK && loom_session_pos(s) == 9, "%s: rewind: %s", name, err.msg);
    CHECK(ec.tokens == 1, "%s: rewind to the prompt end re-evaluated %lld tokens, expected 1", name,
          (long long)ec.tokens);
    if (rc || generate(m, s, 5, gb, b))
        goto out;
    CHECK(!memcmp(a, b, sizeof(float) * 5 * (size_t)nv) && !memcmp(ga, gb, sizeof ga),
          "%s: regeneration after rewind differs", name);
    /* P[0..8) then P: each equals a fresh run */
    for (int len = 8; len <= 9; len++) {
        reused = loom_session_prefill_cached(s, P, len, a, &err);
        CHECK(reused >= 0 && reused < len, "%s: prefill of %d reused %d (%s)", name, len, reused, err.msg);
        loom_session *g = new_session(m, 64, 1);
        if (!g || loom_session_eval(g, P, len, b, LOOM_LOGITS_LAST, &err))
            CHECK(0, "fresh run: %s", err.msg);
        else
            CHECK(!memcmp(a, b, sizeof(float) * (size_t)nv) && loom_session_digest(s) == loom_session_digest(g),
                  "%s: cached prefill of %d tokens (reused %d) differs from a fresh run", name, len, reused);
        printf("%s: prompt cache, %d tokens: reused %d, bitwise equal to a fresh run\n", name, len, reused);
        loom_session_free(g);
    }
    CHECK(loom_session_rewind(s, 10, NULL, &err) == LOOM_E_ARG, "%s: rewind past the position accepted", name);
out:
    free(a);
    free(b);
    loom_session_free(s);
    loom_session_free(f);
}

/* Checkpoints every 2 positions within a budget of 2: the oldest are evicted, rewinding still equals a fresh
 * run (from the nearest checkpoint left, or the empty state), and a budget below one checkpoint refuses. */
static void check_budget(const loom_model *m, const int32_t *tok)
{
    uint64_t one = loom_qwen35_recurrent_state_bytes(&m->hp);
    int nv = loom_model_n_logits(m);
    loom_session_params sp = {.n_ctx = 64, .n_threads = 1, .checkpoint_every = 2, .checkpoint_budget = 2 * one};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &sp, &err), *f = new_session(m, 64, 1);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    if (!s || !f || !a || !b)
        goto out;
    for (int i = 0; i < 12; i++)
        loom_session_eval(s, tok + i, 1, NULL, LOOM_LOGITS_LAST, &err);
    CHECK(loom_session_n_checkpoints(s) == 2, "%d checkpoints held with a budget of 2", loom_session_n_checkpoints(s));
    for (int p = 11; p >= 3; p -= 4) {
        int rc = loom_session_rewind(s, p, a, &err);
        CHECK(rc == LOOM_OK, "rewind to %d: %s", p, err.msg);
        loom_session_reset(f);
        loom_session_eval(f, tok, p, b, LOOM_LOGITS_LAST, &err);
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)nv) && loom_session_digest(s) == loom_session_digest(f),
              "rewind to %d differs from a fresh run", p);
    }
    loom_session_params tight = {.n_ctx = 16, .n_threads = 1, .checkpoint_budget = one - 1};
    loom_session *t = loom_session_new(m, &tight, &err);
    if (t && !loom_session_eval(t, tok, 3, NULL, LOOM_LOGITS_LAST, &err))
        CHECK(loom_session_checkpoint(t, &err) == LOOM_E_NOMEM && loom_session_n_checkpoints(t) == 0,
              "a budget below one checkpoint: %s", err.msg);
    loom_session_free(t);
out:
    free(a);
    free(b);
    loom_session_free(s);
    loom_session_free(f);
}

/* skip_prompt_checkpoints: a prompt leaves no checkpoint (and the same logits and state as a session that keeps
 * one); rewinding then re-evaluates from the empty state and still equals a fresh run; explicit checkpoints
 * and checkpoint_every still work. */
static void check_skip_prompt_checkpoints(const loom_model *m, const int32_t *tok)
{
    int nv = loom_model_n_logits(m);
    loom_session_params sp = {.n_ctx = 64, .n_threads = 1, .skip_prompt_checkpoints = 1};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &sp, &err), *f = new_session(m, 64, 1);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    if (!s || !f || !a || !b || loom_session_eval(s, tok, 9, a, LOOM_LOGITS_LAST, &err) ||
        loom_session_eval(f, tok, 9, b, LOOM_LOGITS_LAST, &err)) {
        CHECK(0, "skip_prompt_checkpoints setup: %s", err.msg);
        goto out;
    }
    CHECK(loom_session_n_checkpoints(s) == 0 && loom_session_n_checkpoints(f) >= 1,
          "prompt-end checkpoints: %d skipped, %d kept (expected 0 and >= 1)", loom_session_n_checkpoints(s),
          loom_session_n_checkpoints(f));
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)nv) && loom_session_digest(s) == loom_session_digest(f),
          "a prompt without its checkpoint differs from one with it");
    struct embed_count ec = {0, m->hp.n_embd};
    s->hook = count_embedded;
    s->hook_ctx = &ec;
    int rc = loom_session_rewind(s, 5, a, &err);
    s->hook = NULL;
    loom_session_reset(f);
    loom_session_eval(f, tok, 5, b, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK && ec.tokens == 5, "rewind without checkpoints: %s (%lld tokens re-evaluated, expected 5)",
          err.msg, (long long)ec.tokens);
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)nv) && loom_session_digest(s) == loom_session_digest(f),
          "rewind without checkpoints differs from a fresh run");
    CHECK(loom_session_checkpoint(s, &err) == LOOM_OK && loom_session_n_checkpoints(s) == 1,
          "an explicit checkpoint with skip_prompt_checkpoints: %s", err.msg);
    loom_session_free(s);
    sp.checkpoint_every = 4;
    s = loom_session_new(m, &sp, &err);
    CHECK(s && !loom_session_eval(s, tok, 9, NULL, LOOM_LOGITS_LAST, &err) && loom_session_n_checkpoints(s) == 1,
          "checkpoint_every 4 with skip_prompt_checkpoints: %d checkpoints after 9 tokens, expected 1",
          s ? loom_session_n_checkpoints(s) : -1);
out:
    free(a);
    free(b);
    loom_session_free(s);
    loom_session_free(f);
}

/* ---- many sequences --------------------------------------------------------------------------------- */

/* Solo reference: prompt then `steps` greedy tokens; step logits into rows[steps][nv]; returns the digest. */
static uint64_t solo(const loom_model *m, int n_ctx, const int32_t *prompt, int n_prompt, int steps, float *rows)
{
    loom_session *s = new_session(m, n_ctx, 1);
    loom_error err = {0};
    int32_t toks[16];
    uint64_t d = 0;
    if (s && !loom_session_eval(s, prompt, n_prompt, NULL, LOOM_LOGITS_LAST, &err) && !generate(m, s, steps, toks, rows))
        d = loom_session_digest(s);
    loom_session_free(s);
    return d;
}

/* Three sequences of different lengths and contexts decode together; sequence 1 is reset and reused with
 * another prompt half way while the others continue. Each equals its solo run bitwise. */
static void check_many(const char *name, const loom_model *m, const int32_t *tok)
{
    enum { NS = 3, STEPS = 6, HALF = 3 };
    int nv = loom_model_n_logits(m);
    const int ctx[NS] = {32, 64, 48}, len[NS] = {5, 9, 2};
    const int32_t *prompt[NS] = {tok, tok + 3, tok + 11}, *prompt2 = tok + 7;
    loom_session *ss[NS] = {0};
    float *want[NS + 1] = {0}, *got = malloc(sizeof(float) * NS * (size_t)nv);
    float *seen[NS + 1] = {0};
    uint64_t dig[NS + 1];
    loom_error err = {0};
    int ok = got != NULL;
    for (int i = 0; i <= NS && ok; i++) {
        want[i] = malloc(sizeof(float) * STEPS * (size_t)nv);
        seen[i] = malloc(sizeof(float) * STEPS * (size_t)nv);
        ok = want[i] && seen[i];
        if (ok)
            dig[i] = i < NS ? solo(m, ctx[i], prompt[i], len[i], STEPS, want[i])
                            : solo(m, ctx[1], prompt2, 4, STEPS - HALF, want[i]);
    }
    for (int i = 0; i < NS && ok; i++) {
        ss[i] = new_session(m, ctx[i], 1 + i % 2);
        ok = ss[i] && !loom_session_eval(ss[i], prompt[i], len[i], NULL, LOOM_LOGITS_LAST, &err);
    }
    for (int step = 0; step < STEPS && ok; step++) {
        if (step == HALF) { /* sequence 1 reset and reused */
            loom_session_reset(ss[1]);
            ok = !loom_session_eval(ss[1], prompt2, 4, NULL, LOOM_LOGITS_LAST, &err);
        }
        int32_t next[NS];
        for (int i = 0; i < NS; i++)
            next[i] = greedy(m, loom_session_last_logits(ss[i]));
        int rc = loom_sessions_decode(ss, next, NS, got, &err);
        CHECK(rc == LOOM_OK, "%s: batched decode step %d: %s", name, step, err.msg);
        ok &= rc == LOOM_OK;
        for (int i = 0; i < NS && ok; i++) {
            int which = i == 1 && step >= HALF ? NS : i, at = which == NS ? step - HALF : step;
            memcpy(seen[which] + (size_t)at * (size_t)nv, got + (size_t)i * (size_t)nv, sizeof(float) * (size_t)nv);
        }
    }
    for (int i = 0; i <= NS && ok; i++) { /* i == NS: sequence 1 after its reuse */
        int steps = i == NS ? STEPS - HALF : i == 1 ? HALF : STEPS;
        CHECK(!memcmp(want[i], seen[i], sizeof(float) * (size_t)steps * (size_t)nv),
              "%s: sequence %d: batched logits differ from its solo run", name, i);
        if (i != 1)
            CHECK(loom_session_digest(ss[i == NS ? 1 : i]) == dig[i], "%s: sequence %d: digest differs from solo",
                  name, i);
    }
    /* all or nothing: a bad token in the batch changes no session */
    if (ok) {
        uint64_t before = loom_session_digest(ss[0]);
        int32_t bad[NS] = {tok[0], tok[1], -3};
        CHECK(loom_sessions_decode(ss, bad, NS, got, &err) == LOOM_E_ARG && loom_session_digest(ss[0]) == before,
              "%s: a bad token in the batch was not refused cleanly", name);
        loom_session *dup[2] = {ss[0], ss[0]};
        CHECK(loom_sessions_decode(dup, bad, 2, got, &err) == LOOM_E_ARG, "%s: a session twice was accepted", name);
        printf("%s: %d sequences (lengths 5/9/2, contexts 32/64/48, one reset and reused) batched %d steps, "
               "bitwise equal to solo\n", name, NS, STEPS);
    }
    for (int i = 0; i <= NS; i++) {
        free(want[i]);
        free(seen[i]);
        if (i < NS)
            loom_session_free(ss[i]);
    }
    free(got);
}

/* ---- models ------------------------------------------------------------------------------------------ */

static void test_micro(void)
{
    char dir[] = "/tmp/loom-test-state-XXXXXX", vocab[64], path[64];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    snprintf(path, sizeof path, "%s/micro.gguf", dir);
    char path2[80];
    snprintf(path2, sizeof path2, "%s/micro2.gguf", dir);
    loom_model *m = NULL, *m2 = NULL;
    if (write_mini_vocab(vocab) || !(m = load_micro_model(vocab, path, LOOM_TYPE_F16, 7)) ||
        !(m2 = load_micro_model(vocab, path2, LOOM_TYPE_F16, 8)))
        goto out;
    int32_t tok[NP + 8];
    for (int i = 0; i < NP + 8; i++)
        tok[i] = (int32_t)((i * 37 + 11) % MINI_TOKENS);
    test_owners(m);
    check_partitions("micro F16", m, tok, NP, 3);
    for (int poison = 0; poison < 2; poison++) {
        check_injection(m, tok, 4, 5, LOOM_LOGITS_LAST, poison);
        check_injection(m, tok, 4, 1, LOOM_LOGITS_LAST, poison);
        check_injection(m, tok, 0, 6, LOOM_LOGITS_ALL, poison);
    }
    check_alloc_failure(m, tok);
    check_cancel(m, tok, 4, 5, LOOM_LOGITS_LAST);
    check_cancel(m, tok, 4, 1, LOOM_LOGITS_LAST);
    check_cancel(m, tok, 0, 6, LOOM_LOGITS_ALL);
    check_cancel_many(m, tok);
    check_cancel_cached(m, tok);
    test_context(m, tok);
    test_digest(m, tok);
    check_save_restore("micro F16", m, m2, tok, 9, 64, dir);
    check_rewind_cache("micro F16", m, tok);
    check_many("micro F16", m, tok);
    check_budget(m, tok);
    check_skip_prompt_checkpoints(m, tok);
out:
    loom_model_free(m);
    loom_model_free(m2);
    unlink(path2);
    unlink(path);
    unlink(vocab);
    rmdir(dir);
}

/* A cached model (scripts/prepare-models.sh) when present: partition invariance on a real geometry. */
static void test_cached(const char *file, int n, int n_random, int n_gen)
{
    const char *cache = getenv("LOOM_CACHE");
    const char *home = getenv("HOME");
    char path[1024];
    if (cache && *cache)
        snprintf(path, sizeof path, "%s/models/%s", cache, file);
    else
        snprintf(path, sizeof path, "%s/.cache/loom/models/%s", home ? home : "", file);
    if (access(path, R_OK) != 0) {
        printf("%s: not present, skipped\n", path);
        return;
    }
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    CHECK(m != NULL, "load %s: %s", path, err.msg);
    if (!m)
        return;
    int32_t tok[64];
    for (int i = 0; i < n && i < 64; i++)
        tok[i] = (int32_t)((i * 7919 + 101) % 150000);
    test_owners(m);
    check_partitions(file, m, tok, n, n_random);
    char dir[] = "/tmp/loom-test-state-XXXXXX"; /* private: other test runs may save at the same time */
    if (mkdtemp(dir)) {
        check_save_restore(file, m, NULL, tok, n, n_gen, dir);
        rmdir(dir);
    } else {
        CHECK(0, "mkdtemp failed");
    }
    check_rewind_cache(file, m, tok);
    check_many(file, m, tok);
    loom_model_free(m);
}

int main(void)
{
#ifdef __SANITIZE_ADDRESS__
    const int sanitized = 1; /* the 0.8b model is too slow under ASan; tiny runs shorter */
#else
    const int sanitized = 0;
#endif
    test_micro();
    test_cached("qwen35-tiny-Q4_K_M.gguf", 16, 2, sanitized ? 8 : 64);
    if (!sanitized && getenv("LOOM_TEST_SKIP_08B") == NULL)
        test_cached("qwen35-0.8b-Q4_K_M.gguf", 12, 1, 64);
    return test_finish();
}
