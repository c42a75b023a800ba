/* test_stream.c — routed experts streamed under a memory budget (loom_model_params.mem_budget), on the prepared
 * tiny MoE files (skipped when absent): logits and state digests bitwise those of the resident model in both
 * numerics, with a budget of three slots (evictions every token), through io_uring and pread, with 1 and 2
 * threads; budgets refused with their numbers; read faults (EIO, a short read, the file truncated under the
 * model) failing the request without changing the session and the next request working; a file replaced by
 * rename still read as loaded; saved state restorable into the resident model (one identity); a dense model under a
 * budget (nothing streams: bitwise the resident model, budgets refused with the numbers). Expected values
 * come from the resident model, which the parity tests tie to the reference. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "loom.h"
#include "model/expert_cache.h"
#include "model/model.h"

#define N_PROMPT 24
#define N_DECODE 6
#define N_CTX 64
#define SLOTS 3

struct trace {
    float *logits;                 /* [N_PROMPT + N_DECODE][n_logits] */
    uint64_t digest[1 + N_DECODE]; /* after the prompt, after each decoded token */
};

static int model_path(const char *file, char *path, size_t cap)
{
    const char *cache = getenv("LOOM_CACHE"), *home = getenv("HOME");
    if (cache && *cache)
        snprintf(path, cap, "%s/models/%s", cache, file);
    else
        snprintf(path, cap, "%s/.cache/loom/models/%s", home ? home : "", file);
    if (access(path, R_OK) == 0)
        return 1;
    printf("%s: not present, skipped\n", path);
    return 0;
}

static loom_session *new_session(const loom_model *m, enum loom_numerics num, int threads, loom_error *err)
{
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = threads, .numerics = num};
    return loom_session_new(m, &sp, err);
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

static void prompt_tokens(int32_t *tok)
{
    for (int i = 0; i < N_PROMPT; i++)
        tok[i] = (int32_t)((i * 7919 + 101) % 150000);
}

/* The prompt as one request (every row's logits), then N_DECODE greedy tokens one by one. */
static int run_trace(const loom_model *m, enum loom_numerics num, int threads, struct trace *t)
{
    int nv = loom_model_n_logits(m);
    loom_error err = {0};
    loom_session *s = new_session(m, num, threads, &err);
    CHECK(s != NULL, "session: %s", err.msg);
    if (!s)
        return -1;
    int32_t tok[N_PROMPT];
    prompt_tokens(tok);
    int rc = loom_session_eval(s, tok, N_PROMPT, t->logits, LOOM_LOGITS_ALL, &err);
    CHECK(rc == LOOM_OK, "prompt: %s", err.msg);
    t->digest[0] = loom_session_digest(s);
    for (int i = 0; !rc && i < N_DECODE; i++) {
        float *row = t->logits + (size_t)(N_PROMPT + i) * (size_t)nv;
        int32_t next = argmax(row - nv, nv);
        rc = loom_session_eval(s, &next, 1, row, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_OK, "decode %d: %s", i, err.msg);
        t->digest[1 + i] = loom_session_digest(s);
    }
    loom_session_free(s);
    return rc;
}

static loom_model *load(const char *path, uint64_t budget, loom_error *err)
{
    loom_model_params p = {.mem_budget = budget};
    return loom_model_load_ex(path, &p, err);
}

/* A budget that leaves `slots` expert slots beside one session of (num, threads): measured on a load with a
 * large budget. 0 when that load fails. */
static uint64_t budget_for(const char *path, enum loom_numerics num, int threads, int slots)
{
    loom_error err = {0};
    loom_model *m = load(path, (uint64_t)1 << 34, &err);
    CHECK(m != NULL, "load %s with a large budget: %s", path, err.msg);
    if (!m)
        return 0;
    loom_session *s = new_session(m, num, threads, &err);
    loom_expert_stats st;
    CHECK(loom_model_expert_stats(m, &st) == LOOM_OK, "stats of a streaming model");
    uint64_t b = st.dense_bytes + LOOM_MEM_RESERVE + st.session_bytes + (uint64_t)slots * st.slot_bytes +
                 st.slot_bytes / 2;
    loom_session_free(s);
    loom_model_free(m);
    return b;
}

static void compare(const char *what, const loom_model *m, const struct trace *a, const struct trace *b)
{
    size_t n = (size_t)(N_PROMPT + N_DECODE) * (size_t)loom_model_n_logits(m);
    CHECK(!memcmp(a->logits, b->logits, n * sizeof(float)), "%s: logits differ from the resident model's", what);
    CHECK(!memcmp(a->digest, b->digest, sizeof a->digest), "%s: state digests differ from the resident model's",
          what);
}

/* Resident vs a budget of SLOTS slots, both numerics, 1 and 2 threads, io_uring and pread. */
static void check_bitwise(const char *file)
{
    char path[1024];
    if (!model_path(file, path, sizeof path))
        return;
    loom_error err = {0};
    loom_model *res = loom_model_load(path, &err);
    CHECK(res != NULL, "load %s: %s", file, err.msg);
    if (!res)
        return;
    size_t n = (size_t)(N_PROMPT + N_DECODE) * (size_t)loom_model_n_logits(res);
    struct trace want = {malloc(n * sizeof(float)), {0}}, got = {malloc(n * sizeof(float)), {0}};
    enum loom_numerics nums[2] = {LOOM_NUMERICS_CANONICAL, LOOM_NUMERICS_REFERENCE_BATCH};
    for (int k = 0; k < 2 && want.logits && got.logits; k++) {
        if (run_trace(res, nums[k], 2, &want))
            break;
        for (int threads = 1; threads <= 2; threads++) {
            loom_model *m = load(path, budget_for(path, nums[k], threads, SLOTS), &err);
            CHECK(m != NULL, "load %s with a budget of %d slots: %s", file, SLOTS, err.msg);
            if (!m)
                continue;
            static const char *const ways[4] = {"io_uring, reads ahead on predictions and from history",
                                                "io_uring, reads ahead from history", "io_uring", "pread"};
            static const enum loom_read_ahead ahead[4] = {LOOM_READ_AHEAD_ALL, LOOM_READ_AHEAD_HISTORY,
                                                          LOOM_READ_AHEAD_NONE, LOOM_READ_AHEAD_NONE};
            for (int way = 0; way < 4; way++) {
                loom_expert_cache_set_read_ahead(m->experts, ahead[way]);
                loom_expert_cache_force_pread(m->experts, way == 3);
                char what[160];
                snprintf(what, sizeof what, "%s numerics %d, %d threads, %s", file, (int)nums[k], threads, ways[way]);
                memset(got.logits, 0, n * sizeof(float));
                if (!run_trace(m, nums[k], threads, &got))
                    compare(what, m, &got, &want);
            }
            loom_expert_stats st;
            loom_model_expert_stats(m, &st);
            CHECK(st.n_slots_used == SLOTS, "%s: %d slots used, expected the budget's %d (after the session: %d)",
                  file, st.n_slots_used, SLOTS, st.n_slots);
            CHECK(st.misses > 4 * (uint64_t)N_DECODE && st.read_errors == 0 && st.bytes_read > 0,
                  "%s: expected an eviction every token: %llu misses, %llu errors", file,
                  (unsigned long long)st.misses, (unsigned long long)st.read_errors);
            CHECK(st.prefetches > 0 && st.prefetch_hits + st.prefetch_stale <= st.prefetches &&
                  st.prefetch_cancelled <= st.prefetch_stale && st.bytes_prefetched <= st.bytes_read,
                  "%s: decode steps read ahead on predictions: %llu, %llu needed, %llu stale, %llu cancelled", file,
                  (unsigned long long)st.prefetches, (unsigned long long)st.prefetch_hits,
                  (unsigned long long)st.prefetch_stale, (unsigned long long)st.prefetch_cancelled);
            CHECK(st.warm_hits <= st.warms && st.bytes_warmed + st.bytes_prefetched <= st.bytes_read &&
                  st.bytes_wasted <= st.bytes_warmed + st.bytes_prefetched,
                  "%s: decode steps warmed experts from history: %llu, %llu needed, %llu bytes wasted", file,
                  (unsigned long long)st.warms, (unsigned long long)st.warm_hits, (unsigned long long)st.bytes_wasted);
            loom_model_free(m);
        }
    }
    free(want.logits);
    free(got.logits);
    loom_model_free(res);
}

/* A request that fails on a read leaves the session as it was; the next one gives the resident result. */
static void check_fault(loom_model *m, loom_session *s, const float *want_row, int fault_errno, const char *expect)
{
    int nv = loom_model_n_logits(m);
    float *row = malloc((size_t)nv * sizeof(float));
    const float *last = loom_session_last_logits(s);
    int32_t next = argmax(last, nv);
    uint64_t before = loom_session_digest(s);
    int pos = loom_session_pos(s);
    loom_error err = {0};
    loom_expert_cache_set_read_ahead(m->experts, LOOM_READ_AHEAD_NONE); /* the n-th read is the step's own */
    loom_expert_cache_inject_fault(m->experts, 2, fault_errno);
    int rc = loom_session_eval(s, &next, 1, row, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_E_IO && strstr(err.msg, "reading expert") && strstr(err.msg, expect),
          "an injected fault (%s): expected LOOM_E_IO naming the expert, found %d '%s'", expect, rc, err.msg);
    CHECK(loom_session_digest(s) == before && loom_session_pos(s) == pos, "a failed read changed the session");
    loom_expert_cache_inject_fault(m->experts, 0, 0);
    rc = loom_session_eval(s, &next, 1, row, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK && !memcmp(row, want_row, (size_t)nv * sizeof(float)),
          "the request after a fault: rc %d '%s', or logits differ from the resident model's", rc, err.msg);
    loom_session_rewind(s, pos, NULL, &err);
    free(row);
}

/* With reads ahead, the n-th read may be the step's own (the request fails, nothing changes) or one read ahead
 * (a step that needs that expert reads it again and succeeds bitwise): both, for n = 1..12. */
static void check_prefetch_faults(loom_model *m, loom_session *s, const float *want_row)
{
    int nv = loom_model_n_logits(m), pos = loom_session_pos(s), absorbed = 0;
    float *row = malloc((size_t)nv * sizeof(float));
    int32_t next = argmax(loom_session_last_logits(s), nv);
    uint64_t before = loom_session_digest(s);
    loom_expert_cache_set_read_ahead(m->experts, LOOM_READ_AHEAD_ALL);
    for (int n = 1; n <= 12; n++) {
        loom_expert_stats a, b;
        loom_model_expert_stats(m, &a);
        loom_expert_cache_inject_fault(m->experts, n, EIO);
        loom_error err = {0};
        int rc = loom_session_eval(s, &next, 1, row, LOOM_LOGITS_LAST, &err);
        loom_expert_cache_inject_fault(m->experts, 0, 0);
        loom_model_expert_stats(m, &b);
        if (rc == LOOM_OK) {
            CHECK(!memcmp(row, want_row, (size_t)nv * sizeof(float)), "read %d failed and the step went on: logits "
                  "differ from the resident model's", n);
            absorbed += b.read_errors > a.read_errors;
            loom_session_rewind(s, pos, NULL, &err);
        } else {
            CHECK(rc == LOOM_E_IO && strstr(err.msg, "reading expert"), "read %d failed: %d '%s'", n, rc, err.msg);
        }
        CHECK(loom_session_digest(s) == before, "read %d failed: the session changed", n);
    }
    CHECK(absorbed > 0, "no failed read-ahead was read again by its step (12 tries)");
    loom_expert_cache_set_read_ahead(m->experts, LOOM_READ_AHEAD_NONE);
    free(row);
}

static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    char buf[1 << 16];
    size_t r;
    int ok = in && out;
    while (ok && (r = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, r, out) == r;
    if (in)
        fclose(in);
    if (out && fclose(out))
        ok = 0;
    return ok ? 0 : -1;
}

/* Rewrite path in place (same inode) with the bytes of `from`. */
static int rewrite_in_place(const char *from, const char *path)
{
    FILE *in = fopen(from, "rb");
    int fd = open(path, O_WRONLY);
    char buf[1 << 16];
    size_t r;
    int ok = in && fd >= 0;
    while (ok && (r = fread(buf, 1, sizeof buf, in)) > 0)
        ok = write(fd, buf, r) == (ssize_t)r;
    if (in)
        fclose(in);
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

/* Faults: injected EIO and short reads; the file truncated to nothing under the model (the held dense part
 * keeps the process alive: a mapped page of the file would raise SIGBUS), then rewritten; the file replaced by
 * rename (the model keeps reading the file it loaded). */
static void check_faults(const char *file)
{
    char path[1024], dir[] = "/var/tmp/loom-test-stream-XXXXXX", copy[1100], other[1100];
    if (!model_path(file, path, sizeof path) || !mkdtemp(dir))
        return;
    snprintf(copy, sizeof copy, "%s/model.gguf", dir);
    snprintf(other, sizeof other, "%s/other.gguf", dir);
    CHECK(copy_file(path, copy) == 0, "copying %s", path);
    loom_error err = {0};
    loom_model *res = loom_model_load(path, &err);
    loom_model *m = load(copy, budget_for(copy, LOOM_NUMERICS_CANONICAL, 2, SLOTS), &err);
    CHECK(res && m, "load %s resident and streamed: %s", file, err.msg);
    int nv = res ? loom_model_n_logits(res) : 0;
    struct trace want = {malloc((size_t)(N_PROMPT + N_DECODE) * (size_t)nv * sizeof(float)), {0}};
    if (res && m && want.logits && !run_trace(res, LOOM_NUMERICS_CANONICAL, 2, &want)) {
        loom_session *s = new_session(m, LOOM_NUMERICS_CANONICAL, 2, &err);
        int32_t tok[N_PROMPT];
        prompt_tokens(tok);
        CHECK(s && loom_session_eval(s, tok, N_PROMPT, NULL, LOOM_LOGITS_LAST, &err) == LOOM_OK, "prompt: %s", err.msg);
        const float *want_row = want.logits + (size_t)N_PROMPT * (size_t)nv;
        check_fault(m, s, want_row, EIO, "Input/output error");
        check_fault(m, s, want_row, 0, "short read");
        check_prefetch_faults(m, s, want_row);
        /* truncated under the model: every read past the end is short */
        uint64_t before = loom_session_digest(s);
        loom_expert_cache_set_read_ahead(m->experts, LOOM_READ_AHEAD_ALL); /* a failed read ahead fails no step */
        CHECK(truncate(copy, 0) == 0, "truncate %s: %s", copy, strerror(errno));
        int32_t next = argmax(loom_session_last_logits(s), nv);
        float *row = malloc((size_t)nv * sizeof(float));
        int rc = loom_session_eval(s, &next, 1, row, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_E_IO && strstr(err.msg, "short read"), "a truncated file: expected a short read, found %d "
              "'%s'", rc, err.msg);
        CHECK(loom_session_digest(s) == before, "a failed request on a truncated file changed the session");
        CHECK(rewrite_in_place(path, copy) == 0, "rewriting %s", copy);
        rc = loom_session_eval(s, &next, 1, row, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_OK && !memcmp(row, want_row, (size_t)nv * sizeof(float)),
              "after the file came back: rc %d '%s' or logits differ", rc, err.msg);
        /* replaced by rename: another model's bytes at the path, the loaded file still read */
        loom_session_rewind(s, N_PROMPT, NULL, &err);
        char f16[1024];
        if (model_path("qwen35moe-tiny-F16.gguf", f16, sizeof f16) && !copy_file(f16, other) && !rename(other, copy)) {
            rc = loom_session_eval(s, &next, 1, row, LOOM_LOGITS_LAST, &err);
            CHECK(rc == LOOM_OK && !memcmp(row, want_row, (size_t)nv * sizeof(float)),
                  "after the file was replaced: rc %d '%s' or logits differ", rc, err.msg);
        }
        free(row);
        loom_session_free(s);
    }
    free(want.logits);
    loom_model_free(m);
    loom_model_free(res);
    unlink(copy);
    unlink(other);
    rmdir(dir);
}

/* A second session created mid-sequence takes slots back (read-aheads may be in flight then); the first
 * sequence goes on bitwise. */
static void check_second_session(const char *file)
{
    char path[1024];
    if (!model_path(file, path, sizeof path))
        return;
    loom_error err = {0};
    loom_model *res = loom_model_load(path, &err);
    uint64_t budget = budget_for(path, LOOM_NUMERICS_CANONICAL, 2, 30);
    loom_model *m = load(path, budget, &err);
    int nv = res ? loom_model_n_logits(res) : 0;
    struct trace want = {malloc((size_t)(N_PROMPT + N_DECODE) * (size_t)nv * sizeof(float)), {0}};
    if (!res || !m || !want.logits || run_trace(res, LOOM_NUMERICS_CANONICAL, 2, &want)) {
        CHECK(0, "second session: setup failed: %s", err.msg);
    } else {
        loom_session *a = new_session(m, LOOM_NUMERICS_CANONICAL, 2, &err), *b = NULL;
        int32_t tok[N_PROMPT];
        prompt_tokens(tok);
        int rc = a ? loom_session_eval(a, tok, N_PROMPT, NULL, LOOM_LOGITS_LAST, &err) : LOOM_E_NOMEM;
        for (int i = 0; !rc && i < N_DECODE; i++) {
            if (i == N_DECODE / 2) {
                b = new_session(m, LOOM_NUMERICS_CANONICAL, 2, &err);
                loom_expert_stats st;
                loom_model_expert_stats(m, &st);
                CHECK(b && st.n_slots_used <= st.n_slots, "the second session: %s (%d slots used, %d left)",
                      b ? "" : err.msg, st.n_slots_used, st.n_slots);
            }
            int32_t next = argmax(loom_session_last_logits(a), nv);
            rc = loom_session_eval(a, &next, 1, NULL, LOOM_LOGITS_LAST, &err);
        }
        CHECK(rc == LOOM_OK && loom_session_digest(a) == want.digest[N_DECODE],
              "the sequence after a second session took slots back: rc %d '%s' or its state differs", rc, err.msg);
        loom_session_free(b);
        loom_session_free(a);
    }
    free(want.logits);
    loom_model_free(m);
    loom_model_free(res);
}

/* Budgets refused with their numbers; saved state restorable across the two loads. */
static void check_budgets(const char *file)
{
    char path[1024];
    if (!model_path(file, path, sizeof path))
        return;
    loom_error err = {0};
    loom_model *m = load(path, (uint64_t)1 << 34, &err);
    CHECK(m != NULL, "load %s: %s", file, err.msg);
    if (!m)
        return;
    loom_expert_stats st;
    loom_model_expert_stats(m, &st);
    loom_model_free(m);
    uint64_t fixed = st.dense_bytes + LOOM_MEM_RESERVE;
    m = load(path, fixed + st.slot_bytes, &err);
    CHECK(!m && err.code == LOOM_E_RANGE && strstr(err.msg, "memory budget at load: expected at least") &&
              strstr(err.msg, "dense part"), "a budget of one slot: expected LOOM_E_RANGE with the numbers, found '%s'",
          err.msg);
    loom_model_free(m);
    m = load(path, fixed + 4 * st.slot_bytes, &err);
    CHECK(m != NULL, "a budget of 4 slots without sessions: %s", err.msg);
    loom_session_params big = {.n_ctx = 4096, .n_threads = 1};
    loom_session *s = m ? loom_session_new(m, &big, &err) : NULL;
    CHECK(!s && err.code == LOOM_E_RANGE && strstr(err.msg, "with this session"),
          "a session beyond the budget: expected LOOM_E_RANGE, found '%s'", err.msg);
    loom_session_free(s);
    loom_model_free(m);
    /* state saved from the streamed model restores into the resident one */
    m = load(path, budget_for(path, LOOM_NUMERICS_CANONICAL, 1, SLOTS), &err);
    loom_model *res = loom_model_load(path, &err);
    char dir[] = "/tmp/loom-test-stream-XXXXXX", state[1100];
    if (m && res && mkdtemp(dir)) {
        snprintf(state, sizeof state, "%s/seq.state", dir);
        loom_session *a = new_session(m, LOOM_NUMERICS_CANONICAL, 1, &err), *b = new_session(res, 0, 1, &err);
        int32_t tok[N_PROMPT];
        prompt_tokens(tok);
        int rc = a && b ? loom_session_eval(a, tok, 8, NULL, LOOM_LOGITS_LAST, &err) : LOOM_E_NOMEM;
        if (!rc)
            rc = loom_session_save(a, state, &err);
        if (!rc)
            rc = loom_session_restore(b, state, &err);
        CHECK(rc == LOOM_OK && loom_session_digest(a) == loom_session_digest(b),
              "save from the streamed model, restore into the resident one: %s", err.msg);
        loom_session_free(a);
        loom_session_free(b);
        unlink(state);
        rmdir(dir);
    }
    loom_model_free(res);
    loom_model_free(m);
}

/* A dense model under a budget: nothing to stream (no slot, no read), its whole weight set the dense part held in
 * anonymous memory; logits and state digests bitwise the resident model's in both numerics; a budget below the
 * dense part and the reserve refused at load, one without room for a session refused at loom_session_new, both
 * with the numbers and saying the model is dense. */
static void check_dense(const char *file)
{
    char path[1024];
    if (!model_path(file, path, sizeof path))
        return;
    loom_error err = {0};
    loom_model *res = loom_model_load(path, &err), *m = res ? load(path, (uint64_t)1 << 34, &err) : NULL;
    CHECK(res && m, "load %s resident and with a budget: %s", file, err.msg);
    size_t n = res ? (size_t)(N_PROMPT + N_DECODE) * (size_t)loom_model_n_logits(res) : 1;
    struct trace want = {malloc(n * sizeof(float)), {0}}, got = {calloc(n, sizeof(float)), {0}};
    enum loom_numerics nums[2] = {LOOM_NUMERICS_CANONICAL, LOOM_NUMERICS_REFERENCE_BATCH};
    for (int k = 0; k < 2 && m && want.logits && got.logits; k++)
        if (!run_trace(res, nums[k], 2, &want) && !run_trace(m, nums[k], 2, &got))
            compare(k ? "dense, reference-batch numerics" : "dense, canonical numerics", m, &got, &want);
    free(want.logits);
    free(got.logits);
    loom_expert_stats st = {0};
    CHECK(m && loom_model_expert_stats(m, &st) == LOOM_OK && st.n_slots == 0 && st.slot_bytes == 0 &&
          st.dense_bytes > 0 && st.steps == 0 && st.reads == 0, "%s with a budget: %d slots of %llu bytes, dense part "
          "%llu bytes, %llu steps, %llu reads: expected no slot, no step, no read", file, st.n_slots,
          (unsigned long long)st.slot_bytes, (unsigned long long)st.dense_bytes, (unsigned long long)st.steps,
          (unsigned long long)st.reads);
    loom_model_free(m);
    loom_model_free(res);
    uint64_t fixed = st.dense_bytes + LOOM_MEM_RESERVE;
    m = load(path, fixed - 1, &err);
    CHECK(!m && err.code == LOOM_E_RANGE && strstr(err.msg, "memory budget at load: expected at least") &&
          strstr(err.msg, "a dense model"), "a dense model's budget 1 byte short: expected LOOM_E_RANGE with the "
          "numbers, found '%s'", err.msg);
    loom_model_free(m);
    m = load(path, fixed, &err);
    loom_session *s = m ? new_session(m, LOOM_NUMERICS_CANONICAL, 1, &err) : NULL;
    CHECK(m && !s && err.code == LOOM_E_RANGE && strstr(err.msg, "with this session") &&
          strstr(err.msg, "a dense model"), "a dense model's budget of exactly its dense part and the reserve: loads, "
          "refuses a session: '%s'", err.msg);
    loom_session_free(s);
    loom_model_free(m);
}

/* One step of layer il that needs experts ids[n] (decode-sized), driven through the cache itself; prediction
 * pred[n_pred] of layer il + 1 read ahead within it. Returns the experts handed out, or -1 on an error. */
static int step(loom_model *m, uint32_t il, const int32_t *ids, int n, const int32_t *pred, int n_pred)
{
    struct loom_expert_ready r;
    loom_error err = {0};
    int rc, got = 0;
    loom_expert_cache_begin(m->experts, il, ids, n, 0);
    loom_expert_cache_prefetch(m->experts, il + 1, pred, n_pred);
    while ((rc = loom_expert_cache_next(m->experts, &r, &err)) > 0) {
        got++;
        loom_expert_cache_done(m->experts, r.expert);
    }
    loom_expert_cache_end(m->experts);
    CHECK(rc == 0, "a step of layer %u: %s", il, err.msg);
    return rc < 0 ? -1 : got;
}

/* The reads ahead, step by step on a cache of SLOTS slots: a prediction the next step does not need is stale
 * (its bytes wasted); an expert decode needed often, pushed out by a step that pins every slot, is warmed back
 * from history (P2) between steps, into the slot of one needed less than half as often, and is then a hit. */
static void check_read_ahead(const char *file)
{
    char path[1024];
    if (!model_path(file, path, sizeof path))
        return;
    loom_error err = {0};
    loom_model *m = load(path, budget_for(path, LOOM_NUMERICS_CANONICAL, 1, SLOTS), &err);
    loom_session *s = m ? new_session(m, LOOM_NUMERICS_CANONICAL, 1, &err) : NULL;
    CHECK(s != NULL, "load %s with a budget of %d slots: %s", file, SLOTS, err.msg);
    if (!s || m->hp.n_layer < 3 || m->hp.n_expert < 5) {
        CHECK(!s, "%s: expected 3 layers and 5 experts at least", file);
        loom_session_free(s);
        loom_model_free(m);
        return;
    }
    loom_expert_stats a, b;
    loom_expert_cache_set_read_ahead(m->experts, LOOM_READ_AHEAD_ALL);
    /* P1: experts 1 and 2 of layer 1 predicted by a step of layer 0; the step of layer 1 needs only 1 */
    int32_t e0 = 0, pred[2] = {1, 2}, e1 = 1;
    loom_model_expert_stats(m, &a);
    step(m, 0, &e0, 1, pred, 2);
    CHECK(step(m, 1, &e1, 1, NULL, 0) == 1, "the predicted expert handed out");
    loom_model_expert_stats(m, &b);
    CHECK(b.prefetches - a.prefetches == 2 && b.prefetch_hits - a.prefetch_hits == 1 &&
          b.prefetch_stale - a.prefetch_stale == 1 && b.prefetch_cancelled - a.prefetch_cancelled <= 1 &&
          b.bytes_wasted - a.bytes_wasted <= b.slot_bytes,
          "a stale prediction: %llu read ahead, %llu needed, %llu stale, %llu cancelled, %llu bytes wasted",
          (unsigned long long)(b.prefetches - a.prefetches), (unsigned long long)(b.prefetch_hits - a.prefetch_hits),
          (unsigned long long)(b.prefetch_stale - a.prefetch_stale),
          (unsigned long long)(b.prefetch_cancelled - a.prefetch_cancelled),
          (unsigned long long)(b.bytes_wasted - a.bytes_wasted));
    /* P2: expert 4 of layer 2 needed 4 times, pushed out by a step of layer 0 that pins every slot; the end of
     * that step warms layer 2 (two steps ahead) */
    int32_t hot = 4, all[SLOTS];
    for (int i = 0; i < 4; i++)
        step(m, 2, &hot, 1, NULL, 0);
    for (int i = 0; i < SLOTS; i++)
        all[i] = i + 1;
    loom_model_expert_stats(m, &a);
    step(m, 0, all, SLOTS, NULL, 0);
    loom_model_expert_stats(m, &b);
    CHECK(b.warms - a.warms == 1 && b.bytes_warmed > a.bytes_warmed && b.bytes_warmed - a.bytes_warmed <= b.slot_bytes,
          "the most needed expert pushed out was warmed back: %llu warms", (unsigned long long)(b.warms - a.warms));
    step(m, 2, &hot, 1, NULL, 0);
    loom_model_expert_stats(m, &a);
    CHECK(a.warm_hits - b.warm_hits == 1 && a.misses == b.misses, "the warmed expert was a hit: %llu warm hits, %llu "
          "misses", (unsigned long long)(a.warm_hits - b.warm_hits), (unsigned long long)(a.misses - b.misses));
    loom_session_free(s);
    loom_model_free(m);
}

int main(void)
{
    check_bitwise("qwen35moe-tiny-Q4_K_M.gguf");
    check_bitwise("qwen35moe-tiny-F16.gguf");
    check_bitwise("qwen35moe-tiny-fused-F32.gguf");
    check_faults("qwen35moe-tiny-Q4_K_M.gguf");
    check_budgets("qwen35moe-tiny-Q4_K_M.gguf");
    check_dense("qwen35-tiny-Q4_K_M.gguf");
    check_second_session("qwen35moe-tiny-Q4_K_M.gguf");
    check_read_ahead("qwen35moe-tiny-Q4_K_M.gguf");
    return test_finish();
}
