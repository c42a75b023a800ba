/* test_synth_quality.c — the conditioning report of loom's synthetic qwen35 models, measured with the
 * reference engine alone on the cached tiny and 0.8b models (scripts/prepare-models.sh): flash attention on
 * vs off, Q4_K_M vs F16 logits, per-layer branch/residual norm ratios (cb_eval) and greedy-output diversity.
 * Thresholds: REFERENCE.md "Synthetic models must be well-conditioned". */
#include <dlfcn.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"
#include "test.h"

#define N_PROMPT 100
#define N_FORCED 64
#define N_TOKENS (N_PROMPT + N_FORCED)
#define N_GREEDY 32
#define MAX_LAYERS 64

/* Logits of the N_FORCED teacher-forced steps: step s predicts token N_PROMPT + s. */
struct run_logits {
    int n_vocab;
    float *logits; /* [N_FORCED][n_vocab] */
};

/* Residual-stream tensors captured through cb_eval: the layer input and the two residual sums. */
struct capture {
    int n_embd;
    float *input;                    /* model.input_embed [N_TOKENS][n_embd] */
    float *attn_res[MAX_LAYERS];     /* attn_residual-il */
    float *l_out[MAX_LAYERS];        /* l_out-il */
    int n_layer;
};

static void quiet_log(enum ggml_log_level level, const char *text, void *ud)
{
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static void load_backends(void)
{
    Dl_info info;
    char dir[4096];
    if (dladdr((void *)llama_backend_init, &info) && info.dli_fname) {
        snprintf(dir, sizeof dir, "%s", info.dli_fname);
        ggml_backend_load_all_from_path(dirname(dir));
    }
}

static float **capture_slot(struct capture *c, const char *name)
{
    int il;
    if (!strcmp(name, "model.input_embed"))
        return &c->input;
    if (sscanf(name, "attn_residual-%d", &il) == 1 && il >= 0 && il < MAX_LAYERS)
        return &c->attn_res[il];
    if (sscanf(name, "l_out-%d", &il) == 1 && il >= 0 && il < MAX_LAYERS)
        return &c->l_out[il];
    return NULL;
}

static bool capture_cb(struct ggml_tensor *t, bool ask, void *ud)
{
    struct capture *c = ud;
    float **slot = capture_slot(c, t->name);
    if (ask)
        return slot != NULL;
    if (!slot || t->type != GGML_TYPE_F32 || t->ne[0] != c->n_embd || t->ne[1] != N_TOKENS ||
        !ggml_is_contiguous(t))
        return true;
    if (!*slot)
        *slot = malloc(ggml_nbytes(t));
    if (*slot)
        ggml_backend_tensor_get(t, *slot, 0, ggml_nbytes(t));
    return true;
}

/* The 164 token ids: a fixed pseudo-random sequence of ordinary (NORMAL) tokens. */
static void make_tokens(const struct llama_vocab *vocab, llama_token *tok)
{
    uint64_t s = 0x5EED5EEDull;
    int n_vocab = llama_vocab_n_tokens(vocab);
    for (int i = 0; i < N_TOKENS;) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        llama_token t = (llama_token)((s >> 33) % (uint64_t)n_vocab);
        if (llama_vocab_get_attr(vocab, t) & LLAMA_TOKEN_ATTR_NORMAL)
            tok[i++] = t;
    }
}

static struct llama_context *new_context(struct llama_model *model, int flash, struct capture *cap)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 256;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    if (cap) {
        cp.cb_eval = capture_cb;
        cp.cb_eval_user_data = cap;
    }
    return llama_init_from_model(model, cp);
}

/* Teacher-forced pass over tok[0..N_TOKENS) in one batch; keeps the logits of the forced steps. */
static int run_forced(struct llama_context *ctx, const llama_token *tok, struct run_logits *out)
{
    struct llama_batch b = llama_batch_init(N_TOKENS, 0, 1);
    for (int i = 0; i < N_TOKENS; i++) {
        b.token[i] = tok[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i >= N_PROMPT - 1 && i < N_TOKENS - 1;
    }
    b.n_tokens = N_TOKENS;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc)
        return rc;
    out->logits = malloc(sizeof(float) * N_FORCED * (size_t)out->n_vocab);
    if (!out->logits)
        return -1;
    for (int s = 0; s < N_FORCED; s++)
        memcpy(out->logits + (size_t)s * out->n_vocab, llama_get_logits_ith(ctx, N_PROMPT - 1 + s),
               sizeof(float) * out->n_vocab);
    return 0;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* Pearson correlation of a[0..n) and b[0..n). */
static double correlation(const float *a, const float *b, int n)
{
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) {
        ma += a[i];
        mb += b[i];
    }
    ma /= n;
    mb /= n;
    for (int i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return sab / sqrt(saa * sbb + 1e-300);
}

static double stddev(const float *a, int n)
{
    double m = 0, v = 0;
    for (int i = 0; i < n; i++)
        m += a[i];
    m /= n;
    for (int i = 0; i < n; i++)
        v += (a[i] - m) * (a[i] - m);
    return sqrt(v / n);
}

struct agreement {
    int top1_equal;      /* exact top-1 agreement */
    int top1_tolerant;   /* agreement counting near-ties (gap < 0.1 std in the reference run) as agreement */
    double corr_mean, corr_min;
};

/* Compare run b against reference run a over the n_real real-token rows. */
static struct agreement compare(const struct run_logits *a, const struct run_logits *b, int n_real)
{
    struct agreement g = {0, 0, 0, 1};
    for (int s = 0; s < N_FORCED; s++) {
        const float *la = a->logits + (size_t)s * a->n_vocab, *lb = b->logits + (size_t)s * b->n_vocab;
        int ta = argmax(la, n_real), tb = argmax(lb, n_real);
        g.top1_equal += ta == tb;
        g.top1_tolerant += ta == tb || la[ta] - la[tb] <= 0.1 * stddev(la, n_real);
        double c = correlation(la, lb, n_real);
        g.corr_mean += c / N_FORCED;
        if (c < g.corr_min)
            g.corr_min = c;
    }
    return g;
}

static void print_agreement(const char *what, struct agreement g)
{
    printf("%-28s top-1 %2d/%d (near-tie tolerant %2d/%d), logits corr mean %.6f min %.6f\n", what, g.top1_equal,
           N_FORCED, g.top1_tolerant, N_FORCED, g.corr_mean, g.corr_min);
}

/* Mean over tokens of |after - before| / |before| (rows of n_embd). */
static double update_ratio(const float *before, const float *after, int n_embd)
{
    double sum = 0;
    for (int t = 0; t < N_TOKENS; t++) {
        double d = 0, r = 0;
        for (int i = 0; i < n_embd; i++) {
            double x = before[(size_t)t * n_embd + i], y = after[(size_t)t * n_embd + i];
            d += (y - x) * (y - x);
            r += x * x;
        }
        sum += sqrt(d / (r + 1e-30));
    }
    return sum / N_TOKENS;
}

static void check_ratios(const struct capture *c)
{
    double lo = 1e9, hi = 0;
    printf("branch update / residual norm per layer (mixer, ffn):\n");
    for (int il = 0; il < c->n_layer; il++) {
        const float *in = il ? c->l_out[il - 1] : c->input;
        CHECK(in && c->attn_res[il] && c->l_out[il], "layer %d: residual tensors not captured", il);
        if (!in || !c->attn_res[il] || !c->l_out[il])
            continue;
        double rm = update_ratio(in, c->attn_res[il], c->n_embd), rf = update_ratio(c->attn_res[il], c->l_out[il],
                                                                                     c->n_embd);
        printf("  layer %2d: %.3f %.3f\n", il, rm, rf);
        lo = fmin(lo, fmin(rm, rf));
        hi = fmax(hi, fmax(rm, rf));
        CHECK(rm >= 0.05 && rm <= 0.5, "layer %d mixer update ratio %.3f, expected in [0.05, 0.5]", il, rm);
        CHECK(rf >= 0.05 && rf <= 0.5, "layer %d ffn update ratio %.3f, expected in [0.05, 0.5]", il, rf);
    }
    printf("  range %.3f .. %.3f\n", lo, hi);
}

/* Greedy decoding of N_GREEDY tokens after the prompt; returns the number of distinct tokens. */
static int greedy_distinct(struct llama_context *ctx, const llama_token *prompt, int n_real)
{
    llama_memory_clear(llama_get_memory(ctx), true);
    struct llama_batch b = llama_batch_init(N_PROMPT, 0, 1);
    for (int i = 0; i < N_PROMPT; i++) {
        b.token[i] = prompt[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i == N_PROMPT - 1;
    }
    b.n_tokens = N_PROMPT;
    llama_token out[N_GREEDY];
    int rc = llama_decode(ctx, b), n = 0, distinct = 0;
    for (; rc == 0 && n < N_GREEDY; n++) {
        out[n] = argmax(llama_get_logits_ith(ctx, -1), n_real);
        b.token[0] = out[n];
        b.pos[0] = N_PROMPT + n;
        b.logits[0] = 1;
        b.n_tokens = 1;
        rc = llama_decode(ctx, b);
    }
    llama_batch_free(b);
    CHECK(rc == 0, "greedy decode failed at step %d (rc %d)", n, rc);
    printf("greedy %d tokens:", n);
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= out[j] == out[i];
        distinct += !seen;
        printf(" %d", out[i]);
    }
    printf("\n");
    return distinct;
}

struct loaded {
    struct llama_model *model;
    int n_vocab, n_real, n_layer, n_embd;
};

static int load(const char *path, struct loaded *m)
{
    struct llama_model_params mp = llama_model_default_params();
    m->model = llama_model_load_from_file(path, mp);
    if (!m->model)
        return -1;
    const struct llama_vocab *vocab = llama_model_get_vocab(m->model);
    m->n_vocab = llama_vocab_n_tokens(vocab);
    m->n_real = 0; /* rows before the UNUSED padding tail */
    for (int i = 0; i < m->n_vocab; i++)
        if (!(llama_vocab_get_attr(vocab, i) & LLAMA_TOKEN_ATTR_UNUSED))
            m->n_real = i + 1;
    m->n_layer = llama_model_n_layer(m->model);
    m->n_embd = llama_model_n_embd(m->model);
    return 0;
}

/* One teacher-forced run with a fresh context; fills *out. */
static int forced(struct loaded *m, int flash, struct capture *cap, const llama_token *tok, struct run_logits *out)
{
    struct llama_context *ctx = new_context(m->model, flash, cap);
    if (!ctx)
        return -1;
    out->n_vocab = m->n_vocab;
    int rc = run_forced(ctx, tok, out);
    llama_free(ctx);
    return rc;
}

/* The whole report on the cached F16 and Q4_K_M models of one preset. */
static void report(const char *dir, const char *preset)
{
    char f16_path[4200], q4_path[4200];
    snprintf(f16_path, sizeof f16_path, "%s/qwen35-%s-F16.gguf", dir, preset);
    snprintf(q4_path, sizeof q4_path, "%s/qwen35-%s-Q4_K_M.gguf", dir, preset);
    struct loaded f16 = {0}, q4 = {0};
    CHECK(load(f16_path, &f16) == 0, "cannot load %s (run scripts/prepare-models.sh)", f16_path);
    CHECK(load(q4_path, &q4) == 0, "cannot load %s (run scripts/prepare-models.sh)", q4_path);
    if (!f16.model || !q4.model) {
        if (f16.model)
            llama_model_free(f16.model);
        if (q4.model)
            llama_model_free(q4.model);
        return;
    }
    CHECK(f16.n_vocab == q4.n_vocab && f16.n_real == q4.n_real, "vocab differs between F16 and Q4_K_M");
    CHECK(f16.n_layer <= MAX_LAYERS, "n_layer %d, expected <= %d", f16.n_layer, MAX_LAYERS);
    printf("== %s: %s, %s (%d rows, %d real tokens, %d layers)\n", preset, f16_path, q4_path, f16.n_vocab,
           f16.n_real, f16.n_layer);

    llama_token tok[N_TOKENS];
    make_tokens(llama_model_get_vocab(f16.model), tok);
    struct capture cap = {.n_embd = f16.n_embd, .n_layer = f16.n_layer < MAX_LAYERS ? f16.n_layer : MAX_LAYERS};
    struct run_logits f16_off = {0}, f16_on = {0}, q4_off = {0}, q4_on = {0};
    CHECK(forced(&f16, 0, &cap, tok, &f16_off) == 0, "F16 fa off: decode failed");
    CHECK(forced(&f16, 1, NULL, tok, &f16_on) == 0, "F16 fa on: decode failed");
    CHECK(forced(&q4, 0, NULL, tok, &q4_off) == 0, "Q4_K_M fa off: decode failed");
    CHECK(forced(&q4, 1, NULL, tok, &q4_on) == 0, "Q4_K_M fa on: decode failed");
    if (f16_off.logits && f16_on.logits && q4_off.logits && q4_on.logits) {
        struct agreement a = compare(&f16_off, &f16_on, f16.n_real);
        print_agreement("(a) F16 fa off vs on:", a);
        CHECK(a.top1_equal == N_FORCED, "%s: F16 fa on/off top-1 %d/%d, expected %d/%d", preset, a.top1_equal,
              N_FORCED, N_FORCED, N_FORCED);
        print_agreement("    Q4_K_M fa off vs on:", compare(&q4_off, &q4_on, f16.n_real));
        struct agreement q = compare(&f16_off, &q4_off, f16.n_real);
        print_agreement("(b) Q4_K_M vs F16 (fa off):", q);
        CHECK(q.corr_mean >= 0.99, "%s: Q4_K_M vs F16 logits corr %.6f, expected >= 0.99", preset, q.corr_mean);
        check_ratios(&cap);
    }

    struct llama_context *ctx = new_context(q4.model, 0, NULL);
    CHECK(ctx != NULL, "Q4_K_M context");
    if (ctx) {
        int distinct = greedy_distinct(ctx, tok, q4.n_real);
        printf("(d) greedy Q4_K_M: %d distinct of %d\n", distinct, N_GREEDY);
        CHECK(distinct > 1, "%s: greedy output is one repeated token", preset);
        llama_free(ctx);
    }

    free(f16_off.logits);
    free(f16_on.logits);
    free(q4_off.logits);
    free(q4_on.logits);
    free(cap.input);
    for (int il = 0; il < MAX_LAYERS; il++) {
        free(cap.attn_res[il]);
        free(cap.l_out[il]);
    }
    llama_model_free(f16.model);
    llama_model_free(q4.model);
}

int main(void)
{
    const char *cache = getenv("LOOM_CACHE"), *home = getenv("HOME");
    char dir[4000];
    if (cache && *cache)
        snprintf(dir, sizeof dir, "%s/models", cache);
    else
        snprintf(dir, sizeof dir, "%s/.cache/loom/models", home ? home : ".");
    llama_log_set(quiet_log, NULL);
    load_backends();
    llama_backend_init();
    report(dir, "tiny");
    report(dir, "0.8b");
    llama_backend_free();
    return test_finish();
}
