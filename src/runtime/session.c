/* session.c — the public session API: creation (the architecture's circuits, state owners sized from the
 * model's layer plan, the thread pool, and one arena holding all state and the scratch plan), reset, and eval, which checks a
 * request completely, runs it chunk by chunk against private state and publishes the recurrent owners,
 * the frontier and the logits together, or nothing (the request core that rewind and the prompt cache
 * share). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/matmul.h"
#include "model/expert_cache.h"
#include "runtime/edges.h"
#include "runtime/session.h"
#include "util/error.h"
#include "util/pool.h"

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }

/* Carve n bytes (64-byte aligned) from the arena cursor; with base NULL only counts. */
static void *carve(char *base, size_t *cursor, size_t n)
{
    size_t at = (*cursor + 63) & ~(size_t)63;
    *cursor = at + n;
    return base ? base + at : NULL;
}

static size_t matmul_scratch(const struct loom_model *m, int n_chunk)
{
    size_t need = loom_matmul_scratch_bytes(m->output.type, m->output.n_in, n_chunk);
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        for (int i = 0; i < m->arch->n_weights; i++) {
            const struct loom_weight *w = loom_layer_matrix(&m->layers[il], &m->arch->weights[i]);
            if (!m->arch->weights[i].vector && w->data)
                need = max_sz(need, loom_matmul_scratch_bytes(w->type, w->n_in, n_chunk));
        }
    return need;
}

const struct loom_circuits *loom_circuits_find(const struct loom_arch *arch)
{
    static const struct loom_circuits *const all[] = {&loom_circuits_qwen35, &loom_circuits_qwen35moe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->arch == arch)
            return all[i];
    return NULL;
}

static void set_owner(struct loom_layer_state *ls, enum loom_owner_kind kind, int copy, void *at)
{
    switch (kind) {
    case LOOM_OWNER_CONV:
        ls->conv[copy] = at;
        break;
    case LOOM_OWNER_RECURRENT:
        ls->rec[copy] = at;
        break;
    case LOOM_OWNER_K:
        ls->k = at;
        break;
    default:
        ls->v = at;
        break;
    }
}

/* The mixture-of-experts buffers of struct loom_scratch for nc tokens. */
static void plan_moe(struct loom_scratch *sc, const struct loom_scratch_widths *w, size_t n_embd, size_t nc,
                     int streamed, char *base, size_t *cur)
{
    size_t pairs = nc * w->slots, f = sizeof(float);
    sc->moe_route = carve(base, cur, nc * w->experts * f);
    sc->moe_ids = carve(base, cur, pairs * sizeof(int32_t));
    sc->moe_weights = carve(base, cur, pairs * f);
    sc->moe_start = carve(base, cur, (w->experts + 1) * sizeof(int32_t));
    sc->moe_perm = carve(base, cur, pairs * sizeof(int32_t));
    sc->moe_pos = carve(base, cur, pairs * sizeof(int32_t));
    sc->moe_rows = carve(base, cur, pairs * n_embd * f);
    sc->moe_gu = carve(base, cur, pairs * 2 * w->expert_ff * f);
    sc->moe_h = carve(base, cur, pairs * w->expert_ff * f);
    sc->moe_hq = carve(base, cur, pairs * w->expert_ff * f);
    if (streamed)
        sc->moe_down = carve(base, cur, pairs * n_embd * f);
    sc->moe_shared = carve(base, cur, nc * n_embd * f);
    sc->moe_gate = carve(base, cur, nc * f);
}

/* Lay out (base NULL: measure) every state owner and scratch buffer in one arena. */
static size_t plan_arena(struct loom_session *s, char *base)
{
    const struct loom_model *m = s->model;
    const struct loom_hparams *hp = &m->hp;
    const struct loom_scratch_widths *w = &m->geo.scratch;
    size_t cur = 0, nc = (size_t)s->sc.n_chunk, nt = (size_t)s->n_threads, ctx = (size_t)s->n_ctx;
    for (int i = 0; i < s->n_owners; i++) { /* fixed-size owners twice (public and private copy) */
        const struct loom_state_owner *o = &s->owners[i];
        for (int copy = 0; copy < (o->pos_axis < 0 ? 2 : 1); copy++)
            set_owner(&s->layers[o->layer], o->kind, copy, carve(base, &cur, o->bytes));
    }
    s->history = carve(base, &cur, ctx * sizeof(int32_t));
    s->logits = carve(base, &cur, (size_t)s->n_logits * sizeof(float));
    s->logits_work = carve(base, &cur, (size_t)s->n_logits * sizeof(float));
    struct loom_scratch *sc = &s->sc;
    sc->x = carve(base, &cur, nc * hp->n_embd * sizeof(float));
    sc->xn = carve(base, &cur, nc * hp->n_embd * sizeof(float));
    sc->proj = carve(base, &cur, nc * hp->n_embd * sizeof(float));
    sc->a = carve(base, &cur, nc * w->a * sizeof(float));
    sc->b = carve(base, &cur, nc * w->b * sizeof(float));
    sc->c = carve(base, &cur, nc * w->c * sizeof(float));
    sc->o = carve(base, &cur, nc * w->o * sizeof(float));
    sc->alpha = carve(base, &cur, nc * w->gates * sizeof(float));
    sc->beta = carve(base, &cur, nc * w->gates * sizeof(float));
    sc->rope = carve(base, &cur, nc * w->rope * sizeof(float));
    sc->mm = carve(base, &cur, matmul_scratch(m, s->sc.n_chunk));
    if (w->experts)
        plan_moe(sc, w, hp->n_embd, nc, m->experts != NULL, base, &cur);
    sc->rows = carve(base, &cur, nc * sizeof(struct loom_row));
    sc->scores = carve(base, &cur, nt * LOOM_OPS_ATTN_ROWS * ctx * sizeof(float));
    sc->probs16 = carve(base, &cur, nt * LOOM_OPS_ATTN_ROWS * ctx * sizeof(uint16_t));
    sc->q16 = carve(base, &cur, nt * LOOM_OPS_ATTN_ROWS * w->head_dim * sizeof(uint16_t));
    sc->attn_out = carve(base, &cur, nt * LOOM_OPS_ATTN_ROWS * w->head_dim_v * sizeof(float));
    sc->qrot = carve(base, &cur, s->k_rot ? nt * w->head_dim * sizeof(float) : 0);
    return cur;
}

/* The reference rotates Q and K rows for a quantized K cache when the head dimension is a multiple of 64
 * (llama-kv-cache.cpp attn_rot_k), by a Hadamard matrix of the largest power of two size >= 64 dividing it
 * (build_input_k_rot), applied to each run of that many values. 0: no rotation. */
static int k_rot_size(const struct loom_model *m, enum loom_kv_type k_type)
{
    int64_t hd = m->hp.head_dim_k, n = 64;
    if (k_type == LOOM_KV_F16 || hd <= 0 || hd % 64 != 0)
        return 0;
    while (hd % (2 * n) == 0)
        n *= 2;
    return (int)n;
}

/* The session arena (bytes of state, KV cache and scratch): from 2 MiB on in 2 MiB-aligned huge pages where the
 * kernel grants them (advice only): the recurrent state and the KV rows are read every token, and the V rows of
 * a head lie n_ctx positions apart, one TLB entry per 4 KiB page otherwise. */
static void *arena_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge)
        return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    void *p = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (p)
        madvise(p, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
    return p;
}

loom_session *loom_session_new(const loom_model *model, const loom_session_params *params, loom_error *err)
{
    if (!model) {
        loom_errorf(err, LOOM_E_ARG, "session model: expected a loaded model, found NULL");
        return NULL;
    }
    int n_ctx = params ? params->n_ctx : 0, n_threads = params ? params->n_threads : 0;
    int n_ubatch = params ? params->n_ubatch : 0;
    enum loom_numerics numerics = params ? params->numerics : LOOM_NUMERICS_CANONICAL;
    enum loom_kv_type k_type = params ? params->k_type : LOOM_KV_F16;
    if (n_ctx < 0 || n_threads < 0 || n_ubatch < 0) {
        loom_errorf(err, LOOM_E_ARG, "session params: expected n_ctx >= 0, n_threads >= 0 and n_ubatch >= 0, found "
                    "%d, %d and %d", n_ctx, n_threads, n_ubatch);
        return NULL;
    }
    if (numerics != LOOM_NUMERICS_CANONICAL && numerics != LOOM_NUMERICS_REFERENCE_BATCH) {
        loom_errorf(err, LOOM_E_ARG, "session params numerics: expected CANONICAL (0) or REFERENCE_BATCH (1), found %d",
                    (int)numerics);
        return NULL;
    }
    if (k_type != LOOM_KV_F16 && k_type != LOOM_KV_Q8_0) {
        loom_errorf(err, LOOM_E_ARG, "session params k_type: expected LOOM_KV_F16 (0) or LOOM_KV_Q8_0 (1), found %d",
                    (int)k_type);
        return NULL;
    }
    if (loom_geometry_k_bytes(&model->geo, k_type) == 0) {
        loom_errorf(err, LOOM_E_ARG, "session params k_type: a q8_0 K cache needs a head dimension that is a "
                    "multiple of 32, found %lld", (long long)model->geo.owner[LOOM_OWNER_K].shape[2]);
        return NULL;
    }
    if (n_ctx == 0)
        n_ctx = model->hp.n_ctx_train < 4096 ? (int)model->hp.n_ctx_train : 4096;
    if ((uint32_t)n_ctx > model->hp.n_ctx_train) {
        loom_errorf(err, LOOM_E_RANGE, "session n_ctx: expected at most the model's context_length %u, found %d",
                    model->hp.n_ctx_train, n_ctx);
        return NULL;
    }
    if (loom_pool_threads(n_threads, "session params n_threads", &n_threads, err))
        return NULL;
    const struct loom_circuits *circuits = loom_circuits_find(model->arch);
    if (!circuits) {
        loom_errorf(err, LOOM_E_FORMAT, "session: architecture '%s' has no circuits", model->arch->name);
        return NULL;
    }
    int n_owners = loom_state_owners_list(model, n_ctx, k_type, NULL, 0);
    struct loom_session *s = calloc(1, sizeof *s);
    struct loom_layer_state *layers = calloc(model->hp.n_layer ? model->hp.n_layer : 1, sizeof *layers);
    struct loom_state_owner *owners = calloc(n_owners ? (size_t)n_owners : 1, sizeof *owners);
    struct loom_checkpoint *ckpt = calloc(LOOM_MAX_CHECKPOINTS, sizeof *ckpt);
    if (!s || !layers || !owners || !ckpt) {
        free(s);
        free(layers);
        free(owners);
        free(ckpt);
        loom_errorf(err, LOOM_E_NOMEM, "session: allocating the state table failed");
        return NULL;
    }
    s->model = model;
    s->circuits = circuits;
    s->owners = owners;
    s->n_owners = loom_state_owners_list(model, n_ctx, k_type, owners, n_owners);
    s->k_type = k_type;
    s->k_rot = k_rot_size(model, k_type);
    for (int i = 0; i < s->n_owners; i++)
        s->kv_bytes_per_token += owners[i].bytes_per_pos;
    s->ops = &model->kernels->ops;
    s->n_ctx = n_ctx;
    s->n_threads = n_threads;
    s->numerics = numerics;
    s->checkpoint_every = params && params->checkpoint_every > 0 ? params->checkpoint_every : 0;
    s->checkpoint_budget = params && params->checkpoint_budget ? params->checkpoint_budget
                                                               : 4 * model->geo.recurrent_state_bytes;
    s->prompt_checkpoints = !(params && params->skip_prompt_checkpoints);
    s->n_logits = (int)model->output.n_out;
    s->layers = layers;
    s->ckpt = ckpt;
    s->pending_pos = -1;
    int chunk = numerics == LOOM_NUMERICS_CANONICAL ? LOOM_CHUNK_TOKENS_CANONICAL
                : n_ubatch > 0                        ? n_ubatch
                                                      : LOOM_CHUNK_TOKENS;
    s->sc.n_chunk = n_ctx < chunk ? n_ctx : chunk;
    s->arena_bytes = plan_arena(s, NULL);
    if (model->experts) { /* the budget holds the arena and the checkpoints too */
        if (loom_expert_cache_reserve(model->experts, s->arena_bytes + s->checkpoint_budget, err)) {
            loom_session_free(s);
            return NULL;
        }
        s->reserved = s->arena_bytes + s->checkpoint_budget;
    }
    s->arena = arena_alloc(s->arena_bytes);
    s->pool = s->arena ? loom_pool_new(n_threads) : NULL;
    if (!s->arena || !s->pool) {
        loom_errorf(err, LOOM_E_NOMEM, "session: allocating %zu bytes of state and scratch (n_ctx %d) failed",
                    s->arena_bytes, n_ctx);
        loom_session_free(s);
        return NULL;
    }
    plan_arena(s, s->arena);
    memset(s->arena, 0, s->arena_bytes);
    return s;
}

void loom_session_free(loom_session *session)
{
    if (!session)
        return;
    if (session->reserved)
        loom_expert_cache_unreserve(session->model->experts, session->reserved);
    if (session->pool)
        loom_pool_free(session->pool);
    free(session->arena);
    free(session->stage);
    loom_session_drop_checkpoints(session, -1);
    free(session->pending);
    free(session->ckpt);
    free(session->layers);
    free(session->owners);
    free(session);
}

void loom_session_clear_recurrent(struct loom_session *s, int copy)
{
    for (int i = 0; i < s->n_owners; i++)
        if (s->owners[i].pos_axis < 0)
            memset(loom_owner_data(s, &s->owners[i], copy), 0, s->owners[i].bytes);
}

/* Only the public recurrent state needs clearing: KV rows at or past the position are never read. */
void loom_session_reset(loom_session *session)
{
    loom_session_clear_recurrent(session, session->cur);
    session->pos = 0;
    session->has_logits = 0;
    loom_session_drop_checkpoints(session, -1);
}

int loom_session_pos(const loom_session *session) { return session->pos; }

void loom_session_set_abort(loom_session *session, loom_abort_fn fn, void *ctx)
{
    session->abort = fn;
    session->abort_ctx = ctx;
}

/* Room for n rows of final hidden states (a LOGITS_ALL request keeps them until it publishes). Grows
 * only; a failure leaves the session as it was. */
static int reserve_stage(struct loom_session *s, int64_t n, loom_error *err)
{
    if (n <= s->stage_rows)
        return LOOM_OK;
    int64_t E = s->model->hp.n_embd;
    int rc = s->hook ? s->hook(s->hook_ctx, -1, "alloc", NULL, 0) : 0;
    float *p = rc ? NULL : realloc(s->stage, (size_t)n * (size_t)E * sizeof(float));
    if (!p)
        return loom_errorf(err, LOOM_E_NOMEM, "eval: allocating %lld rows of %lld floats for all-token logits failed",
                           (long long)n, (long long)E);
    s->stage = p;
    s->stage_rows = n;
    return LOOM_OK;
}

/* 1 when no x[i] is an infinity or a NaN (exponent bits all ones). Blocks of a fixed 16 elements, so that the
 * compiler vectorizes the test at -O2: a decode step checks every logit (248320 on Qwen3.5) on one thread. */
static int all_finite(const float *x, int64_t n)
{
    uint32_t bad = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) {
            uint32_t u;
            memcpy(&u, x + i + k, sizeof u);
            bad |= (u & 0x7f800000u) == 0x7f800000u;
        }
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

/* Run tokens[0..n) at positions pos0.. on private state: the recurrent owners read from copy src and
 * updated in copy cur ^ 1, K/V rows from pos0 on, the final rows in s->stage (all) or the last token's
 * logits in s->logits_work. Publishes nothing. In
 * CANONICAL numerics (where chunking does not change a bit) with prompt checkpoints, a prompt's last token
 * runs as its own chunk and the state before it is snapshotted: rewinding to the prompt end then
 * re-evaluates one token. */
static int run_private(struct loom_session *s, int pos0, int src, const int32_t *tokens, int n_tokens, int all,
                       loom_error *err)
{
    int64_t E = s->model->hp.n_embd;
    int work = s->cur ^ 1;
    int split = s->prompt_checkpoints && s->numerics == LOOM_NUMERICS_CANONICAL && n_tokens > 1 ? n_tokens - 1 : -1;
    s->pending_pos = -1;
    for (int done = 0; done < n_tokens;) {
        int n = n_tokens - done < s->sc.n_chunk ? n_tokens - done : s->sc.n_chunk;
        n = done < split && done + n > split ? split - done : n;
        s->fault.code = 0;
        int rc = s->circuits->forward(s, tokens + done, n, pos0 + done, done == 0 ? src : work, work);
        if (rc == LOOM_E_CANCELLED)
            return loom_errorf(err, rc, "eval: cancelled by the abort callback in the chunk at position %d; nothing "
                               "was published", pos0 + done);
        if (rc && rc == s->fault.code) /* the expert cache's (a read failed) */
            return loom_errorf(err, rc, "eval: %s (chunk at position %d); nothing was published", s->fault.msg,
                               pos0 + done);
        if (rc)
            return loom_errorf(err, rc, "eval: the request failed in chunk at position %d (stage hook code %d); "
                               "nothing was published", pos0 + done, rc);
        done += n;
        if (done == split)
            loom_session_snapshot_work(s, pos0 + done);
        float *rows = all ? s->stage + (int64_t)(done - n) * E : s->sc.xn;
        int first = all ? 0 : n - 1, m = all ? n : 1;
        s->circuits->output_norm(s, s->sc.x + (int64_t)first * E, m, rows);
        if (s->observer)
            loom_edge_emit(s, -1, LOOM_EDGE_OUTPUT_NORM, (struct loom_edge_rows){rows, m, pos0 + done - m, E, 0, 0, 0});
        rc = s->hook ? s->hook(s->hook_ctx, -1, "output_norm", rows, (int64_t)m * E) : 0;
        if (!rc && !all_finite(rows, (int64_t)m * E))
            rc = LOOM_E_INTERNAL;
        if (rc)
            return loom_errorf(err, rc, "eval: non-finite or rejected hidden state in the chunk at position %d; "
                               "nothing was published" LOOM_NONFINITE_HINT, pos0 + done - n);
    }
    if (all)
        return LOOM_OK;
    s->circuits->head(s, s->sc.xn, 1, s->logits_work);
    if (s->observer)
        loom_edge_emit(s, -1, LOOM_EDGE_LOGITS, (struct loom_edge_rows){s->logits_work, 1, pos0 + n_tokens - 1,
                                                                         s->n_logits, 0, 0, 0});
    int rc = s->hook ? s->hook(s->hook_ctx, -1, "logits", s->logits_work, s->n_logits) : 0;
    if (!rc && !all_finite(s->logits_work, s->n_logits))
        rc = LOOM_E_INTERNAL;
    if (rc)
        return loom_errorf(err, rc, "eval: non-finite or rejected logits at position %d; nothing was published"
                           LOOM_NONFINITE_HINT, pos0 + n_tokens - 1);
    return LOOM_OK;
}

/* Make the request's private state public: the recurrent copy, the frontier (pos0 + n_tokens), the history
 * and the logits together; checkpoints past pos0 go (their history changed). Cannot fail. LOGITS_ALL rows
 * (all: logits non-NULL) are computed here from the staged rows, chunk by chunk as evaluated, straight into
 * the caller's buffer. */
static void publish(struct loom_session *s, int pos0, const int32_t *tokens, int n_tokens, float *logits, int all)
{
    if (pos0 < s->pos)
        loom_session_drop_checkpoints(s, pos0);
    memmove(s->history + pos0, tokens, (size_t)n_tokens * sizeof(int32_t));
    s->cur ^= 1;
    s->pos = pos0 + n_tokens;
    s->has_logits = 1;
    if (all) {
        int64_t E = s->model->hp.n_embd, nl = s->n_logits;
        for (int done = 0; done < n_tokens;) {
            int n = n_tokens - done < s->sc.n_chunk ? n_tokens - done : s->sc.n_chunk;
            s->circuits->head(s, s->stage + (int64_t)done * E, n, logits + (int64_t)done * nl);
            if (s->observer)
                loom_edge_emit(s, -1, LOOM_EDGE_LOGITS, (struct loom_edge_rows){logits + (int64_t)done * nl, n,
                                                                                 pos0 + done, nl, 0, 0, 0});
            done += n;
        }
        memcpy(s->logits, logits + (int64_t)(n_tokens - 1) * nl, (size_t)nl * sizeof(float));
        return;
    }
    float *t = s->logits;
    s->logits = s->logits_work;
    s->logits_work = t;
    if (logits)
        memcpy(logits, s->logits, (size_t)s->n_logits * sizeof(float));
}

int loom_session_eval(loom_session *session, const int32_t *tokens, int n_tokens, float *logits,
                      enum loom_logits_mode mode, loom_error *err)
{
    if (!session || n_tokens < 0 || (n_tokens > 0 && !tokens))
        return loom_errorf(err, LOOM_E_ARG, "eval: expected a session and n_tokens >= 0 tokens, found n_tokens %d",
                           n_tokens);
    if (mode != LOOM_LOGITS_LAST && mode != LOOM_LOGITS_ALL)
        return loom_errorf(err, LOOM_E_ARG, "eval logits mode: expected LAST or ALL, found %d", (int)mode);
    if (n_tokens > session->n_ctx - session->pos)
        return loom_errorf(err, LOOM_E_RANGE, "eval: %d token%s at position %d exceed%s the context of %d position%s",
                           n_tokens, n_tokens == 1 ? "" : "s", session->pos, n_tokens == 1 ? "s" : "", session->n_ctx,
                           session->n_ctx == 1 ? "" : "s");
    int64_t n_rows = session->model->tok_embd.n_out;
    for (int i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= n_rows)
            return loom_errorf(err, LOOM_E_ARG, "eval token %d: expected an id in [0, %lld), found %d", i,
                               (long long)n_rows, tokens[i]);
    if (n_tokens == 0)
        return LOOM_OK;
    return loom_session_request(session, session->pos, session->cur, tokens, n_tokens, logits,
                                mode == LOOM_LOGITS_ALL && logits, err);
}

/* The public K/V rows of [lo, hi) saved before a request rewrites them (NULL when there are none). */
static int save_kv_rows(struct loom_session *s, int lo, int hi, uint16_t **saved, loom_error *err)
{
    *saved = NULL;
    if (lo >= hi)
        return LOOM_OK;
    uint64_t bytes = (uint64_t)(hi - lo) * s->kv_bytes_per_token;
    int rc = s->hook ? s->hook(s->hook_ctx, -1, "alloc", NULL, 0) : 0;
    if (rc || !(*saved = malloc(bytes ? bytes : 1)))
        return loom_errorf(err, LOOM_E_NOMEM, "eval: allocating %llu bytes to keep the K/V rows of positions "
                           "%d..%d until the request publishes failed", (unsigned long long)bytes, lo, hi - 1);
    loom_session_copy_kv_rows(s, lo, hi, *saved, 0);
    return LOOM_OK;
}

int loom_session_request(struct loom_session *s, int pos0, int src, const int32_t *tokens, int n, float *logits,
                         int all, loom_error *err)
{
    int hi = pos0 + n < s->pos ? pos0 + n : s->pos; /* public rows the request rewrites: [pos0, hi) */
    uint16_t *saved = NULL;
    int rc = all ? reserve_stage(s, n, err) : LOOM_OK;
    if (!rc)
        rc = save_kv_rows(s, pos0, hi, &saved, err);
    if (!rc)
        rc = run_private(s, pos0, src, tokens, n, all, err);
    if (rc) {
        s->pending_pos = -1; /* the failed request's snapshot never becomes a checkpoint */
        if (saved)
            loom_session_copy_kv_rows(s, pos0, hi, saved, 1);
        free(saved);
        return rc;
    }
    free(saved);
    publish(s, pos0, tokens, n, logits, all);
    loom_session_auto_checkpoint(s, n);
    return LOOM_OK;
}
