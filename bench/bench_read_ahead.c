/* bench_read_ahead.c — choosing the expert cache's reads ahead by measurement: the same conversation of a MoE
 * model (a prompt, greedy decoding) under a memory budget with each combination of the reads ahead (none; P1,
 * predictions: the next layer's router on this layer's input; P2, warming from history: the experts decode
 * needed most; both, the default), each on a fresh load, in rounds that alternate the order (a disk's speed drifts:
 * ABBA). Prints decode speed, hit rate, exposed I/O wait and bytes read per decoded token, and what each kind of
 * read ahead contributed.
 * usage: bench_read_ahead MODEL BUDGET_BYTES [N_DECODE [N_PROMPT [THREADS [ROUNDS]]]]   (defaults 64, 32, 2, 2) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "loom.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One conversation with reads ahead `mask`: prompt, then n_decode greedy tokens; prints one table row. */
static int measure(const char *path, uint64_t budget, enum loom_read_ahead r, const char *name, int n_prompt,
                   int n_decode, int threads)
{
    loom_model_params mp = {.mem_budget = budget, .read_ahead = r};
    loom_error err = {0};
    loom_model *m = loom_model_load_ex(path, &mp, &err);
    loom_session_params sp = {.n_ctx = n_prompt + n_decode + 1, .n_threads = threads};
    loom_session *s = m ? loom_session_new(m, &sp, &err) : NULL;
    int32_t *tok = malloc(sizeof *tok * (size_t)n_prompt);
    int rc = s && tok ? LOOM_OK : LOOM_E_NOMEM;
    for (int i = 0; tok && i < n_prompt; i++)
        tok[i] = (int32_t)((i * 7919 + 101) % 150000);
    if (s)
        rc = loom_session_eval(s, tok, n_prompt, NULL, LOOM_LOGITS_LAST, &err);
    loom_expert_stats a, b;
    if (!rc)
        loom_model_expert_stats(m, &a);
    double t0 = now_s();
    int nv = m ? loom_model_n_logits(m) : 0;
    for (int i = 0; !rc && i < n_decode; i++) {
        const float *l = loom_session_last_logits(s);
        int32_t best = 0;
        for (int v = 1; v < nv; v++)
            best = l[v] > l[best] ? v : best;
        rc = loom_session_eval(s, &best, 1, NULL, LOOM_LOGITS_LAST, &err);
    }
    double dt = now_s() - t0, mb = 1048576.0, n = n_decode;
    if (!rc) {
        loom_model_expert_stats(m, &b);
        uint64_t needed = (b.hits - a.hits) + (b.misses - a.misses), pf = b.prefetches - a.prefetches;
        uint64_t warms = b.warms - a.warms;
        printf("| %s | %.2f | %.1f%% | %.2f | %.2f | %llu, %.0f%% needed | %llu, %.0f%% needed | %.2f |\n", name,
               n / dt, needed ? 100.0 * (double)(b.hits - a.hits) / (double)needed : 0.0,
               (double)(b.wait_ns - a.wait_ns) / 1e6 / n, (double)(b.bytes_read - a.bytes_read) / mb / n,
               (unsigned long long)pf, pf ? 100.0 * (double)(b.prefetch_hits - a.prefetch_hits) / (double)pf : 0.0,
               (unsigned long long)warms, warms ? 100.0 * (double)(b.warm_hits - a.warm_hits) / (double)warms : 0.0,
               (double)(b.bytes_wasted - a.bytes_wasted) / mb / n);
    } else {
        fprintf(stderr, "bench_read_ahead: %s: %s\n", path, err.msg);
    }
    free(tok);
    loom_session_free(s);
    loom_model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_read_ahead MODEL BUDGET_BYTES [N_DECODE [N_PROMPT [THREADS]]]\n");
        return 2;
    }
    uint64_t budget = strtoull(argv[2], NULL, 10);
    int n_decode = argc > 3 ? atoi(argv[3]) : 64, n_prompt = argc > 4 ? atoi(argv[4]) : 32;
    int threads = argc > 5 ? atoi(argv[5]) : 2, rounds = argc > 6 ? atoi(argv[6]) : 2;
    printf("bench_read_ahead: %s, budget %.0f MiB, prompt %d, %d decoded, %d threads\n", argv[1],
           (double)budget / 1048576.0, n_prompt, n_decode, threads);
    printf("| reads ahead | decode tok/s | hit rate | exposed I/O wait ms/token | MiB read/token | on predictions "
           "(P1) | from history (P2) | MiB wasted/token |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    static const struct { enum loom_read_ahead r; const char *name; } ways[] = {
        {LOOM_READ_AHEAD_NONE, "none"}, {LOOM_READ_AHEAD_PREDICTED, "P1"}, {LOOM_READ_AHEAD_HISTORY, "P2"},
        {LOOM_READ_AHEAD_ALL, "P1 + P2"}};
    int n = (int)(sizeof ways / sizeof ways[0]);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++) {
            int w = r % 2 ? n - 1 - i : i;
            if (measure(argv[1], budget, ways[w].r, ways[w].name, n_prompt, n_decode, threads))
                return 1;
        }
    return 0;
}
