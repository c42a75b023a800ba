/* test_gqa.c — the forward pass of a model with grouped-query attention (2 KV heads of 3 query heads each,
 * tests/gqa_fixture.h; the presets' tiny models have one KV head), on every kernel set the CPU runs (scalar,
 * AVX2, AVX-512), in both float-order profiles, both numerics and both K cache types: every kernel set gives the
 * scalar set's logits bit for bit; CANONICAL gives one batch, chunks (5 + 7) and token by token alike; and the same
 * model with each KV head repeated for its query heads (n_head_kv = n_head) gives the same logits, so query head h
 * reads KV head h / 3 and the K and V caches keep each KV head's positions apart. Writes its files into a private
 * folder under /tmp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "model_fixture.h"
#include "gqa_fixture.h"
#include "kernels/types.h"

enum { NT = 12, N_RUNS = 4 };

/* The logits of one model under one kernel set: for each run (numerics x K cache type), the prompt as one batch,
 * as 5 + 7 and token by token ([NT][nv] each). */
struct logits {
    float *batch[N_RUNS], *chunks[N_RUNS], *steps[N_RUNS];
};

static const enum loom_numerics RUN_NUM[N_RUNS] = {LOOM_NUMERICS_CANONICAL, LOOM_NUMERICS_CANONICAL,
                                                   LOOM_NUMERICS_REFERENCE_BATCH, LOOM_NUMERICS_REFERENCE_BATCH};
static const enum loom_kv_type RUN_K[N_RUNS] = {LOOM_KV_F16, LOOM_KV_Q8_0, LOOM_KV_F16, LOOM_KV_Q8_0};

static void logits_free(struct logits *l)
{
    for (int r = 0; r < N_RUNS; r++) {
        free(l->batch[r]);
        free(l->chunks[r]);
        free(l->steps[r]);
    }
    memset(l, 0, sizeof *l);
}

/* Run r of model m into l: one batch, 5 + 7, token by token. LOOM_OK or the first error (reported). */
static int run_one(const loom_model *m, int r, const int32_t *tok, int nv, struct logits *l)
{
    loom_error err = {0};
    loom_session_params sp = {.n_ctx = 64, .n_threads = 2, .numerics = RUN_NUM[r], .k_type = RUN_K[r]};
    loom_session *s = loom_session_new(m, &sp, &err);
    size_t bytes = sizeof(float) * (size_t)NT * (size_t)nv;
    l->batch[r] = malloc(bytes), l->chunks[r] = malloc(bytes), l->steps[r] = malloc(bytes);
    int rc = s && l->batch[r] && l->chunks[r] && l->steps[r] ? LOOM_OK : LOOM_E_NOMEM;
    if (!rc)
        rc = loom_session_eval(s, tok, NT, l->batch[r], LOOM_LOGITS_ALL, &err);
    loom_session_reset(s);
    if (!rc)
        rc = loom_session_eval(s, tok, 5, l->chunks[r], LOOM_LOGITS_ALL, &err);
    if (!rc)
        rc = loom_session_eval(s, tok + 5, NT - 5, l->chunks[r] + (size_t)5 * nv, LOOM_LOGITS_ALL, &err);
    loom_session_reset(s);
    for (int t = 0; t < NT && !rc; t++)
        rc = loom_session_eval(s, tok + t, 1, l->steps[r] + (size_t)t * nv, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK, "%s run %d: %s", loom_kernels_name(), r, err.msg);
    loom_session_free(s);
    return rc;
}

/* The model at path, loaded under the active kernel set, through every run. LOOM_OK or the first error. */
static int run_model(const char *path, const int32_t *tok, int *nv, struct logits *l)
{
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    CHECK(m != NULL, "load %s (%s kernels): %s", path, loom_kernels_name(), err.msg);
    int rc = m ? LOOM_OK : LOOM_E_FORMAT;
    if (m)
        *nv = loom_model_n_logits(m);
    for (int r = 0; r < N_RUNS && !rc; r++)
        rc = run_one(m, r, tok, *nv, l);
    loom_model_free(m);
    return rc;
}

static const char *run_name(int r)
{
    static const char *const names[N_RUNS] = {"canonical, K F16", "canonical, K Q8_0", "reference-batch, K F16",
                                              "reference-batch, K Q8_0"};
    return names[r];
}

/* a and b bitwise, run by run (the batch, the chunks and the steps). */
static void same_logits(const struct logits *a, const struct logits *b, int nv, const char *what)
{
    size_t bytes = sizeof(float) * (size_t)NT * (size_t)nv;
    for (int r = 0; r < N_RUNS; r++) {
        CHECK(!memcmp(a->batch[r], b->batch[r], bytes), "%s (%s): one batch differs", what, run_name(r));
        CHECK(!memcmp(a->chunks[r], b->chunks[r], bytes), "%s (%s): 5 + 7 differs", what, run_name(r));
        CHECK(!memcmp(a->steps[r], b->steps[r], bytes), "%s (%s): token by token differs", what, run_name(r));
    }
}

/* Within one model's logits: CANONICAL gives the batch, the chunks and the steps alike; REFERENCE_BATCH gives
 * them close (its batched and single-token orders differ, as the reference's); every value finite. */
static void check_partitions(const struct logits *l, int nv, const char *what)
{
    size_t n = (size_t)NT * (size_t)nv, bytes = sizeof(float) * n;
    for (int r = 0; r < N_RUNS; r++) {
        int finite = 1;
        double worst = 0, var = 0;
        for (size_t i = 0; i < n; i++) {
            finite &= isfinite(l->batch[r][i]) != 0;
            worst = fmax(worst, fabs((double)l->batch[r][i] - l->steps[r][i]));
            var += (double)l->batch[r][i] * l->batch[r][i];
        }
        CHECK(finite, "%s (%s): logits not finite", what, run_name(r));
        if (RUN_NUM[r] == LOOM_NUMERICS_CANONICAL) {
            CHECK(!memcmp(l->batch[r], l->chunks[r], bytes), "%s (%s): 5 + 7 differs from one batch", what,
                  run_name(r));
            CHECK(!memcmp(l->batch[r], l->steps[r], bytes), "%s (%s): token by token differs from one batch", what,
                  run_name(r));
        } else {
            CHECK(worst < 2e-3 * sqrt(var / (double)n), "%s (%s): batch vs token by token %g (logit rms %g)", what,
                  run_name(r), worst, sqrt(var / (double)n));
        }
    }
}

int main(void)
{
    char dir[] = "/tmp/loom-test-gqa-XXXXXX", vocab[64], gqa[64], mha[64];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return test_finish();
    }
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    snprintf(gqa, sizeof gqa, "%s/gqa.gguf", dir);
    snprintf(mha, sizeof mha, "%s/mha.gguf", dir);
    int32_t tok[NT];
    for (int i = 0; i < NT; i++)
        tok[i] = (int32_t)((i * 37 + 11) % MINI_TOKENS);
    if (write_mini_vocab(vocab) == LOOM_OK && gqa_write(&gqa_micro, vocab, LOOM_TYPE_F32, NULL, gqa) == LOOM_OK &&
        gqa_write_expanded(gqa, &gqa_micro, mha) == LOOM_OK) {
        const enum loom_kernel_mode modes[] = {LOOM_KERNELS_SCALAR, LOOM_KERNELS_AVX2, LOOM_KERNELS_AVX512};
        const enum loom_orders profiles[] = {LOOM_ORDERS_AVX512, LOOM_ORDERS_HASWELL};
        for (size_t o = 0; o < sizeof profiles / sizeof profiles[0]; o++) {
            loom_orders_select(profiles[o], NULL);
            struct logits scalar = {0};
            int nv = 0;
            for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
                loom_error err;
                if (loom_kernels_select(modes[k], &err) != LOOM_OK)
                    continue;
                struct logits g = {0}, h = {0};
                char what[96];
                printf("kernels %s, %s orders: micro-gqa (6 query heads on 2 KV heads) and its KV heads repeated\n",
                       loom_kernels_name(), loom_orders_name());
                if (run_model(gqa, tok, &nv, &g) == LOOM_OK && run_model(mha, tok, &nv, &h) == LOOM_OK) {
                    snprintf(what, sizeof what, "%s, %s: GQA vs KV heads repeated", loom_kernels_name(),
                             loom_orders_name());
                    same_logits(&g, &h, nv, what);
                    snprintf(what, sizeof what, "%s, %s: GQA", loom_kernels_name(), loom_orders_name());
                    check_partitions(&g, nv, what);
                    snprintf(what, sizeof what, "%s vs scalar kernels, %s", loom_kernels_name(), loom_orders_name());
                    if (k)
                        same_logits(&g, &scalar, nv, what);
                }
                logits_free(&h);
                if (!k)
                    scalar = g;
                else
                    logits_free(&g);
            }
            logits_free(&scalar);
        }
        loom_error err;
        CHECK(loom_kernels_select(LOOM_KERNELS_AUTO, &err) == LOOM_OK, "auto kernels: %s", err.msg);
    }
    unlink(mha);
    unlink(gqa);
    unlink(vocab);
    rmdir(dir);
    return test_finish();
}
