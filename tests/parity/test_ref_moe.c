/* test_ref_moe.c — loom's synthetic qwen35moe models under the reference engine: it loads the cached tiny-moe
 * F32 and F16 models (scripts/prepare-models.sh), evaluates a prompt with finite logits, and loom admits the
 * same files (loom_model_load; the preset's 8 experts, 2 used per token, as the reference reads them). It also measures
 * the router statistics the README reports ("Synthetic MoE models"): per layer the selections' expert popularity
 * and the token-to-token overlap of the selected sets, read from the reference's ffn_moe_topk tensors
 * (cb_eval). LOOM_MOE_FILES (comma-separated paths) measures other files instead (e.g. a skewed-router or
 * moe-mid file), without the tiny-moe expectations. */
#include <math.h>

#include "parity.h"
#include "test.h"

#define N_TOKENS 128
#define MAX_LAYERS 64
#define MAX_EXPERTS 1024
#define MAX_USED 16

/* The selected experts of every layer and token, captured from ffn_moe_topk-IL ([n_used, n_tokens] I32). */
struct routing {
    int n_layer, n_used;
    int32_t sel[MAX_LAYERS][N_TOKENS][MAX_USED];
    int seen[MAX_LAYERS];
};

static bool capture_topk(struct ggml_tensor *t, bool ask, void *user)
{
    struct routing *r = user;
    int il;
    if (sscanf(t->name, "ffn_moe_topk-%d", &il) != 1 || il < 0 || il >= MAX_LAYERS)
        return ask ? false : true;
    if (ask)
        return true;
    int n_used = (int)t->ne[0], n_tok = (int)t->ne[1];
    if (t->type != GGML_TYPE_I32 || n_used > MAX_USED || n_tok > N_TOKENS)
        return true;
    for (int k = 0; k < n_tok; k++)
        memcpy(r->sel[il][k], (const char *)t->data + (size_t)k * t->nb[1], (size_t)n_used * sizeof(int32_t));
    r->n_used = n_used;
    r->seen[il] = 1;
    if (il + 1 > r->n_layer)
        r->n_layer = il + 1;
    return true;
}

/* Per layer: the share of selections the most popular expert and the most popular eighth of the experts take,
 * the popularity entropy over ln(n_expert), and the mean |S_t ∩ S_t-1| / n_used (random choice: n_used /
 * n_expert). Averages over layers into out[4]. */
static void router_stats(const struct routing *r, int n_expert, double out[4])
{
    memset(out, 0, 4 * sizeof(double));
    int n_layers = 0;
    for (int il = 0; il < r->n_layer; il++) {
        if (!r->seen[il])
            continue;
        static int count[MAX_EXPERTS];
        memset(count, 0, sizeof count);
        double overlap = 0, total = (double)N_TOKENS * r->n_used;
        for (int t = 0; t < N_TOKENS; t++)
            for (int k = 0; k < r->n_used; k++) {
                int e = r->sel[il][t][k];
                count[e >= 0 && e < n_expert ? e : 0]++;
                for (int j = 0; t > 0 && j < r->n_used; j++)
                    overlap += r->sel[il][t - 1][j] == e;
            }
        for (int i = 1; i < n_expert; i++) /* sort counts descending (insertion: n_expert is small) */
            for (int j = i; j > 0 && count[j] > count[j - 1]; j--) {
                int tmp = count[j];
                count[j] = count[j - 1];
                count[j - 1] = tmp;
            }
        double top8 = 0, h = 0;
        for (int i = 0; i < (n_expert + 7) / 8; i++)
            top8 += count[i];
        for (int i = 0; i < n_expert; i++)
            if (count[i])
                h -= count[i] / total * log(count[i] / total);
        out[0] += count[0] / total;
        out[1] += top8 / total;
        out[2] += h / log((double)n_expert);
        out[3] += overlap / ((N_TOKENS - 1.0) * r->n_used);
        n_layers++;
    }
    for (int i = 0; i < 4 && n_layers; i++)
        out[i] /= n_layers;
}

/* Deterministic prompt tokens: real (non-padding) vocabulary ids from an LCG. */
static void prompt_tokens(int32_t *tok, int n_vocab)
{
    uint64_t x = 12345;
    for (int i = 0; i < N_TOKENS; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tok[i] = (int32_t)((x >> 33) % (uint64_t)(n_vocab < 150000 ? n_vocab : 150000));
    }
}

/* Run one file through the reference; expect_tiny: also check loom's view of it against the tiny-moe preset. */
static void run_file(const char *path, int expect_tiny)
{
    printf("%s\n", path);
    struct llama_model *model = parity_ref_load(path, 1);
    CHECK(model != NULL, "reference refuses %s", path);
    if (!model)
        return;
    static struct routing r;
    memset(&r, 0, sizeof r);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 2 * N_TOKENS;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.cb_eval = capture_topk;
    cp.cb_eval_user_data = &r;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    CHECK(ctx != NULL, "reference context for %s", path);
    int n_vocab = parity_ref_n_vocab(model);
    int32_t tok[N_TOKENS];
    prompt_tokens(tok, n_vocab);
    float *logits = malloc((size_t)N_TOKENS * n_vocab * sizeof(float));
    int rc = ctx && logits ? parity_ref_decode(ctx, tok, N_TOKENS, 0, logits, n_vocab) : -1;
    CHECK(rc == 0, "reference decode of %s: %d", path, rc);
    size_t bad = 0;
    for (size_t i = 0; rc == 0 && i < (size_t)N_TOKENS * n_vocab; i++)
        bad += !isfinite(logits[i]);
    CHECK(rc == 0 && bad == 0, "%zu non-finite logits from %s", bad, path);
    char arch[64], key[96], val[32];
    llama_model_meta_val_str(model, "general.architecture", arch, sizeof arch);
    snprintf(key, sizeof key, "%s.expert_count", arch);
    int n_expert = llama_model_meta_val_str(model, key, val, sizeof val) > 0 ? atoi(val) : 0;
    CHECK(n_expert > 0 && n_expert <= MAX_EXPERTS, "%s: %d, expected 1..%d", key, n_expert, MAX_EXPERTS);
    CHECK(r.n_layer == llama_model_n_layer(model) && r.n_used > 0, "routing captured for %d layers, expected %d",
          r.n_layer, llama_model_n_layer(model));
    double st[4];
    router_stats(&r, n_expert > 0 && n_expert <= MAX_EXPERTS ? n_expert : 1, st);
    printf("  router over %d tokens, %d of %d experts: top expert %.3f of selections, top eighth %.3f, entropy "
           "%.3f of max, consecutive-token overlap %.3f (random choice %.3f)\n",
           N_TOKENS, r.n_used, n_expert, st[0], st[1], st[2], st[3], (double)r.n_used / n_expert);
    if (expect_tiny) {
        loom_error err = {0};
        loom_model *lm = loom_model_load(path, &err);
        CHECK(lm != NULL, "loom refuses %s: %s", path, err.msg);
        loom_model_free(lm);
        CHECK(n_expert == 8 && r.n_used == 2, "tiny-moe: %d experts, %d used, expected 8 and 2", n_expert, r.n_used);
    }
    free(logits);
    if (ctx)
        llama_free(ctx);
    llama_model_free(model);
}

int main(void)
{
    if (parity_ref_init())
        return 1;
    const char *files = getenv("LOOM_MOE_FILES");
    if (files && *files) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", files);
        for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save))
            run_file(f, 0);
        return test_finish();
    }
    char cache[1000], path[1200];
    parity_cache_dir(cache, sizeof cache);
    static const char *const models[] = {"qwen35moe-tiny-F32.gguf", "qwen35moe-tiny-F16.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        snprintf(path, sizeof path, "%s/models/%s", cache, models[i]);
        if (parity_model_selected(models[i]))
            run_file(path, 1);
    }
    return test_finish();
}
