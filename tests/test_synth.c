/* test_synth.c — the synthetic qwen35 generator: determinism (same seed -> same bytes, other seed -> other
 * bytes), geometry admitted by loom_arch_admit, tokenizer padding, the recipe's statistics, quantized files
 * written directly (the bytes of the F32 file quantized by loom_quant_write), recipes that need an importance
 * matrix refused, sparse models in parts written whole or not at all, and progress that moves within a large
 * tensor (synthesis and quantization). */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/synth.h"
#include "mini_vocab.h"
#include "test.h"
#include "test_abort.h"
#include "util/error.h"

static char vocab[4096];      /* the real Qwen3.5 vocabulary (151936 tokens) */
static char mini_vocab[4200]; /* a 300-token vocabulary written by this test, for small fast models */

#define MINI_TOKENS 300

static int synth_router(const char *voc, const char *preset, uint32_t type, uint64_t seed, uint32_t router,
                        const char *out)
{
    struct loom_synth_params p = {loom_synth_find_preset(preset), type, seed, voc, NULL, NULL, NULL, NULL, router,
                                  NULL};
    loom_error err = {0};
    int rc = loom_synth_write(&p, out, &err);
    CHECK(rc == LOOM_OK, "synth %s seed %llu: %s", preset, (unsigned long long)seed, err.msg);
    return rc;
}

static int synth_with(const char *voc, const char *preset, uint32_t type, uint64_t seed, const char *out)
{
    return synth_router(voc, preset, type, seed, LOOM_SYNTH_ROUTER_UNIFORM, out);
}

static int synth(const char *preset, uint32_t type, uint64_t seed, const char *out)
{
    return synth_with(mini_vocab, preset, type, seed, out);
}

/* The vocabulary: MINI_TOKENS tokens (tests/mini_vocab.h). */
static int write_mini_vocab(const char *dir)
{
    snprintf(mini_vocab, sizeof mini_vocab, "%s/mini-vocab.gguf", dir);
    loom_error err = {0};
    int rc = write_mini_vocab_file(mini_vocab, MINI_TOKENS, &err);
    CHECK(rc == LOOM_OK, "writing %s: %d %s", mini_vocab, rc, err.msg);
    return rc;
}

static uint64_t file_digest(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        XXH3_64bits_update(st, buf, n);
    fclose(f);
    uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return h;
}

static double rms(const float *x, uint64_t n)
{
    double s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return sqrt(s / (double)n);
}

static const float *f32_tensor(const struct loom_gguf *g, const char *name, uint64_t *n)
{
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, name);
    CHECK(t && t->type == LOOM_TYPE_F32, "tensor %s missing or not F32", name);
    if (!t || t->type != LOOM_TYPE_F32)
        return NULL;
    *n = t->ne[0] * t->ne[1];
    return t->data;
}

static void test_determinism(const char *dir)
{
    char a[4200], b[4200], c[4200], d[4200];
    snprintf(a, sizeof a, "%s/a.gguf", dir);
    snprintf(b, sizeof b, "%s/b.gguf", dir);
    snprintf(c, sizeof c, "%s/c.gguf", dir);
    snprintf(d, sizeof d, "%s/d.gguf", dir);
    if (synth("micro", LOOM_TYPE_F16, 7, a) || synth("micro", LOOM_TYPE_F16, 7, b) ||
        synth("micro", LOOM_TYPE_F16, 8, c) || synth("micro", LOOM_TYPE_BF16, 7, d))
        return;
    uint64_t ha = file_digest(a), hb = file_digest(b), hc = file_digest(c), hd = file_digest(d);
    printf("digests: seed 7 %016llx %016llx, seed 8 %016llx, bf16 %016llx\n", (unsigned long long)ha,
           (unsigned long long)hb, (unsigned long long)hc, (unsigned long long)hd);
    CHECK(ha && ha == hb, "same seed, different bytes: %016llx vs %016llx", (unsigned long long)ha,
          (unsigned long long)hb);
    CHECK(hc && ha != hc, "different seeds, same bytes");
    CHECK(hd && ha != hd, "F16 and BF16 files identical");
    unlink(a);
    unlink(b);
    unlink(c);
    unlink(d);
}

static void check_hparams(const struct loom_synth_preset *P, const struct loom_hparams *hp)
{
    CHECK(hp->n_layer == P->n_layer && hp->n_embd == P->n_embd && hp->n_ff == P->n_ff, "layers/embd/ff");
    CHECK(hp->n_head == P->n_head && hp->n_head_kv == P->n_head_kv, "heads %u/%u", hp->n_head, hp->n_head_kv);
    CHECK(hp->head_dim_k == P->head_dim && hp->head_dim_v == P->head_dim, "head dims %u/%u", hp->head_dim_k,
          hp->head_dim_v);
    CHECK(hp->n_rot == P->n_rot && !memcmp(hp->rope_sections, P->sections, sizeof P->sections), "rope");
    CHECK(hp->full_attn_interval == P->full_attn_interval, "full_attention_interval %u", hp->full_attn_interval);
    CHECK(hp->ssm_head_dim == P->ssm_head_dim && hp->ssm_n_k_heads == P->ssm_k_heads &&
              hp->ssm_n_v_heads == P->ssm_v_heads && hp->ssm_inner == P->ssm_head_dim * P->ssm_v_heads,
          "ssm geometry");
    CHECK(hp->tied_output, "expected tied embeddings");
    CHECK(!strcmp(hp->arch, P->n_expert ? "qwen35moe" : "qwen35") && hp->n_expert == P->n_expert &&
              hp->n_expert_used == P->n_expert_used && hp->n_ff_exp == P->n_ff_exp && hp->n_ff_shexp == P->n_ff_shexp,
          "%s: %u experts, %u used, widths %u/%u", hp->arch, hp->n_expert, hp->n_expert_used, hp->n_ff_exp,
          hp->n_ff_shexp);
}

static void check_tokenizer(const struct loom_gguf *g, uint64_t n_rows, uint64_t n_min)
{
    const struct loom_gguf_kv *toks = NULL, *types = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_get_arr(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, 0, &toks, &err) == LOOM_OK, "%s",
          err.msg);
    CHECK(loom_gguf_get_arr(g, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, 0, &types, &err) == LOOM_OK, "%s",
          err.msg);
    CHECK(loom_gguf_find_kv(g, "tokenizer.ggml.model") && loom_gguf_find_kv(g, "tokenizer.ggml.pre"),
          "model/pre not copied");
    if (!toks || !types)
        return;
    CHECK(toks->arr_n == n_rows && types->arr_n == n_rows, "tokens %llu, rows %llu",
          (unsigned long long)toks->arr_n, (unsigned long long)n_rows);
    CHECK(n_rows % 256 == 0 && n_rows >= n_min, "rows %llu, expected vocab padded to 256", (unsigned long long)n_rows);
    int32_t last;
    memcpy(&last, types->data + (types->arr_n - 1) * 4, 4);
    CHECK(last == 5, "last token type %d, expected 5 (UNUSED)", last);
    struct loom_gguf_str *s = calloc(toks->arr_n, sizeof *s);
    if (s && loom_gguf_kv_strings(toks, s, toks->arr_n, &err) == LOOM_OK) {
        char want[64];
        snprintf(want, sizeof want, "<|loom_pad_%llu|>", (unsigned long long)(n_rows - 1));
        CHECK(loom_gguf_str_eq(s[n_rows - 1], want), "last token text '%.*s', expected '%s'",
              (int)s[n_rows - 1].len, s[n_rows - 1].ptr, want);
    }
    free(s);
}

/* The recipe's statistics on an F32 micro model. */
static void check_recipe(const struct loom_gguf *g)
{
    const struct loom_gguf_tensor *emb = loom_gguf_find_tensor(g, "token_embd.weight");
    CHECK(emb && emb->type == LOOM_TYPE_F32, "token_embd");
    if (emb) {
        const float *e = emb->data;
        uint64_t E = emb->ne[0], rows = emb->ne[1];
        double r_real = rms(e, E * 200), r_pad = rms(e + (rows - 100) * E, E * 100);
        CHECK(fabs(r_real - 0.3) < 0.01, "real embedding rms %.4f, expected 0.3", r_real);
        CHECK(fabs(r_pad - 0.03) < 0.003, "padding embedding rms %.4f, expected 0.03", r_pad);
    }
    uint64_t n = 0;
    const float *onw = f32_tensor(g, "output_norm.weight", &n);
    if (onw) {
        uint64_t neg = 0;
        for (uint64_t i = 0; i < n; i++)
            neg += onw[i] < 0;
        CHECK(neg == (uint64_t)lround(0.6 * (double)n), "output_norm: %llu of %llu negative, expected 60%%",
              (unsigned long long)neg, (unsigned long long)n);
    }
    const float *a = f32_tensor(g, "blk.0.ssm_a", &n);
    for (uint64_t i = 0; a && i < n; i++)
        CHECK(a[i] <= -1.0f && a[i] >= -16.0f, "ssm_a[%llu] = %g, expected in [-16, -1]", (unsigned long long)i,
              a[i]);
    const float *dt = f32_tensor(g, "blk.0.ssm_dt.bias", &n);
    for (uint64_t i = 0; dt && i < n; i++) {
        double sp = log1p(exp(dt[i]));
        CHECK(sp >= 0.99e-3 && sp <= 0.101, "softplus(ssm_dt.bias[%llu]) = %g, expected in [1e-3, 0.1]",
              (unsigned long long)i, sp);
    }
    const float *norm = f32_tensor(g, "blk.0.attn_norm.weight", &n);
    if (norm) {
        double m = 0;
        for (uint64_t i = 0; i < n; i++)
            m += norm[i] / (double)n;
        CHECK(fabs(m - 1.0) < 0.05, "attn_norm mean %.3f, expected ~1 (stored as 1 + w)", m);
    }
    const float *down = f32_tensor(g, "blk.0.ffn_down.weight", &n);
    if (down) /* ne [n_ff 256, E 128]: gain 1/sqrt(2 * 24) (shallow presets scaled as 24 layers) / sqrt(n_ff) */
        CHECK(fabs(rms(down, n) - 1.0 / sqrt(48.0) / 16.0) < 0.0005, "ffn_down rms %.5f, expected %.5f", rms(down, n),
              1.0 / sqrt(48.0) / 16.0);
}

/* The MoE recipe on an F32 tiny-moe model: every expert of ffn_down_exps [256, 256, 8] has the dense
 * ffn_down's scale, gain 1/sqrt(2 * 24) / sqrt(n_ff_exp 256); the shared expert's down projection the same. */
static void check_moe_recipe(const struct loom_gguf *g)
{
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, "blk.1.ffn_down_exps.weight");
    CHECK(t && t->type == LOOM_TYPE_F32 && t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 8,
          "ffn_down_exps F32 [256, 256, 8]");
    double want = 1.0 / sqrt(48.0) / 16.0;
    for (uint64_t e = 0; t && e < t->ne[2]; e += 7) {
        double r = rms((const float *)t->data + e * 256 * 256, 256 * 256);
        CHECK(fabs(r - want) < 0.0005, "expert %llu of ffn_down_exps: rms %.5f, expected %.5f",
              (unsigned long long)e, r, want);
    }
    uint64_t n = 0;
    const float *sh = f32_tensor(g, "blk.1.ffn_down_shexp.weight", &n);
    if (sh)
        CHECK(fabs(rms(sh, n) - want) < 0.0005, "ffn_down_shexp rms %.5f, expected %.5f", rms(sh, n), want);
    const struct loom_gguf_tensor *gate = loom_gguf_find_tensor(g, "blk.1.ffn_gate_inp_shexp.weight");
    CHECK(gate && gate->type == LOOM_TYPE_F32 && gate->ne[0] == 256 && gate->ne[1] == 1, "shared expert gate F32");
}

/* Generate preset with vocabulary voc (n_tok tokens), admit it, check geometry, tokenizer and (F32) recipe. */
static void test_admit(const char *dir, const char *voc, uint64_t n_tok, const char *preset, uint32_t type)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, preset);
    if (synth_with(voc, preset, type, LOOM_SYNTH_DEFAULT_SEED, path))
        return;
    struct loom_gguf *g = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open(path, &g, &err) == LOOM_OK, "open %s: %s", path, err.msg);
    if (g) {
        const struct loom_arch *arch;
        struct loom_hparams hp;
        struct loom_geometry geo;
        memset(&hp, 0, sizeof hp);
        int rc = loom_arch_admit(g, &arch, &hp, &geo, &err);
        CHECK(rc == LOOM_OK, "admit %s: %s", preset, err.msg);
        if (rc == LOOM_OK)
            check_hparams(loom_synth_find_preset(preset), &hp);
        check_tokenizer(g, loom_gguf_find_tensor(g, "token_embd.weight")->ne[1], n_tok);
        if (type == LOOM_TYPE_F32 && !strcmp(preset, "micro"))
            check_recipe(g);
        if (type == LOOM_TYPE_F32 && !strcmp(preset, "tiny-moe"))
            check_moe_recipe(g);
        loom_gguf_close(g);
    }
    unlink(path);
}

/* The skewed router changes only token_embd (every real row shares a direction: the mean of the rows keeps
 * SYNTH_SKEW_SHARE 0.5 of their rms 0.3, where independent rows average out) and ffn_gate_inp; every other
 * tensor is byte for byte the uniform router's. */
static void test_routers(const char *dir)
{
    char u[4200], k[4200];
    snprintf(u, sizeof u, "%s/uniform.gguf", dir);
    snprintf(k, sizeof k, "%s/skewed.gguf", dir);
    if (synth_router(mini_vocab, "tiny-moe", LOOM_TYPE_F32, 3, LOOM_SYNTH_ROUTER_UNIFORM, u) ||
        synth_router(mini_vocab, "tiny-moe", LOOM_TYPE_F32, 3, LOOM_SYNTH_ROUTER_SKEWED, k))
        return;
    struct loom_gguf *gu = NULL, *gk = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open(u, &gu, &err) == LOOM_OK && loom_gguf_open(k, &gk, &err) == LOOM_OK, "open: %s", err.msg);
    for (uint64_t i = 0; gu && gk && i < gu->n_tensors; i++) {
        const struct loom_gguf_tensor *a = &gu->tensors[i], *b = &gk->tensors[i];
        int changed = loom_gguf_str_eq(a->name, "token_embd.weight") ||
                      (a->name.len > 24 && !memcmp(a->name.ptr + a->name.len - 19, "ffn_gate_inp.weight", 19));
        int differs = a->nbytes != b->nbytes || memcmp(a->data, b->data, a->nbytes);
        CHECK(differs == changed, "tensor '%.*s': %s between the routers", (int)a->name.len, a->name.ptr,
              differs ? "differs" : "equal");
    }
    for (int f = 0; gu && gk && f < 2; f++) {
        const struct loom_gguf_tensor *emb = loom_gguf_find_tensor(f ? gk : gu, "token_embd.weight");
        static double mean[256];
        memset(mean, 0, sizeof mean);
        for (uint64_t r = 0; r < MINI_TOKENS; r++)
            for (int j = 0; j < 256; j++)
                mean[j] += ((const float *)emb->data)[r * 256 + j] / MINI_TOKENS;
        double m = 0;
        for (int j = 0; j < 256; j++)
            m += mean[j] * mean[j] / 256;
        m = sqrt(m);
        CHECK(f ? fabs(m - 0.15) < 0.01 : m < 0.03, "%s router: mean real embedding rms %.4f, expected %s",
              f ? "skewed" : "uniform", m, f ? "0.15" : "< 0.03");
    }
    loom_gguf_close(gu);
    loom_gguf_close(gk);
    unlink(u);
    unlink(k);
}

/* The large MoE presets' geometry, as README "Synthetic MoE models" gives the sources for Qwen3.5-35B-A3B. */
static void test_moe_presets(void)
{
    const struct loom_synth_preset *big = loom_synth_find_preset("35b-a3b"), *mid = loom_synth_find_preset("moe-mid");
    CHECK(big && big->n_layer == 40 && big->n_embd == 2048 && big->n_head == 16 && big->n_head_kv == 2 &&
              big->head_dim == 256 && big->n_rot == 64 && big->ssm_head_dim == 128 && big->ssm_k_heads == 16 &&
              big->ssm_v_heads == 32 && big->n_rows == 248320 && big->n_expert == 256 && big->n_expert_used == 8 &&
              big->n_ff_exp == 512 && big->n_ff_shexp == 512 && !big->fused_gate_up,
          "35b-a3b geometry");
    CHECK(mid && big && mid->n_layer == 8 && mid->n_embd == big->n_embd && mid->n_expert == 256 &&
              mid->n_ff_exp == big->n_ff_exp && mid->n_rows == big->n_rows,
          "moe-mid: the 35b-a3b layer shapes, 8 layers");
    const char *tiny[] = {"tiny-moe", "tiny-moe-e4", "tiny-moe-e16", "tiny-moe-fused"};
    const uint32_t experts[] = {8, 4, 16, 8};
    for (int i = 0; i < 4; i++) {
        const struct loom_synth_preset *P = loom_synth_find_preset(tiny[i]);
        CHECK(P && P->n_expert == experts[i] && P->fused_gate_up == (i == 3) && P->n_ff == 0, "%s", tiny[i]);
    }
}

static void test_errors(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    struct loom_synth_params p = {loom_synth_find_preset("micro"), LOOM_TYPE_Q4_K, 1, mini_vocab,
                                  NULL, NULL, NULL, NULL, 0, NULL};
    loom_error err = {0};
    CHECK(loom_synth_write(&p, path, &err) == LOOM_E_ARG, "Q4_K weight type accepted");
    p.wtype = LOOM_TYPE_F16;
    p.vocab_path = "/nonexistent/vocab.gguf";
    CHECK(loom_synth_write(&p, path, &err) != LOOM_OK, "missing vocab accepted");
    CHECK(access(path, F_OK) != 0, "output written despite error");
    CHECK(loom_synth_find_preset("nope") == NULL, "unknown preset found");
}

/* synth --type RECIPE: byte for byte the F32 file quantized by loom_quant_write (tiny under Q4_K_M, micro under
 * Q8_0 and under Q4_K_M, whose 128-wide rows take the reference's fallback types); a recipe on a non-F32 weight
 * type is refused with no file written. */
static void test_direct_quantized(const char *dir)
{
    static const char *const cases[][2] = {{"tiny", "Q4_K_M"}, {"micro", "Q8_0"}, {"micro", "Q4_K_M"}};
    char f32[4200], via[4200], direct[4200];
    snprintf(f32, sizeof f32, "%s/f32.gguf", dir);
    snprintf(via, sizeof via, "%s/via.gguf", dir);
    snprintf(direct, sizeof direct, "%s/direct.gguf", dir);
    loom_error err = {0};
    for (int i = 0; i < 2; i++) {
        struct loom_synth_params p = {loom_synth_find_preset(cases[i][0]), LOOM_TYPE_F32, 3, mini_vocab,
                                      NULL, NULL, NULL, NULL, 0, NULL};
        struct loom_gguf *g = NULL;
        if (loom_synth_write(&p, f32, &err) || loom_gguf_open(f32, &g, &err)) {
            CHECK(0, "%s F32: %s", cases[i][0], err.msg);
            continue;
        }
        p.recipe = loom_quant_find_recipe(cases[i][1]);
        int rc = loom_quant_write(g, p.recipe, via, NULL, NULL, NULL, NULL, NULL, &err);
        CHECK(rc == LOOM_OK, "%s quantize %s: %s", cases[i][0], cases[i][1], err.msg);
        rc = loom_synth_write(&p, direct, &err);
        CHECK(rc == LOOM_OK, "%s direct %s: %s", cases[i][0], cases[i][1], err.msg);
        uint64_t hv = file_digest(via), hd = file_digest(direct);
        CHECK(hv && hv == hd, "%s %s: direct %016llx, F32 + quantize %016llx", cases[i][0], cases[i][1],
              (unsigned long long)hd, (unsigned long long)hv);
        loom_gguf_close(g);
        unlink(f32);
        unlink(via);
        unlink(direct);
    }
    struct loom_synth_params p = {loom_synth_find_preset("micro"), LOOM_TYPE_F16, 3, mini_vocab, NULL, NULL, NULL,
                                  NULL, 0, loom_quant_find_recipe("Q8_0")};
    int rc = loom_synth_write(&p, direct, &err);
    CHECK(rc == LOOM_E_ARG && strstr(err.msg, "Q8_0") && access(direct, F_OK) != 0, "recipe on F16: rc %d, '%s'", rc,
          err.msg);
}

/* The recipes whose very-low-bit types llama.cpp's quantize refuses without an importance matrix (IQ1_M and
 * IQ3_XXS, which loom can quantize without one; IQ2_M's IQ2_S and IQ1_S, which it cannot) are refused naming the
 * recipe, the type and the importance matrix, before any file is written. */
static void test_imatrix_recipes(const char *dir)
{
    static const char *const cases[][3] = {{"micro", "IQ1_M", "IQ1_M"}, {"tiny", "IQ1_M", "IQ1_M"},
                                           {"tiny", "IQ3_XXS", "IQ3_XXS"}, {"tiny", "IQ2_M", "IQ2_S"},
                                           {"tiny", "IQ1_S", "IQ1_S"}};
    char path[4200], want[128];
    snprintf(path, sizeof path, "%s/iq.gguf", dir);
    for (int i = 0; i < 5; i++) {
        loom_synth_options o = {.preset = cases[i][0], .type = cases[i][1], .seed = 1, .vocab_path = mini_vocab};
        loom_error err = {0};
        int rc = loom_synthesize(&o, path, &err);
        snprintf(want, sizeof want, "goes to %s, which needs an importance matrix", cases[i][2]);
        CHECK(rc == LOOM_E_ARG && strstr(err.msg, want) && strstr(err.msg, cases[i][1]) && access(path, F_OK) != 0 &&
                  !test_temporary_left(path),
              "synth %s %s without an importance matrix: rc %d, '%s'", cases[i][0], cases[i][1], rc, err.msg);
    }
}

/* A sparse model in parts is written whole or not at all: a part's path taken by a directory, or a part name past
 * NAME_MAX, is refused naming it before any part is written, and nothing is left; 255-byte part names are
 * written (through temporary files of shortened names) and read back as one model. */
static void test_sparse_split(const char *dir)
{
    char sub[4200], out[4400], part[4400];
    snprintf(sub, sizeof sub, "%s/split", dir);
    CHECK(mkdir(sub, 0700) == 0, "mkdir %s", sub);
    struct loom_synth_params p = {loom_synth_find_preset("micro"), LOOM_TYPE_F16, 1, mini_vocab, NULL, NULL, NULL,
                                  NULL, 0, NULL};
    loom_error err = {0};
    snprintf(out, sizeof out, "%s/out.gguf", sub);
    snprintf(part, sizeof part, "%s/out-00002-of-00002.gguf", sub);
    CHECK(mkdir(part, 0700) == 0, "mkdir %s", part);
    int rc = loom_synth_write_sparse(&p, 2, out, &err);
    CHECK(rc == LOOM_E_ARG && strstr(err.msg, "split part 2 of 2") && strstr(err.msg, part) &&
              strstr(err.msg, "found a directory") && dir_entries(sub) == 1,
          "part 2's path a directory: refused naming it, no part written: rc %d, %s", rc, err.msg);
    rmdir(part);
    for (int len = 236; len >= 235; len--) { /* + "-00001-of-00002.gguf": 256, then 255 bytes */
        int at = snprintf(out, sizeof out, "%s/", sub);
        memset(out + at, 'n', (size_t)len);
        snprintf(out + at + len, sizeof out - (size_t)(at + len), ".gguf");
        rc = loom_synth_write_sparse(&p, 2, out, &err);
        if (len == 236)
            CHECK(rc == LOOM_E_ARG && strstr(err.msg, "file name of 256 bytes, expected at most 255") &&
                      dir_entries(sub) == 0,
                  "part names of 256 bytes: refused naming the limit, nothing written: rc %d, %s", rc, err.msg);
        else
            CHECK(rc == LOOM_OK && dir_entries(sub) == 2, "part names of 255 bytes: both written, nothing else: %s",
                  err.msg);
    }
    snprintf(part, sizeof part, "%.*s-00001-of-00002.gguf", (int)strlen(out) - 5, out);
    loom_gguf *g = NULL;
    CHECK(loom_gguf_open_model(part, &g, &err) == LOOM_OK && loom_gguf_n_parts(g) == 2, "open the parts: %s", err.msg);
    loom_gguf_close(g);
    char cmd[4500];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sub);
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* What a progress callback saw: calls, the largest step of done bytes between two calls, and any disorder. */
struct progress_log {
    int calls, disorder;
    uint64_t last_index, last_done, max_step, total, n_tensors;
};

static void progress_record(void *ctx, uint64_t index, uint64_t n_tensors, uint64_t done, uint64_t total,
                            const char *name)
{
    struct progress_log *l = ctx;
    if (l->calls && (index < l->last_index || done < l->last_done || total != l->total))
        l->disorder = 1;
    if (!name || done > total || index > n_tensors || (index == n_tensors) != (done == total))
        l->disorder = 1;
    if (done - l->last_done > l->max_step && l->calls)
        l->max_step = done - l->last_done;
    l->calls++, l->last_index = index, l->last_done = done, l->total = total, l->n_tensors = n_tensors;
}

/* Checks of one run's progress: in order, ending at the total, in steps of at most 2% of it although one tensor
 * (the embedding of the real vocabulary) holds most of the bytes, and in at most a few hundred calls. */
static void check_progress(const struct progress_log *l, const char *what)
{
    CHECK(!l->disorder && l->calls > 0 && l->last_done == l->total && l->last_index == l->n_tensors,
          "%s progress: out of order or not ending at the total (%d calls)", what, l->calls);
    CHECK(l->max_step <= l->total / 50, "%s progress: a step of %.1f%% of the total, expected at most 2%%", what,
          100.0 * (double)l->max_step / (double)l->total);
    CHECK((uint64_t)l->calls <= l->n_tensors + 210, "%s progress: %d calls for %llu tensors, expected at most 210 "
          "more", what, l->calls, (unsigned long long)l->n_tensors);
}

/* Progress moves within a large tensor, for synthesis and for quantization of its file. */
static void test_progress(const char *dir)
{
    char f16[4200], q8[4200];
    snprintf(f16, sizeof f16, "%s/progress-f16.gguf", dir);
    snprintf(q8, sizeof q8, "%s/progress-q8.gguf", dir);
    struct progress_log ls = {0}, lq = {0};
    loom_synth_options o = {.preset = "tiny", .type = "F16", .seed = 1, .vocab_path = vocab,
                            .progress = progress_record, .progress_ctx = &ls};
    loom_error err = {0};
    int rc = loom_synthesize(&o, f16, &err);
    CHECK(rc == LOOM_OK, "synth tiny: %s", err.msg);
    if (rc)
        return;
    check_progress(&ls, "synth");
    loom_gguf *g = NULL;
    if ((rc = loom_gguf_open(f16, &g, &err)) == LOOM_OK)
        rc = loom_quantize(g, "Q8_0", q8, &(loom_quantize_options){.progress = progress_record, .progress_ctx = &lq},
                           &err);
    CHECK(rc == LOOM_OK, "quantize tiny: %s", err.msg);
    if (rc == LOOM_OK)
        check_progress(&lq, "quantize");
    loom_gguf_close(g);
    unlink(f16);
    unlink(q8);
}

/* Cancelled at the first, a middle and the last poll (before each tensor and every 64 rows): LOOM_E_CANCELLED, no
 * poll after the one that asked, no output and no temporary file. */
static void test_cancel(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/cancel.gguf", dir);
    struct abort_at a = {0, 1 << 30};
    struct loom_synth_params p = {loom_synth_find_preset("micro"), LOOM_TYPE_F16, 1, mini_vocab, NULL, NULL, abort_at,
                                  &a, 0, NULL};
    loom_error err = {0};
    CHECK(loom_synth_write(&p, path, &err) == LOOM_OK, "uncancelled synth: %s", err.msg);
    unlink(path);
    int n_polls = a.polls;
    const int at[3] = {0, n_polls / 2, n_polls - 1};
    for (int i = 0; i < 3; i++) {
        a = (struct abort_at){0, at[i]};
        int rc = loom_synth_write(&p, path, &err);
        CHECK(rc == LOOM_E_CANCELLED && a.polls == at[i] + 1 && access(path, F_OK) != 0 && !test_temporary_left(path),
              "cancel at poll %d of %d: rc %d after %d polls, or a file left (%s)", at[i], n_polls, rc, a.polls,
              err.msg);
    }
}

int main(void)
{
    const char *ref = getenv("LOOM_REF"), *home = getenv("HOME");
    if (ref && *ref)
        snprintf(vocab, sizeof vocab, "%s/src/models/ggml-vocab-qwen35.gguf", ref);
    else
        snprintf(vocab, sizeof vocab, "%s/.cache/loom/ref/src/models/ggml-vocab-qwen35.gguf", home ? home : ".");
    CHECK(access(vocab, R_OK) == 0, "vocabulary %s not found (run scripts/setup.sh)", vocab);
    char dir[] = "/tmp/loom-test-synth-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    if (write_mini_vocab(dir) == LOOM_OK) {
        test_determinism(dir);
        test_admit(dir, mini_vocab, MINI_TOKENS, "micro", LOOM_TYPE_F32);
        test_admit(dir, mini_vocab, MINI_TOKENS, "tiny-moe", LOOM_TYPE_F32);
        test_admit(dir, mini_vocab, MINI_TOKENS, "tiny-moe-fused", LOOM_TYPE_F16);
        test_admit(dir, mini_vocab, MINI_TOKENS, "tiny-moe-e4", LOOM_TYPE_F16);
        test_admit(dir, mini_vocab, MINI_TOKENS, "tiny-moe-e16", LOOM_TYPE_BF16);
        test_routers(dir);
        test_errors(dir);
        test_cancel(dir);
        test_direct_quantized(dir);
        test_imatrix_recipes(dir);
        test_sparse_split(dir);
        unlink(mini_vocab);
    }
    test_progress(dir);
    test_admit(dir, vocab, 151936, "tiny", LOOM_TYPE_BF16);
    test_moe_presets();
    rmdir(dir);
    return test_finish();
}
