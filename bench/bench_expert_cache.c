/* bench_expert_cache.c — choosing the expert cache's eviction policy by measurement: records which experts each
 * layer's step needs (a stage hook at "route": every token of the chunk, prefill and decode) over a conversation
 * of a MoE model (a prompt, decoded tokens, a follow-up prompt, decoded tokens), then replays that trace against
 * caches of several sizes, each step's own experts pinned as in loom, under: LRU; LFU (most needs since load,
 * ties by recency); LRU with scan-sized steps (prefill: more routed pairs than half a layer's experts) not
 * promoting what they read, the most recent of those reads evicted first; LFU with scan-sized steps not counted
 * and their reads ordered the same way (what loom uses); and Belady's MIN (evicts the expert needed farthest
 * ahead: the offline optimum, a bound no policy reaches). Prints hit rates for decode and prefill steps.
 * usage: bench_expert_cache MODEL [N_DECODE [BUDGET_BYTES]]   (default 64 tokens decoded after each of a 128- and
 * a 64-token prompt; the model is loaded with a memory budget, default 6 GiB, so any size of file can be traced) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "model/model.h"
#include "runtime/session.h"

struct trace {
    loom_session *s;
    int32_t *keys;  /* the needed experts of each step (layer * n_expert + expert, distinct within a step) */
    int *start;     /* [n_steps + 1] */
    char *scan;     /* [n_steps]: prefill-sized (its tokens route more pairs than half the layer's experts) */
    int n_steps, n_keys, cap_keys, cap_steps;
    char *seen;     /* [n_expert] scratch */
};

static int on_stage(void *ctx, int layer, const char *stage, float *x, int64_t n_values)
{
    (void)x;
    struct trace *t = ctx;
    if (strcmp(stage, "route"))
        return 0;
    const struct loom_model *m = t->s->model;
    int E = (int)m->hp.n_expert, k = (int)m->hp.n_expert_used, n = (int)(n_values / m->hp.n_embd);
    if (t->n_keys + n * k > t->cap_keys || t->n_steps + 2 > t->cap_steps) {
        t->cap_keys = 2 * (t->n_keys + n * k), t->cap_steps = 2 * (t->n_steps + 2);
        int32_t *keys = realloc(t->keys, sizeof *keys * (size_t)t->cap_keys);
        int *start = realloc(t->start, sizeof *start * (size_t)t->cap_steps);
        char *scan = realloc(t->scan, (size_t)t->cap_steps);
        if (!keys || !start || !scan)
            return LOOM_E_NOMEM;
        t->keys = keys, t->start = start, t->scan = scan;
    }
    memset(t->seen, 0, (size_t)E);
    t->start[t->n_steps] = t->n_keys;
    t->scan[t->n_steps] = 2 * n * k > E; /* as loom's FFN step tells its expert cache */
    for (int i = 0; i < n * k; i++) {
        int32_t e = t->s->sc.moe_ids[i];
        if (!t->seen[e])
            t->seen[e] = 1, t->keys[t->n_keys++] = layer * E + e;
    }
    t->start[++t->n_steps] = t->n_keys;
    return 0;
}

enum policy { LRU, LFU, LRU_SCAN, LFU_SCAN, MIN, N_POLICIES };
static const char *const policy_name[N_POLICIES] = {"LRU", "LFU", "LRU, scans not promoted", "LFU, scans not counted",
                                                     "MIN (optimal)"};

struct sim {
    int slots, used, scan;
    enum policy p;
    int *slot_key, *where;
    long *last, *freq, *next_use, clock, scan_clock;
    char *pinned;
};

/* The slot to evict among the unpinned ones (-1: all pinned). */
static int victim(const struct sim *s)
{
    int v = -1;
    for (int c = 0; c < s->slots; c++) {
        int a = s->slot_key[c], b = v >= 0 ? s->slot_key[v] : -1;
        if (s->pinned[a])
            continue;
        if (b < 0 || (s->p == LFU || s->p == LFU_SCAN
                          ? s->freq[a] < s->freq[b] || (s->freq[a] == s->freq[b] && s->last[a] < s->last[b])
                      : s->p == MIN ? s->next_use[a] > s->next_use[b]
                                    : s->last[a] < s->last[b]))
            v = c;
    }
    return v;
}

/* Replay the trace through `slots` slots under policy p; hits[0] / needs[0] of decode steps, [1] of scans. next[i]:
 * the index of the next need of access i's expert (or the number of accesses). */
static void replay(const struct trace *t, int n_keys, int slots, enum policy p, const int *next, long hits[2],
                   long needs[2])
{
    struct sim s = {.slots = slots, .p = p, .slot_key = malloc(sizeof(int) * (size_t)slots),
                    .where = malloc(sizeof(int) * (size_t)n_keys), .last = calloc((size_t)n_keys, sizeof(long)),
                    .freq = calloc((size_t)n_keys, sizeof(long)), .next_use = calloc((size_t)n_keys, sizeof(long)),
                    .pinned = calloc((size_t)n_keys, 1)};
    hits[0] = hits[1] = needs[0] = needs[1] = 0;
    if (!s.slot_key || !s.where || !s.last || !s.freq || !s.next_use || !s.pinned)
        return;
    for (int i = 0; i < n_keys; i++)
        s.where[i] = -1;
    for (int c = 0; c < slots; c++)
        s.slot_key[c] = -1;
    for (int st = 0; st < t->n_steps; st++) {
        int b = t->start[st], e = t->start[st + 1], scan = t->scan[st];
        for (int i = b; i < e; i++)
            s.pinned[t->keys[i]] = 1;
        for (int i = b; i < e; i++) {
            int key = t->keys[i], hit = s.where[key] >= 0;
            needs[scan]++, hits[scan] += hit;
            if (!hit) {
                int v = s.used < slots ? s.used++ : victim(&s);
                if (v < 0)
                    continue; /* every slot pinned: a step larger than the cache */
                if (s.slot_key[v] >= 0)
                    s.where[s.slot_key[v]] = -1;
                s.slot_key[v] = key, s.where[key] = v;
                s.last[key] = (p == LRU_SCAN || p == LFU_SCAN) && scan ? -++s.scan_clock : ++s.clock;
            } else if (!((p == LRU_SCAN || p == LFU_SCAN) && scan)) {
                s.last[key] = ++s.clock;
            }
            s.freq[key] += !(p == LFU_SCAN && scan);
            s.next_use[key] = next[i];
        }
        for (int i = b; i < e; i++)
            s.pinned[t->keys[i]] = 0;
    }
    free(s.slot_key), free(s.where), free(s.last), free(s.freq), free(s.next_use), free(s.pinned);
}

static int generate(loom_session *s, int n, loom_error *err)
{
    int nv = loom_model_n_logits(s->model), rc = 0;
    for (int i = 0; !rc && i < n; i++) {
        const float *l = loom_session_last_logits(s);
        int32_t best = 0;
        for (int v = 1; v < nv; v++)
            best = l[v] > l[best] ? v : best;
        rc = loom_session_eval(s, &best, 1, NULL, LOOM_LOGITS_LAST, err);
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_expert_cache MODEL [N_DECODE [BUDGET_BYTES]]\n");
        return 2;
    }
    int n_decode = argc > 2 ? atoi(argv[2]) : 64, n_p1 = 128, n_p2 = 64;
    loom_model_params mp = {.mem_budget = argc > 3 ? strtoull(argv[3], NULL, 10) : (uint64_t)6 << 30};
    loom_error err = {0};
    loom_model *m = loom_model_load_ex(argv[1], &mp, &err);
    loom_session_params sp = {.n_ctx = n_p1 + n_p2 + 2 * n_decode + 1, .n_threads = 2};
    loom_session *s = m ? loom_session_new(m, &sp, &err) : NULL;
    struct trace t = {.s = s, .seen = m ? malloc(m->hp.n_expert) : NULL};
    if (!s || !t.seen) {
        fprintf(stderr, "bench_expert_cache: %s: %s\n", argv[1], err.msg);
        return 1;
    }
    s->hook = on_stage, s->hook_ctx = &t;
    int32_t tok[128];
    for (int i = 0; i < n_p1; i++)
        tok[i] = (int32_t)((i * 7919 + 101) % 150000);
    int rc = loom_session_eval(s, tok, n_p1, NULL, LOOM_LOGITS_LAST, &err);
    if (!rc)
        rc = generate(s, n_decode, &err);
    if (!rc)
        rc = loom_session_eval(s, tok + 7, n_p2, NULL, LOOM_LOGITS_LAST, &err);
    if (!rc)
        rc = generate(s, n_decode, &err);
    if (rc) {
        fprintf(stderr, "bench_expert_cache: %s\n", err.msg);
        return 1;
    }
    int n_keys = (int)(m->hp.n_layer * m->hp.n_expert), n_access = t.n_keys;
    int *next = malloc(sizeof *next * (size_t)n_access), *seen = malloc(sizeof *seen * (size_t)n_keys);
    long *count = calloc((size_t)n_keys, sizeof *count), decode_needs = 0, top = 0;
    for (int i = 0; i < n_keys; i++)
        seen[i] = n_access;
    for (int i = n_access - 1; i >= 0; i--)
        next[i] = seen[t.keys[i]], seen[t.keys[i]] = i;
    for (int st = 0; st < t.n_steps; st++) /* routing concentration, over decode steps */
        if (!t.scan[st])
            for (int i = t.start[st]; i < t.start[st + 1]; i++)
                count[t.keys[i]]++, decode_needs++;
    for (int round = 0; round < n_keys / 10; round++) {
        int best = 0;
        for (int i = 1; i < n_keys; i++)
            best = count[i] > count[best] ? i : best;
        top += count[best], count[best] = -1;
    }
    printf("bench_expert_cache: %s: prompt %d, %d decoded, prompt %d, %d decoded; %u layers x %u experts, %u used; "
           "in decode steps the most needed 10%% of experts take %.1f%% of the needs\n", argv[1], n_p1, n_decode,
           n_p2, n_decode, m->hp.n_layer, m->hp.n_expert, m->hp.n_expert_used,
           decode_needs ? 100.0 * (double)top / (double)decode_needs : 0.0);
    printf("hit rate, decode steps / prefill steps:\n| slots (share of all experts) |");
    for (int p = 0; p < N_POLICIES; p++)
        printf(" %s |", policy_name[p]);
    printf("\n| ---: | ---: | ---: | ---: | ---: | ---: |\n");
    static const double shares[] = {0.05, 0.10, 0.20, 0.30, 0.50};
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++) {
        int slots = (int)(shares[i] * n_keys);
        if (slots < (int)m->hp.n_expert)
            continue; /* a prefill step needs nearly a layer's experts at once */
        printf("| %d (%.0f%%) |", slots, 100 * shares[i]);
        for (int p = 0; p < N_POLICIES; p++) {
            long hits[2], needs[2];
            replay(&t, n_keys, slots, (enum policy)p, next, hits, needs);
            printf(" %.1f%% / %.1f%% |", needs[0] ? 100.0 * hits[0] / needs[0] : 0.0,
                   needs[1] ? 100.0 * hits[1] / needs[1] : 0.0);
        }
        printf("\n");
    }
    free(next), free(seen), free(count), free(t.keys), free(t.start), free(t.scan), free(t.seen);
    loom_session_free(s);
    loom_model_free(m);
    return 0;
}
