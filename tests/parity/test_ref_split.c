/* test_ref_split.c — split models against the reference engine: the prepared tiny dense and tiny-moe files are
 * split in three as llama.cpp's gguf-split splits them (tests/split_fixture.h), the reference loads the split
 * model by its first part and its token-by-token logits equal its own on the unsplit file and loom's on the
 * split model, bitwise; and the reference refuses the broken sets loom refuses (a missing part, a part out of
 * place, a wrong split.tensors.count, a tensor in two parts, a later part named); a split model quantized by
 * loom (as by llama_model_quantize) gives the file the unsplit model gives, bytewise. Models: $LOOM_CACHE/models
 * (scripts/prepare-models.sh); a missing one is skipped with a message. Files go to a private folder in /tmp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "parity.h"
#include "test.h"
#include "split_fixture.h"

enum { N_TOK = 12, N_CTX = 64 };

static const char *const MODELS[] = {"qwen35-tiny-F16.gguf", "qwen35moe-tiny-Q4_K_M.gguf"};
static const int32_t TOKENS[N_TOK] = {785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13, 220, 198};

static char dir[] = "/tmp/loom-test-ref-split-XXXXXX";

/* The reference's token-by-token logits of TOKENS for the file at path ([N_TOK][*n], malloc'd), or NULL. */
static float *ref_logits(const char *path, int *n)
{
    struct llama_model *rm = parity_ref_load(path, 1);
    CHECK(rm != NULL, "reference load %s", path);
    if (!rm)
        return NULL;
    *n = parity_ref_n_vocab(rm);
    struct llama_context *ctx = parity_ref_context(rm, N_CTX, N_CTX, 2, 0);
    float *out = ctx ? malloc(sizeof(float) * (size_t)*n * N_TOK) : NULL;
    int rc = out ? 0 : -1;
    for (int i = 0; i < N_TOK && !rc; i++)
        rc = parity_ref_decode(ctx, &TOKENS[i], 1, i, out + (size_t)i * *n, *n);
    CHECK(rc == 0, "reference decode %s: %d", path, rc);
    if (rc) {
        free(out);
        out = NULL;
    }
    if (ctx)
        llama_free(ctx);
    llama_model_free(rm);
    return out;
}

/* loom's token-by-token logits (CANONICAL: the reference's single-token orders) of the model at path. */
static float *loom_logits(const char *path, int *n)
{
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    CHECK(m != NULL, "loom load %s: %s", path, err.msg);
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = 2};
    loom_session *s = m ? loom_session_new(m, &sp, &err) : NULL;
    *n = m ? loom_model_n_logits(m) : 0;
    float *out = s ? malloc(sizeof(float) * (size_t)*n * N_TOK) : NULL;
    int rc = out ? LOOM_OK : LOOM_E_NOMEM;
    for (int i = 0; i < N_TOK && !rc; i++)
        rc = loom_session_eval(s, &TOKENS[i], 1, out + (size_t)i * *n, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK, "loom eval %s: %s", path, err.msg);
    if (rc) {
        free(out);
        out = NULL;
    }
    loom_session_free(s);
    loom_model_free(m);
    return out;
}

static int same(const float *a, const float *b, int na, int nb)
{
    return a && b && na == nb && !memcmp(a, b, sizeof(float) * (size_t)na * N_TOK);
}

/* Both engines' verdicts on loading path: refused by both (loom's message holding want). */
static void both_refuse(const char *path, const char *want, const char *what)
{
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    struct llama_model *rm = parity_ref_load(path, 1);
    CHECK(!m && strstr(err.msg, want), "%s: loom %s", what, m ? "loaded it" : err.msg);
    CHECK(!rm, "%s: the reference loaded it", what);
    loom_model_free(m);
    if (rm)
        llama_model_free(rm);
    printf("  both refuse %-28s loom: %s\n", what, err.msg);
}

/* A 3-part set under prefix from the open file `in`, part bad_k written with the keys and range given. */
static void write_set(const loom_gguf *in, const char *prefix, uint32_t bad_k, uint32_t no, int32_t total,
                      uint64_t lo, uint64_t hi)
{
    uint64_t n = in->n_tensors;
    loom_error err = {0};
    for (uint32_t k = 0; k < 3; k++) {
        char path[1024];
        struct loom_split_part p = {k, 3, total, k * n / 3, (k + 1) * n / 3 - k * n / 3, k == 0};
        if (k == bad_k)
            p = (struct loom_split_part){no, 3, total, lo, hi - lo, k == 0};
        loom_split_path(path, sizeof path, prefix, k, 3, NULL);
        CHECK(loom_gguf_write_part(in, &p, path, &err) == LOOM_OK, "write %s: %s", path, err.msg);
    }
}

static void check_refusals(const char *whole)
{
    loom_gguf *in = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open(whole, &in, &err) == LOOM_OK, "open %s: %s", whole, err.msg);
    if (!in)
        return;
    uint64_t n = in->n_tensors;
    int32_t nt = (int32_t)n;
    char prefix[512], first[1024], second[1024], third[1024];
    snprintf(prefix, sizeof prefix, "%s/bad", dir);
    loom_split_path(first, sizeof first, prefix, 0, 3, NULL);
    loom_split_path(second, sizeof second, prefix, 1, 3, NULL);
    loom_split_path(third, sizeof third, prefix, 2, 3, NULL);
    write_set(in, prefix, 9, 0, nt, 0, 0);
    unlink(third);
    both_refuse(first, "No such file or directory", "a missing part");
    write_set(in, prefix, 1, 2, nt, n / 3, 2 * n / 3);
    both_refuse(first, "key 'split.no': expected 1", "a part out of place");
    write_set(in, prefix, 9, 0, nt + 3, 0, 0);
    both_refuse(first, "key 'split.tensors.count'", "a wrong tensor count");
    write_set(in, prefix, 1, 1, nt + 1, n / 3 - 1, 2 * n / 3);
    both_refuse(first, "expected in one part", "a tensor in two parts");
    write_set(in, prefix, 9, 0, nt, 0, 0);
    both_refuse(second, "name its first part instead", "the second part named");
    loom_gguf_close(in);
}

/* The file at path (malloc'd, *n bytes), or NULL. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long len = f && !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
    if (len >= 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)len + 1)) &&
        fread(buf, 1, (size_t)len, f) != (size_t)len) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    *n = (size_t)(len < 0 ? 0 : len);
    return buf;
}

/* Two files of equal bytes (message names what). */
static void check_same_file(const char *a, const char *b, const char *what)
{
    size_t na = 0, nb = 0;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    int eq = x && y && na == nb && !memcmp(x, y, na);
    CHECK(eq, "%s: %s (%zu bytes) and %s (%zu bytes) differ", what, a, na, b, nb);
    printf("  %-58s %s (%zu bytes)\n", what, eq ? "bytewise equal" : "DIFFER", na);
    free(x);
    free(y);
}

/* A split model quantized (Q8_0) by llama_model_quantize and by loom: each engine writes the file it writes from
 * the unsplit model, byte for byte (one file, split keys dropped; test_ref_quantize checks loom's against the
 * reference's on the unsplit file). */
static void check_quantize(const char *whole, const char *first)
{
    static const char *const names[4] = {"ref-split", "ref-whole", "loom-split", "loom-whole"};
    char out[4][700];
    for (int i = 0; i < 4; i++)
        snprintf(out[i], sizeof out[i], "%s/%s-q8.gguf", dir, names[i]);
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 2;
    qp.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
    CHECK(llama_model_quantize(first, out[0], &qp) == 0 && llama_model_quantize(whole, out[1], &qp) == 0,
          "llama_model_quantize failed");
    loom_quantize_options qo = {.n_threads = 2};
    for (int i = 0; i < 2; i++) {
        loom_gguf *g = NULL;
        loom_error err = {0};
        int rc = loom_gguf_open_model(i ? whole : first, &g, &err);
        if (!rc)
            rc = loom_quantize(g, "Q8_0", out[2 + i], &qo, &err);
        CHECK(rc == LOOM_OK, "loom quantize: %s", err.msg);
        loom_gguf_close(g);
    }
    check_same_file(out[0], out[1], "Q8_0 by llama_model_quantize, split vs unsplit input:");
    check_same_file(out[2], out[3], "Q8_0 by loom quantize, split vs unsplit input:");
}

static void check_model(const char *models, const char *file, int refusals)
{
    char whole[1200], prefix[600], first[1200];
    snprintf(whole, sizeof whole, "%s/%s", models, file);
    if (access(whole, R_OK) != 0) {
        printf("skip %s: not found (run scripts/prepare-models.sh)\n", whole);
        return;
    }
    snprintf(prefix, sizeof prefix, "%s/%.*s", dir, (int)(strlen(file) - 5), file);
    if (split_write(whole, prefix, 3, 0))
        return;
    loom_split_path(first, sizeof first, prefix, 0, 3, NULL);
    int nr = 0, nw = 0, nl = 0;
    float *ref_split = ref_logits(first, &nr), *ref_whole = ref_logits(whole, &nw), *lm = loom_logits(first, &nl);
    CHECK(same(ref_split, ref_whole, nr, nw), "%s: the reference's logits on the split model differ from its own "
          "on the unsplit file", file);
    PARITY_CHECK_BITWISE(same(ref_split, lm, nr, nl),
                         "%s: loom's logits on the split model differ from the reference's", file);
    printf("%-30s split in 3: reference split == reference unsplit: %s, loom split == reference split: %s (%d "
           "tokens x %d logits)\n", file, same(ref_split, ref_whole, nr, nw) ? "bitwise" : "NO",
           same(ref_split, lm, nr, nl) ? "bitwise" : "NO", N_TOK, nl);
    free(ref_split);
    free(ref_whole);
    free(lm);
    if (!refusals)
        return;
    check_quantize(whole, first);
    check_refusals(whole);
}

int main(void)
{
    char cache[1000], models[1100];
    if (parity_ref_init() != 0 || !mkdtemp(dir)) {
        CHECK(0, "reference init or mkdtemp failed");
        return test_finish();
    }
    snprintf(models, sizeof models, "%s/models", parity_cache_dir(cache, sizeof cache));
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (parity_model_selected(MODELS[i]))
            check_model(models, MODELS[i], i == 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
