/* test_pool.c — the worker pool: every index of a parallel_for is visited exactly once, for ranges
 * smaller and larger than the thread count, many back-to-back jobs, grains, nesting and the NULL pool; workers
 * block signals, the caller's mask stays as it was. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "util/pool.h"
#include "test.h"

struct visit {
    _Atomic int *count;  /* visits per index */
    _Atomic int calls;   /* fn invocations */
    int64_t grain;
    _Atomic int small;   /* a chunk smaller than grain that was not the range's last */
    _Atomic int bad_thread;
    int n_threads;
    int64_t n;
};

static void visit_fn(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct visit *v = ctx;
    if (thread < 0 || thread >= v->n_threads)
        v->bad_thread = 1;
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_add(&v->count[i], 1);
    atomic_fetch_add(&v->calls, 1);
    if (end != v->n && end - begin < v->grain)
        v->small = 1;
}

/* Run one parallel_for over [0, n) and check each index was visited once. */
static int run_once(struct loom_pool *pool, int64_t n, int64_t grain)
{
    struct visit v = {0};
    v.count = calloc((size_t)(n > 0 ? n : 1), sizeof *v.count);
    v.grain = grain;
    v.n_threads = loom_pool_n_threads(pool);
    v.n = n;
    loom_pool_parallel_for(pool, n, grain, visit_fn, &v);
    int ok = !v.bad_thread && (n > 0 || v.calls == 0) && !v.small;
    for (int64_t i = 0; i < n; i++)
        ok &= v.count[i] == 1;
    free(v.count);
    return ok;
}

struct nested {
    struct loom_pool *pool;
    _Atomic int64_t total;
};

static void inner_fn(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    struct nested *n = ctx;
    atomic_fetch_add(&n->total, end - begin);
}

static void outer_fn(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    struct nested *n = ctx;
    for (int64_t i = begin; i < end; i++)
        loom_pool_parallel_for(n->pool, 10, 1, inner_fn, n);
}

/* Per invocation: whether SIGINT and SIGTERM are blocked on the running thread (workers: must be; caller: not). */
struct masks {
    _Atomic int worker_calls, worker_unblocked, caller_blocked;
};

static void mask_fn(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct masks *m = ctx;
    sigset_t cur;
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    int blocked = sigismember(&cur, SIGINT) && sigismember(&cur, SIGTERM);
    if (thread == 0) {
        atomic_fetch_add(&m->caller_blocked, blocked);
    } else {
        atomic_fetch_add(&m->worker_calls, 1);
        atomic_fetch_add(&m->worker_unblocked, !blocked);
    }
    nanosleep(&(struct timespec){0, 200000 * (end - begin)}, NULL); /* long enough for workers to join */
}

static void test_signal_masks(void)
{
    sigset_t before, after;
    pthread_sigmask(SIG_SETMASK, NULL, &before);
    struct loom_pool *pool = loom_pool_new(4);
    pthread_sigmask(SIG_SETMASK, NULL, &after);
    CHECK(pool && sigismember(&after, SIGINT) == sigismember(&before, SIGINT),
          "creating a pool changed the caller's signal mask");
    struct masks m = {0};
    loom_pool_parallel_for(pool, 64, 1, mask_fn, &m);
    CHECK(atomic_load(&m.worker_unblocked) == 0, "%d worker calls ran with SIGINT or SIGTERM deliverable",
          atomic_load(&m.worker_unblocked));
    CHECK(atomic_load(&m.caller_blocked) == 0, "the caller's signals were blocked in its tasks");
    printf("signal masks: %d worker calls, all with SIGINT and SIGTERM blocked\n", atomic_load(&m.worker_calls));
    loom_pool_free(pool);
}

int main(void)
{
    CHECK(loom_pool_new(0) == NULL, "zero threads must fail");
    CHECK(run_once(NULL, 100, 1), "NULL pool runs inline");
    CHECK(loom_pool_n_threads(NULL) == 1, "NULL pool has one thread");
    test_signal_masks();

    for (int nt = 1; nt <= 4; nt++) {
        struct loom_pool *pool = loom_pool_new(nt);
        CHECK(pool != NULL, "pool of %d", nt);
        if (!pool)
            continue;
        CHECK(loom_pool_n_threads(pool) == nt, "n_threads %d", nt);
        const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 64, 1000, 100003};
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int64_t grain = 1; grain <= 64; grain *= 8)
                CHECK(run_once(pool, sizes[s], grain), "threads %d n %lld grain %lld", nt, (long long)sizes[s],
                      (long long)grain);
        int ok = 1;
        for (int rep = 0; rep < 3000; rep++)
            ok &= run_once(pool, 1 + rep % 9, 1);
        CHECK(ok, "3000 back-to-back small jobs on %d threads", nt);

        struct nested n = {pool, 0};
        loom_pool_parallel_for(pool, 16, 1, outer_fn, &n);
        CHECK(n.total == 160, "nested parallel_for ran inline: total %lld", (long long)n.total);
        loom_pool_free(pool);
    }
    loom_pool_free(NULL);
    return test_finish();
}
