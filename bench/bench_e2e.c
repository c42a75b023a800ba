/* bench_e2e.c — end-to-end speed of loom against the reference engine (llama.cpp) in one process on one model:
 * prefill of a 512-token prompt, then greedy decode of 128 tokens, 2 threads, runs alternated A/B/B/A so that
 * drift of the (noisy, shared) machine hits both engines alike. Prints tokens/s per run and a median table.
 * usage: bench_e2e [MODEL.gguf]   (default $LOOM_CACHE/models/qwen35-0.8b-synth-Q4_K_M.gguf)
 * env: LOOM_BENCH_REPS (A/B/B/A repetitions, default 2), LOOM_BENCH_THREADS (default 2). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/parity/parity.h"
#include "loom.h"

enum { N_PROMPT = 512, N_DECODE = 128, N_CTX = 1024, MAX_REPS = 16 };

/* Source text of the prompt: repeated until it gives N_PROMPT tokens. */
static const char TEXT[] =
    "In the spring of that year the river rose higher than anyone in the valley could remember. The mill wheel "
    "turned day and night, the ferryman tied his boat to the old oak, and children counted the drowned fence "
    "posts from the bridge. Prices at the market went up by a third; bread was baked twice a day. Letters "
    "arrived late, if at all, and the schoolmaster wrote the date on the blackboard in large numbers: 14, 15, "
    "16 April. Nobody spoke of leaving, but everyone had packed a bag. ";

struct engine {
    const char *name;
    /* Evaluate tokens[n] at the current position; the last row's logits are then available from logits(). */
    int (*eval)(struct engine *e, const int32_t *tokens, int n);
    const float *(*logits)(struct engine *e);
    void (*reset)(struct engine *e);
    loom_session *ls;
    float *row;
    struct llama_context *rc;
    int pos;
    double prefill[MAX_REPS * 2], decode[MAX_REPS * 2];
    int n_runs;
    int32_t first_tokens[N_DECODE];
};

static int loom_eval(struct engine *e, const int32_t *tokens, int n)
{
    loom_error err = {0};
    int rc = loom_session_eval(e->ls, tokens, n, e->row, LOOM_LOGITS_LAST, &err);
    if (rc != LOOM_OK)
        fprintf(stderr, "bench_e2e: loom eval: %s\n", err.msg);
    return rc;
}
static const float *loom_logits(struct engine *e) { return e->row; }
static void loom_reset(struct engine *e) { loom_session_reset(e->ls); }

static int ref_eval(struct engine *e, const int32_t *tokens, int n)
{
    int rc = parity_ref_decode(e->rc, tokens, n, e->pos, NULL, 0);
    if (rc != 0)
        fprintf(stderr, "bench_e2e: reference llama_decode returned %d\n", rc);
    e->pos += n;
    return rc;
}
static const float *ref_logits(struct engine *e) { return llama_get_logits_ith(e->rc, -1); }
static void ref_reset(struct engine *e)
{
    parity_ref_reset(e->rc);
    e->pos = 0;
}

/* Greedy choice among the sampleable rows. */
static int32_t greedy(const float *logits, const uint8_t *ok, int n)
{
    int32_t best = -1;
    for (int i = 0; i < n; i++)
        if (ok[i] && (best < 0 || logits[i] > logits[best]))
            best = i;
    return best;
}

/* One run: prefill prompt[n_prompt], then n_decode greedy steps. Records tokens/s unless warmup. */
static int bench_run(struct engine *e, const int32_t *prompt, int n_prompt, int n_decode, const uint8_t *ok,
                     int n_rows, int record)
{
    e->reset(e);
    double t0 = parity_now();
    if (e->eval(e, prompt, n_prompt) != 0)
        return -1;
    double t1 = parity_now();
    for (int i = 0; i < n_decode; i++) {
        int32_t tok = greedy(e->logits(e), ok, n_rows);
        if (record)
            e->first_tokens[i] = tok;
        if (e->eval(e, &tok, 1) != 0)
            return -1;
    }
    double t2 = parity_now();
    if (record) {
        e->prefill[e->n_runs] = n_prompt / (t1 - t0);
        e->decode[e->n_runs] = n_decode / (t2 - t1);
        printf("  %-9s run %d: prefill %7.1f tok/s  decode %6.1f tok/s\n", e->name, e->n_runs + 1,
               e->prefill[e->n_runs], e->decode[e->n_runs]);
        fflush(stdout);
        e->n_runs++;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_REPS * 2];
    memcpy(s, v, (size_t)n * sizeof(double));
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void print_table(const struct engine *a, const struct engine *b)
{
    double pa = median(a->prefill, a->n_runs), pb = median(b->prefill, b->n_runs);
    double da = median(a->decode, a->n_runs), db = median(b->decode, b->n_runs);
    int agree = 0;
    while (agree < N_DECODE && a->first_tokens[agree] == b->first_tokens[agree])
        agree++;
    printf("\n%-12s %18s %18s   (median of %d runs each)\n", "", "prefill tok/s", "decode tok/s", a->n_runs);
    printf("%-12s %18.1f %18.1f\n", a->name, pa, da);
    printf("%-12s %18.1f %18.1f\n", b->name, pb, db);
    printf("%-12s %18.3f %18.3f\n", "loom/ref", pa / pb, da / db);
    printf("greedy decode: loom and the reference agree on the first %d of %d tokens\n", agree, N_DECODE);
}

/* Tokenize TEXT (repeated) with loom into prompt[N_PROMPT]. */
static int make_prompt(const loom_model *m, int32_t *prompt)
{
    enum { REPEAT = 8 };
    static char buf[sizeof TEXT * REPEAT];
    static int32_t ids[sizeof TEXT * REPEAT];
    size_t len = 0;
    for (int i = 0; i < REPEAT; i++, len += sizeof TEXT - 1)
        memcpy(buf + len, TEXT, sizeof TEXT - 1);
    loom_error err = {0};
    int n = loom_tokenize(m, buf, len, 0, ids, (int)(sizeof ids / sizeof ids[0]), &err);
    if (n < N_PROMPT) {
        fprintf(stderr, "bench_e2e: the prompt text gave %d tokens, need %d: %s\n", n, N_PROMPT, err.msg);
        return -1;
    }
    memcpy(prompt, ids, N_PROMPT * sizeof(int32_t));
    return 0;
}

/* The 1-minute load average (/proc/loadavg), or -1. The reference's worker threads spin at barriers, so its
 * numbers collapse when other processes compete for the cores; the load is printed to judge a run. */
static double load_average(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static int bench(const char *path, int reps, int n_threads)
{
    loom_error err = {0};
    int32_t prompt[N_PROMPT];
    loom_model *lm = loom_model_load(path, &err);
    if (!lm) {
        fprintf(stderr, "bench_e2e: %s\n", err.msg);
        return 1;
    }
    int n_rows = loom_model_n_logits(lm);
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = n_threads};
    struct engine a = {.name = "loom", .eval = loom_eval, .logits = loom_logits, .reset = loom_reset};
    struct engine b = {.name = "reference", .eval = ref_eval, .logits = ref_logits, .reset = ref_reset};
    a.ls = loom_session_new(lm, &sp, &err);
    a.row = malloc((size_t)n_rows * sizeof(float));
    uint8_t *ok = malloc((size_t)n_rows);
    struct llama_model *rm = parity_ref_load(path, 1);
    int rc = 1;
    if (!a.ls || !a.row || !ok || !rm || make_prompt(lm, prompt) != 0) {
        fprintf(stderr, "bench_e2e: setup failed: %s\n", a.ls ? (rm ? "allocation or prompt" : "reference load")
                                                              : err.msg);
        goto done;
    }
    /* The reference's defaults (flash attention auto, F16 K/V, weight repacking), with our thread count. */
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = cp.n_ubatch = N_PROMPT;
    cp.n_threads = cp.n_threads_batch = n_threads;
    b.rc = llama_init_from_model(rm, cp);
    if (!b.rc || parity_ref_n_vocab(rm) < n_rows) {
        fprintf(stderr, "bench_e2e: reference context failed or its vocabulary is smaller than %d\n", n_rows);
        goto done;
    }
    for (int i = 0; i < n_rows; i++)
        ok[i] = (uint8_t)(loom_model_token_sampleable(lm, i) != 0);
    printf("bench_e2e: %s\n  %d threads, prompt %d tokens, decode %d tokens, %d x A/B/B/A; loom kernels %s; "
           "reference llama.cpp v0.5.0 defaults (flash attention auto, F16 KV, repacking on)\n",
           path, n_threads, N_PROMPT, N_DECODE, reps, loom_kernels_name());
    /* Warm-up: pages in the weights and lets both engines size their buffers. */
    double load_before = load_average();
    if (bench_run(&a, prompt, 64, 4, ok, n_rows, 0) || bench_run(&b, prompt, 64, 4, ok, n_rows, 0))
        goto done;
    for (int r = 0; r < reps; r++) {
        struct engine *order[4] = {&a, &b, &b, &a};
        for (int k = 0; k < 4; k++)
            if (bench_run(order[k], prompt, N_PROMPT, N_DECODE, ok, n_rows, 1))
                goto done;
    }
    print_table(&a, &b);
    printf("load average: %.2f before, %.2f after (%d threads each; a load above the core count makes the "
           "reference's decode numbers unreliable)\n", load_before, load_average(), n_threads);
    rc = 0;
done:
    if (b.rc)
        llama_free(b.rc);
    if (rm)
        llama_model_free(rm);
    free(ok);
    free(a.row);
    loom_session_free(a.ls);
    loom_model_free(lm);
    return rc;
}

int main(int argc, char **argv)
{
    char cache[1024], path[1200];
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: bench_e2e [MODEL.gguf]\n");
        return 2;
    }
    if (argc == 2)
        snprintf(path, sizeof path, "%s", argv[1]);
    else
        snprintf(path, sizeof path, "%s/models/qwen35-0.8b-synth-Q4_K_M.gguf", parity_cache_dir(cache, sizeof cache));
    const char *r = getenv("LOOM_BENCH_REPS"), *t = getenv("LOOM_BENCH_THREADS");
    int reps = r ? atoi(r) : 2, n_threads = t ? atoi(t) : 2;
    if (reps < 1 || reps > MAX_REPS / 2 || n_threads < 1) {
        fprintf(stderr, "bench_e2e: LOOM_BENCH_REPS must be 1..%d and LOOM_BENCH_THREADS >= 1\n", MAX_REPS / 2);
        return 2;
    }
    parity_ref_init();
    int rc = bench(path, reps, n_threads);
    llama_backend_free();
    return rc;
}
