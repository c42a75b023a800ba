/* test_parity_converted.c — loom on GGUF files made by llama.cpp's own converter (convert_hf_to_gguf.py) from
 * small synthetic Hugging Face checkpoints of Qwen3.5, dense and MoE (tools/hf/qwen35_hf.py writes them;
 * scripts/prepare-models.sh converts each variant once into $LOOM_CACHE/models/hf-qwen35-VARIANT.gguf). For
 * each file: loom loads it; its tokenizer encodes a few texts exactly as the reference's does (user text and
 * special-token spellings); and loom's logits for N_TOK teacher-forced tokens are bitwise the reference's, in
 * REFERENCE_BATCH numerics (all rows in one call, at the reference's default n_ubatch and at 7) and in
 * CANONICAL numerics (one call, and three calls) against the reference token by token; the reference's top-1
 * ids vary along the steps (the weights are well-conditioned). A missing file fails (scripts/prepare-models.sh
 * converts them; scripts/setup.sh installs the python3-torch the converter needs); LOOM_PARITY_MODELS restricts the
 * list. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "parity.h"
#include "test.h"

enum { N_TOK = 80, N_CTX = 256, N_THREADS = 1 };

/* The variants of tools/hf/qwen35_hf.py (its `list` says what each covers). */
static const char *const MODELS[] = {
    "hf-qwen35-dense-tied.gguf",
    "hf-qwen35-dense-untied.gguf",
    "hf-qwen35-dense-mtp.gguf",
    "hf-qwen35-dense-interval2.gguf",
    "hf-qwen35-dense-qkvz.gguf",
    "hf-qwen35-dense-q8_0.gguf",
    /* converter --fuse-qkv: attention layers carry one attn_qkv.weight instead of attn_q/attn_k/attn_v */
    "hf-qwen35-dense-fuse-qkv.gguf",
    "hf-qwen35-dense-irregular.gguf",
    "hf-qwen35-moe.gguf",
    "hf-qwen35-moe-fused.gguf",
    "hf-qwen35-moe-fuse-qkv.gguf", /* --fuse-qkv on the MoE model, Q8_0 */
};

/* Texts both tokenizers encode; the last ones spell special tokens (parse_special on / LOOM_SPECIAL_ALL). */
static const char *const TEXTS[] = {
    "The quick brown fox jumps over the lazy dog.",
    "We've checked that it's there; they'll see 3.14 and 2048 tests.\n\n  def main():\n    return 0\n",
    "Ünïcödé, 日本語 and emoji \xf0\x9f\xa6\x99 are bytes here",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
};
enum { N_TEXTS = sizeof TEXTS / sizeof TEXTS[0], N_SPECIAL_FROM = 3 };

#define TOK_SEED 0xC0DE2B1Full

struct model {
    const char *name;
    loom_model *lm;
    struct llama_model *rm;
    int n;                /* logits per row */
    int32_t tok[N_TOK];
    float *ref_tbt;       /* [N_TOK][n]: the reference token by token */
};

/* Both tokenizers on TEXTS; the ids of the first text then seed m->tok, the rest drawn over the vocabulary. */
static void check_tokenizer(struct model *m)
{
    const loom_tokenizer *lt = loom_model_tokenizer(m->lm);
    const struct llama_vocab *rv = llama_model_get_vocab(m->rm);
    int same = 0;
    for (int i = 0; i < N_TEXTS; i++) {
        int32_t a[256], b[256];
        loom_error err = {0};
        int special = i >= N_SPECIAL_FROM;
        int na = loom_tokenizer_encode(lt, TEXTS[i], strlen(TEXTS[i]), special ? LOOM_SPECIAL_ALL : LOOM_SPECIAL_DATA,
                                       a, 256, &err);
        int nb = llama_tokenize(rv, TEXTS[i], (int32_t)strlen(TEXTS[i]), b, 256, false, special);
        int eq = na == nb && na > 0 && na <= 256 && memcmp(a, b, (size_t)na * sizeof(int32_t)) == 0;
        same += eq;
        CHECK(eq, "%s: text %d: loom %d ids, reference %d ids (%s)", m->name, i, na, nb, err.msg);
        if (i == 0 && eq)
            memcpy(m->tok, a, (size_t)(na < N_TOK ? na : N_TOK) * sizeof(int32_t));
    }
    printf("%-32s tokenizer: %d/%d texts encoded as the reference does\n", m->name, same, N_TEXTS);
    uint64_t st = TOK_SEED;
    for (int i = 12; i < N_TOK; i++) /* the first text is longer than 12 ids */
        m->tok[i] = (int32_t)(parity_splitmix64(&st) % (uint64_t)m->n);
}

static loom_session *session(const loom_model *lm, enum loom_numerics numerics, int n_ubatch)
{
    loom_error err = {0};
    loom_session_params sp = {.n_ctx = N_CTX, .n_threads = N_THREADS, .numerics = numerics, .n_ubatch = n_ubatch,
                              .skip_prompt_checkpoints = 1};
    loom_session *s = loom_session_new(lm, &sp, &err);
    CHECK(s != NULL, "loom session: %s", err.msg);
    return s;
}

static void report(const struct model *m, const char *what, const float *ref, const float *got)
{
    struct parity_summary s;
    parity_compare_steps(ref, got, N_TOK, (size_t)m->n, m->n, 0, &s);
    printf("%-32s %-40s %3d/%d rows bitwise (top1 %d/%d, max abs diff %.3e)\n", m->name, what, s.bitwise, N_TOK,
           s.top1_agree, N_TOK, s.max_abs);
    PARITY_CHECK_BITWISE(s.bitwise == N_TOK, "%s: %s: %d of %d rows differ (max abs diff %.3e)", m->name, what,
                         N_TOK - s.bitwise, N_TOK, s.max_abs);
}

/* REFERENCE_BATCH: every row of the N_TOK tokens in one call, both engines at micro-batch n_ubatch. */
static void check_reference_batch(struct model *m, int n_ubatch, float *ref, float *got)
{
    struct llama_context *rc = parity_ref_context_split(m->rm, N_CTX, N_CTX, n_ubatch, N_THREADS);
    loom_session *s = session(m->lm, LOOM_NUMERICS_REFERENCE_BATCH, rc ? (int)llama_n_ubatch(rc) : 0);
    loom_error err = {0};
    int rr = rc ? parity_ref_decode(rc, m->tok, N_TOK, 0, ref, m->n) : -1;
    int rl = s ? loom_session_eval(s, m->tok, N_TOK, got, LOOM_LOGITS_ALL, &err) : -1;
    CHECK(rr == 0 && rl == LOOM_OK, "%s: n_ubatch %d: reference %d, loom %d (%s)", m->name, n_ubatch, rr, rl,
          err.msg);
    if (rr == 0 && rl == LOOM_OK) {
        char what[64];
        snprintf(what, sizeof what, "reference-batch, one call, n_ubatch %d", rc ? (int)llama_n_ubatch(rc) : 0);
        report(m, what, ref, got);
    }
    loom_session_free(s);
    if (rc)
        llama_free(rc);
}

/* CANONICAL: the N_TOK tokens in calls of calls[] tokens, against the reference token by token. */
static void check_canonical(struct model *m, const int *calls, int n_calls, const char *what, float *got)
{
    loom_session *s = session(m->lm, LOOM_NUMERICS_CANONICAL, 0);
    loom_error err = {0};
    int pos = 0, rc = s ? LOOM_OK : -1;
    for (int i = 0; i < n_calls && rc == LOOM_OK; pos += calls[i++])
        rc = loom_session_eval(s, m->tok + pos, calls[i], got + (size_t)pos * m->n, LOOM_LOGITS_ALL, &err);
    CHECK(rc == LOOM_OK && pos == N_TOK, "%s: %s: %s", m->name, what, err.msg);
    if (rc == LOOM_OK)
        report(m, what, m->ref_tbt, got);
    loom_session_free(s);
}

static void run_model(struct model *m)
{
    static const int one[] = {N_TOK}, three[] = {37, 1, N_TOK - 38};
    size_t rows = (size_t)N_TOK * (size_t)m->n;
    float *ref = malloc(rows * sizeof(float)), *got = malloc(rows * sizeof(float));
    m->ref_tbt = malloc(rows * sizeof(float));
    CHECK(ref && got && m->ref_tbt, "out of memory");
    if (ref && got && m->ref_tbt) {
        check_tokenizer(m);
        check_reference_batch(m, 512, ref, got);
        check_reference_batch(m, 7, ref, got);
        struct llama_context *rc = parity_ref_context_split(m->rm, N_CTX, N_CTX, 0, N_THREADS);
        int r = rc ? 0 : -1;
        for (int i = 0; i < N_TOK && r == 0; i++)
            r = parity_ref_decode(rc, m->tok + i, 1, i, m->ref_tbt + (size_t)i * m->n, m->n);
        CHECK(r == 0, "%s: reference token-by-token decode failed (%d)", m->name, r);
        if (rc)
            llama_free(rc);
        if (r == 0) { /* a well-conditioned model: its greedy choices vary along the forced tokens */
            int distinct = 0;
            for (int i = 0; i < N_TOK; i++) {
                int top = parity_argmax(m->ref_tbt + (size_t)i * m->n, m->n), seen = 0;
                for (int j = 0; j < i && !seen; j++)
                    seen = parity_argmax(m->ref_tbt + (size_t)j * m->n, m->n) == top;
                distinct += !seen;
            }
            printf("%-32s reference top-1: %d distinct ids over %d steps\n", m->name, distinct, N_TOK);
            CHECK(distinct >= N_TOK / 8, "%s: only %d distinct top-1 ids over %d steps", m->name, distinct, N_TOK);

            check_canonical(m, one, 1, "canonical, one call, vs ref token by token", got);
            check_canonical(m, three, 3, "canonical, 37+1+42, vs ref token by token", got);
        }
    }
    free(ref);
    free(got);
    free(m->ref_tbt);
}

/* Both engines on the file; returns 1 when both loaded it. */
static int compare_file(const char *name, const char *path)
{
    struct model m = {.name = name};
    char why[sizeof(loom_error) + 64];
    const char *bad = parity_load_both(path, &m.lm, &m.rm, &m.n, why, sizeof why);
    CHECK(!bad, "%s: %s", name, bad);
    if (!bad)
        run_model(&m);
    parity_free_both(m.lm, m.rm);
    fflush(stdout);
    return !bad;
}

int main(void)
{
    char cache[1024], path[1200];
    int ref_ok = parity_ref_init() == 0;
    CHECK(ref_ok, "the reference engine is needed");
    if (!ref_ok)
        return test_finish();
    parity_cache_dir(cache, sizeof cache);
    int ran = 0, n = 0;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++) {
        if (!parity_model_selected(MODELS[i]))
            continue;
        snprintf(path, sizeof path, "%s/models/%s", cache, MODELS[i]);
        if (access(path, R_OK) != 0)
            CHECK(0, "%s is missing (scripts/prepare-models.sh converts it with the reference's converter, which "
                     "needs python3-torch: scripts/setup.sh installs it)", path);
        else {
            ran += compare_file(MODELS[i], path);
            n++;
        }
    }
    printf("%d of %d converted model(s) compared\n", ran, n);
    llama_backend_free();
    return test_finish();
}
