/* refengine.c — loads the reference engine's prebuilt libraries at run time (dlopen) and drives the few calls
 * `loom bench --ref` needs: load a model, make a context, evaluate a batch, clear the sequence. Struct layouts
 * are declared in refengine.h and checked against the reference's header by tests/parity/test_refengine.c. */
#include "cli/refengine.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REF_LIB "libllama.v0.5.0.so"

/* Where each entry point goes in struct loom_ref. */
static const struct ref_symbol {
    const char *name;
    size_t off;
} REF_SYMBOLS[] = {
    {"ggml_backend_load_all_from_path", offsetof(struct loom_ref, load_all_from_path)},
    {"ggml_backend_load", offsetof(struct loom_ref, backend_load)},
    {"llama_backend_init", offsetof(struct loom_ref, backend_init)},
    {"llama_backend_free", offsetof(struct loom_ref, backend_free)},
    {"llama_log_set", offsetof(struct loom_ref, log_set)},
    {"llama_model_default_params", offsetof(struct loom_ref, model_default_params)},
    {"llama_context_default_params", offsetof(struct loom_ref, context_default_params)},
    {"llama_model_load_from_file", offsetof(struct loom_ref, model_load_from_file)},
    {"llama_model_free", offsetof(struct loom_ref, model_free)},
    {"llama_model_size", offsetof(struct loom_ref, model_size)},
    {"llama_model_n_params", offsetof(struct loom_ref, model_n_params)},
    {"llama_init_from_model", offsetof(struct loom_ref, init_from_model)},
    {"llama_free", offsetof(struct loom_ref, free)},
    {"llama_batch_get_one", offsetof(struct loom_ref, batch_get_one)},
    {"llama_decode", offsetof(struct loom_ref, decode)},
    {"llama_synchronize", offsetof(struct loom_ref, synchronize)},
    {"llama_get_memory", offsetof(struct loom_ref, get_memory)},
    {"llama_memory_clear", offsetof(struct loom_ref, memory_clear)},
    {"llama_get_logits_ith", offsetof(struct loom_ref, get_logits_ith)},
    {"llama_n_ubatch", offsetof(struct loom_ref, n_ubatch)},
    {"llama_model_get_vocab", offsetof(struct loom_ref, model_get_vocab)},
    {"llama_vocab_n_tokens", offsetof(struct loom_ref, vocab_n_tokens)},
    {"llama_print_system_info", offsetof(struct loom_ref, print_system_info)},
    {"llama_state_seq_get_size", offsetof(struct loom_ref, state_seq_get_size)},
    {"llama_state_seq_get_data", offsetof(struct loom_ref, state_seq_get_data)},
    {"llama_state_seq_set_data", offsetof(struct loom_ref, state_seq_set_data)},
};

const char *loom_ref_bins_dir(char *buf, size_t cap)
{
    const char *ref = getenv("LOOM_REF"), *cache = getenv("LOOM_CACHE"), *home = getenv("HOME");
    if (ref && *ref)
        snprintf(buf, cap, "%s/bins/package/bins/linux-x64", ref);
    else if (cache && *cache)
        snprintf(buf, cap, "%s/ref/bins/package/bins/linux-x64", cache);
    else
        snprintf(buf, cap, "%s/.cache/loom/ref/bins/package/bins/linux-x64", home ? home : ".");
    return buf;
}

/* The CPU build the reference picked (its libggml-cpu-NAME.so mapped in this process) into r->best: "zen4" (or
 * "?" when none is found). */
static void ref_best_cpu(struct loom_ref *r)
{
    snprintf(r->best, sizeof r->best, "?");
    static const char prefix[] = "/libggml-cpu-";
    const ptrdiff_t skip = sizeof prefix - 1;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, prefix), *end = at ? strstr(at, ".so") : NULL;
        if (at && end && end - at - skip < (ptrdiff_t)sizeof r->best) {
            snprintf(r->best, sizeof r->best, "%.*s", (int)(end - at - skip), at + skip);
            break;
        }
    }
    if (f)
        fclose(f);
}

int loom_ref_avx512(const struct loom_ref *r)
{
    /* its system info lists the CPU backend's features, "AVX512 = 1" among them in an AVX-512 build */
    return strstr(r->print_system_info(), "AVX512 = 1") != NULL;
}

const char *loom_ref_cpu_build(const struct loom_ref *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s, %s", r->cpu[0] ? r->cpu : r->best, r->cpu[0] ? "forced by LOOM_REF_CPU"
                                                                          : "the best for this CPU");
    return buf;
}

const char *loom_ref_orders_note(const struct loom_ref *r, const char *orders, char *buf, size_t cap)
{
    const char *name = r->cpu[0] ? r->cpu : r->best;
    /* the alderlake build (AVX2 + AVX-VNNI) has the haswell build's float orders (docs/haswell-numerics.md) */
    int haswell_build = !strcasecmp(name, "haswell") || !strcasecmp(name, "alderlake");
    if (strcmp(orders, "haswell") != 0) {
        if (loom_ref_avx512(r))
            return NULL;
        snprintf(buf, cap, "the reference's CPU build has no AVX-512 (%s); loom's float-order profile avx512 "
                 "reproduces its AVX-512 builds, so expect differences from this one (%s; docs/haswell-numerics.md)",
                 name, haswell_build ? "LOOM_ORDERS=haswell reproduces it"
                                     : "LOOM_ORDERS=haswell reproduces its haswell and alderlake builds");
        return buf;
    }
    if (haswell_build)
        return NULL;
    snprintf(buf, cap, "loom's float-order profile haswell reproduces the reference's haswell and alderlake builds, "
             "so expect differences from this one (%s; %sdocs/haswell-numerics.md)", name,
             loom_ref_avx512(r) ? "LOOM_ORDERS=avx512 reproduces it; " : "");
    return buf;
}

/* The CPU builds in a bins folder: the NAMEs of its libggml-cpu-NAME.so, sorted. */
enum { REF_CPU_BUILDS_MAX = 32 };
struct ref_cpu_builds {
    char name[REF_CPU_BUILDS_MAX][64];
    int n;
};

static int compare_names(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void ref_cpu_builds(const char *bins, struct ref_cpu_builds *b)
{
    static const char prefix[] = "libggml-cpu-";
    const size_t skip = sizeof prefix - 1;
    DIR *d = opendir(bins);
    const struct dirent *e;
    b->n = 0;
    while (d && b->n < REF_CPU_BUILDS_MAX && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (!strncmp(e->d_name, prefix, skip) && len > skip + 3 && !strcmp(e->d_name + len - 3, ".so") &&
            len - skip - 3 < sizeof b->name[0])
            snprintf(b->name[b->n++], sizeof b->name[0], "%.*s", (int)(len - skip - 3), e->d_name + skip);
    }
    if (d)
        closedir(d);
    qsort(b->name, (size_t)b->n, sizeof b->name[0], compare_names);
}

/* The reference's own score of CPU build name on this CPU (its ggml_backend_score, which ggml_backend_load asks:
 * 0 when the CPU lacks an instruction the build needs; safe to call on any CPU), or -1 when it does not open. */
static int ref_cpu_score(const char *bins, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", bins, name);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL), *sym = lib ? dlsym(lib, "ggml_backend_score") : NULL;
    int (*score)(void) = NULL;
    memcpy(&score, &sym, sizeof score);
    int s = !lib ? -1 : score ? score() : 1;
    if (lib)
        dlclose(lib);
    return s;
}

/* LOOM_REF_CPU=cpu did not load build (its spelling in the folder; NULL: none there): why, and the builds this CPU
 * can load, into err. */
static int ref_cpu_refused(const struct loom_ref *r, const char *cpu, const char *build,
                           const struct ref_cpu_builds *b, loom_error *err)
{
    /* ggml's x86 builds that need AVX-512 (its CMake variants) */
    static const char *const avx512[] = {"skylakex", "cannonlake", "cascadelake", "cooperlake", "icelake",
                                         "sapphirerapids", "zen4"};
    char all[640] = "", can[640] = "";
    for (int i = 0; i < b->n; i++) {
        size_t n = strlen(all), k = strlen(can);
        snprintf(all + n, sizeof all - n, "%s%s", n ? ", " : "", b->name[i]);
        if (ref_cpu_score(r->bins, b->name[i]) > 0)
            snprintf(can + k, sizeof can - k, "%s%s", k ? ", " : "", b->name[i]);
    }
    if (!build)
        return loom_errorf(err, LOOM_E_ARG, "LOOM_REF_CPU=%s: expected the NAME of a libggml-cpu-NAME.so in %s (any "
                           "case), found none of that name; there: %s; this CPU can load: %s", cpu, r->bins,
                           b->n ? all : "none", can[0] ? can : "none");
    int needs512 = 0, score = ref_cpu_score(r->bins, build);
    for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
        needs512 |= !strcmp(build, avx512[i]);
    __builtin_cpu_init();
    const char *why = score == 0 && needs512 && !__builtin_cpu_supports("avx512f")
                          ? "it needs AVX-512, which this CPU lacks"
                      : score == 0 ? "it needs instructions this CPU lacks (the reference scores it 0 here)"
                      : score < 0 ? "it does not open as a library" : "the reference refused it";
    return loom_errorf(err, LOOM_E_IO, "LOOM_REF_CPU=%s: the reference's CPU build %s/libggml-cpu-%s.so is there but "
                       "did not load: %s; this CPU can load: %s", cpu, r->bins, build, why, can[0] ? can : "none");
}

/* The reference's log sink: errors only (its loader is chatty at INFO); level 5 (CONT) continues the last. */
static void ref_log(int level, const char *text, void *user)
{
    static int last;
    (void)user;
    if (level != 5)
        last = level;
    if (last >= 4)
        fputs(text, stderr);
}

int loom_ref_open(struct loom_ref *r, loom_error *err)
{
    char path[1200]; /* bins, "/libggml-cpu-", a NAME of r->cpu and ".so" */
    memset(r, 0, sizeof *r);
    loom_ref_bins_dir(r->bins, sizeof r->bins);
    snprintf(path, sizeof path, "%s/%s", r->bins, REF_LIB);
    r->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!r->lib)
        return loom_errorf(err, LOOM_E_IO, "reference engine: dlopen %s failed (%s); set LOOM_REF or run "
                           "scripts/setup.sh", path, dlerror());
    for (size_t i = 0; i < sizeof REF_SYMBOLS / sizeof REF_SYMBOLS[0]; i++) {
        void *sym = dlsym(r->lib, REF_SYMBOLS[i].name);
        if (!sym)
            return loom_errorf(err, LOOM_E_IO, "reference engine: symbol %s not found in %s", REF_SYMBOLS[i].name,
                               path);
        memcpy((char *)r + REF_SYMBOLS[i].off, &sym, sizeof sym);
    }
    r->log_set(ref_log, NULL);
    const char *repack = getenv("LOOM_REF_REPACK"); /* empty: as unset, as every variable loom reads */
    if (repack && *repack && strcmp(repack, "0") && strcmp(repack, "1"))
        return loom_errorf(err, LOOM_E_ARG, "LOOM_REF_REPACK: expected 0 or 1, found '%s'", repack);
    r->repack = !repack || strcmp(repack, "0");
    const char *cpu = getenv("LOOM_REF_CPU");
    if (cpu && *cpu) { /* one CPU build (e.g. haswell: AVX2 only) instead of the best for this CPU, in any case */
        struct ref_cpu_builds b;
        ref_cpu_builds(r->bins, &b);
        for (int i = 0; i < b.n && !r->cpu[0]; i++)
            if (!strcasecmp(cpu, b.name[i]))
                snprintf(r->cpu, sizeof r->cpu, "%s", b.name[i]);
        snprintf(path, sizeof path, "%s/libggml-cpu-%s.so", r->bins, r->cpu);
        if (!r->cpu[0] || !r->backend_load(path))
            return ref_cpu_refused(r, cpu, r->cpu[0] ? r->cpu : NULL, &b, err);
    } else {
        r->load_all_from_path(r->bins);
        ref_best_cpu(r);
    }
    r->backend_init();
    return LOOM_OK;
}

void loom_ref_close(struct loom_ref *r)
{
    if (r->lib)
        r->backend_free();
}

struct loom_ref_model *loom_ref_model_load(const struct loom_ref *r, const char *path, loom_error *err)
{
    struct loom_ref_model_params p = r->model_default_params();
    p.use_extra_bufts = r->repack != 0;
    struct loom_ref_model *m = r->model_load_from_file(path, p);
    if (!m)
        loom_errorf(err, LOOM_E_IO, "reference engine: llama_model_load_from_file(%s) failed", path);
    return m;
}

/* The reference's K cache type (enum ggml_type) for loom's. */
static int32_t ref_type_k(enum loom_kv_type k_type) { return k_type == LOOM_KV_Q8_0 ? LOOM_REF_Q8_0 : LOOM_REF_F16; }

struct loom_ref_context *loom_ref_context_new(const struct loom_ref *r, struct loom_ref_model *model, int n_ctx,
                                              int n_batch, int n_threads, int flash_attn, enum loom_kv_type k_type,
                                              loom_error *err)
{
    struct loom_ref_context_params p = r->context_default_params();
    p.type_k = ref_type_k(k_type);
    p.n_ctx = (uint32_t)n_ctx;
    p.n_batch = (uint32_t)n_batch;
    p.n_ubatch = (uint32_t)(n_batch < 512 ? n_batch : 512);
    p.n_seq_max = 1;
    p.n_threads = p.n_threads_batch = n_threads;
    p.flash_attn_type = flash_attn;
    p.no_perf = true;
    struct loom_ref_context *ctx = r->init_from_model(model, p);
    if (!ctx)
        loom_errorf(err, LOOM_E_IO, "reference engine: llama_init_from_model (n_ctx %d, n_batch %d) failed", n_ctx,
                    n_batch);
    return ctx;
}

struct loom_ref_context *loom_ref_context_exact(const struct loom_ref *r, struct loom_ref_model *model, int n_ctx,
                                                int n_batch, int n_ubatch, int n_threads, enum loom_kv_type k_type,
                                                bool (*cb)(void *t, bool ask, void *user), void *user,
                                                loom_error *err)
{
    struct loom_ref_context_params p = r->context_default_params();
    p.n_ctx = (uint32_t)n_ctx;
    p.n_batch = (uint32_t)n_batch;
    p.n_ubatch = (uint32_t)n_ubatch;
    p.n_seq_max = 1;
    p.n_threads = p.n_threads_batch = n_threads;
    p.flash_attn_type = 0; /* LLAMA_FLASH_ATTN_TYPE_DISABLED */
    p.type_k = ref_type_k(k_type);
    p.type_v = LOOM_REF_F16;
    p.cb_eval = cb;
    p.cb_eval_user_data = user;
    p.no_perf = true;
    struct loom_ref_context *ctx = r->init_from_model(model, p);
    if (!ctx)
        loom_errorf(err, LOOM_E_IO, "reference engine: llama_init_from_model (n_ctx %d, n_batch %d, n_ubatch %d) "
                    "failed", n_ctx, n_batch, n_ubatch);
    return ctx;
}

int loom_ref_eval_all(const struct loom_ref *r, struct loom_ref_context *ctx, const int32_t *tokens, int n, int pos0,
                      loom_error *err)
{
    int32_t *tok = malloc((size_t)n * sizeof *tok), *pos = malloc((size_t)n * sizeof *pos);
    int32_t *n_seq = malloc((size_t)n * sizeof *n_seq), seq0 = 0, **seq = malloc((size_t)n * sizeof *seq);
    int8_t *out = malloc((size_t)n);
    int rc = tok && pos && n_seq && seq && out ? LOOM_OK
                                               : loom_errorf(err, LOOM_E_NOMEM, "reference engine: a batch of %d", n);
    for (int i = 0; rc == LOOM_OK && i < n; i++)
        tok[i] = tokens[i], pos[i] = pos0 + i, n_seq[i] = 1, seq[i] = &seq0, out[i] = 1;
    if (rc == LOOM_OK) {
        struct loom_ref_batch b = {n, tok, NULL, pos, n_seq, seq, out};
        int32_t status = r->decode(ctx, b);
        if (status != 0)
            rc = loom_errorf(err, LOOM_E_INTERNAL, "reference engine: llama_decode of %d tokens at position %d "
                             "returned %d", n, pos0, (int)status);
        else
            r->synchronize(ctx);
    }
    free(tok), free(pos), free(n_seq), free(seq), free(out);
    return rc;
}

int loom_ref_eval(const struct loom_ref *r, struct loom_ref_context *ctx, int32_t *tokens, int n, loom_error *err)
{
    int32_t rc = r->decode(ctx, r->batch_get_one(tokens, n));
    if (rc != 0)
        return loom_errorf(err, LOOM_E_INTERNAL, "reference engine: llama_decode of %d tokens returned %d", n,
                           (int)rc);
    r->synchronize(ctx);
    return LOOM_OK;
}

void loom_ref_reset(const struct loom_ref *r, struct loom_ref_context *ctx)
{
    r->memory_clear(r->get_memory(ctx), true);
}

int loom_ref_state_save(const struct loom_ref *r, struct loom_ref_context *ctx, uint8_t **buf, size_t *size,
                        loom_error *err)
{
    size_t n = r->state_seq_get_size(ctx, 0);
    *buf = n ? malloc(n) : NULL;
    if (!*buf)
        return n ? loom_errorf(err, LOOM_E_NOMEM, "reference engine: a sequence state of %zu bytes", n)
                 : loom_errorf(err, LOOM_E_INTERNAL, "reference engine: llama_state_seq_get_size gave 0 bytes");
    *size = r->state_seq_get_data(ctx, *buf, n, 0);
    if (*size == 0) {
        free(*buf);
        *buf = NULL;
        return loom_errorf(err, LOOM_E_INTERNAL, "reference engine: llama_state_seq_get_data wrote nothing");
    }
    return LOOM_OK;
}

int loom_ref_state_restore(const struct loom_ref *r, struct loom_ref_context *ctx, const uint8_t *buf, size_t size,
                           loom_error *err)
{
    r->memory_clear(r->get_memory(ctx), false);
    if (r->state_seq_set_data(ctx, buf, size, 0) == 0)
        return loom_errorf(err, LOOM_E_INTERNAL, "reference engine: llama_state_seq_set_data refused a state of "
                           "%zu bytes", size);
    return LOOM_OK;
}
