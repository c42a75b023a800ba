/* batch.c — many sequences sharing one loaded model: one decode step for several sessions at once, each
 * row in the canonical (single-token) float order so every sequence's logits and state are bitwise those
 * of its solo step; checked completely first, run on private state, published for all or none. */
#include <math.h>
#include <string.h>

#include "runtime/session.h"
#include "util/error.h"

/* Check the request; *lead is the session with the largest context (its scratch serves every row). */
static int check_rows(loom_session *const *ss, const int32_t *tokens, int n, struct loom_session **lead,
                      loom_error *err)
{
    if (n < 1 || !ss || !tokens)
        return loom_errorf(err, LOOM_E_ARG, "decode: expected n >= 1 sessions and tokens, found n %d", n);
    *lead = NULL;
    for (int i = 0; i < n; i++) {
        struct loom_session *s = ss[i];
        if (!s || s->model != ss[0]->model)
            return loom_errorf(err, LOOM_E_ARG, "decode session %d: expected a session of the first one's model", i);
        if (s->numerics != LOOM_NUMERICS_CANONICAL)
            return loom_errorf(err, LOOM_E_ARG, "decode session %d: expected CANONICAL numerics, found %d", i,
                               (int)s->numerics);
        if (s->k_type != ss[0]->k_type) /* one step runs one attention kernel for every row */
            return loom_errorf(err, LOOM_E_ARG, "decode session %d: expected the first one's K cache type %s, found %s",
                               i, loom_kv_type_name(ss[0]->k_type), loom_kv_type_name(s->k_type));
        if (s->pos >= s->n_ctx)
            return loom_errorf(err, LOOM_E_RANGE, "decode session %d: position %d is at the end of its context of %d",
                               i, s->pos, s->n_ctx);
        if (tokens[i] < 0 || tokens[i] >= s->model->tok_embd.n_out)
            return loom_errorf(err, LOOM_E_ARG, "decode token %d: expected an id in [0, %lld), found %d", i,
                               (long long)s->model->tok_embd.n_out, tokens[i]);
        for (int j = 0; j < i; j++)
            if (ss[j] == s)
                return loom_errorf(err, LOOM_E_ARG, "decode: session %d appears again as session %d", j, i);
        if (!*lead || s->n_ctx > (*lead)->n_ctx)
            *lead = s;
    }
    if (n > (*lead)->sc.n_chunk)
        return loom_errorf(err, LOOM_E_RANGE, "decode: %d sequences exceed the %d rows of a step", n,
                           (*lead)->sc.n_chunk);
    return LOOM_OK;
}

int loom_sessions_decode_max(const loom_session *session) { return session->sc.n_chunk; }

int loom_sessions_decode(loom_session *const *sessions, const int32_t *tokens, int n, float *logits,
                         loom_error *err)
{
    struct loom_session *lead = NULL;
    int rc = check_rows(sessions, tokens, n, &lead, err);
    if (rc)
        return rc;
    struct loom_row *rows = lead->sc.rows;
    for (int i = 0; i < n; i++)
        rows[i].s = sessions[i];
    lead->fault.code = 0;
    rc = lead->circuits->forward_rows(lead, tokens, n, rows);
    if (rc == LOOM_E_CANCELLED)
        return loom_errorf(err, rc, "decode: cancelled by an abort callback; nothing was published");
    if (rc && rc == lead->fault.code) /* the expert cache's (a read failed) */
        return loom_errorf(err, rc, "decode: %s; nothing was published", lead->fault.msg);
    if (rc)
        return loom_errorf(err, rc, "decode: the step failed (stage hook code %d); nothing was published", rc);
    int64_t E = lead->model->hp.n_embd, nl = lead->n_logits;
    float *xn = lead->sc.xn;
    lead->circuits->output_norm(lead, lead->sc.x, n, xn);
    rc = lead->hook ? lead->hook(lead->hook_ctx, -1, "output_norm", xn, (int64_t)n * E) : 0;
    int finite = 1;
    for (int64_t i = 0; i < (int64_t)n * E; i++)
        finite &= isfinite(xn[i]) != 0;
    if (rc || !finite)
        return loom_errorf(err, rc ? rc : LOOM_E_INTERNAL, "decode: non-finite or rejected hidden state; nothing "
                           "was published" LOOM_NONFINITE_HINT);
    /* publishing cannot fail from here: the hidden rows are finite */
    if (logits)
        lead->circuits->head(lead, xn, n, logits);
    for (int i = 0; i < n; i++) {
        struct loom_session *s = sessions[i];
        if (logits)
            memcpy(s->logits_work, logits + (int64_t)i * nl, (size_t)nl * sizeof(float));
        else
            lead->circuits->head(lead, xn + (int64_t)i * E, 1, s->logits_work);
        float *t = s->logits;
        s->logits = s->logits_work;
        s->logits_work = t;
        s->history[s->pos] = tokens[i];
        s->cur ^= 1;
        s->pos++;
        s->has_logits = 1;
        loom_session_auto_checkpoint(s, 1);
    }
    return LOOM_OK;
}
