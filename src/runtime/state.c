/* state.c — the one list of a sequence's persistent state owners (per recurrent layer its conv state and
 * recurrent matrices, per attention layer its K and V rows with their positions: shape, dtype, bytes) and
 * the XXH3 digest over all public state of a sequence (frontier, every owner, last logits), and copies of
 * the K/V rows of a range of positions (a request that rewrites public rows saves them first). */
#define XXH_STATIC_LINKING_ONLY
#include <string.h>
#include <xxhash.h>

#include "kernels/types.h"
#include "runtime/session.h"

int loom_session_state_owners(const struct loom_session *s, struct loom_state_owner *owners, int cap)
{
    const struct loom_hparams *hp = &s->model->hp;
    int64_t d = hp->ssm_head_dim, chan = 2 * (int64_t)hp->ssm_n_k_heads * d + hp->ssm_inner;
    int64_t Hkv = hp->n_head_kv, ctx = s->n_ctx;
    int n = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct loom_state_owner o[2];
        if (s->model->layers[il].kind == LOOM_LAYER_RECURRENT) {
            o[0] = (struct loom_state_owner){(int)il, LOOM_OWNER_CONV, "conv", LOOM_TYPE_F32,
                                             {chan, hp->ssm_conv_kernel - 1, 1},
                                             (uint64_t)chan * (hp->ssm_conv_kernel - 1) * 4, 0};
            o[1] = (struct loom_state_owner){(int)il, LOOM_OWNER_RECURRENT, "recurrent", LOOM_TYPE_F32,
                                             {hp->ssm_n_v_heads, d, d}, (uint64_t)hp->ssm_n_v_heads * d * d * 4, 0};
        } else {
            uint64_t k_pos = (uint64_t)Hkv * hp->head_dim_k * 2, v_pos = (uint64_t)Hkv * hp->head_dim_v * 2;
            o[0] = (struct loom_state_owner){(int)il, LOOM_OWNER_K, "k", LOOM_TYPE_F16, {ctx, Hkv, hp->head_dim_k},
                                             k_pos * (uint64_t)ctx, k_pos};
            o[1] = (struct loom_state_owner){(int)il, LOOM_OWNER_V, "v", LOOM_TYPE_F16, {Hkv, hp->head_dim_v, ctx},
                                             v_pos * (uint64_t)ctx, v_pos};
        }
        for (int i = 0; i < 2; i++, n++)
            if (n < cap)
                owners[n] = o[i];
    }
    return n;
}

void loom_session_copy_kv_rows(struct loom_session *s, int lo, int hi, uint16_t *buf, int to_state)
{
    struct loom_state_owner owners[2 * LOOM_MAX_LAYERS];
    int n = loom_session_state_owners(s, owners, 2 * LOOM_MAX_LAYERS);
    size_t rows = (size_t)(hi - lo);
    for (int i = 0; i < n; i++) {
        const struct loom_state_owner *o = &owners[i];
        const struct loom_layer_state *ls = &s->layers[o->layer];
        /* K: one run of positions; V (transposed): one run per (head, dim) row */
        int64_t runs = o->kind == LOOM_OWNER_V ? o->shape[0] * o->shape[1] : o->kind == LOOM_OWNER_K ? 1 : 0;
        size_t width = o->kind == LOOM_OWNER_K ? o->bytes_per_pos / sizeof(uint16_t) : 1;
        for (int64_t r = 0; r < runs; r++) {
            uint16_t *at = o->kind == LOOM_OWNER_K ? ls->k + (size_t)lo * width : ls->v + r * s->n_ctx + lo;
            if (to_state)
                memcpy(at, buf, rows * width * sizeof(uint16_t));
            else
                memcpy(buf, at, rows * width * sizeof(uint16_t));
            buf += rows * width;
        }
    }
}

int loom_session_n_ctx(const loom_session *session) { return session->n_ctx; }

uint64_t loom_session_arena_bytes(const loom_session *session) { return session->arena_bytes; }

uint64_t loom_session_state_bytes(const loom_session *session)
{
    struct loom_state_owner owners[2 * LOOM_MAX_LAYERS];
    int n = loom_session_state_owners(session, owners, 2 * LOOM_MAX_LAYERS);
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        total += owners[i].bytes;
    return total;
}

const float *loom_session_last_logits(const loom_session *session)
{
    return session->has_logits ? session->logits : NULL;
}

/* The public bytes of one owner: the fixed-size owners whole (their public copy), the K/V rows of
 * positions below the frontier only (rows past it are private or stale). */
static void digest_owner(XXH3_state_t *st, const struct loom_session *s, const struct loom_state_owner *o)
{
    const struct loom_layer_state *ls = &s->layers[o->layer];
    int64_t pos = s->pos;
    XXH3_64bits_update(st, &o->layer, sizeof o->layer);
    XXH3_64bits_update(st, &o->kind, sizeof o->kind);
    switch (o->kind) {
    case LOOM_OWNER_CONV:
        XXH3_64bits_update(st, ls->conv[s->cur], o->bytes);
        break;
    case LOOM_OWNER_RECURRENT:
        XXH3_64bits_update(st, ls->rec[s->cur], o->bytes);
        break;
    case LOOM_OWNER_K:
        XXH3_64bits_update(st, ls->k, (size_t)pos * o->bytes_per_pos);
        break;
    case LOOM_OWNER_V:
        for (int64_t r = 0; r < o->shape[0] * o->shape[1]; r++)
            XXH3_64bits_update(st, ls->v + r * s->n_ctx, (size_t)pos * sizeof(uint16_t));
        break;
    }
}

uint64_t loom_session_digest(const loom_session *session)
{
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    int32_t head[3] = {session->pos, session->has_logits, session->n_logits};
    XXH3_64bits_update(&st, head, sizeof head);
    struct loom_state_owner owners[2 * LOOM_MAX_LAYERS];
    int n = loom_session_state_owners(session, owners, 2 * LOOM_MAX_LAYERS);
    for (int i = 0; i < n; i++)
        digest_owner(&st, session, &owners[i]);
    if (session->has_logits)
        XXH3_64bits_update(&st, session->logits, (size_t)session->n_logits * sizeof(float));
    return XXH3_64bits_digest(&st);
}

int loom_session_tokens(const loom_session *session, int32_t *out, int cap)
{
    int n = session->pos < cap ? session->pos : cap;
    if (out && n > 0)
        memcpy(out, session->history, (size_t)n * sizeof(int32_t));
    return session->pos;
}
