/* test_admit.c — qwen35 and qwen35moe admission: a tiny valid model written with the GGUF writer is admitted
 * with the right hyper-parameters and state sizes (a MoE one also loads, its experts bound in place), and
 * corrupting one key or tensor at a time is rejected with a message naming it. The attention layers' fused
 * attn_qkv (the converter's --fuse-qkv) is admitted, bound as one matrix, and runs bitwise as the split q/k/v it
 * holds; a mixture of the two forms or a wrong fused shape is refused. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/model.h"
#include "test.h"
#include "util/fp16.h"
#include "model_fixture.h" /* after test.h */

/* Tiny geometry: 4 layers (0-2 Gated DeltaNet, 3 attention), n_embd 64, vocab 512 rows; the MoE model has 4
 * routed experts of width 32 (2 used per token) and a shared expert of width 48 instead of the dense FFN. */
enum { N_LAYER = 4, N_EMBD = 64, N_FF = 128, N_VOCAB = 512, N_TOKENS = 500, N_HEAD = 4, N_HEAD_KV = 2,
       HEAD_DIM = 16, N_ROT = 8, SSM_D = 16, SSM_NV = 4, SSM_NK = 2, SSM_INNER = 64, CONV_K = 4, N_EXPERT = 4,
       N_USED = 2, N_FF_EXP = 32, N_FF_SHEXP = 48 };

/* Dense mutations, then the MoE model (M_MOE) and its mutations. */
enum mutation {
    M_NONE, M_MISSING_TENSOR, M_EXTRA_TENSOR, M_WRONG_SHAPE, M_NORM_TYPE, M_KEY_TYPE, M_MISSING_KEY,
    M_BAD_INNER, M_BAD_HEADS, M_TOO_MANY_TOKENS, M_TYPE_LEN, M_UNTIED, M_BAD_SECTIONS, M_RECURRENT_LAYERS,
    M_NEXTN, M_MATRIX_BF16, M_MATRIX_Q8_1, M_BAD_KEY_LEN, M_BAD_VALUE_LEN, M_BAD_HEADS_KV, M_BAD_STATE, M_BAD_V_HEADS,
    M_BAD_GROUPS, M_INTERVAL_1, M_INTERVAL_2, M_INTERVAL_5, M_ALL_ATTENTION, M_NO_ATTENTION,
    M_FUSE_QKV, M_FUSE_QKV_MIXED, M_FUSE_QKV_SHAPE, M_QKV_PARTIAL, M_FUSE_QKV_NONE,
    M_MOE, M_MOE_FUSED, M_MOE_NEXTN, M_MOE_USED_GT_COUNT, M_MOE_NO_EXPERTS, M_MOE_USED_ARRAY, M_MOE_NO_SHEXP_KEY,
    M_MOE_GROUPS, M_MOE_EXPERT_DIM, M_MOE_ROW_WIDTH, M_MOE_ROUTER, M_MOE_NO_SHEXP_GATE, M_MOE_BOTH_FORMS,
    M_MOE_NO_UP, M_MOE_DENSE_FFN, M_MOE_FUSE_QKV, M_MOE_FUSE_QKV_MIXED,
};

/* The attention layers' q/k/v in the fused form (attn_qkv, as the converter's --fuse-qkv writes it). */
static int fused_qkv(enum mutation m)
{
    return m == M_FUSE_QKV || m == M_FUSE_QKV_MIXED || m == M_FUSE_QKV_SHAPE || m == M_MOE_FUSE_QKV ||
           m == M_MOE_FUSE_QKV_MIXED;
}

static int is_moe(enum mutation m)
{
    return m >= M_MOE;
}

static int fill_zero(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)index, (void)err;
    memset(buf, 0, nbytes);
    return LOOM_OK;
}

static void add3(struct loom_gguf_writer *w, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1,
                 uint64_t ne2)
{
    const uint64_t ne[3] = {ne0, ne1, ne2};
    int rc = loom_gguf_writer_add_tensor(w, name, type, ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1, ne);
    CHECK(rc == LOOM_OK, "add tensor %s", name);
}

static void add(struct loom_gguf_writer *w, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1)
{
    add3(w, name, type, ne0, ne1, 1);
}

/* "<arch>.<suffix>" for the model of mutation m. */
static const char *key(enum mutation m, const char *suffix)
{
    static char buf[96];
    snprintf(buf, sizeof buf, "%s.%s", is_moe(m) ? "qwen35moe" : "qwen35", suffix);
    return buf;
}

static void set_u32(struct loom_gguf_writer *w, enum mutation m, const char *suffix, uint32_t v)
{
    loom_gguf_writer_set_u32(w, key(m, suffix), v);
}

/* The expert keys of the MoE model. */
static void add_moe_keys(struct loom_gguf_writer *w, enum mutation m)
{
    set_u32(w, m, "expert_count", m == M_MOE_NO_EXPERTS ? 0 : N_EXPERT);
    if (m == M_MOE_USED_ARRAY) {
        const uint32_t used[N_LAYER] = {N_USED, N_USED, N_USED, N_USED};
        loom_gguf_writer_set_arr(w, key(m, "expert_used_count"), LOOM_GGUF_UINT32, used, N_LAYER);
    } else {
        set_u32(w, m, "expert_used_count", m == M_MOE_USED_GT_COUNT ? N_EXPERT + 1 : N_USED);
    }
    set_u32(w, m, "expert_feed_forward_length", N_FF_EXP);
    if (m != M_MOE_NO_SHEXP_KEY)
        set_u32(w, m, "expert_shared_feed_forward_length", N_FF_SHEXP);
    if (m == M_MOE_GROUPS)
        set_u32(w, m, "expert_group_count", 2);
}

static void add_keys(struct loom_gguf_writer *w, enum mutation m)
{
    loom_gguf_writer_set_str(w, "general.architecture", is_moe(m) ? "qwen35moe" : "qwen35");
    set_u32(w, m, "context_length", 4096);
    if (m == M_KEY_TYPE)
        loom_gguf_writer_set_f32(w, key(m, "embedding_length"), N_EMBD);
    else
        set_u32(w, m, "embedding_length", N_EMBD);
    set_u32(w, m, "block_count", N_LAYER + (m == M_NEXTN || m == M_MOE_NEXTN));
    if (!is_moe(m)) /* optional in a MoE model */
        set_u32(w, m, "feed_forward_length", N_FF);
    set_u32(w, m, "attention.head_count", m == M_BAD_HEADS ? 3 : N_HEAD);
    set_u32(w, m, "attention.head_count_kv", m == M_BAD_HEADS_KV ? 3 : N_HEAD_KV);
    set_u32(w, m, "attention.key_length", m == M_BAD_KEY_LEN ? HEAD_DIM + 1 : HEAD_DIM);
    set_u32(w, m, "attention.value_length", m == M_BAD_VALUE_LEN ? HEAD_DIM + 1 : HEAD_DIM);
    loom_gguf_writer_set_f32(w, key(m, "attention.layer_norm_rms_epsilon"), 1e-6f);
    set_u32(w, m, "rope.dimension_count", N_ROT);
    loom_gguf_writer_set_f32(w, key(m, "rope.freq_base"), 1e7f);
    const int32_t sections[4] = {2, 1, 1, 0}, bad_sections[4] = {1, 1, 1, 1};
    loom_gguf_writer_set_arr(w, key(m, "rope.dimension_sections"), LOOM_GGUF_INT32,
                             m == M_BAD_SECTIONS ? bad_sections : sections, 4);
    set_u32(w, m, "full_attention_interval", m == M_INTERVAL_1 || m == M_ALL_ATTENTION ? 1
                                             : m == M_INTERVAL_2                       ? 2
                                             : m == M_INTERVAL_5 || m == M_NO_ATTENTION ? 5
                                                                                        : 4);
    set_u32(w, m, "ssm.conv_kernel", CONV_K);
    set_u32(w, m, "ssm.inner_size", m == M_BAD_INNER ? SSM_INNER - 1 : SSM_INNER);
    set_u32(w, m, "ssm.state_size", m == M_BAD_STATE ? SSM_D / 2 : SSM_D);
    set_u32(w, m, "ssm.time_step_rank", m == M_BAD_V_HEADS ? SSM_NV - 1 : SSM_NV);
    if (m != M_MISSING_KEY)
        set_u32(w, m, "ssm.group_count", m == M_BAD_GROUPS ? 3 : SSM_NK);
    if (m == M_RECURRENT_LAYERS) {
        const uint8_t rec[N_LAYER] = {1, 1, 0, 0}; /* layer 2 disagrees with the interval */
        loom_gguf_writer_set_arr(w, key(m, "attention.recurrent_layers"), LOOM_GGUF_BOOL, rec, N_LAYER);
    }
    if (m == M_NEXTN || m == M_MOE_NEXTN)
        set_u32(w, m, "nextn_predict_layers", 1);
    if (is_moe(m))
        add_moe_keys(w, m);
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
    if (is_moe(m)) { /* loaded, not only admitted: a tokenizer loom_model_load takes */
        loom_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        loom_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen35");
        struct loom_gguf_str merge = {5, "t1 t0"};
        loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", &merge, 1);
    }
    loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tok, n);
    loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, type, m == M_TYPE_LEN ? n - 1 : n);
    free(tok);
    free(type);
    free(text);
}

/* A MoE layer's FFN (router, routed experts separate or fused, shared expert and its gate); layer il of a nextn
 * block when il == N_LAYER. */
static void add_moe_ffn(struct loom_gguf_writer *w, int il, enum mutation m)
{
    char n[64];
#define T3(suffix, type, ne0, ne1, ne2) \
    (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), add3(w, n, type, ne0, ne1, ne2))
    T3("ffn_gate_inp.weight", LOOM_TYPE_F32, N_EMBD, m == M_MOE_ROUTER && il == 0 ? N_EXPERT - 1 : N_EXPERT, 1);
    if (m == M_MOE_FUSED || (m == M_MOE_BOTH_FORMS && il == 0))
        T3("ffn_gate_up_exps.weight", LOOM_TYPE_Q8_0, N_EMBD, 2 * N_FF_EXP, N_EXPERT);
    if (m != M_MOE_FUSED) {
        T3("ffn_gate_exps.weight", LOOM_TYPE_Q8_0, N_EMBD, N_FF_EXP, N_EXPERT);
        if (!(m == M_MOE_NO_UP && il == 1))
            T3("ffn_up_exps.weight", LOOM_TYPE_F16, N_EMBD, N_FF_EXP, m == M_MOE_EXPERT_DIM && il == 1 ? 3 : N_EXPERT);
    }
    T3("ffn_down_exps.weight", LOOM_TYPE_Q8_0, m == M_MOE_ROW_WIDTH && il == 2 ? N_FF_EXP + 32 : N_FF_EXP, N_EMBD,
       N_EXPERT);
    if (!(m == M_MOE_NO_SHEXP_GATE && il == 3))
        T3("ffn_gate_inp_shexp.weight", LOOM_TYPE_F32, N_EMBD, 1, 1);
    T3("ffn_gate_shexp.weight", LOOM_TYPE_F16, N_EMBD, N_FF_SHEXP, 1);
    T3("ffn_up_shexp.weight", LOOM_TYPE_F16, N_EMBD, N_FF_SHEXP, 1);
    T3("ffn_down_shexp.weight", LOOM_TYPE_F16, N_FF_SHEXP, N_EMBD, 1);
    if (m == M_MOE_DENSE_FFN && il == 0)
        T3("ffn_gate.weight", LOOM_TYPE_F16, N_EMBD, N_FF, 1);
#undef T3
}

static void add_layer(struct loom_gguf_writer *w, int il, enum mutation m)
{
    char n[64];
    const uint32_t mat = m == M_MATRIX_BF16 ? LOOM_TYPE_BF16 : LOOM_TYPE_Q8_0;
#define T(suffix, type, ne0, ne1) (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), add(w, n, type, ne0, ne1))
    T("attn_norm.weight", LOOM_TYPE_F32, N_EMBD, 1);
    T("post_attention_norm.weight", LOOM_TYPE_F32, N_EMBD, 1);
    if (is_moe(m)) {
        add_moe_ffn(w, il, m);
    } else {
        T("ffn_gate.weight", m == M_MATRIX_Q8_1 && il == 1 ? LOOM_TYPE_Q8_1 : mat, N_EMBD, N_FF);
        T("ffn_up.weight", LOOM_TYPE_F16, N_EMBD, m == M_WRONG_SHAPE && il == 2 ? N_FF + 1 : N_FF);
        T("ffn_down.weight", LOOM_TYPE_F32, N_FF, N_EMBD);
    }
    if (m == M_ALL_ATTENTION || (m != M_NO_ATTENTION && (il + 1) % 4 == 0)) {
        /* fused: query+gate 128, k 32 and v 32 rows in one tensor (one type: the converter fuses before it
         * converts) */
        if (fused_qkv(m))
            T("attn_qkv.weight", mat, N_EMBD, HEAD_DIM * (N_HEAD * 2 + N_HEAD_KV * 2) - (m == M_FUSE_QKV_SHAPE));
        if ((!fused_qkv(m) && m != M_FUSE_QKV_NONE) || m == M_MOE_FUSE_QKV_MIXED)
            T("attn_q.weight", mat, N_EMBD, HEAD_DIM * N_HEAD * 2);
        if ((!fused_qkv(m) && m != M_FUSE_QKV_NONE) || m == M_FUSE_QKV_MIXED)
            T("attn_k.weight", LOOM_TYPE_F16, N_EMBD, HEAD_DIM * N_HEAD_KV);
        if (!fused_qkv(m) && m != M_QKV_PARTIAL && m != M_FUSE_QKV_NONE)
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
    if (m == M_NEXTN || m == M_MOE_NEXTN) {
        add(w, "blk.4.nextn.eh_proj.weight", LOOM_TYPE_F16, 2 * N_EMBD, N_EMBD);
        add(w, "blk.4.attn_norm.weight", LOOM_TYPE_F32, N_EMBD, 1);
    }
    if (m == M_MOE_NEXTN)
        add_moe_ffn(w, N_LAYER, m);
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
    /* every full_attention_interval >= 1 is a plan loom runs: 1 (no Gated DeltaNet layer), above the layer count
     * (no attention layer) */
    CHECK(admit_geo(dir, M_ALL_ATTENTION, &hp, &geo, &e) == LOOM_OK && hp.full_attn_interval == 1 &&
              geo.recurrent_state_bytes == 0 && geo.kv_bytes_per_token == 4 * 128,
          "interval 1, every layer attention, admitted: %s", e.msg);
    CHECK(admit_geo(dir, M_NO_ATTENTION, &hp, &geo, &e) == LOOM_OK && geo.kv_bytes_per_token == 0 &&
              geo.recurrent_state_bytes == 4 * (1536 + 4096),
          "interval 5 of 4 layers, no attention layer, admitted: %s", e.msg);
    /* the fused attn_qkv: scratch o holds its 4 x 2 x 16 + 2 x 16 + 2 x 16 = 192 rows per token (64 split: the
     * widest of ssm.inner_size and head_count x value_length); the state sizes do not change */
    CHECK(admit_geo(dir, M_NONE, &hp, &geo, &e) == LOOM_OK && geo.scratch.o == 64, "split q/k/v: scratch o %" PRIu64,
          geo.scratch.o);
    CHECK(admit_geo(dir, M_FUSE_QKV, &hp, &geo, &e) == LOOM_OK && geo.scratch.o == 192 &&
              geo.kv_bytes_per_token == 128 && geo.recurrent_state_bytes == 3 * (1536 + 4096),
          "fused attn_qkv admitted (scratch o %" PRIu64 "): %s", geo.scratch.o, e.msg);
}

/* Each bad file (the MoE ones too) is refused at admission, before anything is allocated, naming the key or
 * tensor. */
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
        {M_BAD_INNER, "key 'qwen35.ssm.inner_size': expected 64 (from blk.0.attn_gate.weight's shape; inner_size must "
                      "be time_step_rank x state_size), found 63"},
        {M_BAD_HEADS, "key 'qwen35.attention.head_count': expected 4 (from blk.3.attn_q.weight's shape; "
                      "head_count_kv must divide head_count), found 3"},
        {M_BAD_HEADS_KV, "key 'qwen35.attention.head_count_kv': expected 2 (from blk.3.attn_k.weight's shape; "
                         "head_count_kv must divide head_count), found 3"},
        {M_BAD_KEY_LEN, "key 'qwen35.attention.key_length': expected 16 (from blk.3.attn_k_norm.weight's shape; "
                        "key_length must equal value_length), found 17"},
        {M_BAD_VALUE_LEN, "key 'qwen35.attention.value_length': expected 16 (from blk.3.attn_v.weight's shape; "
                          "key_length must equal value_length), found 17"},
        {M_BAD_STATE, "key 'qwen35.ssm.state_size': expected 16 (from blk.0.ssm_norm.weight's shape; inner_size "
                      "must be time_step_rank x state_size), found 8"},
        {M_BAD_V_HEADS, "key 'qwen35.ssm.time_step_rank': expected 4 (from blk.0.ssm_a's shape; inner_size must be "
                        "time_step_rank x state_size), found 3"},
        {M_BAD_GROUPS, "key 'qwen35.ssm.group_count': expected 2 (from blk.0.attn_qkv.weight's shape; group_count "
                       "must divide time_step_rank), found 3"},
        {M_INTERVAL_1, "key 'qwen35.full_attention_interval': expected 4 (the first layer with attention tensors is "
                       "3), found 1, which makes layer 0 attention, but it has the tensors of a recurrent (Gated "
                       "DeltaNet) layer"},
        {M_INTERVAL_2, "key 'qwen35.full_attention_interval': expected 4 (the first layer with attention tensors is "
                       "3), found 2, which makes layer 1 attention"},
        {M_INTERVAL_5, "key 'qwen35.full_attention_interval': expected 4 (the first layer with attention tensors is "
                       "3), found 5, which makes layer 3 recurrent (Gated DeltaNet), but it has the tensors of an "
                       "attention layer"},
        {M_TOO_MANY_TOKENS, "key 'tokenizer.ggml.tokens': expected 1..512 strings (token_embd rows), found 513"},
        {M_TYPE_LEN, "key 'tokenizer.ggml.token_type': expected 500 elements (one per token), found 499"},
        {M_BAD_SECTIONS, "rope.dimension_sections': [1, 1, 1, 1] leaves rotary pair 3"},
        {M_RECURRENT_LAYERS, "key 'qwen35.attention.recurrent_layers': layer 2 is marked attention, but it has the "
                             "tensors of a recurrent (Gated DeltaNet) layer"},
        {M_MOE_USED_GT_COUNT, "key 'qwen35moe.expert_used_count': expected 1..4 (expert_count), found 5"},
        {M_MOE_NO_EXPERTS, "key 'qwen35moe.expert_count': expected 1..1024, found 0"},
        {M_MOE_USED_ARRAY, "key 'qwen35moe.expert_used_count': expected UINT32, found array of UINT32"},
        {M_MOE_NO_SHEXP_KEY, "missing required key 'qwen35moe.expert_shared_feed_forward_length'"},
        {M_MOE_GROUPS, "key 'qwen35moe.expert_group_count': expected 0 or 1 below expert_count 4"},
        {M_MOE_EXPERT_DIM, "tensor 'blk.1.ffn_up_exps.weight': expected shape [64 (row width), 32 (rows per expert), "
                           "4 (expert_count)], found [64, 32, 3, 1]"},
        {M_MOE_ROW_WIDTH, "tensor 'blk.2.ffn_down_exps.weight': expected shape [32 (row width), 64 (rows per "
                          "expert), 4 (expert_count)], found [64, 64, 4, 1]"},
        {M_MOE_ROUTER, "tensor 'blk.0.ffn_gate_inp.weight': expected shape [64, 4], found [64, 3, 1, 1]"},
        {M_MOE_NO_SHEXP_GATE, "missing tensor 'blk.3.ffn_gate_inp_shexp.weight'"},
        {M_MOE_BOTH_FORMS, "tensor 'blk.0.ffn_gate_exps.weight': expected absent next to the fused "
                           "'blk.0.ffn_gate_up_exps.weight', found present"},
        {M_MOE_NO_UP, "missing tensor 'blk.1.ffn_up_exps.weight' (or the fused 'blk.1.ffn_gate_up_exps.weight')"},
        {M_MOE_DENSE_FFN, "unexpected tensor 'blk.0.ffn_gate.weight' (not part of a qwen35moe model"},
        {M_FUSE_QKV_MIXED, "tensor 'blk.3.attn_k.weight': expected absent next to the fused "
                           "'blk.3.attn_qkv.weight', found present"},
        {M_FUSE_QKV_SHAPE, "tensor 'blk.3.attn_qkv.weight': expected shape [64, 192], found [64, 191, 1, 1]"},
        {M_QKV_PARTIAL, "missing tensor 'blk.3.attn_v.weight' (or the fused 'blk.3.attn_qkv.weight')"},
        {M_FUSE_QKV_NONE, "missing tensor 'blk.3.attn_q.weight' (or the fused 'blk.3.attn_qkv.weight')"},
        {M_MOE_FUSE_QKV_MIXED, "tensor 'blk.3.attn_q.weight': expected absent next to the fused "
                               "'blk.3.attn_qkv.weight', found present"},
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

/* A loaded MoE model (mutation m: separate or fused gate/up) binds every layer's experts in place: expert e at
 * e * expert_bytes of the file's tensor, no copy, in the file layout. */
static void check_moe_binding(const char *path, enum mutation m)
{
    loom_error e = {0};
    struct loom_model *lm = loom_model_load(path, &e);
    CHECK(lm != NULL, "MoE model %d loads: %s", (int)m, e.msg);
    for (uint32_t il = 0; lm && il < N_LAYER; il++) {
        const struct loom_layer *L = &lm->layers[il];
        const struct loom_experts *gu = m == M_MOE_FUSED ? &L->ffn_gate_up_exps : &L->ffn_up_exps;
        CHECK(L->ffn_gate_inp.n_in == N_EMBD && L->ffn_gate_inp.n_out == N_EXPERT, "router bound");
        CHECK(gu->n_expert == N_EXPERT && gu->w.n_in == N_EMBD &&
                  gu->w.n_out == (m == M_MOE_FUSED ? 2 : 1) * N_FF_EXP && gu->w.layout == LOOM_WEIGHT_ROWS,
              "layer %u gate/up experts bound", il);
        CHECK((m == M_MOE_FUSED) == (L->ffn_gate_exps.w.data == NULL), "layer %u: one gate/up form", il);
        const struct loom_experts *d = &L->ffn_down_exps;
        struct loom_weight last = loom_experts_get(d, N_EXPERT - 1);
        CHECK(d->expert_bytes == 64 * 34 && (const char *)last.data == (const char *)d->w.data + 3 * 64 * 34 &&
                  last.n_in == N_FF_EXP && last.n_out == N_EMBD,
              "layer %u: expert 3 of ffn_down_exps in place", il);
        CHECK(L->ffn_gate_inp_shexp.n_in == N_EMBD && L->ffn_gate_inp_shexp.n_out == 1 &&
                  L->ffn_down_shexp.n_in == N_FF_SHEXP && L->ffn_up_shexp.n_out == N_FF_SHEXP,
              "layer %u: shared expert bound", il);
    }
    loom_model_free(lm);
}

/* A loaded model whose attention layer (3) has the fused attn_qkv binds it in place, in the file layout (Q8_0 of
 * 64 columns: 68 B a row), as one matrix of 192 rows; the split fields stay empty. The recurrent layers' attn_qkv
 * (the Gated DeltaNet q|k|v) stays bound where it was. */
static void check_fused_qkv_binding(const char *path)
{
    loom_error e = {0};
    struct loom_model *lm = loom_model_load(path, &e);
    CHECK(lm != NULL, "model with a fused attn_qkv loads: %s", e.msg);
    if (!lm)
        return;
    const struct loom_layer *L = &lm->layers[3];
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(lm->gguf, "blk.3.attn_qkv.weight");
    CHECK(L->kind == LOOM_LAYER_ATTENTION && t && L->wqkv.data == t->data && L->wqkv.n_in == N_EMBD &&
              L->wqkv.n_out == 192 && L->wqkv.row_bytes == 68 && L->wqkv.type == LOOM_TYPE_Q8_0,
          "layer 3: attn_qkv bound as one 64 x 192 matrix");
    CHECK(!L->wq.data && !L->wk.data && !L->wv.data && !L->qkv.data, "layer 3: no split q/k/v, no Gated DeltaNet qkv");
    CHECK(lm->layers[0].qkv.n_out == 2 * SSM_D * SSM_NK + SSM_INNER && !lm->layers[0].wqkv.data,
          "layer 0: the Gated DeltaNet attn_qkv as before");
    loom_model_free(lm);
}

/* The description's expert plan. From the geometry above: one routed expert = gate Q8_0 32 rows x 68 B + up F16
 * 32 x 64 x 2 B + down Q8_0 64 rows x 34 B = 8448 B; the shared expert = 3 F16 matrices of 64 x 48 (6144 B
 * each) + its F32 gate of 64 (256 B) = 18688 B. */
static void check_moe_plan(const char *path)
{
    loom_error e = {0};
    loom_gguf *g = NULL;
    loom_model_desc d = {0};
    int rc = loom_gguf_open(path, &g, &e);
    CHECK(rc == LOOM_OK && loom_model_describe(g, &d, &e) == LOOM_OK, "describe: %s", e.msg);
    CHECK(d.n_expert == N_EXPERT && d.n_expert_used == N_USED && d.expert_bytes_min == 8448 &&
              d.expert_bytes_max == 8448 && d.shared_expert_bytes == 18688,
          "expert plan: %u/%u, %" PRIu64 "..%" PRIu64 " B, shared %" PRIu64 " B", d.n_expert, d.n_expert_used,
          d.expert_bytes_min, d.expert_bytes_max, d.shared_expert_bytes);
    loom_model_desc_free(&d);
    loom_gguf_close(g);
}

/* The MoE model: expert keys into hparams, state sizes as the dense model's (the trunk is the same), the fused
 * form and a nextn block admitted; loaded bindings and the description's expert plan. */
static void test_moe_valid(const char *dir)
{
    struct loom_hparams hp;
    struct loom_geometry geo;
    loom_error e = {0};
    CHECK(admit_geo(dir, M_MOE, &hp, &geo, &e) == LOOM_OK, "valid MoE model admitted: %s", e.msg);
    CHECK(!strcmp(hp.arch, "qwen35moe") && hp.n_expert == N_EXPERT && hp.n_expert_used == N_USED &&
              hp.n_ff_exp == N_FF_EXP && hp.n_ff_shexp == N_FF_SHEXP && hp.n_ff == 0 && hp.n_nextn == 0,
          "MoE hparams");
    CHECK(geo.recurrent_state_bytes == 3 * (1536 + 4096) && geo.kv_bytes_per_token == 128, "MoE state sizes");
    CHECK(geo.scratch.a >= 2 * N_FF_EXP && geo.scratch.b >= N_FF_SHEXP, "FFN scratch covers the experts");
    CHECK(admit(dir, M_MOE_FUSED, &hp, &e) == LOOM_OK, "fused MoE model admitted: %s", e.msg);
    CHECK(admit(dir, M_MOE_NEXTN, &hp, &e) == LOOM_OK && hp.n_layer == N_LAYER && hp.n_nextn == 1,
          "MoE nextn block tolerated: %s", e.msg);
    for (enum mutation m = M_MOE; m <= M_MOE_FUSED; m++) {
        char path[512];
        snprintf(path, sizeof path, "%s/moe%d.gguf", dir, (int)m);
        if (write_model(path, m))
            continue;
        check_moe_binding(path, m);
        if (m == M_MOE)
            check_moe_plan(path);
        unlink(path);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/moe-fuse-qkv.gguf", dir);
    if (write_model(path, M_MOE_FUSE_QKV) == LOOM_OK) {
        check_fused_qkv_binding(path);
        unlink(path);
    }
}

/* ---- the fused attn_qkv runs as the three tensors it holds ------------------------------------------------ */

/* A rewrite of a synthetic F32 model: every tensor as it is, except the attention layers' attn_q, attn_k and
 * attn_v, stored as `type` (quantized row by row by the type's weight quantizer) and, when fuse, written as one
 * attn_qkv holding their rows in that order (what the converter's --fuse-qkv writes: torch.cat of q, k, v).
 * Row-wise quantization makes the fused tensor's bytes exactly the three's, one after another. */
enum { MAX_REWRITE = 256 };
struct rewrite {
    uint32_t type;
    int n;                                          /* tensors written */
    const struct loom_gguf_tensor *src[MAX_REWRITE][3]; /* each written tensor's sources, in row order */
    int n_src[MAX_REWRITE];
    uint32_t out_type[MAX_REWRITE];
};

static int rewrite_fill(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)nbytes, (void)err;
    const struct rewrite *r = ctx;
    char *dst = buf;
    for (int i = 0; i < r->n_src[index]; i++) {
        const struct loom_gguf_tensor *t = r->src[index][i];
        if (t->type == r->out_type[index]) {
            memcpy(dst, t->data, t->nbytes);
            dst += t->nbytes;
            continue;
        }
        const float *x = t->data;
        uint64_t n = t->ne[0] * t->ne[1];
        if (r->out_type[index] == LOOM_TYPE_F16 || r->out_type[index] == LOOM_TYPE_BF16) { /* no quantizer */
            for (uint64_t i = 0; i < n; i++, dst += 2) {
                uint16_t h = r->out_type[index] == LOOM_TYPE_F16 ? loom_f32_to_f16(x[i]) : loom_f32_to_bf16(x[i]);
                memcpy(dst, &h, 2);
            }
            continue;
        }
        size_t row_bytes = loom_type_row_bytes(r->out_type[index], (int64_t)t->ne[0]);
        for (uint64_t row = 0; row < t->ne[1]; row++, dst += row_bytes)
            loom_type_traits(r->out_type[index])->quantize(x + row * t->ne[0], dst, (int64_t)t->ne[0]);
    }
    return LOOM_OK;
}

/* Which of attn_q/attn_k/attn_v (0, 1, 2) the tensor name is (-1: none); *layer its block. */
static int qkv_part(struct loom_gguf_str name, unsigned *layer)
{
    static const char *const parts[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight"};
    char buf[96], suffix[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(name.len < 95 ? name.len : 95), name.ptr);
    if (sscanf(buf, "blk.%u.%63s", layer, suffix) != 2)
        return -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(suffix, parts[i]))
            return i;
    return -1;
}

static int write_rewrite(const struct loom_gguf *g, const char *path, uint32_t type, int fuse)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    static struct rewrite r;
    memset(&r, 0, sizeof r);
    r.type = type;
    for (uint64_t i = 0; i < g->n_kv; i++)
        loom_gguf_writer_copy_kv(w, &g->kv[i]);
    for (uint64_t i = 0; i < g->n_tensors && r.n < MAX_REWRITE; i++) {
        const struct loom_gguf_tensor *t = &g->tensors[i];
        unsigned il;
        int part = qkv_part(t->name, &il);
        char name[96];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        uint64_t ne[2] = {t->ne[0], t->ne[1]};
        r.out_type[r.n] = part < 0 ? t->type : type;
        r.src[r.n][0] = t;
        r.n_src[r.n] = 1;
        if (part > 0 && fuse)
            continue; /* in the fused tensor written at attn_q */
        if (part == 0 && fuse) {
            const char *const more[] = {"attn_k.weight", "attn_v.weight"};
            for (int k = 0; k < 2; k++) {
                snprintf(name, sizeof name, "blk.%u.%s", il, more[k]);
                r.src[r.n][1 + k] = loom_gguf_find_tensor(g, name);
                ne[1] += r.src[r.n][1 + k]->ne[1];
            }
            r.n_src[r.n] = 3;
            snprintf(name, sizeof name, "blk.%u.attn_qkv.weight", il);
        }
        CHECK(loom_gguf_writer_add_tensor(w, name, r.out_type[r.n], t->n_dims, ne) == LOOM_OK, "add %s", name);
        r.n++;
    }
    loom_error e = {0};
    int rc = loom_gguf_writer_write(w, path, rewrite_fill, &r, &e);
    CHECK(rc == LOOM_OK, "write %s: %s", path, e.msg);
    loom_gguf_writer_free(w);
    return rc;
}

enum { FQ_PREFILL = 13, FQ_TOKENS = 15 };

/* Logits of FQ_TOKENS tokens through model path in numerics num: a prefill of FQ_PREFILL (REFERENCE_BATCH: the
 * gemm order for its first 12 rows, the gemv order for the 13th) then one token at a time. NULL on failure. */
static float *fused_qkv_logits(const char *path, enum loom_numerics num, int *n_logits)
{
    loom_error e = {0};
    loom_model *m = loom_model_load(path, &e);
    CHECK(m != NULL, "load %s: %s", path, e.msg);
    if (!m)
        return NULL;
    int n = *n_logits = loom_model_n_logits(m);
    loom_session_params sp = {.n_ctx = 64, .n_threads = 2, .numerics = num};
    loom_session *s = loom_session_new(m, &sp, &e);
    float *out = malloc(sizeof(float) * (size_t)n * FQ_TOKENS);
    int32_t tok[FQ_TOKENS];
    for (int i = 0; i < FQ_TOKENS; i++)
        tok[i] = (int32_t)((i * 37 + 11) % MINI_TOKENS);
    int rc = s && out ? loom_session_eval(s, tok, FQ_PREFILL, out, LOOM_LOGITS_ALL, &e) : LOOM_E_NOMEM;
    for (int i = FQ_PREFILL; i < FQ_TOKENS && rc == LOOM_OK; i++)
        rc = loom_session_eval(s, tok + i, 1, out + (size_t)i * n, LOOM_LOGITS_ALL, &e);
    CHECK(rc == LOOM_OK, "eval %s: %s", path, e.msg);
    loom_session_free(s);
    loom_model_free(m);
    if (rc != LOOM_OK) {
        free(out);
        return NULL;
    }
    return out;
}

/* The tiny preset (attention layer 3: 1024 query+gate, 256 k and 256 v rows of 256 columns) with its attention
 * projections as three tensors and as one fused attn_qkv, in each weight type and each kernel set the CPU runs:
 * the logits are bitwise equal, in prefill and decode, in both numerics. (The float order of a row does not
 * depend on the matrix's other rows for these shapes: every piece and the whole have n_out % 16 == 0, so the
 * kernels each shape selects are the same ones, X16 groups included. That loom's split form is bitwise the
 * reference's, and its fused form too, the parity tests check.) */
static void test_fused_qkv_runs(void)
{
    char dir[] = "/tmp/loom-test-fuse-qkv-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char vocab[600], src[600], split[600], fused[600];
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    snprintf(src, sizeof src, "%s/src.gguf", dir);
    snprintf(split, sizeof split, "%s/split.gguf", dir);
    snprintf(fused, sizeof fused, "%s/fused.gguf", dir);
    loom_error e = {0};
    struct loom_synth_params p = {.preset = loom_synth_find_preset("tiny"), .wtype = LOOM_TYPE_F32, .seed = 7,
                                  .vocab_path = vocab};
    struct loom_gguf *g = NULL;
    int rc = write_mini_vocab(vocab);
    if (!rc && (rc = loom_synth_write(&p, src, &e)) == LOOM_OK)
        rc = loom_gguf_open(src, &g, &e);
    CHECK(rc == LOOM_OK, "tiny F32 source: %s", e.msg);
    const uint32_t types[] = {LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_K,
                              LOOM_TYPE_Q6_K};
    const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
    for (size_t ti = 0; !rc && ti < sizeof types / sizeof types[0]; ti++) {
        if (write_rewrite(g, split, types[ti], 0) || write_rewrite(g, fused, types[ti], 1))
            break;
        for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
            if (loom_kernels_select(modes[mi], &e) != LOOM_OK)
                continue;
            for (int num = LOOM_NUMERICS_CANONICAL; num <= LOOM_NUMERICS_REFERENCE_BATCH; num++) {
                int n_a = 0, n_b = 0;
                float *a = fused_qkv_logits(split, (enum loom_numerics)num, &n_a);
                float *b = fused_qkv_logits(fused, (enum loom_numerics)num, &n_b);
                int same = a && b && n_a == n_b && !memcmp(a, b, sizeof(float) * (size_t)n_a * FQ_TOKENS);
                CHECK(same, "%s weights, %s kernels, numerics %d: fused attn_qkv logits differ from split q/k/v",
                      loom_type_traits(types[ti])->name, loom_kernels_name(), num);
                free(a);
                free(b);
            }
        }
        printf("fused attn_qkv as split q/k/v: %s bitwise\n", loom_type_traits(types[ti])->name);
    }
    CHECK(loom_kernels_select(LOOM_KERNELS_AUTO, &e) == LOOM_OK, "auto kernels: %s", e.msg);
    loom_gguf_close(g);
    unlink(split);
    unlink(fused);
    unlink(src);
    unlink(vocab);
    rmdir(dir);
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
    test_moe_valid(dir);
    rmdir(dir);
    test_fused_qkv_runs();
    return test_finish();
}
