/* bench_prompt_cache.c — the prompt cache on a restored conversation: a session evaluates an N-token
 * conversation and saves it; a fresh session restores the file and loom_session_prefill_cached brings it to
 * the conversation plus one new token. Prints the tokens reused and the time against one decode step and a
 * full prefill of N + 1 tokens (best of REPS each).
 * usage: bench_prompt_cache [MODEL [N [THREADS]]]   (default: the default model, 1500 tokens, 2 threads) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "loom.h"

#define REPS 3

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds for: restore `state` into s, then prefill_cached tokens[n]; *reused from the last run. */
static double time_restored(loom_session *s, const char *state, const int32_t *tokens, int n, int *reused,
                            loom_error *err)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        if (loom_session_restore(s, state, err) != LOOM_OK)
            return -1;
        double t0 = now();
        *reused = loom_session_prefill_cached(s, tokens, n, NULL, err);
        double t = now() - t0;
        if (*reused < 0)
            return -1;
        best = t < best ? t : best;
    }
    return best;
}

/* Seconds for a fresh prefill of tokens[n] (from_scratch) or one decode step after tokens[n - 1]. */
static double time_eval(loom_session *s, const int32_t *tokens, int n, int from_scratch, loom_error *err)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        loom_session_reset(s);
        if (!from_scratch && loom_session_eval(s, tokens, n - 1, NULL, LOOM_LOGITS_LAST, err) != LOOM_OK)
            return -1;
        int from = from_scratch ? 0 : n - 1;
        double t0 = now();
        if (loom_session_eval(s, tokens + from, n - from, NULL, LOOM_LOGITS_LAST, err) != LOOM_OK)
            return -1;
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *home = getenv("HOME"), *cache = getenv("LOOM_CACHE");
    char model[1024], state[64] = "/tmp/loom-bench-prompt-cache-XXXXXX";
    if (argc > 1)
        snprintf(model, sizeof model, "%s", argv[1]);
    else if (cache && *cache)
        snprintf(model, sizeof model, "%s/models/qwen35-0.8b-synth-Q4_K_M.gguf", cache);
    else
        snprintf(model, sizeof model, "%s/.cache/loom/models/qwen35-0.8b-synth-Q4_K_M.gguf", home ? home : "");
    int n = argc > 2 ? atoi(argv[2]) : 1500, threads = argc > 3 ? atoi(argv[3]) : 2;
    loom_error err = {0};
    loom_model *m = n >= 1 && n < 1 << 20 ? loom_model_load(model, &err) : NULL;
    loom_session_params sp = {.n_ctx = n + 1, .n_threads = threads};
    loom_session *a = m ? loom_session_new(m, &sp, &err) : NULL, *b = m ? loom_session_new(m, &sp, &err) : NULL;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(n + 1));
    int fd = mkstemp(state), status = 1, reused = -1;
    if (!a || !b || !tok || fd < 0) {
        fprintf(stderr, "bench_prompt_cache: %s: %s\n", model, err.msg[0] ? err.msg : "setup failed");
        goto out;
    }
    close(fd);
    for (int i = 0; i <= n; i++)
        tok[i] = (int32_t)((i * 7919 + 101) % 150000);
    if (loom_session_eval(a, tok, n, NULL, LOOM_LOGITS_LAST, &err) || loom_session_save(a, state, &err)) {
        fprintf(stderr, "bench_prompt_cache: %s\n", err.msg);
        goto out;
    }
    double t_cached = time_restored(b, state, tok, n + 1, &reused, &err);
    double t_decode = time_eval(a, tok, n + 1, 0, &err), t_full = t_decode < 0 ? -1 : time_eval(a, tok, n + 1, 1, &err);
    if (t_cached < 0 || t_decode < 0 || t_full < 0) {
        fprintf(stderr, "bench_prompt_cache: %s\n", err.msg);
        goto out;
    }
    printf("%s, %d threads, best of %d:\n", model, threads, REPS);
    printf("  restored %d tokens + 1: prefill_cached %.4f s (reused %d, evaluated %d)\n", n, t_cached, reused,
           n + 1 - reused);
    printf("  one decode step:                 %.4f s (prefill_cached / decode = %.1fx)\n", t_decode,
           t_cached / t_decode);
    printf("  prefill of all %d tokens:      %.4f s\n", n + 1, t_full);
    status = 0;
out:
    unlink(state);
    free(tok);
    loom_session_free(a);
    loom_session_free(b);
    loom_model_free(m);
    return status;
}
