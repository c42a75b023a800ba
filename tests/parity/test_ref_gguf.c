/* test_ref_gguf.c — loom's GGUF reader against the reference's on every file of tests/gguf_cases.h: the
 * reference (gguf_init_from_file as llama.cpp's model loader calls it, plus that loader's check that each
 * tensor's data lies inside the file) must give the verdict each case states, and loom the same verdict:
 * refused by both, or accepted by both (loom warning where only the GGUF convention is broken). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml.h"
#include "gguf.h"
#include "gguf_cases.h"
#include "test.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)level, (void)text, (void)user;
}

/* 1 when the reference engine would load the container at `path`, 0 when it refuses it. */
static int ref_accepts(const char *path)
{
    struct stat st;
    if (stat(path, &st))
        return 0;
    struct ggml_context *ctx = NULL;
    struct gguf_init_params params = {true, &ctx};
    struct gguf_context *g = gguf_init_from_file(path, params);
    if (!g)
        return 0;
    int ok = 1;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) { /* llama_tensor_weight's bounds check */
        uint64_t off = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i), end = off + gguf_get_tensor_size(g, i);
        ok &= end >= off && end <= (uint64_t)st.st_size;
    }
    gguf_free(g);
    ggml_free(ctx);
    return ok;
}

static const char *const verdict_names[] = {"accept", "accept+warn", "refuse", "loom refuses"};

int main(void)
{
    char dir[] = "/tmp/loom-ref-gguf-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/case.gguf", dir);
    ggml_log_set(quiet, NULL);
    int agree = 0;
    for (size_t i = 0; i < GGUF_N_CASES; i++) {
        const struct gguf_case *c = &gguf_cases[i];
        struct gb b = {0};
        c->build(&b);
        int wrote = gb_write_file(&b, path);
        free(b.p);
        CHECK(!wrote, "%s: writing %s", c->name, path);
        int ref = ref_accepts(path);
        struct loom_gguf *g = NULL;
        loom_error e = {0};
        int loom = loom_gguf_open(path, &g, &e) == LOOM_OK;
        int warned = g && g->n_warnings;
        loom_gguf_close(g);
        unlink(path);
        int ref_should = c->verdict != GC_REFUSE, loom_should = c->verdict == GC_ACCEPT || c->verdict == GC_WARN;
        CHECK(ref == ref_should, "%s: the reference %s it, the case says %s", c->name, ref ? "accepts" : "refuses",
              verdict_names[c->verdict]);
        CHECK(loom == loom_should && warned == (c->verdict == GC_WARN), "%s: loom %s it%s (%s), the case says %s",
              c->name, loom ? "accepts" : "refuses", warned ? " with a warning" : "", loom ? "" : e.msg,
              verdict_names[c->verdict]);
        agree += ref == loom;
        printf("%-36s reference %-7s loom %-7s%s\n", c->name, ref ? "accepts" : "refuses", loom ? "accepts" : "refuses",
               warned ? " (warns)" : "");
    }
    printf("%zu files: loom and the reference agree on %d (the rest are loom's refusals by design)\n", GGUF_N_CASES,
           agree);
    rmdir(dir);
    return test_finish();
}
