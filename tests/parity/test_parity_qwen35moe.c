/* test_parity_qwen35moe.c — bitwise parity of loom's mixture-of-experts circuits (qwen35moe) with the reference
 * engine on the synthetic tiny-moe models, in both numerics:
 *   REFERENCE_BATCH: every logits row of N_TOK teacher-forced tokens decoded in one call, at the reference's
 *     default n_ubatch (512: micro-batches of 512, 512 and 2) and at small ones (each micro-batch groups its
 *     tokens by expert differently), bitwise the reference's rows;
 *   CANONICAL: the same tokens in one call and in several partitions, every row bitwise the reference's
 *     token-by-token rows (the single-token orders), and so independent of the partition;
 *   decode: loom's token-by-token rows and a multi-sequence step, bitwise the reference's token-by-token rows.
 * Every prompt length across the micro-batch boundaries is swept by test_parity_ubatch (whose model list has
 * the MoE files). Models: $LOOM_CACHE/models (scripts/prepare-models.sh); a missing file is skipped with a
 * message (the quantized one comes from loom quantize); LOOM_PARITY_MODELS restricts the list;
 * LOOM_PARITY_MOE_FILES=a.gguf,... runs the checks on other files instead (the mid-size preset). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "parity.h"
#include "test.h"

/* N_TOK: two full micro-batches of 512 and a remainder of two. N_TBT: tokens compared token by token (past
 * loom's CANONICAL chunk of 128). One thread on both sides (results do not depend on it). */
enum { N_TOK = 1026, N_TBT = 140, N_CTX = 1280, N_THREADS = 1 };

#define TOK_SEED 0x0E5C0DEull
#define TOK_RANGE 151643u /* regular byte-level BPE tokens of the qwen35 vocabulary */
#define TOK_FNV 0xef0d11d3350f5846ull /* contract control: FNV-1a of the ids */

static const char *const MODELS[] = {"qwen35moe-tiny-F32.gguf", "qwen35moe-tiny-F16.gguf",
                                     "qwen35moe-tiny-Q4_K_M.gguf", "qwen35moe-tiny-fused-F32.gguf",
                                     "qwen35moe-tiny-e16-F16.gguf"};

struct model {
    const char *name;
    loom_model *lm;
    struct llama_model *rm;
    int n;             /* logits per row */
    const int32_t *tok; /* [N_TOK] */
    float *ref_tbt;    /* [N_TBT][n] the reference token by token */
};

static void make_tokens(int32_t *tok)
{
    uint64_t st = TOK_SEED;
    for (int i = 0; i < N_TOK; i++)
        tok[i] = (int32_t)(parity_splitmix64(&st) % TOK_RANGE);
}

/* A reference context whose llama_decode takes all N_TOK tokens, in micro-batches of n_ubatch. */
static struct llama_context *ref_context(struct llama_model *rm, int n_ubatch)
{
    return parity_ref_context_split(rm, N_CTX, 2048, n_ubatch, N_THREADS);
}

static loom_session *loom_session_for(const loom_model *lm, enum loom_numerics numerics, int n_ubatch)
{
    loom_error err = {0};
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = N_THREADS, .numerics = numerics, .n_ubatch = n_ubatch,
                              .skip_prompt_checkpoints = 1};
    loom_session *s = loom_session_new(lm, &sp, &err);
    CHECK(s != NULL, "loom session: %s", err.msg);
    return s;
}

/* Rows of a and b ([n_rows][n]) that are bitwise equal. */
static int bitwise_rows(const float *a, const float *b, int n_rows, int n)
{
    int eq = 0;
    for (int t = 0; t < n_rows; t++)
        eq += memcmp(a + (size_t)t * n, b + (size_t)t * n, (size_t)n * sizeof(float)) == 0;
    return eq;
}

static void report(const struct model *m, const char *what, const float *ref, const float *got, int n_rows)
{
    int eq = bitwise_rows(ref, got, n_rows, m->n);
    struct parity_summary s;
    parity_compare_steps(ref, got, n_rows, (size_t)m->n, m->n, 0, &s);
    printf("%-30s %-44s %4d/%d rows bitwise (max abs diff %.3e)\n", m->name, what, eq, n_rows, s.max_abs);
    PARITY_CHECK_BITWISE(eq == n_rows, "%s: %s: %d of %d rows differ (max abs diff %.3e)", m->name, what,
                         n_rows - eq, n_rows, s.max_abs);
}

/* REFERENCE_BATCH: all rows of the N_TOK tokens in one call, both engines at micro-batch n_ubatch. */
static void check_reference_batch(struct model *m, int n_ubatch, float *ref, float *got)
{
    struct llama_context *rc = ref_context(m->rm, n_ubatch);
    loom_session *s = loom_session_for(m->lm, LOOM_NUMERICS_REFERENCE_BATCH, rc ? (int)llama_n_ubatch(rc) : 0);
    loom_error err = {0};
    int rc_ref = rc ? parity_ref_decode(rc, m->tok, N_TOK, 0, ref, m->n) : -1;
    int rc_loom = s ? loom_session_eval(s, m->tok, N_TOK, got, LOOM_LOGITS_ALL, &err) : -1;
    CHECK(rc_ref == 0 && rc_loom == LOOM_OK, "%s: n_ubatch %d: reference %d, loom %d (%s)", m->name, n_ubatch,
          rc_ref, rc_loom, err.msg);
    if (rc_ref == 0 && rc_loom == LOOM_OK) {
        char what[64];
        snprintf(what, sizeof what, "reference-batch, %d tokens, n_ubatch %d", N_TOK, n_ubatch);
        report(m, what, ref, got, N_TOK);
    }
    loom_session_free(s);
    if (rc)
        llama_free(rc);
}

/* The reference token by token (the single-token orders): m->ref_tbt. */
static int ref_token_by_token(struct model *m)
{
    struct llama_context *rc = ref_context(m->rm, 512);
    int r = rc ? 0 : -1;
    for (int i = 0; i < N_TBT && r == 0; i++)
        r = parity_ref_decode(rc, m->tok + i, 1, i, m->ref_tbt + (size_t)i * m->n, m->n);
    CHECK(r == 0, "%s: reference token-by-token decode failed (%d)", m->name, r);
    if (rc)
        llama_free(rc);
    return r;
}

/* loom's N_TBT tokens in calls of calls[] tokens (LOGITS_ALL), against the reference token by token. */
static void check_partition(struct model *m, enum loom_numerics numerics, const int *calls, int n_calls,
                            const char *what, float *got)
{
    loom_session *s = loom_session_for(m->lm, numerics, 0);
    loom_error err = {0};
    int pos = 0, rc = s ? LOOM_OK : -1;
    for (int i = 0; i < n_calls && rc == LOOM_OK; pos += calls[i++])
        rc = loom_session_eval(s, m->tok + pos, calls[i], got + (size_t)pos * m->n, LOOM_LOGITS_ALL, &err);
    CHECK(rc == LOOM_OK && pos == N_TBT, "%s: %s: %s", m->name, what, err.msg);
    if (rc == LOOM_OK)
        report(m, what, m->ref_tbt, got, N_TBT);
    loom_session_free(s);
}

/* A multi-sequence decode step: sequence j has had tokens[0..3+j) and decodes token 3+j; each row must be
 * the reference's token-by-token row at that position. */
static void check_sessions_decode(struct model *m, float *got)
{
    enum { N_SEQ = 5 };
    loom_session *ss[N_SEQ];
    int32_t next[N_SEQ];
    loom_error err = {0};
    int ok = 1;
    for (int j = 0; j < N_SEQ; j++) {
        ss[j] = loom_session_for(m->lm, LOOM_NUMERICS_CANONICAL, 0);
        ok = ok && ss[j] && loom_session_eval(ss[j], m->tok, 3 + j, got, LOOM_LOGITS_LAST, &err) == LOOM_OK;
        next[j] = m->tok[3 + j];
    }
    ok = ok && loom_sessions_decode(ss, next, N_SEQ, got, &err) == LOOM_OK;
    CHECK(ok, "%s: multi-sequence decode: %s", m->name, err.msg);
    int eq = 0;
    for (int j = 0; ok && j < N_SEQ; j++)
        eq += bitwise_rows(m->ref_tbt + (size_t)(3 + j) * m->n, got + (size_t)j * m->n, 1, m->n);
    printf("%-30s %-44s %4d/%d rows bitwise\n", m->name, "multi-sequence decode step", eq, N_SEQ);
    PARITY_CHECK_BITWISE(eq == N_SEQ, "%s: multi-sequence decode: %d of %d rows bitwise", m->name, eq, N_SEQ);
    for (int j = 0; j < N_SEQ; j++)
        loom_session_free(ss[j]);
}

static void run_model(struct model *m)
{
    static const int one[] = {N_TBT}, split[] = {37, 1, 100, 2}, singles_n = N_TBT;
    size_t rows = (size_t)N_TOK * (size_t)m->n;
    float *ref = malloc(rows * sizeof(float)), *got = malloc(rows * sizeof(float));
    m->ref_tbt = malloc((size_t)N_TBT * (size_t)m->n * sizeof(float));
    CHECK(ref && got && m->ref_tbt, "out of memory");
    if (ref && got && m->ref_tbt) {
        static const int ubatches[] = {512, 64, 7};
        for (size_t i = 0; i < sizeof ubatches / sizeof ubatches[0]; i++)
            check_reference_batch(m, ubatches[i], ref, got);
        if (ref_token_by_token(m) == 0) {
            int singles[N_TBT];
            for (int i = 0; i < singles_n; i++)
                singles[i] = 1;
            check_partition(m, LOOM_NUMERICS_CANONICAL, one, 1, "canonical, one call, vs ref token by token", got);
            check_partition(m, LOOM_NUMERICS_CANONICAL, split, 4, "canonical, 37+1+100+2, vs ref token by token",
                            got);
            check_partition(m, LOOM_NUMERICS_REFERENCE_BATCH, singles, singles_n,
                            "reference-batch token by token vs ref", got);
            check_sessions_decode(m, got);
        }
    }
    free(ref);
    free(got);
    free(m->ref_tbt);
}

/* Both engines on the file at path (shown as name); returns 1 when both loaded it. */
static int compare_file(const char *name, const char *path, const int32_t *tok)
{
    struct model m = {.name = name, .tok = tok};
    char why[sizeof(loom_error) + 64];
    const char *bad = parity_load_both(path, &m.lm, &m.rm, &m.n, why, sizeof why);
    CHECK(!bad, "%s: %s", name, bad);
    if (!bad)
        run_model(&m);
    parity_free_both(m.lm, m.rm);
    fflush(stdout);
    return !bad;
}

int main(void)
{
    char cache[1024], path[1200];
    static int32_t tok[N_TOK];
    int ref_ok = parity_ref_init() == 0;
    CHECK(ref_ok, "the reference engine is needed");
    if (!ref_ok)
        return test_finish();
    make_tokens(tok);
    CHECK(parity_fnv1a_ids(tok, N_TOK) == TOK_FNV, "token ids changed: fnv 0x%016llx",
          (unsigned long long)parity_fnv1a_ids(tok, N_TOK));
    int ran = 0;
    const char *files = getenv("LOOM_PARITY_MOE_FILES");
    if (files && *files) { /* other files (the mid-size preset), by path */
        char list[4096];
        snprintf(list, sizeof list, "%s", files);
        for (char *save = NULL, *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save))
            ran += compare_file(f, f, tok);
    } else {
        parity_cache_dir(cache, sizeof cache);
        for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++) {
            if (!parity_model_selected(MODELS[i]))
                continue;
            snprintf(path, sizeof path, "%s/models/%s", cache, MODELS[i]);
            if (access(path, R_OK) == 0)
                ran += compare_file(MODELS[i], path, tok);
            else
                printf("%-30s skipped: %s is missing (scripts/prepare-models.sh makes it)\n", MODELS[i], path);
        }
    }
    printf("%d MoE model(s) compared\n", ran);
    llama_backend_free();
    return test_finish();
}
