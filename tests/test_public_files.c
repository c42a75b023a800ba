/* test_public_files.c — the public API for files (loom.h sections "GGUF files", "Model files", "Synthetic
 * models", "Quantization", "Machine probes"): the read-only GGUF view of a file written here (typed values as
 * written, tensor shapes, sizes and offsets from the layout GGUF prescribes), the description of the cached tiny
 * model against the session's own state size, and the refusals of the writers, the model loader and probes. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "loom.h"
#include "test.h"

static int fill_zero(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)index, (void)err;
    memset(buf, 0, nbytes);
    return LOOM_OK;
}

/* A file with one key of each scalar kind, a string, an array, a warned key, and two tensors. */
static int write_sample(const char *path)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    const int32_t ints[3] = {1, -2, 3};
    const uint64_t ne1[1] = {40}, ne2[2] = {64, 3};
    loom_error e = {0};
    int rc = loom_gguf_writer_set_u32(w, "a.u32", 0xdeadbeef);
    rc |= loom_gguf_writer_set_i32(w, "a.i32", -5);
    rc |= loom_gguf_writer_set_f32(w, "a.f32", 0.25f);
    rc |= loom_gguf_writer_set_bool(w, "a.bool", 1);
    rc |= loom_gguf_writer_set_str(w, "a.str", "hello");
    rc |= loom_gguf_writer_set_arr(w, "a.arr", LOOM_GGUF_INT32, ints, 3);
    rc |= loom_gguf_writer_set_u32(w, "Not.Snake", 1); /* only the convention forbids it: a warning */
    rc |= loom_gguf_writer_add_tensor(w, "t.f32", LOOM_TYPE_F32, 1, ne1);
    rc |= loom_gguf_writer_add_tensor(w, "t.q8", LOOM_TYPE_Q8_0, 2, ne2);
    rc |= loom_gguf_writer_write(w, path, fill_zero, NULL, &e);
    loom_gguf_writer_free(w);
    return rc;
}

static void check_keys(const loom_gguf *g)
{
    loom_gguf_kv_info kv;
    loom_error e = {0};
    int64_t i = loom_gguf_find_key(g, "a.u32");
    CHECK(i == 0 && loom_gguf_kv_at(g, 0, &kv, &e) == LOOM_OK && kv.type == LOOM_GGUF_UINT32 &&
              kv.u64 == 0xdeadbeef && kv.key_len == 5 && !memcmp(kv.key, "a.u32", 5),
          "a.u32: index %lld, value %llu", (long long)i, (unsigned long long)kv.u64);
    CHECK(loom_gguf_kv_at(g, 1, &kv, &e) == LOOM_OK && kv.type == LOOM_GGUF_INT32 && kv.i64 == -5,
          "a.i32 sign-extended: %lld", (long long)kv.i64);
    CHECK(loom_gguf_kv_at(g, 2, &kv, &e) == LOOM_OK && kv.type == LOOM_GGUF_FLOAT32 && kv.f64 == 0.25,
          "a.f32: %g", kv.f64);
    CHECK(loom_gguf_kv_at(g, 3, &kv, &e) == LOOM_OK && kv.type == LOOM_GGUF_BOOL && kv.u64 == 1, "a.bool");
    CHECK(loom_gguf_kv_at(g, 4, &kv, &e) == LOOM_OK && kv.type == LOOM_GGUF_STRING && kv.str_len == 5 &&
              !memcmp(kv.str, "hello", 5),
          "a.str");
    CHECK(loom_gguf_kv_at(g, 5, &kv, &e) == LOOM_OK && kv.type == LOOM_GGUF_ARRAY &&
              kv.arr_type == LOOM_GGUF_INT32 && kv.arr_n == 3,
          "a.arr: element type %u, %llu elements", kv.arr_type, (unsigned long long)kv.arr_n);
    CHECK(loom_gguf_find_key(g, "a.missing") == -1, "a missing key: -1");
    CHECK(loom_gguf_kv_at(g, 99, &kv, &e) == LOOM_E_RANGE && strstr(e.msg, "expected < 7 (n_kv), found 99"),
          "key index out of range named: %s", e.msg);
}

static void check_tensors(const loom_gguf *g, const loom_gguf_info *info)
{
    loom_gguf_tensor_info t;
    loom_error e = {0};
    /* GGUF places tensor data in order, each at a multiple of the alignment (32): 40 F32 = 160 bytes, then
     * 3 rows of 64 Q8_0 = 2 blocks of 34 bytes each. */
    CHECK(loom_gguf_tensor_at(g, 0, &t, &e) == LOOM_OK && !strcmp(t.name, "t.f32") && t.type == LOOM_TYPE_F32 &&
              !strcmp(t.type_name, "F32") && t.n_dims == 1 && t.ne[0] == 40 && t.ne[1] == 1 && t.n_elements == 40 &&
              t.n_bytes == 160 && t.file_offset == info->data_offset,
          "t.f32: %s %s n_bytes %llu offset %llu", t.name, t.type_name, (unsigned long long)t.n_bytes,
          (unsigned long long)t.file_offset);
    CHECK(loom_gguf_tensor_at(g, 1, &t, &e) == LOOM_OK && !strcmp(t.name, "t.q8") && !strcmp(t.type_name, "Q8_0") &&
              t.n_dims == 2 && t.ne[0] == 64 && t.ne[1] == 3 && t.n_elements == 192 && t.n_bytes == 3 * 2 * 34 &&
              t.file_offset == info->data_offset + 160,
          "t.q8: n_bytes %llu offset %llu", (unsigned long long)t.n_bytes, (unsigned long long)t.file_offset);
    CHECK(loom_gguf_tensor_at(g, 2, &t, &e) == LOOM_E_RANGE && strstr(e.msg, "expected < 2 (n_tensors), found 2"),
          "tensor index out of range named: %s", e.msg);
    CHECK(loom_gguf_check_tensors(g, &e) == LOOM_OK, "zero data passes the tensor check: %s", e.msg);
}

static void test_gguf_view(void)
{
    char dir[] = "/tmp/loom-test-public-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/sample.gguf", dir);
    CHECK(write_sample(path) == LOOM_OK, "write the sample file");
    loom_gguf *g = NULL;
    loom_error e = {0};
    CHECK(loom_gguf_open(path, &g, &e) == LOOM_OK, "open: %s", e.msg);
    if (g) {
        loom_gguf_info info;
        loom_gguf_get_info(g, &info);
        CHECK(info.version == 3 && info.n_kv == 7 && info.n_tensors == 2 && info.alignment == 32 &&
                  info.data_offset % 32 == 0 && info.file_bytes >= info.data_offset + 160 + 3 * 2 * 34,
              "header: v%u, %llu keys, %llu tensors, %llu bytes", info.version, (unsigned long long)info.n_kv,
              (unsigned long long)info.n_tensors, (unsigned long long)info.file_bytes);
        CHECK(info.n_warnings == 1 && strstr(loom_gguf_warning(g, 0), "Not.Snake") && !loom_gguf_warning(g, 1),
              "the key breaking the convention is warned about");
        check_keys(g);
        check_tensors(g, &info);
        loom_model_desc d;
        CHECK(loom_model_describe(g, &d, &e) == LOOM_E_FORMAT, "describe refuses a file that is no model: %s",
              e.msg);
        loom_gguf_close(g);
    }
    unlink(path);
    rmdir(dir);
}

/* The description of the tiny model: its state sizes are the session's (loom_session_state_bytes). */
static void test_describe(void)
{
    const char *cache = getenv("LOOM_CACHE"), *home = getenv("HOME");
    char path[4096];
    snprintf(path, sizeof path, "%s%s/models/qwen35-tiny-F32.gguf", cache ? cache : home ? home : ".",
             cache ? "" : "/.cache/loom");
    if (access(path, R_OK) != 0) {
        printf("skipped the description: %s is missing (scripts/prepare-models.sh makes it)\n", path);
        return;
    }
    loom_gguf *g = NULL;
    loom_model_desc d;
    loom_error e = {0};
    CHECK(loom_gguf_open(path, &g, &e) == LOOM_OK && loom_model_describe(g, &d, &e) == LOOM_OK, "describe: %s",
          e.msg);
    loom_gguf_close(g);
    loom_model *m = loom_model_load(path, &e);
    loom_session *s = m ? loom_session_new(m, &(loom_session_params){.n_ctx = 64, .n_threads = 1}, &e) : NULL;
    CHECK(s != NULL, "load: %s", e.msg);
    if (s)
        CHECK(loom_session_state_bytes(s) == d.recurrent_state_bytes + 64 * d.kv_bytes_per_token,
              "state bytes: session %llu, description %llu + 64 x %llu",
              (unsigned long long)loom_session_state_bytes(s), (unsigned long long)d.recurrent_state_bytes,
              (unsigned long long)d.kv_bytes_per_token);
    CHECK(!strcmp(d.arch, "qwen35") && d.n_layer > 0 && d.n_kinds == 2 && d.n_hparams > 0, "arch %s, %u layers",
          d.arch, d.n_layer);
    uint32_t n_attn = 0;
    for (uint32_t il = 0; il < d.n_layer; il++)
        n_attn += d.layer_kind[il] == 1;
    CHECK(n_attn > 0 && n_attn < d.n_layer && !strcmp(d.kinds[1].name, "attention"), "%u attention layers", n_attn);
    loom_model_desc_free(&d);
    loom_session_free(s);
    loom_model_free(m);
}

static int abort_now(void *ctx)
{
    (void)ctx;
    return 1;
}

static void test_refusals(void)
{
    loom_error e = {0};
    CHECK(!strcmp(loom_quantize_recipe(0), "Q8_0") && loom_quantize_recipe(-1) == NULL, "recipe names");
    int n = 0;
    while (loom_quantize_recipe(n))
        n++;
    CHECK(n == 20, "20 recipes, found %d", n);
    CHECK(loom_quantize(NULL, "Q3_X", "/nonexistent/out.gguf", NULL, &e) == LOOM_E_ARG &&
              strstr(e.msg, "recipe: expected one of Q8_0") && strstr(e.msg, "found 'Q3_X'"),
          "an unknown recipe is named: %s", e.msg);
    CHECK(!strcmp(loom_synth_preset(0), "micro") && !strcmp(loom_synth_preset(3), "tiny-moe") &&
              !strcmp(loom_synth_preset(8), "35b-a3b") && !strcmp(loom_synth_preset(14), "397b-a17b") &&
              loom_synth_preset(15) == NULL,
          "preset names");
    loom_synth_options o = {.preset = "huge", .type = "F16", .vocab_path = "x"};
    CHECK(loom_synthesize(&o, "/nonexistent/out.gguf", &e) == LOOM_E_ARG && strstr(e.msg, "found 'huge'") &&
              strstr(e.msg, "expected one of micro, tiny, 0.8b, tiny-moe"),
          "an unknown preset is named: %s", e.msg);
    o.preset = "tiny-moe", o.router = "zipf";
    CHECK(loom_synthesize(&o, "/nonexistent/out.gguf", &e) == LOOM_E_ARG &&
              strstr(e.msg, "router: expected uniform or skewed, found 'zipf'"),
          "an unknown router is named: %s", e.msg);
    o.router = NULL;
    o.preset = "micro", o.type = "f16";
    CHECK(loom_synthesize(&o, "/nonexistent/out.gguf", &e) == LOOM_E_ARG &&
              strstr(e.msg, "type: expected F32, F16, BF16 or a recipe (Q8_0 ") && strstr(e.msg, "found 'f16'"),
          "an unknown type is named: %s", e.msg);
    static const int bad_threads[2] = {-1, LOOM_MAX_THREADS + 1};
    for (int k = 0; k < 2; k++) { /* refused before a file is opened or a thread started */
        char found[32];
        snprintf(found, sizeof found, "threads, found %d", bad_threads[k]);
        loom_model_params mp = {.n_threads = bad_threads[k]};
        loom_model *lm = loom_model_load_ex("/nonexistent/model.gguf", &mp, &e);
        CHECK(!lm && e.code == LOOM_E_ARG && strstr(e.msg, "model params n_threads: expected 0 (the online CPUs) to "
                                                           "1024 threads") && strstr(e.msg, found),
              "model n_threads %d is named: %s", bad_threads[k], e.msg);
        loom_model_free(lm);
        loom_quantize_options qo = {.n_threads = bad_threads[k]};
        CHECK(loom_quantize(NULL, "Q8_0", "/nonexistent/out.gguf", &qo, &e) == LOOM_E_ARG &&
                  strstr(e.msg, "quantize options n_threads: expected 0") && strstr(e.msg, found),
              "quantize n_threads %d is named: %s", bad_threads[k], e.msg);
        loom_machine_probe pm = {0};
        CHECK(loom_probe_machine(&(loom_probe_options){.n_threads = bad_threads[k]}, &pm, &e) == LOOM_E_ARG &&
                  strstr(e.msg, "probe options n_threads: expected 0") && strstr(e.msg, found) && pm.isa == NULL,
              "probe n_threads %d is named: %s", bad_threads[k], e.msg);
    }
    loom_machine_probe m = {0};
    CHECK(loom_probe_machine(&(loom_probe_options){.n_threads = 1, .abort = abort_now}, &m, &e) == LOOM_E_CANCELLED &&
              m.isa == NULL,
          "a cancelled probe returns nothing: %s", e.msg);
}

int main(void)
{
    test_gguf_view();
    test_describe();
    test_refusals();
    return test_finish();
}
