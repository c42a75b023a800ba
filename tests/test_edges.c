/* test_edges.c — the circuit edges (src/runtime/edges.c): loom_model_edges lists each model's edges in circuit order
 * with unique names and their shapes, and a session's observer sees every edge at every position a request
 * evaluates (per-token edges each row, state edges at the end of each chunk, output_norm and logits at the rows
 * the request asks for), sees the buffers the request really uses (the logits it returns; a value changed there
 * reaches the result), and is not called by loom_sessions_decode or once cleared. On the micro dense model and
 * a tiny mixture-of-experts model with the test vocabulary. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/types.h"
#include "test.h"
#include "model_fixture.h"

#define MAX_EDGES 256
#define N_PROMPT 5
#define N_POS (N_PROMPT + 2)

struct seen {
    const loom_edge *edges;
    int n_edges;
    unsigned char at[MAX_EDGES][N_POS]; /* edge i observed at position p */
    int calls, bad_geometry;
    float *logits_seen; /* the last logits row the observer saw */
    int bump_logit;     /* add 1 to logit 0 of each logits row seen */
};

static int find_edge(const struct seen *s, int layer, int kind)
{
    for (int i = 0; i < s->n_edges; i++)
        if (s->edges[i].layer == layer && s->edges[i].kind == kind)
            return i;
    return -1;
}

static void observer(void *ctx, const loom_edge_event *ev)
{
    struct seen *s = ctx;
    s->calls++;
    int i = find_edge(s, ev->layer, ev->kind);
    if (i < 0 || ev->n_seg * ev->seg_len != s->edges[i].width || !ev->data || ev->n_rows < 1 ||
        (s->edges[i].per_step && ev->n_rows != 1)) {
        s->bad_geometry++;
        return;
    }
    for (int t = 0; t < ev->n_rows; t++)
        if (ev->pos0 + t >= 0 && ev->pos0 + t < N_POS)
            s->at[i][ev->pos0 + t] = 1;
    if (!strcmp(s->edges[i].name, "logits")) {
        float *last = (float *)ev->data + (int64_t)(ev->n_rows - 1) * ev->row_stride;
        if (s->bump_logit)
            last[0] += 1.0f;
        s->logits_seen = last;
    }
}

/* Names unique, layer edges named blk.N.*, kinds increasing within a layer, widths the product of the shape. */
static void check_list(const loom_edge *e, int n, const char *what)
{
    int ok = 1;
    for (int i = 0; i < n; i++) {
        int64_t w = 1;
        for (int d = 0; d < e[i].n_dims; d++)
            w *= e[i].shape[d];
        char prefix[16];
        snprintf(prefix, sizeof prefix, "blk.%d.", e[i].layer);
        ok &= w == e[i].width && w > 0 && (e[i].layer < 0 || !strncmp(e[i].name, prefix, strlen(prefix)));
        ok &= i == 0 || e[i].layer != e[i - 1].layer || e[i].kind > e[i - 1].kind;
        for (int j = 0; j < i; j++)
            ok &= strcmp(e[i].name, e[j].name) != 0;
        ok &= e[i].per_step == (strstr(e[i].name, "gdn.state") || strstr(e[i].name, "gdn.conv_state"));
    }
    CHECK(ok, "%s: the edge list is well formed", what);
    CHECK(!strcmp(e[0].name, "embed") && !strcmp(e[n - 1].name, "logits") && !strcmp(e[n - 2].name, "output_norm"),
          "%s: embed first, output_norm and logits last", what);
}

static void check_model(loom_model *m, const char *what, int expect_experts)
{
    static loom_edge edges[MAX_EDGES];
    int n = loom_model_edges(m, NULL, 0);
    CHECK(n > 0 && n <= MAX_EDGES && loom_model_edges(m, edges, MAX_EDGES) == n, "%s: %d edges", what, n);
    if (n <= 0 || n > MAX_EDGES)
        return;
    check_list(edges, n, what);
    int experts = 0;
    for (int i = 0; i < n; i++)
        experts += strstr(edges[i].name, ".moe.experts") != NULL;
    CHECK(expect_experts ? experts > 0 : experts == 0, "%s: expert edges %d", what, experts);

    static struct seen s;
    memset(&s, 0, sizeof s);
    s.edges = edges, s.n_edges = n;
    loom_error err = {0};
    loom_session_params sp = {.n_ctx = 32, .n_threads = 2, .numerics = LOOM_NUMERICS_REFERENCE_BATCH};
    loom_session *ss = loom_session_new(m, &sp, &err);
    CHECK(ss != NULL, "%s: session: %s", what, err.msg);
    if (!ss)
        return;
    loom_session_set_observer(ss, observer, &s);
    int32_t tok[N_POS];
    for (int i = 0; i < N_POS; i++)
        tok[i] = (int32_t)((i * 53 + 7) % MINI_TOKENS);
    int nl = loom_model_n_logits(m);
    float *out = malloc((size_t)nl * sizeof *out);
    int rc = out ? loom_session_eval(ss, tok, N_PROMPT, out, LOOM_LOGITS_LAST, &err) : LOOM_E_NOMEM;
    for (int i = N_PROMPT; rc == LOOM_OK && i < N_POS; i++)
        rc = loom_session_eval(ss, tok + i, 1, out, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK && s.bad_geometry == 0, "%s: eval %s, %d events of a bad geometry", what, err.msg,
          s.bad_geometry);
    int complete = 1;
    for (int i = 0; i < n; i++) {
        int last_rows = edges[i].per_step || (edges[i].layer < 0 && strcmp(edges[i].name, "embed"));
        for (int p = 0; p < N_POS; p++) {
            int want = !last_rows || p >= N_PROMPT - 1;
            if (s.at[i][p] != want) {
                complete = 0;
                printf("  %s: %s at position %d: seen %d, expected %d\n", what, edges[i].name, p, s.at[i][p], want);
            }
        }
    }
    CHECK(complete, "%s: every edge seen exactly at the positions evaluated", what);
    CHECK(s.logits_seen && out && !memcmp(s.logits_seen, out, (size_t)nl * sizeof *out),
          "%s: the logits edge is the row the request returns", what);

    /* A changed value reaches the result: the logits the observer bumps are the ones returned. */
    float before = out ? out[0] : 0;
    loom_session_rewind(ss, N_POS - 1, NULL, &err);
    s.bump_logit = 1;
    rc = loom_session_eval(ss, tok + N_POS - 1, 1, out, LOOM_LOGITS_LAST, &err);
    CHECK(rc == LOOM_OK && out[0] == before + 1.0f, "%s: a value the observer changes reaches the result", what);

    int calls = s.calls;
    loom_session_set_observer(ss, NULL, NULL);
    loom_session_rewind(ss, N_POS - 1, NULL, &err);
    loom_session_eval(ss, tok, 1, NULL, LOOM_LOGITS_LAST, &err);
    CHECK(s.calls == calls, "%s: no calls once the observer is cleared", what);
    loom_session_free(ss);

    sp.numerics = LOOM_NUMERICS_CANONICAL;
    loom_session *pair[2] = {loom_session_new(m, &sp, &err), loom_session_new(m, &sp, &err)};
    if (pair[0] && pair[1]) {
        loom_session_set_observer(pair[0], observer, &s);
        loom_session_set_observer(pair[1], observer, &s);
        rc = loom_sessions_decode(pair, tok, 2, NULL, &err);
        CHECK(rc == LOOM_OK && s.calls == calls, "%s: loom_sessions_decode calls no observer (%s)", what, err.msg);
    }
    loom_session_free(pair[0]);
    loom_session_free(pair[1]);
    free(out);
}

int main(void)
{
    char dir[] = "/tmp/loom-test-edges-XXXXXX", vocab[64], path[64];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return test_finish();
    }
    snprintf(vocab, sizeof vocab, "%s/vocab.gguf", dir);
    snprintf(path, sizeof path, "%s/model.gguf", dir);
    loom_model *m = NULL;
    if (write_mini_vocab(vocab) == LOOM_OK && (m = load_micro_model(vocab, path, LOOM_TYPE_F32, 3)))
        check_model(m, "micro", 0);
    loom_model_free(m);
    m = NULL;
    loom_error err = {0};
    struct loom_synth_params p = {.preset = loom_synth_find_preset("tiny-moe"), .wtype = LOOM_TYPE_F32, .seed = 4,
                                  .vocab_path = vocab};
    int rc = loom_synth_write(&p, path, &err);
    CHECK(rc == LOOM_OK, "synth tiny-moe: %s", err.msg);
    if (rc == LOOM_OK && (m = loom_model_load(path, &err)))
        check_model(m, "tiny-moe", 1);
    loom_model_free(m);
    unlink(path);
    unlink(vocab);
    rmdir(dir);
    return test_finish();
}
