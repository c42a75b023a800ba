/* bench.c — `loom bench`: prefill (ppN) and decode (tgN) speed of a model in tokens/s, with repetitions and
 * spread, in a table shaped like llama-bench's; --ref runs the reference engine (loaded at run time, see
 * refengine.h) on the same file in the same process, alternating A/B/B/A, and prints loom/ref ratios; --mem
 * measures the machine's streaming read bandwidth and FP32 FMA and int8 dot peaks, the rooflines the figures are
 * set against. Ctrl+C, SIGTERM or SIGHUP stops it: the table of the runs measured so far (nothing during the warm-ups),
 * status 130 / 143 / 129. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/refengine.h"
#include "loom.h"

#define BENCH_MAX_REPS 100
#define BENCH_TG_WARMUP 4                  /* decoded tokens in a warm-up run */

enum { TEST_PP = 0, TEST_TG = 1 };

/* What each run feeds: the depth's token ids (untimed), then the test's. */
struct bench_tests {
    int32_t *tok[2];    /* [n[test]] the prompt (TEST_PP) and the decoded tokens (TEST_TG) */
    int n[2];           /* 0: no such test */
    int32_t *depth_tok; /* [depth] */
    int depth;
};

struct bench_opts {
    const char *model; /* -m */
    int n_prompt;      /* -p: prompt tokens of the prefill test, 0 = no prefill test */
    int n_gen;         /* -n: tokens of the decode test, 0 = no decode test */
    int depth;         /* -d: positions filled before each test run (untimed), as llama-bench's -d */
    int n_threads;     /* -t */
    int reps;          /* -r */
    int ref;           /* --ref */
    int ref_only;      /* --ref-only: the reference alone (loom's model not loaded) */
    int ref_fa;        /* --ref-fa: the reference's flash attention, llama_flash_attn_type (-1 auto, 0 off, 1 on) */
    int mem;           /* --mem */
    enum loom_numerics numerics; /* --numerics; 0 = canonical */
    int numerics_given;          /* --numerics was given (a loom option, refused with --ref-only) */
    struct loom_cli_model_opts mo; /* --check-tensors, --mem-budget, --stats */
};

/* Work figures of the model file, from its tensor table. */
struct bench_work {
    char name[48];
    uint64_t file_bytes;      /* size of the file (of all its parts when split) */
    uint64_t size, params;    /* bytes and elements of all tensors (llama-bench's "size" and "params") */
    uint64_t decode_bytes;    /* weight bytes read per decoded token: all but the embedding table (one row of
                               * it), which is read whole when it doubles as the output head; of each routed
                               * expert tensor only the expert_used_count experts a token selects */
    uint64_t body_params;     /* weights a token passes through (all but the embedding and the head; of the
                               * routed experts, expert_used_count per layer) */
    uint64_t head_params;     /* output head: applied to the last token of a batch only */
    uint64_t kv_per_token;    /* K and V bytes of one position (all attention layers; K in --cache-type-k's type) */
    uint64_t state_bytes;     /* conv and recurrent state, read and written by every decoded token */
};

/* One engine under test: loom (ls set) or the reference (ref set). */
struct bench_engine {
    const char *name;
    loom_session *ls;
    const struct loom_ref *ref;
    struct loom_ref_context *rc;
    int n_batch;                         /* the reference context's: the depth is filled in batches of it */
    uint8_t *depth_state;                /* the reference's sequence state at the depth (after its first fill) */
    size_t depth_state_size;
    uint64_t size, params;               /* as the engine reports them */
    double rate[2][BENCH_MAX_REPS];      /* tokens/s per test and repetition */
    int n_runs[2];
};

#define BENCH_SYNOPSIS                                                                                        \
    "usage: loom bench -m FILE [-p 512] [-n 128] [-d 0] [-t N] [-r REPS] [--ref] [--mem] [--check-tensors]\n"     \
    "                  [--mem-budget SIZE [--read-ahead MODE] [--stats]] [--ref-only] [--ref-fa MODE]\n"        \
    "                  [--numerics MODE] [--cache-type-k TYPE]\n"                                                 \
    "       loom bench --mem [-t N]\n"
static const char BENCH_USAGE[] =
    BENCH_SYNOPSIS
    "  -m FILE   GGUF model\n"
    "  -p N      prompt tokens of the prefill test ppN, 0 = none (default 512)\n"
    "  -n N      tokens of the decode test tgN, 0 = none (default 128)\n"
    "  -d N      depth: N positions filled (untimed) before every run of each test, as llama-bench's -d (default 0)\n"
    "  -t N      threads (default: all online CPUs)\n"
    "  -r REPS   repetitions of each test (default 5)\n"
    "  --ref     also run the reference engine (llama.cpp v0.5.0 from $LOOM_REF, default $LOOM_CACHE/ref)\n"
    "            on the same file, alternating loom and reference runs A/B/B/A, and print loom/ref ratios;\n"
    "            LOOM_REF_CPU=NAME loads its CPU build libggml-cpu-NAME.so (e.g. haswell: AVX2) instead of\n"
    "            the best for this CPU, LOOM_KERNELS=avx2 forces loom's AVX2 set: an AVX2 machine here;\n"
    "            LOOM_REF_REPACK=0 leaves its weights in the file map (its CPU_REPACK buffer copies them)\n"
    "  --ref-only  the reference engine alone, loom's model not loaded (to measure each engine in its own\n"
    "            process, e.g. each inside the same memory cgroup: bench/stream.sh)\n"
    "  --ref-fa MODE  the reference's flash attention: auto (default, its own default and llama-bench's), on,\n"
    "            or off (the configuration loom's reference numerics reproduce bitwise)\n"
    "  --mem     measure streaming read bandwidth (1 GiB buffer) and the FP32 FMA peak (with AVX2) and int8 dot\n"
    "            peak (with AVX-512 VNNI) of loom's kernel set, with N threads\n"
    "  --numerics MODE  loom's float order: canonical (default: every token in the one-token order) or reference\n"
    "            (llama.cpp's batch orders in micro-batches of 512)\n"
    LOOM_CLI_MODEL_USAGE
    "Both tests start from an empty context (or one filled to the depth) and feed fixed pseudo-random tokens, as\n"
    "llama-bench does.\n";

/* ---- options ---------------------------------------------------------------------------------------- */

/* What bench takes: its options, then the model options. */
static const struct loom_cli_option BENCH_OPTIONS[] = {
    {"-m", LOOM_CLI_ONE}, {"-p", LOOM_CLI_VALUE}, {"-n", LOOM_CLI_VALUE}, {"-d", LOOM_CLI_VALUE},
    {"-t", LOOM_CLI_VALUE}, {"-r", LOOM_CLI_VALUE}, {"--ref", LOOM_CLI_FLAG}, {"--ref-only", LOOM_CLI_FLAG},
    {"--ref-fa", LOOM_CLI_VALUE}, {"--mem", LOOM_CLI_FLAG}, {"--numerics", LOOM_CLI_VALUE}, LOOM_CLI_MODEL_TABLE,
    {NULL, LOOM_CLI_VALUE}};

/* A decimal integer in [lo, hi] (loom_cli_parse_int). */
static int bench_parse_int(const char *opt, const char *s, long lo, long hi, int *out)
{
    long long v;
    if (loom_cli_parse_int(s, lo, hi, &v)) {
        fprintf(stderr, "loom bench: %s expects an integer in [%ld, %ld], found '%s'\n", opt, lo, hi, s);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* --ref-fa's value: auto, on or off, as llama_flash_attn_type (-1, 1, 0). */
static int bench_parse_fa(const char *s, int *out)
{
    static const char *const names[] = {"off", "on", "auto"};
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(s, names[i])) {
            *out = i == 2 ? -1 : i;
            return 0;
        }
    fprintf(stderr, "loom bench: --ref-fa expects auto, on or off, found '%s'\n", s);
    return -1;
}

/* Apply one of bench's own options (val NULL for a flag): 0, -1 with the message printed, or LOOM_CLI_UNHANDLED. */
static int bench_set(void *opts, const char *a, const char *v)
{
    struct bench_opts *o = opts;
    int *flag = !strcmp(a, "--ref-only") ? &o->ref_only : !strcmp(a, "--ref") ? &o->ref
              : !strcmp(a, "--mem") ? &o->mem : NULL;
    if (flag) {
        *flag = 1;
        return 0;
    }
    static const struct {
        const char *name;
        size_t off;
        long lo, hi;
    } ints[] = {{"-p", offsetof(struct bench_opts, n_prompt), 0, 1 << 16},
                {"-n", offsetof(struct bench_opts, n_gen), 0, 1 << 16},
                {"-d", offsetof(struct bench_opts, depth), 0, 1 << 20},
                {"-t", offsetof(struct bench_opts, n_threads), 1, LOOM_CLI_THREADS_MAX},
                {"-r", offsetof(struct bench_opts, reps), 1, BENCH_MAX_REPS}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (!strcmp(a, ints[i].name))
            return bench_parse_int(a, v, ints[i].lo, ints[i].hi, (int *)((char *)o + ints[i].off));
    if (!strcmp(a, "-m")) {
        o->model = v;
        return 0;
    }
    if (!strcmp(a, "--ref-fa"))
        return bench_parse_fa(v, &o->ref_fa);
    if (strcmp(a, "--numerics"))
        return LOOM_CLI_UNHANDLED;
    o->numerics_given = 1;
    return loom_cli_numerics("bench", v, &o->numerics);
}

static int bench_parse_opts(int argc, char **argv, struct bench_opts *o)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (struct bench_opts){.n_prompt = 512, .n_gen = 128, .n_threads = cpus > 0 ? (int)cpus : 1, .reps = 5,
                               .ref_fa = -1};
    int rc = loom_cli_parse_options("bench", argc, argv, BENCH_OPTIONS, &o->mo, bench_set, o);
    if (rc)
        return rc;
    if (!o->model && !o->mem) {
        fprintf(stderr, "loom bench: give a model with -m FILE, or --mem\n");
        return -1;
    }
    if (o->model && o->n_prompt == 0 && o->n_gen == 0) {
        fprintf(stderr, "loom bench: -p and -n are both 0: nothing to measure\n");
        return -1;
    }
    if (o->ref_fa != -1 && !o->ref && !o->ref_only) {
        fprintf(stderr, "loom bench: --ref-fa sets the reference engine's flash attention: give --ref or --ref-only\n");
        return -1;
    }
    if (o->ref_only && (o->mo.params.mem_budget || o->mo.params.read_ahead || o->mo.stats ||
                        o->mo.params.check_tensors || o->numerics_given)) {
        fprintf(stderr, "loom bench: --ref-only runs the reference alone: loom's options (--mem-budget, "
                "--read-ahead, --stats, --check-tensors, --numerics) do not apply\n");
        return -1;
    }
    return 0;
}

/* ---- small statistics ------------------------------------------------------------------------------- */

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[n] (n >= 1); sorts v. */
static double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double bench_mean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s / n;
}

/* Sample standard deviation (n - 1 in the denominator; 0 for one value). */
static double bench_stddev(const double *v, int n)
{
    if (n < 2)
        return 0;
    double m = bench_mean(v, n), s = 0;
    for (int i = 0; i < n; i++)
        s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (n - 1));
}

/* The 1-minute load average from /proc/loadavg, or -1. */
static double bench_load_average(void)
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

/* ---- --mem: the machine's rooflines ----------------------------------------------------------------- */

/* Measure the machine (loom_probe_machine) and print its line. A signal stops it (nothing is then printed). */
static int bench_mem(int n_threads, loom_machine_probe *m)
{
    loom_error err = {0};
    int rc = loom_probe_machine(&(loom_probe_options){.n_threads = n_threads, .abort = loom_cli_abort}, m, &err);
    if (rc == LOOM_E_CANCELLED)
        return -1;
    if (rc != LOOM_OK) {
        fprintf(stderr, "loom bench --mem: %s\n", err.msg);
        return -1;
    }
    printf("machine: %d thread%s, %s: streaming read %.1f GB/s best, %.1f median (1 GiB buffer, %.0f s of passes)",
           n_threads, n_threads == 1 ? "" : "s", m->isa, m->read_best, m->read_median, m->read_seconds);
    if (m->fma_peak > 0)
        printf("; FP32 FMA peak %.0f GFLOP/s", m->fma_peak);
    if (m->dot_i8_peak > 0)
        printf("; int8 dot (VNNI) peak %.0f GOP/s", m->dot_i8_peak);
    printf("\n");
    return 0;
}

/* ---- the model benchmark ------------------------------------------------------------------------------ */

/* Fill *w from the model's tensor table and the file; K rows of a cache of k_type. */
static void bench_work_measure(const loom_gguf *g, const char *path, enum loom_kv_type k_type, struct bench_work *w)
{
    uint64_t embd_bytes = 0, embd_params = 0, out_params = 0;
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    loom_gguf_tensor_info t;
    int tied = 1; /* no output.weight: the head is token_embd */
    memset(w, 0, sizeof *w);
    size_t len = strlen(base); /* copied, not snprintf'd: GCC's UBSan build warned of a NULL %s argument */
    memcpy(w->name, base, len < sizeof w->name ? len : sizeof w->name - 1);
    loom_gguf_part_info part;
    for (uint32_t i = 0; loom_gguf_part_at(g, i, &part, NULL) == LOOM_OK; i++)
        w->file_bytes += part.file_bytes;
    loom_model_desc d = {0};
    loom_error err = {0};
    double used = 1; /* the share of a routed expert tensor ("*_exps") one token uses */
    if (loom_model_describe(g, &d, &err) == LOOM_OK) {
        used = d.n_expert ? (double)d.n_expert_used / d.n_expert : 1;
        w->kv_per_token = d.kv_bytes_per_token - d.k_bytes_per_token[LOOM_KV_F16] + d.k_bytes_per_token[k_type];
        w->state_bytes = d.recurrent_state_bytes;
    }
    loom_model_desc_free(&d);
    uint64_t active_bytes = 0, active_params = 0;
    for (uint64_t i = 0; loom_gguf_tensor_at(g, i, &t, NULL) == LOOM_OK; i++) {
        double share = strstr(t.name, "_exps.") ? used : 1;
        w->size += t.n_bytes;
        w->params += t.n_elements;
        active_bytes += (uint64_t)((double)t.n_bytes * share);
        active_params += (uint64_t)((double)t.n_elements * share);
        if (!strcmp(t.name, "token_embd.weight"))
            embd_bytes = t.n_bytes, embd_params = t.n_elements;
        else if (!strcmp(t.name, "output.weight"))
            out_params = t.n_elements, tied = 0;
    }
    w->decode_bytes = active_bytes - (tied ? 0 : embd_bytes);
    w->head_params = tied ? embd_params : out_params;
    w->body_params = active_params - embd_params - (tied ? 0 : out_params);
}

/* Fixed pseudo-random sampleable token ids (splitmix64 from seed) into ids[n]. */
static void bench_tokens(const loom_tokenizer *tok_set, uint64_t seed, int32_t *ids, int n)
{
    uint32_t n_rows = loom_tokenizer_n_vocab(tok_set);
    const uint8_t *sampleable = loom_tokenizer_sampleable(tok_set);
    for (int i = 0; i < n; i++) {
        int32_t tok = 0;
        for (int tries = 0; tries < 1000; tries++) {
            uint64_t z = (seed += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            tok = (int32_t)((z ^ (z >> 31)) % (uint64_t)n_rows);
            if (sampleable[tok])
                break;
        }
        ids[i] = tok;
    }
}

static int bench_engine_eval(struct bench_engine *e, int32_t *tokens, int n, loom_error *err)
{
    if (e->ref)
        return loom_ref_eval(e->ref, e->rc, tokens, n, err);
    return loom_session_eval(e->ls, tokens, n, NULL, LOOM_LOGITS_LAST, err); /* the session keeps the logits */
}

/* loom's session at depth, once: the first depth - 1 positions evaluated and checkpointed, so that every run
 * comes back to the depth by restoring that checkpoint and evaluating one token (loom_session_prefill_cached). */
static int bench_loom_depth_setup(struct bench_engine *e, const struct bench_tests *t, loom_error *err)
{
    loom_session_reset(e->ls);
    if (t->depth < 2)
        return LOOM_OK;
    int rc = loom_session_eval(e->ls, t->depth_tok, t->depth - 1, NULL, LOOM_LOGITS_LAST, err);
    return rc == LOOM_OK ? loom_session_checkpoint(e->ls, err) : rc;
}

/* The context a run starts from: empty, or filled to the depth (the reference evaluates the depth's tokens in
 * batches of at most n_batch once and comes back to it by restoring its sequence state, as llama-bench does;
 * loom comes back to it from its checkpoint). */
static int bench_engine_fill(struct bench_engine *e, const struct bench_tests *t, loom_error *err)
{
    if (!e->ref && t->depth > 0) {
        int rc = loom_session_prefill_cached(e->ls, t->depth_tok, t->depth, NULL, err);
        return rc < 0 ? rc : LOOM_OK;
    }
    if (!e->ref) {
        loom_session_reset(e->ls);
        return LOOM_OK;
    }
    if (e->depth_state)
        return loom_ref_state_restore(e->ref, e->rc, e->depth_state, e->depth_state_size, err);
    loom_ref_reset(e->ref, e->rc);
    int rc = LOOM_OK;
    for (int i = 0; rc == LOOM_OK && i < t->depth && !loom_cli_signal(); i += e->n_batch) {
        int k = t->depth - i < e->n_batch ? t->depth - i : e->n_batch;
        rc = loom_ref_eval(e->ref, e->rc, t->depth_tok + i, k, err);
    }
    if (rc == LOOM_OK && t->depth > 0 && !loom_cli_signal())
        rc = loom_ref_state_save(e->ref, e->rc, &e->depth_state, &e->depth_state_size, err);
    return rc;
}

/* One run of a test from the context bench_engine_fill makes: prefill the test's n tokens as one batch
 * (TEST_PP) or decode them one by one (TEST_TG). Stores tokens/s in *rate. LOOM_E_CANCELLED when a signal
 * came during the run. */
static int bench_engine_run(struct bench_engine *e, int test, const struct bench_tests *t, int n, double *rate,
                            loom_error *err)
{
    int rc = bench_engine_fill(e, t, err);
    if (rc == LOOM_OK && loom_cli_signal()) /* the reference's refill stops between batches: no test after it */
        return loom_errorf(err, LOOM_E_CANCELLED, "stopped by %s", loom_cli_signal_name());
    double t0 = loom_cli_now();
    if (rc == LOOM_OK && test == TEST_PP)
        rc = bench_engine_eval(e, t->tok[test], n, err);
    for (int i = 0; test == TEST_TG && rc == LOOM_OK && i < n && !loom_cli_signal(); i++)
        rc = bench_engine_eval(e, t->tok[test] + i, 1, err);
    *rate = n / (loom_cli_now() - t0);
    if (rc == LOOM_OK && loom_cli_signal()) /* also after the reference's prefill, which does not poll */
        rc = loom_errorf(err, LOOM_E_CANCELLED, "stopped by %s", loom_cli_signal_name());
    return rc;
}

/* Untimed runs of each test (pages in the weights, sizes the engine's buffers); loom's depth set up first. */
static int bench_engine_warmup(struct bench_engine *e, const struct bench_tests *t, loom_error *err)
{
    double rate;
    int n_tg = t->n[TEST_TG] < BENCH_TG_WARMUP ? t->n[TEST_TG] : BENCH_TG_WARMUP;
    if (!e->ref && bench_loom_depth_setup(e, t, err) != LOOM_OK)
        return -1;
    if (t->n[TEST_PP] > 0 && bench_engine_run(e, TEST_PP, t, t->n[TEST_PP], &rate, err) != LOOM_OK)
        return -1;
    if (n_tg > 0 && bench_engine_run(e, TEST_TG, t, n_tg, &rate, err) != LOOM_OK)
        return -1;
    return 0;
}

/* The repetitions: for each test, reps rounds; with two engines round r runs A then B when r is even, B then A
 * when odd (A/B/B/A), so that drift of a shared machine hits both alike. */
static int bench_measure(struct bench_engine *eng, int n_eng, const struct bench_tests *t, int reps, loom_error *err)
{
    for (int test = TEST_PP; test <= TEST_TG; test++) {
        for (int r = 0; t->n[test] > 0 && r < reps; r++) {
            for (int k = 0; k < n_eng; k++) {
                struct bench_engine *e = &eng[n_eng == 2 && r % 2 ? 1 - k : k];
                if (bench_engine_run(e, test, t, t->n[test], &e->rate[test][e->n_runs[test]], err))
                    return -1;
                e->n_runs[test]++;
            }
        }
    }
    return 0;
}

/* A test's name as llama-bench writes it: "pp512", "tg128", "pp512 @ d4096". */
static void bench_test_name(char *buf, size_t cap, int test, const struct bench_tests *t)
{
    int k = snprintf(buf, cap, "%s%d", test == TEST_PP ? "pp" : "tg", t->n[test]);
    if (t->depth > 0 && k > 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, " @ d%d", t->depth);
}

/* "494.00 MiB" / "1.23 GiB" and "752.39 M" / "1.50 B", as llama-bench writes them. */
static void bench_fmt_size(char *buf, size_t cap, uint64_t bytes)
{
    double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, cap, "%.2f MiB", b / (1024.0 * 1024));
}

static void bench_fmt_params(char *buf, size_t cap, uint64_t n)
{
    if (n >= 1000000000ull)
        snprintf(buf, cap, "%.2f B", (double)n / 1e9);
    else
        snprintf(buf, cap, "%.2f M", (double)n / 1e6);
}

static void bench_print_table(const struct bench_work *w, const struct bench_engine *eng, int n_eng,
                              const struct bench_tests *t, int n_threads)
{
    int tw = 7; /* the test column: as wide as its longest name ("pp512 @ d16384") */
    for (int test = TEST_PP; test <= TEST_TG; test++) {
        char name[32];
        bench_test_name(name, sizeof name, test, t);
        tw = (int)strlen(name) > tw ? (int)strlen(name) : tw;
    }
    printf("| %-30s | %10s | %10s | %-9s | %7s | %*s | %20s |\n", "model", "size", "params", "engine", "threads", tw,
           "test", "t/s");
    printf("| %.30s | ---------: | ---------: | --------- | ------: | %.*s: | -------------------: |\n",
           "------------------------------------------", tw - 1, "-------------------------------");
    for (int test = TEST_PP; test <= TEST_TG; test++) {
        for (int k = 0; t->n[test] > 0 && k < n_eng; k++) {
            const struct bench_engine *e = &eng[k];
            char size[32], params[32], name[32], ts[48];
            if (e->n_runs[test] == 0)
                continue; /* stopped before its first run */
            bench_fmt_size(size, sizeof size, e->size);
            bench_fmt_params(params, sizeof params, e->params);
            bench_test_name(name, sizeof name, test, t);
            snprintf(ts, sizeof ts, "%.2f ± %.2f", bench_mean(e->rate[test], e->n_runs[test]),
                     bench_stddev(e->rate[test], e->n_runs[test]));
            /* "±" is two bytes in UTF-8: widen the field by one so the column lines up. */
            printf("| %-30.30s | %10s | %10s | %-9s | %7d | %*s | %21s |\n", w->name, size, params, e->name,
                   n_threads, tw, name, ts);
        }
    }
}

/* loom/ref per repetition pair; prints the median and range. */
static void bench_print_ratios(const struct bench_engine *eng, const struct bench_tests *t)
{
    int pairs = eng[0].n_runs[t->n[TEST_PP] > 0 ? TEST_PP : TEST_TG];
    printf("loom/ref, median of %d A/B pair%s (min - max):", pairs, pairs == 1 ? "" : "s");
    for (int test = TEST_PP; test <= TEST_TG; test++) {
        double q[BENCH_MAX_REPS];
        int m = eng[0].n_runs[test];
        for (int i = 0; i < m; i++)
            q[i] = eng[0].rate[test][i] / eng[1].rate[test][i];
        if (m > 0) {
            char name[32];
            double med = bench_median(q, m);
            bench_test_name(name, sizeof name, test, t);
            printf("  %s %.3f (%.3f - %.3f)", name, med, q[0], q[m - 1]);
        }
    }
    printf("\n");
}

/* Decode bandwidth and prefill GFLOP/s of each engine, against the machine's rooflines when measured. */
static void bench_print_work(const struct bench_work *w, const struct bench_engine *eng, int n_eng,
                             const struct bench_tests *t, const loom_machine_probe *m)
{
    const int *n = t->n;
    char name[32];
    if (n[TEST_TG] > 0) {
        /* a decoded token reads the weights, reads and writes the recurrent state, and reads the K/V rows of
         * every position so far: depth + (n + 1) / 2 of them on average over the run */
        double kv = (double)w->kv_per_token * (t->depth + (n[TEST_TG] + 1) / 2.0);
        double bytes = (double)w->decode_bytes + 2.0 * (double)w->state_bytes + kv;
        bench_test_name(name, sizeof name, TEST_TG, t);
        printf("decode  %s: %.1f MB of weights + %.1f MB of recurrent state (read and written) + %.1f MB of K/V rows "
               "= %.1f MB read or written per token;", name, (double)w->decode_bytes / 1e6,
               2.0 * (double)w->state_bytes / 1e6, kv / 1e6, bytes / 1e6);
        for (int k = 0; k < n_eng; k++) {
            double ts = bench_mean(eng[k].rate[TEST_TG], eng[k].n_runs[TEST_TG]);
            double gbs = ts * bytes / 1e9;
            printf(" %s %.1f GB/s", eng[k].name, gbs);
            if (m->read_best > 0) /* the median pass too: this VM's passes spread by 10% and more */
                printf(" (%.0f%% of streaming read, %.0f%% of its median)", 100 * gbs / m->read_best,
                       100 * gbs / m->read_median);
            printf(k + 1 < n_eng ? "," : "");
        }
        if (m->read_best > 0)
            printf("; roofline %.1f tok/s", m->read_best * 1e9 / bytes);
        printf("\n");
    }
    if (n[TEST_PP] > 0) {
        double flop = 2.0 * ((double)w->body_params * n[TEST_PP] + (double)w->head_params);
        bench_test_name(name, sizeof name, TEST_PP, t);
        printf("prefill %s: 2 x %.1f M params x tokens (the layers' matrices: the table's count adds the token "
               "embedding, looked up, not multiplied; + the head on the last token) = %.1f GFLOP per run%s;", name,
               (double)w->body_params / 1e6, flop / 1e9, t->depth > 0 ? " (attention over the depth not counted)" : "");
        for (int k = 0; k < n_eng; k++) {
            double gf = bench_mean(eng[k].rate[TEST_PP], eng[k].n_runs[TEST_PP]) / n[TEST_PP] * flop / 1e9;
            printf(" %s %.1f GFLOP/s", eng[k].name, gf);
            if (m->fma_peak > 0)
                printf(" (%.0f%% of FP32 FMA peak", 100 * gf / m->fma_peak);
            if (m->dot_i8_peak > 0)
                printf("%s%.0f%% of int8 dot peak", m->fma_peak > 0 ? ", " : " (", 100 * gf / m->dot_i8_peak);
            printf(m->fma_peak > 0 || m->dot_i8_peak > 0 ? ")" : "");
            printf(k + 1 < n_eng ? "," : "");
        }
        /* the note on the int8 dot peak where that peak is printed (a CPU without VNNI measures none) */
        printf(m->dot_i8_peak > 0 ? "\n  (the K-quant kernels multiply int8 activations by the weights' integer "
                                    "quants: the int8 dot peak is their roofline)\n"
                                  : "\n");
    }
}

/* What the bound allows beyond file + state: 10% of them, and at least the process's fixed costs, which 10% of a
 * small file cannot cover (the tokenizer's tables, the libraries: 33-39 MiB over file + state measured on the tiny
 * and 0.8b files). */
#define RSS_FIXED_MIB 64.0

/* Peak RSS of loom alone (the whole run; with the reference, up to the end of loom's warm-up, which runs every
 * test once, before the reference loads) against file + state + the larger of 10% and RSS_FIXED_MIB; the
 * session's arena (state and scratch, allocated once) and the process's size before loading say where any excess
 * comes from. */
static void bench_print_memory(const struct bench_work *w, const loom_session *ls, double rss_start,
                               double rss_loom, int ref, uint64_t budget)
{
    double mib = 1024.0 * 1024;
    if (budget) { /* --mem-budget: the budget is the bound (RSS; the page cache it causes is dropped) */
        printf("peak RSS: loom %.1f MiB %s (session arena: state and scratch, %.1f); bound: --mem-budget %.1f MiB: "
               "%s\n", rss_loom / mib, ref ? "after its warm-up" : "over the run",
               (double)loom_session_arena_bytes(ls) / mib, (double)budget / mib, rss_loom <= (double)budget ? "within" : "OVER");
        return;
    }
    /* -d keeps a checkpoint of the recurrent state at the depth (bench_loom_depth_setup): part of the state */
    double checkpoints = (double)loom_session_n_checkpoints(ls) * (double)w->state_bytes;
    double state = (double)loom_session_state_bytes(ls) + checkpoints, held = (double)w->file_bytes + state;
    int fixed = 0.1 * held < RSS_FIXED_MIB * mib;
    double bound = held + (fixed ? RSS_FIXED_MIB * mib : 0.1 * held);
    char extra[96] = "10%";
    if (fixed)
        snprintf(extra, sizeof extra, "%.0f MiB (the process's fixed costs: tokenizer, libraries; more than 10%% here)",
                 RSS_FIXED_MIB);
    printf("peak RSS: loom %.1f MiB %s (%.1f before loading; session arena: state and scratch, %.1f); bound "
           "file %.1f + state %.1f MiB%s + %s = %.1f MiB: %s",
           rss_loom / mib, ref ? "after its warm-up" : "over the run", rss_start / mib,
           (double)loom_session_arena_bytes(ls) / mib, (double)w->file_bytes / mib, state / mib,
           checkpoints > 0 ? " (a checkpoint included)" : "", extra, bound / mib, rss_loom <= bound ? "within" : "OVER");
    if (ref)
        printf("; whole process %.1f MiB at the end (both engines)", loom_cli_peak_rss() / mib);
    printf("\n");
}

/* The load average around the run, and a warning when it exceeds the thread count: the reference's threads
 * (ref: it ran, --ref or --ref-only) spin at barriers and suffer most, said only when it ran. */
static void bench_print_load(double before, double after, int n_threads, int ref)
{
    printf("load average: %.2f before, %.2f after (%d thread%s)\n", before, after, n_threads, n_threads == 1 ? "" : "s");
    if (before > n_threads || after > n_threads)
        printf("warning: the load average exceeds the thread count: the machine is shared and these figures are "
               "noisy%s\n", ref ? " (the reference's threads spin at barriers and suffer most)" : "");
}

/* Set up the reference engine on the same file: eng->ref, rc, size, params. */
static int bench_ref_setup(struct loom_ref *ref, struct loom_ref_model **rm, struct bench_engine *e,
                           const struct bench_opts *o, loom_error *err)
{
    if (loom_ref_open(ref, err) != LOOM_OK || !(*rm = loom_ref_model_load(ref, o->model, err)))
        return -1;
    /* the prompt in one batch, as loom's; the depth in batches of that size or of 512 (its ubatch) */
    int fill = o->depth < 512 ? o->depth : 512;
    e->n_batch = o->n_prompt > fill ? o->n_prompt : fill > 0 ? fill : 1;
    e->rc = loom_ref_context_new(ref, *rm, o->depth + o->n_prompt + o->n_gen, e->n_batch, o->n_threads, o->ref_fa,
                                 o->mo.k_type, err);
    if (!e->rc)
        return -1;
    e->name = "reference";
    e->ref = ref;
    e->size = ref->model_size(*rm);
    e->params = ref->model_n_params(*rm);
    return 0;
}

/* The engines measured: loom, loom and the reference (--ref), or the reference alone (--ref-only). */
static struct bench_engine *bench_engines(const struct bench_opts *o, struct bench_engine eng[2], int *n)
{
    *n = o->ref && !o->ref_only ? 2 : 1;
    return o->ref_only ? &eng[1] : eng;
}

/* loom's settings for the report's first line (nothing with --ref-only): kernel set, float-order profile (the
 * haswell profile's kernels are slower), numerics, K cache. */
static void bench_print_loom(const struct bench_opts *o)
{
    char orders[64];
    if (!o->ref_only)
        printf(", loom kernels %s, %s, numerics %s, %s K cache", loom_kernels_name(),
               loom_cli_orders_text(orders, sizeof orders),
               o->numerics == LOOM_NUMERICS_REFERENCE_BATCH ? "reference" : "canonical",
               o->mo.k_type == LOOM_KV_Q8_0 ? "Q8_0" : "F16");
}

/* After a signal stopped the measurement: the table of the runs completed, if any. */
static void bench_print_stopped(const struct bench_opts *o, const struct bench_work *w, struct bench_engine *eng,
                                const struct bench_tests *t)
{
    int runs = eng[0].n_runs[TEST_PP] + eng[0].n_runs[TEST_TG] + eng[1].n_runs[TEST_PP] + eng[1].n_runs[TEST_TG];
    if (runs == 0)
        return;
    printf("loom bench: %s, %d thread%s", o->model, o->n_threads, o->n_threads == 1 ? "" : "s");
    bench_print_loom(o);
    printf("; stopped by %s after %d run%s (rows show the repetitions completed)\n\n", loom_cli_signal_name(), runs,
           runs == 1 ? "" : "s");
    int n;
    const struct bench_engine *run = bench_engines(o, eng, &n);
    bench_print_table(w, run, n, t, o->n_threads);
}

/* The reference's settings and CPU build, for the report's first line. */
static void bench_print_ref(const struct loom_ref *ref, int fa, enum loom_kv_type k_type)
{
    char build[96];
    printf("reference llama.cpp v0.5.0 at its defaults but for --ref-fa and -ctk (flash attention %s, %s K, F16 V, "
           "repacking %s), CPU build %s", fa < 0 ? "auto" : fa ? "on" : "off", k_type == LOOM_KV_Q8_0 ? "Q8_0" : "F16",
           ref->repack ? "on" : "off: LOOM_REF_REPACK=0", loom_ref_cpu_build(ref, build, sizeof build));
}

/* Everything after loom's session exists (or, --ref-only, the file's tensor table and tokenizer are open):
 * warm-ups, the reference, the measurement and the report. */
static int bench_run_engines(const struct bench_opts *o, const loom_machine_probe *m, const loom_gguf *g,
                             const loom_tokenizer *tok, double rss_start, struct bench_engine eng[2],
                             struct loom_ref *ref, struct loom_ref_model **rm, loom_error *err)
{
    struct bench_work w;
    bench_work_measure(g, o->model, o->mo.k_type, &w);
    eng[0].size = w.size, eng[0].params = w.params;
    struct bench_tests t = {.n = {o->n_prompt, o->n_gen}, .depth = o->depth};
    for (int k = 0; k < 2; k++)
        t.tok[k] = malloc(sizeof(int32_t) * (size_t)(t.n[k] + 1));
    t.depth_tok = malloc(sizeof(int32_t) * (size_t)(t.depth + 1));
    int rc = -1, n_run;
    struct bench_engine *run = bench_engines(o, eng, &n_run);
    if (!t.tok[0] || !t.tok[1] || !t.depth_tok) {
        loom_errorf(err, LOOM_E_NOMEM, "allocating the benchmark's token ids failed");
        goto done;
    }
    bench_tokens(tok, 1, t.tok[TEST_PP], t.n[TEST_PP]);
    bench_tokens(tok, 2, t.tok[TEST_TG], t.n[TEST_TG]);
    bench_tokens(tok, 3, t.depth_tok, t.depth);
    if (!o->ref_only && bench_engine_warmup(&eng[0], &t, err))
        goto done;
    double rss_loom = loom_cli_peak_rss();
    if ((o->ref || o->ref_only) &&
        (bench_ref_setup(ref, rm, &eng[1], o, err) || bench_engine_warmup(&eng[1], &t, err)))
        goto done;
    double load0 = bench_load_average();
    if (bench_measure(run, n_run, &t, o->reps, err)) {
        if (err->code == LOOM_E_CANCELLED)
            bench_print_stopped(o, &w, eng, &t);
        goto done;
    }
    if (!o->ref)
        rss_loom = loom_cli_peak_rss();
    double load1 = bench_load_average();
    printf("loom bench: %s, %d thread%s, %d repetition%s", o->model, o->n_threads, o->n_threads == 1 ? "" : "s",
           o->reps, o->reps == 1 ? "" : "s");
    bench_print_loom(o);
    if (o->ref || o->ref_only) {
        printf("; ");
        bench_print_ref(ref, o->ref_fa, o->mo.k_type);
    }
    printf("\n\n");
    bench_print_table(&w, run, n_run, &t, o->n_threads);
    printf("\n");
    if (n_run == 2)
        bench_print_ratios(eng, &t);
    bench_print_work(&w, run, n_run, &t, m);
    if (o->ref_only)
        printf("peak RSS: %.1f MiB (the reference engine, the file's tensor table and tokenizer)\n",
               loom_cli_peak_rss() / (1024.0 * 1024.0));
    else
        bench_print_memory(&w, eng[0].ls, rss_start, rss_loom, o->ref, o->mo.params.mem_budget);
    bench_print_load(load0, load1, o->n_threads, o->ref || o->ref_only);
    rc = 0;
done:
    free(t.tok[0]);
    free(t.tok[1]);
    free(t.depth_tok);
    return rc;
}

/* loom's model and session, or (--ref-only) the file's tensor table and tokenizer only. */
static int bench_model(const struct bench_opts *o, const loom_machine_probe *m)
{
    loom_error err = {0};
    struct bench_engine eng[2] = {{.name = "loom"}, {.name = "reference"}};
    struct loom_ref ref = {0};
    struct loom_ref_model *rm = NULL;
    loom_model *model = NULL;
    loom_gguf *g = NULL;
    loom_tokenizer *tok = NULL;
    int rc = 1;
    double rss_start = loom_cli_peak_rss();
    if (o->ref_only) {
        if (loom_gguf_open_model(o->model, &g, &err) || !(tok = loom_tokenizer_open(o->model, &err)))
            goto done;
        rc = bench_run_engines(o, m, g, tok, rss_start, eng, &ref, &rm, &err) ? 1 : 0;
        goto done;
    }
    loom_model_params mp = o->mo.params;
    mp.n_threads = o->n_threads;
    if (!(model = loom_model_load_ex(o->model, &mp, &err)))
        goto done;
    loom_cli_model_warnings("bench", o->model, model);
    int n_train = loom_model_n_ctx_train(model);
    if (n_train > 0 && o->depth + o->n_prompt + o->n_gen > n_train) {
        loom_errorf(&err, LOOM_CLI_E_USAGE, "-d + -p + -n: expected at most the model's context_length %d, found %d",
                    n_train, o->depth + o->n_prompt + o->n_gen);
        goto done;
    }
    /* every run starts empty or at the depth: no checkpoint but the depth's (bench_loom_depth_setup) */
    loom_session_params sp = {.n_ctx = o->depth + o->n_prompt + o->n_gen, .n_threads = o->n_threads,
                              .numerics = o->numerics, .skip_prompt_checkpoints = 1, .k_type = o->mo.k_type};
    eng[0].ls = loom_session_new(model, &sp, &err);
    if (!eng[0].ls)
        goto done;
    loom_session_set_abort(eng[0].ls, loom_cli_abort, NULL);
    rc = bench_run_engines(o, m, loom_model_gguf(model), loom_model_tokenizer(model), rss_start, eng, &ref, &rm,
                           &err) ? 1 : 0;
    int n_tg = o->n_gen < BENCH_TG_WARMUP ? o->n_gen : BENCH_TG_WARMUP; /* the warm-up's decode tokens */
    int n_evaluated = (o->reps + 1) * o->n_prompt + o->reps * o->n_gen + n_tg + (o->depth > 0 ? o->depth : 0);
    loom_cli_expert_stats("bench", model, &o->mo, n_evaluated, NULL);
done:
    if (rc && err.code == LOOM_E_CANCELLED) {
        fprintf(stderr, "loom bench: interrupted (%s)\n", loom_cli_signal_name());
        rc = loom_cli_stopped_status();
    } else if (rc) {
        fprintf(stderr, "loom bench: %s: %s\n", o->model, err.msg);
        rc = err.code == LOOM_CLI_E_USAGE ? 2 : rc;
    }
    if (eng[1].rc)
        ref.free(eng[1].rc);
    free(eng[1].depth_state);
    if (rm)
        ref.model_free(rm);
    loom_ref_close(&ref);
    loom_session_free(eng[0].ls);
    loom_model_free(model);
    loom_tokenizer_free(tok);
    loom_gguf_close(g);
    return rc;
}

/* bench_mem in a child process, so that its 1 GiB buffer does not count in this process's peak RSS; the
 * child prints its line and sends *m back through a pipe. Returns 0, -1 when it failed (or its line could not be
 * written to stdout: said), 1 when a signal stopped it (passed on to the child, which SIGTERM or SIGHUP need not
 * reach as Ctrl+C does). */
static int bench_mem_forked(int n_threads, loom_machine_probe *m)
{
    int fd[2];
    if (pipe(fd) != 0) {
        fprintf(stderr, "loom bench --mem: pipe: %s\n", strerror(errno));
        return -1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        int ok = bench_mem(n_threads, m) == 0 && write(fd[1], m, sizeof *m) == (ssize_t)sizeof *m;
        errno = 0;
        int delivered = fflush(stdout) == 0 && !ferror(stdout); /* its line, as main's check of the parent's */
        if (!delivered)
            loom_cli_stdout_failed("bench", errno);
        _exit(!delivered ? 2 : ok ? 0 : 1); /* the child ends here: it owns nothing the parent must release */
    }
    close(fd[1]);
    int status = 0, sig = pid > 0 ? loom_cli_wait_readable(fd[0]) : 0;
    if (sig)
        kill(pid, sig);
    ssize_t got = -1;
    while (pid > 0 && (got = read(fd[0], m, sizeof *m)) < 0 && errno == EINTR)
        ;
    close(fd[0]);
    pid_t w = -1;
    while (pid > 0 && (w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (loom_cli_signal())
        return 1;
    if (pid > 0 && w == pid && WIFEXITED(status) && WEXITSTATUS(status) == 2)
        return -1; /* its line was not delivered, said */
    if (pid < 0 || w != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != (ssize_t)sizeof *m) {
        fprintf(stderr, "loom bench --mem: the measuring process failed\n");
        return -1;
    }
    return 0;
}

int loom_cli_bench(int argc, char **argv)
{
    struct bench_opts o;
    loom_machine_probe m = {0};
    int rc = bench_parse_opts(argc, argv, &o);
    if (rc)
        fputs(rc > 0 ? BENCH_USAGE : BENCH_SYNOPSIS "(loom bench --help for details)\n", rc > 0 ? stdout : stderr);
    if (rc)
        return rc < 0 ? 2 : 0;
    loom_cli_check_threads("bench", o.n_threads);
    if (loom_cli_select_kernels()) /* the model's and the probes' (--mem measures the set loom runs) */
        return 2;
    loom_cli_signals_install();
    if (o.mem && o.model) { /* a file that does not open is named before the seconds of probing */
        loom_error err = {0};
        loom_gguf *g = NULL;
        rc = loom_gguf_open_model(o.model, &g, &err);
        loom_gguf_close(g);
        if (rc) {
            fprintf(stderr, "loom bench: %s: %s\n", o.model, err.msg);
            return 1;
        }
    }
    rc = o.mem ? bench_mem_forked(o.n_threads, &m) : 0;
    if (rc)
        return rc > 0 ? loom_cli_stopped_status() : 1;
    return o.model ? bench_model(&o, &m) : 0;
}
