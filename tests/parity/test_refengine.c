/* test_refengine.c — checks loom's run-time binding to the reference engine (src/cli/refengine.c): every field
 * of the structs it declares has the offset and size of the reference header's field, the defaults it gets
 * through dlsym equal the linked library's, a short evaluation through the binding works, and a short
 * `loom bench --ref` run on the tiny Q4_K_M model prints both engines' rows and the ratios, from a loom binary
 * that does not link libllama; xray's and certify's float-order note for each profile against builds by name. */
#include <libgen.h>
#include <stddef.h>
#include <unistd.h>

#include "cli/refengine.c"
#include "ggml.h"
#include "llama.h"
#include "test.h"

/* Same offset, same size and (for the defaults) same bytes of field f in loom's struct and the reference's. */
#define SAME_FIELD(MINE, REAL, mine, real, f)                                                                     \
    CHECK(offsetof(struct MINE, f) == offsetof(struct REAL, f) &&                                                 \
              sizeof(((struct MINE *)0)->f) == sizeof(((struct REAL *)0)->f) &&                                   \
              memcmp(&(mine).f, &(real).f, sizeof((mine).f)) == 0,                                                  \
          "%s.%s: offset %zu/%zu size %zu/%zu or default value differs", #REAL, #f, offsetof(struct MINE, f),     \
          offsetof(struct REAL, f), sizeof(((struct MINE *)0)->f), sizeof(((struct REAL *)0)->f))

#define SAME_STRUCT(MINE, REAL)                                                                                   \
    CHECK(sizeof(struct MINE) == sizeof(struct REAL) && _Alignof(struct MINE) == _Alignof(struct REAL),           \
          "%s: size %zu/%zu, alignment %zu/%zu", #REAL, sizeof(struct MINE), sizeof(struct REAL),                 \
          _Alignof(struct MINE), _Alignof(struct REAL))

static void test_model_params(const struct loom_ref *r)
{
    struct loom_ref_model_params a = r->model_default_params();
    struct llama_model_params b = llama_model_default_params();
    SAME_STRUCT(loom_ref_model_params, llama_model_params);
#define F(f) SAME_FIELD(loom_ref_model_params, llama_model_params, a, b, f)
    F(devices); F(tensor_buft_overrides); F(n_gpu_layers); F(split_mode); F(load_mode); F(lazy_mode); F(main_gpu);
    F(tensor_split); F(progress_callback); F(progress_callback_user_data); F(kv_overrides); F(vocab_only);
    F(check_tensors); F(use_extra_bufts); F(no_host); F(no_alloc); F(load_mtp);
#undef F
}

static void test_context_params(const struct loom_ref *r)
{
    struct loom_ref_context_params a = r->context_default_params();
    struct llama_context_params b = llama_context_default_params();
    SAME_STRUCT(loom_ref_context_params, llama_context_params);
#define F(f) SAME_FIELD(loom_ref_context_params, llama_context_params, a, b, f)
    F(n_ctx); F(n_batch); F(n_ubatch); F(n_seq_max); F(n_rs_seq); F(n_outputs_max); F(n_outputs_max_per_seq);
    F(n_threads); F(n_threads_batch); F(ctx_type); F(rope_scaling_type); F(pooling_type); F(attention_type);
    F(flash_attn_type); F(rope_freq_base); F(rope_freq_scale); F(yarn_ext_factor); F(yarn_attn_factor);
    F(yarn_beta_fast); F(yarn_beta_slow); F(yarn_orig_ctx); F(defrag_thold); F(cb_eval); F(cb_eval_user_data);
    F(type_k); F(type_v); F(abort_callback); F(abort_callback_data); F(embeddings); F(offload_kqv); F(no_perf);
    F(op_offload); F(swa_full); F(kv_unified); F(samplers); F(n_samplers); F(ctx_other);
#undef F
    CHECK(a.type_k == GGML_TYPE_F16 && a.flash_attn_type == LLAMA_FLASH_ATTN_TYPE_AUTO,
          "context defaults: type_k %d flash_attn_type %d", (int)a.type_k, (int)a.flash_attn_type);
}

static void test_batch(const struct loom_ref *r)
{
    int32_t ids[3] = {1, 2, 3};
    struct loom_ref_batch a = r->batch_get_one(ids, 3);
    struct llama_batch b = llama_batch_get_one(ids, 3);
    SAME_STRUCT(loom_ref_batch, llama_batch);
#define F(f) SAME_FIELD(loom_ref_batch, llama_batch, a, b, f)
    F(n_tokens); F(token); F(embd); F(pos); F(n_seq_id); F(seq_id); F(logits);
#undef F
    CHECK(a.n_tokens == 3 && a.token == ids, "batch_get_one: n_tokens %d", (int)a.n_tokens);
}

/* The tensor fields an eval callback reads: offsets and sizes as struct ggml_tensor's. */
static void test_tensor(void)
{
#define F(f)                                                                                                       \
    CHECK(offsetof(struct loom_ref_tensor, f) == offsetof(struct ggml_tensor, f) &&                                \
              sizeof(((struct loom_ref_tensor *)0)->f) == sizeof(((struct ggml_tensor *)0)->f),                    \
          "ggml_tensor.%s: offset %zu/%zu", #f, offsetof(struct loom_ref_tensor, f), offsetof(struct ggml_tensor, f))
    F(type); F(buffer); F(ne); F(nb); F(op); F(op_params); F(flags); F(src); F(view_src); F(view_offs); F(data);
    F(name);
#undef F
    CHECK((int)LOOM_REF_F32 == (int)GGML_TYPE_F32 && (int)LOOM_REF_F16 == (int)GGML_TYPE_F16 &&
              (int)LOOM_REF_I32 == (int)GGML_TYPE_I32,
          "ggml type numbers differ");
}

/* Evaluate a few tokens through the binding on the tiny model. */
static void test_eval(const struct loom_ref *r, const char *model)
{
    loom_error err = {0};
    struct loom_ref_model *m = loom_ref_model_load(r, model, &err);
    CHECK(m != NULL, "%s", err.msg);
    if (!m)
        return;
    CHECK(r->model_size(m) > 0 && r->model_n_params(m) > 0, "model size/params are zero");
    struct loom_ref_context *ctx = loom_ref_context_new(r, m, 64, 16, 1, -1, LOOM_KV_F16, &err);
    CHECK(ctx != NULL, "%s", err.msg);
    if (ctx) {
        int32_t ids[16];
        for (int i = 0; i < 16; i++)
            ids[i] = 100 + 7 * i;
        CHECK(loom_ref_eval(r, ctx, ids, 16, &err) == LOOM_OK, "prefill: %s", err.msg);
        CHECK(loom_ref_eval(r, ctx, ids, 1, &err) == LOOM_OK, "decode: %s", err.msg);
        loom_ref_reset(r, ctx);
        CHECK(loom_ref_eval(r, ctx, ids, 8, &err) == LOOM_OK, "after reset: %s", err.msg);
        r->free(ctx);
    }
    r->model_free(m);
}

/* Run `cmd`, keep up to cap-1 bytes of its output in out; returns its exit status. */
static int run_capture(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    return pclose(p);
}

/* `loom bench --ref` on the tiny model, with the loom binary of this build (BUILD/loom). */
static void test_cli(const char *argv0, const char *model)
{
    static char out[16384];
    char tmp[1024], cmd[4096], loom[1100];
    snprintf(tmp, sizeof tmp, "%s", argv0);
    snprintf(loom, sizeof loom, "%s/../../loom", dirname(tmp));
    if (access(loom, X_OK) != 0) {
        CHECK(0, "%s not found: build it first (make all)", loom);
        return;
    }
    snprintf(cmd, sizeof cmd, "ldd '%s' 2>&1", loom);
    if (run_capture(cmd, out, sizeof out) == 0)
        CHECK(strstr(out, "libllama") == NULL && strstr(out, "libggml") == NULL, "loom links the reference:\n%s",
              out);
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' -p 32 -n 8 -r 2 -t 1 --ref 2>&1", loom, model);
    int rc = run_capture(cmd, out, sizeof out);
    printf("%s", out);
    CHECK(rc == 0, "loom bench exited with %d", rc);
    const char *want[] = {"| loom ", "| reference ", "pp32", "tg8", "loom/ref, median of 2 A/B pairs",
                          "GB/s", "GFLOP/s", "peak RSS", "load average"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(out, want[i]) != NULL, "output lacks '%s'", want[i]);
}

static const char *info_avx2(void) { return "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX_VNNI = 1 | AVX512 = 0 |"; }
static const char *info_avx512(void) { return "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 |"; }

/* loom_ref_orders_note for builds this CPU may not load (a reference with only its build name and system info):
 * haswell orders reproduce the haswell and alderlake builds, avx512 orders the AVX-512 ones; else a note naming the
 * build and the profile that reproduces it, if one does. */
static void test_orders_note(void)
{
    struct loom_ref r = {.print_system_info = info_avx2};
    char note[512];
    snprintf(r.cpu, sizeof r.cpu, "alderlake");
    CHECK(!loom_ref_orders_note(&r, "haswell", note, sizeof note), "haswell orders vs alderlake: no note");
    CHECK(loom_ref_orders_note(&r, "avx512", note, sizeof note) && strstr(note, "no AVX-512 (alderlake); ") &&
              strstr(note, "(LOOM_ORDERS=haswell reproduces it; "),
          "avx512 orders vs alderlake: a note pointing at haswell, found '%s'", note);
    snprintf(r.cpu, sizeof r.cpu, "sse42");
    CHECK(loom_ref_orders_note(&r, "haswell", note, sizeof note) && strstr(note, "haswell and alderlake builds") &&
              strstr(note, "(sse42; docs/") && !strstr(note, "LOOM_ORDERS=avx512"),
          "haswell orders vs sse42: a note, no profile named, found '%s'", note);
    r.print_system_info = info_avx512;
    snprintf(r.cpu, sizeof r.cpu, "zen4");
    CHECK(!loom_ref_orders_note(&r, "avx512", note, sizeof note), "avx512 orders vs zen4: no note");
    CHECK(loom_ref_orders_note(&r, "haswell", note, sizeof note) &&
              strstr(note, "(zen4; LOOM_ORDERS=avx512 reproduces it; "),
          "haswell orders vs zen4: a note pointing at avx512, found '%s'", note);
}

int main(int argc, char **argv)
{
    (void)argc;
    char model[1200];
    const char *cache = getenv("LOOM_CACHE"), *home = getenv("HOME");
    if (cache && *cache)
        snprintf(model, sizeof model, "%s/models/qwen35-tiny-Q4_K_M.gguf", cache);
    else
        snprintf(model, sizeof model, "%s/.cache/loom/models/qwen35-tiny-Q4_K_M.gguf", home ? home : ".");
    struct loom_ref r;
    loom_error err = {0};
    /* The library this test links is the one the binding opens (same file): the defaults must agree. */
    CHECK(loom_ref_open(&r, &err) == LOOM_OK, "%s", err.msg);
    if (err.code == LOOM_OK) {
        test_model_params(&r);
        test_context_params(&r);
        test_batch(&r);
        test_tensor();
        test_eval(&r, model);
        loom_ref_close(&r);
    }
    test_orders_note();
    test_cli(argv[0], model);
    return test_finish();
}
