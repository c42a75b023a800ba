/* xray.c — the comparison behind `loom xray` and certify's divergence summaries: loom's edges (the session's edge
 * observer) against the reference engine's intermediate tensors (its eval callback), mapped by name, per position,
 * aware of each engine's steps; and planted faults (one value changed by one ULP at one edge). */
#include "cli/xray.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The reference's graph name of each loom edge (llama.cpp src/models/qwen35.cpp, qwen35moe.cpp, delta-net-base.cpp,
 * llama-graph.cpp build_ffn and build_moe_ffn), "NAME-LAYER" inside the layers. `last`: the layer's last node of
 * that name (Kcur and Vcur name a node before and after a reshape or RoPE); else its first. */
static const struct ref_name {
    const char *edge; /* loom's edge name without "blk.N." */
    const char *ref;
    int last;
} REF_NAMES[] = {
    {"embed", "model.input_embed", 0},
    {"attn_norm", "attn_norm", 0},
    {"gdn.qkv", "linear_attn_qkv_mixed", 0},
    {"gdn.z", "z", 0},
    {"gdn.beta", "beta", 0},
    {"gdn.alpha", "alpha", 0},
    {"gdn.conv", "conv_output_raw", 0},
    {"gdn.conv_state", "conv_state_last", 0},
    {"gdn.beta_sigmoid", "beta_sigmoid", 0},
    {"gdn.decay", "gate", 0},
    {"gdn.q", "q_conv_predelta", 0},
    {"gdn.k", "k_conv_predelta", 0},
    {"gdn.v", "v_conv_predelta", 0},
    {"gdn.delta", "attn_output", 0},
    {"gdn.state", "new_state", 0},
    {"gdn.gated_norm", "final_output", 0},
    {"gdn.out", "linear_attn_out", 0},
    {"attn.qg", "Qcur_full", 0},
    {"attn.k", "Kcur", 0},
    {"attn.v", "Vcur", 0},
    {"attn.q_rope", "Qcur", 1},
    {"attn.k_rope", "Kcur", 1},
    {"attn.gate", "attn_gated", 0},
    {"attn.out", "attn_output", 0},
    {"attn_residual", "attn_residual", 0},
    {"post_norm", "attn_post_norm", 0},
    {"ffn.gate", "ffn_gate", 0},
    {"ffn.up", "ffn_up", 0},
    {"ffn.act", "ffn_swiglu", 0},
    {"moe.logits", "ffn_moe_logits", 0},
    {"moe.probs", "ffn_moe_probs", 0},
    {"moe.topk", "ffn_moe_topk", 0},
    {"moe.weights", "ffn_moe_weights_norm", 0},
    {"moe.experts", "ffn_moe_out", 0},
    {"shexp.gate_logit", "shared_expert_gate", 0},
    {"shexp.gate", "ffn_gate", 0},
    {"shexp.up", "ffn_up", 0},
    {"shexp.act", "ffn_swiglu", 0},
    {"shexp.out", "ffn_shexp", 0},
    {"ffn.out", "ffn_out", 0},
    {"out", "l_out", 0},
    {"output_norm", "result_norm", 0},
    {"logits", "result_output", 0},
};
#define N_REF_NAMES ((int)(sizeof REF_NAMES / sizeof REF_NAMES[0]))

/* The step name of an edge ("gdn.conv" of "blk.3.gdn.conv"). */
static const char *step_name(const loom_edge *e)
{
    if (e->layer < 0)
        return e->name;
    const char *dot = strchr(e->name + 4, '.');
    return dot ? dot + 1 : e->name;
}

static const struct ref_name *ref_name_of(const loom_edge *e)
{
    const char *step = step_name(e);
    for (int i = 0; i < N_REF_NAMES; i++)
        if (!strcmp(REF_NAMES[i].edge, step))
            return &REF_NAMES[i];
    return NULL;
}

/* One reference tensor seen during a step, its values in logical order (ne[0] fastest). */
struct capture {
    char name[64]; /* without "-LAYER" */
    int layer;     /* -1 without one */
    int occurrence; /* nodes of the same name and layer before it in its micro-batch */
    int ub_pos0, ub_n; /* its micro-batch: first position and tokens */
    int64_t n;
    void *data; /* n floats or int32 (NULL: a type X-ray does not read) */
};

struct xray_state {
    const struct xray_request *req;
    struct xray_result *res;
    int n_layer;
    char *selected;   /* [n_edges] */
    int *edge_at;     /* [(n_layer + 2) * n_kinds]: edge index of (layer + 1, kind), -1 none */
    int n_kinds;
    char *want_ref;   /* [(n_layer + 1) * N_REF_NAMES]: the reference tensors to capture */
    char *seen;       /* [n_edges]: compared at least once */
    struct capture *caps;
    int n_caps, cap_caps;
    int ub_pos0, ub_n, pos_next; /* the reference's current micro-batch, the next one's first position */
    int perturbed;
    int failed; /* an allocation failed while capturing or comparing */
};

/* The array arr of *cap elements of elem bytes with room for element n (doubled when full), or NULL when memory
 * runs out (x->failed set; arr unchanged and still owned by the caller). */
static void *grow(struct xray_state *x, void *arr, int *cap, int n, size_t elem)
{
    if (n < *cap)
        return arr;
    int want = *cap ? 2 * *cap : 256;
    void *p = realloc(arr, (size_t)want * elem);
    if (p)
        *cap = want;
    else
        x->failed = 1;
    return p;
}

/* "attn_norm-12" -> base "attn_norm", layer 12; "result_output" -> layer -1. */
static void split_name(const char *full, char *base, size_t cap, int *layer)
{
    snprintf(base, cap, "%s", full);
    *layer = -1;
    char *dash = strrchr(base, '-');
    if (dash && dash[1] && strspn(dash + 1, "0123456789") == strlen(dash + 1)) {
        *layer = atoi(dash + 1);
        *dash = 0;
    }
}

static int wanted(const struct xray_state *x, const char *base, int layer)
{
    if (layer < -1 || layer >= x->n_layer)
        return 0;
    for (int i = 0; i < N_REF_NAMES; i++)
        if (!strcmp(REF_NAMES[i].ref, base) && x->want_ref[(layer + 1) * N_REF_NAMES + i])
            return 1;
    return 0;
}

/* t's values in logical order (ne[0] fastest) into a new array: floats, or int32 for an I32 tensor; NULL for
 * other types or when memory runs out (*failed set). */
static void *gather(const struct loom_ref_tensor *t, int64_t n, int *failed)
{
    if (t->type != LOOM_REF_F32 && t->type != LOOM_REF_I32)
        return NULL;
    char *out = malloc((size_t)(n ? n : 1) * 4), *dst = out;
    if (!out) {
        *failed = 1;
        return NULL;
    }
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                const char *row = (const char *)t->data + i3 * t->nb[3] + i2 * t->nb[2] + i1 * t->nb[1];
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++, dst += 4)
                    memcpy(dst, row + i0 * t->nb[0], 4);
            }
    return out;
}

/* The reference's eval callback: each micro-batch starts with the token embeddings (which tell its size); the
 * wanted tensors are copied out. */
static bool capture_cb(void *tensor, bool ask, void *user)
{
    struct xray_state *x = user;
    const struct loom_ref_tensor *t = tensor;
    char base[64];
    int layer;
    split_name(t->name, base, sizeof base, &layer);
    int embed = !strcmp(base, "model.input_embed");
    if (ask)
        return embed || wanted(x, base, layer);
    if (embed) {
        x->ub_pos0 = x->pos_next;
        x->ub_n = (int)t->ne[1];
        x->pos_next += x->ub_n;
    }
    if (!wanted(x, base, layer))
        return true;
    struct capture *caps = grow(x, x->caps, &x->cap_caps, x->n_caps, sizeof *x->caps);
    if (!caps)
        return true;
    x->caps = caps;
    struct capture *c = &x->caps[x->n_caps];
    snprintf(c->name, sizeof c->name, "%s", base);
    c->layer = layer;
    c->occurrence = 0;
    for (int i = 0; i < x->n_caps; i++) {
        const struct capture *o = &x->caps[i];
        c->occurrence += o->layer == layer && o->ub_pos0 == x->ub_pos0 && !strcmp(o->name, base);
    }
    c->ub_pos0 = x->ub_pos0, c->ub_n = x->ub_n;
    c->n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    c->data = gather(t, c->n, &x->failed);
    x->n_caps++;
    return true;
}

static void drop_captures(struct xray_state *x)
{
    for (int i = 0; i < x->n_caps; i++)
        free(x->caps[i].data);
    x->n_caps = 0;
}

/* The capture holding edge e at position pos, and the index of its row there; NULL when the reference has none
 * (a state edge at a position where its step does not end, or a name it never showed). A capture of fewer rows
 * than its micro-batch's tokens holds the last ones (the logits rows the batch asked for). */
static const struct capture *find_row(const struct xray_state *x, const loom_edge *e, int pos, int64_t *row)
{
    const struct ref_name *rn = ref_name_of(e);
    const struct capture *hit = NULL;
    for (int i = 0; rn && i < x->n_caps; i++) {
        const struct capture *c = &x->caps[i];
        if (c->layer != e->layer || strcmp(c->name, rn->ref) || pos < c->ub_pos0 || pos >= c->ub_pos0 + c->ub_n)
            continue;
        if (!rn->last && c->occurrence > 0)
            continue;
        hit = c; /* the last one seen wins for `last` */
        if (!rn->last)
            break;
    }
    if (!hit)
        return NULL;
    if (e->per_step) {
        *row = 0;
        return pos == hit->ub_pos0 + hit->ub_n - 1 ? hit : NULL;
    }
    int64_t rows = e->width ? hit->n / e->width : 0;
    *row = pos - (hit->ub_pos0 + hit->ub_n - rows);
    return *row >= 0 ? hit : NULL;
}

/* Ordered integer of a float's bits: adjacent floats differ by 1 (so the distance counts ULPs). */
static int64_t ordered(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static struct xray_row *add_row(struct xray_state *x)
{
    struct xray_result *r = x->res;
    struct xray_row *rows = grow(x, r->rows, &r->cap_rows, r->n_rows, sizeof *r->rows);
    if (!rows)
        return NULL;
    r->rows = rows;
    return &r->rows[r->n_rows++];
}

/* Compare loom's row t of event ev (edge idx) with the reference's at the same position. */
static void compare_row(struct xray_state *x, int idx, const loom_edge_event *ev, int t)
{
    const loom_edge *e = &x->res->edges[idx];
    int pos = ev->pos0 + t;
    int64_t ref_row;
    const struct capture *c = find_row(x, e, pos, &ref_row);
    if (!c || !c->data)
        return;
    struct xray_row *row = add_row(x);
    if (!row)
        return;
    x->seen[idx] = 1;
    *row = (struct xray_row){.edge = idx, .pos = pos};
    /* per token: whole rows of the edge's width, at most one per token of the micro-batch */
    row->shape_ok = e->per_step ? c->n == e->width : c->n % e->width == 0 && c->n / e->width <= c->ub_n;
    if (!row->shape_ok) {
        row->n_diff = e->width;
        return;
    }
    const char *ref = (const char *)c->data + ref_row * e->width * 4;
    const char *base = (const char *)ev->data + (int64_t)t * ev->row_stride * 4;
    double sq = 0;
    for (int64_t i = 0, k = 0; i < ev->n_seg; i++)
        for (int64_t j = 0; j < ev->seg_len; j++, k++) {
            const char *mine = base + (i * ev->seg_stride + j) * 4;
            if (!memcmp(mine, ref + k * 4, 4))
                continue;
            row->n_diff++;
            if (e->is_int)
                continue;
            float a, b;
            memcpy(&a, mine, 4), memcpy(&b, ref + k * 4, 4);
            double d = fabs((double)a - (double)b);
            int64_t u = llabs(ordered(a) - ordered(b));
            row->max_abs = d > row->max_abs ? d : row->max_abs;
            row->max_ulp = u > (int64_t)row->max_ulp ? (uint32_t)(u > UINT32_MAX ? UINT32_MAX : u) : row->max_ulp;
            sq += d * d;
        }
    row->rmse = sqrt(sq / (double)e->width);
}

/* The planted fault: the first value of the row at the requested position goes up by one ULP. */
static void perturb(struct xray_state *x, const loom_edge *e, const loom_edge_event *ev)
{
    const struct xray_request *q = x->req;
    if (x->perturbed || !q->perturb || strcmp(e->name, q->perturb))
        return;
    int t = q->perturb_pos < 0 ? 0 : q->perturb_pos - ev->pos0;
    if (t < 0 || t >= ev->n_rows)
        return;
    float *v = (float *)ev->data + (int64_t)t * ev->row_stride;
    *v = nextafterf(*v, INFINITY);
    x->perturbed = 1;
}

static void observe(void *ctx, const loom_edge_event *ev)
{
    struct xray_state *x = ctx;
    if (ev->layer < -1 || ev->layer >= x->n_layer || ev->kind < 0 || ev->kind >= x->n_kinds)
        return;
    int idx = x->edge_at[(ev->layer + 1) * x->n_kinds + ev->kind];
    if (idx < 0 || !x->selected[idx])
        return;
    perturb(x, &x->res->edges[idx], ev);
    for (int t = 0; t < ev->n_rows; t++)
        compare_row(x, idx, ev, t);
}

/* Which edges the request compares, where each (layer, kind) sits in the list, which reference tensors to
 * capture. Returns LOOM_OK, or an error naming a bad --perturb edge. */
static int plan(struct xray_state *x, const loom_model *m, loom_error *err)
{
    struct xray_result *r = x->res;
    const struct xray_request *q = x->req;
    r->n_edges = loom_model_edges(m, NULL, 0);
    r->edges = malloc((size_t)r->n_edges * sizeof *r->edges);
    if (!r->edges)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for the edge list (%d edges)", r->n_edges);
    loom_model_edges(m, r->edges, r->n_edges);
    for (int i = 0; i < r->n_edges; i++) {
        x->n_layer = r->edges[i].layer + 1 > x->n_layer ? r->edges[i].layer + 1 : x->n_layer;
        x->n_kinds = r->edges[i].kind + 1 > x->n_kinds ? r->edges[i].kind + 1 : x->n_kinds;
    }
    x->selected = calloc((size_t)r->n_edges, 1);
    x->seen = calloc((size_t)r->n_edges, 1);
    x->edge_at = malloc((size_t)(x->n_layer + 1) * (size_t)x->n_kinds * sizeof *x->edge_at);
    x->want_ref = calloc((size_t)(x->n_layer + 1) * N_REF_NAMES, 1);
    if (!x->selected || !x->seen || !x->edge_at || !x->want_ref)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for the edge tables");
    for (int i = 0; i < (x->n_layer + 1) * x->n_kinds; i++)
        x->edge_at[i] = -1;
    int rc = xray_select(q, r->edges, r->n_edges, x->selected, err);
    for (int i = 0; rc == LOOM_OK && i < r->n_edges; i++) {
        const loom_edge *e = &r->edges[i];
        x->edge_at[(e->layer + 1) * x->n_kinds + e->kind] = i;
        const struct ref_name *rn = ref_name_of(e);
        if (x->selected[i] && rn)
            x->want_ref[(e->layer + 1) * N_REF_NAMES + (rn - REF_NAMES)] = 1;
    }
    return rc;
}

/* The perturbed edge's index in edges[n] (selected[] marks it), or an error naming what is wrong. */
static int select_perturbed(const struct xray_request *q, const loom_edge *edges, int n, char *selected,
                            loom_error *err)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(edges[i].name, q->perturb)) {
            if (edges[i].is_int)
                return loom_errorf(err, LOOM_E_ARG, "--perturb %s: expected an edge of floats, found one of int32 "
                                   "(expert ids)", q->perturb);
            if (edges[i].per_step && !q->per_token && q->perturb_pos >= 0 && q->perturb_pos < q->n_prompt - 1)
                return loom_errorf(err, LOOM_E_ARG, "--perturb %s@%d: a state edge exists only at the end of each "
                                   "step, and the prompt is one step ending at position %d (add --per-token)",
                                   q->perturb, q->perturb_pos, q->n_prompt - 1);
            selected[i] = 1;
            return LOOM_OK;
        }
    return loom_errorf(err, LOOM_E_ARG, "--perturb: expected an edge of this model (loom xray --list), found '%s'",
                       q->perturb);
}

int xray_select(const struct xray_request *q, const loom_edge *edges, int n, char *selected, loom_error *err)
{
    int n_layer = 0;
    for (int i = 0; i < n; i++)
        n_layer = edges[i].layer + 1 > n_layer ? edges[i].layer + 1 : n_layer;
    char found[32];
    snprintf(found, sizeof found, q->layer_lo == q->layer_hi ? "%d" : "%d-%d", q->layer_lo, q->layer_hi);
    if (q->layer_lo >= n_layer || (q->layer_hi != XRAY_ALL_LAYERS && q->layer_hi >= n_layer))
        return loom_errorf(err, LOOM_E_ARG, "--layers: expected layers within 0-%d (the model has %d), found %s",
                           n_layer - 1, n_layer, found);
    int n_selected = 0;
    for (int i = 0; i < n; i++) {
        const loom_edge *e = &edges[i];
        int in_layers = e->layer < 0 || (e->layer >= q->layer_lo && e->layer <= q->layer_hi);
        selected[i] = in_layers && (!q->pattern || fnmatch(q->pattern, e->name, 0) == 0);
        n_selected += selected[i];
    }
    if (!n_selected)
        return loom_errorf(err, LOOM_E_ARG, "--edges '%s': no edge of this model matches it%s (loom xray --list)",
                           q->pattern ? q->pattern : "", q->layer_hi != XRAY_ALL_LAYERS ? " within --layers" : "");
    return q->perturb && q->perturb[0] ? select_perturbed(q, edges, n, selected, err) : LOOM_OK;
}

/* The most likely sampleable token of loom's last logits (the next id of a greedy continuation). */
static int32_t greedy(const loom_model *m, const float *logits)
{
    int n = loom_model_n_logits(m), best = -1;
    for (int i = 0; i < n; i++)
        if (loom_model_token_sampleable(m, i) && (best < 0 || logits[i] > logits[best]))
            best = i;
    return best < 0 ? 0 : best;
}

/* Evaluate one step (tokens[n] at position pos) in the reference, then in loom with the observer comparing. */
static int step(struct xray_state *x, const struct loom_ref *r, struct loom_ref_context *rctx, loom_session *s,
                int32_t *tokens, int n, loom_error *err)
{
    drop_captures(x);
    int rc = loom_ref_eval(r, rctx, tokens, n, err);
    if (rc == LOOM_OK)
        rc = loom_session_eval(s, tokens, n, NULL, LOOM_LOGITS_LAST, err);
    if (rc == LOOM_OK && x->failed)
        rc = loom_errorf(err, LOOM_E_NOMEM, "out of memory keeping the reference's tensors");
    return rc;
}

static int row_order(const void *a, const void *b)
{
    const struct xray_row *p = a, *q = b;
    return p->pos != q->pos ? (p->pos > q->pos) - (p->pos < q->pos) : (p->edge > q->edge) - (p->edge < q->edge);
}

/* Sort the rows (position, then the edge's place: layer, then circuit order) and find the first divergent row and
 * the last exact one before it; list the selected edges the reference never showed. */
static void summarize(struct xray_state *x)
{
    struct xray_result *r = x->res;
    qsort(r->rows, (size_t)r->n_rows, sizeof *r->rows, row_order);
    r->first_div = r->last_exact = -1;
    for (int i = 0; i < r->n_rows && r->first_div < 0; i++) {
        if (r->rows[i].n_diff || !r->rows[i].shape_ok)
            r->first_div = i;
        else
            r->last_exact = i;
    }
    for (int i = 0; i < r->n_edges; i++)
        if (x->selected[i] && !x->seen[i]) {
            if (r->n_missing < (int)(sizeof r->missing / sizeof r->missing[0]))
                snprintf(r->missing[r->n_missing], sizeof r->missing[0], "%s", r->edges[i].name);
            r->n_missing++;
        }
}

static int run_steps(struct xray_state *x, const loom_model *m, const struct loom_ref *r, struct loom_ref_context *rctx,
                     loom_session *s, loom_error *err)
{
    const struct xray_request *q = x->req;
    int n_ids = q->n_prompt + (q->decode_given ? q->n_decode : 1);
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids);
    if (!ids)
        return loom_errorf(err, LOOM_E_NOMEM, "out of memory for %d token ids", n_ids);
    memcpy(ids, q->tokens, (size_t)(q->n_prompt + (q->decode_given ? q->n_decode : 0)) * sizeof *ids);
    int rc = LOOM_OK;
    for (int i = 0; rc == LOOM_OK && i < q->n_prompt; i += q->per_token ? 1 : q->n_prompt)
        rc = step(x, r, rctx, s, ids + i, q->per_token ? 1 : q->n_prompt, err);
    for (int i = 0; rc == LOOM_OK && i < q->n_decode; i++) {
        int32_t *id = q->decode_given ? ids + q->n_prompt + i : ids;
        if (!q->decode_given)
            *id = greedy(m, loom_session_last_logits(s));
        rc = step(x, r, rctx, s, id, 1, err);
    }
    free(ids);
    return rc;
}

int xray_compare(const loom_model *m, const struct loom_ref *r, struct loom_ref_model *rm,
                 const struct xray_request *req, struct xray_result *out, loom_error *err)
{
    memset(out, 0, sizeof *out);
    struct xray_state x = {.req = req, .res = out};
    int rc = plan(&x, m, err);
    int n_ctx = req->n_prompt + req->n_decode, n_batch = req->per_token ? 1 : req->n_prompt;
    struct loom_ref_context *rctx = NULL;
    loom_session *s = NULL;
    if (rc == LOOM_OK) {
        rctx = loom_ref_context_exact(r, rm, n_ctx, n_batch, n_batch < 512 ? n_batch : 512, req->n_threads,
                                      req->k_type, capture_cb, &x, err);
        rc = rctx ? LOOM_OK : err->code;
    }
    if (rc == LOOM_OK) {
        loom_session_params sp = {.n_ctx = n_ctx, .n_threads = req->n_threads, .numerics = req->numerics,
                                  .n_ubatch = (int)r->n_ubatch(rctx), .k_type = req->k_type};
        s = loom_session_new(m, &sp, err);
        rc = s ? LOOM_OK : err->code;
    }
    if (rc == LOOM_OK) {
        loom_session_set_observer(s, observe, &x);
        rc = run_steps(&x, m, r, rctx, s, err);
    }
    if (rc == LOOM_OK && req->perturb && !x.perturbed)
        rc = loom_errorf(err, LOOM_E_ARG, "--perturb %s: the edge was never evaluated at position %d (%d position%s)",
                         req->perturb, req->perturb_pos, n_ctx, n_ctx == 1 ? "" : "s");
    if (rc == LOOM_OK)
        summarize(&x);
    drop_captures(&x);
    free(x.caps), free(x.selected), free(x.seen), free(x.edge_at), free(x.want_ref);
    loom_session_free(s);
    if (rctx)
        r->free(rctx);
    if (rc != LOOM_OK)
        xray_result_free(out);
    return rc;
}

void xray_result_free(struct xray_result *res)
{
    free(res->edges);
    free(res->rows);
    memset(res, 0, sizeof *res);
}

void xray_describe(const struct xray_result *res, int i, char *buf, size_t cap)
{
    const struct xray_row *w = &res->rows[i];
    const loom_edge *e = &res->edges[w->edge];
    if (!w->shape_ok)
        snprintf(buf, cap, "%s pos %d: shape differs (loom %lld values a row)", e->name, w->pos, (long long)e->width);
    else if (!w->n_diff)
        snprintf(buf, cap, "%s pos %d: bitwise equal (%lld values)", e->name, w->pos, (long long)e->width);
    else if (e->is_int)
        snprintf(buf, cap, "%s pos %d: %lld of %lld ids differ", e->name, w->pos, (long long)w->n_diff,
                 (long long)e->width);
    else
        snprintf(buf, cap, "%s pos %d: %lld of %lld differ, max |d| %.3g, RMSE %.3g, max ULP %u", e->name, w->pos,
                 (long long)w->n_diff, (long long)e->width, w->max_abs, w->rmse, w->max_ulp);
}
