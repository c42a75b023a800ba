/* pool.c — the persistent worker pool behind loom_pool_parallel_for: workers sleep on a futex between
 * jobs (after a short spin), join the open job, work through their own contiguous share of the index range
 * and then steal from the back of the others' shares; the calling thread works alongside them. A worker that
 * wakes too late to help never delays the caller. One job at a time; nested calls from a task run inline. */
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/pool.h"
#include "util/error.h"

/* Spin iterations (each one pause instruction) before a waiting thread sleeps in the kernel. Short: the
 * machine is small and shared, and a decode step's matmuls come back to back within microseconds. */
#define SPIN_ITERS 4096
/* A thread takes 1 / OWN_SHARE of what is left of its own share at a time (so that a thief finds the rest),
 * and a thief half of what is left of another's. */
#define OWN_SHARE 4

/* Job state word: the job sequence number in the high 32 bits (odd while a job is open to joiners, even
 * once the caller closed it) and the number of workers inside the job in the low 32 bits. */
#define SEQ(s) ((uint32_t)((s) >> 32))
#define INSIDE(s) ((uint32_t)(s))
#define STATE(seq, inside) (((uint64_t)(seq) << 32) | (inside))

/* Thread t's share of the open job, in grain blocks: the blocks [front, back) not yet taken, packed as
 * front | back << 32. Its owner takes from the front, thieves from the back; one cache line each. */
struct share {
    _Alignas(64) _Atomic uint64_t fb;
};

struct loom_pool {
    int n_threads;
    pthread_t *threads;
    struct share *shares; /* [n_threads] */
    /* the open job; written by the caller before it opens the job, read by workers that joined it */
    loom_task_fn fn;
    void *ctx;
    int64_t n, chunk; /* items, and the grain: the shares count blocks of `chunk` items (the last may be short) */
    _Atomic uint64_t state;      /* SEQ | INSIDE, see above */
    _Atomic uint32_t wake_seq;   /* bumped when a job opens (and at shutdown); workers sleep on it */
    _Atomic uint32_t left_seq;   /* bumped when the last worker leaves a job; the caller sleeps on it */
    _Atomic int sleepers;        /* threads possibly blocked in futex_wait */
    atomic_bool stop;
};

struct worker_arg {
    struct loom_pool *pool;
    int index;
};

static _Thread_local int in_task; /* set while this thread runs a task: nested parallel_for runs inline */

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

/* The spin-wait hint (PAUSE) where there is one; elsewhere an empty step. */
#if defined(__x86_64__) || defined(__i386__)
static inline void cpu_relax(void) { __builtin_ia32_pause(); }
#else
static inline void cpu_relax(void) {}
#endif

/* Sleep until *addr != value, counted in sleepers so wakers can skip the syscall when nobody sleeps.
 * The seq_cst re-check pairs with the waker's update-then-check (wake): either the sleeper's increment
 * is visible to the waker, or the waker's update is visible to the sleeper. */
static void sleep_while_equal(struct loom_pool *pool, _Atomic uint32_t *addr, uint32_t value)
{
    atomic_fetch_add(&pool->sleepers, 1);
    while (atomic_load(addr) == value)
        futex_wait(addr, value);
    atomic_fetch_sub(&pool->sleepers, 1);
}

static void wake(struct loom_pool *pool, _Atomic uint32_t *addr)
{
    if (atomic_load(&pool->sleepers) > 0)
        futex_wake_all(addr);
}

#define FRONT(fb) ((uint32_t)(fb))
#define BACK(fb) ((uint32_t)((fb) >> 32))

/* Take blocks of the share sh: from the front (its owner) or the back (a thief), 1 / part of what is left (at
 * least one block). 1 with the blocks [*b0, *b1) taken, 0 when the share is empty. */
static int take(struct share *sh, int from_front, uint32_t part, uint32_t *b0, uint32_t *b1)
{
    uint64_t fb = atomic_load_explicit(&sh->fb, memory_order_relaxed);
    for (;;) {
        uint32_t front = FRONT(fb), back = BACK(fb);
        if (front >= back)
            return 0;
        uint32_t size = (back - front) / part;
        size = size ? size : 1;
        uint64_t next = from_front ? fb + size : fb - ((uint64_t)size << 32);
        if (atomic_compare_exchange_weak_explicit(&sh->fb, &fb, next, memory_order_relaxed, memory_order_relaxed)) {
            *b0 = from_front ? front : back - size;
            *b1 = from_front ? front + size : back;
            return 1;
        }
    }
}

static void run_blocks(struct loom_pool *pool, uint32_t b0, uint32_t b1, int thread)
{
    int64_t end = (int64_t)b1 * pool->chunk;
    pool->fn(pool->ctx, (int64_t)b0 * pool->chunk, end < pool->n ? end : pool->n, thread);
}

/* Work through the thread's own share front to back (each thread streams one contiguous stretch of the items),
 * then steal from the back of the others' until every share is empty, so that the threads finish together. */
static void run_chunks(struct loom_pool *pool, int thread)
{
    in_task = 1;
    uint32_t b0, b1;
    while (take(&pool->shares[thread], 1, OWN_SHARE, &b0, &b1))
        run_blocks(pool, b0, b1, thread);
    for (int k = 1; k < pool->n_threads; k++) {
        struct share *victim = &pool->shares[(thread + k) % pool->n_threads];
        while (take(victim, 0, 2, &b0, &b1))
            run_blocks(pool, b0, b1, thread);
    }
    in_task = 0;
}

/* Join the job with sequence number seq if it is still open; 1 when joined. */
static int try_join(struct loom_pool *pool, uint32_t seq)
{
    uint64_t s = atomic_load(&pool->state);
    while (SEQ(s) == seq)
        if (atomic_compare_exchange_weak(&pool->state, &s, s + 1))
            return 1;
    return 0;
}

static void *worker_main(void *p)
{
    struct worker_arg arg = *(struct worker_arg *)p;
    free(p);
    struct loom_pool *pool = arg.pool;
    uint32_t done_seq = 0; /* last job this worker looked at */
    for (;;) {
        uint32_t w = atomic_load(&pool->wake_seq);
        uint32_t seq = SEQ(atomic_load(&pool->state));
        if (atomic_load(&pool->stop))
            return NULL;
        if (!(seq & 1) || seq == done_seq) { /* no new open job: spin, then sleep */
            int i = 0;
            while (i < SPIN_ITERS && atomic_load_explicit(&pool->wake_seq, memory_order_acquire) == w) {
                cpu_relax();
                i++;
            }
            if (i == SPIN_ITERS)
                sleep_while_equal(pool, &pool->wake_seq, w);
            continue;
        }
        done_seq = seq;
        if (!try_join(pool, seq))
            continue; /* closed before this worker got there: the caller did the work */
        run_chunks(pool, arg.index);
        if (INSIDE(atomic_fetch_sub(&pool->state, 1)) == 1) { /* last one out */
            atomic_fetch_add(&pool->left_seq, 1);
            wake(pool, &pool->left_seq);
        }
    }
}

int loom_pool_threads(int n_threads, const char *field, int *out, loom_error *err)
{
    if (n_threads < 0 || n_threads > LOOM_MAX_THREADS)
        return loom_errorf(err, LOOM_E_ARG, "%s: expected 0 (the online CPUs) to %d threads, found %d", field,
                           LOOM_MAX_THREADS, n_threads);
    long cpus = n_threads ? n_threads : sysconf(_SC_NPROCESSORS_ONLN);
    *out = cpus < 1 ? 1 : cpus > LOOM_MAX_THREADS ? LOOM_MAX_THREADS : (int)cpus;
    return LOOM_OK;
}

struct loom_pool *loom_pool_new(int n_threads)
{
    if (n_threads < 1)
        return NULL;
    struct loom_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->n_threads = n_threads;
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    pool->shares = aligned_alloc(_Alignof(struct share), (size_t)n_threads * sizeof *pool->shares);
    if (!pool->threads || !pool->shares) {
        free(pool->threads);
        free(pool->shares);
        free(pool);
        return NULL;
    }
    /* workers inherit a mask blocking every signal: the application's own threads take Ctrl+C and the like, so
     * that a blocking call there (reading input, waiting for a child) is interrupted */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int started = 1;
    for (; started < n_threads; started++) {
        struct worker_arg *arg = malloc(sizeof *arg);
        if (arg) {
            arg->pool = pool;
            arg->index = started;
        }
        if (!arg || pthread_create(&pool->threads[started], NULL, worker_main, arg) != 0) {
            free(arg);
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < n_threads) {
        pool->n_threads = started; /* shut down only the workers that started */
        loom_pool_free(pool);
        return NULL;
    }
    return pool;
}

void loom_pool_free(struct loom_pool *pool)
{
    if (!pool)
        return;
    atomic_store(&pool->stop, 1);
    atomic_fetch_add(&pool->wake_seq, 1);
    futex_wake_all(&pool->wake_seq);
    for (int i = 1; i < pool->n_threads; i++)
        pthread_join(pool->threads[i], NULL);
    free(pool->threads);
    free(pool->shares);
    free(pool);
}

int loom_pool_n_threads(const struct loom_pool *pool) { return pool ? pool->n_threads : 1; }

/* Close the open job seq: succeeds only when no worker is inside, after which none can join. */
static void close_job(struct loom_pool *pool, uint32_t seq)
{
    for (int i = 0;; i++) {
        uint32_t left = atomic_load(&pool->left_seq);
        uint64_t open_empty = STATE(seq, 0);
        if (atomic_compare_exchange_strong(&pool->state, &open_empty, STATE(seq + 1, 0)))
            return;
        if (i < SPIN_ITERS)
            cpu_relax();
        else
            sleep_while_equal(pool, &pool->left_seq, left); /* until the last worker leaves */
    }
}

void loom_pool_parallel_for(struct loom_pool *pool, int64_t n, int64_t grain, loom_task_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (!pool || pool->n_threads == 1 || n <= grain || in_task) {
        fn(ctx, 0, n, 0);
        return;
    }
    if ((n - 1) / grain >= UINT32_MAX) /* blocks are counted in 32 bits */
        grain = (n - 1) / (UINT32_MAX - 1) + 1;
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->chunk = grain;
    uint64_t blocks = (uint64_t)((n - 1) / grain + 1), T = (uint64_t)pool->n_threads;
    for (uint64_t t = 0; t < T; t++) /* contiguous shares of the blocks */
        atomic_store_explicit(&pool->shares[t].fb, (t * blocks / T) | ((t + 1) * blocks / T) << 32,
                              memory_order_relaxed);
    uint32_t seq = SEQ(atomic_load(&pool->state)) + 1; /* odd: open */
    atomic_store(&pool->state, STATE(seq, 0));          /* publishes the job fields above */
    atomic_fetch_add(&pool->wake_seq, 1);
    wake(pool, &pool->wake_seq);
    run_chunks(pool, 0);
    close_job(pool, seq);
}
