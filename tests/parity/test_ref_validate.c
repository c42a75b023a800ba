/* test_ref_validate.c — loom's row validators (the trait table's validate_row) against llama.cpp's
 * ggml_validate_row_data as the oracle: the same verdict on random-byte rows of every type loom knows
 * (random F16 scales are inf or NaN one time in 32), on every weight quantizer's output for rows of huge
 * values (whose F16 scales overflow), and end to end: llama_model_quantize and loom_quant_write both
 * refuse, or both accept with equal bytes, the tiny F32 model with one matrix scaled up. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml.h"
#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/quantize.h"
#include "parity.h"
#include "util/pool.h"
#include "test.h"
#include "test_rng.h"

/* ggml_validate_row_data prints every failure to stderr: silence fd 2 around the bulk comparisons. */
static int quiet_stderr(int on, int saved)
{
    fflush(stderr);
    if (on) {
        int keep = dup(2), devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 2);
            close(devnull);
        }
        return keep;
    }
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    return -1;
}

static int loom_valid(uint32_t type, const void *row, int64_t n)
{
    struct loom_row_fault f;
    return loom_type_validate_rows(type, row, n, 1, &f) < 0;
}

/* Random bytes, 3000 rows per type: verdicts must agree, and both verdicts must occur (except Q8_1, which
 * ggml rejects outright). */
static void test_random_rows(void)
{
    enum { ROWS = 3000, MAX_BYTES = 8 * 292 };
    static uint8_t row[MAX_BYTES];
    for (uint32_t type = 0; type < LOOM_TYPE_COUNT; type++) {
        const struct loom_type_traits *tr = loom_type_traits(type);
        if (!tr)
            continue;
        int64_t n = tr->block_size == 1 ? 300 : 8 * tr->block_size;
        size_t bytes = loom_type_row_bytes(type, n);
        int differ = 0, n_invalid = 0;
        int saved = quiet_stderr(1, -1);
        for (int r = 0; r < ROWS; r++) {
            for (size_t i = 0; i < bytes; i++)
                row[i] = (uint8_t)rnd_u32();
            int ref = ggml_validate_row_data((enum ggml_type)type, row, bytes), got = loom_valid(type, row, n);
            differ += ref != got;
            n_invalid += !ref;
        }
        quiet_stderr(0, saved);
        CHECK(differ == 0, "%s: %d of %d random rows judged differently from ggml_validate_row_data", tr->name,
              differ, ROWS);
        CHECK(type == LOOM_TYPE_Q8_1 ? n_invalid == ROWS : n_invalid > 0 && n_invalid < ROWS,
              "%s: %d of %d rows invalid: the sample must hold both verdicts", tr->name, n_invalid, ROWS);
        printf("validate %-6s: %d random rows, %d invalid, verdicts equal to ggml's\n", tr->name, ROWS, n_invalid);
    }
}

/* Rows of magnitude 10^e (e = 3..38), constant, alternating and random in sign, and one 32-value spike in
 * Gaussian noise: every quantizer's output judged alike by both (the bytes are ggml's, test_ref_quantize). */
static void test_quantized_rows(void)
{
    enum { N = 512 };
    static float x[N];
    static uint8_t q[N * 4];
    for (uint32_t type = 0; type < LOOM_TYPE_COUNT; type++) {
        const struct loom_type_traits *tr = loom_type_traits(type);
        if (!tr || !tr->quantize)
            continue;
        int differ = 0, n_invalid = 0, n_rows = 0;
        int saved = quiet_stderr(1, -1);
        for (int e = 3; e <= 38; e++)
            for (int pattern = 0; pattern < 4; pattern++, n_rows++) {
                float mag = powf(10.f, (float)e);
                for (int i = 0; i < N; i++)
                    x[i] = pattern == 0   ? mag
                           : pattern == 1 ? (i % 2 ? mag : -mag)
                           : pattern == 2 ? mag * rnd_f()
                                          : (i >= 64 && i < 96 ? mag : 0.05f * rnd_f());
                tr->quantize(x, q, N);
                int ref = ggml_validate_row_data((enum ggml_type)type, q, loom_type_row_bytes(type, N));
                differ += ref != loom_valid(type, q, N);
                n_invalid += !ref;
            }
        quiet_stderr(0, saved);
        /* MXFP4's E8M0 scale spans every float exponent: no value makes its invalid code (0xff) */
        CHECK(differ == 0 && (n_invalid > 0 || type == LOOM_TYPE_MXFP4),
              "%s: %d of %d quantized rows judged differently (%d invalid)", tr->name, differ, n_rows, n_invalid);
        printf("validate %-6s: %d quantized huge-value rows, %d with a non-finite scale, verdicts equal\n", tr->name,
               n_rows, n_invalid);
    }
}

/* ---- end to end -------------------------------------------------------------------------------------- */

struct scaled_copy {
    const struct loom_gguf *src;
    const char *name; /* the tensor scaled */
    float factor;
};

static int fill_scaled(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)err;
    const struct scaled_copy *c = ctx;
    const struct loom_gguf_tensor *t = &c->src->tensors[index];
    memcpy(buf, t->data, (size_t)nbytes);
    if (loom_gguf_str_eq(t->name, c->name))
        for (float *f = buf, *end = f + nbytes / sizeof(float); f < end; f++)
            *f *= c->factor;
    return LOOM_OK;
}

#define EMBD_ROWS 512

/* src's metadata and tensors with tensor `name` (F32) multiplied by factor, into path; token_embd cut to its
 * first EMBD_ROWS rows, which keeps both engines' runs short. */
static int write_scaled(const struct loom_gguf *src, const char *name, float factor, const char *path)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    int rc = w ? LOOM_OK : LOOM_E_NOMEM;
    for (uint64_t i = 0; i < src->n_kv && !rc; i++)
        rc = loom_gguf_writer_copy_kv(w, &src->kv[i]);
    for (uint64_t i = 0; i < src->n_tensors && !rc; i++) {
        const struct loom_gguf_tensor *t = &src->tensors[i];
        char tname[128];
        snprintf(tname, sizeof tname, "%.*s", (int)t->name.len, t->name.ptr);
        uint64_t ne[LOOM_GGUF_MAX_DIMS];
        memcpy(ne, t->ne, sizeof ne);
        if (!strcmp(tname, "token_embd.weight") && ne[1] > EMBD_ROWS)
            ne[1] = EMBD_ROWS; /* the first rows only: quantizing checks no shape against the vocabulary */
        rc = loom_gguf_writer_add_tensor(w, tname, t->type, t->n_dims, ne);
    }
    struct scaled_copy c = {src, name, factor};
    loom_error err = {0};
    if (!rc)
        rc = loom_gguf_writer_write(w, path, fill_scaled, &c, &err);
    loom_gguf_writer_free(w);
    CHECK(rc == LOOM_OK, "writing %s: %s", path, err.msg);
    return rc;
}

/* Both engines on in under recipe name: the same verdict, and when both accept, equal tensor bytes. */
static void compare_recipe(const char *in, const char *recipe, const char *dir, struct loom_pool *pool,
                           const char *what)
{
    const struct loom_quant_recipe *r = loom_quant_find_recipe(recipe);
    char ref_path[1200], loom_path[1200];
    snprintf(ref_path, sizeof ref_path, "%s/ref-%s.gguf", dir, recipe);
    snprintf(loom_path, sizeof loom_path, "%s/loom-%s.gguf", dir, recipe);
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 2;
    qp.ftype = (enum llama_ftype)r->ftype;
    int saved = quiet_stderr(1, -1);
    uint32_t ref_rc = llama_model_quantize(in, ref_path, &qp);
    quiet_stderr(0, saved);
    struct loom_gguf *g = 0, *a = 0, *b = 0;
    loom_error err = {0};
    int rc = loom_gguf_open(in, &g, &err);
    if (!rc)
        rc = loom_quant_write(g, r, loom_path, pool, NULL, NULL, NULL, NULL, &err);
    CHECK((ref_rc == 0) == (rc == LOOM_OK), "%s %s: reference %s, loom %s (%s)", what, recipe,
          ref_rc ? "refuses" : "accepts", rc ? "refuses" : "accepts", rc ? err.msg : "");
    if (rc) /* a recipe that needs an importance matrix is refused for that first, by both */
        CHECK((strstr(err.msg, "tensor 'blk.0.ffn_up.weight' row ") && strstr(err.msg, "is inf")) ||
                  strstr(err.msg, "which needs an importance matrix, found none"),
              "%s %s: message '%s' must name the tensor, the row and the inf scale (or the missing importance "
              "matrix)", what, recipe, err.msg);
    if (!rc && !ref_rc && loom_gguf_open(ref_path, &a, &err) == LOOM_OK && loom_gguf_open(loom_path, &b, &err) == LOOM_OK) {
        int same = a->n_tensors == b->n_tensors;
        for (uint64_t i = 0; same && i < b->n_tensors; i++) {
            char tname[128];
            snprintf(tname, sizeof tname, "%.*s", (int)b->tensors[i].name.len, b->tensors[i].name.ptr);
            const struct loom_gguf_tensor *t = loom_gguf_find_tensor(a, tname);
            same = t && t->type == b->tensors[i].type && t->nbytes == b->tensors[i].nbytes &&
                   !memcmp(t->data, b->tensors[i].data, (size_t)t->nbytes);
        }
        CHECK(same, "%s %s: both accept, tensor bytes must be equal", what, recipe);
    }
    printf("%s %-6s: reference %s, loom %s%s%s\n", what, recipe, ref_rc ? "refuses" : "accepts",
           rc ? "refuses: " : "accepts", rc ? err.msg : "", !rc && !ref_rc ? " (equal bytes)" : "");
    loom_gguf_close(b);
    loom_gguf_close(a);
    loom_gguf_close(g);
    unlink(ref_path);
    unlink(loom_path);
    CHECK(access(loom_path, F_OK) != 0, "no output file may be left behind");
}

/* The tiny F32 model with blk.0.ffn_up.weight (values up to about 0.1) scaled to about 1e6 (Q4_0's F16
 * scale overflows, Q8_0's does not: both engines decide so per type) and to about 1e9 (every recipe's type
 * overflows), under every recipe. */
static void test_model(const char *dir)
{
    char cache[1024], tiny[1200], in[1200];
    parity_cache_dir(cache, sizeof cache);
    snprintf(tiny, sizeof tiny, "%s/models/qwen35-tiny-F32.gguf", cache);
    snprintf(in, sizeof in, "%s/scaled.gguf", dir);
    struct loom_gguf *src = 0;
    loom_error err = {0};
    CHECK(loom_gguf_open(tiny, &src, &err) == LOOM_OK, "%s: %s (run scripts/prepare-models.sh)", tiny, err.msg);
    if (!src)
        return;
    struct loom_pool *pool = loom_pool_new(2);
    static const float factors[] = {1e7f, 1e10f};
    for (int k = 0; k < 2; k++)
        if (write_scaled(src, "blk.0.ffn_up.weight", factors[k], in) == LOOM_OK)
            for (const struct loom_quant_recipe *r = loom_quant_recipes; r->name; r++)
                compare_recipe(in, r->name, dir, pool, k ? "x1e10" : "x1e7");
    unlink(in);
    loom_pool_free(pool);
    loom_gguf_close(src);
}

int main(void)
{
    if (parity_ref_init() != 0)
        return 1;
    test_random_rows();
    test_quantized_rows();
    char dir[] = "/tmp/loom-validate-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    double t0 = parity_now();
    test_model(dir);
    printf("end to end: %.1f s\n", parity_now() - t0);
    rmdir(dir);
    llama_backend_free();
    return test_finish();
}
