/* state.c — the one list of a sequence's persistent state owners (the architecture's owners of each layer's
 * kind, shaped by the model's geometry: per recurrent layer its conv state and recurrent matrices, per
 * attention layer its K and V rows with their positions: shape, dtype, bytes), the XXH3 digest over all
 * public state of a sequence (frontier, every owner, last logits), and copies of the K/V rows of a range
 * of positions (a request that rewrites public rows saves them first). */
#define XXH_STATIC_LINKING_ONLY
#include <string.h>
#include <strings.h>
#include <xxhash.h>

#include "kernels/types.h"
#include "runtime/session.h"

static const char *const owner_names[LOOM_OWNER_KINDS] = {"conv", "recurrent", "k", "v"};

const char *loom_kv_type_name(enum loom_kv_type type)
{
    return type == LOOM_KV_F16 ? "f16" : type == LOOM_KV_Q8_0 ? "q8_0" : NULL;
}

int loom_kv_type_parse(const char *name, enum loom_kv_type *type, loom_error *err)
{
    for (int t = 0; name && t < LOOM_KV_TYPES; t++)
        if (strcasecmp(name, loom_kv_type_name((enum loom_kv_type)t)) == 0) {
            *type = (enum loom_kv_type)t;
            return LOOM_OK;
        }
    return loom_errorf(err, LOOM_E_ARG, "K cache type: expected f16 or q8_0 (V stays f16), found '%s'",
                       name ? name : "(none)");
}

/* The K owner of one layer in a cache of element type k_type: F16 as the geometry has it, Q8_0 the same
 * [pos][heads][dim] in blocks (loom_geometry_k_bytes). */
static struct loom_owner_shape k_shape(const struct loom_model *m, enum loom_kv_type k_type)
{
    struct loom_owner_shape sh = m->geo.owner[LOOM_OWNER_K];
    if (k_type == LOOM_KV_Q8_0)
        sh.dtype = LOOM_TYPE_Q8_0;
    sh.bytes = loom_geometry_k_bytes(&m->geo, k_type);
    return sh;
}

int loom_state_owners_list(const struct loom_model *m, int64_t n_ctx, enum loom_kv_type k_type,
                           struct loom_state_owner *owners, int cap)
{
    int n = 0;
    struct loom_owner_shape k = k_shape(m, k_type);
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        enum loom_layer_kind kind = m->layers[il].kind;
        for (int i = 0; i < m->arch->owners[kind].n; i++, n++) {
            enum loom_owner_kind ok = m->arch->owners[kind].kinds[i];
            const struct loom_owner_shape *sh = ok == LOOM_OWNER_K ? &k : &m->geo.owner[ok];
            if (!owners || n >= cap)
                continue;
            struct loom_state_owner *o = &owners[n];
            int pos = sh->pos_axis >= 0;
            *o = (struct loom_state_owner){(int)il, ok, owner_names[ok], sh->dtype, {sh->shape[0], sh->shape[1],
                                           sh->shape[2]}, pos ? sh->bytes * (uint64_t)n_ctx : sh->bytes,
                                           pos ? sh->bytes : 0, sh->pos_axis};
            if (pos)
                o->shape[sh->pos_axis] = n_ctx;
        }
    }
    return n;
}

int loom_session_state_owners(const struct loom_session *s, struct loom_state_owner *owners, int cap)
{
    for (int i = 0; i < s->n_owners && i < cap; i++)
        owners[i] = s->owners[i];
    return s->n_owners;
}

void *loom_owner_data(const struct loom_session *s, const struct loom_state_owner *o, int copy)
{
    const struct loom_layer_state *ls = &s->layers[o->layer];
    switch (o->kind) {
    case LOOM_OWNER_CONV:
        return ls->conv[copy];
    case LOOM_OWNER_RECURRENT:
        return ls->rec[copy];
    case LOOM_OWNER_K:
        return ls->k;
    default:
        return ls->v;
    }
}

/* A K/V owner is stored [outer][n_ctx][inner] (outer = the axes before the position axis, inner those
 * after, in elements or, for Q8_0 K, blocks): positions [lo, hi) are one run per outer index. */
void loom_owner_runs(const struct loom_session *s, const struct loom_state_owner *o, int lo, int hi,
                     void (*fn)(void *ctx, void *at, size_t bytes), void *ctx)
{
    int64_t outer = 1;
    for (int a = 0; a < o->pos_axis; a++)
        outer *= o->shape[a];
    size_t row = o->bytes_per_pos / (size_t)outer;
    char *base = loom_owner_data(s, o, 0);
    for (int64_t r = 0; r < outer; r++)
        fn(ctx, base + ((size_t)r * (size_t)s->n_ctx + (size_t)lo) * row, (size_t)(hi - lo) * row);
}

struct kv_copy {
    char *buf;
    int to_state;
};

static void copy_run(void *ctx, void *at, size_t bytes)
{
    struct kv_copy *c = ctx;
    if (c->to_state)
        memcpy(at, c->buf, bytes);
    else
        memcpy(c->buf, at, bytes);
    c->buf += bytes;
}

void loom_session_copy_kv_rows(struct loom_session *s, int lo, int hi, uint16_t *buf, int to_state)
{
    struct kv_copy c = {(char *)buf, to_state};
    for (int i = 0; i < s->n_owners; i++)
        if (s->owners[i].pos_axis >= 0)
            loom_owner_runs(s, &s->owners[i], lo, hi, copy_run, &c);
}

int loom_session_n_ctx(const loom_session *session) { return session->n_ctx; }

uint64_t loom_session_arena_bytes(const loom_session *session) { return session->arena_bytes; }

enum loom_kv_type loom_session_k_type(const loom_session *session) { return session->k_type; }

uint64_t loom_session_state_bytes(const loom_session *session)
{
    uint64_t total = 0;
    for (int i = 0; i < session->n_owners; i++)
        total += session->owners[i].bytes;
    return total;
}

const float *loom_session_last_logits(const loom_session *session)
{
    return session->has_logits ? session->logits : NULL;
}

static void hash_run(void *ctx, void *at, size_t bytes)
{
    XXH3_64bits_update(ctx, at, bytes);
}

/* The public bytes of one owner: the fixed-size owners whole (their public copy), the K/V rows of
 * positions below the frontier only (rows past it are private or stale). */
static void digest_owner(XXH3_state_t *st, const struct loom_session *s, const struct loom_state_owner *o)
{
    XXH3_64bits_update(st, &o->layer, sizeof o->layer);
    XXH3_64bits_update(st, &o->kind, sizeof o->kind);
    if (o->pos_axis < 0)
        XXH3_64bits_update(st, loom_owner_data(s, o, s->cur), o->bytes);
    else
        loom_owner_runs(s, o, 0, s->pos, hash_run, st);
}

uint64_t loom_session_digest(const loom_session *session)
{
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    int32_t head[3] = {session->pos, session->has_logits, session->n_logits};
    XXH3_64bits_update(&st, head, sizeof head);
    for (int i = 0; i < session->n_owners; i++)
        digest_owner(&st, session, &session->owners[i]);
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
