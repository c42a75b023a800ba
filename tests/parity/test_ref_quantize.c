/* test_ref_quantize.c — loom's weight quantization against llama.cpp's as the oracle: every type with a
 * loom quantizer must produce the bytes of ggml_quantize_chunk (no importance matrix) on random and edge
 * rows, and `loom quantize` (loom_quant_write) on the synthetic tiny F16 model must give the tensor types
 * and data of llama_model_quantize, bytewise, for Q4_K_M, Q5_K_M, Q6_K and Q8_0,
 * with the same metadata, the whole file byte for byte, and the reference must load loom's files; every other recipe whose default type
 * has a loom quantizer is checked the same way. The mixture-of-experts presets (tiny-moe and its variants,
 * which take each branch of the reference's expert recipe) and the dense tiny preset are written in F32 by
 * loom synth and checked the same way under the four recipes; `loom synth --type RECIPE` (the quantized file
 * written directly) must equal loom quantize's file of the F32 model byte for byte. LOOM_QUANT_MID=1 checks
 * moe-mid the same way under Q4_K_M (outside the default suite: 26 GB of F32 in /tmp). Then Q4_K_M on the 0.8b
 * F16 model (about 20 s per engine on 2 cores; LOOM_QUANT_0P8B=0 skips it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/quantize.h"
#include "model/synth.h"
#include "parity.h"
#include "util/pool.h"
#include "test.h"

#define ROW 512 /* elements per test row: two 256-blocks, sixteen 32-blocks */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double rnd_unit(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}
/* approximately normal (sum of 4 uniforms), times scale */
static float rnd_normal(float scale)
{
    return (float)((rnd_unit() + rnd_unit() + rnd_unit() + rnd_unit() - 2.0) * 1.7) * scale;
}

/* Fill rows[n_rows][ROW]: random rows over 16 decades of scale, then edge rows. Returns the row count. */
static int make_rows(float *rows, int cap)
{
    int r = 0;
    for (int k = 0; k < 48 && r < cap; k++, r++)
        for (int i = 0; i < ROW; i++)
            rows[r * ROW + i] = rnd_normal(powf(10.f, (float)(k % 16) - 8.f));
    static const float consts[] = {0.0f, -0.0f, 1.0f, -3.5f, 1e-30f, 1e-40f, 1e30f, -3e38f, 65504.f, 6e-8f};
    for (size_t c = 0; c < sizeof consts / sizeof consts[0] && r < cap; c++, r++)
        for (int i = 0; i < ROW; i++)
            rows[r * ROW + i] = consts[c];
    /* a spike in zeros, a positive-only row, alternating signs, one huge outlier among small values,
     * subnormal noise, and mixed half-zero groups */
    float *x = rows + r++ * ROW;
    memset(x, 0, ROW * sizeof *x);
    x[77] = 2.5f;
    x = rows + r++ * ROW;
    for (int i = 0; i < ROW; i++)
        x[i] = fabsf(rnd_normal(1.f)) + 0.5f;
    x = rows + r++ * ROW;
    for (int i = 0; i < ROW; i++)
        x[i] = i % 2 ? 1.f : -1.f;
    x = rows + r++ * ROW;
    for (int i = 0; i < ROW; i++)
        x[i] = rnd_normal(1e-3f);
    x[300] = 1e4f;
    x = rows + r++ * ROW;
    for (int i = 0; i < ROW; i++)
        x[i] = rnd_normal(1e-39f);
    x = rows + r++ * ROW;
    for (int i = 0; i < ROW; i++)
        x[i] = (i / 16) % 2 ? 0.f : rnd_normal(0.1f);
    return r;
}

/* Every type with a loom quantizer: each row bytewise equal to ggml_quantize_chunk's. */
static void test_rows(void)
{
    enum { CAP = 80 };
    float *rows = malloc(sizeof(float) * CAP * ROW);
    uint8_t *want = malloc(CAP * ROW * 4), *got = malloc(CAP * ROW * 4);
    int n_rows = make_rows(rows, CAP), n_types = 0;
    for (uint32_t type = 0; type < LOOM_TYPE_COUNT; type++) {
        const struct loom_type_traits *tr = loom_type_traits(type);
        if (!tr || !tr->quantize)
            continue;
        n_types++;
        size_t row_bytes = loom_type_row_bytes(type, ROW);
        size_t n = ggml_quantize_chunk((enum ggml_type)type, rows, want, 0, n_rows, ROW, NULL);
        CHECK(n == row_bytes * (size_t)n_rows, "%s: ggml wrote %zu bytes, expected %zu", tr->name, n,
              row_bytes * (size_t)n_rows);
        int bad = 0;
        for (int r = 0; r < n_rows; r++) {
            tr->quantize(rows + r * ROW, got + r * row_bytes, ROW);
            if (memcmp(got + r * row_bytes, want + r * row_bytes, row_bytes)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s row %d (first value %g) differs\n", tr->name, r, rows[r * ROW]);
            }
        }
        CHECK(bad == 0, "%s: %d of %d rows differ from ggml_quantize_chunk", tr->name, bad, n_rows);
        printf("quantize_row %-6s: %d/%d rows bytewise equal\n", tr->name, n_rows - bad, n_rows);
    }
    CHECK(n_types >= 4, "only %d types have a quantizer, expected Q8_0, Q4_K, Q5_K, Q6_K at least", n_types);
    free(rows);
    free(want);
    free(got);
}

/* Metadata of a and b: same keys in the same order with equal types and equal scalar or fixed-size array
 * values (string arrays: equal element type and count). */
static int same_kvs(const struct loom_gguf *a, const struct loom_gguf *b)
{
    static const size_t fixed[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (a->n_kv != b->n_kv) {
        fprintf(stderr, "  kv count %llu vs %llu\n", (unsigned long long)a->n_kv, (unsigned long long)b->n_kv);
        return 0;
    }
    for (uint64_t i = 0; i < a->n_kv; i++) {
        const struct loom_gguf_kv *x = &a->kv[i], *y = &b->kv[i];
        int ok = x->key.len == y->key.len && !memcmp(x->key.ptr, y->key.ptr, (size_t)x->key.len) && x->type == y->type;
        if (ok && x->type == LOOM_GGUF_STRING) {
            uint64_t len;
            memcpy(&len, x->data, sizeof len);
            ok = !memcmp(x->data, y->data, 8) && !memcmp(x->data + 8, y->data + 8, (size_t)len);
        } else if (ok && x->type == LOOM_GGUF_ARRAY) {
            ok = x->arr_type == y->arr_type && x->arr_n == y->arr_n &&
                 (x->arr_type == LOOM_GGUF_STRING || !memcmp(x->data, y->data, (size_t)x->arr_n * fixed[x->arr_type]));
        } else if (ok) {
            ok = !memcmp(x->data, y->data, fixed[x->type]);
        }
        if (!ok) {
            fprintf(stderr, "  kv %llu: '%.*s' vs '%.*s' differ\n", (unsigned long long)i, (int)x->key.len, x->key.ptr,
                    (int)y->key.len, y->key.ptr);
            return 0;
        }
    }
    return 1;
}

/* Tensors of loom's file equal (type, shape, bytes) to the same-named tensors of the reference's file;
 * returns the number that differ. */
static int diff_tensors(const struct loom_gguf *ref, const struct loom_gguf *got, const char *what)
{
    int bad = 0;
    for (uint64_t i = 0; i < got->n_tensors; i++) {
        const struct loom_gguf_tensor *g = &got->tensors[i];
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)g->name.len, g->name.ptr);
        const struct loom_gguf_tensor *r = loom_gguf_find_tensor(ref, name);
        int ok = r && r->type == g->type && !memcmp(r->ne, g->ne, sizeof r->ne) && r->nbytes == g->nbytes &&
                 !memcmp(r->data, g->data, (size_t)g->nbytes);
        if (!ok && bad++ < 5)
            fprintf(stderr, "  %s: tensor %s differs (ref type %d, loom type %u)\n", what, name, r ? (int)r->type : -1,
                    g->type);
    }
    return bad + (ref->n_tensors != got->n_tensors);
}

static void progress_none(void *ctx, uint64_t i, uint64_t n, uint64_t done, uint64_t total, const char *name)
{
    (void)ctx, (void)i, (void)n, (void)done, (void)total, (void)name;
}

/* Files a and b hold the same bytes. */
static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    static char x[1 << 16], y[1 << 16];
    while (same) {
        size_t na = fread(x, 1, sizeof x, fa), nb = fread(y, 1, sizeof y, fb);
        same = na == nb && !memcmp(x, y, na);
        if (na < sizeof x)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* The preset written directly under recipe r (synth --type) equals loom's quantization of its F32 file. */
static void test_direct(const struct loom_synth_params *f32, const struct loom_quant_recipe *r,
                        const char *loom_path, const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/direct-%s-%s.gguf", dir, f32->preset->name, r->name);
    struct loom_synth_params par = *f32;
    par.recipe = r;
    loom_error err = {0};
    int rc = loom_synth_write(&par, path, &err);
    CHECK(rc == LOOM_OK, "synth %s --type %s: %s", f32->preset->name, r->name, err.msg);
    int same = rc == LOOM_OK && same_file(path, loom_path);
    CHECK(same, "synth %s --type %s differs from synth F32 + loom quantize", f32->preset->name, r->name);
    if (same)
        printf("%s %-6s: synth --type %s is byte for byte synth F32 + loom quantize\n", f32->preset->name, r->name,
               r->name);
    unlink(path);
}

/* Quantize model with the reference and with loom under recipe `name` and compare the files; with synth
 * (the parameters that wrote model in F32), also the directly written quantized file. */
static void test_model(const char *model, const char *tag, const char *name, const char *dir, struct loom_pool *pool,
                       const struct loom_synth_params *synth)
{
    const struct loom_quant_recipe *r = loom_quant_find_recipe(name);
    char ref_path[1200], loom_path[1200];
    snprintf(ref_path, sizeof ref_path, "%s/ref-%s-%s.gguf", dir, tag, name);
    snprintf(loom_path, sizeof loom_path, "%s/loom-%s-%s.gguf", dir, tag, name);
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 2;
    qp.ftype = (enum llama_ftype)r->ftype;
    double t0 = parity_now();
    uint32_t ref_rc = llama_model_quantize(model, ref_path, &qp);
    double t1 = parity_now();
    CHECK(ref_rc == 0, "%s %s: llama_model_quantize failed", tag, name);
    struct loom_gguf *in = 0, *ref = 0, *got = 0;
    loom_error err = {0};
    int rc = loom_gguf_open(model, &in, &err);
    CHECK(rc == LOOM_OK, "open %s: %s", model, err.msg);
    if (rc == LOOM_OK) {
        rc = loom_quant_write(in, r, loom_path, pool, progress_none, 0, NULL, NULL, &err);
        CHECK(rc == LOOM_OK, "%s %s: loom_quant_write: %s", tag, name, err.msg);
    }
    double t2 = parity_now();
    if (ref_rc == 0 && rc == LOOM_OK && loom_gguf_open(ref_path, &ref, &err) == LOOM_OK &&
        loom_gguf_open(loom_path, &got, &err) == LOOM_OK) {
        int bad = diff_tensors(ref, got, name);
        CHECK(bad == 0, "%s %s: %d tensors differ from llama_model_quantize", tag, name, bad);
        CHECK(same_kvs(ref, got), "%s %s: metadata differs from llama_model_quantize's", tag, name);
        /* the whole file too: tensors in the reference's order (layer, then name), same offsets and padding */
        int whole = same_file(ref_path, loom_path);
        CHECK(whole, "%s %s: the file is not byte for byte llama_model_quantize's", tag, name);
        printf("%s %-6s: %llu/%llu tensors bytewise equal to llama_model_quantize, %zu bytes%s; ref %.2f s, loom "
               "%.2f s\n", tag, name, (unsigned long long)(got->n_tensors - (uint64_t)bad),
               (unsigned long long)ref->n_tensors, got->size, whole ? ", the whole file byte for byte" : "", t1 - t0,
               t2 - t1);
        struct llama_model *m = parity_ref_load(loom_path, 1);
        CHECK(m != NULL, "%s %s: the reference cannot load loom's file", tag, name);
        if (m)
            llama_model_free(m);
        if (synth)
            test_direct(synth, r, loom_path, dir);
    }
    loom_gguf_close(got);
    loom_gguf_close(ref);
    loom_gguf_close(in);
    unlink(ref_path);
    unlink(loom_path);
}

/* The synthetic preset written in F32 into dir, quantized by both engines under the first n_recipes of the four
 * recipes the issue names, and written directly under each. */
static void test_preset(const char *preset, size_t n_recipes, const char *vocab, const char *dir,
                        struct loom_pool *pool)
{
    static const char *const recipes[] = {"Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"};
    char tag[64], path[1200];
    snprintf(tag, sizeof tag, "%s-F32", preset);
    snprintf(path, sizeof path, "%s/%s.gguf", dir, tag);
    struct loom_synth_params par = {.preset = loom_synth_find_preset(preset), .wtype = LOOM_TYPE_F32,
                                    .seed = LOOM_SYNTH_DEFAULT_SEED, .vocab_path = vocab};
    loom_error err = {0};
    int rc = par.preset ? loom_synth_write(&par, path, &err) : LOOM_E_ARG;
    CHECK(rc == LOOM_OK, "synth %s F32: %s", preset, par.preset ? err.msg : "no such preset");
    for (size_t i = 0; rc == LOOM_OK && i < n_recipes && i < sizeof recipes / sizeof recipes[0]; i++)
        test_model(path, tag, recipes[i], dir, pool, &par);
    unlink(path);
}

int main(void)
{
    if (parity_ref_init() != 0)
        return 1;
    test_rows();
    char cache[1024], ref[1024], tiny[1200], big[1200], vocab[1200], dir[] = "/tmp/loom-quantize-XXXXXX";
    parity_cache_dir(cache, sizeof cache);
    parity_ref_dir(ref, sizeof ref);
    snprintf(tiny, sizeof tiny, "%s/models/qwen35-tiny-F16.gguf", cache);
    snprintf(big, sizeof big, "%s/models/qwen35-0.8b-F16.gguf", cache);
    snprintf(vocab, sizeof vocab, "%s/src/models/ggml-vocab-qwen35.gguf", ref);
    CHECK(access(tiny, R_OK) == 0, "%s missing (run scripts/prepare-models.sh)", tiny);
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    struct loom_pool *pool = loom_pool_new(2);
    for (const struct loom_quant_recipe *r = loom_quant_recipes; r->name; r++) {
        if (loom_type_traits(r->default_type)->quantize)
            test_model(tiny, "tiny", r->name, dir, pool, NULL);
        else
            printf("tiny %-6s: skipped, loom has no %s quantizer yet\n", r->name, loom_type_traits(r->default_type)->name);
    }
    test_preset("tiny", 4, vocab, dir, pool);
    int branches = 0; /* the expert recipe's branches the tiny-moe presets take: 8 experts, not 8, fused, separate */
    for (int i = 0; loom_synth_preset(i); i++)
        if (!strncmp(loom_synth_preset(i), "tiny-moe", 8)) {
            const struct loom_synth_preset *P = loom_synth_find_preset(loom_synth_preset(i));
            branches |= (P->n_expert == 8 ? 1 : 2) | (P->fused_gate_up ? 4 : 8);
            test_preset(P->name, 4, vocab, dir, pool);
        }
    CHECK(branches == 15, "the tiny-moe presets cover branches %#x of 0xf (8 experts, other counts, fused, separate)",
          branches);
    const char *mid_on = getenv("LOOM_QUANT_MID"); /* opt-in: a 26 GB F32 file, about an hour on 2 cores */
    if (mid_on && *mid_on == '1')
        test_preset("moe-mid", 1, vocab, dir, pool);
    const char *big_on = getenv("LOOM_QUANT_0P8B");
    if (!big_on || *big_on != '0') {
        CHECK(access(big, R_OK) == 0, "%s missing (run scripts/prepare-models.sh)", big);
        test_model(big, "0.8b", "Q4_K_M", dir, pool, NULL);
    }
    loom_pool_free(pool);
    rmdir(dir);
    llama_backend_free();
    return test_finish();
}
