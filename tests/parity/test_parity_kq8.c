/* test_parity_kq8.c — the Q8_0 K cache (loom_session_params.k_type = LOOM_KV_Q8_0, V F16) against the reference
 * with type_k = GGML_TYPE_Q8_0 and flash attention off, on the tiny qwen35 and qwen35moe models: teacher-forced
 * ids fed to the reference one token per llama_decode must give, row for row, bitwise loom's CANONICAL logits
 * (loom evaluating them in a few large requests), and fed in batches (a 32-token prompt, then 456 tokens in one
 * micro-batch, then 32 more) bitwise loom's REFERENCE_BATCH logits with the same split; the deep rows sit past
 * position 480. Also: a session's state bytes with a Q8_0 K cache, the Q8_0 K logits differ from the F16 K ones
 * (the option takes effect), and a state file saved with one K type is refused by a session of the other.
 * Models: $LOOM_CACHE/models (scripts/prepare-models.sh); LOOM_PARITY_MODELS restricts the list. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "parity.h"
#include "test.h"

/* N_HEAD: rows compared at the start; N_MID: the tokens fed as one batch between; N_TAIL: rows compared at
 * the end (positions N_HEAD + N_MID ..). N_CTX: both caches (a multiple of 256, as the reference pads it).
 * One thread: neither engine's results depend on the thread count with flash attention off. */
enum { N_HEAD = 32, N_MID = 456, N_TAIL = 32, N_TOK = N_HEAD + N_MID + N_TAIL, N_CTX = 768, N_THREADS = 1 };

/* Token ids: splitmix64 from TOK_SEED over the regular byte-level BPE tokens (ids below 151643). Contract
 * control: the first and last id. */
#define TOK_SEED 0x9B8C0DEull
#define TOK_RANGE 151643u

static const char *const MODELS[] = {"qwen35-tiny-F32.gguf",   "qwen35-tiny-F16.gguf",   "qwen35-tiny-Q4_K_M.gguf",
                                     "qwen35moe-tiny-F16.gguf"};

static struct llama_context *ref_context(struct llama_model *rm, int n_batch)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_batch = cp.n_ubatch = (uint32_t)n_batch;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = N_THREADS;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = GGML_TYPE_Q8_0;
    cp.type_v = GGML_TYPE_F16;
    cp.no_perf = true;
    return llama_init_from_model(rm, cp);
}

static loom_session *loom_ctx(const loom_model *lm, enum loom_numerics numerics, int n_ubatch,
                              enum loom_kv_type k_type)
{
    loom_session_params sp = {0};
    sp.n_ctx = N_CTX;
    sp.n_threads = N_THREADS;
    sp.numerics = numerics;
    sp.n_ubatch = n_ubatch;
    sp.k_type = k_type;
    loom_error err = {0};
    loom_session *s = loom_session_new(lm, &sp, &err);
    CHECK(s != NULL, "loom_session_new: %s", err.msg);
    return s;
}

/* Rows equal bitwise: the count of differing values of ref[n] vs got[n]. */
static int row_diffs(const float *ref, const float *got, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++)
        d += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
    return d;
}

/* Compare n_rows rows ([row][n]); the first differing row is reported. Returns the rows that differ. */
static int compare_rows(const char *model, const char *what, int pos0, const float *ref, const float *got,
                        int n_rows, int n)
{
    int bad = 0;
    for (int r = 0; r < n_rows; r++) {
        int d = row_diffs(ref + (size_t)r * n, got + (size_t)r * n, n);
        if (d && !bad++)
            fprintf(stderr, "%s %s: position %d: %d of %d logits differ (%g vs %g at 0)\n", model, what, pos0 + r,
                    d, n, ref[(size_t)r * n], got[(size_t)r * n]);
    }
    return bad;
}

/* The reference fed one token per llama_decode: rows of the first N_HEAD and last N_TAIL positions into
 * head / tail, against loom CANONICAL fed [0, N_HEAD) all rows, the middle last-row only, the tail all rows. */
static void run_canonical(const char *file, loom_model *lm, struct llama_model *rm, int n, const int32_t *tok,
                          float *ref_head, float *ref_tail, float *got)
{
    struct llama_context *rc = ref_context(rm, 512);
    CHECK(rc != NULL, "%s: reference context with a Q8_0 K cache", file);
    if (!rc)
        return;
    int ok = 1;
    for (int i = 0; i < N_TOK && ok; i++) {
        float *dst = i < N_HEAD            ? ref_head + (size_t)i * n
                     : i >= N_HEAD + N_MID ? ref_tail + (size_t)(i - N_HEAD - N_MID) * n
                                           : NULL;
        ok = parity_ref_decode(rc, tok + i, 1, i, dst, n) == 0;
    }
    CHECK(ok, "%s: reference decode failed", file);
    llama_free(rc);
    loom_session *s = loom_ctx(lm, LOOM_NUMERICS_CANONICAL, 0, LOOM_KV_Q8_0);
    if (!s || !ok) {
        loom_session_free(s);
        return;
    }
    loom_error err = {0};
    int rc1 = loom_session_eval(s, tok, N_HEAD, got, LOOM_LOGITS_ALL, &err);
    CHECK(rc1 == LOOM_OK, "%s: eval: %s", file, err.msg);
    int bad = compare_rows(file, "CANONICAL head", 0, ref_head, got, N_HEAD, n);
    rc1 = loom_session_eval(s, tok + N_HEAD, N_MID, NULL, LOOM_LOGITS_LAST, &err);
    rc1 |= loom_session_eval(s, tok + N_HEAD + N_MID, N_TAIL, got, LOOM_LOGITS_ALL, &err);
    CHECK(rc1 == LOOM_OK, "%s: eval: %s", file, err.msg);
    bad += compare_rows(file, "CANONICAL tail", N_HEAD + N_MID, ref_tail, got, N_TAIL, n);
    PARITY_CHECK_BITWISE(bad == 0, "%s: %d CANONICAL rows of Q8_0 K differ from the reference's one-token decodes",
                         file, bad);
    printf("%-26s CANONICAL (one token per reference decode), %d + %d rows up to position %d: %s\n", file, N_HEAD,
           N_TAIL, N_TOK - 1, bad ? "DIFFER" : "bitwise");
    loom_session_free(s);
}

/* The reference fed [0, N_HEAD), [N_HEAD, N_HEAD + N_MID) and the tail as three llama_decode calls (one
 * micro-batch each), against loom REFERENCE_BATCH with the same requests: all rows of the head and tail,
 * the middle's last row. */
static void run_batch(const char *file, loom_model *lm, struct llama_model *rm, int n, const int32_t *tok,
                      float *ref, float *got)
{
    struct llama_context *rc = ref_context(rm, 512);
    CHECK(rc != NULL, "%s: reference context with a Q8_0 K cache", file);
    if (!rc)
        return;
    loom_session *s = loom_ctx(lm, LOOM_NUMERICS_REFERENCE_BATCH, (int)llama_n_ubatch(rc), LOOM_KV_Q8_0);
    loom_error err = {0};
    int bad = 0, fail = 0;
    static const int lo[3] = {0, N_HEAD, N_HEAD + N_MID}, len[3] = {N_HEAD, N_MID, N_TAIL};
    for (int k = 0; k < 3 && s && !fail; k++) {
        int all = k != 1;
        fail |= parity_ref_decode(rc, tok + lo[k], len[k], lo[k], all ? ref : NULL, n) != 0;
        if (!all && !fail)
            memcpy(ref, llama_get_logits_ith(rc, -1), (size_t)n * sizeof(float));
        fail |= loom_session_eval(s, tok + lo[k], len[k], got, all ? LOOM_LOGITS_ALL : LOOM_LOGITS_LAST, &err) !=
                LOOM_OK;
        if (!fail)
            bad += compare_rows(file, "REFERENCE_BATCH", all ? lo[k] : lo[k] + len[k] - 1, ref, got, all ? len[k] : 1,
                                n);
    }
    CHECK(s && !fail, "%s: evaluation failed: %s", file, err.msg);
    PARITY_CHECK_BITWISE(bad == 0, "%s: %d REFERENCE_BATCH rows of Q8_0 K differ from the reference's batches", file,
                         bad);
    printf("%-26s REFERENCE_BATCH (batches of %d, %d, %d tokens), %d rows up to position %d: %s\n", file, N_HEAD,
           N_MID, N_TAIL, N_HEAD + 1 + N_TAIL, N_TOK - 1, bad ? "DIFFER" : "bitwise");
    loom_session_free(s);
    llama_free(rc);
}

/* The option's bookkeeping: state bytes, an effect on the logits, and state files refused across K types. */
static void run_state(const char *file, loom_model *lm, int n, const int32_t *tok, float *a, float *b,
                      const char *dir)
{
    loom_session *s8 = loom_ctx(lm, LOOM_NUMERICS_CANONICAL, 0, LOOM_KV_Q8_0);
    loom_session *s16 = loom_ctx(lm, LOOM_NUMERICS_CANONICAL, 0, LOOM_KV_F16);
    if (!s8 || !s16) {
        loom_session_free(s8);
        loom_session_free(s16);
        return;
    }
    CHECK(loom_session_k_type(s8) == LOOM_KV_Q8_0 && loom_session_k_type(s16) == LOOM_KV_F16, "k_type getters");
    uint64_t diff = loom_session_state_bytes(s16) - loom_session_state_bytes(s8);
    /* per position and K row of 32 values: 64 bytes in F16, 34 in Q8_0 */
    CHECK(diff > 0 && diff % ((uint64_t)N_CTX * 30) == 0, "%s: state bytes F16 K %llu, Q8_0 K %llu", file,
          (unsigned long long)loom_session_state_bytes(s16), (unsigned long long)loom_session_state_bytes(s8));
    loom_error err = {0};
    int rc = loom_session_eval(s8, tok, 40, a, LOOM_LOGITS_LAST, &err);
    rc |= loom_session_eval(s16, tok, 40, b, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK && row_diffs(a, b, n) > 0, "%s: Q8_0 K logits should differ from F16 K ones", file);
    char path[512];
    snprintf(path, sizeof path, "%s/q8.state", dir);
    CHECK(loom_session_save(s8, path, &err) == LOOM_OK, "save: %s", err.msg);
    loom_error e2 = {0};
    CHECK(loom_session_restore(s16, path, &e2) == LOOM_E_FORMAT && strstr(e2.msg, "K cache type q8_0") &&
              strstr(e2.msg, "this session's is f16"),
          "%s: restoring a Q8_0 K state into an F16 K session: '%s'", file, e2.msg);
    loom_session_reset(s8);
    CHECK(loom_session_restore(s8, path, &err) == LOOM_OK && loom_session_pos(s8) == 40, "restore: %s", err.msg);
    rc = loom_session_eval(s8, tok + 40, 1, a, LOOM_LOGITS_LAST, &err);
    rc |= loom_session_eval(s8, tok + 41, 1, b, LOOM_LOGITS_LAST, &err);
    loom_session *s8b = loom_ctx(lm, LOOM_NUMERICS_CANONICAL, 0, LOOM_KV_Q8_0);
    rc |= !s8b || loom_session_eval(s8b, tok, 42, a, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK && row_diffs(a, b, n) == 0, "%s: restored Q8_0 K state continues bitwise", file);
    unlink(path);
    loom_session_free(s8b);
    loom_session_free(s8);
    loom_session_free(s16);
}

int main(void)
{
    char cache[1024], path[1200], why[1024], dir[] = "/tmp/loom-parity-kq8-XXXXXX";
    static int32_t tok[N_TOK];
    int ref_ok = parity_ref_init() == 0;
    CHECK(ref_ok, "the reference engine is needed");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s failed", dir);
    if (!ref_ok)
        return test_finish();
    uint64_t st = TOK_SEED;
    for (int i = 0; i < N_TOK; i++)
        tok[i] = (int32_t)(parity_splitmix64(&st) % TOK_RANGE);
    parity_cache_dir(cache, sizeof cache);
    for (size_t m = 0; m < sizeof MODELS / sizeof MODELS[0]; m++) {
        if (!parity_model_selected(MODELS[m]))
            continue;
        snprintf(path, sizeof path, "%s/models/%s", cache, MODELS[m]);
        CHECK(access(path, R_OK) == 0, "model %s is missing (scripts/prepare-models.sh makes it)", path);
        loom_model *lm = NULL;
        struct llama_model *rm = NULL;
        int n = 0;
        const char *fail = parity_load_both(path, &lm, &rm, &n, why, sizeof why);
        CHECK(fail == NULL, "%s: %s", MODELS[m], fail ? fail : "");
        if (!fail) {
            float *ref_head = malloc((size_t)N_HEAD * n * sizeof(float));
            float *ref_tail = malloc((size_t)N_TAIL * n * sizeof(float));
            float *got = malloc((size_t)N_HEAD * n * sizeof(float));
            CHECK(ref_head && ref_tail && got, "out of memory");
            if (ref_head && ref_tail && got) {
                run_canonical(MODELS[m], lm, rm, n, tok, ref_head, ref_tail, got);
                run_batch(MODELS[m], lm, rm, n, tok, ref_head, got);
                run_state(MODELS[m], lm, n, tok, ref_head, got, dir);
            }
            free(ref_head);
            free(ref_tail);
            free(got);
        }
        parity_free_both(lm, rm);
        fflush(stdout);
    }
    rmdir(dir);
    llama_backend_free();
    return test_finish();
}
