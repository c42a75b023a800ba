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
 * F16 model (about 20 s per engine on 2 cores; LOOM_QUANT_0P8B=0 skips it).
 * With an importance matrix (tests/fixtures/imatrix, made by the reference's llama-imatrix): every type's
 * weighted quantizer on rows against ggml_quantize_chunk with weights, then the tiny dense and MoE models under
 * the recipes with the fixture imatrix, and with --tensor-type overrides (with and without the imatrix), each
 * file byte for byte llama_model_quantize's given the params llama-quantize builds (parity/ref_imatrix.h).
 * The grid IQ recipes (IQ3_S, IQ3_M, IQ3_XXS, IQ2_S, IQ2_M, IQ2_XS, IQ2_XXS; test_iq_recipes): IQ3_S and IQ3_M
 * without an imatrix, the others refused by both without one, all seven with the fixture imatrix, on the tiny
 * dense and MoE models (a subset by default, LOOM_QUANT_IQ_FULL=1 all). LOOM_QUANT_ROWS_ONLY=1 runs the row checks alone, LOOM_QUANT_IQ_ONLY=1 the grid IQ
 * recipes alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf/gguf.h"
#include "kernels/protos.h"
#include "kernels/types.h"
#include "model/imatrix.h"
#include "model/quantize.h"
#include "model/synth.h"
#include "parity.h"
#include "ref_imatrix.h"
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

/* The grid IQ types (IQ2_XXS..IQ3_S): the reference aborts (GGML_ASSERT in its neighbour search) on a row whose
 * squares overflow to inf, so those rows are compared for the other types only (loom's quantizer runs on them,
 * for crashes and sanitizer findings: loom_quant_write's row validation refuses such outputs). */
static int grid_iq(uint32_t type)
{
    return type == LOOM_TYPE_IQ2_XXS || type == LOOM_TYPE_IQ2_XS || type == LOOM_TYPE_IQ2_S ||
           type == LOOM_TYPE_IQ3_XXS || type == LOOM_TYPE_IQ3_S;
}
static int row_for(uint32_t type, const float *x)
{
    if (!grid_iq(type))
        return 1;
    for (int i = 0; i < ROW; i++)
        if (!(fabsf(x[i]) < 1e18f))
            return 0;
    return 1;
}

/* Quantize each row the reference accepts for the type with ggml_quantize_chunk into want (row by row) and
 * with loom's quantizer into got; returns the number of rows compared, *bad the number that differ. */
static int compare_rows(uint32_t type, const float *rows, int n_rows, const float *w, uint8_t *want, uint8_t *got,
                        int *bad, const char *what)
{
    const struct loom_type_traits *tr = loom_type_traits(type);
    size_t row_bytes = loom_type_row_bytes(type, ROW);
    int n = 0;
    for (int r = 0; r < n_rows; r++) {
        if (!row_for(type, rows + r * ROW)) { /* loom's quantizer still runs (no crash, clean under sanitizers) */
            if (w)
                tr->quantize_w(rows + r * ROW, got + r * row_bytes, ROW, w);
            else
                tr->quantize(rows + r * ROW, got + r * row_bytes, ROW);
            continue;
        }
        n++;
        size_t nb = ggml_quantize_chunk((enum ggml_type)type, rows + r * ROW, want + r * row_bytes, 0, 1, ROW, w);
        CHECK(nb == row_bytes, "%s: ggml wrote %zu bytes, expected %zu", tr->name, nb, row_bytes);
        if (w)
            tr->quantize_w(rows + r * ROW, got + r * row_bytes, ROW, w);
        else
            tr->quantize(rows + r * ROW, got + r * row_bytes, ROW);
        if (memcmp(got + r * row_bytes, want + r * row_bytes, row_bytes) && (*bad)++ < 3)
            fprintf(stderr, "  %s%s row %d (first value %g) differs\n", tr->name, what, r, rows[r * ROW]);
    }
    return n;
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
        if (!tr || !tr->quantize || type == LOOM_TYPE_IQ1_M) /* IQ1: test_rows_iq1 */
            continue;
        n_types++;
        int bad = 0, n = compare_rows(type, rows, n_rows, NULL, want, got, &bad, "");
        CHECK(bad == 0, "%s: %d of %d rows differ from ggml_quantize_chunk", tr->name, bad, n);
        printf("quantize_row %-6s: %d/%d rows bytewise equal\n", tr->name, n - bad, n);
    }
    CHECK(n_types >= 4, "only %d types have a quantizer, expected Q8_0, Q4_K, Q5_K, Q6_K at least", n_types);
    free(rows);
    free(want);
    free(got);
}

/* Importance weights for a row of ROW columns, kind k: random positive over 4 decades, all ones, a
 * quarter zero (columns an imatrix never saw), and one huge column among small ones. */
static void make_weights(float *w, int k)
{
    for (int i = 0; i < ROW; i++) {
        float r = (float)rnd_unit();
        w[i] = k == 0 ? powf(10.f, 4.f * r - 2.f) : k == 1 ? 1.f : k == 2 ? (i % 4 == 1 ? 0.f : r) : 1e-3f * r;
    }
    if (k == 3)
        w[123] = 1e6f;
}

/* Every type with a weighted quantizer (quantize_w): each row bytewise equal to ggml_quantize_chunk's with
 * the same importance matrix, for four kinds of weights. */
static void test_rows_weighted(void)
{
    enum { CAP = 80 };
    float *rows = malloc(sizeof(float) * CAP * ROW), w[ROW];
    uint8_t *want = malloc(CAP * ROW * 4), *got = malloc(CAP * ROW * 4);
    int n_rows = make_rows(rows, CAP), n_types = 0;
    for (uint32_t type = 0; type < LOOM_TYPE_COUNT; type++) {
        const struct loom_type_traits *tr = loom_type_traits(type);
        if (!tr || !tr->quantize_w || type == LOOM_TYPE_IQ1_S || type == LOOM_TYPE_IQ1_M) /* test_rows_iq1 */
            continue;
        n_types++;
        int bad = 0, n = 0;
        for (int k = 0; k < 4; k++) {
            make_weights(w, k);
            char what[32];
            snprintf(what, sizeof what, " weights %d", k);
            n += compare_rows(type, rows, n_rows, w, want, got, &bad, what);
        }
        CHECK(bad == 0, "%s: %d of %d weighted rows differ from ggml_quantize_chunk", tr->name, bad, n);
        printf("quantize_row_w %-6s: %d/%d rows (4 importance matrices) bytewise equal\n", tr->name, n - bad, n);
    }
    CHECK(n_types >= 9, "only %d types have a weighted quantizer, expected Q4_0, Q4_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS",
          n_types);
    free(rows);
    free(want);
    free(got);
}

/* TQ1_0, TQ2_0, MXFP4 (whose reference quantizers ignore an importance matrix) and IQ1_S, IQ1_M: rows bytewise
 * ggml_quantize_chunk's, without weights (not IQ1_S, which the reference refuses to quantize without) and with
 * the four kinds of weights. The rows are make_rows' without those whose squares overflow (1e30, -3e38: the
 * reference's IQ1 asserts on the NaN scales they give), plus rows of many equal values (ties in the IQ1 sort),
 * small integers (groups on and off the lattice) and sparse spikes. */
static void test_rows_iq1(void)
{
    enum { CAP = 84 };
    float *all = malloc(sizeof(float) * CAP * ROW), *rows = malloc(sizeof(float) * CAP * ROW), w[ROW];
    uint8_t *want = malloc(CAP * ROW * 4), *got = malloc(CAP * ROW * 4);
    int n_all = make_rows(all, CAP - 4), n_rows = 0;
    for (int r = 0; r < n_all; r++) {
        float amax = 0;
        for (int i = 0; i < ROW; i++)
            amax = fmaxf(amax, fabsf(all[r * ROW + i]));
        if (amax < 1e18f)
            memcpy(rows + ROW * n_rows++, all + r * ROW, ROW * sizeof *rows);
    }
    for (int k = 0; k < 4; k++, n_rows++)
        for (int i = 0; i < ROW; i++) {
            float *x = rows + n_rows * ROW;
            x[i] = k == 0 ? 0.25f : k == 1 ? (float)((int)(rnd_unit() * 5) - 2) : k == 2 ? (i % 7 ? 0.f : 1.f)
                 : (float)(i % 3) - 1.f;
        }
    static const uint32_t types[] = {LOOM_TYPE_TQ1_0, LOOM_TYPE_TQ2_0, LOOM_TYPE_MXFP4, LOOM_TYPE_IQ1_S,
                                     LOOM_TYPE_IQ1_M};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const struct loom_type_traits *tr = loom_type_traits(types[t]);
        size_t row_bytes = loom_type_row_bytes(types[t], ROW);
        int bad = 0, n = 0;
        for (int k = -1; k < 4; k++) {
            if (k < 0 && !tr->quantize)
                continue;
            if (k >= 0)
                make_weights(w, k);
            size_t wrote = ggml_quantize_chunk((enum ggml_type)types[t], rows, want, 0, n_rows, ROW, k < 0 ? NULL : w);
            CHECK(wrote == row_bytes * (size_t)n_rows, "%s: ggml wrote %zu bytes", tr->name, wrote);
            for (int r = 0; r < n_rows; r++, n++) {
                if (k >= 0 && tr->quantize_w)
                    tr->quantize_w(rows + r * ROW, got + r * row_bytes, ROW, w);
                else
                    tr->quantize(rows + r * ROW, got + r * row_bytes, ROW);
                if (memcmp(got + r * row_bytes, want + r * row_bytes, row_bytes) && bad++ < 3)
                    fprintf(stderr, "  %s weights %d row %d (first value %g) differs\n", tr->name, k, r, rows[r * ROW]);
            }
        }
        CHECK(bad == 0, "%s: %d of %d rows differ from ggml_quantize_chunk", tr->name, bad, n);
        printf("quantize_row %-6s: %d/%d rows (%s4 importance matrices) bytewise equal\n", tr->name, n - bad, n,
               tr->quantize ? "none and " : "");
    }
    CHECK(loom_iq1_quant_init() > 0, "IQ1 neighbour tables did not fit their static storage");
    free(all);
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

/* llama-quantize [--imatrix imatrix] [--tensor-type specs]... model OUT recipe against loom_quant_write_ex with
 * the same: the whole file byte for byte. */
static void test_model_x(const char *model, const char *tag, const char *name, const char *imatrix,
                         const char *const *specs, size_t n_specs, const char *dir, struct loom_pool *pool)
{
    const struct loom_quant_recipe *r = loom_quant_find_recipe(name);
    char ref_path[1200], loom_path[1200], what[200];
    snprintf(ref_path, sizeof ref_path, "%s/ref-x-%s-%s.gguf", dir, tag, name);
    snprintf(loom_path, sizeof loom_path, "%s/loom-x-%s-%s.gguf", dir, tag, name);
    snprintf(what, sizeof what, "%s %-6s%s%s", tag, name, imatrix ? " imatrix" : "", n_specs ? " overrides" : "");
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 2;
    qp.ftype = (enum llama_ftype)r->ftype;
    struct ref_quant_args ra = {0};
    int ok = (!imatrix || ref_quant_imatrix(&ra, &qp, imatrix) == 0) && ref_quant_tensor_types(&ra, &qp, specs,
                                                                                              n_specs) == 0;
    CHECK(ok, "%s: building the reference's params", what);
    double t0 = parity_now();
    uint32_t ref_rc = ok ? llama_model_quantize(model, ref_path, &qp) : 1;
    double t1 = parity_now();
    ref_quant_args_free(&ra);
    CHECK(ref_rc == 0, "%s: llama_model_quantize failed", what);
    struct loom_gguf *in = 0;
    struct loom_imatrix *im = 0;
    struct loom_quant_overrides *ov = 0;
    loom_error err = {0};
    int rc = loom_gguf_open(model, &in, &err);
    if (!rc && imatrix)
        rc = loom_imatrix_load(imatrix, &im, &err);
    if (!rc && n_specs)
        rc = loom_quant_overrides_parse(specs, n_specs, &ov, &err);
    struct loom_quant_extra x = {.imatrix = im, .overrides = ov};
    if (!rc)
        rc = loom_quant_write_ex(in, r, &x, loom_path, pool, progress_none, 0, NULL, NULL, &err);
    double t2 = parity_now();
    CHECK(rc == LOOM_OK, "%s: loom: %s", what, err.msg);
    struct loom_gguf *ref = 0, *got = 0;
    if (ref_rc == 0 && rc == LOOM_OK && loom_gguf_open(ref_path, &ref, &err) == LOOM_OK &&
        loom_gguf_open(loom_path, &got, &err) == LOOM_OK) {
        int bad = diff_tensors(ref, got, what);
        CHECK(bad == 0, "%s: %d tensors differ from llama_model_quantize", what, bad);
        CHECK(same_kvs(ref, got), "%s: metadata differs from llama_model_quantize's", what);
        int whole = same_file(ref_path, loom_path);
        CHECK(whole, "%s: the file is not byte for byte llama_model_quantize's", what);
        printf("%s: %llu/%llu tensors bytewise equal to llama_model_quantize, %zu bytes%s; ref %.2f s, loom %.2f s\n",
               what, (unsigned long long)(got->n_tensors - (uint64_t)bad), (unsigned long long)ref->n_tensors,
               got->size, whole ? ", the whole file byte for byte" : "", t1 - t0, t2 - t1);
    }
    loom_gguf_close(got);
    loom_gguf_close(ref);
    loom_quant_overrides_free(ov);
    loom_imatrix_free(im);
    loom_gguf_close(in);
    unlink(ref_path);
    unlink(loom_path);
}

/* The tiny model's metadata and tensors, for fill_copy: tensor i < n_src from src, the extra ones random. */
static const struct loom_gguf *copy_src;
static int fill_copy(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)err;
    if (index < copy_src->n_tensors) {
        memcpy(buf, copy_src->tensors[index].data, (size_t)nbytes);
        return LOOM_OK;
    }
    for (uint64_t i = 0; i < nbytes / 4; i++)
        ((float *)buf)[i] = rnd_normal(0.05f);
    return LOOM_OK;
}

/* The block-size fallbacks against the reference: the tiny model with two F32 matrices whose rows do not fit
 * 256-blocks (96 columns: the recipe's K-quant or IQ4_XS falls back to its 32-block type) or any block (48:
 * F16), quantized by both under five recipes. */
static void test_fallbacks(const char *cache, const char *dir, struct loom_pool *pool)
{
    char tiny[1200], path[1200];
    snprintf(tiny, sizeof tiny, "%s/models/qwen35-tiny-F16.gguf", cache);
    snprintf(path, sizeof path, "%s/tiny-odd.gguf", dir);
    struct loom_gguf *g = 0;
    loom_error err = {0};
    int rc = loom_gguf_open(tiny, &g, &err);
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    for (uint64_t i = 0; rc == LOOM_OK && i < g->n_kv; i++)
        rc = loom_gguf_writer_copy_kv(w, &g->kv[i]);
    for (uint64_t i = 0; rc == LOOM_OK && i < g->n_tensors; i++) {
        const struct loom_gguf_tensor *t = &g->tensors[i];
        char name[LOOM_GGUF_MAX_NAME];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        rc = loom_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne);
    }
    const uint64_t ne96[2] = {96, 8}, ne48[2] = {48, 8};
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_add_tensor(w, "blk.0.extra_a.weight", LOOM_TYPE_F32, 2, ne96);
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_add_tensor(w, "blk.1.extra_b.weight", LOOM_TYPE_F32, 2, ne48);
    copy_src = g;
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_write(w, path, fill_copy, NULL, &err);
    loom_gguf_writer_free(w);
    loom_gguf_close(g);
    CHECK(rc == LOOM_OK, "writing %s: %s", path, err.msg);
    static const char *const recipes[] = {"Q4_K_M", "Q5_K_S", "Q6_K", "IQ4_XS", "Q8_0"};
    for (size_t i = 0; rc == LOOM_OK && i < sizeof recipes / sizeof recipes[0]; i++)
        test_model_x(path, "tiny-odd", recipes[i], NULL, NULL, 0, dir, pool);
    unlink(path);
}

/* The recipes of the ternary, MXFP4 and IQ1 types, checked in test_low_bit_recipes rather than the generic
 * loops (IQ1 needs an importance matrix; the reference takes about 40 s per IQ1 file on 2 cores). */
static int low_bit_recipe(const char *name)
{
    static const char *const names[] = {"TQ1_0", "TQ2_0", "MXFP4_MOE", "IQ1_S", "IQ1_M"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

/* The grid IQ recipes (iq_quant.c's types), checked in test_iq_recipes rather than the generic loops. */
static int iq_grid_recipe(const char *name)
{
    static const char *const names[] = {"IQ3_S", "IQ3_M", "IQ3_XXS", "IQ2_S", "IQ2_M", "IQ2_XS", "IQ2_XXS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

/* The imatrix fixtures under every recipe (dense) and three (MoE), and overrides with and without them. */
static void test_imatrix_models(const char *cache, const char *dir, struct loom_pool *pool)
{
    char dense[1200], moe[1200];
    snprintf(dense, sizeof dense, "%s/models/qwen35-tiny-F16.gguf", cache);
    snprintf(moe, sizeof moe, "%s/models/qwen35moe-tiny-F16.gguf", cache);
    const char *im_dense = "tests/fixtures/imatrix/qwen35-tiny.imatrix.gguf";
    const char *im_moe = "tests/fixtures/imatrix/qwen35moe-tiny.imatrix.gguf";
    CHECK(access(im_dense, R_OK) == 0 && access(im_moe, R_OK) == 0, "imatrix fixtures missing (run from the "
          "repository root)");
    for (const struct loom_quant_recipe *r = loom_quant_recipes; r->name; r++)
        if (!iq_grid_recipe(r->name) && !low_bit_recipe(r->name)) /* test_iq_recipes, test_low_bit_recipes */
            test_model_x(dense, "tiny", r->name, im_dense, NULL, 0, dir, pool);
    static const char *const moe_recipes[] = {"Q4_K_M", "IQ4_XS", "Q4_0"};
    for (size_t i = 0; i < 3; i++)
        test_model_x(moe, "tiny-moe", moe_recipes[i], im_moe, NULL, 0, dir, pool);
    /* overrides: attn_v-like and ffn_down counters skipped, first match wins, \d, upper case, the float types,
     * IQ4_NL, Q4_1, Q2_K and Q3_K (types no recipe gives these models, weighted with the imatrix), and Q4_0 and
     * Q6_K for expert tensors (one row of weights per expert) */
    static const char *const dense_specs[] = {"blk\\.1\\.attn_qkv=Q8_0", "blk\\.\\d\\.ffn_down=q5_k",
                                              "BLK\\.0\\.FFN_DOWN=q8_0", "ffn_gate=iq4_nl", "attn_output=f16",
                                              "ssm_out=bf16", "ssm_alpha=f32", "token_embd=q4_1",
                                              "ffn_up=q4_1", "attn_gate=q2_k", "ssm_beta=q3_k"};
    test_model_x(dense, "tiny", "Q4_K_M", NULL, dense_specs, 11, dir, pool);
    test_model_x(dense, "tiny", "Q4_K_M", im_dense, dense_specs, 11, dir, pool);
    static const char *const moe_specs[] = {"ffn_down_exps=q6_k", "blk\\.0\\..*exps=q4_0", "shexp=q5_k",
                                            "attn_qkv=iq4_xs"};
    test_model_x(moe, "tiny-moe", "Q4_K_S", im_moe, moe_specs, 4, dir, pool);
}

/* Recipe `name` without an importance matrix: llama_model_quantize refuses it ("this quantization requires an
 * imatrix") and loom_quant_write_ex fails with an error naming the recipe and the importance matrix. */
static void test_refusal(const char *model, const char *tag, const char *name, const char *dir, struct loom_pool *pool)
{
    const struct loom_quant_recipe *r = loom_quant_find_recipe(name);
    char ref_path[1200], loom_path[1200];
    snprintf(ref_path, sizeof ref_path, "%s/ref-r-%s-%s.gguf", dir, tag, name);
    snprintf(loom_path, sizeof loom_path, "%s/loom-r-%s-%s.gguf", dir, tag, name);
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 2;
    qp.ftype = (enum llama_ftype)r->ftype;
    uint32_t ref_rc = llama_model_quantize(model, ref_path, &qp);
    CHECK(ref_rc != 0, "%s %s without an imatrix: llama_model_quantize accepted it", tag, name);
    struct loom_gguf *in = 0;
    loom_error err = {0};
    int rc = loom_gguf_open(model, &in, &err);
    CHECK(rc == LOOM_OK, "open %s: %s", model, err.msg);
    if (rc == LOOM_OK) {
        rc = loom_quant_write_ex(in, r, NULL, loom_path, pool, progress_none, 0, NULL, NULL, &err);
        int named = rc == LOOM_E_ARG && strstr(err.msg, name) && strstr(err.msg, "importance matrix");
        CHECK(named, "%s %s without an imatrix: loom gave %d '%s', expected a refusal naming the recipe", tag, name, rc,
              err.msg);
        if (named)
            printf("%s %-7s: refused without an imatrix by both (loom: %s)\n", tag, name, err.msg);
    }
    loom_gguf_close(in);
    unlink(ref_path);
    unlink(loom_path);
}

/* The grid IQ recipes on the tiny dense and MoE models, each file byte for byte llama_model_quantize's: IQ3_S and
 * IQ3_M without an importance matrix (the only ones the reference accepts without one; the other five refused by
 * both), and all seven with the fixture imatrix. By default the imatrix files keep token_embd in Q8_0 (an
 * override both engines take), and the MoE model runs IQ3_XXS and IQ2_XS only: the 248k-row token embedding (the
 * tied output) under these recipes with an imatrix is most of a file's time, the reference taking 10-50 s each;
 * its type choice is checked in test_quantize.c and the quantizers row by row above. LOOM_QUANT_IQ_FULL=1 runs
 * every recipe on both models without the override (about 9 minutes on 2 cores; all equal when last run). */
static void test_iq_recipes(const char *cache, const char *dir, struct loom_pool *pool)
{
    static const char *const with[] = {"IQ3_S", "IQ3_M", "IQ3_XXS", "IQ2_S", "IQ2_M", "IQ2_XS", "IQ2_XXS"};
    static const char *const embd[] = {"token_embd=q8_0"};
    const char *full_env = getenv("LOOM_QUANT_IQ_FULL");
    int full = full_env && *full_env == '1';
    const char *const *specs = full ? NULL : embd;
    size_t n_specs = full ? 0 : 1;
    char dense[1200], moe[1200];
    snprintf(dense, sizeof dense, "%s/models/qwen35-tiny-F16.gguf", cache);
    snprintf(moe, sizeof moe, "%s/models/qwen35moe-tiny-F16.gguf", cache);
    const char *im_dense = "tests/fixtures/imatrix/qwen35-tiny.imatrix.gguf";
    const char *im_moe = "tests/fixtures/imatrix/qwen35moe-tiny.imatrix.gguf";
    for (size_t i = 0; i < 2; i++) {
        test_model_x(dense, "tiny", with[i], NULL, NULL, 0, dir, pool);
        if (full)
            test_model_x(moe, "tiny-moe", with[i], NULL, NULL, 0, dir, pool);
    }
    for (size_t i = 2; i < 7; i++)
        test_refusal(dense, "tiny", with[i], dir, pool);
    for (size_t i = 0; i < 7; i++) {
        test_model_x(dense, "tiny", with[i], im_dense, specs, n_specs, dir, pool);
        if (full || i == 2 || i == 5)
            test_model_x(moe, "tiny-moe", with[i], im_moe, specs, n_specs, dir, pool);
    }
}

/* TQ1_0, TQ2_0, MXFP4_MOE, IQ1_S, IQ1_M on the tiny dense and MoE models, each file byte for byte
 * llama_model_quantize's: the first three without and with the fixture imatrix (which their quantizers
 * ignore), IQ1_S and IQ1_M refused by both without one and with it checked with token_embd overridden to Q8_0:
 * the token embedding (tied: the output's Q5_K under IQ1) of 152k rows with the imatrix takes the reference
 * about 35 s on 2 cores; the whole files were checked equal once (see quantize.c), the choice is checked in
 * test_quantize.c and the weighted Q5_K quantizer by the other recipes. */
static void test_low_bit_recipes(const char *cache, const char *dir, struct loom_pool *pool)
{
    char dense[1200], moe[1200];
    snprintf(dense, sizeof dense, "%s/models/qwen35-tiny-F16.gguf", cache);
    snprintf(moe, sizeof moe, "%s/models/qwen35moe-tiny-F16.gguf", cache);
    const char *im_dense = "tests/fixtures/imatrix/qwen35-tiny.imatrix.gguf";
    const char *im_moe = "tests/fixtures/imatrix/qwen35moe-tiny.imatrix.gguf";
    static const char *const embd[] = {"token_embd=q8_0"};
    test_model_x(dense, "tiny", "TQ1_0", NULL, NULL, 0, dir, pool);
    test_model_x(moe, "tiny-moe", "TQ2_0", NULL, NULL, 0, dir, pool);
    test_model_x(dense, "tiny", "MXFP4_MOE", NULL, NULL, 0, dir, pool);
    test_model_x(moe, "tiny-moe", "MXFP4_MOE", NULL, NULL, 0, dir, pool);
    test_model_x(moe, "tiny-moe", "TQ1_0", im_moe, NULL, 0, dir, pool);
    test_model_x(dense, "tiny", "TQ2_0", im_dense, NULL, 0, dir, pool);
    test_model_x(moe, "tiny-moe", "MXFP4_MOE", im_moe, NULL, 0, dir, pool);
    test_refusal(dense, "tiny", "IQ1_S", dir, pool);
    test_refusal(moe, "tiny-moe", "IQ1_M", dir, pool);
    test_model_x(dense, "tiny", "IQ1_S", im_dense, embd, 1, dir, pool);
    test_model_x(dense, "tiny", "IQ1_M", im_dense, embd, 1, dir, pool);
    test_model_x(moe, "tiny-moe", "IQ1_S", im_moe, embd, 1, dir, pool);
    test_model_x(moe, "tiny-moe", "IQ1_M", im_moe, embd, 1, dir, pool);
}

/* LOOM_QUANT_LOW_ONLY=1: the IQ1/TQ/MXFP4 rows and test_low_bit_recipes alone. */
static int test_low_bit_only(void)
{
    char cache[1024], dir[] = "/tmp/loom-quantize-XXXXXX";
    parity_cache_dir(cache, sizeof cache);
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    struct loom_pool *pool = loom_pool_new(2);
    test_rows_iq1();
    test_low_bit_recipes(cache, dir, pool);
    loom_pool_free(pool);
    rmdir(dir);
    llama_backend_free();
    return test_finish();
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
    const char *low_only = getenv("LOOM_QUANT_LOW_ONLY"); /* 1: TQ1_0, TQ2_0, MXFP4, IQ1 alone */
    if (low_only && *low_only == '1')
        return test_low_bit_only();
    const char *iq_only = getenv("LOOM_QUANT_IQ_ONLY"); /* 1: the grid IQ recipes alone */
    if (!iq_only || *iq_only != '1') {
        test_rows();
        test_rows_weighted();
    }
    test_rows_iq1();
    const char *rows_only = getenv("LOOM_QUANT_ROWS_ONLY"); /* 1: the row checks alone (seconds) */
    if (rows_only && *rows_only == '1') {
        llama_backend_free();
        return test_finish();
    }
    char cache[1024], ref[1024], tiny[1200], big[1200], vocab[1200], dir[] = "/tmp/loom-quantize-XXXXXX";
    parity_cache_dir(cache, sizeof cache);
    parity_ref_dir(ref, sizeof ref);
    snprintf(tiny, sizeof tiny, "%s/models/qwen35-tiny-F16.gguf", cache);
    snprintf(big, sizeof big, "%s/models/qwen35-0.8b-F16.gguf", cache);
    snprintf(vocab, sizeof vocab, "%s/src/models/ggml-vocab-qwen35.gguf", ref);
    CHECK(access(tiny, R_OK) == 0, "%s missing (run scripts/prepare-models.sh)", tiny);
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    struct loom_pool *pool = loom_pool_new(2);
    test_iq_recipes(cache, dir, pool);
    if (iq_only && *iq_only == '1') {
        loom_pool_free(pool);
        rmdir(dir);
        llama_backend_free();
        return test_finish();
    }
    test_low_bit_recipes(cache, dir, pool);
    for (const struct loom_quant_recipe *r = loom_quant_recipes; r->name; r++) {
        if (iq_grid_recipe(r->name) || low_bit_recipe(r->name))
            continue;
        if (loom_type_traits(r->default_type)->quantize)
            test_model(tiny, "tiny", r->name, dir, pool, NULL);
        else
            printf("tiny %-6s: skipped, loom has no %s quantizer yet\n", r->name, loom_type_traits(r->default_type)->name);
    }
    test_imatrix_models(cache, dir, pool);
    test_fallbacks(cache, dir, pool);
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
