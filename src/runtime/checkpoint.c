/* checkpoint.c — checkpoints of a sequence's recurrent state within a memory budget, rewinding to an
 * earlier position (nearest checkpoint at or before it, then re-evaluating the history: never stale
 * logits), and the prompt cache that reuses the longest common prefix with the session's history: the live
 * state when the whole history is a prefix of the new tokens, else the nearest checkpoint inside it. Both
 * are all or nothing: a checkpoint is restored into the request's private copy, never the public one. */
#include <stdlib.h>
#include <string.h>

#include "runtime/session.h"
#include "util/error.h"

/* The fixed-size owners in owner order (every recurrent layer's conv state then recurrent matrices). */
void loom_session_copy_recurrent(struct loom_session *s, int copy, float *buf, int to_state)
{
    char *at = (char *)buf;
    for (int i = 0; i < s->n_owners; i++) {
        const struct loom_state_owner *o = &s->owners[i];
        if (o->pos_axis >= 0)
            continue;
        if (to_state)
            memcpy(loom_owner_data(s, o, copy), at, o->bytes);
        else
            memcpy(at, loom_owner_data(s, o, copy), o->bytes);
        at += o->bytes;
    }
}

void loom_session_drop_checkpoints(struct loom_session *s, int pos)
{
    if (!s->ckpt)
        return;
    int kept = 0;
    for (int i = 0; i < s->n_ckpt; i++) {
        if (pos >= 0 && s->ckpt[i].pos <= pos)
            s->ckpt[kept++] = s->ckpt[i];
        else
            free(s->ckpt[i].data);
    }
    s->n_ckpt = kept;
}

int loom_session_n_checkpoints(const loom_session *session) { return session->n_ckpt; }

/* The index of the nearest checkpoint at or before pos, or -1. */
static int nearest(const struct loom_session *s, int pos)
{
    int best = -1;
    for (int i = 0; i < s->n_ckpt; i++)
        if (s->ckpt[i].pos <= pos && (best < 0 || s->ckpt[i].pos > s->ckpt[best].pos))
            best = i;
    return best;
}

int loom_session_checkpoint_at(const loom_session *session, int pos)
{
    int i = nearest(session, pos);
    return i < 0 ? 0 : session->ckpt[i].pos;
}

/* Keep a checkpoint at pos holding `from` (the recurrent owners in checkpoint layout), or the public copy
 * when from is NULL. When from is s->pending the checkpoint takes that buffer over instead of copying it
 * (one state's worth less memory); pending then holds the evicted buffer, or NULL until the next snapshot. */
static int add_checkpoint(struct loom_session *s, int pos, const float *from, loom_error *err)
{
    uint64_t bytes = s->model->geo.recurrent_state_bytes;
    if (pos == 0)
        return LOOM_OK; /* the empty state needs no snapshot */
    for (int i = 0; i < s->n_ckpt; i++)
        if (s->ckpt[i].pos == pos)
            return LOOM_OK; /* same position, same history: the same state */
    uint64_t cap = bytes ? s->checkpoint_budget / bytes : LOOM_MAX_CHECKPOINTS;
    cap = cap < LOOM_MAX_CHECKPOINTS ? cap : LOOM_MAX_CHECKPOINTS;
    if (cap == 0)
        return loom_errorf(err, LOOM_E_NOMEM, "checkpoint: the budget of %llu bytes holds no checkpoint of %llu bytes",
                           (unsigned long long)s->checkpoint_budget, (unsigned long long)bytes);
    float *data = NULL;
    int taken = from && from == s->pending;
    if ((uint64_t)s->n_ckpt >= cap) { /* evict the oldest and reuse its memory: no allocation once full */
        int old = 0;
        for (int i = 1; i < s->n_ckpt; i++)
            old = s->ckpt[i].seq < s->ckpt[old].seq ? i : old;
        data = s->ckpt[old].data;
        s->ckpt[old] = s->ckpt[--s->n_ckpt];
    } else if (!taken && !(data = malloc(bytes ? bytes : 1))) {
        return loom_errorf(err, LOOM_E_NOMEM, "checkpoint: allocating %llu bytes failed", (unsigned long long)bytes);
    }
    if (taken) { /* take the snapshot's buffer; the evicted one (if any) becomes pending */
        float *snap = s->pending;
        s->pending = data;
        data = snap;
    }
    uint64_t seq = 0;
    for (int i = 0; i < s->n_ckpt; i++)
        seq = s->ckpt[i].seq >= seq ? s->ckpt[i].seq + 1 : seq;
    if (from && !taken)
        memcpy(data, from, bytes);
    else if (!from)
        loom_session_copy_recurrent(s, s->cur, data, 0);
    s->ckpt[s->n_ckpt++] = (struct loom_checkpoint){pos, seq, data};
    return LOOM_OK;
}

int loom_session_checkpoint(loom_session *s, loom_error *err) { return add_checkpoint(s, s->pos, NULL, err); }

void loom_session_snapshot_work(struct loom_session *s, int pos)
{
    if (!s->pending)
        s->pending = malloc(s->model->geo.recurrent_state_bytes + 1);
    if (!s->pending)
        return; /* a cache: no snapshot this time */
    loom_session_copy_recurrent(s, s->cur ^ 1, s->pending, 0);
    s->pending_pos = pos;
}

/* A snapshot one token before the prompt end stands in for the prompt-end checkpoint (rewinding past it
 * re-evaluates one more token, bitwise the same in CANONICAL numerics): one state's worth less memory. */
void loom_session_auto_checkpoint(struct loom_session *s, int n_tokens)
{
    int near_end = 0;
    if (s->pending_pos > 0)
        near_end = add_checkpoint(s, s->pending_pos, s->pending, NULL) == LOOM_OK && s->pending_pos == s->pos - 1;
    s->pending_pos = -1;
    int every = s->checkpoint_every;
    int crossed = every > 0 && s->pos / every != (s->pos - n_tokens) / every;
    if ((n_tokens > 1 && s->prompt_checkpoints && !near_end) || crossed)
        loom_session_checkpoint(s, NULL); /* a cache: failing to keep one is not an error */
}

/* Put the nearest checkpoint at or before `limit` (or the empty state) into the private recurrent copy
 * cur ^ 1, where a request re-evaluating from it starts; returns its position. The public state stays as it
 * is until that request publishes (which drops the checkpoints past it), so a failure changes nothing. */
static int stage_nearest(struct loom_session *s, int limit)
{
    int best = nearest(s, limit);
    if (best < 0) {
        loom_session_clear_recurrent(s, s->cur ^ 1);
        return 0;
    }
    loom_session_copy_recurrent(s, s->cur ^ 1, s->ckpt[best].data, 1);
    return s->ckpt[best].pos;
}

int loom_session_rewind(loom_session *s, int pos, float *logits, loom_error *err)
{
    if (pos < 0 || pos > s->pos)
        return loom_errorf(err, LOOM_E_ARG, "rewind: expected a position in [0, %d], found %d", s->pos, pos);
    if (pos == 0) {
        loom_session_reset(s);
        return LOOM_OK;
    }
    int from = stage_nearest(s, pos - 1);
    return loom_session_request(s, from, s->cur ^ 1, s->history + from, pos - from, logits, 0, err);
}

int loom_session_prefill_cached(loom_session *s, const int32_t *tokens, int n, float *logits, loom_error *err)
{
    if (n < 1 || !tokens)
        return loom_errorf(err, LOOM_E_ARG, "prefill: expected at least one token, found %d", n);
    if (n > s->n_ctx)
        return loom_errorf(err, LOOM_E_RANGE, "prefill: %d tokens exceed the context of %d position%s", n, s->n_ctx,
                           s->n_ctx == 1 ? "" : "s");
    for (int i = 0; i < n; i++) /* check before rewinding anything */
        if (tokens[i] < 0 || tokens[i] >= s->model->tok_embd.n_out)
            return loom_errorf(err, LOOM_E_ARG, "prefill token %d: expected an id in [0, %lld), found %d", i,
                               (long long)s->model->tok_embd.n_out, tokens[i]);
    int common = 0;
    while (common < s->pos && common < n && s->history[common] == tokens[common])
        common++;
    /* The live state is itself a reusable prefix when the whole history is one (the recurrent state cannot
     * be rewound without a checkpoint); when it is all of tokens, its held logits are the last token's. */
    int reused = s->pos, src = s->cur;
    if (common < s->pos || (common == n && !s->has_logits)) {
        reused = stage_nearest(s, common < n ? common : n - 1);
        src = s->cur ^ 1;
    } else if (reused == n) {
        if (logits)
            memcpy(logits, s->logits, (size_t)s->n_logits * sizeof(float));
        return reused;
    }
    int rc = loom_session_request(s, reused, src, tokens + reused, n - reused, logits, 0, err);
    return rc ? rc : reused;
}
