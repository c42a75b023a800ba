/* pool.h — loom's one threading primitive: a persistent pool of worker threads with parallel_for.
 * Kernels never spawn threads; they receive work ranges from here (util/, below the kernels that call it). */
#ifndef LOOM_UTIL_POOL_H
#define LOOM_UTIL_POOL_H

#include <stdint.h>

#include "loom.h"

struct loom_pool;

/* fn processes items [begin, end); thread is the worker index in [0, n_threads). */
typedef void (*loom_task_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* *out = the thread count a caller's n_threads field asks for: 1 to LOOM_MAX_THREADS as given, 0 = the online
 * CPUs (at most LOOM_MAX_THREADS). LOOM_E_ARG naming `field` for a negative count or one past the bound. */
int loom_pool_threads(int n_threads, const char *field, int *out, loom_error *err);

/* Start n_threads - 1 workers (the caller is worker 0), with every signal blocked in them (signals go to the
 * application's threads). NULL on failure. */
struct loom_pool *loom_pool_new(int n_threads);
void loom_pool_free(struct loom_pool *pool);
int loom_pool_n_threads(const struct loom_pool *pool);

/* Run fn over [0, n) in chunks of at least `grain` items (only the range's last may be shorter) and return when
 * all are done: each thread starts on its own contiguous share of the range, front to back, then steals from
 * the back of the others' shares. pool may be NULL (runs inline on the caller). */
void loom_pool_parallel_for(struct loom_pool *pool, int64_t n, int64_t grain, loom_task_fn fn, void *ctx);

#endif
