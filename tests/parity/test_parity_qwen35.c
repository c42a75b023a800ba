/* test_parity_qwen35.c — teacher-forced logits parity of loom against the reference engine on the synthetic
 * qwen35 models: a fixed 100-token prompt plus a fixed 64-token continuation go through both engines in one
 * batch, and the 64 forced steps are compared row by row. Also: the reference against itself (flash attention
 * on/off, weight repacking on/off) for scale, loom's one-batch prompt against token-by-token evaluation, and
 * loom's token-by-token rows (the decode path) against the reference's; loom runs in REFERENCE_BATCH numerics
 * for the batched comparisons, and its CANONICAL numerics (the default) must give, for the prompt in one batch,
 * exactly the reference's token-by-token rows. Models: $LOOM_CACHE/models (prepared by
 * scripts/prepare-models.sh), and grouped-query attention with several KV heads (tests/gqa_fixture.h: 6 query
 * heads on 2 KV heads; the prepared tiny models have one KV head), synthesized here over the reference's qwen35
 * vocabulary in F32 and Q4_K_M; LOOM_PARITY_MODELS restricts the list while developing. The for-scale runs
 * (flash attention on, repacking off: printed, not asserted) cost one or two reference evaluations each and
 * run on the tiny models only; LOOM_PARITY_SCALE=1 runs them on the 0.8b models too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "parity.h"
#include "test.h"
#include "gqa_fixture.h"
#include "kernels/types.h"

/* Fixed prompt: English and a few other scripts, tokenized by the model's tokenizer and truncated to N_PROMPT. */
static const char PROMPT[] =
    "The old lighthouse keeper climbed the spiral stairs at dusk, counting 117 steps as he always did. "
    "Outside, the sea was restless; gulls wheeled over the harbour and a ferry sounded its horn twice. "
    "Le vieux gardien du phare montait l'escalier en colimaçon au crépuscule. "
    "Der alte Leuchtturmwärter stieg in der Dämmerung die Wendeltreppe hinauf. "
    "老灯塔看守人在黄昏时爬上螺旋楼梯，像往常一样数着台阶。 "
    "Старый смотритель маяка поднимался по винтовой лестнице. "
    "灯台守はいつものように階段を数えた。 "
    "He lit the lamp, checked the clockwork (wound at 18:45), and wrote in the log: \"wind NE 5, visibility good, "
    "all quiet\". Then he sat by the window and waited for the night.";

enum { N_PROMPT = 100, N_CONT = 64, N_TOTAL = N_PROMPT + N_CONT, N_CTX = 256, N_THREADS = 2 };

/* The continuation: N_CONT ids drawn by splitmix64 from CONT_SEED over the regular byte-level BPE tokens of the
 * qwen35 vocabulary (ids below 151643, where the special tokens start), so the same ids serve every model.
 * Contract control: their FNV-1a hash, first and last id are recorded here; a change to the generator fails. */
#define CONT_SEED 0x51A7C0DEull
#define CONT_RANGE 151643u
#define CONT_FNV 0x89a7b04c94858f41ull
#define CONT_FIRST 151046
#define CONT_LAST 109338

enum tolerance { TOL_F32, TOL_F16, TOL_QUANT };

static const struct {
    const char *file;
    enum tolerance tol;
    int big; /* the for-scale runs only with LOOM_PARITY_SCALE=1 */
} MODELS[] = {
    {"qwen35-tiny-F32.gguf", TOL_F32, 0},      {"qwen35-tiny-F16.gguf", TOL_F16, 0},
    {"qwen35-tiny-Q4_K_M.gguf", TOL_QUANT, 0}, {"qwen35-0.8b-F16.gguf", TOL_F16, 1},
    {"qwen35-0.8b-Q4_K_M.gguf", TOL_QUANT, 1},
};

static void make_continuation(int32_t *ids)
{
    uint64_t st = CONT_SEED;
    for (int i = 0; i < N_CONT; i++)
        ids[i] = (int32_t)(parity_splitmix64(&st) % CONT_RANGE);
    CHECK(parity_fnv1a_ids(ids, N_CONT) == CONT_FNV && ids[0] == CONT_FIRST && ids[N_CONT - 1] == CONT_LAST,
          "continuation ids changed: fnv 0x%016llx first %d last %d", (unsigned long long)parity_fnv1a_ids(ids, N_CONT),
          ids[0], ids[N_CONT - 1]);
}

/* Tokenize PROMPT with loom (user text: no special tokens) into tokens[N_PROMPT] and compare with the
 * reference's tokenization. Returns 0 when at least N_PROMPT tokens came out. */
static int tokenize_prompt(const loom_model *lm, const struct llama_model *rm, int32_t *tokens)
{
    int32_t lt[1024], rt[1024];
    loom_error err = {0};
    int nl =
        loom_tokenizer_encode(loom_model_tokenizer(lm), PROMPT, strlen(PROMPT), LOOM_SPECIAL_DATA, lt, 1024, &err);
    CHECK(nl >= N_PROMPT && nl <= 1024, "loom_tokenizer_encode gave %d tokens (need >= %d): %s", nl, N_PROMPT, err.msg);
    if (nl < N_PROMPT || nl > 1024)
        return -1;
    int nr = llama_tokenize(llama_model_get_vocab(rm), PROMPT, (int32_t)strlen(PROMPT), rt, 1024, false, false);
    int first_diff = -1;
    for (int i = 0; i < nl && i < nr && first_diff < 0; i++)
        if (lt[i] != rt[i])
            first_diff = i;
    CHECK(nl == nr && first_diff < 0, "prompt tokenization differs from the reference: %d vs %d tokens, first "
          "difference at %d", nl, nr, first_diff);
    memcpy(tokens, lt, N_PROMPT * sizeof(int32_t));
    return 0;
}

/* Reference logits for tokens[N_TOTAL] in one batch into out[N_TOTAL][width]; returns 0 on success. */
static int ref_forced(struct llama_model *rm, int flash_attn, const int32_t *tokens, float *out, int width,
                      double *seconds)
{
    struct llama_context *ctx = parity_ref_context(rm, N_CTX, N_CTX, N_THREADS, flash_attn);
    CHECK(ctx != NULL, "reference context (flash attention %s) failed", flash_attn ? "on" : "off");
    if (!ctx)
        return -1;
    double t0 = parity_now();
    int rc = parity_ref_decode(ctx, tokens, N_TOTAL, 0, out, width);
    *seconds = parity_now() - t0;
    CHECK(rc == 0, "reference llama_decode returned %d", rc);
    llama_free(ctx);
    return rc;
}

/* Worst max abs diff of rows a vs b relative to a's row std; counts bitwise rows into *bitwise. */
static double rows_max_rel_diff(const float *a, const float *b, int n_rows, int n, int *bitwise)
{
    double worst = 0;
    *bitwise = 0;
    for (int t = 0; t < n_rows; t++) {
        struct parity_row r;
        parity_compare_row(a + (size_t)t * (size_t)n, b + (size_t)t * (size_t)n, n, &r);
        *bitwise += r.bitwise;
        double rel = r.std_ref > 0 ? r.max_abs / r.std_ref : r.max_abs;
        if (!(rel <= worst))
            worst = rel;
    }
    return worst;
}

/* Two evaluations of the same rows must agree: bitwise, or max abs diff <= allow x the row's logit std. */
static void check_same_rows(const char *name, const char *what, const float *a, const float *b, int n_rows, int n,
                            double allow)
{
    int bitwise;
    double worst = rows_max_rel_diff(a, b, n_rows, n, &bitwise);
    printf("%-26s %-23s bitwise rows %d/%d  max diff %.3e x logit std (allowed %.1e)\n", name, what, bitwise,
           n_rows, worst, allow);
    CHECK(bitwise == n_rows || worst <= allow, "%s: %s: max diff %.3e x logit std > %.1e (bitwise rows %d/%d)", name,
          what, worst, allow, bitwise, n_rows);
}

/* check_same_rows where the bound comes from the reference's float orders (bitwise with it, or within its own
 * batch-vs-token difference): asserted only when loom's float-order profile is the reference build's
 * (parity_orders_match); else printed. */
static void check_rows_ref_orders(const char *name, const char *what, const float *a, const float *b, int n_rows,
                                  int n, double allow)
{
    if (parity_orders_match()) {
        check_same_rows(name, what, a, b, n_rows, n, allow);
        return;
    }
    int bitwise;
    double worst = rows_max_rel_diff(a, b, n_rows, n, &bitwise);
    printf("%-26s %-23s bitwise rows %d/%d  max diff %.3e x logit std (%.1e not asserted: other orders)\n", name,
           what, bitwise, n_rows, worst, allow);
}

/* The reference's prompt token by token (flash attention off) into step[N_PROMPT][n]. Returns 0 on success. */
static int ref_token_by_token(struct llama_model *rm, const int32_t *tokens, float *step, int n)
{
    struct llama_context *ctx = parity_ref_context(rm, N_CTX, N_CTX, N_THREADS, 0);
    int rc = ctx ? 0 : -1;
    for (int i = 0; i < N_PROMPT && rc == 0; i++)
        rc = parity_ref_decode(ctx, tokens + i, 1, i, step + (size_t)i * (size_t)n, n);
    CHECK(rc == 0, "reference token-by-token evaluation failed (%d)", rc);
    if (ctx)
        llama_free(ctx);
    return rc;
}

/* Acceptance of loom against the reference. F32 and F16 models: top-1 agrees in all steps but one, correlation
 * >= 0.99999 at every step, and for F32 max abs diff <= 1e-3. Quantized models: correlation >= 0.999 at every
 * step and no top-1 disagreement beyond a near tie (PARITY_NEAR_TIE, see parity.h). */
static void check_tolerance(const char *name, enum tolerance tol, const struct parity_summary *s)
{
    if (tol == TOL_QUANT) {
        CHECK(s->min_corr >= 0.999, "%s: min correlation %.6f < 0.999", name, s->min_corr);
        CHECK(s->hard_flips == 0, "%s: %d top-1 disagreements beyond the near-tie tolerance (max gap %.3f std)",
              name, s->hard_flips, s->max_gap);
        return;
    }
    CHECK(s->top1_agree >= s->n_steps - 1, "%s: top-1 agrees in %d/%d steps", name, s->top1_agree, s->n_steps);
    CHECK(s->min_corr >= 0.99999, "%s: min correlation %.7f < 0.99999", name, s->min_corr);
    if (tol == TOL_F32)
        CHECK(s->max_abs <= 1e-3, "%s: max abs diff %.3e > 1e-3", name, s->max_abs);
}

/* CANONICAL numerics: the prompt in one batch (and split 37/63) must equal the reference's token-by-token rows
 * ref_step[N_PROMPT][n] bit for bit. Prints the one-batch prefill time next to REFERENCE_BATCH's (batch_s). */
static void check_canonical(const char *name, const loom_model *lm, const int32_t *tokens, const float *ref_step,
                            int n, double batch_s)
{
    loom_error err = {0};
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = N_THREADS, .numerics = LOOM_NUMERICS_CANONICAL};
    loom_session *s = loom_session_new(lm, &sp, &err);
    float *rows = malloc((size_t)N_PROMPT * (size_t)n * sizeof(float));
    CHECK(s && rows, "%s: canonical session: %s", name, err.msg);
    if (s && rows) {
        double t0 = parity_now();
        int rc = loom_session_eval(s, tokens, N_PROMPT, rows, LOOM_LOGITS_ALL, &err);
        double t = parity_now() - t0;
        CHECK(rc == LOOM_OK, "%s: canonical prompt batch: %s", name, err.msg);
        printf("%-26s prefill of %d tokens in one batch: canonical %.3f s, reference-batch %.3f s (x%.2f)\n", name,
               N_PROMPT, t, batch_s, batch_s > 0 ? t / batch_s : 0.0);
        check_rows_ref_orders(name, "canonical vs ref tbt", ref_step, rows, N_PROMPT, n, 0.0);
        loom_session_reset(s);
        rc = loom_session_eval(s, tokens, 37, rows, LOOM_LOGITS_ALL, &err);
        if (rc == LOOM_OK)
            rc = loom_session_eval(s, tokens + 37, N_PROMPT - 37, rows + (size_t)37 * (size_t)n, LOOM_LOGITS_ALL, &err);
        CHECK(rc == LOOM_OK, "%s: canonical 37+63: %s", name, err.msg);
        check_rows_ref_orders(name, "canonical 37+63 vs tbt", ref_step, rows, N_PROMPT, n, 0.0);
    }
    free(rows);
    loom_session_free(s);
}

/* Batch against token-by-token evaluation of the prompt. loom's one-batch prompt must equal the first N_PROMPT
 * rows of the forced batch (forced[N_TOTAL][n]) and its token-by-token rows: bitwise, or within 1e-4 x logit std
 * on top of the reference's own batch-vs-token difference (its batched and single-token kernels round
 * differently, and loom reproduces both). loom's token-by-token rows (the decode path) are also held to the
 * model's parity tolerance against the reference's token-by-token rows. */
static void check_batch_vs_tokens(const char *name, enum tolerance tol, const loom_model *lm, loom_session *s,
                                  struct llama_model *rm, const int32_t *tokens, const float *forced,
                                  const float *ref_forced, int n)
{
    loom_error err = {0};
    size_t rows = (size_t)N_PROMPT * (size_t)n;
    float *batch = malloc(rows * sizeof(float)), *step = malloc(rows * sizeof(float));
    float *ref_step = malloc(rows * sizeof(float));
    CHECK(batch && step && ref_step, "out of memory");
    int rc = batch && step && ref_step ? LOOM_OK : LOOM_E_NOMEM;
    double batch_s = 0;
    if (rc == LOOM_OK) {
        loom_session_reset(s);
        double t0 = parity_now();
        rc = loom_session_eval(s, tokens, N_PROMPT, batch, LOOM_LOGITS_ALL, &err);
        batch_s = parity_now() - t0;
        CHECK(rc == LOOM_OK, "%s: prompt batch eval: %s", name, err.msg);
    }
    if (rc == LOOM_OK) {
        check_same_rows(name, "prompt batch vs 164", forced, batch, N_PROMPT, n, 1e-4);
        loom_session_reset(s);
        double t0 = parity_now();
        for (int i = 0; i < N_PROMPT && rc == LOOM_OK; i++)
            rc = loom_session_eval(s, tokens + i, 1, step + (size_t)i * (size_t)n, LOOM_LOGITS_LAST, &err);
        CHECK(rc == LOOM_OK, "%s: token-by-token eval: %s", name, err.msg);
        printf("%-26s loom token by token: %d tokens in %.2f s\n", name, N_PROMPT, parity_now() - t0);
    }
    if (rc == LOOM_OK && ref_token_by_token(rm, tokens, ref_step, n) == 0) {
        int ref_bitwise;
        double ref_rel = rows_max_rel_diff(ref_forced, ref_step, N_PROMPT, n, &ref_bitwise);
        printf("%-26s %-23s bitwise rows %d/%d  max diff %.3e x logit std (for scale)\n", name,
               "ref batch vs tok by tok", ref_bitwise, N_PROMPT, ref_rel);
        check_rows_ref_orders(name, "batch vs tok by tok", batch, step, N_PROMPT, n, 1e-4 + ref_rel);
        struct parity_summary sum;
        parity_compare_steps(ref_step, step, N_PROMPT, (size_t)n, n, 0, &sum);
        parity_print_summary(name, "loom vs ref, tok by tok", &sum);
        check_tolerance(name, tol, &sum);
        check_canonical(name, lm, tokens, ref_step, n, batch_s);
    }
    free(batch);
    free(step);
    free(ref_step);
}

/* The reference with its weight repacking off (its default is on; only quantized files are repacked): printed
 * against the default reference and against loom, for scale. */
static void scale_repack(const char *name, const char *path, const int32_t *tokens, const float *ref,
                         const float *loom, int n)
{
    struct llama_model *rm = parity_ref_load(path, 0);
    float *plain = malloc((size_t)N_TOTAL * (size_t)n * sizeof(float));
    double secs;
    CHECK(rm && plain, "%s: reference load without repacking failed", name);
    if (rm && plain && ref_forced(rm, 0, tokens, plain, n, &secs) == 0) {
        size_t off = (size_t)(N_PROMPT - 1) * (size_t)n;
        struct parity_summary s;
        parity_compare_steps(ref + off, plain + off, N_CONT, (size_t)n, n, 0, &s);
        parity_print_summary(name, "ref repack off vs on", &s);
        parity_compare_steps(plain + off, loom + off, N_CONT, (size_t)n, n, 0, &s);
        parity_print_summary(name, "loom vs ref repack off", &s);
    }
    free(plain);
    if (rm)
        llama_model_free(rm);
}

struct run {
    const char *name;
    const char *path;
    enum tolerance tol;
    int scale; /* the for-scale reference runs (flash attention on, repacking off) */
    loom_model *lm;
    loom_session *ls;
    struct llama_model *rm;
    float *loom_logits, *ref_logits, *ref_fa; /* [N_TOTAL][n] */
    int n;
};

static void run_free(struct run *r)
{
    free(r->loom_logits);
    free(r->ref_logits);
    free(r->ref_fa);
    loom_session_free(r->ls);
    loom_model_free(r->lm);
    if (r->rm)
        llama_model_free(r->rm);
}

/* Both engines on tokens[N_TOTAL] in one batch; the forced steps compared and checked. Returns 0 when both ran. */
static int compare_forced(struct run *r, const int32_t *tokens)
{
    loom_error err = {0};
    double t_ref, t_fa = 0, t0 = parity_now();
    int rc = loom_session_eval(r->ls, tokens, N_TOTAL, r->loom_logits, LOOM_LOGITS_ALL, &err);
    double t_loom = parity_now() - t0;
    CHECK(rc == LOOM_OK, "%s: loom_session_eval of %d tokens: %s", r->name, N_TOTAL, err.msg);
    if (rc != LOOM_OK || ref_forced(r->rm, 0, tokens, r->ref_logits, r->n, &t_ref) != 0 ||
        (r->scale && ref_forced(r->rm, 1, tokens, r->ref_fa, r->n, &t_fa) != 0))
        return -1;
    printf("%s: %d logits per row, %d tokens in one batch: loom %.2f s (%s kernels), reference %.2f s\n", r->name,
           r->n, N_TOTAL, t_loom, loom_kernels_name(), t_ref);
    /* Step t: the row at position N_PROMPT-1+t predicts forced token N_PROMPT+t. */
    size_t off = (size_t)(N_PROMPT - 1) * (size_t)r->n;
    struct parity_summary s, fa;
    parity_compare_steps(r->ref_logits + off, r->loom_logits + off, N_CONT, (size_t)r->n, r->n, 1, &s);
    parity_print_summary(r->name, "loom vs ref", &s);
    if (r->scale) {
        parity_compare_steps(r->ref_logits + off, r->ref_fa + off, N_CONT, (size_t)r->n, r->n, 0, &fa);
        parity_print_summary(r->name, "ref fa on vs off", &fa);
    }
    check_tolerance(r->name, r->tol, &s);
    return 0;
}

static void compare_model(struct run *r, const int32_t *cont)
{
    loom_error err = {0};
    int32_t tokens[N_TOTAL];
    r->lm = loom_model_load(r->path, &err);
    CHECK(r->lm != NULL, "%s: loom_model_load: %s", r->name, err.msg);
    r->rm = parity_ref_load(r->path, 1);
    CHECK(r->rm != NULL, "%s: reference failed to load the model", r->name);
    if (!r->lm || !r->rm || tokenize_prompt(r->lm, r->rm, tokens) != 0)
        return;
    memcpy(tokens + N_PROMPT, cont, N_CONT * sizeof(int32_t));
    r->n = loom_model_n_logits(r->lm);
    int n_ref = parity_ref_n_vocab(r->rm);
    CHECK(r->n > 0 && r->n <= n_ref, "%s: loom logits width %d, reference vocabulary %d", r->name, r->n, n_ref);
    for (int i = 0; i < N_CONT; i++)
        CHECK(loom_model_token_sampleable(r->lm, cont[i]), "%s: continuation id %d not sampleable", r->name, cont[i]);
    if (r->n <= 0 || r->n > n_ref)
        return;
    size_t rows = (size_t)N_TOTAL * (size_t)r->n;
    r->loom_logits = malloc(rows * sizeof(float));
    r->ref_logits = malloc(rows * sizeof(float));
    r->ref_fa = malloc(rows * sizeof(float));
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = N_THREADS, .numerics = LOOM_NUMERICS_REFERENCE_BATCH,
                              .n_ubatch = N_CTX}; /* the reference contexts' (parity_ref_context: n_ubatch = n_batch) */
    r->ls = loom_session_new(r->lm, &sp, &err);
    CHECK(r->ls && r->loom_logits && r->ref_logits && r->ref_fa, "%s: session/buffers: %s", r->name, err.msg);
    if (!r->ls || !r->loom_logits || !r->ref_logits || !r->ref_fa || compare_forced(r, tokens) != 0)
        return;
    if (r->tol == TOL_QUANT && r->scale)
        scale_repack(r->name, r->path, tokens, r->ref_logits, r->loom_logits, r->n);
    check_batch_vs_tokens(r->name, r->tol, r->lm, r->ls, r->rm, tokens, r->loom_logits, r->ref_logits, r->n);
}

/* The grouped-query attention models (gqa_tiny), written into a private folder under /tmp and compared as the
 * prepared ones. */
static void compare_gqa(const int32_t *cont)
{
    static const struct {
        const char *file;
        enum tolerance tol;
        const char *recipe;
    } GQA[] = {{"tiny-gqa-F32.gguf", TOL_F32, NULL}, {"tiny-gqa-Q4_K_M.gguf", TOL_QUANT, "Q4_K_M"}};
    char ref[1024], vocab[1100], dir[] = "/tmp/loom-parity-gqa-XXXXXX", path[64];
    snprintf(vocab, sizeof vocab, "%s/src/models/ggml-vocab-qwen35.gguf", parity_ref_dir(ref, sizeof ref));
    int made = mkdtemp(dir) != NULL;
    CHECK(made, "mkdtemp failed");
    for (size_t m = 0; m < sizeof GQA / sizeof GQA[0] && made; m++) {
        if (!parity_model_selected(GQA[m].file))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, GQA[m].file);
        if (gqa_write(&gqa_tiny, vocab, LOOM_TYPE_F32, GQA[m].recipe, path) == LOOM_OK) {
            struct run r = {.name = GQA[m].file, .path = path, .tol = GQA[m].tol, .scale = 1};
            compare_model(&r, cont);
            run_free(&r);
            fflush(stdout);
        }
        unlink(path);
    }
    if (made)
        rmdir(dir);
}

int main(void)
{
    char cache[1024], path[1200];
    int32_t cont[N_CONT];
    const char *scale_env = getenv("LOOM_PARITY_SCALE");
    int scale_big = scale_env && !strcmp(scale_env, "1");
    int ref_ok = parity_ref_init() == 0;
    CHECK(ref_ok, "the reference engine is needed");
    if (!ref_ok)
        return test_finish();
    make_continuation(cont);
    parity_cache_dir(cache, sizeof cache);
    for (size_t m = 0; m < sizeof MODELS / sizeof MODELS[0]; m++) {
        if (!parity_model_selected(MODELS[m].file))
            continue;
        snprintf(path, sizeof path, "%s/models/%s", cache, MODELS[m].file);
        CHECK(access(path, R_OK) == 0, "model %s is missing (scripts/prepare-models.sh makes it)", path);
        if (access(path, R_OK) != 0)
            continue;
        struct run r = {.name = MODELS[m].file, .path = path, .tol = MODELS[m].tol,
                        .scale = !MODELS[m].big || scale_big};
        compare_model(&r, cont);
        run_free(&r);
        fflush(stdout);
    }
    compare_gqa(cont);
    llama_backend_free();
    return test_finish();
}
