/* test_parity_ubatch.c — REFERENCE_BATCH numerics against the reference for every prompt length and micro-batch
 * split: on the tiny F32/F16/Q4_K_M models, dense (qwen35) and mixture of experts (qwen35moe), the last logits
 * row of prompts of 1..2 x 512 + 2 tokens (one llama_decode at the reference's defaults, n_batch 2048 /
 * n_ubatch 512) must be bitwise the reference's, and so must prompts decoded with other n_ubatch / n_batch
 * values and in several calls. Cost: the first full micro-batches are shared, so each length evaluates its
 * last micro-batch only, from the state after 0, 512 or 1024 tokens (restored on both sides; checked against
 * whole-prompt evaluation for a set of lengths). The subset: every micro-batch size up to 16 and the sizes
 * around 64, 128, 256, 384 and 512, after 0 and 512 tokens, and the lengths past 1024. By default tiny F16
 * (the issue's example model; dense and MoE) runs every micro-batch size 1..512 after 0 tokens and the subset
 * after 512, F32 and Q4_K_M the subset. After 512 tokens the default suite leaves out the sizes outside the
 * subset: the same sizes after 0 tokens run the same kernels at the same micro-batch sizes on the same model,
 * and the subset after 512 checks what the cached prefix changes (the reference's KV view at 768 and 1024
 * cells, a nonzero recurrent state) for every size up to 16 and at each view boundary. LOOM_PARITY_SWEEP=full
 * runs every length on all of them (about 10 minutes per three models on 2 cores). LOOM_PARITY_MODELS restricts
 * the models. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "parity.h"
#include "test.h"

/* UB: the reference's default n_ubatch. N_MAX: the longest prompt (two full micro-batches and a remainder of
 * two). N_CTX: positions of both engines' caches (a multiple of 256, as the reference pads it). One thread:
 * results do not depend on the thread count (checked with two threads for a few lengths), and the
 * reference's spinning workers slow down badly on a loaded 2-core machine. */
enum { UB = 512, N_MAX = 2 * UB + 2, N_BASES = 3, N_CTX = 1280, N_THREADS = 1 };

/* Token ids: splitmix64 from TOK_SEED over the regular byte-level BPE tokens (ids below 151643). Contract
 * control: their FNV-1a hash. */
#define TOK_SEED 0x0B47C4ull
#define TOK_RANGE 151643u
#define TOK_FNV 0xe8fcc82574bb7581ull

/* The dense models, then the mixture-of-experts ones (qwen35moe; skipped with a message while missing: the
 * quantized one comes from loom quantize). full: every micro-batch size is swept after 0 tokens by default
 * (SWEEP_FIRST; the model of the issue's example, tiny F16 at 513 tokens, and its MoE counterpart). */
static const struct {
    const char *file;
    int moe, full;
} MODELS[] = {
    {"qwen35-tiny-F32.gguf", 0, 0},    {"qwen35-tiny-F16.gguf", 0, 1},    {"qwen35-tiny-Q4_K_M.gguf", 0, 0},
    {"qwen35moe-tiny-F32.gguf", 1, 0}, {"qwen35moe-tiny-F16.gguf", 1, 1}, {"qwen35moe-tiny-Q4_K_M.gguf", 1, 0},
};

/* Micro-batch sizes of the default subset: all up to 16 (every residue of the 4-row groups and the tiles),
 * then the sizes around 64, 128, 256 (where the reference's KV view grows by 256 cells) and 384, and the
 * largest ones. */
static int in_subset(int r)
{
    static const int centers[] = {64, 128, 256, 384, 511};
    if (r <= 16)
        return 1;
    for (size_t i = 0; i < sizeof centers / sizeof centers[0]; i++)
        if (r >= centers[i] - 1 && r <= centers[i] + 1)
            return 1;
    return 0;
}

/* How much of 1..N_MAX a model's sweep evaluates. */
enum { SWEEP_SUBSET, SWEEP_FIRST, SWEEP_EVERY };

static int swept(int len, int how)
{
    int r = len - (len - 1) / UB * UB;
    return how == SWEEP_EVERY || (how == SWEEP_FIRST && len <= UB) || in_subset(r) || len > 2 * UB;
}

/* Lengths that are also evaluated as one whole prompt on both sides, with one thread and with two. */
static const int WHOLE_1[] = {1, 2, 5, 257, 512, 513, 514, 1025, 1026}, WHOLE_2[] = {2, 513, 1026};

struct sweep {
    const char *name;
    loom_model *lm;
    loom_session *ls;
    struct llama_model *rm;
    struct llama_context *rc;
    int n;                          /* logits compared per row (loom's width) */
    const int32_t *tok;             /* [N_MAX] */
    float *ref, *got;               /* [n] last rows */
    uint8_t *ref_state[N_BASES];    /* reference sequence state after k x UB tokens (k >= 1) */
    size_t ref_state_size[N_BASES];
    char loom_state[N_BASES][256];  /* loom state files after k x UB tokens */
    int lengths, bitwise;           /* sweep tally */
    int first_bad[8], n_bad;        /* the first differing lengths */
    double worst;                   /* largest max abs diff among them */
};

static void make_tokens(int32_t *tok)
{
    uint64_t st = TOK_SEED;
    for (int i = 0; i < N_MAX; i++)
        tok[i] = (int32_t)(parity_splitmix64(&st) % TOK_RANGE);
    CHECK(parity_fnv1a_ids(tok, N_MAX) == TOK_FNV, "token ids changed: fnv 0x%016llx",
          (unsigned long long)parity_fnv1a_ids(tok, N_MAX));
}

/* A reference context of N_CTX positions with the given n_batch / n_ubatch (0 = the reference's default). */
static struct llama_context *ref_context(struct llama_model *rm, int n_batch, int n_ubatch, int n_threads)
{
    return parity_ref_context_split(rm, N_CTX, n_batch, n_ubatch, n_threads);
}

/* A loom session mirroring a reference context whose effective micro-batch is n_ubatch. */
static loom_session *loom_mirror(const loom_model *lm, int n_ubatch, int n_threads)
{
    loom_error err = {0};
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = n_threads, .numerics = LOOM_NUMERICS_REFERENCE_BATCH,
                              .n_ubatch = n_ubatch, .skip_prompt_checkpoints = 1};
    loom_session *s = loom_session_new(lm, &sp, &err);
    CHECK(s != NULL, "loom session (n_ubatch %d): %s", n_ubatch, err.msg);
    return s;
}

/* tok[0..n) at positions pos0.. as one llama_decode; the last row into out[width]. Returns 0 on success. */
static int ref_last(struct llama_context *ctx, const int32_t *tok, int n, int pos0, float *out, int width)
{
    int rc = parity_ref_decode(ctx, tok, n, pos0, NULL, width);
    const float *row = rc == 0 ? llama_get_logits_ith(ctx, -1) : NULL;
    if (row)
        memcpy(out, row, (size_t)width * sizeof(float));
    CHECK(row != NULL, "reference llama_decode of %d tokens at %d: %d", n, pos0, rc);
    return row ? 0 : -1;
}

static int loom_last(loom_session *s, const int32_t *tok, int n, float *out)
{
    loom_error err = {0};
    int rc = loom_session_eval(s, tok, n, out, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK, "loom eval of %d tokens: %s", n, err.msg);
    return rc;
}

static int same(const float *a, const float *b, int n) { return memcmp(a, b, (size_t)n * sizeof(float)) == 0; }

static double max_abs(const float *a, const float *b, int n)
{
    struct parity_row r;
    parity_compare_row(a, b, n, &r);
    return r.max_abs;
}

/* The states after k x UB tokens (k = 1, 2), each prefix decoded as one call on both sides. */
static int prepare_bases(struct sweep *w, const char *dir)
{
    loom_error err = {0};
    for (int k = 1; k < N_BASES; k++) {
        parity_ref_reset(w->rc);
        loom_session_reset(w->ls);
        if (ref_last(w->rc, w->tok, k * UB, 0, w->ref, w->n) || loom_last(w->ls, w->tok, k * UB, w->got))
            return -1;
        w->ref_state_size[k] = llama_state_seq_get_size(w->rc, 0);
        w->ref_state[k] = malloc(w->ref_state_size[k]);
        snprintf(w->loom_state[k], sizeof w->loom_state[k], "%s/base%d.state", dir, k);
        int ok = w->ref_state[k] &&
                 llama_state_seq_get_data(w->rc, w->ref_state[k], w->ref_state_size[k], 0) == w->ref_state_size[k] &&
                 loom_session_save(w->ls, w->loom_state[k], &err) == LOOM_OK;
        CHECK(ok, "%s: saving the state after %d tokens: %s", w->name, k * UB, err.msg);
        if (!ok)
            return -1;
    }
    return 0;
}

/* Both engines back to the state after k x UB tokens. */
static int restore_base(struct sweep *w, int k)
{
    loom_error err = {0};
    parity_ref_reset(w->rc);
    loom_session_reset(w->ls);
    if (k == 0)
        return 0;
    int ok = llama_state_seq_set_data(w->rc, w->ref_state[k], w->ref_state_size[k], 0) == w->ref_state_size[k] &&
             loom_session_restore(w->ls, w->loom_state[k], &err) == LOOM_OK;
    CHECK(ok, "%s: restoring the state after %d tokens: %s", w->name, k * UB, err.msg);
    return ok ? 0 : -1;
}

/* The prompt tok[0..len): its last micro-batch from the restored state before it, the last rows left in
 * w->ref and w->got. Returns 1 when they are bitwise equal, 0 when not, -1 on failure. */
static int sweep_length(struct sweep *w, int len)
{
    int k = (len - 1) / UB, p = k * UB;
    if (restore_base(w, k) || ref_last(w->rc, w->tok + p, len - p, p, w->ref, w->n) ||
        loom_last(w->ls, w->tok + p, len - p, w->got))
        return -1;
    return same(w->ref, w->got, w->n);
}

/* Tally one swept length (eq: sweep_length's result). */
static void tally(struct sweep *w, int len, int eq)
{
    w->lengths++;
    w->bitwise += eq;
    if (eq)
        return;
    double d = max_abs(w->ref, w->got, w->n);
    w->worst = d > w->worst ? d : w->worst;
    if (w->n_bad < (int)(sizeof w->first_bad / sizeof w->first_bad[0]))
        w->first_bad[w->n_bad++] = len;
}

/* Whole-prompt evaluation of lengths[n_lengths] with n_threads on both sides: equal to each other and to the
 * restored-prefix form (so the sweep's shortcut computes what one llama_decode of the prompt computes). */
static void check_whole(struct sweep *w, const int *lengths, int n_lengths, int n_threads)
{
    struct llama_context *rc = ref_context(w->rm, 0, 0, n_threads);
    loom_session *ls = loom_mirror(w->lm, 0, n_threads);
    float *ref = malloc((size_t)w->n * sizeof(float)), *got = malloc((size_t)w->n * sizeof(float));
    int n_same = 0, n_form = 0, n_len = 0;
    for (int i = 0; rc && ls && ref && got && i < n_lengths; i++) {
        int len = lengths[i];
        parity_ref_reset(rc);
        loom_session_reset(ls);
        if (ref_last(rc, w->tok, len, 0, ref, w->n) || loom_last(ls, w->tok, len, got) || sweep_length(w, len) < 0)
            break;
        n_len++;
        int ok = same(ref, got, w->n), form = same(ref, w->ref, w->n) && same(got, w->got, w->n);
        n_same += ok;
        n_form += form;
        PARITY_CHECK_BITWISE(ok, "%s: whole prompt of %d tokens (%d threads): loom differs from the reference by %.3e",
                             w->name, len, n_threads, max_abs(ref, got, w->n));
        CHECK(form, "%s: whole prompt of %d tokens (%d threads) differs from the restored-prefix form", w->name, len,
              n_threads);
    }
    printf("%-26s whole prompts, %d threads: %d/%d lengths bitwise, %d/%d equal to the restored-prefix form\n",
           w->name, n_threads, n_same, n_len, n_form, n_len);
    CHECK(rc && ls && ref && got, "%s: whole-prompt check setup failed", w->name);
    free(ref);
    free(got);
    loom_session_free(ls);
    if (rc)
        llama_free(rc);
}

/* Every row of a last micro-batch of r tokens after k x UB tokens, with logits for all rows on both sides. */
static void check_all_rows(struct sweep *w, int k, int r)
{
    size_t rows = (size_t)r * (size_t)w->n;
    float *ref = malloc(rows * sizeof(float)), *got = malloc(rows * sizeof(float));
    loom_error err = {0};
    int p = k * UB;
    if (ref && got && restore_base(w, k) == 0 && parity_ref_decode(w->rc, w->tok + p, r, p, ref, w->n) == 0 &&
        loom_session_eval(w->ls, w->tok + p, r, got, LOOM_LOGITS_ALL, &err) == LOOM_OK) {
        int bitwise = 0;
        for (int t = 0; t < r; t++)
            bitwise += same(ref + (size_t)t * w->n, got + (size_t)t * w->n, w->n);
        PARITY_CHECK_BITWISE(bitwise == r, "%s: all rows of %d tokens after %d: %d/%d rows bitwise", w->name, r, p,
                             bitwise, r);
    } else {
        CHECK(0, "%s: all-rows evaluation of %d tokens after %d failed: %s", w->name, r, p, err.msg);
    }
    free(ref);
    free(got);
}

/* Other splits: reference contexts with n_ubatch 1280 (one micro-batch per call: the 513-token prompt's last
 * row then comes from a 513-token batch) and with n_batch 256 < n_ubatch (micro-batches of 256, calls of at
 * most 256 tokens), and prompts fed in several calls (each call is split on its own). loom mirrors each
 * context with n_ubatch = llama_n_ubatch and is fed the same calls. */
static void check_split(struct sweep *w, int n_batch, int n_ubatch, const int *calls, int n_calls)
{
    struct llama_context *rc = ref_context(w->rm, n_batch, n_ubatch, N_THREADS);
    int ub = rc ? (int)llama_n_ubatch(rc) : 0;
    loom_session *ls = rc ? loom_mirror(w->lm, ub, N_THREADS) : NULL;
    int pos = 0, ok = rc && ls;
    for (int i = 0; ok && i < n_calls; pos += calls[i++])
        ok = ref_last(rc, w->tok + pos, calls[i], pos, w->ref, w->n) == 0 &&
             loom_last(ls, w->tok + pos, calls[i], w->got) == LOOM_OK;
    int bitwise = ok && same(w->ref, w->got, w->n);
    printf("%-26s n_batch %4d n_ubatch %4d (effective %4d), %d tokens in %d call(s): %s\n", w->name,
           n_batch ? n_batch : 2048, n_ubatch ? n_ubatch : 512, ub, pos, n_calls, bitwise ? "bitwise" : "DIFFERS");
    CHECK(ok, "%s: %d tokens in %d calls, n_batch %d n_ubatch %d: an evaluation failed", w->name, pos, n_calls, n_batch,
          n_ubatch);
    PARITY_CHECK_BITWISE(bitwise, "%s: %d tokens in %d calls, n_batch %d n_ubatch %d: max abs diff %.3e", w->name, pos,
                         n_calls, n_batch, n_ubatch, ok ? max_abs(w->ref, w->got, w->n) : -1.0);
    loom_session_free(ls);
    if (rc)
        llama_free(rc);
}

/* The issue's example: at n_ubatch 1280 a 513-token prompt is one micro-batch in the reference. loom must
 * follow the context's n_ubatch; at its default (512) it splits 512 + 1 and the last token takes the
 * single-token orders, which is what the reference does at its default but not here. On the float models
 * that changes the last row (so this test sees a wrong n_ubatch); on Q4_K_M the row is the same either
 * way (measured; likely because the only differing step, attention, feeds matmuls whose activations are
 * quantized to 8 bits, which absorbs its last-bit differences), and so is it on the dense F16 model in the
 * haswell float orders (measured on Zen3; the dense F32 and the MoE models still differ there). */
static void check_issue_example(struct sweep *w)
{
    static const int one[] = {513}, two[] = {514};
    check_split(w, N_CTX, N_CTX, two, 1);
    check_split(w, N_CTX, N_CTX, one, 1); /* leaves the reference's row in w->ref */
    loom_session *ls = loom_mirror(w->lm, 0, N_THREADS);
    if (ls && loom_last(ls, w->tok, 513, w->got) == LOOM_OK) {
        int eq = same(w->ref, w->got, w->n);
        printf("%-26s 513 tokens at loom's default n_ubatch (512 + 1) against one micro-batch of 513: %s\n", w->name,
               eq ? "bitwise" : "differ");
        int blind = strstr(w->name, "Q4_K") ||
                    (!strcmp(w->name, "qwen35-tiny-F16.gguf") && !strcmp(loom_orders_name(), "haswell"));
        CHECK(!eq || blind, "%s: 513 tokens split 512 + 1 equal one micro-batch of 513: the split test cannot see a "
              "wrong n_ubatch", w->name);
    }
    loom_session_free(ls);
}

static void run_sweep(struct sweep *w, int how, const char *dir)
{
    if (prepare_bases(w, dir))
        return;
    double t0 = parity_now();
    for (int len = 1; len <= N_MAX; len++) {
        int eq = swept(len, how) ? sweep_length(w, len) : 2;
        if (eq < 0)
            return;
        if (eq < 2)
            tally(w, len, eq);
    }
    printf("%-26s prompt lengths 1..%d (%s): %d/%d last rows bitwise in %.1f s", w->name, N_MAX,
           how == SWEEP_EVERY ? "every length" : how == SWEEP_FIRST ? "every size after 0, subset after 512" : "subset",
           w->bitwise, w->lengths, parity_now() - t0);
    for (int i = 0; i < w->n_bad; i++)
        printf("%s%d", i ? " " : "; first differing lengths: ", w->first_bad[i]);
    printf(w->n_bad ? " (max abs diff %.3e)\n" : "\n", w->worst);
    PARITY_CHECK_BITWISE(w->bitwise == w->lengths, "%s: %d of %d prompt lengths differ from the reference", w->name,
                         w->lengths - w->bitwise, w->lengths);
    for (int r = 1; r <= 5; r++) {
        check_all_rows(w, 0, r);
        check_all_rows(w, 1, r);
    }
    check_all_rows(w, 0, 19);
}

static void run_model(const char *file, const char *path, const int32_t *tok, int how, const char *dir)
{
    static const int calls_256[] = {256, 256, 188}, calls_small[] = {37, 1, 100, 2, 300, 260};
    loom_error err = {0};
    struct sweep w = {.name = file, .tok = tok};
    w.lm = loom_model_load(path, &err);
    CHECK(w.lm != NULL, "%s: loom_model_load: %s", file, err.msg);
    w.rm = parity_ref_load(path, 1);
    CHECK(w.rm != NULL, "%s: the reference failed to load the model", file);
    if (w.lm && w.rm) {
        w.n = loom_model_n_logits(w.lm);
        CHECK(w.n > 0 && w.n <= parity_ref_n_vocab(w.rm), "%s: logits width %d", file, w.n);
        w.rc = ref_context(w.rm, 0, 0, N_THREADS);
        w.ls = loom_mirror(w.lm, 0, N_THREADS);
        w.ref = malloc((size_t)w.n * sizeof(float));
        w.got = malloc((size_t)w.n * sizeof(float));
    }
    if (w.rc && w.ls && w.ref && w.got) {
        run_sweep(&w, how, dir);
        check_whole(&w, WHOLE_1, (int)(sizeof WHOLE_1 / sizeof WHOLE_1[0]), N_THREADS);
        check_whole(&w, WHOLE_2, (int)(sizeof WHOLE_2 / sizeof WHOLE_2[0]), 2);
        check_issue_example(&w);
        check_split(&w, 256, 0, calls_256, 3);
        check_split(&w, 0, 0, calls_small, 6);
    }
    for (int k = 1; k < N_BASES; k++) {
        free(w.ref_state[k]);
        if (w.loom_state[k][0])
            unlink(w.loom_state[k]);
    }
    free(w.ref);
    free(w.got);
    loom_session_free(w.ls);
    if (w.rc)
        llama_free(w.rc);
    if (w.rm)
        llama_model_free(w.rm);
    loom_model_free(w.lm);
}

int main(void)
{
    char cache[1024], path[1200], dir[] = "/tmp/loom-parity-ubatch-XXXXXX";
    static int32_t tok[N_MAX];
    const char *sweep = getenv("LOOM_PARITY_SWEEP");
    int full = sweep && !strcmp(sweep, "full");
    int ref_ok = parity_ref_init() == 0;
    CHECK(ref_ok, "the reference engine is needed");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s failed", dir);
    if (!ref_ok)
        return test_finish();
    make_tokens(tok);
    parity_cache_dir(cache, sizeof cache);
    for (size_t m = 0; m < sizeof MODELS / sizeof MODELS[0]; m++) {
        if (!parity_model_selected(MODELS[m].file))
            continue;
        snprintf(path, sizeof path, "%s/models/%s", cache, MODELS[m].file);
        int present = access(path, R_OK) == 0;
        if (!present && MODELS[m].moe)
            printf("%-26s skipped: %s is missing (scripts/prepare-models.sh makes it)\n", MODELS[m].file, path);
        else
            CHECK(present, "model %s is missing (scripts/prepare-models.sh makes it)", path);
        if (present)
            run_model(MODELS[m].file, path, tok, full ? SWEEP_EVERY : MODELS[m].full ? SWEEP_FIRST : SWEEP_SUBSET, dir);
        fflush(stdout);
    }
    rmdir(dir);
    llama_backend_free();
    return test_finish();
}
