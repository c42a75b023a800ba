/* bench_expert_cache.c — choosing the expert cache's eviction policy by measurement: records which experts every
 * layer's router picks for each decoded token of a MoE model (a stage hook at "route"), then replays that trace
 * against caches of several sizes under LRU (what loom uses), LFU (most needs since load, ties by recency) and
 * Belady's MIN (evicts the expert needed farthest ahead: the offline optimum, a bound no policy reaches), with a
 * step's own experts pinned as in loom. Prints the hit rate of each, and how concentrated the routing is.
 * usage: bench_expert_cache MODEL [N_TOKENS [BUDGET]]   (default 64 decoded tokens after a 16-token prompt; the
 * model is loaded with --mem-budget BUDGET, default 6G, so that any size of file can be traced) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "model/model.h"
#include "runtime/session.h"

#define N_PROMPT 16

struct trace {
    loom_session *s;
    int recording;  /* decode steps only */
    int k;
    int32_t *keys;  /* [n][k]: layer * n_expert + expert, one row per (token, layer) */
    int n, cap;
};

static int on_stage(void *ctx, int layer, const char *stage, float *x, int64_t n_values)
{
    (void)x, (void)n_values;
    struct trace *t = ctx;
    if (!t->recording || strcmp(stage, "route"))
        return 0;
    const struct loom_model *m = t->s->model;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 1024;
        int32_t *keys = realloc(t->keys, sizeof *keys * (size_t)cap * (size_t)t->k);
        if (!keys)
            return LOOM_E_NOMEM;
        t->keys = keys, t->cap = cap;
    }
    for (int j = 0; j < t->k; j++)
        t->keys[(size_t)t->n * t->k + j] = layer * (int32_t)m->hp.n_expert + t->s->sc.moe_ids[j];
    t->n++;
    return 0;
}

enum policy { LRU, LFU, MIN, N_POLICIES };
static const char *const policy_name[N_POLICIES] = {"LRU", "LFU", "MIN (optimal)"};

/* The slot to evict under policy p among the unpinned ones (-1: all pinned). */
static int victim(const int *slot_key, int slots, const char *pinned, enum policy p, const long *last,
                  const long *freq, const long *next_use)
{
    int v = -1;
    for (int c = 0; c < slots; c++) {
        int a = slot_key[c], b = v >= 0 ? slot_key[v] : -1;
        if (pinned[a])
            continue;
        if (b < 0 || (p == LRU ? last[a] < last[b]
                      : p == LFU ? freq[a] < freq[b] || (freq[a] == freq[b] && last[a] < last[b])
                                 : next_use[a] > next_use[b]))
            v = c;
    }
    return v;
}

/* Hit rate of replaying the trace through `slots` slots under policy p. next[i]: the index of the next need of
 * access i's expert (or n_access). */
static double replay(const struct trace *t, int n_keys, int slots, enum policy p, const int *next)
{
    int n_access = t->n * t->k, used = 0, hits = 0;
    int *slot_key = malloc(sizeof *slot_key * (size_t)slots), *where = malloc(sizeof *where * (size_t)n_keys);
    long *last = calloc((size_t)n_keys, sizeof *last), *freq = calloc((size_t)n_keys, sizeof *freq);
    long *next_use = calloc((size_t)n_keys, sizeof *next_use);
    char *pinned = calloc((size_t)n_keys, 1);
    if (!slot_key || !where || !last || !freq || !next_use || !pinned)
        return -1;
    for (int i = 0; i < n_keys; i++)
        where[i] = -1;
    for (int c = 0; c < slots; c++)
        slot_key[c] = -1;
    for (int row = 0; row < t->n; row++) {
        const int32_t *ids = t->keys + (size_t)row * t->k;
        for (int j = 0; j < t->k; j++)
            pinned[ids[j]] = 1;
        for (int j = 0; j < t->k; j++) {
            int key = ids[j], i = row * t->k + j;
            if (where[key] >= 0) {
                hits++;
            } else {
                int v = used < slots ? used++ : victim(slot_key, slots, pinned, p, last, freq, next_use);
                if (v < 0)
                    continue; /* every slot pinned: a step larger than the cache (not in these sizes) */
                if (slot_key[v] >= 0)
                    where[slot_key[v]] = -1;
                slot_key[v] = key, where[key] = v;
            }
            last[key] = i, freq[key]++, next_use[key] = next[i];
        }
        for (int j = 0; j < t->k; j++)
            pinned[ids[j]] = 0;
    }
    free(slot_key), free(where), free(last), free(freq), free(next_use), free(pinned);
    return (double)hits / n_access;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_expert_cache MODEL [N_TOKENS [BUDGET_BYTES]]\n");
        return 2;
    }
    int n_tokens = argc > 2 ? atoi(argv[2]) : 64;
    loom_model_params mp = {.mem_budget = argc > 3 ? strtoull(argv[3], NULL, 10) : (uint64_t)6 << 30};
    loom_error err = {0};
    loom_model *m = loom_model_load_ex(argv[1], &mp, &err);
    loom_session_params sp = {.n_ctx = N_PROMPT + n_tokens + 1, .n_threads = 2};
    loom_session *s = m ? loom_session_new(m, &sp, &err) : NULL;
    if (!s) {
        fprintf(stderr, "bench_expert_cache: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    struct trace t = {.s = s, .k = (int)m->hp.n_expert_used};
    s->hook = on_stage, s->hook_ctx = &t;
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        tok[i] = (int32_t)((i * 7919 + 101) % 150000);
    int nv = loom_model_n_logits(m), rc = loom_session_eval(s, tok, N_PROMPT, NULL, LOOM_LOGITS_LAST, &err);
    t.recording = 1;
    for (int i = 0; !rc && i < n_tokens; i++) {
        const float *l = loom_session_last_logits(s);
        int32_t best = 0;
        for (int v = 1; v < nv; v++)
            best = l[v] > l[best] ? v : best;
        rc = loom_session_eval(s, &best, 1, NULL, LOOM_LOGITS_LAST, &err);
    }
    if (rc) {
        fprintf(stderr, "bench_expert_cache: %s\n", err.msg);
        return 1;
    }
    int n_keys = (int)(m->hp.n_layer * m->hp.n_expert), n_access = t.n * t.k;
    int *next = malloc(sizeof *next * (size_t)n_access), *seen = malloc(sizeof *seen * (size_t)n_keys);
    long *count = calloc((size_t)n_keys, sizeof *count);
    for (int i = 0; i < n_keys; i++)
        seen[i] = n_access;
    for (int i = n_access - 1; i >= 0; i--) {
        next[i] = seen[t.keys[i]];
        seen[t.keys[i]] = i;
        count[t.keys[i]]++;
    }
    /* concentration: the share of needs that go to the most needed 10% of experts */
    long top = 0;
    for (int round = 0; round < n_keys / 10; round++) {
        int best = 0;
        for (int i = 1; i < n_keys; i++)
            best = count[i] > count[best] ? i : best;
        top += count[best], count[best] = -1;
    }
    printf("bench_expert_cache: %s: %d decoded tokens, %u layers x %u experts, %d needed per token; the most needed "
           "10%% of experts take %.1f%% of the needs\n", argv[1], n_tokens, m->hp.n_layer, m->hp.n_expert,
           (int)(m->hp.n_layer * m->hp.n_expert_used), 100.0 * (double)top / n_access);
    printf("| slots (share of all experts) | %-6s | %-6s | %-13s |\n| ---: | ---: | ---: | ---: |\n", policy_name[0],
           policy_name[1], policy_name[2]);
    static const double shares[] = {0.05, 0.10, 0.20, 0.30, 0.50};
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++) {
        int slots = (int)(shares[i] * n_keys);
        if (slots < t.k)
            continue;
        printf("| %d (%.0f%%) |", slots, 100 * shares[i]);
        for (int p = 0; p < N_POLICIES; p++)
            printf(" %.1f%% |", 100 * replay(&t, n_keys, slots, (enum policy)p, next));
        printf("\n");
    }
    free(next), free(seen), free(count), free(t.keys);
    loom_session_free(s);
    loom_model_free(m);
    return 0;
}
