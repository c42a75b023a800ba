/* test_admit.c — qwen35 admission: a tiny valid model written with the GGUF writer is admitted with the
 * right hyper-parameters and state sizes, and corrupting one key or tensor at a time is rejected with a
 * message naming it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/model.h"
#include "test.h"

/* Tiny geometry: 4 layers (0-2 Gated DeltaNet, 3 attention), n_embd 64, vocab 512 rows. */
enum { N_LAYER = 4, N_EMBD = 64, N_FF = 128, N_VOCAB = 512, N_TOKENS = 500, N_HEAD = 4, N_HEAD_KV = 2,
       HEAD_DIM = 16, N_ROT = 8, SSM_D = 16, SSM_NV = 4, SSM_NK = 2, SSM_INNER = 64, CONV_K = 4 };

enum mutation {
    M_NONE, M_MISSING_TENSOR, M_EXTRA_TENSOR, M_WRONG_SHAPE, M_NORM_TYPE, M_KEY_TYPE, M_MISSING_KEY,
    M_BAD_INNER, M_BAD_HEADS, M_TOO_MANY_TOKENS, M_TYPE_LEN, M_UNTIED, M_BAD_SECTIONS, M_RECURRENT_LAYERS,
    M_NEXTN, M_MATRIX_BF16, M_MATRIX_Q8_1,
};

static int fill_zero(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)index, (void)err;
    memset(buf, 0, nbytes);
    return LOOM_OK;
}

static void add(struct loom_gguf_writer *w, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1)
{
    const uint64_t ne[2] = {ne0, ne1};
    int rc = loom_gguf_writer_add_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne);
    CHECK(rc == LOOM_OK, "add tensor %s", name);
}

static void add_keys(struct loom_gguf_writer *w, enum mutation m)
{
    loom_gguf_writer_set_str(w, "general.architecture", "qwen35");
    loom_gguf_writer_set_u32(w, "qwen35.context_length", 4096);
    if (m == M_KEY_TYPE)
        loom_gguf_writer_set_f32(w, "qwen35.embedding_length", N_EMBD);
    else
        loom_gguf_writer_set_u32(w, "qwen35.embedding_length", N_EMBD);
    loom_gguf_writer_set_u32(w, "qwen35.block_count", N_LAYER + (m == M_NEXTN));
    loom_gguf_writer_set_u32(w, "qwen35.feed_forward_length", N_FF);
    loom_gguf_writer_set_u32(w, "qwen35.attention.head_count", m == M_BAD_HEADS ? 3 : N_HEAD);
    loom_gguf_writer_set_u32(w, "qwen35.attention.head_count_kv", N_HEAD_KV);
    loom_gguf_writer_set_u32(w, "qwen35.attention.key_length", HEAD_DIM);
    loom_gguf_writer_set_u32(w, "qwen35.attention.value_length", HEAD_DIM);
    loom_gguf_writer_set_f32(w, "qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
    loom_gguf_writer_set_u32(w, "qwen35.rope.dimension_count", N_ROT);
    loom_gguf_writer_set_f32(w, "qwen35.rope.freq_base", 1e7f);
    const int32_t sections[4] = {2, 1, 1, 0}, bad_sections[4] = {1, 1, 1, 1};
    loom_gguf_writer_set_arr(w, "qwen35.rope.dimension_sections", LOOM_GGUF_INT32,
                             m == M_BAD_SECTIONS ? bad_sections : sections, 4);
    loom_gguf_writer_set_u32(w, "qwen35.full_attention_interval", 4);
    loom_gguf_writer_set_u32(w, "qwen35.ssm.conv_kernel", CONV_K);
    loom_gguf_writer_set_u32(w, "qwen35.ssm.inner_size", m == M_BAD_INNER ? SSM_INNER - 1 : SSM_INNER);
    loom_gguf_writer_set_u32(w, "qwen35.ssm.state_size", SSM_D);
    loom_gguf_writer_set_u32(w, "qwen35.ssm.time_step_rank", SSM_NV);
    if (m != M_MISSING_KEY)
        loom_gguf_writer_set_u32(w, "qwen35.ssm.group_count", SSM_NK);
    if (m == M_RECURRENT_LAYERS) {
        const uint8_t rec[N_LAYER] = {1, 1, 0, 0}; /* layer 2 disagrees with the interval */
        loom_gguf_writer_set_arr(w, "qwen35.attention.recurrent_layers", LOOM_GGUF_BOOL, rec, N_LAYER);
    }
    if (m == M_NEXTN)
        loom_gguf_writer_set_u32(w, "qwen35.nextn_predict_layers", 1);
}

static void add_tokenizer(struct loom_gguf_writer *w, enum mutation m)
{
    uint64_t n = m == M_TOO_MANY_TOKENS ? N_VOCAB + 1 : N_TOKENS;
    struct loom_gguf_str *tok = malloc(n * sizeof *tok);
    int32_t *type = malloc(n * sizeof *type);
    char *text = malloc(n * 8);
    for (uint64_t i = 0; i < n; i++) {
        tok[i].len = (uint64_t)snprintf(text + 8 * i, 8, "t%" PRIu64, i);
        tok[i].ptr = text + 8 * i;
        type[i] = 1;
    }
    loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, n);
    loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, type, m == M_TYPE_LEN ? n - 1 : n);
    free(tok);
    free(type);
    free(text);
}

static void add_layer(struct loom_gguf_writer *w, int il, enum mutation m)
{
    char n[64];
    const uint32_t mat = m == M_MATRIX_BF16 ? LOOM_TYPE_BF16 : LOOM_TYPE_Q8_0;
#define T(suffix, type, ne0, ne1) (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), add(w, n, type, ne0, ne1))
    T("attn_norm.weight", LOOM_TYPE_F32, N_EMBD, 1);
    T("post_attention_norm.weight", LOOM_TYPE_F32, N_EMBD, 1);
    T("ffn_gate.weight", m == M_MATRIX_Q8_1 && il == 1 ? LOOM_TYPE_Q8_1 : mat, N_EMBD, N_FF);
    T("ffn_up.weight", LOOM_TYPE_F16, N_EMBD, m == M_WRONG_SHAPE && il == 2 ? N_FF + 1 : N_FF);
    T("ffn_down.weight", LOOM_TYPE_F32, N_FF, N_EMBD);
    if ((il + 1) % 4 == 0) {
        T("attn_q.weight", mat, N_EMBD, HEAD_DIM * N_HEAD * 2);
        T("attn_k.weight", LOOM_TYPE_F16, N_EMBD, HEAD_DIM * N_HEAD_KV);
        T("attn_v.weight", LOOM_TYPE_F16, N_EMBD, HEAD_DIM * N_HEAD_KV);
        T("attn_output.weight", mat, HEAD_DIM * N_HEAD, N_EMBD);
        T("attn_q_norm.weight", m == M_NORM_TYPE ? LOOM_TYPE_F16 : LOOM_TYPE_F32, HEAD_DIM, 1);
        T("attn_k_norm.weight", LOOM_TYPE_F32, HEAD_DIM, 1);
        return;
    }
    const int conv_dim = 2 * SSM_D * SSM_NK + SSM_INNER;
    T("attn_qkv.weight", mat, N_EMBD, conv_dim);
    T("attn_gate.weight", LOOM_TYPE_F16, N_EMBD, SSM_INNER);
    T("ssm_conv1d.weight", LOOM_TYPE_F32, CONV_K, conv_dim);
    T("ssm_dt.bias", LOOM_TYPE_F32, SSM_NV, 1);
    if (!(m == M_MISSING_TENSOR && il == 1))
        T("ssm_a", LOOM_TYPE_F32, SSM_NV, 1);
    T("ssm_beta.weight", LOOM_TYPE_F32, N_EMBD, SSM_NV);
    T("ssm_alpha.weight", LOOM_TYPE_F32, N_EMBD, SSM_NV);
    T("ssm_norm.weight", LOOM_TYPE_F32, SSM_D, 1);
    T("ssm_out.weight", mat, SSM_INNER, N_EMBD);
    if (m == M_EXTRA_TENSOR && il == 0)
        T("attn_q.weight", mat, N_EMBD, HEAD_DIM * N_HEAD * 2);
#undef T
}

/* Write the tiny model with one mutation to path. */
static int write_model(const char *path, enum mutation m)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    add_keys(w, m);
    add_tokenizer(w, m);
    add(w, "token_embd.weight", LOOM_TYPE_Q8_0, N_EMBD, N_VOCAB);
    add(w, "output_norm.weight", LOOM_TYPE_F32, N_EMBD, 1);
    if (m == M_UNTIED)
        add(w, "output.weight", LOOM_TYPE_F16, N_EMBD, N_VOCAB);
    for (int il = 0; il < N_LAYER; il++)
        add_layer(w, il, m);
    if (m == M_NEXTN) {
        add(w, "blk.4.nextn.eh_proj.weight", LOOM_TYPE_F16, 2 * N_EMBD, N_EMBD);
        add(w, "blk.4.attn_norm.weight", LOOM_TYPE_F32, N_EMBD, 1);
    }
    loom_error e = {0};
    int rc = loom_gguf_writer_write(w, path, fill_zero, NULL, &e);
    CHECK(rc == LOOM_OK, "write %s: %s", path, e.msg);
    loom_gguf_writer_free(w);
    return rc;
}

/* Write, open and admit; returns the admission status with err and hp filled. */
static int admit_geo(const char *dir, enum mutation m, struct loom_hparams *hp, struct loom_geometry *geo,
                     loom_error *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/m%d.gguf", dir, (int)m);
    if (write_model(path, m))
        return LOOM_E_IO;
    struct loom_gguf *g = NULL;
    int rc = loom_gguf_open(path, &g, err);
    CHECK(rc == LOOM_OK, "open mutation %d: %s", (int)m, err->msg);
    if (!rc)
    {
        const struct loom_arch *arch;
        rc = loom_arch_admit(g, &arch, hp, geo, err);
    }
    loom_gguf_close(g);
    unlink(path);
    return rc;
}

static int admit(const char *dir, enum mutation m, struct loom_hparams *hp, loom_error *err)
{
    struct loom_geometry geo;
    return admit_geo(dir, m, hp, &geo, err);
}

static void test_valid(const char *dir)
{
    struct loom_hparams hp;
    struct loom_geometry geo;
    loom_error e = {0};
    int rc = admit_geo(dir, M_NONE, &hp, &geo, &e);
    CHECK(rc == LOOM_OK, "valid model admitted: %s", e.msg);
    if (rc)
        return;
    CHECK(!strcmp(hp.arch, "qwen35") && hp.n_vocab == N_VOCAB && hp.n_embd == N_EMBD && hp.n_layer == N_LAYER,
          "hp basics");
    CHECK(hp.n_ff == N_FF && hp.n_head == N_HEAD && hp.n_head_kv == N_HEAD_KV && hp.head_dim_k == HEAD_DIM &&
              hp.head_dim_v == HEAD_DIM && hp.n_rot == N_ROT,
          "hp attention");
    CHECK(hp.rope_sections[0] == 2 && hp.rope_sections[1] == 1 && hp.rope_sections[2] == 1 &&
              hp.rope_sections[3] == 0 && hp.rope_freq_base == 1e7f && hp.rms_eps == 1e-6f,
          "hp rope/norm");
    CHECK(hp.ssm_conv_kernel == CONV_K && hp.ssm_inner == SSM_INNER && hp.ssm_head_dim == SSM_D &&
              hp.ssm_n_v_heads == SSM_NV && hp.ssm_n_k_heads == SSM_NK && hp.full_attn_interval == 4,
          "hp ssm");
    CHECK(hp.tied_output == 1 && hp.n_ctx_train == 4096, "tied, ctx");
    /* per recurrent layer: conv (4-1) x 128 channels x 4 B + 4 heads x 16 x 16 x 4 B = 1536 + 4096 */
    CHECK(geo.recurrent_state_bytes == 3 * (1536 + 4096), "recurrent bytes %" PRIu64, geo.recurrent_state_bytes);
    /* per attention layer: 2 kv heads x (16 + 16) x 2 B */
    CHECK(geo.kv_bytes_per_token == 128, "kv bytes %" PRIu64, geo.kv_bytes_per_token);

    CHECK(admit(dir, M_UNTIED, &hp, &e) == LOOM_OK && hp.tied_output == 0, "untied admitted: %s", e.msg);
    CHECK(admit(dir, M_NEXTN, &hp, &e) == LOOM_OK && hp.n_layer == N_LAYER, "nextn layer tolerated: %s", e.msg);
    CHECK(admit(dir, M_MATRIX_BF16, &hp, &e) == LOOM_OK, "BF16 matrices admitted: %s", e.msg);
}

static void test_corruptions(const char *dir)
{
    static const struct {
        enum mutation m;
        const char *needle;
    } cases[] = {
        {M_MISSING_TENSOR, "missing tensor 'blk.1.ssm_a'"},
        {M_EXTRA_TENSOR, "unexpected tensor 'blk.0.attn_q.weight'"},
        {M_WRONG_SHAPE, "tensor 'blk.2.ffn_up.weight': expected shape [64, 128], found [64, 129, 1, 1]"},
        {M_NORM_TYPE, "tensor 'blk.3.attn_q_norm.weight': expected type F32, found F16"},
        {M_KEY_TYPE, "key 'qwen35.embedding_length': expected UINT32, found FLOAT32"},
        {M_MISSING_KEY, "missing required key 'qwen35.ssm.group_count'"},
        {M_BAD_INNER, "key 'qwen35.ssm.inner_size': expected time_step_rank 4 x state_size 16 = 64, found 63"},
        {M_BAD_HEADS, "'qwen35.attention.head_count_kv': 2 does not divide head_count 3"},
        {M_TOO_MANY_TOKENS, "key 'tokenizer.ggml.tokens': expected 1..512 strings (token_embd rows), found 513"},
        {M_TYPE_LEN, "key 'tokenizer.ggml.token_type': expected 500 elements (one per token), found 499"},
        {M_BAD_SECTIONS, "rope.dimension_sections': [1, 1, 1, 1] leaves rotary pair 3"},
        {M_RECURRENT_LAYERS, "layer 2 is marked attention, but full_attention_interval 4 makes it recurrent"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct loom_hparams hp;
        loom_error e = {0};
        int rc = admit(dir, cases[i].m, &hp, &e);
        CHECK(rc == LOOM_E_FORMAT, "mutation %d rejected (rc %d)", (int)cases[i].m, rc);
        CHECK(strstr(e.msg, cases[i].needle) != NULL, "mutation %d: message '%s' lacks '%s'", (int)cases[i].m,
              e.msg, cases[i].needle);
    }
}

/* Admission takes any matrix type, but loading refuses a matrix typed as an activation-only type (no dot
 * product kernel), naming the tensor, instead of failing in the first matmul. */
static void test_load_activation_type(const char *dir)
{
    struct loom_hparams hp;
    loom_error e = {0};
    CHECK(admit(dir, M_MATRIX_Q8_1, &hp, &e) == LOOM_OK, "Q8_1 matrix admitted: %s", e.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/q8_1.gguf", dir);
    if (write_model(path, M_MATRIX_Q8_1))
        return;
    e = (loom_error){0};
    loom_model *m = loom_model_load(path, &e);
    CHECK(m == NULL, "model with a Q8_1 matrix loaded");
    CHECK(strstr(e.msg, "tensor 'blk.1.ffn_gate.weight'") && strstr(e.msg, "Q8_1"),
          "load message names the tensor and type: '%s'", e.msg);
    loom_model_free(m);
    unlink(path);
}

int main(void)
{
    char dir[] = "/tmp/loom-test-admit-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_valid(dir);
    test_corruptions(dir);
    test_load_activation_type(dir);
    rmdir(dir);
    return test_finish();
}
