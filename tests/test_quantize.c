/* test_quantize.c — model quantization without the reference: weight quantizer round-trip error bounds,
 * llama.cpp's Q4_K_M/Q8_0/IQ4_XS type choices on the Qwen3.5-0.8B geometry (the list in REFERENCE.md),
 * rejection of a row length the block size does not divide, the mixture-of-experts choices (expert,
 * shared-expert and fused gate/up tensors; 8 experts and not), a small end-to-end conversion, and the
 * atomic write leaving no file behind on failure, and the refusal (naming tensor, row and block) of values
 * a type cannot hold and of non-finite sources, as llama_model_quantize refuses them. The importance matrix
 * reader (weights from sums and counts, every malformed file refused with its reason), --tensor-type overrides
 * (parsing, first match wins, counters, errors), the block-size fallbacks, the imatrix rules of the recipes and
 * the quantize.imatrix.* keys. Bytewise parity with the reference is tests/parity/test_ref_quantize.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/imatrix.h"
#include "model/quantize.h"
#include "loom.h"
#include "test.h"
#include "test_abort.h"
#include "util/fp16.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float rnd_normal(void) /* approximately N(0, 1): sum of 12 uniforms - 6 */
{
    double s = 0;
    for (int i = 0; i < 12; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        s += (double)(rng >> 11) / 9007199254740992.0;
    }
    return (float)(s - 6.0);
}

/* Round trip of Gaussian rows: the RMS error relative to the RMS of the input must stay under about
 * twice what was measured here (Q8_0 0.0053, Q6_K 0.018, Q5_K 0.036, Q4_K 0.072: each extra bit halves
 * it, as a uniform quantizer's step / sqrt(12) does), so a broken scale search or packing fails while
 * seed changes do not. Zero rows must come back as exact zeros. */
static void test_round_trip(void)
{
    static const struct {
        uint32_t type;
        double bound;
    } cases[] = {{LOOM_TYPE_Q8_0, 0.012}, {LOOM_TYPE_Q6_K, 0.04}, {LOOM_TYPE_Q5_K, 0.07}, {LOOM_TYPE_Q4_K, 0.14}};
    enum { N = 4096 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    for (int i = 0; i < N; i++)
        x[i] = rnd_normal() * 0.02f;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct loom_type_traits *tr = loom_type_traits(cases[c].type);
        CHECK(tr && tr->quantize && tr->to_float, "type %u: no quantizer or dequantizer", cases[c].type);
        if (!tr || !tr->quantize || !tr->to_float)
            continue;
        tr->quantize(x, q, N);
        tr->to_float(q, y, N);
        double se = 0, sx = 0;
        for (int i = 0; i < N; i++) {
            se += (double)(y[i] - x[i]) * (y[i] - x[i]);
            sx += (double)x[i] * x[i];
        }
        double rel = sqrt(se / sx);
        CHECK(rel < cases[c].bound, "%s: relative RMS error %.4f, bound %.3f", tr->name, rel, cases[c].bound);
        printf("%s round trip: relative RMS error %.4f (bound %.3f)\n", tr->name, rel, cases[c].bound);
        memset(x + N / 2, 0, sizeof(float) * (N / 2)); /* second half zero from here on */
        tr->quantize(x, q, N);
        tr->to_float(q, y, N);
        int nonzero = 0;
        for (int i = N / 2; i < N; i++)
            nonzero += y[i] != 0.0f;
        CHECK(nonzero == 0, "%s: %d of %d zero inputs dequantize to nonzero", tr->name, nonzero, N / 2);
        for (int i = N / 2; i < N; i++)
            x[i] = rnd_normal() * 0.02f;
    }
}

/* ---- the Qwen3.5-0.8B tensor list (names and shapes only) ---------------------------------------- */

#define L08 24
#define MAX_T 640

struct tlist {
    struct loom_quant_tensor t[MAX_T];
    char names[MAX_T][48];
    size_t n;
};

static void tl_add(struct tlist *l, const char *name, uint64_t ne0, uint64_t ne1, uint32_t type)
{
    size_t i = l->n++;
    snprintf(l->names[i], sizeof l->names[i], "%s", name);
    l->t[i] = (struct loom_quant_tensor){l->names[i], ne1 ? 2 : 1, {ne0, ne1 ? ne1 : 1, 1, 1}, type};
}

static void tl_layer(struct tlist *l, int il, const char *suffix, uint64_t ne0, uint64_t ne1, uint32_t type)
{
    char name[48];
    snprintf(name, sizeof name, "blk.%d.%s", il, suffix);
    tl_add(l, name, ne0, ne1, type);
}

/* Tensors in the synthetic generator's order (the reference sorts them; the choice must not care). */
static void tl_qwen35_08b(struct tlist *l)
{
    const uint32_t F16 = LOOM_TYPE_F16, F32 = LOOM_TYPE_F32;
    l->n = 0;
    tl_add(l, "token_embd.weight", 1024, 248320, F16);
    tl_add(l, "output_norm.weight", 1024, 0, F32);
    for (int il = 0; il < L08; il++) {
        tl_layer(l, il, "attn_norm.weight", 1024, 0, F32);
        if (il % 4 == 3) {
            tl_layer(l, il, "attn_q.weight", 1024, 4096, F16);
            tl_layer(l, il, "attn_k.weight", 1024, 512, F16);
            tl_layer(l, il, "attn_v.weight", 1024, 512, F16);
            tl_layer(l, il, "attn_output.weight", 2048, 1024, F16);
            tl_layer(l, il, "attn_q_norm.weight", 256, 0, F32);
            tl_layer(l, il, "attn_k_norm.weight", 256, 0, F32);
        } else {
            tl_layer(l, il, "attn_qkv.weight", 1024, 6144, F16);
            tl_layer(l, il, "attn_gate.weight", 1024, 2048, F16);
            tl_layer(l, il, "ssm_conv1d.weight", 4, 6144, F32);
            tl_layer(l, il, "ssm_dt.bias", 16, 0, F32);
            tl_layer(l, il, "ssm_a", 16, 0, F32);
            tl_layer(l, il, "ssm_beta.weight", 1024, 16, F16);
            tl_layer(l, il, "ssm_alpha.weight", 1024, 16, F16);
            tl_layer(l, il, "ssm_norm.weight", 128, 0, F32);
            tl_layer(l, il, "ssm_out.weight", 2048, 1024, F16);
        }
        tl_layer(l, il, "post_attention_norm.weight", 1024, 0, F32);
        tl_layer(l, il, "ffn_gate.weight", 1024, 3584, F16);
        tl_layer(l, il, "ffn_up.weight", 1024, 3584, F16);
        tl_layer(l, il, "ffn_down.weight", 3584, 1024, F16);
    }
}

static int in_list(int il, const int *list, int n)
{
    for (int i = 0; i < n; i++)
        if (list[i] == il)
            return 1;
    return 0;
}

/* The type REFERENCE.md lists for tensor t of the 0.8B geometry under Q4_K_M. */
static uint32_t q4km_expected(const struct loom_quant_tensor *t)
{
    static const int qkv6[] = {0, 1, 2, 5, 8, 14, 17, 20, 21, 22}, down6[] = {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23},
                     v6[] = {11, 23};
    int il = -1;
    sscanf(t->name, "blk.%d.", &il);
    if (!strcmp(t->name, "token_embd.weight"))
        return LOOM_TYPE_Q6_K;
    if (t->ne[1] == 1 || strstr(t->name, "ssm_conv1d"))
        return LOOM_TYPE_F32;
    if (strstr(t->name, "attn_qkv"))
        return in_list(il, qkv6, 10) ? LOOM_TYPE_Q6_K : LOOM_TYPE_Q4_K;
    if (strstr(t->name, "ffn_down"))
        return in_list(il, down6, 12) ? LOOM_TYPE_Q6_K : LOOM_TYPE_Q4_K;
    if (strstr(t->name, "attn_v"))
        return in_list(il, v6, 2) ? LOOM_TYPE_Q6_K : LOOM_TYPE_Q4_K;
    return LOOM_TYPE_Q4_K;
}

static void test_recipes(void)
{
    static struct tlist l;
    static uint32_t got[MAX_T];
    const struct loom_quant_model m = {.n_layer = L08, .n_head = 8, .n_head_kv = 2};
    loom_error err = {0};
    tl_qwen35_08b(&l);
    int rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe("Q4_K_M"), got, &err);
    CHECK(rc == LOOM_OK, "Q4_K_M choice: %s", err.msg);
    int bad = 0;
    for (size_t i = 0; i < l.n; i++)
        if (got[i] != q4km_expected(&l.t[i]) && bad++ < 5)
            fprintf(stderr, "  Q4_K_M %s: type %u, expected %u\n", l.t[i].name, got[i], q4km_expected(&l.t[i]));
    CHECK(bad == 0, "Q4_K_M on the 0.8B geometry: %d tensors differ from REFERENCE.md's list", bad);

    /* the choice follows the reference's tensor order, not the file's: reversing the list changes nothing */
    static struct tlist r;
    static uint32_t got_r[MAX_T];
    for (size_t i = 0; i < l.n; i++) {
        memcpy(r.names[i], l.names[l.n - 1 - i], sizeof r.names[i]);
        r.t[i] = l.t[l.n - 1 - i];
        r.t[i].name = r.names[i];
    }
    r.n = l.n;
    rc = loom_quant_choose_types(&m, r.t, r.n, loom_quant_find_recipe("Q4_K_M"), got_r, &err);
    bad = 0;
    for (size_t i = 0; i < l.n; i++)
        bad += got_r[i] != got[l.n - 1 - i];
    CHECK(rc == LOOM_OK && bad == 0, "Q4_K_M on the reversed list: %d tensors differ", bad);

    /* Q8_0: every matrix Q8_0 (the tied embedding too); IQ4_XS with n_gqa 4: attn_qkv/attn_v Q5_K, the
     * first n_layer/8 ffn_down Q5_K, the embedding Q6_K */
    rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe("Q8_0"), got, &err);
    bad = 0;
    for (size_t i = 0; i < l.n; i++)
        bad += got[i] != (q4km_expected(&l.t[i]) == LOOM_TYPE_F32 ? LOOM_TYPE_F32 : LOOM_TYPE_Q8_0);
    CHECK(rc == LOOM_OK && bad == 0, "Q8_0: %d tensors not as expected", bad);
    rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe("IQ4_XS"), got, &err);
    bad = 0;
    for (size_t i = 0; i < l.n; i++) {
        const char *nm = l.t[i].name;
        int il = -1;
        sscanf(nm, "blk.%d.", &il);
        uint32_t want = q4km_expected(&l.t[i]) == LOOM_TYPE_F32 ? LOOM_TYPE_F32
                        : !strcmp(nm, "token_embd.weight")      ? LOOM_TYPE_Q6_K
                        : strstr(nm, "attn_qkv") || strstr(nm, "attn_v") || (strstr(nm, "ffn_down") && il < 3)
                            ? LOOM_TYPE_Q5_K
                            : LOOM_TYPE_IQ4_XS;
        bad += got[i] != want;
    }
    CHECK(rc == LOOM_OK && bad == 0, "IQ4_XS: %d tensors not as expected", bad);
    CHECK(loom_quant_find_recipe("Q3_K_M") == NULL && loom_quant_find_recipe("q4_k_m") == NULL,
          "unknown recipe names must not resolve");
}

/* Notices (loom_quant_extra.notice) collected: their count and the text of each, joined by '\n'. */
struct notices {
    int n;
    char text[4096];
};

static void collect_notice(void *ctx, const char *message)
{
    struct notices *c = ctx;
    size_t k = strlen(c->text);
    snprintf(c->text + k, sizeof c->text - k, "%s\n", message);
    c->n++;
}

static void test_bad_geometry(void)
{
    static struct tlist l;
    uint32_t got[4];
    const struct loom_quant_model m = {.n_layer = 1, .n_head = 2, .n_head_kv = 1};
    loom_error err = {0};
    l.n = 0;
    tl_add(&l, "token_embd.weight", 256, 10, LOOM_TYPE_F16);
    tl_add(&l, "blk.0.ffn_up.weight", 320, 8, LOOM_TYPE_F16); /* 320 = 10 x 32, not a multiple of 256 */
    tl_add(&l, "blk.0.ffn_gate.weight", 48, 8, LOOM_TYPE_F16); /* not a multiple of 32 either */
    /* the reference's tensor_type_fallback: Q4_K -> Q5_0, IQ4_XS -> IQ4_NL, Q6_K -> Q8_0; F16 when even the
     * 32-block type does not fit */
    static const struct {
        const char *recipe;
        uint32_t up, gate;
    } fb[] = {{"Q4_K_M", LOOM_TYPE_Q5_0, LOOM_TYPE_F16}, {"Q5_K_S", LOOM_TYPE_Q5_1, LOOM_TYPE_F16},
              {"IQ4_XS", LOOM_TYPE_IQ4_NL, LOOM_TYPE_F16}, {"Q6_K", LOOM_TYPE_Q8_0, LOOM_TYPE_F16},
              {"Q8_0", LOOM_TYPE_Q8_0, LOOM_TYPE_F16}};
    int rc;
    for (size_t k = 0; k < sizeof fb / sizeof fb[0]; k++) {
        rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe(fb[k].recipe), got, &err);
        CHECK(rc == LOOM_OK && got[1] == fb[k].up && got[2] == fb[k].gate,
              "%s: row lengths 320 and 48 fall back to %u and %u: rc %d, got %u and %u ('%s')", fb[k].recipe,
              fb[k].up, fb[k].gate, rc, got[1], got[2], err.msg);
    }
    /* each fallback noticed as tensor_type_fallback warns, then counted */
    struct notices seen = {0};
    struct loom_quant_extra x = {.notice = collect_notice, .notice_ctx = &seen};
    rc = loom_quant_choose_types_ex(&m, l.t, l.n, loom_quant_find_recipe("Q4_K_M"), &x, got, &err);
    CHECK(rc == LOOM_OK && seen.n == 3 &&
              strstr(seen.text, "tensor 'blk.0.ffn_up.weight': row length 320 is not a multiple of Q4_K's block "
                                "size 256, using Q5_0 instead\n") &&
              strstr(seen.text, "tensor 'blk.0.ffn_gate.weight': row length 48 is not a multiple of Q4_K's block "
                                "size 256, using F16 instead\n") &&
              strstr(seen.text, "2 of 3 tensors fell back to another type"),
          "Q4_K_M fallbacks noticed: rc %d, %d notices\n%s", rc, seen.n, seen.text);
    l.n = 2;
    l.t[0].type = LOOM_TYPE_Q4_K;
    rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe("Q8_0"), got, &err);
    CHECK(rc == LOOM_E_ARG && strstr(err.msg, "token_embd.weight"), "quantized source: rc %d, '%s'", rc, err.msg);
    /* a mixture-of-experts model takes the ffn layer from the name: one outside blk.0..blk.N-1 is refused */
    const struct loom_quant_model moe = {.n_layer = 1, .n_head = 2, .n_head_kv = 1, .n_expert = 8};
    static const char *const bad_names[] = {"ffn_down_exps.weight", "blk.1.ffn_up_shexp.weight"};
    for (int k = 0; k < 2; k++) {
        l.n = 0;
        tl_add(&l, bad_names[k], 256, 8, LOOM_TYPE_F16);
        rc = loom_quant_choose_types(&moe, l.t, l.n, loom_quant_find_recipe("Q8_0"), got, &err);
        CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, bad_names[k]) && strstr(err.msg, "blk.N."),
              "mixture of experts, tensor %s: rc %d, '%s'", bad_names[k], rc, err.msg);
        rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe("Q8_0"), got, &err);
        CHECK(rc == LOOM_OK, "dense, tensor %s: rc %d, '%s'", bad_names[k], rc, err.msg);
    }
}

/* ---- mixture of experts ------------------------------------------------------------------------------ */

/* The 0.8B list with each layer's dense FFN replaced by a qwen35moe FFN (router, routed experts as 3-D
 * tensors, shared expert and its gate; fused: ffn_gate_up_exps). */
static void tl_qwen35moe(struct tlist *l, uint64_t n_expert, int fused)
{
    static struct tlist dense;
    const uint32_t F16 = LOOM_TYPE_F16, F32 = LOOM_TYPE_F32;
    tl_qwen35_08b(&dense);
    l->n = 0;
    for (size_t i = 0; i < dense.n; i++) {
        int il = -1;
        sscanf(dense.names[i], "blk.%d.", &il);
        if (strstr(dense.names[i], ".ffn_"))
            continue;
        tl_add(l, dense.names[i], dense.t[i].ne[0], dense.t[i].n_dims > 1 ? dense.t[i].ne[1] : 0, dense.t[i].type);
        if (!strstr(dense.names[i], "post_attention_norm"))
            continue;
        tl_layer(l, il, "ffn_gate_inp.weight", 1024, n_expert, F32);
        tl_layer(l, il, "ffn_gate_inp_shexp.weight", 1024, 0, F32);
        tl_layer(l, il, "ffn_gate_shexp.weight", 1024, 512, F16);
        tl_layer(l, il, "ffn_up_shexp.weight", 1024, 512, F16);
        tl_layer(l, il, "ffn_down_shexp.weight", 512, 1024, F16);
        tl_layer(l, il, fused ? "ffn_gate_up_exps.weight" : "ffn_gate_exps.weight", 1024, fused ? 1024 : 512, F16);
        if (!fused)
            tl_layer(l, il, "ffn_up_exps.weight", 1024, 512, F16);
        tl_layer(l, il, "ffn_down_exps.weight", 512, 1024, F16);
        for (size_t k = l->n - (fused ? 2 : 3); k < l->n; k++) { /* the expert tensors are 3-D */
            l->t[k].n_dims = 3;
            l->t[k].ne[2] = n_expert;
        }
    }
}

/* The type llama-quant.cpp's rules (as read: llama_tensor_get_type_impl, layer_info) give tensor t of
 * tl_qwen35moe under Q4_K_M or Q6_K: the 8-expert rules, else under Q4_K_M the dense model's list with every
 * ffn_down (experts and shared expert alike) ruled by the layer of its name. The bytes are checked against
 * llama_model_quantize in tests/parity/test_ref_quantize.c. */
static uint32_t moe_expected(const struct loom_quant_tensor *t, int n_expert, int q4km)
{
    if (t->ne[1] == 1 || strstr(t->name, "ssm_conv1d") || strstr(t->name, "ffn_gate_inp.weight"))
        return t->type;
    if (n_expert == 8 && (strstr(t->name, "attn_qkv") || strstr(t->name, "attn_v") || strstr(t->name, "attn_k.")))
        return LOOM_TYPE_Q8_0;
    if (n_expert == 8 && q4km && strstr(t->name, "attn_output"))
        return LOOM_TYPE_Q5_K;
    return q4km ? q4km_expected(t) : LOOM_TYPE_Q6_K;
}

static void test_moe_recipes(void)
{
    static struct tlist l;
    static uint32_t got[MAX_T];
    static const int experts[] = {4, 8, 16};
    for (int e = 0; e < 3; e++)
        for (int fused = 0; fused < 2; fused++)
            for (int q4km = 0; q4km < 2; q4km++) {
                const struct loom_quant_model m = {.n_layer = L08, .n_head = 8, .n_head_kv = 2,
                                                   .n_expert = (uint32_t)experts[e]};
                loom_error err = {0};
                tl_qwen35moe(&l, (uint64_t)experts[e], fused);
                int rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe(q4km ? "Q4_K_M" : "Q6_K"),
                                                 got, &err);
                int bad = 0;
                for (size_t i = 0; i < l.n; i++)
                    if (got[i] != moe_expected(&l.t[i], experts[e], q4km) && bad++ < 3)
                        fprintf(stderr, "  %d experts%s %s: %s type %u, expected %u\n", experts[e],
                                fused ? " fused" : "", q4km ? "Q4_K_M" : "Q6_K", l.t[i].name, got[i],
                                moe_expected(&l.t[i], experts[e], q4km));
                CHECK(rc == LOOM_OK && bad == 0, "%d experts%s, %s: rc %d (%s), %d tensors not as expected",
                      experts[e], fused ? " fused" : "", q4km ? "Q4_K_M" : "Q6_K", rc, err.msg, bad);
            }
}

/* ---- end to end on a small file ------------------------------------------------------------------- */

static float src_token_embd[8][256];
static uint16_t src_down[4][512];
static float src_norm[256];

static int fill_src(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)err;
    const void *p = index == 0 ? (const void *)src_token_embd : index == 1 ? (const void *)src_norm : (const void *)src_down;
    memcpy(buf, p, (size_t)nbytes);
    return LOOM_OK;
}

/* A one-layer model: token_embd [256, 8] F32, attn_norm [256] F32, ffn_down [512, 4] F16. */
static int write_src(const char *path, uint64_t down_ne0)
{
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < 256; i++)
            src_token_embd[r][i] = rnd_normal() * 0.3f;
    for (int i = 0; i < 256; i++)
        src_norm[i] = 1.0f + 0.01f * (float)i;
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 512; i++)
            src_down[r][i] = loom_f32_to_f16(rnd_normal() * 0.05f);
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    const uint64_t ne_e[2] = {256, 8}, ne_n[1] = {256}, ne_d[2] = {down_ne0, 512 * 4 / down_ne0};
    int rc = loom_gguf_writer_set_str(w, "general.architecture", "qwen35");
    rc |= loom_gguf_writer_set_u32(w, "general.file_type", 1);
    rc |= loom_gguf_writer_set_u32(w, "qwen35.block_count", 1);
    rc |= loom_gguf_writer_set_u32(w, "qwen35.attention.head_count", 2);
    rc |= loom_gguf_writer_set_str(w, "general.name", "quantize test");
    rc |= loom_gguf_writer_add_tensor(w, "token_embd.weight", LOOM_TYPE_F32, 2, ne_e);
    rc |= loom_gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", LOOM_TYPE_F32, 1, ne_n);
    rc |= loom_gguf_writer_add_tensor(w, "blk.0.ffn_down.weight", LOOM_TYPE_F16, 2, ne_d);
    loom_error err = {0};
    if (!rc)
        rc = loom_gguf_writer_write(w, path, fill_src, 0, &err);
    loom_gguf_writer_free(w);
    return rc;
}

static void test_end_to_end(const char *dir)
{
    char in[600], out[600];
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    CHECK(write_src(in, 512) == LOOM_OK, "writing %s", in);
    struct loom_gguf *g = 0, *o = 0;
    loom_error err = {0};
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK, "open %s: %s", in, err.msg);
    int rc = loom_quant_write(g, loom_quant_find_recipe("Q4_K_M"), out, NULL, NULL, NULL, NULL, NULL, &err);
    CHECK(rc == LOOM_OK, "quantize: %s", err.msg);
    if (rc == LOOM_OK && loom_gguf_open(out, &o, &err) == LOOM_OK) {
        CHECK(o->n_tensors == 3 && o->n_kv == 6, "%llu tensors, %llu keys", (unsigned long long)o->n_tensors,
              (unsigned long long)o->n_kv);
        /* input order kept; file_type rewritten and moved last after quantization_version */
        CHECK(loom_gguf_str_eq(o->tensors[0].name, "token_embd.weight") && o->tensors[0].type == LOOM_TYPE_Q6_K,
              "token_embd: type %u", o->tensors[0].type);
        CHECK(o->tensors[1].type == LOOM_TYPE_F32 && !memcmp(o->tensors[1].data, src_norm, sizeof src_norm),
              "attn_norm must be copied verbatim");
        CHECK(o->tensors[2].type == LOOM_TYPE_Q6_K, "ffn_down of layer 0 under Q4_K_M: type %u", o->tensors[2].type);
        CHECK(loom_gguf_str_eq(o->kv[4].key, "general.quantization_version") &&
                  loom_gguf_str_eq(o->kv[5].key, "general.file_type") && !memcmp(o->kv[5].data, &(uint32_t){15}, 4),
              "last keys: quantization_version then file_type = 15");
        CHECK(loom_gguf_str_eq(o->kv[1].key, "qwen35.block_count"), "metadata order kept");
        static uint8_t want[8 * 210];
        loom_type_traits(LOOM_TYPE_Q6_K)->quantize(&src_token_embd[0][0], want, 8 * 256);
        CHECK(o->tensors[0].nbytes == sizeof want && !memcmp(o->tensors[0].data, want, sizeof want),
              "token_embd bytes must equal the Q6_K quantizer's");
        loom_gguf_close(o);
    }
    loom_gguf_close(g);
    unlink(out);

    /* failure after all data is written (the destination is a directory): no file, no temporary left */
    char sub[700];
    snprintf(sub, sizeof sub, "%s/outdir", dir);
    mkdir(sub, 0755);
    g = 0;
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK, "open %s", in);
    rc = loom_quant_write(g, loom_quant_find_recipe("Q8_0"), sub, NULL, NULL, NULL, NULL, NULL, &err);
    CHECK(rc != LOOM_OK && !test_temporary_left(sub), "rename onto a directory: rc %d, temporary %s", rc,
          test_temporary_left(sub) ? "left behind" : "removed");
    loom_gguf_close(g);
    rmdir(sub);

    /* ffn_down rows of 128 under Q4_K_M: Q6_K (layer 0) falls back to Q8_0, as the reference does */
    CHECK(write_src(in, 128) == LOOM_OK, "writing %s", in);
    g = 0;
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK, "open %s", in);
    rc = loom_quant_write(g, loom_quant_find_recipe("Q4_K_M"), out, NULL, NULL, NULL, NULL, NULL, &err);
    o = 0;
    CHECK(rc == LOOM_OK && loom_gguf_open(out, &o, &err) == LOOM_OK && o->tensors[2].type == LOOM_TYPE_Q8_0,
          "row length 128: rc %d '%s', ffn_down type %u, expected Q8_0 (fallback of Q6_K)", rc, err.msg,
          o ? o->tensors[2].type : 0);
    loom_gguf_close(o);
    loom_gguf_close(g);
    unlink(out);
    unlink(in);
}

/* ---- values the output types cannot hold, and non-finite sources ---------------------------------- */

static float bad_embd[4][256], bad_up[4][256], bad_norm[256];

static int fill_bad(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)err;
    memcpy(buf, index == 0 ? (const void *)bad_embd : index == 1 ? (const void *)bad_norm : (const void *)bad_up,
           (size_t)nbytes);
    return LOOM_OK;
}

/* A one-layer F32 model: token_embd [256, 4], attn_norm [256] of ones except element 7 (norm7), ffn_up
 * [256, 4] with Gaussian rows except elements 64..95 of row 2, which hold `big`. */
static int write_bad(const char *path, float big, float norm7)
{
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 256; i++) {
            bad_embd[r][i] = rnd_normal() * 0.3f;
            bad_up[r][i] = r == 2 && i >= 64 && i < 96 ? big : rnd_normal() * 0.05f;
        }
    for (int i = 0; i < 256; i++)
        bad_norm[i] = i == 7 ? norm7 : 1.0f;
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    const uint64_t ne[2] = {256, 4};
    int rc = loom_gguf_writer_set_str(w, "general.architecture", "qwen35");
    rc |= loom_gguf_writer_set_u32(w, "qwen35.block_count", 1);
    rc |= loom_gguf_writer_add_tensor(w, "token_embd.weight", LOOM_TYPE_F32, 2, ne);
    rc |= loom_gguf_writer_add_tensor(w, "blk.0.attn_norm.weight", LOOM_TYPE_F32, 1, ne);
    rc |= loom_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", LOOM_TYPE_F32, 2, ne);
    loom_error err = {0};
    if (!rc)
        rc = loom_gguf_writer_write(w, path, fill_bad, 0, &err);
    loom_gguf_writer_free(w);
    return rc;
}

/* Quantize in with recipe into out; must fail with a message holding every string of want (NULL ended)
 * and leave neither out nor a temporary file behind. */
static void expect_refused(const char *in, const char *out, const char *recipe, const char *const *want)
{
    struct loom_gguf *g = 0;
    loom_error err = {0};
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK, "open %s: %s", in, err.msg);
    int rc = g ? loom_quant_write(g, loom_quant_find_recipe(recipe), out, NULL, NULL, NULL, NULL, NULL, &err) : LOOM_E_IO;
    CHECK(rc != LOOM_OK, "%s: quantizing must fail", recipe);
    int named = rc != LOOM_OK;
    for (int i = 0; want[i] && named; i++)
        named = strstr(err.msg, want[i]) != NULL;
    CHECK(named, "%s: message '%s' must name '%s', '%s', '%s'", recipe, rc ? err.msg : "(none)", want[0], want[1],
          want[2]);
    CHECK(access(out, F_OK) != 0 && !test_temporary_left(out), "%s: output or temporary left behind", recipe);
    loom_gguf_close(g);
    unlink(out);
}

/* llama_model_quantize validates every quantized chunk (ggml_validate_row_data) and refuses a file whose
 * values overflow a type's F16 scales; so must loom, for every recipe, naming the tensor, the row and the
 * block. 1e9 overflows every type loom quantizes to (the parity test checks the same inputs against the
 * reference); 1e6 already overflows Q4_0 (d = max / -8 = -125000 > 65504), the example. Elements
 * 64..95 lie in block 64 / block_size: block 2 of 32-blocks, block 0 of 256-blocks. The expected type is
 * ffn_up's under each recipe (the recipe's default type). */
static void test_huge_values(const char *dir)
{
    char in[600], out[600];
    snprintf(in, sizeof in, "%s/huge.gguf", dir);
    snprintf(out, sizeof out, "%s/huge-out.gguf", dir);
    CHECK(write_bad(in, 1e9f, 1.0f) == LOOM_OK, "writing %s", in);
    for (const struct loom_quant_recipe *r = loom_quant_recipes; r->name; r++) {
        /* recipes whose ffn_up type needs an importance matrix are refused before any row (test_low_bit_rules);
         * MXFP4_MOE puts ffn_up in Q8_0 */
        static const char *const need_im = "IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS ";
        char key[16];
        snprintf(key, sizeof key, "%s ", r->name);
        if (strstr(need_im, key))
            continue;
        const struct loom_type_traits *tr = loom_type_traits(!strcmp(r->name, "MXFP4_MOE") ? LOOM_TYPE_Q8_0
                                                                                           : r->default_type);
        char block[80];
        snprintf(block, sizeof block, "%s block %d scale d is inf", tr->name, (int)(64 / tr->block_size));
        const char *want[] = {"tensor 'blk.0.ffn_up.weight' row 2", block, "expected finite", NULL};
        expect_refused(in, out, r->name, want);
    }
    CHECK(write_bad(in, 1e6f, 1.0f) == LOOM_OK, "writing %s", in);
    const char *want_q4_0[] = {"tensor 'blk.0.ffn_up.weight' row 2", "Q4_0 block 2 scale d is inf", "expected finite",
                               NULL};
    expect_refused(in, out, "Q4_0", want_q4_0);
    unlink(in);
}

/* The reference loads the source with check_tensors, so a NaN or inf in any source tensor, converted or
 * copied, is refused too: an inf in the converted ffn_up (row 2, elements 64..95) and a NaN in the copied
 * F32 norm (its one row). */
static void test_non_finite_source(const char *dir)
{
    char in[600], out[600];
    snprintf(in, sizeof in, "%s/nan.gguf", dir);
    snprintf(out, sizeof out, "%s/nan-out.gguf", dir);
    CHECK(write_bad(in, INFINITY, 1.0f) == LOOM_OK, "writing %s", in);
    const char *want_inf[] = {"tensor 'blk.0.ffn_up.weight' row 2", "source F32 element 64 is inf", "expected finite",
                              NULL};
    expect_refused(in, out, "Q8_0", want_inf);
    CHECK(write_bad(in, 0.5f, NAN) == LOOM_OK, "writing %s", in);
    const char *want_nan[] = {"tensor 'blk.0.attn_norm.weight' row 0", "source F32 element 7 is nan",
                              "expected finite", NULL};
    expect_refused(in, out, "Q4_K_M", want_nan);
    unlink(in);
}

/* Cancelled at each poll (before each of the 3 tensors; tensors of 1024 rows or fewer are not polled within):
 * LOOM_E_CANCELLED, no poll after the one that asked, no temporary file, an existing output untouched. */
static void test_cancel(const char *dir)
{
    char in[600], out[600], old[8] = {0};
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    struct loom_gguf *g = 0;
    loom_error err = {0};
    FILE *f = fopen(out, "w");
    if (f)
        fputs("old", f), fclose(f);
    if (write_src(in, 512) != LOOM_OK || loom_gguf_open(in, &g, &err) != LOOM_OK || !f) {
        CHECK(0, "cancel setup: %s", err.msg);
        return;
    }
    for (int k = 0; k <= 3; k++) {
        struct abort_at a = {0, k};
        int rc = loom_quant_write(g, loom_quant_find_recipe("Q4_K_M"), out, NULL, NULL, NULL, abort_at, &a, &err);
        f = fopen(out, "r");
        size_t got = f ? fread(old, 1, sizeof old - 1, f) : 0;
        if (f)
            fclose(f);
        if (k == 3) {
            CHECK(rc == LOOM_OK && a.polls == 3, "not cancelled: rc %d after %d polls, expected 3 (%s)", rc, a.polls,
                  err.msg);
            break;
        }
        CHECK(rc == LOOM_E_CANCELLED && a.polls == k + 1 && strstr(err.msg, "cancelled"),
              "cancel at poll %d: rc %d after %d polls (%s)", k, rc, a.polls, err.msg);
        CHECK(!test_temporary_left(out) && got == 3 && !memcmp(old, "old", 3),
              "cancel at poll %d: a temporary file left or the existing output changed", k);
    }
    loom_gguf_close(g);
    unlink(out);
    unlink(in);
}

/* ---- importance matrices ---------------------------------------------------------------------------- */

/* The imatrix file's defects write_imatrix can plant. */
enum im_defect { IM_OK, IM_TYPE_MODEL, IM_NO_TYPE, IM_NO_CHUNK_SIZE, IM_NO_COUNTS, IM_NO_SUMS, IM_F16, IM_LENGTH,
                 IM_NAN, IM_NEG_COUNT, IM_NO_ENTRIES, IM_N };

static float im_down_sums[512], im_exps_sums[4][256], im_down_count = 10, im_exps_counts[4] = {5, 0, 2.4f, 7};

static int fill_imatrix(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)err;
    const enum im_defect d = *(const enum im_defect *)ctx;
    const void *src[] = {im_down_sums, &im_down_count, im_exps_sums, im_exps_counts};
    if (d == IM_NO_ENTRIES || (d == IM_F16 && index == 0))
        memset(buf, 0, (size_t)nbytes);
    else
        memcpy(buf, src[index], (size_t)nbytes);
    if (d == IM_NAN && index == 2)
        ((float *)buf)[300] = NAN;
    if (d == IM_NEG_COUNT && index == 3)
        ((float *)buf)[1] = -1;
    return LOOM_OK;
}

/* An imatrix as llama-imatrix writes one (general.type, datasets, chunk count and size; per entry in_sum2 [ne0,
 * n_mat] and counts [1, n_mat]) for blk.0.ffn_down.weight (512 columns, count 10) and blk.0.ffn_down_exps.weight
 * (4 experts of 256 columns, counts 5, 0, 2.4, 7), with defect d planted. */
static int write_imatrix(const char *path, enum im_defect d)
{
    for (int i = 0; i < 512; i++)
        im_down_sums[i] = 0.5f + (float)i;
    for (int e = 0; e < 4; e++)
        for (int i = 0; i < 256; i++)
            im_exps_sums[e][i] = (float)(e + 1) * 0.25f * (float)(i + 1);
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    struct loom_gguf_str ds = {15, "calibration.txt"};
    int rc = d == IM_NO_TYPE ? 0 : loom_gguf_writer_set_str(w, "general.type", d == IM_TYPE_MODEL ? "model" : "imatrix");
    rc |= loom_gguf_writer_set_arr_str(w, "imatrix.datasets", &ds, 1);
    rc |= loom_gguf_writer_set_u32(w, "imatrix.chunk_count", 3);
    if (d != IM_NO_CHUNK_SIZE)
        rc |= loom_gguf_writer_set_u32(w, "imatrix.chunk_size", 512);
    const uint64_t ne_ds[2] = {512, 1}, ne_dc[2] = {1, 1}, ne_es[2] = {256, 4}, ne_ec[2] = {d == IM_LENGTH ? 3 : 1,
                                                                                        d == IM_LENGTH ? 1 : 4};
    char n1[64], n2[64], n3[64], n4[64];
    snprintf(n1, sizeof n1, "blk.0.ffn_down.weight.%s", d == IM_NO_ENTRIES ? "sums" : "in_sum2");
    snprintf(n2, sizeof n2, "blk.0.ffn_down.weight.%s", d == IM_NO_ENTRIES ? "count" : "counts");
    snprintf(n3, sizeof n3, "blk.0.ffn_down_exps.weight.%s", d == IM_NO_SUMS ? "in_sum3" : "in_sum2");
    snprintf(n4, sizeof n4, "blk.0.ffn_down_exps.weight.%s", d == IM_NO_COUNTS ? "count" : "counts");
    rc |= loom_gguf_writer_add_tensor(w, n1, d == IM_F16 ? LOOM_TYPE_F16 : LOOM_TYPE_F32, 2, ne_ds);
    rc |= loom_gguf_writer_add_tensor(w, n2, LOOM_TYPE_F32, 2, ne_dc);
    if (d != IM_NO_ENTRIES) {
        rc |= loom_gguf_writer_add_tensor(w, n3, LOOM_TYPE_F32, 2, ne_es);
        rc |= loom_gguf_writer_add_tensor(w, n4, LOOM_TYPE_F32, 2, ne_ec);
    }
    loom_error err = {0};
    if (!rc)
        rc = loom_gguf_writer_write(w, path, fill_imatrix, &d, &err);
    loom_gguf_writer_free(w);
    return rc;
}

/* The reader: weights = sums / lround(count) per expert, 1 for a zero count; every defect refused naming it. */
static void test_imatrix_load(const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/im.gguf", dir);
    loom_error err = {0};
    struct loom_imatrix *m = NULL;
    CHECK(write_imatrix(path, IM_OK) == LOOM_OK, "writing %s", path);
    int rc = loom_imatrix_load(path, &m, &err);
    CHECK(rc == LOOM_OK, "load: %s", err.msg);
    if (rc == LOOM_OK) {
        CHECK(m->n == 2 && m->chunk_count == 3 && m->chunk_size == 512 && m->n_datasets == 1 &&
                  !strcmp(m->datasets[0], "calibration.txt") && !strcmp(m->path, path),
              "%zu entries, chunks %u of %u, %zu datasets", m->n, m->chunk_count, m->chunk_size, m->n_datasets);
        const struct loom_imatrix_entry *d = loom_imatrix_find(m, "blk.0.ffn_down.weight");
        const struct loom_imatrix_entry *e = loom_imatrix_find(m, "blk.0.ffn_down_exps.weight");
        CHECK(d && d->n_per_row == 512 && d->n_mat == 1 && d->weights[7] == 7.5f / 10.0f, "dense entry");
        CHECK(e && e->n_per_row == 256 && e->n_mat == 4 && e->weights[3] == 0.25f * 4 / 5.0f &&
                  e->weights[256 + 9] == 1.0f && e->weights[512 + 9] == 0.75f * 10 / 2.0f &&
                  e->weights[768] == 1.0f * 1 / 7.0f,
              "expert entry: per-expert counts (2.4 rounds to 2), 1 for the expert with count 0");
        CHECK(!loom_imatrix_find(m, "blk.0.ffn_up.weight") && !loom_imatrix_find(m, "blk.0.ffn_down"), "no others");
        loom_imatrix_free(m);
    }
    static const struct {
        enum im_defect d;
        const char *want;
    } bad[] = {{IM_TYPE_MODEL, "general.type is 'model'"}, {IM_NO_TYPE, "general.type"},
               {IM_NO_CHUNK_SIZE, "imatrix.chunk_size"},   {IM_NO_COUNTS, "blk.0.ffn_down_exps.weight.counts"},
               {IM_NO_SUMS, "blk.0.ffn_down_exps.weight.in_sum2"}, {IM_F16, "expected F32"},
               {IM_LENGTH, "1024 sums and 3 counts"},      {IM_NAN, "expert 1 column 44"},
               {IM_NEG_COUNT, "count 1: -1"},              {IM_NO_ENTRIES, "expected at least one entry"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        m = NULL;
        CHECK(write_imatrix(path, bad[k].d) == LOOM_OK, "writing defect %d", bad[k].d);
        rc = loom_imatrix_load(path, &m, &err);
        CHECK(rc == LOOM_E_FORMAT && m == NULL && strstr(err.msg, bad[k].want) && strstr(err.msg, path),
              "defect %d: rc %d, message '%s', expected it to name '%s'", bad[k].d, rc, err.msg, bad[k].want);
    }
    FILE *f = fopen(path, "wb"); /* the legacy .dat format: an int32 entry count first */
    fwrite("\x02\x00\x00\x00\x05\x00\x00\x00", 1, 8, f);
    fclose(f);
    rc = loom_imatrix_load(path, &m, &err);
    CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, "legacy .dat"), "legacy file: rc %d '%s'", rc, err.msg);
    unlink(path);
    rc = loom_imatrix_load(path, &m, &err);
    CHECK(rc == LOOM_E_IO && strstr(err.msg, path), "missing file: rc %d '%s'", rc, err.msg);
}

/* llama-quant.cpp use_more_bits. */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* --tensor-type: parsing and its errors (also through the public loom_quantize_check_tensor_type, which the CLI
 * runs before reading any file), first match wins, the recipe's counters skip an overridden tensor, and a
 * pattern that chose no tensor's type is noticed with the reason. */
static void test_overrides(void)
{
    struct loom_quant_overrides *ov = NULL;
    loom_error err = {0};
    static const struct {
        const char *spec, *want;
    } bad[] = {{"attn_q", "expected PATTERN=TYPE"}, {"=q8_0", "found no pattern"}, {"attn_q=", "found no type"},
               {"attn_q=q4_k_m", "type 'q4_k_m'"},  {"attn_q=q8_k", "type 'q8_k'"},
               {"(?:attn)=q8_0", "not a POSIX extended regular expression"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *spec = bad[k].spec;
        int rc = loom_quant_overrides_parse(&spec, 1, &ov, &err);
        CHECK(rc == LOOM_E_ARG && strstr(err.msg, bad[k].want) && strstr(err.msg, spec),
              "override '%s': rc %d, '%s', expected '%s'", spec, rc, err.msg, bad[k].want);
        loom_error e2 = {0};
        rc = loom_quantize_check_tensor_type(spec, &e2);
        CHECK(rc == LOOM_E_ARG && !strcmp(e2.msg, err.msg), "check_tensor_type '%s': rc %d '%s'", spec, rc, e2.msg);
    }
    CHECK(loom_quantize_check_tensor_type("blk\\.\\d+\\.attn_q=Q8_0", &err) == LOOM_OK, "a good spec: %s", err.msg);
    /* dense 0.8B list under Q4_K_M: attn_v of layer 3 overridden (patterns are lowercased), so the counter of
     * attn_v-like tensors (one attn_qkv or attn_v per layer) skips it and layer L > 3 is counted as L - 1;
     * ffn_down of layers 0..9 (\d) to F16, the first matching override winning over the next, so the dense
     * ffn_down counter makes layer L >= 10 count as L - 10; attn_output to IQ4_NL; a norm is never quantized */
    static const char *const specs[] = {"BLK\\.3\\.ATTN_V=Q8_0", "blk\\.\\d\\.ffn_down=f16", "blk\\.1\\.ffn_down=q4_0",
                                        "attn_output=IQ4_NL", "ssm_norm=q8_0"};
    int rc = loom_quant_overrides_parse(specs, 5, &ov, &err);
    CHECK(rc == LOOM_OK, "overrides: %s", err.msg);
    if (rc != LOOM_OK)
        return;
    static struct tlist l;
    static uint32_t got[MAX_T];
    tl_qwen35_08b(&l);
    const struct loom_quant_model m = {.n_layer = L08, .n_head = 8, .n_head_kv = 2};
    struct notices seen = {0};
    struct loom_quant_extra x = {.overrides = ov, .notice = collect_notice, .notice_ctx = &seen};
    rc = loom_quant_choose_types_ex(&m, l.t, l.n, loom_quant_find_recipe("Q4_K_M"), &x, got, &err);
    CHECK(rc == LOOM_OK, "choose with overrides: %s", err.msg);
    CHECK(seen.n == 2 &&
              strstr(seen.text, "--tensor-type pattern 'blk\\.1\\.ffn_down' chose the type of no tensor: it matches "
                                "only tensors an earlier pattern took\n") &&
              strstr(seen.text, "--tensor-type pattern 'ssm_norm' chose the type of no tensor: it matches no "
                                "quantizable tensor name\n"),
          "the two overrides that chose nothing are noticed (and nothing else: no fallback): %d\n%s", seen.n,
          seen.text);
    int bad_n = 0;
    for (size_t i = 0; rc == LOOM_OK && i < l.n; i++) {
        const struct loom_quant_tensor *t = &l.t[i];
        int il = -1;
        sscanf(t->name, "blk.%d.", &il);
        uint32_t want = q4km_expected(t);
        if (il == 3 && strstr(t->name, "attn_v"))
            want = LOOM_TYPE_Q8_0;
        else if (strstr(t->name, "attn_v") || strstr(t->name, "attn_qkv"))
            want = more_bits(il > 3 ? il - 1 : il, L08) ? LOOM_TYPE_Q6_K : LOOM_TYPE_Q4_K;
        else if (il >= 0 && il < 10 && strstr(t->name, "ffn_down"))
            want = LOOM_TYPE_F16;
        else if (strstr(t->name, "ffn_down"))
            want = more_bits(il - 10, L08) ? LOOM_TYPE_Q6_K : LOOM_TYPE_Q4_K;
        else if (strstr(t->name, "attn_output"))
            want = LOOM_TYPE_IQ4_NL;
        if (got[i] != want && bad_n++ < 5)
            fprintf(stderr, "  %s: got %u, expected %u\n", t->name, got[i], want);
    }
    CHECK(bad_n == 0, "%d tensors with overrides differ", bad_n);
    loom_quant_overrides_free(ov);
}

/* The recipe rules that test has_imatrix: IQ4_XS keeps the first eighth of ffn_down, Q4_0 moves it to Q4_1. */
static void test_imatrix_rules(void)
{
    static struct tlist l;
    static uint32_t plain[MAX_T], with[MAX_T];
    tl_qwen35_08b(&l);
    const struct loom_quant_model m = {.n_layer = L08, .n_head = 8, .n_head_kv = 2};
    struct loom_imatrix im = {0};
    struct loom_quant_extra x = {.imatrix = &im};
    loom_error err = {0};
    static const struct {
        const char *recipe;
        uint32_t plain, with;
    } cases[] = {{"IQ4_XS", LOOM_TYPE_Q5_K, LOOM_TYPE_IQ4_XS}, {"Q4_0", LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1}};
    for (size_t c = 0; c < 2; c++) {
        int rc = loom_quant_choose_types_ex(&m, l.t, l.n, loom_quant_find_recipe(cases[c].recipe), NULL, plain, &err);
        rc |= loom_quant_choose_types_ex(&m, l.t, l.n, loom_quant_find_recipe(cases[c].recipe), &x, with, &err);
        int bad = 0, n_down = 0;
        for (size_t i = 0; i < l.n; i++) {
            int il = -1;
            sscanf(l.t[i].name, "blk.%d.", &il);
            int first = strstr(l.t[i].name, "ffn_down") && il < L08 / 8;
            n_down += first;
            bad += first ? plain[i] != cases[c].plain || with[i] != cases[c].with : plain[i] != with[i];
        }
        CHECK(rc == LOOM_OK && bad == 0 && n_down == 3, "%s: %d tensors differ from the imatrix rules (rc %d)",
              cases[c].recipe, bad, rc);
    }
}

/* The type llama-quant.cpp's rules (as read) give tensor t of tl_qwen35_08b (n_expert 0; tied: no
 * output.weight) or tl_qwen35moe under TQ1_0, TQ2_0, MXFP4_MOE, IQ1_S or IQ1_M: the output (or tied token
 * embedding) Q8_0 under MXFP4_MOE, Q5_K under IQ1, else Q6_K; under MXFP4_MOE expert tensors MXFP4, all else
 * Q8_0; an untied token embedding Q2_K under IQ1, Q4_K under TQ; under TQ with 8 experts attn_qkv/attn_v/attn_k
 * Q8_0 (the generic rule); under IQ1 (n_gqa 4) attn_qkv/attn_v Q4_K,
 * attn_k Q4_K with 8 experts, the first L08 / 8 ffn_down tensors in the reference's order Q2_K (counted,
 * experts and shared experts alike: idown), attn_output Q5_K with 8 experts, else IQ2_XXS. */
static uint32_t low_bit_expected(const struct loom_quant_tensor *t, uint32_t def, int n_expert, int tied)
{
    if (t->ne[1] == 1 || strstr(t->name, "ssm_conv1d") || strstr(t->name, "ffn_gate_inp.weight"))
        return t->type;
    int embd = !strcmp(t->name, "token_embd.weight"), iq1 = def == LOOM_TYPE_IQ1_S || def == LOOM_TYPE_IQ1_M;
    if (!strcmp(t->name, "output.weight") || (tied && embd))
        return def == LOOM_TYPE_MXFP4 ? LOOM_TYPE_Q8_0 : iq1 ? LOOM_TYPE_Q5_K : LOOM_TYPE_Q6_K;
    if (def == LOOM_TYPE_MXFP4)
        return t->n_dims > 2 ? LOOM_TYPE_MXFP4 : LOOM_TYPE_Q8_0;
    if (embd)
        return iq1 ? LOOM_TYPE_Q2_K : LOOM_TYPE_Q4_K;
    int attn_v = strstr(t->name, "attn_qkv") || strstr(t->name, "attn_v."), attn_k = strstr(t->name, "attn_k.") != 0;
    if (!iq1) /* TQ: the generic 8-expert rule */
        return n_expert == 8 && (attn_v || attn_k) ? LOOM_TYPE_Q8_0 : def;
    int il = -1;
    sscanf(t->name, "blk.%d.", &il);
    int idown = n_expert ? 2 * il + (strstr(t->name, "shexp") != NULL) : il;
    if (attn_v || (n_expert == 8 && attn_k))
        return LOOM_TYPE_Q4_K;
    if (strstr(t->name, "ffn_down"))
        return idown < L08 / 8 ? LOOM_TYPE_Q2_K : def;
    if (strstr(t->name, "attn_output"))
        return n_expert == 8 ? LOOM_TYPE_Q5_K : LOOM_TYPE_IQ2_XXS;
    return def;
}

/* The low-bit recipes' type choices on the dense 0.8B geometry (tied and untied) and the MoE one (4, 8, 16
 * experts, fused and separate gate/up), with an importance matrix; and IQ1_S, IQ1_M refused without one, naming
 * the recipe and the tensor (the reference's "requires an imatrix"). Bytes: tests/parity/test_ref_quantize.c. */
static void test_low_bit_rules(const char *dir)
{
    static struct tlist l;
    static uint32_t got[MAX_T];
    static const char *const recipes[] = {"TQ1_0", "TQ2_0", "MXFP4_MOE", "IQ1_S", "IQ1_M"};
    struct loom_imatrix im = {0};
    struct loom_quant_extra x = {.imatrix = &im};
    for (size_t k = 0; k < 5; k++)
        for (int g = 0; g < 8; g++) {
            int n_expert = g < 2 ? 0 : (int[]){4, 8, 16}[(g - 2) / 2], tied = g != 1;
            if (n_expert)
                tl_qwen35moe(&l, (uint64_t)n_expert, g % 2);
            else
                tl_qwen35_08b(&l);
            if (!tied)
                tl_add(&l, "output.weight", 1024, 248320, LOOM_TYPE_F16);
            const struct loom_quant_model m = {.n_layer = L08, .n_head = 8, .n_head_kv = 2,
                                               .n_expert = (uint32_t)n_expert};
            const struct loom_quant_recipe *r = loom_quant_find_recipe(recipes[k]);
            loom_error err = {0};
            int rc = r ? loom_quant_choose_types_ex(&m, l.t, l.n, r, &x, got, &err) : LOOM_E_ARG, bad = 0;
            for (size_t i = 0; rc == LOOM_OK && i < l.n; i++) {
                uint32_t want = low_bit_expected(&l.t[i], r->default_type, n_expert, tied);
                if (got[i] != want && bad++ < 3)
                    fprintf(stderr, "  %s %d experts%s: %s type %u, expected %u\n", recipes[k], n_expert,
                            tied ? "" : " untied", l.t[i].name, got[i], want);
            }
            CHECK(rc == LOOM_OK && bad == 0, "%s, %d experts (geometry %d): rc %d (%s), %d tensors not as expected",
                  recipes[k], n_expert, g, rc, err.msg, bad);
        }
    char in[600], out[600];
    snprintf(in, sizeof in, "%s/low.gguf", dir);
    snprintf(out, sizeof out, "%s/low-out.gguf", dir);
    CHECK(write_src(in, 512) == LOOM_OK, "writing %s", in);
    const char *want_s[] = {"recipe IQ1_S", "'blk.0.ffn_down.weight'", "importance matrix", NULL};
    const char *want_m[] = {"recipe IQ1_M", "'blk.0.ffn_down.weight'", "importance matrix", NULL};
    expect_refused(in, out, "IQ1_S", want_s);
    expect_refused(in, out, "IQ1_M", want_m);
    unlink(in);
}

/* The type llama-quant.cpp's rules (as read) give tensor t under the grid IQ recipes IQ3_S, IQ3_M, IQ3_XXS,
 * IQ2_S, IQ2_M, IQ2_XS, IQ2_XXS (default types IQ3_S, IQ3_S, IQ3_XXS, IQ2_XS, IQ2_S, IQ2_XS, IQ2_XXS), on
 * tl_qwen35_08b (n_expert 0) or tl_qwen35moe, n_gqa gqa, with or without an importance matrix (im). Output (or
 * tied token embedding): Q5_K under IQ3_XXS and the IQ2 recipes, Q6_K under IQ3_S/IQ3_M. Untied token
 * embedding: Q2_K under IQ2_XS/IQ2_XXS, IQ3_S under IQ2_S/IQ2_M/IQ3_XXS, else the default. IQ2 recipes (the
 * very-low-bit branch): attn_v-like Q4_K when gqa >= 4 or 4+ experts, else IQ3_S (IQ2_S/IQ2_M) or Q2_K; attn_k
 * Q4_K with 8 experts; the first L08/8 ffn_down tensors by running count (idown) IQ3_S or Q2_K; attn_output Q5_K
 * with 8 experts, else IQ3_S under IQ2_S/IQ2_M. IQ3 recipes: attn_v-like under IQ3_XXS Q4_K (gqa >= 4), IQ3_S
 * (no imatrix) or IQ3_XXS; under IQ3_S Q4_K when gqa >= 4; under IQ3_M Q4_K; Q8_0 with 8 experts. attn_k Q8_0
 * with 8 experts, else IQ2_S under IQ3_XXS, as attn_q. attn_output Q5_K with 8 experts, else IQ3_S (IQ3_XXS) or
 * Q4_K (IQ3_M). ffn_down by the layer (of the name): IQ3_XXS without imatrix Q4_K below L08/8 and Q3_K after;
 * IQ3_M Q4_K below L08/8 and, with 8 experts, where use_more_bits. */
static uint32_t iq_grid_expected(const struct loom_quant_tensor *t, const char *recipe, uint32_t def, int n_expert,
                                 int tied, int im, int gqa)
{
    if (t->ne[1] == 1 || strstr(t->name, "ssm_conv1d") || strstr(t->name, "ffn_gate_inp.weight"))
        return t->type;
    int xxs3 = !strcmp(recipe, "IQ3_XXS"), s3 = !strcmp(recipe, "IQ3_S"), m3 = !strcmp(recipe, "IQ3_M");
    int sm2 = !strcmp(recipe, "IQ2_S") || !strcmp(recipe, "IQ2_M"), low = !xxs3 && !s3 && !m3;
    int embd = !strcmp(t->name, "token_embd.weight");
    if (!strcmp(t->name, "output.weight") || (tied && embd))
        return s3 || m3 ? LOOM_TYPE_Q6_K : LOOM_TYPE_Q5_K;
    if (embd)
        return sm2 || xxs3 ? LOOM_TYPE_IQ3_S : low ? LOOM_TYPE_Q2_K : def;
    int attn_v = strstr(t->name, "attn_qkv") || strstr(t->name, "attn_v."), attn_k = strstr(t->name, "attn_k.") != 0;
    int down = strstr(t->name, "ffn_down") != 0, out = strstr(t->name, "attn_output") != 0, il = -1;
    sscanf(t->name, "blk.%d.", &il);
    if (low) {
        int idown = n_expert ? 2 * il + (strstr(t->name, "shexp") != NULL) : il;
        uint32_t up = sm2 ? LOOM_TYPE_IQ3_S : LOOM_TYPE_Q2_K;
        if (attn_v)
            return gqa >= 4 || n_expert >= 4 ? LOOM_TYPE_Q4_K : up;
        if (n_expert == 8 && attn_k)
            return LOOM_TYPE_Q4_K;
        if (down)
            return idown < L08 / 8 ? up : def;
        if (out)
            return n_expert == 8 ? LOOM_TYPE_Q5_K : sm2 ? LOOM_TYPE_IQ3_S : def;
        return def;
    }
    if (attn_v) {
        if (n_expert == 8)
            return LOOM_TYPE_Q8_0;
        if (xxs3)
            return gqa >= 4 ? LOOM_TYPE_Q4_K : im ? LOOM_TYPE_IQ3_XXS : LOOM_TYPE_IQ3_S;
        return m3 || gqa >= 4 ? LOOM_TYPE_Q4_K : def;
    }
    if (attn_k && n_expert == 8)
        return LOOM_TYPE_Q8_0;
    if (attn_k || strstr(t->name, "attn_q.weight"))
        return xxs3 ? LOOM_TYPE_IQ2_S : def;
    if (out)
        return n_expert == 8 ? LOOM_TYPE_Q5_K : xxs3 ? LOOM_TYPE_IQ3_S : m3 ? LOOM_TYPE_Q4_K : def;
    if (down && xxs3 && !im)
        return il < L08 / 8 ? LOOM_TYPE_Q4_K : LOOM_TYPE_Q3_K;
    int more = il < L08 / 8 || il >= 7 * L08 / 8 || (il - L08 / 8) % 3 == 2;
    if (down && m3 && (il < L08 / 8 || (n_expert == 8 && more)))
        return LOOM_TYPE_Q4_K;
    return def;
}

/* The grid IQ recipes' type choices on the dense 0.8B geometry (tied and untied) and the MoE one (4, 8, 16
 * experts, fused and separate gate/up), n_gqa 4 and 1, with and without an importance matrix; and IQ2_S, IQ2_M,
 * IQ2_XS, IQ2_XXS refused without one, naming the recipe. Bytes:
 * tests/parity/test_ref_quantize.c (test_iq_recipes). */
static void test_iq_grid_rules(const char *dir)
{
    static struct tlist l;
    static uint32_t got[MAX_T];
    static const char *const recipes[] = {"IQ3_S", "IQ3_M", "IQ3_XXS", "IQ2_S", "IQ2_M", "IQ2_XS", "IQ2_XXS"};
    static const uint32_t defaults[] = {LOOM_TYPE_IQ3_S, LOOM_TYPE_IQ3_S, LOOM_TYPE_IQ3_XXS, LOOM_TYPE_IQ2_XS,
                                        LOOM_TYPE_IQ2_S, LOOM_TYPE_IQ2_XS, LOOM_TYPE_IQ2_XXS};
    struct loom_imatrix im = {0};
    struct loom_quant_extra x = {.imatrix = &im};
    int n_checked = 0;
    for (size_t k = 0; k < 7; k++)
        for (int g = 0; g < 32; g++) {
            int geo = g % 8, n_expert = geo < 2 ? 0 : (int[]){4, 8, 16}[(geo - 2) / 2], tied = geo != 1;
            int with_im = g / 8 % 2, gqa = g / 16 ? 1 : 4;
            if (n_expert)
                tl_qwen35moe(&l, (uint64_t)n_expert, geo % 2);
            else
                tl_qwen35_08b(&l);
            if (!tied)
                tl_add(&l, "output.weight", 1024, 248320, LOOM_TYPE_F16);
            const struct loom_quant_model m = {.n_layer = L08, .n_head = 8, .n_head_kv = gqa == 4 ? 2 : 8,
                                               .n_expert = (uint32_t)n_expert};
            const struct loom_quant_recipe *r = loom_quant_find_recipe(recipes[k]);
            loom_error err = {0};
            int rc = r ? loom_quant_choose_types_ex(&m, l.t, l.n, r, with_im ? &x : NULL, got, &err) : LOOM_E_ARG;
            int bad = r && r->default_type != defaults[k];
            for (size_t i = 0; rc == LOOM_OK && i < l.n; i++) {
                uint32_t want = iq_grid_expected(&l.t[i], recipes[k], defaults[k], n_expert, tied, with_im, gqa);
                if (got[i] != want && bad++ < 3)
                    fprintf(stderr, "  %s %d experts%s%s gqa %d: %s type %u, expected %u\n", recipes[k], n_expert,
                            tied ? "" : " untied", with_im ? " imatrix" : "", gqa, l.t[i].name, got[i], want);
            }
            n_checked++;
            CHECK(rc == LOOM_OK && bad == 0, "%s, %d experts (geometry %d, %s, gqa %d): rc %d (%s), %d tensors not "
                  "as expected", recipes[k], n_expert, geo, with_im ? "imatrix" : "no imatrix", gqa, rc, err.msg, bad);
        }
    printf("grid IQ recipes: %d geometry/imatrix/gqa cases of type choices checked\n", n_checked);
    char in[600], out[600];
    snprintf(in, sizeof in, "%s/iq-grid.gguf", dir);
    snprintf(out, sizeof out, "%s/iq-grid-out.gguf", dir);
    CHECK(write_src(in, 512) == LOOM_OK, "writing %s", in);
    /* IQ3_XXS is accepted here: this model's only matrix, ffn_down, goes to Q3_K without an imatrix (the
     * reference's rule), which needs none; the parity test checks its refusal on the tiny model */
    for (size_t k = 3; k < 7; k++) {
        char name[32];
        snprintf(name, sizeof name, "recipe %s", recipes[k]);
        const char *want[] = {name, "importance matrix", "--imatrix", NULL};
        expect_refused(in, out, recipes[k], want);
    }
    /* IQ2_XXS and IQ2_XS have no unweighted quantizer (the reference's ggml_quantize_chunk aborts without
     * weights): the token embedding, exempt from the recipe's imatrix check, overridden to one is refused */
    static const char *const specs[] = {"token_embd=iq2_xxs", "token_embd=iq2_xs"};
    for (int k = 0; k < 2; k++) {
        struct loom_quant_overrides *ov = 0;
        struct loom_gguf *g = 0;
        loom_error err = {0};
        int rc = loom_quant_overrides_parse(&specs[k], 1, &ov, &err);
        rc = rc ? rc : loom_gguf_open(in, &g, &err);
        struct loom_quant_extra xo = {.overrides = ov};
        rc = rc ? rc : loom_quant_write_ex(g, loom_quant_find_recipe("Q8_0"), &xo, out, NULL, NULL, NULL, NULL, NULL,
                                           &err);
        CHECK(rc == LOOM_E_ARG && strstr(err.msg, "'token_embd.weight'") && strstr(err.msg, "needs importance weights"),
              "%s without an imatrix: rc %d '%s', expected a refusal naming the tensor", specs[k], rc, err.msg);
        CHECK(access(out, F_OK) != 0, "%s: output left behind", specs[k]);
        loom_gguf_close(g);
        loom_quant_overrides_free(ov);
        unlink(out);
    }
    unlink(in);
}

/* loom_quant_write_ex with an imatrix: the weighted quantizer's bytes for covered tensors (an expert's row with
 * its own weights), the quantize.imatrix.* keys after general.file_type, and a size mismatch refused. */
static void test_imatrix_write(const char *dir)
{
    char in[600], out[600], im_path[600];
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(im_path, sizeof im_path, "%s/im.gguf", dir);
    CHECK(write_src(in, 512) == LOOM_OK && write_imatrix(im_path, IM_OK) == LOOM_OK, "writing the inputs");
    struct loom_gguf *g = 0, *o = 0;
    struct loom_imatrix *im = 0;
    loom_error err = {0};
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK && loom_imatrix_load(im_path, &im, &err) == LOOM_OK, "open: %s",
          err.msg);
    if (!g || !im)
        return;
    struct loom_quant_extra x = {.imatrix = im};
    int rc = loom_quant_write_ex(g, loom_quant_find_recipe("Q4_K_M"), &x, out, NULL, NULL, NULL, NULL, NULL, &err);
    CHECK(rc == LOOM_OK, "quantize with imatrix: %s", err.msg);
    if (rc == LOOM_OK && loom_gguf_open(out, &o, &err) == LOOM_OK) {
        static const char *const keys[] = {"general.quantization_version", "general.file_type", "quantize.imatrix.file",
                                           "quantize.imatrix.dataset", "quantize.imatrix.entries_count",
                                           "quantize.imatrix.chunks_count"};
        int keys_ok = o->n_kv == 10;
        for (int k = 0; keys_ok && k < 6; k++)
            keys_ok = loom_gguf_str_eq(o->kv[4 + k].key, keys[k]);
        struct loom_gguf_str v;
        uint32_t n_entries = 0, n_chunks = 0;
        keys_ok = keys_ok && loom_gguf_get_str(o, "quantize.imatrix.file", 0, &v, &err) == LOOM_OK &&
                  loom_gguf_str_eq(v, im_path) && loom_gguf_get_str(o, "quantize.imatrix.dataset", 0, &v, &err) == 0 &&
                  loom_gguf_str_eq(v, "calibration.txt") &&
                  loom_gguf_get_u32(o, "quantize.imatrix.entries_count", 0, &n_entries, &err) == LOOM_OK &&
                  loom_gguf_get_u32(o, "quantize.imatrix.chunks_count", 0, &n_chunks, &err) == LOOM_OK &&
                  n_entries == 2 && n_chunks == 3;
        CHECK(keys_ok, "quantize.imatrix.* keys after general.file_type, in the reference's order and values");
        /* ffn_down (layer 0 of 1: Q6_K) quantized row by row with the entry's weights */
        static float row[512];
        static uint8_t want[4 * 420];
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < 512; i++)
                row[i] = loom_f16_to_f32(src_down[r][i]);
            loom_type_traits(LOOM_TYPE_Q6_K)->quantize_w(row, want + r * 420, 512, loom_imatrix_find(im,
                                                         "blk.0.ffn_down.weight")->weights);
        }
        CHECK(o->tensors[2].type == LOOM_TYPE_Q6_K && !memcmp(o->tensors[2].data, want, sizeof want),
              "ffn_down bytes must be the weighted Q6_K quantizer's");
        loom_gguf_close(o);
    }
    unlink(out);
    loom_imatrix_free(im);
    /* an entry whose size is not the tensor's: refused, naming both (ffn_down of 128 columns against 512) */
    loom_gguf_close(g);
    g = 0;
    im = 0;
    CHECK(write_src(in, 128) == LOOM_OK && loom_gguf_open(in, &g, &err) == LOOM_OK &&
              loom_imatrix_load(im_path, &im, &err) == LOOM_OK, "open: %s", err.msg);
    x.imatrix = im;
    rc = g && im ? loom_quant_write_ex(g, loom_quant_find_recipe("Q4_K_M"), &x, out, NULL, NULL, NULL, NULL, NULL, &err)
                 : -1;
    CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, "blk.0.ffn_down.weight") && strstr(err.msg, "512") &&
              strstr(err.msg, "128") && access(out, F_OK) != 0,
          "imatrix size mismatch: rc %d '%s'", rc, err.msg);
    loom_imatrix_free(im);
    loom_gguf_close(g);
    unlink(in);
    unlink(im_path);
}

int main(void)
{
    test_round_trip();
    test_recipes();
    test_bad_geometry();
    test_moe_recipes();
    char dir[] = "/tmp/loom-test-quantize-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    test_end_to_end(dir);
    test_huge_values(dir);
    test_non_finite_source(dir);
    test_cancel(dir);
    test_imatrix_load(dir);
    test_overrides();
    test_imatrix_rules();
    test_imatrix_write(dir);
    test_low_bit_rules(dir);
    test_iq_grid_rules(dir);
    rmdir(dir);
    return test_finish();
}
