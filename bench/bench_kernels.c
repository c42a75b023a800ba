/* bench_kernels.c — matmul throughput per weight type on a 1024 x 3584 matrix (the 0.8B ffn_down
 * shape): matrix-vector (decode) and matrix-matrix (prefill, 64 tokens) for loom's best kernels, loom's
 * scalar reference, and the reference engine's CPU backend (a ggml MUL_MAT graph, Q4_K weights repacked
 * as llama.cpp does by default), same thread count; for Q4_K also loom's CANONICAL order in the GGUF and
 * the X16 layout, and the AVX2 set's rows where a wider set is the best; for the other types model load repacks
 * to X16 (Q6_K, MXFP4 in the AVX-512 set) that layout too. Prints GB/s of weights
 * streamed, GFLOP/s and ns per 256-weight block and token.
 * usage: bench_kernels [THREADS [TYPE...]]   (default 2 threads; TYPE: any type name, e.g. IQ1_M TQ1_0 MXFP4,
 * instead of the default list). Short-running (~0.15 s per cell, ~10 s in all); each figure is the fastest call,
 * in CPU time of the calling thread with 1 thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tests/parity/parity.h"
#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "kernels/blocks.h"
#include "kernels/kernels.h"
#include "kernels/protos.h"
#include "kernels/matmul.h"
#include "util/pool.h"
#include "util/fp16.h"

#define N_OUT 1024
#define N_IN 3584
#define N_TOK_MM 64
#define CELL_SECONDS 0.15

/* Random quant bits with small positive F16 scales at the type's scale fields. */
static void fill(uint32_t type, uint8_t *w, size_t bytes)
{
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < bytes; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        w[i] = (uint8_t)s;
    }
    const struct loom_type_traits *t = loom_type_traits(type);
    uint16_t d = loom_f32_to_f16(0.01f);
    for (size_t b = 0; b < bytes / t->type_size; b++) {
        uint8_t *blk = w + b * t->type_size;
        if (type == LOOM_TYPE_F32)
            memcpy(blk, &(float){0.5f}, 4);
        else if (type == LOOM_TYPE_F16 || type == LOOM_TYPE_BF16)
            blk[1] &= 0x3f; /* finite, moderate */
        else if (type == LOOM_TYPE_Q6_K)
            memcpy(blk + 208, &d, 2);
        else if (type == LOOM_TYPE_TQ1_0 || type == LOOM_TYPE_TQ2_0)
            memcpy(blk + (type == LOOM_TYPE_TQ1_0 ? 52 : 64), &d, 2);
        else if (type == LOOM_TYPE_MXFP4)
            blk[0] = 120; /* E8M0 2^-7 */
        else if (type == LOOM_TYPE_IQ1_M)
            for (int k = 0; k < 4; k++) /* d in the top nibbles of the scale words */
                blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
        else
            memcpy(blk, &d, 2);
    }
}

struct run {
    struct loom_pool *pool;
    const struct loom_weight *w;
    const float *x;
    float *y;
    void *scratch;
    ggml_backend_t backend; /* non-NULL: time the reference graph instead */
    struct ggml_cgraph *graph[2];
    int rowwise;            /* loom_matmul_rowwise (CANONICAL) instead of loom_matmul (REFERENCE_BATCH) */
};

static void run_once(struct run *r, int mm)
{
    if (r->backend)
        ggml_backend_graph_compute(r->backend, r->graph[mm]);
    else
        (r->rowwise ? loom_matmul_rowwise : loom_matmul)(loom_kernels_active(), r->pool, r->w, r->x, mm ? N_TOK_MM : 1, r->y, r->scratch);
}

/* With one thread both engines compute on the calling thread, whose CPU time (not the wall clock) is then timed,
 * so that time spent descheduled on a busy machine does not count. */
static int thread_clock;

static double now(void)
{
    if (!thread_clock)
        return parity_now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds per call: the fastest of the calls made over ~CELL_SECONDS (or one call when that takes longer). The
 * fastest call rather than the mean, so that a machine busy with other work skews loom and the reference
 * alike less. */
static double time_run(struct run *r, int mm)
{
    double t0 = now(), t, best;
    run_once(r, mm); /* warm-up; slow (scalar) shapes are timed by it alone */
    if ((best = now() - t0) > CELL_SECONDS)
        return best;
    int reps = 0;
    double start = parity_now();
    do {
        t0 = now();
        run_once(r, mm);
        t = now() - t0;
        best = t < best ? t : best;
        reps++;
    } while (parity_now() - start < CELL_SECONDS && reps < 10000);
    return best;
}

/* One table row; the last column is the matrix-matrix time per 256-weight block and token, in ns. */
static void print_row(const char *type, const char *who, struct run *r, size_t bytes)
{
    double mv = time_run(r, 0), mm = time_run(r, 1), flops = 2.0 * N_OUT * N_IN;
    printf("%-5s %-11s %9.2f %9.2f %9.2f %9.2f %9.3f\n", type, who, bytes / mv * 1e-9, flops / mv * 1e-9,
           bytes / mm * 1e-9, flops * N_TOK_MM / mm * 1e-9, mm / (N_OUT * (N_IN / 256.0) * N_TOK_MM) * 1e9);
}

/* Q4_K in the CANONICAL order (loom_matmul_rowwise): GGUF row layout, then repacked to X16 as model load
 * does in the AVX2 and AVX-512 sets (skipped where the active set has no x16 kernels). */
static void bench_q4_k_canonical(struct run *r, const char *best)
{
    struct loom_weight w = *r->w;
    struct run rr = *r;
    rr.w = &w;
    rr.rowwise = 1;
    print_row("Q4_K", "rows canon", &rr, w.row_bytes * (size_t)w.n_out);
    size_t bytes = loom_weight_x16_bytes(loom_kernels_active(), &w);
    void *x16 = bytes ? aligned_alloc(64, bytes) : NULL;
    if (!x16)
        return;
    loom_weight_repack_x16(NULL, &w, x16);
    char who[32];
    snprintf(who, sizeof who, "%s x16", best);
    print_row("Q4_K", who, &rr, w.row_bytes * (size_t)w.n_out);
    free(x16);
}

/* A type other than Q4_K that the active set repacks to X16 at model load (Q6_K, MXFP4): that layout too. */
static void bench_x16(struct run *r, const char *best)
{
    struct loom_weight w = *r->w;
    size_t bytes = loom_weight_x16_bytes(loom_kernels_active(), &w);
    void *x16 = bytes ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    if (!x16)
        return;
    loom_weight_repack_x16(NULL, &w, x16);
    struct run rr = *r;
    rr.w = &w;
    char who[32];
    snprintf(who, sizeof who, "%s x16", best);
    print_row(loom_type_traits(w.type)->name, who, &rr, w.row_bytes * (size_t)w.n_out);
    free(x16);
}

/* The reference CPU backend's thread pool entry points (a persistent pool, as llama.cpp attaches one;
 * created only while the reference is timed, since its threads poll while idle). */
typedef struct ggml_threadpool *(*tp_new_fn)(struct ggml_threadpool_params *);
typedef void (*tp_free_fn)(struct ggml_threadpool *);
typedef void (*tp_set_fn)(ggml_backend_t, struct ggml_threadpool *);
static tp_new_fn tp_new;
static tp_free_fn tp_free;
static tp_set_fn tp_set;

/* The reference's CPU backend with n_threads, and its repack buffer type. */
static ggml_backend_t ref_backend(int n_threads, ggml_backend_buffer_type_t *repack)
{
    if (parity_ref_init() != 0)
        return NULL;
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_t be = dev ? ggml_backend_dev_init(dev, NULL) : NULL;
    if (!be)
        return NULL;
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_set_n_threads_t set_threads =
        (ggml_backend_set_n_threads_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (set_threads)
        set_threads(be, n_threads);
    tp_new = (tp_new_fn)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
    tp_free = (tp_free_fn)ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
    tp_set = (tp_set_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_cpu_set_threadpool");
    ggml_backend_dev_get_extra_bufts_t extra =
        (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
    for (ggml_backend_buffer_type_t *b = extra ? extra(dev) : NULL; b && *b; b++)
        if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0)
            *repack = *b;
    return be;
}

/* Time the reference's MUL_MAT of the same weights (mv and mm graphs). */
static void bench_ref(ggml_backend_t be, int n_threads, ggml_backend_buffer_type_t repack, uint32_t type,
                      const void *wd, size_t bytes, const float *x)
{
    struct ggml_init_params ip = {ggml_tensor_overhead() * 8 + 2 * ggml_graph_overhead(), NULL, true};
    struct ggml_context *cw = ggml_init(ip), *cx = ggml_init(ip);
    struct ggml_tensor *tw = ggml_new_tensor_2d(cw, (enum ggml_type)type, N_IN, N_OUT);
    struct ggml_tensor *x1 = ggml_new_tensor_2d(cx, GGML_TYPE_F32, N_IN, 1);
    struct ggml_tensor *xm = ggml_new_tensor_2d(cx, GGML_TYPE_F32, N_IN, N_TOK_MM);
    struct run r = {0};
    r.backend = be;
    r.graph[0] = ggml_new_graph(cx);
    r.graph[1] = ggml_new_graph(cx);
    ggml_build_forward_expand(r.graph[0], ggml_mul_mat(cx, tw, x1));
    ggml_build_forward_expand(r.graph[1], ggml_mul_mat(cx, tw, xm));
    int repacked = (type == LOOM_TYPE_Q4_K || type == LOOM_TYPE_MXFP4) && repack; /* as loom's default order */
    ggml_backend_buffer_t bw = repacked ? ggml_backend_alloc_ctx_tensors_from_buft(cw, repack)
                                        : ggml_backend_alloc_ctx_tensors(cw, be);
    ggml_backend_buffer_t bx = ggml_backend_alloc_ctx_tensors(cx, be);
    ggml_backend_tensor_set(tw, wd, 0, ggml_nbytes(tw));
    ggml_backend_tensor_set(x1, x, 0, ggml_nbytes(x1));
    ggml_backend_tensor_set(xm, x, 0, ggml_nbytes(xm));
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(n_threads);
    struct ggml_threadpool *tp = tp_new && tp_set && tp_free ? tp_new(&tpp) : NULL;
    if (tp)
        tp_set(be, tp);
    print_row(loom_type_traits(type)->name, "ref", &r, bytes);
    if (tp) {
        tp_set(be, NULL);
        tp_free(tp);
    }
    ggml_backend_buffer_free(bw);
    ggml_backend_buffer_free(bx);
    ggml_free(cw);
    ggml_free(cx);
}

int main(int argc, char **argv)
{
    int n_threads = argc > 1 ? atoi(argv[1]) : 2;
    thread_clock = n_threads == 1;
    struct loom_pool *pool = loom_pool_new(n_threads > 0 ? n_threads : 1);
    ggml_backend_buffer_type_t repack = NULL;
    ggml_backend_t be = ref_backend(loom_pool_n_threads(pool), &repack);
    uint32_t types[LOOM_TYPE_COUNT] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,
                                       LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K};
    size_t n_types = 7;
    if (argc > 2) /* the named types instead */
        for (n_types = 0; argc > 2 && n_types < LOOM_TYPE_COUNT; argc--, argv++)
            for (uint32_t t = 0; t < LOOM_TYPE_COUNT; t++)
                if (loom_type_traits(t) && loom_type_traits(t)->to_float && !strcmp(argv[2], loom_type_traits(t)->name))
                    types[n_types++] = t;
    float *x = malloc(sizeof(float) * N_IN * N_TOK_MM), *y = malloc(sizeof(float) * N_OUT * N_TOK_MM);
    for (int i = 0; i < N_IN * N_TOK_MM; i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
    loom_kernels_select(LOOM_KERNELS_AUTO, NULL);
    const char *best = loom_kernels_name();
    printf("matmul %dx%d, %d threads; mv = 1 token, mm = %d tokens; GB/s of weights, GFLOP/s\n", N_OUT, N_IN,
           loom_pool_n_threads(pool), N_TOK_MM);
    printf("%-5s %-11s %9s %9s %9s %9s %9s\n", "type", "kernels", "mv GB/s", "mv GF/s", "mm GB/s", "mm GF/s",
           "mm ns/b/t");
    for (size_t i = 0; i < n_types; i++) {
        size_t rb = loom_type_row_bytes(types[i], N_IN);
        uint8_t *wd = malloc(rb * N_OUT);
        fill(types[i], wd, rb * N_OUT);
        struct loom_weight w = {types[i], N_IN, N_OUT, rb, wd, LOOM_WEIGHT_ROWS, 0, 0};
        size_t sb = loom_matmul_scratch_bytes(types[i], N_IN, N_TOK_MM);
        struct run r = {pool, &w, x, y, malloc(sb ? sb : 1), NULL, {NULL, NULL}, 0};
        const char *name = loom_type_traits(types[i])->name;
        print_row(name, best, &r, rb * N_OUT);
        if (types[i] != LOOM_TYPE_Q4_K)
            bench_x16(&r, best);
        if (types[i] == LOOM_TYPE_Q4_K) {
            bench_q4_k_canonical(&r, best);
            /* the AVX2 set's rows too where a wider set is the best (CPUs without AVX-512) */
            if (strcmp(best, "avx2") != 0 && loom_kernels_select(LOOM_KERNELS_AVX2, NULL) == LOOM_OK) {
                print_row(name, "avx2", &r, rb * N_OUT);
                bench_q4_k_canonical(&r, "avx2");
                loom_kernels_select(LOOM_KERNELS_AUTO, NULL);
            }
        }
        loom_kernels_select(LOOM_KERNELS_SCALAR, NULL);
        print_row(name, "scalar", &r, rb * N_OUT);
        loom_kernels_select(LOOM_KERNELS_AUTO, NULL);
        if (be)
            bench_ref(be, loom_pool_n_threads(pool), repack, types[i], wd, rb * N_OUT, x);
        free(r.scratch);
        free(wd);
    }
    if (be)
        ggml_backend_free(be);
    free(x);
    free(y);
    loom_pool_free(pool);
    return 0;
}
