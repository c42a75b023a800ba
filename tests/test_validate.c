/* test_validate.c — the row validators of the trait table (validate_row) on crafted blocks, by the rule of
 * ggml_validate_row_data (llama.cpp ggml-quants.c): a row is invalid when an F32/F16/BF16 value, or a
 * quantized block's F16 (Q8_K: F32) scale d or second scale (dmin, m) is inf or NaN; quants never are.
 * Then the opt-in tensor check at load (loom_model_load_ex check_tensors) on damaged micro models, and
 * that a default load does not check. tests/parity/test_ref_validate.c compares with ggml itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "model_fixture.h"
#include "kernels/types.h"
#include "model/quantize.h"
#include "test_rng.h"

/* Where each type keeps its scales, from the block structs of ggml-common.h (the reference's header):
 * byte offset of d, of the second scale (-1: none) and its name in loom's messages. */
static const struct scale_layout {
    uint32_t type;
    int d_off, m_off;
    const char *m_name;
} LAYOUTS[] = {
    {LOOM_TYPE_Q4_0, 0, -1, 0},         {LOOM_TYPE_Q4_1, 0, 2, "minimum m"}, {LOOM_TYPE_Q5_0, 0, -1, 0},
    {LOOM_TYPE_Q5_1, 0, 2, "minimum m"}, {LOOM_TYPE_Q8_0, 0, -1, 0},         {LOOM_TYPE_Q2_K, 80, 82, "scale dmin"},
    {LOOM_TYPE_Q3_K, 108, -1, 0},       {LOOM_TYPE_Q4_K, 0, 2, "scale dmin"}, {LOOM_TYPE_Q5_K, 0, 2, "scale dmin"},
    {LOOM_TYPE_Q6_K, 208, -1, 0},       {LOOM_TYPE_IQ4_NL, 0, -1, 0},       {LOOM_TYPE_IQ4_XS, 0, -1, 0},
    {LOOM_TYPE_IQ1_S, 0, -1, 0},        {LOOM_TYPE_TQ1_0, 52, -1, 0},       {LOOM_TYPE_TQ2_0, 64, -1, 0},
    {LOOM_TYPE_IQ2_XXS, 0, -1, 0},      {LOOM_TYPE_IQ2_XS, 0, -1, 0},       {LOOM_TYPE_IQ2_S, 0, -1, 0},
    {LOOM_TYPE_IQ3_XXS, 0, -1, 0},      {LOOM_TYPE_IQ3_S, 0, -1, 0},
};

enum { N_BLOCKS = 3 };
static uint8_t row[N_BLOCKS * 292];

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* Random bytes with every scale set to 1.0: valid whatever the quants hold. */
static void fill_valid(const struct scale_layout *l, size_t size)
{
    for (size_t i = 0; i < N_BLOCKS * size; i++)
        row[i] = (uint8_t)rnd_u32();
    for (int b = 0; b < N_BLOCKS; b++) {
        put16(row + b * size + l->d_off, 0x3c00);
        if (l->m_off >= 0)
            put16(row + b * size + l->m_off, 0x3c00);
    }
}

static int validate(uint32_t type, int64_t n_blocks, struct loom_row_fault *f)
{
    return loom_type_traits(type)->validate_row(row, n_blocks, f);
}

static void test_f16_scales(void)
{
    static const struct {
        uint16_t bits;
        const char *what; /* NULL: finite */
    } values[] = {{0x7c00, "inf"}, {0xfc00, "inf"}, {0x7e00, "nan"}, {0x7c01, "nan"}, {0xffff, "nan"},
                  {0x7bff, 0},     {0xfbff, 0},     {0x0001, 0},     {0x8000, 0}};
    for (size_t t = 0; t < sizeof LAYOUTS / sizeof LAYOUTS[0]; t++) {
        const struct scale_layout *l = &LAYOUTS[t];
        const struct loom_type_traits *tr = loom_type_traits(l->type);
        struct loom_row_fault f;
        fill_valid(l, tr->type_size);
        CHECK(validate(l->type, N_BLOCKS, &f), "%s: random quants with unit scales must pass", tr->name);
        int bad = 0;
        for (int field = 0; field < (l->m_off >= 0 ? 2 : 1); field++)
            for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
                int b = (int)(v % N_BLOCKS);
                fill_valid(l, tr->type_size);
                put16(row + b * tr->type_size + (field ? l->m_off : l->d_off), values[v].bits);
                int ok = validate(l->type, N_BLOCKS, &f);
                const char *name = field ? l->m_name : "scale d";
                if (values[v].what)
                    bad += ok || f.index != b || strcmp(f.field, name) || strcmp(f.what, values[v].what);
                else
                    bad += !ok;
            }
        CHECK(bad == 0, "%s: %d scale cases judged wrongly", tr->name, bad);
    }
}

static void test_q8_k(void)
{
    struct loom_row_fault f;
    const size_t size = loom_type_traits(LOOM_TYPE_Q8_K)->type_size;
    const float values[] = {INFINITY, -INFINITY, NAN, 3e38f};
    for (size_t v = 0; v < 4; v++) {
        for (int b = 0; b < N_BLOCKS; b++)
            memcpy(row + b * size, &(float){b == 1 ? values[v] : 1.0f}, 4);
        int ok = validate(LOOM_TYPE_Q8_K, N_BLOCKS, &f);
        CHECK(v == 3 ? ok : !ok && f.index == 1 && !strcmp(f.field, "scale d") &&
                               !strcmp(f.what, isnan(values[v]) ? "nan" : "inf"),
              "Q8_K F32 d = %g: %s", values[v], ok ? "passed" : f.what);
    }
}

/* IQ1_M keeps its F16 d in the top nibbles of its four scale words (bytes 49, 51, 53, 55, lowest nibble
 * first); MXFP4's E8M0 scale (byte 0) is invalid only as 0xff, the NaN code (ggml validate_e_e8m0). */
static void test_iq1_m_mxfp4(void)
{
    static const struct {
        uint16_t bits;
        const char *what;
    } values[] = {{0x7c00, "inf"}, {0xfc00, "inf"}, {0x7e00, "nan"}, {0x7c01, "nan"}, {0x7bff, 0}, {0x0001, 0}};
    struct loom_row_fault f;
    int bad = 0;
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        for (size_t i = 0; i < N_BLOCKS * 56; i++)
            row[i] = (uint8_t)rnd_u32();
        for (int b = 0; b < N_BLOCKS; b++)
            for (int k = 0; k < 4; k++) { /* d = 1.0 (0x3c00) everywhere, values[v] in block 2 */
                uint16_t d = b == 2 ? values[v].bits : 0x3c00;
                row[56 * b + 49 + 2 * k] = (uint8_t)((row[56 * b + 49 + 2 * k] & 0x0f) | ((d >> (4 * k)) & 15) << 4);
            }
        int ok = validate(LOOM_TYPE_IQ1_M, N_BLOCKS, &f);
        if (values[v].what)
            bad += ok || f.index != 2 || strcmp(f.field, "scale d") || strcmp(f.what, values[v].what);
        else
            bad += !ok;
    }
    CHECK(bad == 0, "IQ1_M: %d scale cases judged wrongly", bad);
    bad = 0;
    for (int e = 0; e < 256; e++) {
        for (size_t i = 0; i < N_BLOCKS * 17; i++)
            row[i] = (uint8_t)rnd_u32();
        for (int b = 0; b < N_BLOCKS; b++)
            row[17 * b] = (uint8_t)(b == 1 ? e : 127);
        int ok = validate(LOOM_TYPE_MXFP4, N_BLOCKS, &f);
        bad += e == 0xff ? ok || f.index != 1 || strcmp(f.field, "scale e") : !ok;
    }
    CHECK(bad == 0, "MXFP4: %d of 256 E8M0 scales judged wrongly", bad);
    char msg[160];
    loom_row_fault_describe(LOOM_TYPE_MXFP4, &f, msg, sizeof msg);
    CHECK(!strcmp(msg, "MXFP4 block 1 scale e is 0xff (the E8M0 NaN code)"), "description '%s'", msg);
}

/* F32, F16 and BF16 rows: every value is checked, in and after whole 256-element chunks. */
static void test_values(void)
{
    enum { N = 700 };
    static uint8_t buf[N * 4];
    static const struct {
        uint32_t type;
        uint32_t finite_max, inf, nan;
    } cases[] = {{LOOM_TYPE_F32, 0x7f7fffff, 0xff800000, 0x7fc00001},
                 {LOOM_TYPE_F16, 0x7bff, 0xfc00, 0x7d00},
                 {LOOM_TYPE_BF16, 0x7f7f, 0xff80, 0x7f81}};
    static const int at[] = {0, 255, 256, 511, 512, 699};
    for (size_t c = 0; c < 3; c++) {
        const struct loom_type_traits *tr = loom_type_traits(cases[c].type);
        size_t es = tr->type_size;
        struct loom_row_fault f;
        for (int i = 0; i < N; i++)
            memcpy(buf + i * es, &cases[c].finite_max, es); /* little-endian: the low bytes */
        CHECK(tr->validate_row(buf, N, &f), "%s: largest finite values must pass", tr->name);
        int bad = 0;
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
            for (int w = 0; w < 2; w++) {
                uint32_t v = w ? cases[c].nan : cases[c].inf, fin = cases[c].finite_max;
                memcpy(buf + at[k] * es, &v, es);
                int ok = tr->validate_row(buf, N, &f);
                bad += ok || f.index != at[k] || strcmp(f.what, w ? "nan" : "inf");
                memcpy(buf + at[k] * es, &fin, es);
            }
        CHECK(bad == 0, "%s: %d non-finite values judged wrongly", tr->name, bad);
    }
}

/* The first failing row of several, and Q8_1, which ggml_validate_row_data rejects outright. */
static void test_rows(void)
{
    static uint16_t x[4][64];
    struct loom_row_fault f;
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 64; i++)
            x[r][i] = 0x3c00;
    CHECK(loom_type_validate_rows(LOOM_TYPE_F16, x, 64, 4, &f) == -1, "valid F16 rows");
    x[3][1] = 0x7c00;
    x[2][9] = 0x7e00;
    int64_t r = loom_type_validate_rows(LOOM_TYPE_F16, x, 64, 4, &f);
    CHECK(r == 2 && f.index == 9 && !strcmp(f.what, "nan"), "first bad row: %lld, element %lld", (long long)r,
          (long long)f.index);
    char msg[160];
    loom_row_fault_describe(LOOM_TYPE_F16, &f, msg, sizeof msg);
    CHECK(!strcmp(msg, "F16 element 9 is nan"), "description '%s'", msg);
    memset(row, 0, sizeof row);
    r = loom_type_validate_rows(LOOM_TYPE_Q8_1, row, 32, 1, &f);
    loom_row_fault_describe(LOOM_TYPE_Q8_1, &f, msg, sizeof msg);
    CHECK(r == 0 && strstr(msg, "Q8_1 has no validation rule"), "Q8_1: row %lld, '%s'", (long long)r, msg);
}

/* Overwrite 2 bytes of tensor `name` in the file at path, `at` bytes into its data. */
static int damage(const char *path, const char *name, size_t at, uint16_t bits)
{
    struct loom_gguf *g = 0;
    loom_error err = {0};
    if (loom_gguf_open(path, &g, &err) != LOOM_OK)
        return -1;
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
    long off = t ? (long)((const uint8_t *)t->data - g->map + at) : -1;
    loom_gguf_close(g);
    FILE *f = off >= 0 ? fopen(path, "r+b") : NULL;
    int ok = f && !fseek(f, off, SEEK_SET) && fwrite(&bits, 2, 1, f) == 1;
    if (f)
        ok &= !fclose(f);
    return ok ? 0 : -1;
}

/* Load path with and without check_tensors: the default load must succeed (it does not read the data),
 * the checked one must fail with a message holding want. */
static void expect_check_fails(const char *path, const char *want)
{
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    CHECK(m != NULL, "default load of %s must not check tensor data: %s", path, err.msg);
    loom_model_free(m);
    m = loom_model_load_ex(path, &(loom_model_params){.check_tensors = 1}, &err);
    CHECK(m == NULL && strstr(err.msg, want) && strstr(err.msg, "expected finite"), "check_tensors: '%s', want '%s'",
          m ? "(loaded)" : err.msg, want);
    loom_model_free(m);
}

static void test_load_check(const char *dir)
{
    char vocab[512], f16[512], q8[512];
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    snprintf(f16, sizeof f16, "%s/micro-f16.gguf", dir);
    snprintf(q8, sizeof q8, "%s/micro-q8_0.gguf", dir);
    if (write_mini_vocab(vocab))
        return;
    loom_model *m = load_micro_model(vocab, f16, LOOM_TYPE_F16, 7);
    loom_error err = {0};
    loom_model *checked = loom_model_load_ex(f16, &(loom_model_params){.check_tensors = 1}, &err);
    CHECK(checked != NULL, "an intact model passes the check: %s", err.msg);
    loom_model_free(checked);
    loom_model_free(m);
    /* Q8_0 copy made by loom quantize (micro rows of 128 fit 32-blocks), then a NaN scale: row 3, block 1
     * of blk.1.ffn_up.weight (rows of 128 = 4 blocks of 34 bytes) */
    struct loom_gguf *g = 0;
    int rc = loom_gguf_open(f16, &g, &err);
    if (!rc)
        rc = loom_quant_write(g, loom_quant_find_recipe("Q8_0"), q8, NULL, NULL, NULL, NULL, NULL, &err);
    loom_gguf_close(g);
    CHECK(rc == LOOM_OK, "quantize micro to Q8_0: %s", err.msg);
    CHECK(damage(q8, "blk.1.ffn_up.weight", 3 * 4 * 34 + 34, 0x7e00) == 0, "damaging %s", q8);
    expect_check_fails(q8, "tensor 'blk.1.ffn_up.weight' row 3: Q8_0 block 1 scale d is nan");
    /* F16 matrix value and F32 norm value */
    CHECK(damage(f16, "blk.0.attn_qkv.weight", 2 * 128 * 2 + 2 * 5, 0xfc00) == 0, "damaging %s", f16);
    expect_check_fails(f16, "tensor 'blk.0.attn_qkv.weight' row 2: F16 element 5 is inf");
    unlink(f16);
    m = load_micro_model(vocab, f16, LOOM_TYPE_F16, 7);
    loom_model_free(m);
    CHECK(damage(f16, "output_norm.weight", 4 * 9 + 2, 0x7fc0) == 0, "damaging %s", f16);
    expect_check_fails(f16, "tensor 'output_norm.weight' row 0: F32 element 9 is nan");
    unlink(q8);
    unlink(f16);
    unlink(vocab);
}

/* Messages name a bad row of an expert tensor by expert and row within it (quantize, --check-tensors, synth). */
static void test_row_where(void)
{
    char buf[64];
    loom_row_where(2, 64, 130, buf, sizeof buf);
    CHECK(!strcmp(buf, "row 130"), "2-D row 130: found '%s'", buf);
    loom_row_where(3, 64, 130, buf, sizeof buf);
    CHECK(!strcmp(buf, "expert 2 row 2"), "3-D row 130 of 64-row experts: found '%s'", buf);
}

int main(void)
{
    test_row_where();
    test_f16_scales();
    test_q8_k();
    test_iq1_m_mxfp4();
    test_values();
    test_rows();
    char dir[] = "/tmp/loom-test-validate-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    test_load_check(dir);
    rmdir(dir);
    return test_finish();
}
