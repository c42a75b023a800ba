/* test_geometry.c — every published Qwen3.5 text geometry as a synth preset: a sparse file of each (metadata and
 * tensor table, the data a hole) admitted and described with the published hyper-parameters, its tensor bytes, K/V
 * cache and recurrent state at two context lengths equal to figures derived here by hand; the 397B file split
 * as published; the session's state at two contexts equal to the description's; vision projectors (mmproj) and
 * other architectures refused by describe and load with a message saying what the file is. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "loom.h"
#include "model/arch.h"
#include "model/model.h"
#include "model/synth.h"
#include "mini_vocab.h"
#include "test.h"
#include "util/error.h"

#define MINI_TOKENS 300

/* The published text configurations (config.json text_config; README "Synthetic models of every published
 * geometry" names the source of each number and those not confirmed). Written here independently of the
 * presets: the test compares the two. */
struct published {
    const char *preset;
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim;
    uint32_t lin_k_heads, lin_v_heads, lin_head_dim; /* linear attention (Gated DeltaNet) */
    uint32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    int tied;
};

static const struct published models[] = {
    {"0.8b", 24, 1024, 3584, 8, 2, 256, 16, 16, 128, 0, 0, 0, 0, 1},
    {"2b", 24, 2048, 6144, 8, 2, 256, 16, 16, 128, 0, 0, 0, 0, 1},
    {"4b", 32, 2560, 9216, 16, 4, 256, 16, 32, 128, 0, 0, 0, 0, 1},
    {"9b", 32, 4096, 12288, 16, 4, 256, 16, 32, 128, 0, 0, 0, 0, 0},
    {"27b", 64, 5120, 17408, 24, 4, 256, 16, 48, 128, 0, 0, 0, 0, 0},
    {"35b-a3b", 40, 2048, 0, 16, 2, 256, 16, 32, 128, 256, 8, 512, 512, 1},
    {"122b-a10b", 48, 3072, 0, 32, 2, 256, 16, 64, 128, 256, 8, 1024, 1024, 0},
    {"397b-a17b", 60, 4096, 0, 32, 2, 256, 16, 64, 128, 512, 10, 1024, 1024, 0},
};

#define N_VOCAB 248320u /* token_embd rows of every published model (padded vocabulary) */
#define CONV_K 4u       /* linear_conv_kernel_dim */
#define INTERVAL 4u     /* full_attention_interval: layers 3, 7, 11, ... are full attention */

static char vocab[4200];  /* a 300-token vocabulary written by this test (the geometry files) */
static char qwen35[4200]; /* the reference's ggml-vocab-qwen35.gguf (a model that runs: merges, pre-tokenizer) */

/* The geometry files' vocabulary: MINI_TOKENS tokens (tests/mini_vocab.h). */
static int write_mini_vocab(const char *dir)
{
    snprintf(vocab, sizeof vocab, "%s/mini-vocab.gguf", dir);
    loom_error err = {0};
    int rc = write_mini_vocab_file(vocab, MINI_TOKENS, &err);
    CHECK(rc == LOOM_OK, "writing %s: %d %s", vocab, rc, err.msg);
    return rc;
}

/* Bytes of an F16 file of geometry m, by hand from the hyper-parameters: 2-D matrices F16, vectors, ssm_conv1d
 * and the routers F32 (the converter's types; tensor list: REFERENCE.md "qwen35 GGUF contract"). */
static uint64_t hand_weight_bytes(const struct published *m)
{
    uint64_t E = m->n_embd, d = m->lin_head_dim, kd = m->lin_k_heads * d, vd = m->lin_v_heads * d;
    uint64_t f16 = E * N_VOCAB * (m->tied ? 1 : 2), f32 = E; /* token_embd (+ output), output_norm */
    uint64_t hq = (uint64_t)m->n_head * m->head_dim, hkv = (uint64_t)m->n_head_kv * m->head_dim;
    for (uint32_t il = 0; il < m->n_layer; il++) {
        f32 += 2 * E; /* attn_norm, post_attention_norm */
        if ((il + 1) % INTERVAL) { /* Gated DeltaNet: qkv, z gate, beta, alpha, out; conv, dt, a, norm */
            f16 += E * (2 * kd + vd) + E * vd + 2 * E * m->lin_v_heads + vd * E;
            f32 += CONV_K * (2 * kd + vd) + 2 * m->lin_v_heads + d;
        } else { /* gated attention: q (query and gate rows), k, v, output; q and k norms */
            f16 += E * 2 * hq + 2 * E * hkv + hq * E;
            f32 += 2 * (uint64_t)m->head_dim;
        }
        if (m->n_expert) { /* router, routed experts (gate, up, down), shared expert and its gate */
            f32 += E * m->n_expert + E;
            f16 += 3 * E * m->n_ff_exp * m->n_expert + 3 * E * m->n_ff_shexp;
        } else {
            f16 += 3 * E * m->n_ff;
        }
    }
    return 2 * f16 + 4 * f32;
}

/* K/V bytes per token: the full-attention layers' K and V rows in F16 (llama.cpp's default cache type, which loom
 * keeps: n_head_kv * head_dim values each). Recurrent state per sequence: per Gated DeltaNet layer the conv state
 * (kernel - 1 inputs of every q|k|v channel, F32) and one d x d F32 matrix per value head (llama.cpp's r_s and s_s
 * sizes for qwen35: conv (kernel - 1) * (2 * k_heads * d + v_heads * d), state d * d * v_heads). */
static uint64_t hand_kv_per_token(const struct published *m)
{
    return (uint64_t)(m->n_layer / INTERVAL) * 2 * m->n_head_kv * m->head_dim * 2;
}

static uint64_t hand_state(const struct published *m)
{
    uint64_t d = m->lin_head_dim, ch = 2 * (uint64_t)m->lin_k_heads * d + (uint64_t)m->lin_v_heads * d;
    uint64_t per = (CONV_K - 1) * ch * 4 + (uint64_t)m->lin_v_heads * d * d * 4;
    return (m->n_layer - m->n_layer / INTERVAL) * per;
}

static uint64_t tensor_bytes(const loom_gguf *g)
{
    loom_gguf_info f;
    loom_gguf_get_info(g, &f);
    uint64_t sum = 0;
    loom_gguf_tensor_info t;
    for (uint64_t i = 0; i < f.n_tensors && loom_gguf_tensor_at(g, i, &t, NULL) == LOOM_OK; i++)
        sum += t.n_bytes;
    return sum;
}

/* The hand figures at an n_ctx context, printed and compared with the description's. */
static void check_memory(const struct published *m, const loom_model_desc *d, uint64_t weights, uint64_t n_ctx)
{
    uint64_t kv = n_ctx * hand_kv_per_token(m), st = hand_state(m);
    CHECK(n_ctx * d->kv_bytes_per_token == kv, "%s at %llu: K/V %llu B, by hand %llu", m->preset,
          (unsigned long long)n_ctx, (unsigned long long)(n_ctx * d->kv_bytes_per_token), (unsigned long long)kv);
    CHECK(weights + n_ctx * d->kv_bytes_per_token + d->recurrent_state_bytes == hand_weight_bytes(m) + kv + st,
          "%s at %llu: total differs from the hand figure", m->preset, (unsigned long long)n_ctx);
    printf("  %-10s ctx %6llu: weights %12llu + K/V %11llu + state %10llu = %12llu B\n", m->preset,
           (unsigned long long)n_ctx, (unsigned long long)weights, (unsigned long long)kv, (unsigned long long)st,
           (unsigned long long)(weights + kv + st));
}

/* Admission's hyper-parameters against the published ones. */
static void check_hparams(const struct published *m, const struct loom_hparams *hp)
{
    CHECK(hp->n_layer == m->n_layer && hp->n_embd == m->n_embd && hp->n_ff == m->n_ff && hp->n_head == m->n_head &&
              hp->n_head_kv == m->n_head_kv && hp->head_dim_k == m->head_dim && hp->head_dim_v == m->head_dim,
          "%s: layers %u embd %u ff %u heads %u/%u dims %u/%u", m->preset, hp->n_layer, hp->n_embd, hp->n_ff,
          hp->n_head, hp->n_head_kv, hp->head_dim_k, hp->head_dim_v);
    CHECK(hp->ssm_n_k_heads == m->lin_k_heads && hp->ssm_n_v_heads == m->lin_v_heads &&
              hp->ssm_head_dim == m->lin_head_dim && hp->ssm_conv_kernel == CONV_K &&
              hp->ssm_inner == m->lin_v_heads * m->lin_head_dim,
          "%s: linear heads %u/%u of %u, conv %u", m->preset, hp->ssm_n_k_heads, hp->ssm_n_v_heads, hp->ssm_head_dim,
          hp->ssm_conv_kernel);
    CHECK(hp->n_expert == m->n_expert && hp->n_expert_used == m->n_expert_used && hp->n_ff_exp == m->n_ff_exp &&
              hp->n_ff_shexp == m->n_ff_shexp,
          "%s: experts %u used %u widths %u/%u", m->preset, hp->n_expert, hp->n_expert_used, hp->n_ff_exp,
          hp->n_ff_shexp);
    CHECK(hp->n_vocab == N_VOCAB && hp->n_ctx_train == 262144 && hp->n_rot == 64 && hp->rope_freq_base == 1e7f &&
              hp->full_attn_interval == INTERVAL && hp->tied_output == m->tied,
          "%s: vocab %u ctx %u rot %u base %g interval %u tied %d", m->preset, hp->n_vocab, hp->n_ctx_train,
          hp->n_rot, (double)hp->rope_freq_base, hp->full_attn_interval, hp->tied_output);
}

/* One geometry as a sparse F16 file (split in n_split parts when > 1): admitted, described, its figures by hand. */
static void test_geometry(const char *dir, const struct published *m, uint32_t n_split)
{
    char path[4400], first[4400];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, m->preset);
    const struct loom_synth_preset *P = loom_synth_find_preset(m->preset);
    CHECK(P != NULL, "preset %s missing", m->preset);
    if (!P)
        return;
    struct loom_synth_params par = {.preset = P, .wtype = LOOM_TYPE_F16, .seed = 1, .vocab_path = vocab};
    loom_error err = {0};
    int rc = loom_synth_write_sparse(&par, n_split, path, &err);
    CHECK(rc == LOOM_OK, "%s sparse: %s", m->preset, err.msg);
    snprintf(first, sizeof first, "%s", path);
    if (n_split > 1)
        snprintf(first, sizeof first, "%s/%s-00001-of-%05u.gguf", dir, m->preset, n_split);
    struct stat st;
    CHECK(rc == LOOM_OK && stat(first, &st) == 0 && (uint64_t)st.st_blocks * 512 < ((uint64_t)64 << 20),
          "%s: %llu bytes on disk, expected a sparse file", m->preset, (unsigned long long)st.st_blocks * 512);
    loom_gguf *g = NULL;
    loom_model_desc d = {0};
    const struct loom_arch *arch = NULL;
    struct loom_hparams hp;
    struct loom_geometry geo;
    rc = rc ? rc : loom_gguf_open_model(first, &g, &err);
    rc = rc ? rc : loom_model_describe(g, &d, &err);
    CHECK(rc == LOOM_OK, "%s admitted: %s", m->preset, err.msg);
    rc = rc ? rc : loom_arch_admit(g, &arch, &hp, &geo, &err);
    if (rc == LOOM_OK) {
        check_hparams(m, &hp);
        CHECK(loom_gguf_n_parts(g) == (n_split > 1 ? n_split : 1), "%s: %u parts", m->preset, loom_gguf_n_parts(g));
        uint64_t weights = tensor_bytes(g);
        CHECK(weights == hand_weight_bytes(m), "%s: tensor bytes %llu, by hand %llu", m->preset,
              (unsigned long long)weights, (unsigned long long)hand_weight_bytes(m));
        CHECK(d.kv_bytes_per_token == hand_kv_per_token(m) && d.recurrent_state_bytes == hand_state(m),
              "%s: K/V per token %llu (by hand %llu), state %llu (by hand %llu)", m->preset,
              (unsigned long long)d.kv_bytes_per_token, (unsigned long long)hand_kv_per_token(m),
              (unsigned long long)d.recurrent_state_bytes, (unsigned long long)hand_state(m));
        check_memory(m, &d, weights, 4096);
        check_memory(m, &d, weights, 262144);
    }
    loom_model_desc_free(&d);
    loom_gguf_close(g);
    /* the file carries loom.synth.sparse (synth.c's sparse path): load refuses it naming the key, inspect only */
    loom_error lerr = {0};
    loom_model *model = rc == LOOM_OK ? loom_model_load(first, &lerr) : NULL;
    CHECK(rc != LOOM_OK || (!model && lerr.code == LOOM_E_FORMAT && strstr(lerr.msg, "loom.synth.sparse") &&
                            strstr(lerr.msg, "loom inspect")),
          "%s: load of the sparse file: %s", m->preset, model ? "admitted" : lerr.msg);
    loom_model_free(model);
    for (uint32_t k = 0; k < (n_split > 1 ? n_split : 1); k++) {
        snprintf(first, sizeof first, "%s/%s-%05u-of-%05u.gguf", dir, m->preset, k + 1, n_split);
        unlink(n_split > 1 ? first : path);
    }
}

/* The session allocates what the description says: state bytes = recurrent_state_bytes + n_ctx * kv_bytes_per_token
 * at two contexts, on a real (micro) model. */
static void test_session_state(const char *dir)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/micro.gguf", dir);
    struct loom_synth_params par = {.preset = loom_synth_find_preset("micro"), .wtype = LOOM_TYPE_F16, .seed = 1,
                                    .vocab_path = qwen35};
    loom_error err = {0};
    CHECK(loom_synth_write(&par, path, &err) == LOOM_OK, "micro: %s", err.msg);
    loom_gguf *g = NULL;
    loom_model_desc d = {0};
    CHECK(loom_gguf_open_model(path, &g, &err) == LOOM_OK && loom_model_describe(g, &d, &err) == LOOM_OK, "%s",
          err.msg);
    loom_model *model = loom_model_load(path, &err);
    CHECK(model != NULL, "micro load: %s", err.msg);
    const int ctx[] = {256, 4096};
    for (int i = 0; model && i < 2; i++) {
        loom_session_params sp = {.n_ctx = ctx[i], .n_threads = 1};
        loom_session *s = loom_session_new(model, &sp, &err);
        CHECK(s && loom_session_state_bytes(s) == d.recurrent_state_bytes + (uint64_t)ctx[i] * d.kv_bytes_per_token,
              "micro at %d: session state %llu", ctx[i], s ? (unsigned long long)loom_session_state_bytes(s) : 0ull);
        loom_session_free(s);
    }
    loom_model_free(model);
    loom_model_desc_free(&d);
    loom_gguf_close(g);
    unlink(path);
}

/* A GGUF of architecture arch with one key and one tensor (an F32 [32]); a vision projector gets clip.* keys as
 * llama.cpp's mmproj files carry them. */
static int write_foreign(const char *path, const char *arch)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    char key[96];
    int rc = w ? LOOM_OK : LOOM_E_NOMEM;
    rc = rc ? rc : loom_gguf_writer_set_str(w, "general.architecture", arch);
    snprintf(key, sizeof key, "%s.block_count", arch);
    rc = rc ? rc : loom_gguf_writer_set_u32(w, key, 1);
    if (!strcmp(arch, "clip")) {
        rc = rc ? rc : loom_gguf_writer_set_bool(w, "clip.has_vision_encoder", 1);
        rc = rc ? rc : loom_gguf_writer_set_str(w, "clip.projector_type", "qwen3vl_merger");
    }
    const uint64_t ne[1] = {32};
    rc = rc ? rc : loom_gguf_writer_add_tensor(w, strcmp(arch, "clip") ? "token_embd.weight" : "v.patch_embd.weight",
                                               LOOM_TYPE_F32, 1, ne);
    loom_error err = {0};
    rc = rc ? rc : loom_gguf_writer_write(w, path, NULL, NULL, &err);
    loom_gguf_writer_free(w);
    return rc;
}

/* Vision projectors and other architectures: describe (loom inspect) and load (run) refuse, saying what the file is
 * and what loom runs. */
static void test_refusals(const char *dir)
{
    static const char *const others[] = {"llama", "qwen2", "qwen3", "qwen3moe", "qwen3next", "gemma3", "clip"};
    char path[4400];
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        int clip = !strcmp(others[i], "clip");
        snprintf(path, sizeof path, "%s/%s.gguf", dir, others[i]);
        CHECK(write_foreign(path, others[i]) == LOOM_OK, "writing %s", path);
        loom_gguf *g = NULL;
        loom_model_desc d = {0};
        loom_error e1 = {0}, e2 = {0};
        int rc = loom_gguf_open_model(path, &g, &e1);
        CHECK(rc == LOOM_OK, "%s opens as a GGUF: %s", others[i], e1.msg);
        rc = rc ? rc : loom_model_describe(g, &d, &e1);
        loom_model *m = loom_model_load(path, &e2);
        CHECK(rc == LOOM_E_FORMAT && !m, "%s refused (describe %d, load %s)", others[i], rc, m ? "loaded" : "refused");
        for (int k = 0; k < 2; k++) {
            const char *msg = k ? e2.msg : e1.msg;
            char found[64];
            snprintf(found, sizeof found, "found '%s'", others[i]);
            CHECK(strstr(msg, "general.architecture") && strstr(msg, found) && strstr(msg, "'qwen35' and 'qwen35moe'"),
                  "%s (%s) names the key, the finding and what loom runs: %s", others[i], k ? "load" : "describe",
                  msg);
            CHECK(!clip || (strstr(msg, "vision projector") && strstr(msg, "mmproj") && strstr(msg, "text model") &&
                            strstr(msg, "not support vision projectors yet") && strstr(msg, "qwen3vl_merger")),
                  "mmproj (%s) says it is a vision projector for a text model: %s", k ? "load" : "describe", msg);
        }
        loom_model_free(m);
        loom_model_desc_free(&d);
        loom_gguf_close(g);
        unlink(path);
    }
}

int main(void)
{
    const char *ref = getenv("LOOM_REF"), *home = getenv("HOME");
    if (ref && *ref)
        snprintf(qwen35, sizeof qwen35, "%s/src/models/ggml-vocab-qwen35.gguf", ref);
    else
        snprintf(qwen35, sizeof qwen35, "%s/.cache/loom/ref/src/models/ggml-vocab-qwen35.gguf", home ? home : ".");
    CHECK(access(qwen35, R_OK) == 0, "vocabulary %s not found (run scripts/setup.sh)", qwen35);
    char dir[] = "/tmp/loom-test-geometry-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    if (write_mini_vocab(dir) == LOOM_OK) {
        printf("memory by hand (F16 weights, F16 K/V, F32 state):\n");
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
            test_geometry(dir, &models[i], 1);
        test_geometry(dir, &models[7], 6); /* 397B-A17B is published split; loom reads the parts as one */
        test_session_state(dir);
        unlink(vocab);
    }
    test_refusals(dir);
    rmdir(dir);
    return test_finish();
}
