/* qwen35.c — the qwen35 circuits: token embedding, then per layer RMSNorm -> (Gated DeltaNet branch |
 * gated full-attention branch) -> residual -> post-attention RMSNorm -> SwiGLU MLP -> residual, then the
 * final RMSNorm and the output head. A chunk of n tokens goes through each layer before the next one
 * (prefill); decode is the same code with n = 1. Follows llama.cpp src/models/qwen35.cpp and
 * delta-net-base.cpp (fused gated-delta-net path), with its rounding points (see kernels/ops.h). */
#include <math.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "runtime/pool.h"
#include "runtime/session.h"
#include "util/fp16.h"

/* One chunk being evaluated: the session, its model, and where the chunk sits. */
struct chunk {
    struct loom_session *s;
    const struct loom_model *m;
    const struct loom_hparams *hp;
    const struct loom_layer *L;
    struct loom_layer_state *ls;
    int n;    /* tokens in the chunk */
    int pos0; /* position of the first */
};

static void matmul(const struct chunk *c, const struct loom_weight *w, const float *x, float *y)
{
    loom_matmul(c->s->pool, w, x, c->n, y, c->s->sc.mm);
}

/* y[t] = rmsnorm(x[t]) * w for each row t of width n_embd. */
static void norm_rows(const struct chunk *c, const float *x, const float *w, float *y)
{
    int64_t E = c->hp->n_embd;
    for (int t = 0; t < c->n; t++)
        loom_ops_rmsnorm(E, x + t * E, w, c->hp->rms_eps, y + t * E);
}

static void add_rows(const struct chunk *c, float *x, const float *y)
{
    int64_t total = (int64_t)c->n * c->hp->n_embd;
    for (int64_t i = 0; i < total; i++)
        x[i] = y[i] + x[i];
}

/* ---- Gated DeltaNet branch ------------------------------------------------------------------------ */

static int64_t rec_channels(const struct loom_hparams *hp)
{
    return 2 * (int64_t)hp->ssm_n_k_heads * hp->ssm_head_dim + hp->ssm_inner;
}

/* Causal conv1d over channel ranges; each channel walks the chunk's tokens in order. */
static void conv_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct chunk *c = ctx;
    int64_t ch = rec_channels(c->hp);
    int K = (int)c->hp->ssm_conv_kernel;
    for (int t = 0; t < c->n; t++)
        c->s->ops->conv1d_step(end - begin, K, c->ls->conv + begin * (K - 1), c->L->conv1d + begin * K,
                             c->s->sc.a + t * ch + begin, c->s->sc.b + t * ch + begin);
}

/* Gated delta rule per value head: token after token through the head's state. Value head h reads key
 * head h % n_k_heads (tiled, as the reference's fused op). */
static void delta_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct chunk *c = ctx;
    const struct loom_hparams *hp = c->hp;
    const struct loom_scratch *sc = &c->s->sc;
    int d = (int)hp->ssm_head_dim;
    int64_t ch = rec_channels(hp), key_dim = (int64_t)hp->ssm_n_k_heads * d, Hv = hp->ssm_n_v_heads;
    for (int64_t h = begin; h < end; h++) {
        float *M = c->ls->rec + h * d * d;
        int64_t kh = h % hp->ssm_n_k_heads;
        for (int t = 0; t < c->n; t++) {
            const float *row = sc->b + t * ch;
            c->s->ops->delta_rule_step(d, M, row + kh * d, row + key_dim + kh * d, row + 2 * key_dim + h * d,
                                       sc->alpha[t * Hv + h], sc->beta[t * Hv + h],
                                       sc->o + (int64_t)t * hp->ssm_inner + h * d);
        }
    }
}

static void recurrent_branch(struct chunk *c)
{
    const struct loom_hparams *hp = c->hp;
    const struct loom_layer *L = c->L;
    struct loom_scratch *sc = &c->s->sc;
    int64_t ch = rec_channels(hp), d = hp->ssm_head_dim, Hv = hp->ssm_n_v_heads, Hk = hp->ssm_n_k_heads;
    int64_t key_dim = Hk * d, inner = hp->ssm_inner;
    matmul(c, &L->qkv, sc->xn, sc->a);
    matmul(c, &L->z, sc->xn, sc->c);
    matmul(c, &L->beta, sc->xn, sc->beta);
    matmul(c, &L->alpha, sc->xn, sc->alpha);
    for (int t = 0; t < c->n; t++) {
        for (int64_t h = 0; h < Hv; h++) {
            float *b = sc->beta + t * Hv + h, *g = sc->alpha + t * Hv + h;
            *b = loom_ops_sigmoid(*b);
            *g = loom_ops_softplus(*g + L->dt_bias[h]) * L->ssm_a[h];
        }
    }
    loom_pool_parallel_for(c->s->pool, ch, 64, conv_task, c);
    for (int t = 0; t < c->n; t++) {
        float *row = sc->b + t * ch;
        c->s->ops->silu(ch, row, row);
        for (int64_t kh = 0; kh < Hk; kh++) {
            loom_ops_l2norm(d, row + kh * d, hp->rms_eps, row + kh * d);
            loom_ops_l2norm(d, row + key_dim + kh * d, hp->rms_eps, row + key_dim + kh * d);
        }
    }
    loom_pool_parallel_for(c->s->pool, Hv, 1, delta_task, c);
    /* gated RMSNorm: rmsnorm(o) * ssm_norm * silu(z), per head row of d */
    for (int t = 0; t < c->n; t++) {
        for (int64_t h = 0; h < Hv; h++) {
            float *o = sc->o + t * inner + h * d, *z = sc->c + t * inner + h * d;
            loom_ops_rmsnorm(d, o, L->ssm_norm, hp->rms_eps, o);
            c->s->ops->silu(d, z, z);
            for (int64_t j = 0; j < d; j++)
                o[j] *= z[j];
        }
    }
    matmul(c, &L->ssm_out, sc->o, sc->proj);
}

/* ---- gated attention branch ----------------------------------------------------------------------- */

/* One (token, head) pair per item: causal attention over positions 0..pos0+t. */
static void attn_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct chunk *c = ctx;
    const struct loom_hparams *hp = c->hp;
    const struct loom_scratch *sc = &c->s->sc;
    int hd = (int)hp->head_dim_k, hdv = (int)hp->head_dim_v, H = (int)hp->n_head, Hkv = (int)hp->n_head_kv;
    int64_t n_ctx = c->s->n_ctx;
    uint16_t *q16 = sc->q16 + (int64_t)thread * hd;
    float *scores = sc->scores + (int64_t)thread * n_ctx;
    uint16_t *probs16 = sc->probs16 + (int64_t)thread * n_ctx;
    enum loom_attn_order order = c->n > 1 ? LOOM_ATTN_ORDER_BATCH : LOOM_ATTN_ORDER_SINGLE;
    float scale = 1.0f / sqrtf((float)hdv);
    for (int64_t item = begin; item < end; item++) {
        int t = (int)(item / H), h = (int)(item % H), kvh = h / (H / Hkv);
        const float *q = sc->a + (int64_t)t * 2 * H * hd + (int64_t)h * 2 * hd;
        for (int i = 0; i < hd; i++)
            q16[i] = loom_f32_to_f16(q[i]);
        c->s->ops->attn_head(c->pos0 + t + 1, hd, q16, c->ls->k + (int64_t)kvh * hd, (int64_t)Hkv * hd,
                           c->ls->v + (int64_t)kvh * hdv * n_ctx, n_ctx, hdv, scale, order, scores, probs16,
                           sc->o + (int64_t)t * H * hdv + (int64_t)h * hdv);
    }
}

/* q/k RMSNorm, partial NEOX RoPE, and the chunk's K/V rows appended to the F16 cache. */
static void attention_prepare(struct chunk *c)
{
    const struct loom_hparams *hp = c->hp;
    const struct loom_layer *L = c->L;
    struct loom_scratch *sc = &c->s->sc;
    int64_t hd = hp->head_dim_k, hdv = hp->head_dim_v, H = hp->n_head, Hkv = hp->n_head_kv, n_ctx = c->s->n_ctx;
    int n_rot = (int)hp->n_rot;
    for (int t = 0; t < c->n; t++) {
        float *cache = sc->rope + (int64_t)t * n_rot;
        loom_ops_rope_cache(c->pos0 + t, n_rot, hp->rope_freq_base, cache);
        for (int64_t h = 0; h < H; h++) {
            float *q = sc->a + t * 2 * H * hd + h * 2 * hd;
            loom_ops_rmsnorm(hd, q, L->q_norm, hp->rms_eps, q);
            loom_ops_rope_neox(q, n_rot, cache);
        }
        int64_t p = c->pos0 + t;
        for (int64_t h = 0; h < Hkv; h++) {
            float *k = sc->b + t * Hkv * hd + h * hd;
            const float *v = sc->c + t * Hkv * hdv + h * hdv;
            loom_ops_rmsnorm(hd, k, L->k_norm, hp->rms_eps, k);
            loom_ops_rope_neox(k, n_rot, cache);
            uint16_t *kc = c->ls->k + (p * Hkv + h) * hd;
            for (int64_t i = 0; i < hd; i++)
                kc[i] = loom_f32_to_f16(k[i]);
            uint16_t *vc = c->ls->v + h * hdv * n_ctx + p;
            for (int64_t j = 0; j < hdv; j++)
                vc[j * n_ctx] = loom_f32_to_f16(v[j]);
        }
    }
}

static void attention_branch(struct chunk *c)
{
    const struct loom_hparams *hp = c->hp;
    const struct loom_layer *L = c->L;
    struct loom_scratch *sc = &c->s->sc;
    int64_t hd = hp->head_dim_k, hdv = hp->head_dim_v, H = hp->n_head;
    matmul(c, &L->wq, sc->xn, sc->a);
    matmul(c, &L->wk, sc->xn, sc->b);
    matmul(c, &L->wv, sc->xn, sc->c);
    attention_prepare(c);
    loom_pool_parallel_for(c->s->pool, (int64_t)c->n * H, 1, attn_task, c);
    /* output gate: attn * sigmoid(gate), the gate rows following each head's query rows */
    for (int t = 0; t < c->n; t++)
        for (int64_t h = 0; h < H; h++) {
            float *o = sc->o + t * H * hdv + h * hdv;
            const float *gate = sc->a + t * 2 * H * hd + h * 2 * hd + hd;
            for (int64_t j = 0; j < hdv; j++)
                o[j] *= loom_ops_sigmoid(gate[j]);
        }
    matmul(c, &L->wo, sc->o, sc->proj);
}

/* ---- MLP and the whole network -------------------------------------------------------------------- */

static void mlp(struct chunk *c)
{
    const struct loom_layer *L = c->L;
    struct loom_scratch *sc = &c->s->sc;
    int64_t ff = c->hp->n_ff;
    matmul(c, &L->ffn_gate, sc->xn, sc->a);
    matmul(c, &L->ffn_up, sc->xn, sc->b);
    for (int t = 0; t < c->n; t++)
        c->s->ops->swiglu(ff, sc->a + t * ff, sc->b + t * ff, sc->a + t * ff);
    matmul(c, &L->ffn_down, sc->a, sc->proj);
}

static void layer_forward(struct chunk *c, uint32_t il)
{
    struct loom_scratch *sc = &c->s->sc;
    c->L = &c->m->layers[il];
    c->ls = &c->s->layers[il];
    norm_rows(c, sc->x, c->L->attn_norm, sc->xn);
    if (c->L->kind == LOOM_LAYER_RECURRENT)
        recurrent_branch(c);
    else
        attention_branch(c);
    add_rows(c, sc->x, sc->proj);
    norm_rows(c, sc->x, c->L->post_norm, sc->xn);
    mlp(c);
    add_rows(c, sc->x, sc->proj);
}

void loom_qwen35_forward(struct loom_session *s, const int32_t *tokens, int n, float *logits, int all)
{
    struct chunk c = {.s = s, .m = s->model, .hp = &s->model->hp, .n = n, .pos0 = s->pos};
    struct loom_scratch *sc = &s->sc;
    int64_t E = c.hp->n_embd;
    for (int t = 0; t < n; t++)
        loom_weight_get_row(&c.m->tok_embd, tokens[t], sc->x + t * E);
    for (uint32_t il = 0; il < c.hp->n_layer; il++)
        layer_forward(&c, il);
    if (!logits)
        return;
    if (all) {
        norm_rows(&c, sc->x, c.m->output_norm, sc->xn);
        matmul(&c, &c.m->output, sc->xn, logits);
    } else {
        loom_ops_rmsnorm(E, sc->x + (int64_t)(n - 1) * E, c.m->output_norm, c.hp->rms_eps, sc->xn);
        loom_matmul(s->pool, &c.m->output, sc->xn, 1, logits, sc->mm);
    }
}
