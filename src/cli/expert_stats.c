/* expert_stats.c — `--stats`: the expert cache's figures of a model that streams its experts (--mem-budget), per
 * run and, where the command traces them (run), per token: as text and as one JSON line for tools. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "loom.h"

int loom_cli_expert_trace_init(struct loom_cli_expert_trace *t, const loom_model *m,
                               const struct loom_cli_model_opts *mo, int n_decode, loom_error *err)
{
    loom_expert_stats first;
    *t = (struct loom_cli_expert_trace){0};
    if (!mo->stats || loom_model_expert_stats(m, &first) != LOOM_OK)
        return LOOM_OK;
    t->cap = (n_decode > 0 ? n_decode : 0) + 2; /* the start, the prompt, each decoded token */
    t->at = malloc(sizeof *t->at * (size_t)t->cap);
    if (!t->at)
        return loom_errorf(err, LOOM_E_NOMEM, "--stats: allocating %d records of the expert cache failed", t->cap);
    t->m = m;
    t->at[t->n++] = first;
    return LOOM_OK;
}

void loom_cli_expert_trace_add(struct loom_cli_expert_trace *t)
{
    if (t->at && t->n < t->cap)
        loom_model_expert_stats(t->m, &t->at[t->n++]);
}

/* What token i of the trace (0: the prompt) did: the difference of two records. */
static loom_expert_stats token(const struct loom_cli_expert_trace *t, int i)
{
    const loom_expert_stats *a = &t->at[i], *b = &t->at[i + 1];
    return (loom_expert_stats){.hits = b->hits - a->hits, .misses = b->misses - a->misses,
                               .prefetches = b->prefetches - a->prefetches,
                               .prefetch_hits = b->prefetch_hits - a->prefetch_hits, .warms = b->warms - a->warms,
                               .warm_hits = b->warm_hits - a->warm_hits, .bytes_read = b->bytes_read - a->bytes_read,
                               .wait_ns = b->wait_ns - a->wait_ns};
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* v[n] sorted, its q-quantile (nearest rank). */
static double quantile(const double *v, int n, double q)
{
    int r = (int)(q * n + 0.999999);
    return v[r < 1 ? 0 : r > n ? n - 1 : r - 1];
}

/* Decoded tokens' exposed I/O wait and bytes read, as quantiles. */
static void trace_text(const char *cmd, const struct loom_cli_expert_trace *t)
{
    int n = t->n - 2; /* decoded tokens */
    double *wait = n > 0 ? malloc(sizeof *wait * 2 * (size_t)n) : NULL, *mib = wait ? wait + n : NULL, mb = 1048576.0;
    if (t->n >= 2) {
        loom_expert_stats p = token(t, 0);
        fprintf(stderr, "loom %s: experts: the prompt read %.1f MiB (%llu of %llu needed held), exposed I/O wait %.1f "
                "ms\n", cmd, (double)p.bytes_read / mb, (unsigned long long)p.hits,
                (unsigned long long)(p.hits + p.misses), (double)p.wait_ns / 1e6);
    }
    if (!wait)
        return;
    for (int i = 0; i < n; i++) {
        loom_expert_stats d = token(t, i + 1);
        wait[i] = (double)d.wait_ns / 1e6, mib[i] = (double)d.bytes_read / mb;
    }
    qsort(wait, (size_t)n, sizeof *wait, cmp_double);
    qsort(mib, (size_t)n, sizeof *mib, cmp_double);
    fprintf(stderr, "loom %s: experts per decoded token (%d): exposed I/O wait p50 %.2f ms, p95 %.2f, max %.2f; "
            "read p50 %.2f MiB, p95 %.2f, max %.2f\n", cmd, n, quantile(wait, n, 0.5), quantile(wait, n, 0.95),
            wait[n - 1], quantile(mib, n, 0.5), quantile(mib, n, 0.95), mib[n - 1]);
    free(wait);
}

static void trace_json(const struct loom_cli_expert_trace *t)
{
    for (int i = 0; i + 1 < t->n; i++) {
        loom_expert_stats d = token(t, i);
        fprintf(stderr, "%s{\"hits\":%llu,\"misses\":%llu,\"prefetches\":%llu,\"prefetch_hits\":%llu,\"warms\":%llu,"
                "\"warm_hits\":%llu,\"bytes_read\":%llu,\"wait_ns\":%llu}%s",
                i == 0 ? ",\"prompt\":" : i == 1 ? ",\"per_token\":[" : ",", (unsigned long long)d.hits,
                (unsigned long long)d.misses, (unsigned long long)d.prefetches, (unsigned long long)d.prefetch_hits,
                (unsigned long long)d.warms, (unsigned long long)d.warm_hits, (unsigned long long)d.bytes_read,
                (unsigned long long)d.wait_ns, i >= 1 && i + 2 == t->n ? "]" : "");
    }
}

static double pct(uint64_t part, uint64_t whole) { return whole ? 100.0 * (double)part / (double)whole : 0.0; }

/* The cache's figures as text: the budget's parts, steps, reads, latency, reads ahead. */
static void text_lines(const char *cmd, const loom_expert_stats *stp, int n_tokens, const char *unused)
{
    loom_expert_stats st = *stp;
    double tok = n_tokens > 0 ? n_tokens : 1, mb = 1048576.0;
    const char *per = n_tokens > 0 ? "per token" : "in all";
    double bw = st.busy_ns ? (double)st.bytes_read / (double)st.busy_ns : 0; /* bytes per ns = GB/s */
    uint64_t needed = st.hits + st.misses;
    fprintf(stderr,
            "loom %s: experts: budget %.0f MiB = dense %.0f + sessions %.0f + reserve %.0f + %d slots of %.2f MiB "
            "(%d used)%s; reads %s%s\n"
            "loom %s: experts: %llu steps, %llu needed, hit rate %.1f%%, %.2f MiB read %s (%.1f MiB in all, "
            "%llu reads, %llu failed; tokens %d); exposed I/O wait %.2f ms %s; latency p50 %.0f us, p95 %.0f us, "
            "p99 %.0f us; read bandwidth %.2f GB/s while busy\n"
            "loom %s: experts read ahead: on predictions %llu, %.1f%% of them needed (%llu stale, %llu of those "
            "cancelled); from history %llu, %.1f%% of them needed; %.1f MiB wasted\n",
            cmd, (double)st.budget_bytes / mb, (double)st.dense_bytes / mb, (double)st.session_bytes / mb,
            (double)LOOM_MEM_RESERVE / mb, st.n_slots, (double)st.slot_bytes / mb, st.n_slots_used, unused,
            st.io_uring ? "io_uring" : "pread", st.direct_io ? " O_DIRECT" : " buffered (pages dropped)", cmd,
            (unsigned long long)st.steps, (unsigned long long)needed, pct(st.hits, needed),
            (double)st.bytes_read / mb / tok, per, (double)st.bytes_read / mb, (unsigned long long)st.reads,
            (unsigned long long)st.read_errors, n_tokens, (double)st.wait_ns / 1e6 / tok, per, st.latency_p50_us,
            st.latency_p95_us, st.latency_p99_us, bw, cmd, (unsigned long long)st.prefetches,
            pct(st.prefetch_hits, st.prefetches), (unsigned long long)st.prefetch_stale,
            (unsigned long long)st.prefetch_cancelled, (unsigned long long)st.warms, pct(st.warm_hits, st.warms),
            (double)st.bytes_wasted / mb);
}

void loom_cli_expert_stats(const char *cmd, const loom_model *m, const struct loom_cli_model_opts *mo, int n_tokens,
                           const struct loom_cli_expert_trace *trace)
{
    loom_expert_stats st;
    if (!mo->stats || loom_model_expert_stats(m, &st) != LOOM_OK) /* --stats comes with a budget: a cache */
        return;
    double mb = 1048576.0;
    double rest = (double)st.budget_bytes - (double)st.dense_bytes - (double)st.session_bytes -
                  (double)LOOM_MEM_RESERVE - (double)st.n_slots * (double)st.slot_bytes;
    char unused[64] = "";
    if (rest >= (double)st.slot_bytes) /* more than every expert of the file needs */
        snprintf(unused, sizeof unused, " + %.0f MiB unused (a slot for every expert)", rest / mb);
    if (st.slot_bytes == 0) /* a dense model: nothing streams, the text has nothing more to say */
        fprintf(stderr, "loom %s: experts: none to stream (a dense model): budget %.0f MiB = dense %.0f + sessions %.0f "
                "+ reserve %.0f + %.0f MiB unused\n", cmd, (double)st.budget_bytes / mb, (double)st.dense_bytes / mb,
                (double)st.session_bytes / mb, (double)LOOM_MEM_RESERVE / mb, rest / mb);
    else {
        text_lines(cmd, &st, n_tokens, unused);
        if (trace && trace->at)
            trace_text(cmd, trace);
    }
    fprintf(stderr,
            "{\"expert_stats\":{\"tokens\":%d,\"budget_bytes\":%llu,\"dense_bytes\":%llu,\"session_bytes\":%llu,"
            "\"slot_bytes\":%llu,\"slots\":%d,\"slots_used\":%d,\"io_uring\":%s,\"direct_io\":%s,\"steps\":%llu,"
            "\"hits\":%llu,\"misses\":%llu,\"prefetches\":%llu,\"prefetch_hits\":%llu,\"prefetch_stale\":%llu,"
            "\"prefetch_cancelled\":%llu,\"warms\":%llu,\"warm_hits\":%llu,\"reads\":%llu,\"bytes_read\":%llu,"
            "\"bytes_prefetched\":%llu,\"bytes_warmed\":%llu,\"bytes_wasted\":%llu,\"read_errors\":%llu,"
            "\"wait_ns\":%llu,\"busy_ns\":%llu,\"latency_p50_us\":%.1f,\"latency_p95_us\":%.1f,"
            "\"latency_p99_us\":%.1f",
            n_tokens, (unsigned long long)st.budget_bytes, (unsigned long long)st.dense_bytes,
            (unsigned long long)st.session_bytes, (unsigned long long)st.slot_bytes, st.n_slots, st.n_slots_used,
            st.io_uring ? "true" : "false", st.direct_io ? "true" : "false", (unsigned long long)st.steps,
            (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.prefetches,
            (unsigned long long)st.prefetch_hits, (unsigned long long)st.prefetch_stale,
            (unsigned long long)st.prefetch_cancelled, (unsigned long long)st.warms, (unsigned long long)st.warm_hits,
            (unsigned long long)st.reads, (unsigned long long)st.bytes_read, (unsigned long long)st.bytes_prefetched,
            (unsigned long long)st.bytes_warmed, (unsigned long long)st.bytes_wasted,
            (unsigned long long)st.read_errors, (unsigned long long)st.wait_ns, (unsigned long long)st.busy_ns,
            st.latency_p50_us, st.latency_p95_us, st.latency_p99_us);
    if (trace && trace->at)
        trace_json(trace);
    fprintf(stderr, "}}\n");
}
