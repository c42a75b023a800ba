/* test_state.c — session state you can trust, on a synthetic micro model written by the test (and the cached
 * tiny / 0.8b models when present): the state owner list and its bytes against the admission formula,
 * partition-invariant prefill in CANONICAL numerics (logits and digests bitwise equal for one chunk, token by
 * token, 1/2/1, 3/3/3/1, 7 and random splits), transactional requests under failure injection after every
 * stage and cancellation at every poll of the abort callback, the context limit, save/restore (64 greedy
 * tokens), checkpoints/rewind and the prompt cache (which extends the live state without a checkpoint after a
 * restore, a decode turn, a failure or a rewind, in both numerics), rewind and the prompt cache all or nothing
 * under failure injection after every stage, and many sequences decoded together (each bitwise its solo run;
 * a step failing at any stage changes no session). LOOM_TEST_SKIP_08B skips the 0.8b model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "kernels/types.h"
#include "runtime/session.h"
#include "test.h"
#include "test_abort.h"
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
    int n = loom_session_state_owners(s, NULL, 0);
    struct loom_state_owner *o = calloc((size_t)n, sizeof *o);
    if (!o) {
        CHECK(0, "owner list of %d: out of memory", n);
        loom_session_free(s);
        return;
    }
    loom_session_state_owners(s, o, n);
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
    CHECK(rec == m->geo.recurrent_state_bytes, "recurrent bytes %llu vs geometry %llu", (unsigned long long)rec,
          (unsigned long long)m->geo.recurrent_state_bytes);
    CHECK(kv_pos == m->geo.kv_bytes_per_token, "KV bytes per position %llu vs geometry %llu",
          (unsigned long long)kv_pos, (unsigned long long)m->geo.kv_bytes_per_token);
    CHECK(total == loom_session_state_bytes(s) && total == rec + 40 * kv_pos, "state bytes %llu vs %llu",
          (unsigned long long)loom_session_state_bytes(s), (unsigned long long)(rec + 40 * kv_pos));
    printf("owners: %d, recurrent %llu B, KV %llu B/position, %llu B at n_ctx 40\n", n, (unsigned long long)rec,
           (unsigned long long)kv_pos, (unsigned long long)total);
    free(o);
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

/* The prompt cache cancelled while it evaluates: all or nothing, the session is as before (position, history,
 * held logits); the same request then equals a fresh run. Likewise a cancelled rewind. */
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
    CHECK(rc == LOOM_E_CANCELLED && pos == 9 && loom_session_last_logits(s),
          "cancelled prompt cache: rc %d, position %d, expected 9 with the logits held", rc, pos);
    CHECK(loom_session_tokens(s, hist, 9) == 9 && !memcmp(hist, P, sizeof hist),
          "cancelled prompt cache: the history changed");
    ab = (struct abort_at){0, -1};
    rc = loom_session_prefill_cached(s, Q, 9, a, &err);
    CHECK(rc == 4 && !memcmp(a, b, sizeof(float) * (size_t)nv) && loom_session_digest(s) == loom_session_digest(g),
          "prompt cache after a cancel: reused %d, or differs from a fresh run (%s)", rc, err.msg);
    ab = (struct abort_at){0, 0};
    rc = loom_session_rewind(s, 7, NULL, &err);
    CHECK(rc == LOOM_E_CANCELLED && loom_session_pos(s) == 9 && loom_session_digest(s) == loom_session_digest(g),
          "cancelled rewind: rc %d, position %d, expected 9 and the state unchanged", rc, loom_session_pos(s));
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
        CHECK(loom_session_state_bytes(d) == m->geo.recurrent_state_bytes + (uint64_t)want * m->geo.kv_bytes_per_token,
              "default state bytes follow the geometry");
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

/* A state saved by a model in one float-order profile is refused, naming both, by the same file loaded in the
 * other (its sums would continue in other orders), with the session unchanged. */
static void check_restore_other_orders(const loom_model *m, const char *model_path, const int32_t *tok,
                                       const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/orders.state", dir);
    loom_error err = {0};
    enum loom_orders mine = loom_orders_active();
    enum loom_orders other = mine == LOOM_ORDERS_HASWELL ? LOOM_ORDERS_AVX512 : LOOM_ORDERS_HASWELL;
    loom_session *a = new_session(m, 128, 1), *b = NULL;
    int rc = a ? loom_session_eval(a, tok, 5, NULL, LOOM_LOGITS_LAST, &err) : LOOM_E_NOMEM;
    rc = rc ? rc : loom_session_save(a, path, &err);
    CHECK(rc == LOOM_OK, "save for the other profile: %s", err.msg);
    loom_model *o = NULL;
    if (rc == LOOM_OK && loom_orders_select(other, &err) == LOOM_OK) {
        o = loom_model_load(model_path, &err);
        loom_orders_select(mine, &err);
    }
    CHECK(o != NULL, "load %s in the %s profile: %s", model_path, loom_orders_label(other), err.msg);
    if (o && (b = new_session(o, 128, 1))) {
        uint64_t before = loom_session_digest(b);
        rc = loom_session_restore(b, path, &err);
        char want[128];
        snprintf(want, sizeof want, "saved in the %s float-order profile, this model runs in %s",
                 loom_orders_label(mine), loom_orders_label(other));
        CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, want), "restore in the other profile: rc %d (%s)", rc, err.msg);
        CHECK(loom_session_digest(b) == before, "a refused restore changed the session");
    }
    loom_session_free(b);
    loom_model_free(o);
    loom_session_free(a);
    unlink(path);
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
        uint32_t version;
        memcpy(&version, img + 8, 4); /* after the 8-byte magic */
        memcpy(img + 8, &(uint32_t){version - 1}, 4);
        write_all(bad, img, len);
        rc = loom_session_restore(b, bad, &err);
        CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, "saved by another loom version"),
              "%s: an earlier version's file: rc %d (%s)", name, rc, err.msg);
        memcpy(img + 8, &version, 4);
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

/* ---- the live state as a prefix ------------------------------------------------------------------------ */

static loom_session *new_numerics(const loom_model *m, enum loom_numerics nm)
{
    loom_session_params p = {.n_ctx = 64, .n_threads = 1, .numerics = nm};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &p, &err);
    CHECK(s != NULL, "session: %s", err.msg);
    return s;
}

/* loom_session_prefill_cached with the tokens it embeds counted into *evaluated. */
static int prefill_counted(loom_session *s, const int32_t *tokens, int n, float *logits, int64_t *evaluated,
                           loom_error *err)
{
    struct embed_count ec = {0, s->model->hp.n_embd};
    s->hook = count_embedded;
    s->hook_ctx = &ec;
    int reused = loom_session_prefill_cached(s, tokens, n, logits, err);
    s->hook = NULL;
    *evaluated = ec.tokens;
    return reused;
}

/* s holds tokens[0..live) (its whole history). The prompt cache to tokens[n] (n >= live) must reuse the live
 * state: return live, evaluate only tokens[live..n) (nothing when n == live and s holds logits), and give the
 * logits and digest of a copy of s (saved and restored: no checkpoints) fed tokens[live..n) as one request,
 * in CANONICAL numerics also those of a fresh session fed tokens[n] in one request. */
static void expect_live(const char *name, const char *what, loom_session *s, const int32_t *tokens, int live, int n,
                        const char *dir)
{
    const loom_model *m = s->model;
    int nv = loom_model_n_logits(m);
    char path[256];
    snprintf(path, sizeof path, "%s/live.state", dir);
    loom_session *copy = new_numerics(m, s->numerics), *fresh = new_numerics(m, LOOM_NUMERICS_CANONICAL);
    float *got = malloc(sizeof(float) * (size_t)nv), *want = malloc(sizeof(float) * (size_t)nv);
    loom_error err = {0};
    int64_t evaluated = -1;
    if (!copy || !fresh || !got || !want || loom_session_save(s, path, &err) ||
        loom_session_restore(copy, path, &err) || loom_session_eval(copy, tokens + live, n - live, NULL,
                                                                    LOOM_LOGITS_LAST, &err)) {
        CHECK(0, "%s: %s: setup: %s", name, what, err.msg);
        goto out;
    }
    int reused = prefill_counted(s, tokens, n, got, &evaluated, &err);
    CHECK(reused == live && evaluated == n - live, "%s: %s: the prompt cache reused %d and evaluated %lld of %d "
          "tokens, expected %d and %d (%s)", name, what, reused, (long long)evaluated, n, live, n - live, err.msg);
    const float *last = loom_session_last_logits(copy);
    CHECK(reused >= 0 && last && !memcmp(got, last, sizeof(float) * (size_t)nv) &&
              loom_session_digest(s) == loom_session_digest(copy),
          "%s: %s: logits or digest differ from the live state fed the rest", name, what);
    if (s->numerics == LOOM_NUMERICS_CANONICAL) {
        int rc = loom_session_eval(fresh, tokens, n, want, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_OK && !memcmp(got, want, sizeof(float) * (size_t)nv) &&
                  loom_session_digest(s) == loom_session_digest(fresh),
              "%s: %s: logits or digest differ from a fresh session fed all %d tokens (%s)", name, what, n, err.msg);
    }
out:
    unlink(path);
    free(got);
    free(want);
    loom_session_free(copy);
    loom_session_free(fresh);
}

/* Rewind s to pos with the request failing at its first stage: s stays as it was (rewinding is all or
 * nothing); returns its position. */
static int failed_rewind(loom_session *s, int pos)
{
    struct inject in = {0, 0, 0, LOOM_E_INTERNAL, "", 0};
    loom_error err = {0};
    s->hook = inject_hook;
    s->hook_ctx = &in;
    int rc = loom_session_rewind(s, pos, NULL, &err);
    s->hook = NULL;
    CHECK(rc < 0, "the failing rewind returned %d", rc);
    return loom_session_pos(s);
}

/* The live state counts as a reusable prefix without a checkpoint: after a restore, with the same tokens
 * again, after a decode turn, after a failed request, after a rewind and after a failed rewind; tokens that
 * diverge from the history (or stop inside it) do not reuse it. conv: the conversation so far, built up in
 * place from tok (32 tokens). */
static void check_live_prefix(const char *name, const loom_model *m, const int32_t *tok, enum loom_numerics nm,
                              const char *dir)
{
    char label[96];
    snprintf(label, sizeof label, "%s (%s)", name, nm == LOOM_NUMERICS_CANONICAL ? "canonical" : "reference batch");
    int nv = loom_model_n_logits(m), p;
    loom_session *s = new_numerics(m, nm), *f = new_numerics(m, LOOM_NUMERICS_CANONICAL);
    float *a = malloc(sizeof(float) * 4 * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    int32_t conv[64];
    char path[256];
    loom_error err = {0};
    int64_t evaluated = -1;
    snprintf(path, sizeof path, "%s/conversation.state", dir);
    memcpy(conv, tok, sizeof(int32_t) * 32);
    if (!s || !f || !a || !b || loom_session_eval(f, conv, 9, NULL, LOOM_LOGITS_LAST, &err) ||
        loom_session_save(f, path, &err) || loom_session_restore(s, path, &err)) {
        CHECK(0, "%s: setup: %s", label, err.msg);
        goto out;
    }
    expect_live(label, "restored 9 tokens + 3", s, conv, 9, 12, dir);
    expect_live(label, "the same 12 tokens again", s, conv, 12, 12, dir);
    if (generate(m, s, 3, conv + 12, a))
        goto out;
    if (nm == LOOM_NUMERICS_CANONICAL) { /* a step of many sequences appends to the history too */
        conv[15] = greedy(m, loom_session_last_logits(s));
        CHECK(loom_sessions_decode(&s, conv + 15, 1, NULL, &err) == LOOM_OK, "%s: decode: %s", label, err.msg);
    } else if (generate(m, s, 1, conv + 15, a)) {
        goto out;
    }
    expect_live(label, "a decode turn of 4 tokens + 2", s, conv, 16, 18, dir);
    struct inject in = {0, 3, 0, LOOM_E_INTERNAL, "", 0};
    s->hook = inject_hook;
    s->hook_ctx = &in;
    CHECK(loom_session_eval(s, conv + 18, 3, NULL, LOOM_LOGITS_LAST, &err) == LOOM_E_INTERNAL,
          "%s: the injected failure did not fail the request", label);
    s->hook = NULL;
    expect_live(label, "a failed request, then 18 tokens + 3", s, conv, 18, 21, dir);
    CHECK(loom_session_rewind(s, 14, NULL, &err) == LOOM_OK, "%s: rewind: %s", label, err.msg);
    conv[14] = tok[31], conv[15] = tok[30];
    expect_live(label, "a rewind to 14, then 2 other tokens", s, conv, 14, 16, dir);
    /* a failed rewind to 17 (from the explicit checkpoint at 16) leaves s at 18 with its logits: its history
     * is a prefix to extend */
    CHECK(loom_session_checkpoint(s, &err) == LOOM_OK, "%s: checkpoint: %s", label, err.msg);
    p = loom_session_eval(s, conv + 16, 2, NULL, LOOM_LOGITS_LAST, &err) ? -1 : failed_rewind(s, 17);
    CHECK(p == 18 && loom_session_last_logits(s) != NULL, "%s: the failed rewind left position %d", label, p);
    if (p < 0)
        goto out;
    expect_live(label, "a failed rewind, then 2 tokens more", s, conv, p, p + 2, dir);
    /* the same tokens again after a failed rewind: the held logits are returned, nothing is evaluated */
    p = failed_rewind(s, 17);
    int reused = prefill_counted(s, conv, p, a, &evaluated, &err);
    loom_session_reset(f);
    loom_session_eval(f, conv, p, b, LOOM_LOGITS_LAST, &err);
    CHECK(reused == p && evaluated == 0, "%s: the same %d tokens after a failed rewind: reused %d, evaluated %lld "
          "(%s)", label, p, reused, (long long)evaluated, err.msg);
    CHECK(nm != LOOM_NUMERICS_CANONICAL || (!memcmp(a, b, sizeof(float) * (size_t)nv) &&
                                            loom_session_digest(s) == loom_session_digest(f)),
          "%s: the same tokens after a failed rewind differ from a fresh run", label);
    /* stopping at 12 inside the history, then diverging at 10: only checkpoints within the prefix are reused */
    int32_t other = (conv[10] + 1) % (int32_t)m->tok_embd.n_out;
    int32_t diverged[16];
    memcpy(diverged, conv, sizeof diverged);
    diverged[10] = other;
    const int32_t *cases[2] = {conv, diverged};
    const int lens[2] = {12, 16}, limits[2] = {11, 10};
    for (int c = 0; c < 2; c++) {
        reused = prefill_counted(s, cases[c], lens[c], a, &evaluated, &err);
        loom_session_reset(f);
        loom_session_eval(f, cases[c], lens[c], b, LOOM_LOGITS_LAST, &err);
        CHECK(reused >= 0 && reused <= limits[c] && evaluated == lens[c] - reused,
              "%s: %s: reused %d (at most %d expected), evaluated %lld (%s)", label,
              c ? "diverging tokens" : "stopping inside the history", reused, limits[c], (long long)evaluated, err.msg);
        CHECK(nm != LOOM_NUMERICS_CANONICAL || (!memcmp(a, b, sizeof(float) * (size_t)nv) &&
                                                loom_session_digest(s) == loom_session_digest(f)),
              "%s: the prompt cache on diverging tokens differs from a fresh run", label);
    }
    printf("%s: the live state reused after restore, decode, failure, rewind (evaluating only new tokens)\n",
           label);
out:
    unlink(path);
    free(a);
    free(b);
    loom_session_free(s);
    loom_session_free(f);
}

/* Checkpoints every 2 positions within a budget of 2: the oldest are evicted, rewinding still equals a fresh
 * run (from the nearest checkpoint left, or the empty state), and a budget below one checkpoint refuses. */
static void check_budget(const loom_model *m, const int32_t *tok)
{
    uint64_t one = m->geo.recurrent_state_bytes;
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
    CHECK(loom_session_checkpoint_at(s, 12) == 12 && loom_session_checkpoint_at(s, 11) == 10 &&
          loom_session_checkpoint_at(s, 9) == 0, "the nearest checkpoints at or before 12, 11, 9: %d %d %d (expected "
          "12 10 0: the two newest kept)", loom_session_checkpoint_at(s, 12), loom_session_checkpoint_at(s, 11),
          loom_session_checkpoint_at(s, 9));
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

/* ---- transactional rewind and prompt cache ----------------------------------------------------------- */

/* Everything a failed request must leave as it was: position, digest, history, held logits, checkpoints. */
struct snapshot {
    int pos, n_ckpt, has_logits;
    uint64_t digest;
    int32_t hist[64];
    int ckpt_pos[LOOM_MAX_CHECKPOINTS];
    float *logits;
};

static void take_snapshot(const loom_session *s, struct snapshot *sn)
{
    sn->pos = loom_session_pos(s);
    sn->digest = loom_session_digest(s);
    loom_session_tokens(s, sn->hist, 64);
    sn->n_ckpt = loom_session_n_checkpoints(s);
    for (int i = 0; i < sn->n_ckpt; i++)
        sn->ckpt_pos[i] = s->ckpt[i].pos;
    const float *last = loom_session_last_logits(s);
    sn->has_logits = last != NULL;
    if (last)
        memcpy(sn->logits, last, sizeof(float) * (size_t)s->n_logits);
}

static int same_snapshot(const struct snapshot *a, const struct snapshot *b, int nv)
{
    return a->pos == b->pos && a->digest == b->digest && a->n_ckpt == b->n_ckpt && a->has_logits == b->has_logits &&
           !memcmp(a->hist, b->hist, sizeof(int32_t) * (size_t)a->pos) &&
           !memcmp(a->ckpt_pos, b->ckpt_pos, sizeof(int) * (size_t)a->n_ckpt) &&
           (!a->has_logits || !memcmp(a->logits, b->logits, sizeof(float) * (size_t)nv));
}

/* The session every case starts from: a 9-token prompt (prompt checkpoint), then 5 single tokens (checkpoint
 * at 12 with checkpoint_every 4): position 14. */
static loom_session *restore_base(const loom_model *m, const int32_t *tok, enum loom_numerics nm)
{
    loom_session_params p = {.n_ctx = 64, .n_threads = 2, .numerics = nm, .checkpoint_every = 4};
    loom_error err = {0};
    loom_session *s = loom_session_new(m, &p, &err);
    int rc = s ? loom_session_eval(s, tok, 9, NULL, LOOM_LOGITS_LAST, &err) : LOOM_E_NOMEM;
    for (int i = 9; i < 14 && !rc; i++)
        rc = loom_session_eval(s, tok + i, 1, NULL, LOOM_LOGITS_LAST, &err);
    CHECK(!rc, "restore base: %s", err.msg);
    if (rc)
        loom_session_free(s);
    return rc ? NULL : s;
}

/* One request on the base session: rewind (tokens NULL, to n) or the prompt cache to tokens[n]. */
static int restore_request(loom_session *s, const int32_t *tokens, int n, float *logits, loom_error *err)
{
    return tokens ? loom_session_prefill_cached(s, tokens, n, logits, err) : loom_session_rewind(s, n, logits, err);
}

/* A rewind or prompt-cache request on the base session with a failure injected at every stage in turn (and
 * at the allocation before it): each fails and leaves the session exactly as it was (position, digest,
 * history, held logits, checkpoint set) and the caller's buffer untouched; the same request afterwards gives
 * what it gives on a session that never failed. */
static void check_restore_injection(const loom_model *m, const int32_t *tok, enum loom_numerics nm,
                                    const char *what, const int32_t *tokens, int n, int poison)
{
    int nv = loom_model_n_logits(m);
    size_t bytes = sizeof(float) * (size_t)nv;
    float *out = malloc(bytes), *want = malloc(bytes), *l0 = malloc(bytes), *l1 = malloc(bytes);
    struct snapshot before = {.logits = l0}, after = {.logits = l1};
    loom_session *s = restore_base(m, tok, nm), *ref = restore_base(m, tok, nm);
    loom_error err = {0};
    struct inject in = {0, -1, poison, LOOM_E_INTERNAL, "", 0};
    int rc = s && ref && out && want && l0 && l1 ? restore_request(ref, tokens, n, want, &err) : LOOM_E_NOMEM;
    if (rc < 0) {
        CHECK(0, "%s: setup: %s", what, err.msg);
        goto out;
    }
    loom_session *count = restore_base(m, tok, nm);
    if (count) {
        count->hook = inject_hook;
        count->hook_ctx = &in;
        restore_request(count, tokens, n, NULL, &err);
        loom_session_free(count);
    }
    int n_stages = in.calls, failures = 0;
    take_snapshot(s, &before);
    for (int k = 0; k < n_stages; k++) {
        memset(out, 0xA5, bytes);
        in = (struct inject){0, k, poison, LOOM_E_INTERNAL, "", 0};
        s->hook = inject_hook;
        s->hook_ctx = &in;
        rc = restore_request(s, tokens, n, out, &err);
        s->hook = NULL;
        if (rc >= 0 && poison) { /* a NaN that cannot reach the checked rows: start again */
            loom_session_free(s);
            if (!(s = restore_base(m, tok, nm)))
                goto out;
            continue;
        }
        failures++;
        int untouched = 1;
        for (size_t i = 0; i < bytes; i++)
            untouched &= ((unsigned char *)out)[i] == 0xA5;
        take_snapshot(s, &after);
        CHECK(rc < 0, "%s: injection at stage %d (%s, layer %d) did not fail", what, k, in.stage, in.layer);
        CHECK(untouched, "%s: injection at %s layer %d: the caller's buffer changed", what, in.stage, in.layer);
        CHECK(same_snapshot(&before, &after, nv), "%s: injection at %s layer %d: the session changed (position %d, "
              "%d checkpoints, logits held %d; before %d, %d, %d)", what, in.stage, in.layer, after.pos, after.n_ckpt,
              after.has_logits, before.pos, before.n_ckpt, before.has_logits);
    }
    CHECK(failures > 0, "%s: no injection failed", what);
    rc = restore_request(s, tokens, n, out, &err);
    CHECK(rc >= 0 && !memcmp(out, want, bytes) && loom_session_digest(s) == loom_session_digest(ref) &&
              loom_session_n_checkpoints(s) == loom_session_n_checkpoints(ref),
          "%s: the request after the failures differs from one on a session that never failed (%s)", what, err.msg);
    printf("%s (%s, %s): %d stages, %d failed requests, session unchanged\n", what,
           nm == LOOM_NUMERICS_CANONICAL ? "canonical" : "reference batch", poison ? "NaN" : "error", n_stages,
           failures);
out:
    free(out);
    free(want);
    free(l0);
    free(l1);
    loom_session_free(s);
    loom_session_free(ref);
}

/* Rewind and the prompt cache, on both paths (a checkpoint restored; the live state extended), are all or
 * nothing; so is a refused request (bad position, bad token). */
static void check_restore_transactions(const loom_model *m, const int32_t *tok)
{
    int32_t diverged[16], inside[12], longer[17];
    memcpy(diverged, tok, sizeof diverged);
    diverged[10] = tok[40], diverged[11] = tok[41];
    memcpy(inside, tok, sizeof inside);
    memcpy(longer, tok, sizeof longer);
    for (int nm = 0; nm < 2; nm++)
        for (int poison = 0; poison < 2; poison++) {
            check_restore_injection(m, tok, nm, "rewind 14 -> 11", NULL, 11, poison);
            check_restore_injection(m, tok, nm, "rewind 14 -> 14", NULL, 14, poison);
            check_restore_injection(m, tok, nm, "prompt cache diverging at 10", diverged, 16, poison);
            check_restore_injection(m, tok, nm, "prompt cache stopping at 12", inside, 12, poison);
            check_restore_injection(m, tok, nm, "prompt cache extending the live 14", longer, 17, poison);
        }
    loom_session *s = restore_base(m, tok, LOOM_NUMERICS_CANONICAL);
    float *l0 = malloc(sizeof(float) * (size_t)loom_model_n_logits(m));
    float *l1 = malloc(sizeof(float) * (size_t)loom_model_n_logits(m));
    struct snapshot before = {.logits = l0}, after = {.logits = l1};
    loom_error err = {0};
    if (s && l0 && l1) {
        take_snapshot(s, &before);
        int32_t bad[16];
        memcpy(bad, diverged, sizeof bad);
        bad[15] = -1;
        CHECK(loom_session_rewind(s, 15, NULL, &err) == LOOM_E_ARG &&
                  loom_session_prefill_cached(s, bad, 16, NULL, &err) == LOOM_E_ARG &&
                  loom_session_prefill_cached(s, bad, 0, NULL, &err) == LOOM_E_ARG,
              "refused rewind / prompt cache requests: %s", err.msg);
        take_snapshot(s, &after);
        CHECK(same_snapshot(&before, &after, loom_model_n_logits(m)), "a refused request changed the session");
    }
    free(l0);
    free(l1);
    loom_session_free(s);
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
        /* the rows of one step bound the batch: two sessions of one position each take one at a time */
        loom_session *one[2] = {new_session(m, 1, 1), new_session(m, 1, 1)};
        CHECK(loom_sessions_decode_max(ss[0]) == 32 && loom_sessions_decode_max(ss[1]) == 64,
              "%s: decode_max %d and %d, expected the contexts 32 and 64", name, loom_sessions_decode_max(ss[0]),
              loom_sessions_decode_max(ss[1]));
        CHECK(one[0] && one[1] && loom_sessions_decode_max(one[0]) == 1 &&
                  loom_sessions_decode(one, tok, 2, NULL, &err) == LOOM_E_RANGE &&
                  loom_sessions_decode(one, tok, 1, NULL, &err) == LOOM_OK,
              "%s: a batch beyond loom_sessions_decode_max was not refused, or one within it failed", name);
        loom_session_free(one[0]);
        loom_session_free(one[1]);
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

/* Three sessions (contexts 32/64/48, prompts of 5/9/2 tokens) for a step of many sequences. */
static int many_base(const loom_model *m, const int32_t *tok, loom_session **ss)
{
    const int ctx[3] = {32, 64, 48}, len[3] = {5, 9, 2}, at[3] = {0, 3, 11};
    loom_error err = {0};
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        ss[i] = new_session(m, ctx[i], 1);
        ok &= ss[i] && !loom_session_eval(ss[i], tok + at[i], len[i], NULL, LOOM_LOGITS_LAST, &err);
    }
    return ok;
}

/* A step of three sequences with a failure injected at every stage (an error, or a NaN in the last row: one
 * sequence failing) fails for all and changes none; the next step equals one on sessions that never failed. */
static void check_many_injection(const loom_model *m, const int32_t *tok, int poison)
{
    int nv = loom_model_n_logits(m);
    size_t bytes = sizeof(float) * 3 * (size_t)nv;
    loom_session *ss[3] = {0}, *ref[3] = {0}, *count[3] = {0};
    float *out = malloc(bytes), *want = malloc(bytes), *held[3] = {0};
    struct snapshot before[3], after = {0};
    const int32_t next[3] = {tok[20], tok[21], tok[22]};
    loom_error err = {0};
    struct inject in = {0, -1, poison, LOOM_E_INTERNAL, "", 0};
    int ok = out && want && many_base(m, tok, ss) && many_base(m, tok, ref) && many_base(m, tok, count) &&
             (after.logits = malloc(sizeof(float) * (size_t)nv)) != NULL;
    for (int i = 0; i < 3 && ok; i++) {
        ok = (held[i] = malloc(sizeof(float) * (size_t)nv)) != NULL;
        before[i].logits = held[i];
        if (ok)
            take_snapshot(ss[i], &before[i]);
        count[i]->hook = inject_hook;
        count[i]->hook_ctx = &in;
    }
    if (!ok || loom_sessions_decode(ref, next, 3, want, &err) || loom_sessions_decode(count, next, 3, NULL, &err)) {
        CHECK(0, "many-sequence injection setup: %s", err.msg);
        goto out;
    }
    int n_stages = in.calls, failures = 0;
    for (int k = 0; k < n_stages; k++) {
        memset(out, 0xA5, bytes);
        in = (struct inject){0, k, poison, LOOM_E_INTERNAL, "", 0};
        for (int i = 0; i < 3; i++)
            ss[i]->hook = inject_hook, ss[i]->hook_ctx = &in;
        int rc = loom_sessions_decode(ss, next, 3, out, &err);
        for (int i = 0; i < 3; i++)
            ss[i]->hook = NULL;
        CHECK(rc != LOOM_OK, "many sequences: injection at stage %d (%s, layer %d) did not fail", k, in.stage,
              in.layer);
        failures += rc != LOOM_OK;
        int untouched = 1;
        for (size_t i = 0; i < bytes; i++)
            untouched &= ((unsigned char *)out)[i] == 0xA5;
        CHECK(untouched, "many sequences: injection at %s layer %d: the caller's buffer changed", in.stage, in.layer);
        for (int i = 0; i < 3; i++) {
            take_snapshot(ss[i], &after);
            CHECK(same_snapshot(&before[i], &after, nv), "many sequences: injection at %s layer %d: session %d "
                  "changed", in.stage, in.layer, i);
        }
    }
    int rc = loom_sessions_decode(ss, next, 3, out, &err);
    CHECK(rc == LOOM_OK && !memcmp(out, want, bytes), "many sequences: the step after the failures: %s", err.msg);
    for (int i = 0; i < 3; i++)
        CHECK(loom_session_digest(ss[i]) == loom_session_digest(ref[i]), "many sequences: session %d differs from "
              "one that never failed", i);
    printf("many sequences (%s): %d stages, %d failed steps, no session changed\n", poison ? "NaN" : "error",
           n_stages, failures);
out:
    for (int i = 0; i < 3; i++) {
        loom_session_free(ss[i]);
        loom_session_free(ref[i]);
        loom_session_free(count[i]);
        free(held[i]);
    }
    free(after.logits);
    free(out);
    free(want);
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
    int32_t tok[64];
    for (int i = 0; i < 64; i++)
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
    check_restore_other_orders(m, path, tok, dir);
    check_rewind_cache("micro F16", m, tok);
    check_live_prefix("micro F16", m, tok, LOOM_NUMERICS_CANONICAL, dir);
    check_live_prefix("micro F16", m, tok, LOOM_NUMERICS_REFERENCE_BATCH, dir);
    check_many("micro F16", m, tok);
    check_budget(m, tok);
    check_skip_prompt_checkpoints(m, tok);
    check_restore_transactions(m, tok);
    check_many_injection(m, tok, 0);
    check_many_injection(m, tok, 1);
out:
    loom_model_free(m);
    loom_model_free(m2);
    unlink(path2);
    unlink(path);
    unlink(vocab);
    rmdir(dir);
}

/* Failure injection after every stage (NaN and error), cancellation, the state digest and failing
 * multi-sequence steps on model m. */
static void check_transactions(const loom_model *m, const int32_t *tok)
{
    for (int poison = 0; poison < 2; poison++) {
        check_injection(m, tok, 4, 5, LOOM_LOGITS_LAST, poison);
        check_injection(m, tok, 0, 6, LOOM_LOGITS_ALL, poison);
        check_many_injection(m, tok, poison);
    }
    check_cancel(m, tok, 4, 5, LOOM_LOGITS_LAST);
    test_digest(m, tok);
}

/* A cached model (scripts/prepare-models.sh) when present: partition invariance on a real geometry; with
 * `transactions`, check_transactions too (the mixture-of-experts model, whose FFN stages differ). */
static void test_cached(const char *file, int n, int n_random, int n_gen, int transactions)
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
    /* one copy of a tied head: repacking it must not leave the embedding lookups paging in the file again */
    CHECK(!m->hp.tied_output || (m->tok_embd.data == m->output.data && m->tok_embd.layout == m->output.layout),
          "%s: the token embeddings read the head's bytes (layout %d and %d)", file, (int)m->tok_embd.layout,
          (int)m->output.layout);
    int32_t tok[64];
    for (int i = 0; i < 64; i++)
        tok[i] = (int32_t)((i * 7919 + 101) % 150000);
    test_owners(m);
    check_partitions(file, m, tok, n, n_random);
    char dir[] = "/tmp/loom-test-state-XXXXXX"; /* private: other test runs may save at the same time */
    if (mkdtemp(dir)) {
        check_save_restore(file, m, NULL, tok, n, n_gen, dir);
        check_live_prefix(file, m, tok, LOOM_NUMERICS_CANONICAL, dir);
        rmdir(dir);
    } else {
        CHECK(0, "mkdtemp failed");
    }
    check_rewind_cache(file, m, tok);
    check_many(file, m, tok);
    if (transactions)
        check_transactions(m, tok);
    loom_model_free(m);
}

int main(void)
{
#ifdef LOOM_SANITIZED /* the Makefile's SAN=1 */
    const int sanitized = 1; /* the 0.8b model is too slow under ASan; tiny runs shorter */
#else
    const int sanitized = 0;
#endif
    test_micro();
    test_cached("qwen35-tiny-Q4_K_M.gguf", 16, 2, sanitized ? 8 : 64, 0);
    test_cached("qwen35moe-tiny-F16.gguf", 16, 2, sanitized ? 8 : 32, 1);
    if (!sanitized && getenv("LOOM_TEST_SKIP_08B") == NULL)
        test_cached("qwen35-0.8b-Q4_K_M.gguf", 12, 1, 64, 0);
    return test_finish();
}
