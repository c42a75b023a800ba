/* test_parity_iq.c — whole-model logits of loom against the reference engine on files of the weight types loom
 * reads but does not write (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0, MXFP4): the
 * reference's llama_model_quantize turns $LOOM_CACHE/models/qwen35-tiny-F16.gguf (dense) and
 * qwen35moe-tiny-F16.gguf (the experts' MUL_MAT_ID) into one file per recipe of CASES, in a temporary folder.
 *
 * The token embedding and the output head stay F16 in every file (token_embedding_type, output_tensor_type):
 * their types are not under test, and quantizing the 248k-row embedding (under an importance matrix for most
 * recipes) would be most of the test's time. The recipes that refuse to run without an importance matrix get a
 * uniform one (every weight 1: the types are tested, not the quality).
 *
 * For each file, N_TOK fixed token ids; every row must be bitwise equal:
 *   - loom's batch in REFERENCE_BATCH numerics against the reference's batch (prefill: the IQ panel order, which
 *     the reference takes from 8 rows on, also per expert in MUL_MAT_ID; the repacked gemm/gemv orders of
 *     MXFP4 and of the Q2_K / Q4_K tensors some recipes give; vec_dot for TQ1_0 and TQ2_0);
 *   - loom token by token against the reference token by token, the first N_STEP tokens (decode: vec_dot, gemv);
 *   - loom's CANONICAL batch of those N_STEP tokens against the reference token by token.
 * LOOM_PARITY_MODELS (comma-separated substrings) selects the cases whose "<source file>/<recipe>" contains one:
 * "qwen35-tiny" the dense cases, "qwen35moe" the MoE ones, "IQ1_M" both IQ1_M files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "loom.h"
#include "parity.h"
#include "test.h"

/* N_TOK % 4 != 0, so a repacked weight's batch runs both its gemm groups of 4 rows and the gemv tail. */
enum { N_TOK = 42, N_STEP = 12, N_CTX = 64, N_THREADS = 2 };

static const struct {
    const char *src;       /* in $LOOM_CACHE/models */
    const char *recipe;    /* printed, and the output file's suffix */
    enum llama_ftype ftype;
    int imatrix;           /* the recipe needs an importance matrix */
    enum ggml_type want;   /* a type the output must hold */
} CASES[] = {
    {"qwen35-tiny-F16.gguf", "TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0, 0, GGML_TYPE_TQ1_0},
    {"qwen35-tiny-F16.gguf", "TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0, 0, GGML_TYPE_TQ2_0},
    {"qwen35-tiny-F16.gguf", "IQ1_S", LLAMA_FTYPE_MOSTLY_IQ1_S, 1, GGML_TYPE_IQ1_S},
    {"qwen35-tiny-F16.gguf", "IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M, 1, GGML_TYPE_IQ1_M},
    {"qwen35-tiny-F16.gguf", "IQ2_XXS", LLAMA_FTYPE_MOSTLY_IQ2_XXS, 1, GGML_TYPE_IQ2_XXS},
    {"qwen35-tiny-F16.gguf", "IQ2_XS", LLAMA_FTYPE_MOSTLY_IQ2_XS, 1, GGML_TYPE_IQ2_XS},
    {"qwen35-tiny-F16.gguf", "IQ2_M", LLAMA_FTYPE_MOSTLY_IQ2_M, 1, GGML_TYPE_IQ2_S},
    {"qwen35-tiny-F16.gguf", "IQ3_XXS", LLAMA_FTYPE_MOSTLY_IQ3_XXS, 1, GGML_TYPE_IQ3_XXS},
    {"qwen35-tiny-F16.gguf", "IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S, 0, GGML_TYPE_IQ3_S},
    {"qwen35moe-tiny-F16.gguf", "IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S, 0, GGML_TYPE_IQ3_S},
    {"qwen35moe-tiny-F16.gguf", "IQ1_M", LLAMA_FTYPE_MOSTLY_IQ1_M, 1, GGML_TYPE_IQ1_M},
    {"qwen35moe-tiny-F16.gguf", "MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE, 0, GGML_TYPE_MXFP4}, /* rest Q8_0 */
};

/* A uniform importance matrix for every tensor of 2 or more dimensions of the GGUF at path: ne[0] * ne[2] ones
 * each (the size llama_model_quantize expects), ending with a NULL name; *ones holds the values. NULL on
 * failure. Free with free_imatrix. */
static struct llama_model_imatrix_data *uniform_imatrix(const char *path, float **ones)
{
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g)
        return NULL;
    int64_t n = gguf_get_n_tensors(g), most = 1, m = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t *ne = gguf_get_tensor_ne(g, i);
        most = ne[0] * ne[2] > most ? ne[0] * ne[2] : most;
    }
    struct llama_model_imatrix_data *im = calloc((size_t)n + 1, sizeof *im);
    *ones = malloc(sizeof(float) * (size_t)most);
    for (int64_t k = 0; *ones && k < most; k++)
        (*ones)[k] = 1.0f;
    for (int64_t i = 0; im && *ones && i < n; i++) {
        const int64_t *ne = gguf_get_tensor_ne(g, i);
        if (ne[1] > 1)
            im[m++] = (struct llama_model_imatrix_data){strdup(gguf_get_tensor_name(g, i)), *ones,
                                                        (size_t)(ne[0] * ne[2])};
    }
    gguf_free(g);
    return im;
}

static void free_imatrix(struct llama_model_imatrix_data *im, float *ones)
{
    for (size_t i = 0; im && im[i].name; i++)
        free((void *)im[i].name);
    free(im);
    free(ones);
}

/* Quantize src into dst with the reference (2 threads), the token embedding and output head kept F16. 0 on
 * success. */
static int ref_quantize(const char *src, const char *dst, enum llama_ftype ftype, int with_imatrix)
{
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = N_THREADS;
    qp.ftype = ftype;
    qp.token_embedding_type = GGML_TYPE_F16;
    qp.output_tensor_type = GGML_TYPE_F16;
    float *ones = NULL;
    struct llama_model_imatrix_data *im = with_imatrix ? uniform_imatrix(src, &ones) : NULL;
    if (with_imatrix && (!im || !ones)) {
        free_imatrix(im, ones);
        return -1;
    }
    qp.imatrix = im;
    uint32_t rc = llama_model_quantize(src, dst, &qp);
    free_imatrix(im, ones);
    return rc ? -1 : 0;
}

/* Count the tensors of each type of the GGUF at path into counts[GGML_TYPE_COUNT] and print them. 0 on success. */
static int type_census(const char *name, const char *path, int *counts)
{
    memset(counts, 0, sizeof(int) * GGML_TYPE_COUNT);
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    CHECK(g != NULL, "%s: cannot read %s", name, path);
    if (!g)
        return -1;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++)
        counts[gguf_get_tensor_type(g, i)]++;
    gguf_free(g);
    printf("%-24s tensors:", name);
    for (int t = 0; t < GGML_TYPE_COUNT; t++)
        if (counts[t])
            printf(" %s %d", ggml_type_name((enum ggml_type)t), counts[t]);
    printf("\n");
    return 0;
}

/* Rows ref[n_rows][n] against got: all must be bitwise equal. Prints the count, the worst difference (relative to
 * the reference row's standard deviation) and the first differing row. */
static void check_bitwise(const char *name, const char *what, const float *ref, const float *got, int n_rows, int n)
{
    int equal = 0, first = -1;
    double worst = 0;
    for (int t = 0; t < n_rows; t++) {
        struct parity_row r;
        parity_compare_row(ref + (size_t)t * (size_t)n, got + (size_t)t * (size_t)n, n, &r);
        equal += r.bitwise;
        first = !r.bitwise && first < 0 ? t : first;
        double rel = r.std_ref > 0 ? r.max_abs / r.std_ref : r.max_abs;
        worst = rel > worst ? rel : worst;
    }
    printf("%-24s %-30s bitwise rows %d/%d", name, what, equal, n_rows);
    if (first >= 0)
        printf("  (first differing row %d, max diff %.3e x logit std)", first, worst);
    printf("\n");
    PARITY_CHECK_BITWISE(equal == n_rows, "%s: %s: %d of %d rows bitwise equal (max diff %.3e x logit std)", name,
                         what, equal, n_rows, worst);
}

/* loom's rows of tokens[n] into out[n][width]: one request in `numerics`, or token by token (one_by_one). */
static int loom_rows(const loom_model *lm, enum loom_numerics numerics, const int32_t *tokens, int n, int one_by_one,
                     float *out, int width)
{
    loom_error err = {0};
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = N_THREADS, .numerics = numerics, .n_ubatch = N_CTX};
    loom_session *s = loom_session_new(lm, &sp, &err);
    int rc = s ? LOOM_OK : -1;
    if (s && one_by_one)
        for (int i = 0; i < n && rc == LOOM_OK; i++)
            rc = loom_session_eval(s, tokens + i, 1, out + (size_t)i * (size_t)width, LOOM_LOGITS_LAST, &err);
    else if (s)
        rc = loom_session_eval(s, tokens, n, out, LOOM_LOGITS_ALL, &err);
    CHECK(rc == LOOM_OK, "loom evaluation (%d tokens%s): %s", n, one_by_one ? ", one by one" : "", err.msg);
    loom_session_free(s);
    return rc;
}

/* The reference's rows of tokens[N_TOK] in one batch into batch[N_TOK][n], then (after a reset) of the first
 * N_STEP token by token into step[N_STEP][n]. 0 on success. */
static int ref_rows(struct llama_model *rm, const int32_t *tokens, float *batch, float *step, int n)
{
    struct llama_context *ctx = parity_ref_context(rm, N_CTX, N_CTX, N_THREADS, 0);
    int rc = ctx ? parity_ref_decode(ctx, tokens, N_TOK, 0, batch, n) : -1;
    if (ctx)
        parity_ref_reset(ctx);
    for (int i = 0; ctx && i < N_STEP && rc == 0; i++)
        rc = parity_ref_decode(ctx, tokens + i, 1, i, step + (size_t)i * (size_t)n, n);
    CHECK(rc == 0, "reference evaluation failed: %d", rc);
    if (ctx)
        llama_free(ctx);
    return rc;
}

static void compare_file(const char *name, const char *path, const int32_t *tokens)
{
    loom_model *lm;
    struct llama_model *rm;
    int n;
    char why[sizeof(loom_error) + 64];
    const char *bad = parity_load_both(path, &lm, &rm, &n, why, sizeof why);
    CHECK(!bad, "%s: %s", name, bad);
    size_t rows = (size_t)N_TOK * (size_t)n;
    float *ref = malloc(rows * sizeof(float)), *ref_step = malloc(rows * sizeof(float));
    float *got = malloc(rows * sizeof(float));
    if (!bad && ref && ref_step && got && ref_rows(rm, tokens, ref, ref_step, n) == 0) {
        if (loom_rows(lm, LOOM_NUMERICS_REFERENCE_BATCH, tokens, N_TOK, 0, got, n) == LOOM_OK)
            check_bitwise(name, "batch (reference-batch)", ref, got, N_TOK, n);
        if (loom_rows(lm, LOOM_NUMERICS_REFERENCE_BATCH, tokens, N_STEP, 1, got, n) == LOOM_OK)
            check_bitwise(name, "token by token", ref_step, got, N_STEP, n);
        if (loom_rows(lm, LOOM_NUMERICS_CANONICAL, tokens, N_STEP, 0, got, n) == LOOM_OK)
            check_bitwise(name, "canonical batch vs ref tbt", ref_step, got, N_STEP, n);
    }
    free(ref);
    free(ref_step);
    free(got);
    parity_free_both(lm, rm);
}

/* Quantize case c's source with its recipe into dir, check the file holds its type, and compare the engines. */
static void run_case(size_t c, const char *cache, const char *dir, const int32_t *tokens)
{
    char src[1200], dst[1300], name[128];
    snprintf(src, sizeof src, "%s/models/%s", cache, CASES[c].src);
    CHECK(access(src, R_OK) == 0, "model %s is missing (scripts/prepare-models.sh makes it)", src);
    if (access(src, R_OK) != 0)
        return;
    snprintf(name, sizeof name, "%.*s-%s", (int)(strlen(CASES[c].src) - strlen("-F16.gguf")), CASES[c].src,
             CASES[c].recipe);
    snprintf(dst, sizeof dst, "%s/%s.gguf", dir, name);
    double t0 = parity_now();
    int rc = ref_quantize(src, dst, CASES[c].ftype, CASES[c].imatrix);
    CHECK(rc == 0, "%s: llama_model_quantize failed", name);
    if (rc != 0)
        return;
    printf("%-24s quantized by the reference in %.1f s%s\n", name, parity_now() - t0,
           CASES[c].imatrix ? " (uniform importance matrix)" : "");
    int counts[GGML_TYPE_COUNT];
    if (type_census(name, dst, counts) == 0) {
        CHECK(counts[CASES[c].want] > 0, "%s: the file holds no %s tensor", name, ggml_type_name(CASES[c].want));
        if (counts[CASES[c].want] > 0)
            compare_file(name, dst, tokens);
    }
    unlink(dst);
    printf("%-24s done in %.1f s\n", name, parity_now() - t0);
    fflush(stdout);
}

int main(void)
{
    int ref_ok = parity_ref_init() == 0;
    CHECK(ref_ok, "the reference engine is needed");
    char cache[1024], dir[] = "/tmp/loom-iq-XXXXXX", sel[256];
    int dir_ok = ref_ok && mkdtemp(dir) != NULL;
    CHECK(!ref_ok || dir_ok, "mkdtemp %s", dir);
    if (!dir_ok)
        return test_finish();
    parity_cache_dir(cache, sizeof cache);
    int32_t tokens[N_TOK];
    uint64_t st = 0x1C9A7D5ull;
    for (int i = 0; i < N_TOK; i++)
        tokens[i] = (int32_t)(parity_splitmix64(&st) % 151643u); /* regular byte-level BPE ids of the vocabulary */
    double t0 = parity_now();
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        snprintf(sel, sizeof sel, "%s/%s", CASES[c].src, CASES[c].recipe);
        if (parity_model_selected(sel))
            run_case(c, cache, dir, tokens);
    }
    printf("all cases in %.1f s\n", parity_now() - t0);
    rmdir(dir);
    llama_backend_free();
    return test_finish();
}
