/* test_quantize.c — model quantization without the reference: weight quantizer round-trip error bounds,
 * llama.cpp's Q4_K_M/Q8_0/IQ4_XS type choices on the Qwen3.5-0.8B geometry (the list in REFERENCE.md),
 * rejection of a row length the block size does not divide, the mixture-of-experts choices (expert,
 * shared-expert and fused gate/up tensors; 8 experts and not), a small end-to-end conversion, and the
 * atomic write leaving no file behind on failure, and the refusal (naming tensor, row and block) of values
 * a type cannot hold and of non-finite sources, as llama_model_quantize refuses them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/quantize.h"
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

static void test_bad_geometry(void)
{
    static struct tlist l;
    uint32_t got[4];
    const struct loom_quant_model m = {.n_layer = 1, .n_head = 2, .n_head_kv = 1};
    loom_error err = {0};
    l.n = 0;
    tl_add(&l, "token_embd.weight", 256, 10, LOOM_TYPE_F16);
    tl_add(&l, "blk.0.ffn_up.weight", 320, 8, LOOM_TYPE_F16); /* 320 = 10 x 32, not a multiple of 256 */
    int rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe("Q4_K_M"), got, &err);
    CHECK(rc == LOOM_E_ARG && strstr(err.msg, "blk.0.ffn_up.weight") && strstr(err.msg, "320"),
          "row length 320 under Q4_K: rc %d, message '%s'", rc, err.msg);
    rc = loom_quant_choose_types(&m, l.t, l.n, loom_quant_find_recipe("Q8_0"), got, &err);
    CHECK(rc == LOOM_OK && got[1] == LOOM_TYPE_Q8_0, "row length 320 under Q8_0 (32-blocks): rc %d", rc);
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
    char sub[700], tmp[720];
    snprintf(sub, sizeof sub, "%s/outdir", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", sub);
    mkdir(sub, 0755);
    g = 0;
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK, "open %s", in);
    rc = loom_quant_write(g, loom_quant_find_recipe("Q8_0"), sub, NULL, NULL, NULL, NULL, NULL, &err);
    CHECK(rc != LOOM_OK && access(tmp, F_OK) != 0, "rename onto a directory: rc %d, temporary %s", rc,
          access(tmp, F_OK) == 0 ? "left behind" : "removed");
    loom_gguf_close(g);
    rmdir(sub);

    /* rejected geometry (ffn_down rows of 128 under Q4_K_M): nothing is created */
    CHECK(write_src(in, 128) == LOOM_OK, "writing %s", in);
    g = 0;
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK, "open %s", in);
    rc = loom_quant_write(g, loom_quant_find_recipe("Q4_K_M"), out, NULL, NULL, NULL, NULL, NULL, &err);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CHECK(rc == LOOM_E_ARG && strstr(err.msg, "blk.0.ffn_down.weight") && access(out, F_OK) != 0 &&
              access(tmp, F_OK) != 0,
          "bad geometry: rc %d '%s'; output must not exist", rc, err.msg);
    loom_gguf_close(g);
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
 * and leave neither out nor out.tmp behind. */
static void expect_refused(const char *in, const char *out, const char *recipe, const char *const *want)
{
    struct loom_gguf *g = 0;
    loom_error err = {0};
    char tmp[720];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CHECK(loom_gguf_open(in, &g, &err) == LOOM_OK, "open %s: %s", in, err.msg);
    int rc = g ? loom_quant_write(g, loom_quant_find_recipe(recipe), out, NULL, NULL, NULL, NULL, NULL, &err) : LOOM_E_IO;
    CHECK(rc != LOOM_OK, "%s: quantizing must fail", recipe);
    int named = rc != LOOM_OK;
    for (int i = 0; want[i] && named; i++)
        named = strstr(err.msg, want[i]) != NULL;
    CHECK(named, "%s: message '%s' must name '%s', '%s', '%s'", recipe, rc ? err.msg : "(none)", want[0], want[1],
          want[2]);
    CHECK(access(out, F_OK) != 0 && access(tmp, F_OK) != 0, "%s: output or temporary left behind", recipe);
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
        const struct loom_type_traits *tr = loom_type_traits(r->default_type);
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
}

/* Cancelled at each poll (before each of the 3 tensors; tensors of 1024 rows or fewer are not polled within):
 * LOOM_E_CANCELLED, no poll after the one that asked, no temporary file, an existing output untouched. */
static void test_cancel(const char *dir)
{
    char in[600], out[600], tmp[620], old[8] = {0};
    snprintf(in, sizeof in, "%s/in.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
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
        CHECK(access(tmp, F_OK) != 0 && got == 3 && !memcmp(old, "old", 3),
              "cancel at poll %d: a temporary file left or the existing output changed", k);
    }
    loom_gguf_close(g);
    unlink(out);
    unlink(in);
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
    rmdir(dir);
    return test_finish();
}
