/* probe.c — loom_probe_machine (loom.h, "Machine probes"): the streaming read bandwidth and the FP32 FMA and
 * int8 dot-product peaks of the machine, measured on loom's thread pool with the widest probe kernels the CPU
 * runs (probe.h); and loom_kernels_runs, which kernel sets the CPU runs. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/probe.h"
#include "kernels/kernels.h"
#include "util/pool.h"
#include "util/error.h"

#define PROBE_READ_BYTES ((size_t)1 << 30) /* the streaming-read buffer */
#define PROBE_READ_CHUNK ((size_t)2 << 20) /* bytes per parallel_for item */
#define PROBE_READ_SECONDS 2.0             /* time given to read passes */
#define PROBE_READ_MIN_PASSES 3
#define PROBE_READ_MAX_PASSES 400
#define PROBE_ITERS 1000000                /* chain steps per parallel_for item */
#define PROBE_ROUNDS 3                     /* of each peak, the best one */

struct probe {
    const uint8_t *buf;
    uint64_t (*read)(const void *buf, size_t bytes);
    float (*fma)(int64_t iters);
    uint32_t (*dot_i8)(int64_t iters); /* NULL without AVX-512 VNNI */
    uint64_t *sink;                    /* [n_threads] digests, so that no read or chain is dead */
    loom_abort_fn abort;
    void *abort_ctx;
};

static double probe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int probe_cancelled(const struct probe *p) { return p->abort && p->abort(p->abort_ctx); }

/* Portable streaming read for CPUs without AVX2. */
static uint64_t probe_read_scalar(const void *buf, size_t bytes)
{
    const uint64_t *p = buf;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0, n = bytes / 8; i < n; i += 4) {
        a0 ^= p[i];
        a1 ^= p[i + 1];
        a2 ^= p[i + 2];
        a3 ^= p[i + 3];
    }
    return a0 ^ a1 ^ a2 ^ a3;
}

static void probe_read_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct probe *p = ctx;
    for (int64_t c = begin; c < end; c++)
        p->sink[thread] ^= p->read(p->buf + (size_t)c * PROBE_READ_CHUNK, PROBE_READ_CHUNK);
}

static void probe_fma_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct probe *p = ctx;
    for (int64_t c = begin; c < end; c++)
        p->sink[thread] += (uint64_t)p->fma(PROBE_ITERS);
}

static void probe_dot_i8_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    struct probe *p = ctx;
    for (int64_t c = begin; c < end; c++)
        p->sink[thread] += p->dot_i8(PROBE_ITERS);
}

static int probe_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Read passes over the buffer for PROBE_READ_SECONDS (at least PROBE_READ_MIN_PASSES): best and median GB/s. */
static void probe_read(struct loom_pool *pool, struct probe *p, loom_machine_probe *m)
{
    static double rates[PROBE_READ_MAX_PASSES];
    int n = 0;
    double start = probe_now();
    while (n < PROBE_READ_MAX_PASSES && (n < PROBE_READ_MIN_PASSES || probe_now() - start < PROBE_READ_SECONDS) &&
           !probe_cancelled(p)) {
        double t0 = probe_now();
        loom_pool_parallel_for(pool, (int64_t)(PROBE_READ_BYTES / PROBE_READ_CHUNK), 1, probe_read_task, p);
        rates[n++] = (double)PROBE_READ_BYTES / (probe_now() - t0) / 1e9;
    }
    if (n == 0)
        return;
    qsort(rates, (size_t)n, sizeof *rates, probe_cmp_double);
    m->read_median = n % 2 ? rates[n / 2] : 0.5 * (rates[n / 2 - 1] + rates[n / 2]);
    m->read_best = rates[n - 1];
}

/* An arithmetic peak in G operations/s: task over 16 items per thread, each doing ops_per_item operations,
 * PROBE_ROUNDS rounds, the best one. */
static double probe_peak(struct loom_pool *pool, struct probe *p, double ops_per_item,
                         void (*task)(void *, int64_t, int64_t, int))
{
    int64_t items = 16 * (int64_t)loom_pool_n_threads(pool);
    double best = 0;
    for (int round = 0; round < PROBE_ROUNDS && !probe_cancelled(p); round++) {
        double t0 = probe_now();
        loom_pool_parallel_for(pool, items, 1, task, p);
        double g = (double)items * ops_per_item / (probe_now() - t0) / 1e9;
        best = g > best ? g : best;
    }
    return best;
}

/* The probes of the kernel set loom runs (the widest the CPU runs, or the one LOOM_KERNELS chose: the peaks
 * a forced AVX2 set is measured against are AVX2's); they are built with the kernel sets' flags. Returns the
 * FMA vector width in floats, 0 without FMA probes. */
static int probe_choose(struct probe *p, loom_machine_probe *m)
{
    enum loom_kernel_mode mode = loom_kernels_active()->mode;
    p->read = probe_read_scalar;
    m->isa = "scalar";
    if (mode == LOOM_KERNELS_AVX512) {
        m->isa = "AVX-512";
        p->read = loom_probe_read_avx512, p->fma = loom_probe_fma_avx512, p->dot_i8 = loom_probe_dot_i8_avx512;
        return 16;
    }
    if (mode == LOOM_KERNELS_AVX2) {
        m->isa = "AVX2";
        p->read = loom_probe_read_avx2, p->fma = loom_probe_fma_avx2;
        return 8;
    }
    return 0;
}

int loom_probe_machine(const loom_probe_options *options, loom_machine_probe *out, loom_error *err)
{
    const loom_probe_options o = options ? *options : (loom_probe_options){0};
    int n_threads;
    if (loom_pool_threads(o.n_threads, "probe options n_threads", &n_threads, err))
        return LOOM_E_ARG;
    loom_machine_probe m = {.read_bytes = PROBE_READ_BYTES, .read_seconds = PROBE_READ_SECONDS};
    struct probe p = {.abort = o.abort, .abort_ctx = o.abort_ctx};
    int lanes = probe_choose(&p, &m);
    uint8_t *buf = aligned_alloc(64, PROBE_READ_BYTES);
    p.sink = calloc((size_t)n_threads, sizeof *p.sink);
    struct loom_pool *pool = loom_pool_new(n_threads);
    int rc = buf && p.sink && pool ? LOOM_OK
                                   : loom_errorf(err, LOOM_E_NOMEM,
                                                 "allocating the 1 GiB buffer or the thread pool failed");
    if (rc == LOOM_OK) {
        memset(buf, 0x5a, PROBE_READ_BYTES); /* page in: every pass reads resident memory */
        p.buf = buf;
        probe_read(pool, &p, &m);
        double per_item = (double)PROBE_ITERS * LOOM_PROBE_CHAINS;
        if (p.fma)
            m.fma_peak = probe_peak(pool, &p, per_item * lanes * 2, probe_fma_task);
        if (p.dot_i8)
            m.dot_i8_peak = probe_peak(pool, &p, per_item * 64 * 2, probe_dot_i8_task);
        if (probe_cancelled(&p))
            rc = loom_errorf(err, LOOM_E_CANCELLED, "machine probes: cancelled by the abort callback");
    }
    if (rc == LOOM_OK)
        *out = m;
    loom_pool_free(pool);
    free(p.sink);
    free(buf);
    return rc;
}

int loom_kernels_runs(enum loom_kernel_mode mode) { return loom_kernels_for(mode) != NULL; }
