/* bench_attention.c — throughput of the prefill attention kernel (loom_ops_attn_heads): 16 query rows of one
 * KV head (4 causal tokens x 4 heads, head_dim 256, the 0.8B shape) against an F16 K/V cache of n_kv positions,
 * in both orders, for every kernel set this CPU runs. Prints GFLOP/s (2 x 16 x n_kv x (hd + hdv) per call) and
 * ms per call, on 1 thread (also per CPU second of the thread: "cpu GF", steadier on a busy machine) and on 2
 * threads each running its own independent call.
 * usage: bench_attention [-q] [N_KV...]   (default 512 4096 16384; -q: no scalar rows). ~0.3 s per cell. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/parity/parity.h"
#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "util/fp16.h"
#include "util/pool.h"

#define ROWS LOOM_OPS_ATTN_ROWS
#define HD 256
#define CELL_SECONDS 0.3

/* One thread's call: its inputs and scratch. */
struct call {
    int64_t n_kv[ROWS], n_ctx;
    uint16_t *q16, *k, *v, *probs16;
    float *scores, *out;
};

struct run {
    const struct loom_ops_kernels *ops;
    enum loom_attn_order order;
    struct call calls[2];
};

static uint64_t rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) % 2000001) / 1000000.0f - 1.0f;
}

static void call_init(struct call *c, int64_t n)
{
    c->n_ctx = n;
    for (int g = 0; g < ROWS; g++) /* row g: token g % 4 of head g / 4; the last token sees all n positions */
        c->n_kv[g] = n - 3 + g % 4;
    c->q16 = malloc(sizeof(uint16_t) * ROWS * HD);
    c->k = malloc(sizeof(uint16_t) * (size_t)n * HD); /* one KV head's rows, as the K cache holds them */
    c->v = malloc(sizeof(uint16_t) * (size_t)n * HD);
    c->probs16 = malloc(sizeof(uint16_t) * ROWS * (size_t)n);
    c->scores = malloc(sizeof(float) * ROWS * (size_t)n);
    c->out = malloc(sizeof(float) * ROWS * HD);
    for (int i = 0; i < ROWS * HD; i++)
        c->q16[i] = loom_f32_to_f16(frand() * 3.0f);
    for (int64_t i = 0; i < n * HD; i++)
        c->k[i] = loom_f32_to_f16(frand() * 3.0f);
    for (int64_t i = 0; i < n * HD; i++)
        c->v[i] = loom_f32_to_f16(frand());
}

static void call_free(struct call *c)
{
    free(c->q16), free(c->k), free(c->v), free(c->probs16), free(c->scores), free(c->out);
}

static void run_call(const struct run *r, const struct call *c)
{
    r->ops->attn_heads(ROWS, c->n_kv, HD, c->q16, c->k, HD, c->v, c->n_ctx, HD, 0.0625f, r->order, c->scores,
                       c->probs16, c->n_ctx, c->out, HD);
}

static void task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct run *r = ctx;
    for (int64_t i = begin; i < end; i++)
        run_call(r, &r->calls[i]);
}

/* This thread's CPU seconds (on a busy machine a truer measure of one thread's speed than the wall clock). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds per round (one call per thread), timed over ~CELL_SECONDS; *cpu: this thread's CPU seconds per round. */
static double time_rounds(struct run *r, struct loom_pool *pool, int n_threads, double *cpu)
{
    double t0 = parity_now(), c0 = cpu_now(), t;
    if (n_threads == 1)
        run_call(r, &r->calls[0]);
    else
        loom_pool_parallel_for(pool, 2, 1, task, r);
    if ((t = parity_now() - t0) > CELL_SECONDS) {
        *cpu = cpu_now() - c0;
        return t;
    }
    int reps = 0;
    t0 = parity_now(), c0 = cpu_now();
    do {
        if (n_threads == 1)
            run_call(r, &r->calls[0]);
        else
            loom_pool_parallel_for(pool, 2, 1, task, r);
        reps++;
        t = parity_now() - t0;
    } while (t < CELL_SECONDS);
    *cpu = (cpu_now() - c0) / reps;
    return t / reps;
}

int main(int argc, char **argv)
{
    int64_t sizes[16] = {512, 4096, 16384};
    const char *oe = getenv("BENCH_ATTN_ORDER"); /* batch or single: that order alone */
    int only_order = oe ? !strcmp(oe, "single") : -1;
    int n_sizes = 3, skip_scalar = argc > 1 && !strcmp(argv[1], "-q");
    if (skip_scalar)
        argc--, argv++;
    if (argc > 1)
        for (n_sizes = 0; n_sizes + 1 < argc && n_sizes < 16; n_sizes++)
            sizes[n_sizes] = atoll(argv[n_sizes + 1]);
    struct loom_pool *pool = loom_pool_new(2);
    const enum loom_kernel_mode modes[3] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    printf("attention: %d rows (4 tokens x 4 heads), head_dim %d; GFLOP/s = 2*rows*n_kv*(hd+hdv)/s per thread "
           "sum; ms per call\n", ROWS, HD);
    printf("%-7s %-6s %6s %10s %10s %9s %10s %9s\n", "kernels", "order", "n_kv", "1t cpu GF", "1t GF/s", "1t ms",
           "2t GF/s", "2t ms");
    for (int si = 0; si < n_sizes; si++) {
        int64_t n = sizes[si];
        struct run r;
        call_init(&r.calls[0], n);
        call_init(&r.calls[1], n);
        double flops = 2.0 * ROWS * (double)n * (HD + HD);
        for (int m = 0; m < 3; m++) {
            const struct loom_kernel_set *ks = loom_kernels_for(modes[m]);
            if (!ks || (skip_scalar && modes[m] == LOOM_KERNELS_SCALAR))
                continue;
            r.ops = &ks->ops;
            for (int o = 0; o < 2; o++) {
                if (only_order >= 0 && o != only_order)
                    continue;
                r.order = o ? LOOM_ATTN_ORDER_SINGLE : LOOM_ATTN_ORDER_BATCH;
                double c1, c2;
                double t1 = time_rounds(&r, pool, 1, &c1);
                double t2 = modes[m] == LOOM_KERNELS_SCALAR ? 0 : time_rounds(&r, pool, 2, &c2);
                printf("%-7s %-6s %6lld %10.2f %10.2f %9.3f", ks->name, o ? "single" : "batch", (long long)n,
                       flops / c1 * 1e-9, flops / t1 * 1e-9, t1 * 1e3);
                if (t2 > 0)
                    printf(" %10.2f %9.3f\n", 2 * flops / t2 * 1e-9, t2 * 1e3);
                else
                    printf(" %10s %9s\n", "-", "-");
                fflush(stdout);
            }
        }
        call_free(&r.calls[0]);
        call_free(&r.calls[1]);
    }
    loom_pool_free(pool);
    return 0;
}
