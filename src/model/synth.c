/* synth.c — the synthetic qwen35 / qwen35moe generator: presets, the seeded PRNG (splitmix64 + Marsaglia polar
 * normals), the well-conditioned weight recipe (../shared/REFERENCE.md, "Synthetic models must be
 * well-conditioned"), the routers of the MoE presets (README "Synthetic MoE models") and the GGUF layout llama.cpp
 * expects for LLM_ARCH_QWEN35 / LLM_ARCH_QWEN35MOE, streamed tensor by tensor (synth_fill yields one tensor's
 * bytes at a time). */
#include "model/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/ops.h"
#include "kernels/types.h"
#include "model/quantize.h"
#include "util/error.h"
#include "util/fp16.h"

/* ---- presets ------------------------------------------------------------------------------------ */

static const struct loom_synth_preset synth_presets[] = {
    /* smallest valid model, for fast unit tests: 1 Gated DeltaNet + 1 attention layer, H_k < H_v */
    {"micro", 2, 128, 256, 2, 1, 64, 16, {3, 3, 2, 0}, 1e7f, 1e-6f, 2, 32, 1, 2, 4, 4096, 0, 0, 0, 0, 0, 0, 0},
    /* 3 Gated DeltaNet + 1 attention layer; attention head dims as in the real model */
    {"tiny", 4, 256, 512, 2, 1, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 64, 2, 4, 4, 32768, 0, 0, 0, 0, 0, 0, 0},
    /* Qwen3.5-0.8B text geometry */
    {"0.8b", 24, 1024, 3584, 8, 2, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 16, 4, 262144, 248320, 0, 0, 0, 0,
     0, 0},
    /* qwen35moe, tiny's trunk: exactly 8 experts (llama_tensor_get_type's n_expert == 8 branches), 2 used,
     * gate and up experts separate (as the converter writes them) */
    {"tiny-moe", 4, 256, 0, 2, 1, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 64, 2, 4, 4, 32768, 0, 8, 2, 256, 256, 0, 0},
    /* fewer than 8 experts (the n_expert != 8 branches, and n_expert >= 4) */
    {"tiny-moe-e4", 4, 256, 0, 2, 1, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 64, 2, 4, 4, 32768, 0, 4, 2, 256, 256,
     0, 0},
    /* more than 8 experts (the n_expert != 8 branches, as the real models take them) */
    {"tiny-moe-e16", 4, 256, 0, 2, 1, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 64, 2, 4, 4, 32768, 0, 16, 4, 256, 256,
     0, 0},
    /* 8 experts with the fused ffn_gate_up_exps */
    {"tiny-moe-fused", 4, 256, 0, 2, 1, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 64, 2, 4, 4, 32768, 0, 8, 2, 256, 256,
     1, 0},
    /* Qwen3.5-35B-A3B layer shapes and all 256 experts, 8 of its 40 layers (about 4.4 GB at Q4_K_M) */
    {"moe-mid", 8, 2048, 0, 16, 2, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 32, 4, 262144, 248320, 256, 8,
     512, 512, 0, 0},
    /* Qwen3.5-35B-A3B text geometry (README "Synthetic MoE models": where each number comes from) */
    {"35b-a3b", 40, 2048, 0, 16, 2, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 32, 4, 262144, 248320, 256, 8,
     512, 512, 0, 0},
    /* the other published Qwen3.5 text geometries (README "Synthetic models of every published geometry": the
     * source of each number, and which are unconfirmed) */
    {"2b", 24, 2048, 6144, 8, 2, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 16, 4, 262144, 248320, 0, 0, 0, 0,
     0, 0},
    {"4b", 32, 2560, 9216, 16, 4, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 32, 4, 262144, 248320, 0, 0, 0, 0,
     0, 0},
    {"9b", 32, 4096, 12288, 16, 4, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 32, 4, 262144, 248320, 0, 0, 0,
     0, 0, 1},
    {"27b", 64, 5120, 17408, 24, 4, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 48, 4, 262144, 248320, 0, 0, 0,
     0, 0, 1},
    {"122b-a10b", 48, 3072, 0, 32, 2, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 64, 4, 262144, 248320, 256, 8,
     1024, 1024, 0, 1},
    {"397b-a17b", 60, 4096, 0, 32, 2, 256, 64, {11, 11, 10, 0}, 1e7f, 1e-6f, 4, 128, 16, 64, 4, 262144, 248320, 512,
     10, 1024, 1024, 0, 1},
};

const struct loom_synth_preset *loom_synth_find_preset(const char *name)
{
    for (size_t i = 0; i < sizeof synth_presets / sizeof synth_presets[0]; i++)
        if (!strcmp(synth_presets[i].name, name))
            return &synth_presets[i];
    return NULL;
}

/* ---- recipe constants (REFERENCE.md; the Python worked example's defaults) -------------------------- */

#define SYNTH_EMB_STD 0.3f        /* rms of real-token embedding rows */
#define SYNTH_PAD_STD 0.03f       /* rms of vocabulary padding rows (0.1 x real: they never win) */
#define SYNTH_RES_RANK 0.1        /* fraction of residual directions carrying the energy */
#define SYNTH_RES_FLOOR 0.1       /* relative amplitude of the other ("bulk") directions */
#define SYNTH_MIN_DEPTH 24        /* layers assumed by the depth scaling of shallow presets */
#define SYNTH_FULL_ATTN_GAIN 2.0f /* extra gain on full-attention attn_output */
#define SYNTH_NORM_JITTER 0.1f    /* norm weights 1 + jitter * N(0,1) */
#define SYNTH_OUT_NORM_NEG 0.6    /* fraction of output_norm channels made negative */
#define SYNTH_QK_CORR 0.9f        /* correlation of DeltaNet q and k projections and conv taps */
#define SYNTH_CONV_BOUND 0.5f     /* conv taps U(-b, b) ... */
#define SYNTH_CONV_SELF 1.0f      /* ... plus this on the current-token tap */
#define SYNTH_A_LO 1.0            /* A ~ U(lo, hi), stored as ssm_a = -A */
#define SYNTH_A_HI 16.0
#define SYNTH_DT_LO 1e-3          /* dt ~ logU(lo, hi), stored as ssm_dt.bias = softplus^-1(dt) */
#define SYNTH_DT_HI 1e-1
#define SYNTH_ROUTER_GAIN 1.0f    /* router logits' per-token spread (std) */
#define SYNTH_SHEXP_GATE_GAIN 1.0f /* shared expert gate logit std: sigmoid spread around 0.5 */
#define SYNTH_SKEW_SHARE 0.5f     /* skewed router: share of every real token's embedding along the shared direction */
#define SYNTH_SKEW_ZIPF 0.5       /* skewed router: the expert of popularity rank k gets logit bias -a ln(k + 1)
                                   * (README "Synthetic MoE models": why 0.5) */

/* ---- PRNG ------------------------------------------------------------------------------------------ */

struct synth_rng {
    uint64_t s;
};

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit output per call. */
static uint64_t synth_rng_next(struct synth_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* An independent stream per (seed, stream id): tensors are generated independently of each other. */
static struct synth_rng synth_rng_stream(uint64_t seed, uint64_t id)
{
    struct synth_rng r = {seed ^ (id * 0xD1B54A32D192ED03ull)};
    r.s = synth_rng_next(&r);
    return r;
}

/* Uniform double in [0, 1). */
static double synth_rng_uniform(struct synth_rng *r)
{
    return (double)(synth_rng_next(r) >> 11) * 0x1p-53;
}

/* x[0..n) ~ N(0, 1): Marsaglia's polar method on two 32-bit uniforms per draw. */
static void synth_rng_normal(struct synth_rng *r, float *x, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint64_t b = synth_rng_next(r);
        float u = (float)(int32_t)(uint32_t)b * 0x1p-31f, v = (float)(int32_t)(uint32_t)(b >> 32) * 0x1p-31f;
        float s = u * u + v * v;
        if (s >= 1.0f || s == 0.0f)
            continue;
        float f = sqrtf(-2.0f * logf(s) / s);
        x[i++] = u * f;
        if (i < n)
            x[i++] = v * f;
    }
}

/* perm[0..k) = k distinct indices drawn uniformly from [0, n) (partial Fisher-Yates over perm[0..n)). */
static void synth_rng_choose(struct synth_rng *r, uint32_t *perm, uint32_t n, uint32_t k)
{
    for (uint32_t i = 0; i < n; i++)
        perm[i] = i;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t j = i + (uint32_t)(synth_rng_uniform(r) * (n - i));
        uint32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

/* ---- shared residual basis -------------------------------------------------------------------------
 * B = H D3 H D2 H D1 / E^(3/2) with H the Walsh-Hadamard matrix and Di random sign diagonals: an orthogonal,
 * well-mixing rotation applied in O(E log E) instead of a dense E x E product. */

static void synth_scale(float *x, size_t n, float a)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

struct synth {
    const struct loom_synth_params *par;
    const struct loom_synth_preset *P;
    uint32_t E, n_rows, n_tok;
    uint32_t blk;     /* the Walsh-Hadamard block: E when a power of two, else its largest power-of-two divisor */
    float *sign;      /* [3][E] the Di of B */
    uint32_t *mix;    /* [3][E] (blk < E only) the permutation after each block transform, mixing the blocks */
    float *tmp;       /* [E] (blk < E only) permutation staging */
    float *prof;      /* [E] residual profile p (sum p^2 = E) */
    float basis_norm; /* blk^(-3/2): the transforms' norm gain undone */
    float c_in;       /* sqrt(E / sum p^4): a profile-shaped rms-1 input gives rms-1 reads */
    float *vec;       /* [E] one row or column */
    float *shared;    /* [E] skewed router: the direction every real token's embedding shares (rms 1), else NULL */
    uint32_t *perm;   /* [E] permutation work array */
    float *scratch;   /* staging for tensors generated column-wise or with row mixing */
    struct synth_tensor *t;
    uint32_t n_t;
    size_t *order;    /* [n_t] the tensor written k-th (a recipe's file: the reference's order), or NULL: as planned */
    uint64_t done_bytes, total_bytes;
    /* the tensor being generated, for progress within it: its index in file order, name and bytes; and the bytes
     * done from which progress is next reported within a tensor */
    uint64_t cur_index, cur_bytes, next_report;
    const char *cur_name;
    int cancelled;    /* the abort callback asked to stop (synth_poll) */
    int sparse;       /* loom_synth_write_sparse: no data generated or written */
    uint32_t n_split; /* loom_synth_write_sparse: parts (0 or 1: one file) */
};

/* Rows or columns generated between two polls of the abort callback. */
#define SYNTH_POLL_ROWS 64
/* Progress within tensors is reported at most about this many times a run (besides once before each tensor). */
#define SYNTH_PROGRESS_STEPS 200

/* Progress within the current tensor, `at` of its `of` rows or columns generated: reported when the bytes done
 * have moved a step (1 / SYNTH_PROGRESS_STEPS of the total) since the last such report. */
static void synth_progress_within(struct synth *s, uint64_t at, uint64_t of)
{
    uint64_t done = s->done_bytes + (uint64_t)((double)s->cur_bytes * (double)at / (double)of);
    if (!s->par->progress || !at || done < s->next_report)
        return;
    s->par->progress(s->par->progress_ctx, s->cur_index, s->n_t, done, s->total_bytes, s->cur_name);
    s->next_report = done + s->total_bytes / SYNTH_PROGRESS_STEPS + 1;
}

/* At every SYNTH_POLL_ROWS-th row (or column) i, `at` of the tensor's `of` done: report progress within the tensor
 * and poll the abort callback; nonzero (and s->cancelled set) when it asks to stop. */
static int synth_poll(struct synth *s, uint64_t i, uint64_t at, uint64_t of)
{
    if (i % SYNTH_POLL_ROWS)
        return s->cancelled;
    synth_progress_within(s, at, of);
    if (s->par->abort && s->par->abort(s->par->abort_ctx))
        s->cancelled = 1;
    return s->cancelled;
}

/* x <- B x / basis_norm (caller folds basis_norm into its scale). When E is not a power of two (blk < E), each
 * transform runs on the E / blk blocks of x and a random permutation then mixes the blocks: still orthogonal,
 * with a norm gain of blk^(3/2). */
static void synth_basis_apply(const struct synth *s, float *x)
{
    for (int r = 0; r < 3; r++) {
        const float *d = s->sign + (size_t)r * s->E;
        for (uint32_t i = 0; i < s->E; i++)
            x[i] *= d[i];
        for (uint32_t b = 0; b < s->E; b += s->blk)
            loom_ops_hadamard((int)s->blk, x + b);
        if (s->blk == s->E)
            continue;
        const uint32_t *m = s->mix + (size_t)r * s->E;
        for (uint32_t i = 0; i < s->E; i++)
            s->tmp[i] = x[m[i]];
        memcpy(x, s->tmp, s->E * sizeof(float));
    }
}

static void synth_basis_init(struct synth *s)
{
    uint32_t E = s->E;
    struct synth_rng r = synth_rng_stream(s->par->seed, 0xBA515ull);
    for (size_t i = 0; i < 3 * (size_t)E; i++)
        s->sign[i] = (synth_rng_next(&r) >> 63) ? -1.0f : 1.0f;
    /* dominant directions: a random subset of k coordinates gets amplitude 1, the rest the floor */
    uint32_t k = (uint32_t)lround(SYNTH_RES_RANK * E);
    if (k == 0)
        k = 1;
    for (uint32_t i = 0; i < E; i++)
        s->prof[i] = (float)SYNTH_RES_FLOOR;
    synth_rng_choose(&r, s->perm, E, k);
    for (uint32_t i = 0; i < k; i++)
        s->prof[s->perm[i]] = 1.0f;
    double s2 = 0, s4 = 0;
    for (uint32_t i = 0; i < E; i++)
        s2 += (double)s->prof[i] * s->prof[i];
    float scale = (float)sqrt(E / s2);
    for (uint32_t i = 0; i < E; i++) {
        s->prof[i] *= scale;
        s4 += (double)s->prof[i] * s->prof[i] * s->prof[i] * s->prof[i];
    }
    s->c_in = (float)sqrt(E / s4);
    s->basis_norm = (float)pow((double)s->blk, -1.5);
    for (int m = 0; s->blk < E && m < 3; m++) /* drawn last: a power-of-two preset's stream is unchanged */
        synth_rng_choose(&r, s->mix + (size_t)m * E, E, E);
    if (s->shared) { /* the skewed router's shared direction: profile-shaped like a token row, rms 1 */
        synth_rng_normal(&r, s->shared, E);
        double ss = 0;
        for (uint32_t i = 0; i < E; i++)
            s->shared[i] *= s->prof[i];
        synth_basis_apply(s, s->shared);
        for (uint32_t i = 0; i < E; i++)
            ss += (double)s->shared[i] * s->shared[i];
        synth_scale(s->shared, E, (float)sqrt(E / ss));
    }
}

/* ---- tensor table ------------------------------------------------------------------------------------ */

enum synth_kind {
    SYNTH_EMBD,     /* token_embd: profile-shaped rotated rows for real tokens, small isotropic padding rows */
    SYNTH_OUT_NORM, /* output_norm: 1 + jitter, SYNTH_OUT_NORM_NEG of the channels negated */
    SYNTH_NORM,     /* RMSNorm weights stored as 1 + w (and ssm_norm, also ~1) */
    SYNTH_READ,     /* reads the residual: rows B (g . p) c_in gain / sqrt(E) */
    SYNTH_QKV,      /* SYNTH_READ with k rows correlated to q rows */
    SYNTH_WRITE,    /* writes the residual: columns B (h . p), h ~ N(0, gain^2 / n_in) */
    SYNTH_CONV,     /* ssm_conv1d taps */
    SYNTH_DT,       /* ssm_dt.bias */
    SYNTH_A,        /* ssm_a = -A */
    SYNTH_ROUTER,   /* ffn_gate_inp: SYNTH_READ rows, plus for the skewed router a per-expert bias along shared */
};

struct synth_tensor {
    char name[48];
    enum synth_kind kind;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[3]; /* ggml order: ne[0] contiguous; ne[2] experts (1 for a matrix or vector) */
    float gain;
};

static void synth_add(struct synth *s, int layer, const char *base, enum synth_kind kind, uint32_t type,
                      uint64_t ne0, uint64_t ne1, float gain)
{
    struct synth_tensor *t = &s->t[s->n_t++];
    if (layer >= 0)
        snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, base);
    else
        snprintf(t->name, sizeof t->name, "%s", base);
    t->kind = kind;
    t->type = type;
    t->n_dims = ne1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->ne[2] = 1;
    t->gain = gain;
}

/* A 3-D expert tensor: n_expert matrices [ne0, ne1] of one kind. */
static void synth_add_experts(struct synth *s, int layer, const char *base, enum synth_kind kind, uint64_t ne0,
                              uint64_t ne1, float gain)
{
    synth_add(s, layer, base, kind, s->par->wtype, ne0, ne1, gain);
    s->t[s->n_t - 1].n_dims = 3;
    s->t[s->n_t - 1].ne[2] = s->P->n_expert;
}

/* A qwen35moe layer's FFN (llama.cpp qwen35moe.cpp load_block_trunk): router, routed experts, shared expert
 * and its gate (router and gate in F32, as the converter stores them). The routed outputs are summed with
 * weights that sum to 1, so each expert's down projection gets the dense FFN's depth gain. */
static void synth_plan_moe(struct synth *s, int l, float depth)
{
    const struct loom_synth_preset *P = s->P;
    uint32_t W = s->par->wtype, E = P->n_embd;
    synth_add(s, l, "ffn_gate_inp.weight", SYNTH_ROUTER, LOOM_TYPE_F32, E, P->n_expert, SYNTH_ROUTER_GAIN);
    if (P->fused_gate_up) {
        synth_add_experts(s, l, "ffn_gate_up_exps.weight", SYNTH_READ, E, 2 * (uint64_t)P->n_ff_exp, 1);
    } else {
        synth_add_experts(s, l, "ffn_gate_exps.weight", SYNTH_READ, E, P->n_ff_exp, 1);
        synth_add_experts(s, l, "ffn_up_exps.weight", SYNTH_READ, E, P->n_ff_exp, 1);
    }
    synth_add_experts(s, l, "ffn_down_exps.weight", SYNTH_WRITE, P->n_ff_exp, E, depth);
    synth_add(s, l, "ffn_gate_inp_shexp.weight", SYNTH_READ, LOOM_TYPE_F32, E, 1, SYNTH_SHEXP_GATE_GAIN);
    synth_add(s, l, "ffn_gate_shexp.weight", SYNTH_READ, W, E, P->n_ff_shexp, 1);
    synth_add(s, l, "ffn_up_shexp.weight", SYNTH_READ, W, E, P->n_ff_shexp, 1);
    synth_add(s, l, "ffn_down_shexp.weight", SYNTH_WRITE, W, P->n_ff_shexp, E, depth);
}

/* The qwen35 / qwen35moe tensor list (names and ggml shapes as llama.cpp's loaders expect; output.weight only for
 * a preset with an untied head). Matrices in wtype, vectors, ssm_conv1d and the MoE gates in F32. */
static void synth_plan(struct synth *s)
{
    const struct loom_synth_preset *P = s->P;
    uint32_t W = s->par->wtype, F32 = LOOM_TYPE_F32, E = P->n_embd;
    uint32_t key_dim = P->ssm_head_dim * P->ssm_k_heads, inner = P->ssm_head_dim * P->ssm_v_heads;
    uint32_t conv_dim = 2 * key_dim + inner;
    /* depth-scaled residual branch outputs, 1/sqrt(2 n_layer); shallow presets are scaled as 24 layers so
     * each branch still changes the residual by ~0.1-0.3 of its norm */
    float depth = 1.0f / sqrtf(2.0f * (float)(P->n_layer > SYNTH_MIN_DEPTH ? P->n_layer : SYNTH_MIN_DEPTH));

    synth_add(s, -1, "token_embd.weight", SYNTH_EMBD, W, E, s->n_rows, 0);
    synth_add(s, -1, "output_norm.weight", SYNTH_OUT_NORM, F32, E, 0, 0);
    if (P->untied_output) /* an own head, drawn as the embeddings are (padding rows small: they never win) */
        synth_add(s, -1, "output.weight", SYNTH_EMBD, W, E, s->n_rows, 0);
    for (uint32_t il = 0; il < P->n_layer; il++) {
        int l = (int)il;
        synth_add(s, l, "attn_norm.weight", SYNTH_NORM, F32, E, 0, 0);
        if ((il + 1) % P->full_attn_interval != 0) {
            synth_add(s, l, "attn_qkv.weight", SYNTH_QKV, W, E, conv_dim, 1);
            synth_add(s, l, "attn_gate.weight", SYNTH_READ, W, E, inner, 1);
            synth_add(s, l, "ssm_conv1d.weight", SYNTH_CONV, F32, P->ssm_conv, conv_dim, 0);
            synth_add(s, l, "ssm_dt.bias", SYNTH_DT, F32, P->ssm_v_heads, 0, 0);
            synth_add(s, l, "ssm_a", SYNTH_A, F32, P->ssm_v_heads, 0, 0);
            synth_add(s, l, "ssm_beta.weight", SYNTH_READ, W, E, P->ssm_v_heads, 1);
            synth_add(s, l, "ssm_alpha.weight", SYNTH_READ, W, E, P->ssm_v_heads, 1);
            synth_add(s, l, "ssm_norm.weight", SYNTH_NORM, F32, P->ssm_head_dim, 0, 0);
            synth_add(s, l, "ssm_out.weight", SYNTH_WRITE, W, inner, E, depth);
        } else {
            uint32_t hd = P->head_dim;
            synth_add(s, l, "attn_q.weight", SYNTH_READ, W, E, 2 * P->n_head * hd, 1);
            synth_add(s, l, "attn_k.weight", SYNTH_READ, W, E, P->n_head_kv * hd, 1);
            synth_add(s, l, "attn_v.weight", SYNTH_READ, W, E, P->n_head_kv * hd, 1);
            synth_add(s, l, "attn_output.weight", SYNTH_WRITE, W, P->n_head * hd, E, depth * SYNTH_FULL_ATTN_GAIN);
            synth_add(s, l, "attn_q_norm.weight", SYNTH_NORM, F32, hd, 0, 0);
            synth_add(s, l, "attn_k_norm.weight", SYNTH_NORM, F32, hd, 0, 0);
        }
        synth_add(s, l, "post_attention_norm.weight", SYNTH_NORM, F32, E, 0, 0);
        if (P->n_expert) {
            synth_plan_moe(s, l, depth);
            continue;
        }
        synth_add(s, l, "ffn_gate.weight", SYNTH_READ, W, E, P->n_ff, 1);
        synth_add(s, l, "ffn_up.weight", SYNTH_READ, W, E, P->n_ff, 1);
        synth_add(s, l, "ffn_down.weight", SYNTH_WRITE, W, P->n_ff, E, depth);
    }
}

/* ---- tensor generators ------------------------------------------------------------------------------- */

/* dst[off .. off+n) = src[0..n) converted to `type`: F32, F16, BF16, or a quantized type (a recipe's choice)
 * when off and n are whole rows, quantized as llama_model_quantize quantizes the F32 file's rows. */
static void synth_store(uint32_t type, void *dst, size_t off, const float *src, size_t n)
{
    const struct loom_type_traits *tr = loom_type_traits(type);
    if (tr->block_size > 1) {
        tr->quantize(src, (uint8_t *)dst + off / (size_t)tr->block_size * tr->type_size, (int64_t)n);
    } else if (type == LOOM_TYPE_F32) {
        memcpy((float *)dst + off, src, n * sizeof(float));
    } else if (type == LOOM_TYPE_F16) {
        uint16_t *d = (uint16_t *)dst + off;
        for (size_t i = 0; i < n; i++)
            d[i] = loom_f32_to_f16(src[i]);
    } else {
        uint16_t *d = (uint16_t *)dst + off;
        for (size_t i = 0; i < n; i++)
            d[i] = loom_f32_to_bf16(src[i]);
    }
}

/* Residual-reading rows: W[n_out, E], row i = B (g_i . p) c_in gain / sqrt(E). For SYNTH_QKV the k rows
 * (second key_dim block) are g_k = rho g_q + sqrt(1 - rho^2) g_k before the rotation. */
static void synth_gen_read(struct synth *s, const struct synth_tensor *t, struct synth_rng *r, void *buf, size_t off)
{
    uint32_t E = s->E, key_dim = s->P->ssm_head_dim * s->P->ssm_k_heads;
    float scale = s->c_in * t->gain / sqrtf((float)E) * s->basis_norm;
    float rho = SYNTH_QK_CORR, rc = sqrtf(1.0f - SYNTH_QK_CORR * SYNTH_QK_CORR);
    float *g = s->vec;
    for (uint64_t i = 0; i < t->ne[1] && !synth_poll(s, i, off / E + i, t->ne[1] * t->ne[2]); i++) {
        synth_rng_normal(r, g, E);
        if (t->kind == SYNTH_QKV && i < key_dim) {
            memcpy(s->scratch + i * E, g, E * sizeof(float));
        } else if (t->kind == SYNTH_QKV && i < 2 * (uint64_t)key_dim) {
            const float *gq = s->scratch + (i - key_dim) * E;
            for (uint32_t j = 0; j < E; j++)
                g[j] = rho * gq[j] + rc * g[j];
        }
        for (uint32_t j = 0; j < E; j++)
            g[j] *= s->prof[j];
        synth_basis_apply(s, g);
        synth_scale(g, E, scale);
        synth_store(t->type, buf, off + i * E, g, E);
    }
}

/* Residual-writing matrix W[E, n_in] (ne = [n_in, E]): column j = B (h_j . p), h_j ~ N(0, gain^2 / n_in). */
static void synth_gen_write(struct synth *s, const struct synth_tensor *t, struct synth_rng *r, void *buf, size_t off)
{
    uint32_t E = s->E;
    uint64_t n_in = t->ne[0];
    float scale = t->gain / sqrtf((float)n_in) * s->basis_norm;
    float *h = s->vec;
    for (uint64_t j = 0; j < n_in; j++) {
        if (synth_poll(s, j, off / E + j, n_in * t->ne[2]))
            return;
        synth_rng_normal(r, h, E);
        for (uint32_t i = 0; i < E; i++)
            h[i] *= s->prof[i];
        synth_basis_apply(s, h);
        for (uint32_t i = 0; i < E; i++)
            s->scratch[i * n_in + j] = h[i] * scale;
    }
    synth_store(t->type, buf, off, s->scratch, (size_t)n_in * E);
}

/* Every expert of t (one matrix for ne[2] = 1), one after another from one stream. */
static void synth_gen_matrices(struct synth *s, const struct synth_tensor *t, struct synth_rng *r, void *buf)
{
    size_t per = (size_t)t->ne[0] * t->ne[1];
    for (uint64_t e = 0; e < t->ne[2] && !s->cancelled; e++) {
        if (t->kind == SYNTH_WRITE)
            synth_gen_write(s, t, r, buf, e * per);
        else
            synth_gen_read(s, t, r, buf, e * per);
    }
}

/* The router [n_expert, E]: SYNTH_READ rows (uniform popularity in expectation). The skewed router adds to row
 * e the bias b_e = -SYNTH_SKEW_ZIPF ln(rank_e + 1) along the shared direction, scaled so that an input whose
 * share along it is SYNTH_SKEW_SHARE (the embeddings' share) gets logit bias b_e; the popularity ranks are a
 * random permutation per layer (the tensor's own stream). */
static void synth_gen_router(struct synth *s, const struct synth_tensor *t, struct synth_rng *r, float *out)
{
    synth_gen_read(s, t, r, out, 0);
    if (!s->shared)
        return;
    uint32_t n = (uint32_t)t->ne[1], E = s->E;
    synth_rng_choose(r, s->perm, n, n); /* perm[rank] = expert */
    for (uint32_t k = 0; k < n; k++) {
        float b = (float)(-SYNTH_SKEW_ZIPF * log(k + 1.0)) / (SYNTH_SKEW_SHARE * (float)E);
        float *row = out + (size_t)s->perm[k] * E;
        for (uint32_t j = 0; j < E; j++)
            row[j] += b * s->shared[j];
    }
}

/* Token embeddings [n_rows, E]: real rows B (z . p) emb_std, padding rows z pad_std. */
static void synth_gen_embd(struct synth *s, const struct synth_tensor *t, struct synth_rng *r, void *buf)
{
    uint32_t E = s->E;
    float *z = s->vec;
    for (uint64_t i = 0; i < t->ne[1] && !synth_poll(s, i, i, t->ne[1]); i++) {
        synth_rng_normal(r, z, E);
        if (i < s->n_tok) {
            for (uint32_t j = 0; j < E; j++)
                z[j] *= s->prof[j];
            synth_basis_apply(s, z);
            synth_scale(z, E, SYNTH_EMB_STD * s->basis_norm);
            if (s->shared) /* the skewed router's shared direction */
                for (uint32_t j = 0; j < E; j++)
                    z[j] = sqrtf(1.0f - SYNTH_SKEW_SHARE * SYNTH_SKEW_SHARE) * z[j] +
                           SYNTH_SKEW_SHARE * SYNTH_EMB_STD * s->shared[j];
        } else {
            synth_scale(z, E, SYNTH_PAD_STD);
        }
        synth_store(t->type, buf, i * E, z, E);
    }
}

static void synth_gen_norm(const struct synth_tensor *t, struct synth_rng *r, float *out)
{
    synth_rng_normal(r, out, t->ne[0]);
    for (uint64_t i = 0; i < t->ne[0]; i++)
        out[i] = 1.0f + SYNTH_NORM_JITTER * out[i];
}

/* output_norm: with tied embeddings, negating most channels cancels the self-logit e_t . e_t that would
 * otherwise make greedy decoding repeat the current token. */
static void synth_gen_out_norm(struct synth *s, const struct synth_tensor *t, struct synth_rng *r, float *out)
{
    synth_gen_norm(t, r, out);
    uint32_t E = (uint32_t)t->ne[0], n_neg = (uint32_t)lround(SYNTH_OUT_NORM_NEG * E);
    synth_rng_choose(r, s->perm, E, n_neg);
    for (uint32_t i = 0; i < n_neg; i++)
        out[s->perm[i]] = -out[s->perm[i]];
}

/* ssm_conv1d [channels][kernel]: taps U(-b, b), k channels correlated with q channels, +1 on the last
 * (current-token) tap. */
static void synth_gen_conv(struct synth *s, const struct synth_tensor *t, struct synth_rng *r, float *out)
{
    uint64_t K = t->ne[0], key_dim = (uint64_t)s->P->ssm_head_dim * s->P->ssm_k_heads;
    float rho = SYNTH_QK_CORR, rc = sqrtf(1.0f - SYNTH_QK_CORR * SYNTH_QK_CORR);
    for (uint64_t i = 0; i < K * t->ne[1]; i++)
        out[i] = (float)((2.0 * synth_rng_uniform(r) - 1.0) * SYNTH_CONV_BOUND);
    for (uint64_t i = key_dim * K; i < 2 * key_dim * K; i++)
        out[i] = rho * out[i - key_dim * K] + rc * out[i];
    for (uint64_t c = 0; c < t->ne[1]; c++)
        out[c * K + K - 1] += SYNTH_CONV_SELF;
}

static void synth_gen_dt(const struct synth_tensor *t, struct synth_rng *r, float *out)
{
    for (uint64_t i = 0; i < t->ne[0]; i++) {
        double dt = exp(log(SYNTH_DT_LO) + synth_rng_uniform(r) * (log(SYNTH_DT_HI) - log(SYNTH_DT_LO)));
        out[i] = (float)(dt + log(-expm1(-dt))); /* inverse softplus */
    }
}

static void synth_gen_a(const struct synth_tensor *t, struct synth_rng *r, float *out)
{
    for (uint64_t i = 0; i < t->ne[0]; i++)
        out[i] = (float)-(SYNTH_A_LO + synth_rng_uniform(r) * (SYNTH_A_HI - SYNTH_A_LO));
}

static uint64_t synth_tensor_bytes(const struct synth_tensor *t)
{
    return loom_type_row_bytes(t->type, (int64_t)t->ne[0]) * t->ne[1] * t->ne[2];
}

/* A quantized tensor's rows must be valid (ggml_validate_row_data's rules, as llama_model_quantize checks). */
static int synth_check_rows(const struct synth_tensor *t, const void *buf, loom_error *err)
{
    struct loom_row_fault f;
    int64_t row = loom_type_traits(t->type)->block_size > 1
                      ? loom_type_validate_rows(t->type, buf, (int64_t)t->ne[0], (int64_t)(t->ne[1] * t->ne[2]), &f)
                      : -1;
    if (row < 0)
        return LOOM_OK;
    char what[160], where[64];
    loom_row_fault_describe(t->type, &f, what, sizeof what);
    loom_row_where(t->n_dims, (int64_t)t->ne[1], row, where, sizeof where);
    return loom_errorf(err, LOOM_E_FORMAT, "synth: tensor '%s' %s: quantized %s, expected finite", t->name, where,
                       what);
}

static int synth_fill(void *ctx, uint64_t out_index, void *buf, uint64_t nbytes, loom_error *err)
{
    struct synth *s = ctx;
    if (out_index >= s->n_t)
        return loom_errorf(err, LOOM_E_INTERNAL, "synth: tensor index %llu, expected < %u",
                           (unsigned long long)out_index, s->n_t);
    uint64_t index = s->order ? s->order[out_index] : out_index; /* the RNG stream follows the plan's index */
    const struct synth_tensor *t = &s->t[index];
    if (nbytes != synth_tensor_bytes(t))
        return loom_errorf(err, LOOM_E_INTERNAL, "synth: tensor '%s': writer asks %llu bytes, expected %llu",
                           t->name, (unsigned long long)nbytes, (unsigned long long)synth_tensor_bytes(t));
    if (s->par->progress)
        s->par->progress(s->par->progress_ctx, out_index, s->n_t, s->done_bytes, s->total_bytes, t->name);
    s->cur_index = out_index;
    s->cur_bytes = nbytes;
    s->cur_name = t->name;
    if (synth_poll(s, 0, 0, 1))
        return loom_errorf(err, LOOM_E_CANCELLED, "synth: cancelled by the abort callback before tensor '%s'",
                           t->name);
    struct synth_rng r = synth_rng_stream(s->par->seed, index + 1);
    switch (t->kind) {
    case SYNTH_EMBD: synth_gen_embd(s, t, &r, buf); break;
    case SYNTH_OUT_NORM: synth_gen_out_norm(s, t, &r, buf); break;
    case SYNTH_NORM: synth_gen_norm(t, &r, buf); break;
    case SYNTH_READ:
    case SYNTH_QKV:
    case SYNTH_WRITE: synth_gen_matrices(s, t, &r, buf); break;
    case SYNTH_ROUTER: synth_gen_router(s, t, &r, buf); break;
    case SYNTH_CONV: synth_gen_conv(s, t, &r, buf); break;
    case SYNTH_DT: synth_gen_dt(t, &r, buf); break;
    case SYNTH_A: synth_gen_a(t, &r, buf); break;
    }
    if (s->cancelled)
        return loom_errorf(err, LOOM_E_CANCELLED, "synth: cancelled by the abort callback in tensor '%s'", t->name);
    s->done_bytes += nbytes;
    return synth_check_rows(t, buf, err);
}

/* ---- metadata ------------------------------------------------------------------------------------------ */

static int synth_check_preset(const struct loom_synth_preset *P, loom_error *err)
{
    uint32_t E = P->n_embd;
    if ((E & (~E + 1)) < 64) /* the residual basis transforms blocks of E's largest power-of-two divisor */
        return loom_errorf(err, LOOM_E_ARG, "synth preset '%s': n_embd %u, expected a multiple of 64",
                           P->name, E);
    if (2 * (P->sections[0] + P->sections[1] + P->sections[2] + P->sections[3]) != P->n_rot)
        return loom_errorf(err, LOOM_E_ARG, "synth preset '%s': rope sections cover %u dims, expected n_rot %u",
                           P->name, 2 * (P->sections[0] + P->sections[1] + P->sections[2] + P->sections[3]),
                           P->n_rot);
    if (P->ssm_v_heads % P->ssm_k_heads || P->n_head % P->n_head_kv || !P->full_attn_interval)
        return loom_errorf(err, LOOM_E_ARG, "synth preset '%s': head counts must divide (ssm %u/%u, attn %u/%u)",
                           P->name, P->ssm_v_heads, P->ssm_k_heads, P->n_head, P->n_head_kv);
    if (P->n_expert && (P->n_expert_used == 0 || P->n_expert_used > P->n_expert || !P->n_ff_exp || !P->n_ff_shexp))
        return loom_errorf(err, LOOM_E_ARG,
                           "synth preset '%s': experts used %u of %u with widths %u/%u, expected 1..count used and "
                           "nonzero widths",
                           P->name, P->n_expert_used, P->n_expert, P->n_ff_exp, P->n_ff_shexp);
    return LOOM_OK;
}

#define SYNTH_TRY(call, what)                                                                                 \
    do {                                                                                                     \
        int rc_ = (call);                                                                                    \
        if (rc_ != LOOM_OK)                                                                                  \
            return loom_errorf(err, rc_, "synth: gguf writer failed on %s", what);                           \
    } while (0)

/* "<arch>.<suffix>" into key[96]. */
static const char *synth_arch_key(char *key, const struct synth *s, const char *suffix)
{
    snprintf(key, 96, "%s.%s", s->P->n_expert ? "qwen35moe" : "qwen35", suffix);
    return key;
}

static int synth_set_hparams(struct loom_gguf_writer *w, const struct synth *s, loom_error *err)
{
    const struct loom_synth_preset *P = s->P;
    const char *arch = P->n_expert ? "qwen35moe" : "qwen35";
    char name[64], key[96];
    snprintf(name, sizeof name, "loom synthetic %s %s", arch, P->name);
    uint32_t ftype = s->par->wtype == LOOM_TYPE_F32 ? 0 : s->par->wtype == LOOM_TYPE_F16 ? 1 : 32;
    int32_t sections[4] = {(int32_t)P->sections[0], (int32_t)P->sections[1], (int32_t)P->sections[2],
                           (int32_t)P->sections[3]};
    struct { const char *key; uint32_t v; } u32[] = { /* suffixes after "<arch>." except general.* and loom.* */
        {"general.file_type", ftype},
        {"block_count", P->n_layer},
        {"context_length", P->n_ctx_train},
        {"embedding_length", P->n_embd},
        {"feed_forward_length", P->n_ff}, /* MoE presets have none */
        {"attention.head_count", P->n_head},
        {"attention.head_count_kv", P->n_head_kv},
        {"attention.key_length", P->head_dim},
        {"attention.value_length", P->head_dim},
        {"rope.dimension_count", P->n_rot},
        {"ssm.conv_kernel", P->ssm_conv},
        {"ssm.state_size", P->ssm_head_dim},
        {"ssm.group_count", P->ssm_k_heads},
        {"ssm.time_step_rank", P->ssm_v_heads},
        {"ssm.inner_size", P->ssm_head_dim * P->ssm_v_heads},
        {"full_attention_interval", P->full_attn_interval},
        {"expert_count", P->n_expert},
        {"expert_used_count", P->n_expert_used},
        {"expert_feed_forward_length", P->n_ff_exp},
        {"expert_shared_feed_forward_length", P->n_ff_shexp},
        {"loom.synth.version", LOOM_SYNTH_VERSION},
    };
    SYNTH_TRY(loom_gguf_writer_set_str(w, "general.architecture", arch), "general.architecture");
    SYNTH_TRY(loom_gguf_writer_set_str(w, "general.name", name), "general.name");
    /* a recipe's file type goes last, after the tokenizer, where llama_model_quantize puts it */
    for (size_t i = s->par->recipe ? 1 : 0; i < sizeof u32 / sizeof u32[0]; i++) {
        int global = !strncmp(u32[i].key, "general.", 8) || !strncmp(u32[i].key, "loom.", 5);
        int moe_key = !strncmp(u32[i].key, "expert", 6);
        if ((moe_key && !P->n_expert) || (!strcmp(u32[i].key, "feed_forward_length") && !P->n_ff))
            continue;
        const char *k = global ? u32[i].key : synth_arch_key(key, s, u32[i].key);
        SYNTH_TRY(loom_gguf_writer_set_u32(w, k, u32[i].v), k);
    }
    synth_arch_key(key, s, "rope.dimension_sections");
    SYNTH_TRY(loom_gguf_writer_set_arr(w, key, LOOM_GGUF_INT32, sections, 4), key);
    synth_arch_key(key, s, "rope.freq_base");
    SYNTH_TRY(loom_gguf_writer_set_f32(w, key, P->rope_base), key);
    synth_arch_key(key, s, "attention.layer_norm_rms_epsilon");
    SYNTH_TRY(loom_gguf_writer_set_f32(w, key, P->rms_eps), key);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->par->seed);
    SYNTH_TRY(loom_gguf_writer_set_str(w, "loom.synth.seed", seed), "loom.synth.seed");
    if (P->n_expert)
        SYNTH_TRY(loom_gguf_writer_set_str(w, "loom.synth.router",
                                           s->par->router == LOOM_SYNTH_ROUTER_SKEWED ? "skewed" : "uniform"),
                  "loom.synth.router");
    return LOOM_OK;
}

static int synth_key_is(const struct loom_gguf_kv *kv, const char *key)
{
    return loom_gguf_str_eq(kv->key, key);
}

/* Copy the vocabulary file's tokenizer.* keys, padding tokens/token_type with UNUSED (type 5) tokens
 * "<|loom_pad_N|>" up to n_rows (llama.cpp needs one token per embedding row). */
static int synth_set_tokenizer(struct loom_gguf_writer *w, const struct loom_gguf *voc, struct synth *s,
                               loom_error *err)
{
    const struct loom_gguf_kv *toks, *types;
    int rc = loom_gguf_get_arr(voc, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, 0, &toks, err);
    if (rc == LOOM_OK)
        rc = loom_gguf_get_arr(voc, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, 0, &types, err);
    if (rc != LOOM_OK)
        return rc;
    if (types->arr_n != toks->arr_n)
        return loom_errorf(err, LOOM_E_FORMAT, "vocab: tokenizer.ggml.token_type has %llu entries, expected %llu",
                           (unsigned long long)types->arr_n, (unsigned long long)toks->arr_n);
    uint64_t n_tok = toks->arr_n, n_rows = s->P->n_rows ? s->P->n_rows : (n_tok + 255) / 256 * 256;
    if (n_tok == 0 || n_rows < n_tok || n_rows > UINT32_MAX)
        return loom_errorf(err, LOOM_E_FORMAT, "vocab: %llu tokens, expected 1..%llu for preset '%s'",
                           (unsigned long long)n_tok, (unsigned long long)n_rows, s->P->name);
    s->n_tok = (uint32_t)n_tok;
    s->n_rows = (uint32_t)n_rows;
    struct loom_gguf_str *str = calloc(n_rows, sizeof *str);
    int32_t *ty = calloc(n_rows, sizeof *ty);
    char *pool = calloc(n_rows - n_tok + 1, 32);
    rc = (str && ty && pool) ? LOOM_OK : loom_errorf(err, LOOM_E_NOMEM, "synth: tokenizer arrays (%llu rows)",
                                                     (unsigned long long)n_rows);
    if (rc == LOOM_OK)
        rc = loom_gguf_kv_strings(toks, str, n_tok, err);
    if (rc == LOOM_OK) {
        memcpy(ty, types->data, n_tok * sizeof *ty);
        for (uint64_t i = n_tok; i < n_rows; i++) {
            char *p = pool + (i - n_tok) * 32;
            int len = snprintf(p, 32, "<|loom_pad_%llu|>", (unsigned long long)i);
            str[i] = (struct loom_gguf_str){(uint64_t)len, p};
            ty[i] = 5; /* LLAMA_TOKEN_TYPE_UNUSED */
        }
    }
    for (uint64_t i = 0; rc == LOOM_OK && i < voc->n_kv; i++) {
        const struct loom_gguf_kv *kv = &voc->kv[i];
        if (synth_key_is(kv, "tokenizer.ggml.tokens"))
            rc = loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", str, n_rows);
        else if (synth_key_is(kv, "tokenizer.ggml.token_type"))
            rc = loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, ty, n_rows);
        else if (kv->key.len > 10 && !memcmp(kv->key.ptr, "tokenizer.", 10))
            rc = loom_gguf_writer_copy_kv(w, kv);
        if (rc != LOOM_OK)
            rc = loom_errorf(err, rc, "synth: gguf writer failed on key '%.*s'", (int)kv->key.len, kv->key.ptr);
    }
    free(str);
    free(ty);
    free(pool);
    return rc;
}

/* ---- driver ---------------------------------------------------------------------------------------------- */

static int synth_alloc(struct synth *s, loom_error *err)
{
    const struct loom_synth_preset *P = s->P;
    uint32_t E = P->n_embd, key_dim = P->ssm_head_dim * P->ssm_k_heads;
    const uint64_t widths[] = {P->n_ff, (uint64_t)P->n_head * P->head_dim, (uint64_t)P->ssm_head_dim * P->ssm_v_heads,
                               key_dim, P->n_ff_exp, P->n_ff_shexp}; /* the n_in of each SYNTH_WRITE; QKV k rows */
    uint64_t max_in = 0;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        max_in = widths[i] > max_in ? widths[i] : max_in;
    s->blk = E & (~E + 1);
    s->sign = malloc(3 * (size_t)E * sizeof(float));
    s->mix = malloc(3 * (size_t)E * sizeof(uint32_t));
    s->tmp = malloc((size_t)E * sizeof(float));
    s->prof = malloc((size_t)E * sizeof(float));
    s->vec = malloc((size_t)E * sizeof(float));
    s->scratch = malloc(s->sparse ? 1 : (size_t)max_in * E * sizeof(float)); /* sparse: nothing generated */
    s->t = calloc(4 + 24 * (size_t)P->n_layer, sizeof *s->t);
    uint32_t n_perm = E > P->n_expert ? E : P->n_expert;
    s->perm = malloc((size_t)n_perm * sizeof(uint32_t));
    if (P->n_expert && s->par->router == LOOM_SYNTH_ROUTER_SKEWED)
        s->shared = malloc((size_t)E * sizeof(float));
    if (!s->sign || !s->mix || !s->tmp || !s->prof || !s->vec || !s->perm || !s->scratch || !s->t ||
        (P->n_expert && s->par->router == LOOM_SYNTH_ROUTER_SKEWED && !s->shared))
        return loom_errorf(err, LOOM_E_NOMEM, "synth: work buffers for preset '%s'", P->name);
    return LOOM_OK;
}

static void synth_free(struct synth *s)
{
    free(s->sign);
    free(s->mix);
    free(s->tmp);
    free(s->prof);
    free(s->vec);
    free(s->perm);
    free(s->scratch);
    free(s->t);
    free(s->shared);
    free(s->order);
}

/* Generators that write their F32 output straight into the tensor buffer instead of through synth_store. */
static int synth_kind_direct(enum synth_kind k)
{
    return k == SYNTH_OUT_NORM || k == SYNTH_NORM || k == SYNTH_CONV || k == SYNTH_DT || k == SYNTH_A ||
           k == SYNTH_ROUTER;
}

/* Each tensor's type under the recipe: those llama_model_quantize gives the F32 file (loom_quant_choose_types on
 * the F32 plan), so that writing quantized rows directly gives the bytes of writing F32 and quantizing. */
static int synth_quant_types(struct synth *s, loom_error *err)
{
    const struct loom_synth_preset *P = s->P;
    const struct loom_quant_model m = {.n_layer = P->n_layer, .n_head = P->n_head, .n_head_kv = P->n_head_kv,
                                       .n_expert = P->n_expert};
    struct loom_quant_tensor *d = malloc(s->n_t * sizeof *d);
    uint32_t *types = malloc(s->n_t * sizeof *types);
    int rc = d && types ? LOOM_OK : loom_errorf(err, LOOM_E_NOMEM, "synth: %u tensor descriptors", s->n_t);
    for (uint32_t i = 0; rc == LOOM_OK && i < s->n_t; i++) {
        const struct synth_tensor *t = &s->t[i];
        d[i] = (struct loom_quant_tensor){t->name, t->n_dims, {t->ne[0], t->ne[1], t->ne[2], 1}, t->type};
    }
    if (rc == LOOM_OK)
        rc = loom_quant_choose_types(&m, d, s->n_t, s->par->recipe, types, err);
    if (rc == LOOM_OK && !(s->order = malloc(s->n_t * sizeof *s->order)))
        rc = loom_errorf(err, LOOM_E_NOMEM, "synth: %u tensor indices", s->n_t);
    if (rc == LOOM_OK) /* written where llama_model_quantize writes them in the quantized F32 file */
        rc = loom_quant_file_order(d, s->n_t, s->order, err);
    for (uint32_t i = 0; rc == LOOM_OK && i < s->n_t; i++) {
        const struct loom_type_traits *tr = loom_type_traits(types[i]);
        if (types[i] != s->t[i].type && synth_kind_direct(s->t[i].kind))
            rc = loom_errorf(err, LOOM_E_INTERNAL, "synth: tensor '%s': recipe %s quantizes a tensor generated as F32",
                             s->t[i].name, s->par->recipe->name);
        else if (types[i] != s->t[i].type &&
                 (loom_quant_requires_imatrix(s->t[i].name, types[i], s->par->recipe->ftype) ||
                  (tr->block_size > 1 && !tr->quantize))) /* (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S: weights only) */
            rc = loom_errorf(err, LOOM_E_ARG, "synth: recipe %s: tensor '%s' goes to %s, which needs an importance "
                             "matrix (llama.cpp's quantize refuses it without one); synth writes without one: "
                             "synthesize F32, then loom quantize --imatrix FILE", s->par->recipe->name,
                             s->t[i].name, tr->name);
        s->t[i].type = types[i];
    }
    free(d);
    free(types);
    return rc;
}

/* Declare the tensors written k = first .. first + count - 1 (in file order). */
static int synth_declare(struct loom_gguf_writer *w, struct synth *s, uint32_t first, uint32_t count,
                         loom_error *err)
{
    for (uint32_t k = first; k < first + count; k++) {
        const struct synth_tensor *t = &s->t[s->order ? s->order[k] : k];
        SYNTH_TRY(loom_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne), t->name);
        s->total_bytes += synth_tensor_bytes(t);
    }
    return LOOM_OK;
}

/* Every key of the model: hyper-parameters, the vocabulary's tokenizer keys, a recipe's file type keys. */
static int synth_set_keys(struct loom_gguf_writer *w, struct synth *s, const struct loom_gguf *voc, loom_error *err)
{
    int rc = synth_set_hparams(w, s, err);
    if (rc == LOOM_OK)
        rc = synth_set_tokenizer(w, voc, s, err);
    if (rc == LOOM_OK && s->par->recipe && (rc = loom_quant_set_file_keys(w, s->par->recipe)) != LOOM_OK)
        rc = loom_errorf(err, rc, "synth: gguf writer failed on the file type keys");
    /* A sparse file's tensor data is a hole (zeros): the marker lets loom_model_load refuse it while loom inspect,
     * which reads no weights, still describes it. */
    if (rc == LOOM_OK && s->sparse && loom_gguf_writer_set_bool(w, LOOM_SYNTH_SPARSE_KEY, 1))
        rc = loom_errorf(err, LOOM_E_NOMEM, "synth: gguf writer failed on the key loom.synth.sparse");
    return rc;
}

/* Where the part that starts at tensor `first` (file order) ends: once the bytes so far (*done, which it advances)
 * reach (part + 1) / n of the total, with at least one tensor for it and for each later part. */
static uint32_t synth_part_end(const struct synth *s, uint32_t part, uint32_t n, uint32_t first, uint64_t *done,
                               uint64_t total)
{
    uint32_t end = first + 1;
    *done += synth_tensor_bytes(&s->t[s->order ? s->order[first] : first]);
    while (end < s->n_t - (n - part - 1) && (part == n - 1 || *done < total / n * (part + 1))) {
        *done += synth_tensor_bytes(&s->t[s->order ? s->order[end] : end]);
        end++;
    }
    return end;
}

/* Part `part` of s->n_split, tensors [first, end) in file order, staged at path (loom_gguf_writer_stage). */
static int synth_stage_part(struct synth *s, const struct loom_gguf *voc, uint32_t part, uint32_t first, uint32_t end,
                            const char *path, struct loom_gguf_staged *staged, loom_error *err)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    if (!w)
        return loom_errorf(err, LOOM_E_NOMEM, "synth: gguf writer");
    int rc = part == 0 ? synth_set_keys(w, s, voc, err) : LOOM_OK;
    if (rc == LOOM_OK && (loom_gguf_writer_set_u16(w, "split.no", (uint16_t)part) ||
                          loom_gguf_writer_set_u16(w, "split.count", (uint16_t)s->n_split) ||
                          loom_gguf_writer_set_i32(w, "split.tensors.count", (int32_t)s->n_t)))
        rc = loom_errorf(err, LOOM_E_NOMEM, "synth: gguf writer failed on the split keys");
    if (rc == LOOM_OK)
        rc = synth_declare(w, s, first, end - first, err);
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_stage(w, path, NULL, NULL, staged, err);
    loom_gguf_writer_free(w);
    return rc;
}

/* The path of part `part` of n under prefix into path[cap], checked as an output before any part is written. */
static int synth_part_path(const char *prefix, uint32_t part, uint32_t n, char *path, size_t cap, loom_error *err)
{
    int rc = loom_split_path(path, cap, prefix, part, n, err);
    if (rc == LOOM_OK && (rc = loom_gguf_check_output(path, err)) != LOOM_OK && err) {
        char why[sizeof err->msg];
        memcpy(why, err->msg, sizeof why);
        loom_errorf(err, rc, "synth: split part %u of %u: %s", part + 1, n, why);
    }
    return rc;
}

/* A sparse model in n_split parts, as llama.cpp's gguf-split lays them out: every key in the first part, the split
 * keys (split.no, split.count, split.tensors.count) in each, the tensors in file order cut into runs of about
 * equal bytes (at least one tensor each); part k goes to loom_split_path(prefix, k, n_split). All parts appear or
 * none: every name is checked first, each part staged, then all published (loom_gguf_publish). */
static int synth_write_split(struct synth *s, const struct loom_gguf *voc, const char *out_path, loom_error *err)
{
    uint32_t n = s->n_split;
    if (n > s->n_t || n > UINT16_MAX)
        return loom_errorf(err, LOOM_E_ARG, "synth: %u split parts, expected at most %u (one tensor each)", n,
                           s->n_t < UINT16_MAX ? s->n_t : UINT16_MAX);
    char prefix[4096], path[4200];
    size_t len = strlen(out_path);
    if (len >= 5 && !strcmp(out_path + len - 5, ".gguf"))
        len -= 5;
    if (len >= sizeof prefix)
        return loom_errorf(err, LOOM_E_ARG, "synth: output path of %zu bytes, expected under %zu", len, sizeof prefix);
    snprintf(prefix, sizeof prefix, "%.*s", (int)len, out_path);
    int rc = LOOM_OK;
    for (uint32_t part = 0; rc == LOOM_OK && part < n; part++)
        rc = synth_part_path(prefix, part, n, path, sizeof path, err);
    struct loom_gguf_staged *staged = rc == LOOM_OK ? calloc(n, sizeof *staged) : NULL;
    if (rc == LOOM_OK && !staged)
        rc = loom_errorf(err, LOOM_E_NOMEM, "synth: %u split parts", n);
    uint64_t total = 0, done = 0;
    for (uint32_t k = 0; k < s->n_t; k++)
        total += synth_tensor_bytes(&s->t[s->order ? s->order[k] : k]);
    for (uint32_t part = 0, first = 0; rc == LOOM_OK && part < n; part++) {
        uint32_t end = synth_part_end(s, part, n, first, &done, total);
        loom_split_path(path, sizeof path, prefix, part, n, NULL);
        rc = synth_stage_part(s, voc, part, first, end, path, &staged[part], err);
        first = end;
    }
    if (staged && rc != LOOM_OK)
        loom_gguf_discard(staged, n);
    else if (staged)
        rc = loom_gguf_publish(staged, n, err);
    free(staged);
    return rc;
}

static int synth_write(const struct loom_synth_params *par, int sparse, uint32_t n_split, const char *out_path,
                       loom_error *err)
{
    if (!par || !par->preset || !par->vocab_path || !out_path)
        return loom_errorf(err, LOOM_E_ARG, "synth: preset, vocab path and output path are required");
    if (par->wtype != LOOM_TYPE_F32 && par->wtype != LOOM_TYPE_F16 && par->wtype != LOOM_TYPE_BF16)
        return loom_errorf(err, LOOM_E_ARG, "synth: weight type %u, expected F32 (0), F16 (1) or BF16 (30)",
                           par->wtype);
    if (par->recipe && par->wtype != LOOM_TYPE_F32)
        return loom_errorf(err, LOOM_E_ARG, "synth: recipe %s quantizes the F32 model, found weight type %u",
                           par->recipe->name, par->wtype);
    int rc = synth_check_preset(par->preset, err);
    if (rc != LOOM_OK)
        return rc;
    struct synth s = {.par = par, .P = par->preset, .E = par->preset->n_embd, .sparse = sparse, .n_split = n_split};
    struct loom_gguf *voc = NULL;
    struct loom_gguf_writer *w = NULL;
    rc = synth_alloc(&s, err);
    if (rc == LOOM_OK && (rc = loom_gguf_open(par->vocab_path, &voc, err)) != LOOM_OK && err) {
        char why[sizeof err->msg];
        memcpy(why, err->msg, sizeof why);
        loom_errorf(err, rc, "vocabulary '%s': %s", par->vocab_path, why);
    }
    if (rc == LOOM_OK && !(w = loom_gguf_writer_new()))
        rc = loom_errorf(err, LOOM_E_NOMEM, "synth: gguf writer");
    if (rc == LOOM_OK)
        rc = synth_set_keys(w, &s, voc, err);
    if (rc == LOOM_OK) {
        synth_basis_init(&s);
        synth_plan(&s);
        if (par->recipe)
            rc = synth_quant_types(&s, err);
    }
    if (rc == LOOM_OK && sparse && n_split > 1)
        rc = synth_write_split(&s, voc, out_path, err);
    else if (rc == LOOM_OK && (rc = synth_declare(w, &s, 0, s.n_t, err)) == LOOM_OK)
        rc = loom_gguf_writer_write(w, out_path, sparse ? NULL : synth_fill, &s, err);
    if (rc == LOOM_OK && sparse)
        s.done_bytes = s.total_bytes; /* every tensor is in place: a hole */
    if (rc == LOOM_OK && par->progress)
        par->progress(par->progress_ctx, s.n_t, s.n_t, s.done_bytes, s.total_bytes, "");
    if (w)
        loom_gguf_writer_free(w);
    if (voc)
        loom_gguf_close(voc);
    synth_free(&s);
    return rc;
}

int loom_synth_write(const struct loom_synth_params *par, const char *out_path, loom_error *err)
{
    return synth_write(par, 0, 0, out_path, err);
}

int loom_synth_write_sparse(const struct loom_synth_params *par, uint32_t n_split, const char *out_path,
                            loom_error *err)
{
    return synth_write(par, 1, n_split, out_path, err);
}

/* ---- public API (loom.h, "Synthetic models") -------------------------------------------------------------- */

const char *loom_synth_preset(int i)
{
    return i >= 0 && (size_t)i < sizeof synth_presets / sizeof synth_presets[0] ? synth_presets[i].name : NULL;
}

int loom_synthesize(const loom_synth_options *o, const char *out_path, loom_error *err)
{
    static const struct {
        const char *name;
        uint32_t type;
    } types[] = {{"F32", LOOM_TYPE_F32}, {"F16", LOOM_TYPE_F16}, {"BF16", LOOM_TYPE_BF16}};
    struct loom_synth_params par = {.preset = o->preset ? loom_synth_find_preset(o->preset) : NULL,
                                    .wtype = LOOM_TYPE_COUNT, .seed = o->seed, .vocab_path = o->vocab_path,
                                    .progress = o->progress, .progress_ctx = o->progress_ctx, .abort = o->abort,
                                    .abort_ctx = o->abort_ctx};
    if (!par.preset) {
        char names[512];
        size_t at = 0;
        for (size_t i = 0; i < sizeof synth_presets / sizeof synth_presets[0] && at < sizeof names; i++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", synth_presets[i].name);
        return loom_errorf(err, LOOM_E_ARG, "preset: expected one of %s, found '%s'", names,
                           o->preset ? o->preset : "(null)");
    }
    if (o->router && strcmp(o->router, "uniform") && strcmp(o->router, "skewed"))
        return loom_errorf(err, LOOM_E_ARG, "router: expected uniform or skewed, found '%s'", o->router);
    if (o->router && !par.preset->n_expert)
        return loom_errorf(err, LOOM_E_ARG, "router: expected none for the dense preset '%s' (it has no experts), "
                           "found '%s'", par.preset->name, o->router);
    par.router = o->router && !strcmp(o->router, "skewed") ? LOOM_SYNTH_ROUTER_SKEWED : LOOM_SYNTH_ROUTER_UNIFORM;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (o->type && !strcmp(o->type, types[i].name))
            par.wtype = types[i].type;
    if (o->type && (par.recipe = loom_quant_find_recipe(o->type)) != NULL)
        par.wtype = LOOM_TYPE_F32;
    if (par.wtype == LOOM_TYPE_COUNT) {
        char names[128] = "";
        for (const struct loom_quant_recipe *q = loom_quant_recipes; q->name; q++)
            snprintf(names + strlen(names), sizeof names - strlen(names), " %s", q->name);
        return loom_errorf(err, LOOM_E_ARG, "type: expected F32, F16, BF16 or a recipe (%s), found '%s'", names + 1,
                           o->type ? o->type : "(null)");
    }
    if (o->n_split > 1 && !o->sparse)
        return loom_errorf(err, LOOM_E_ARG, "n_split: expected 0 or 1 without sparse (split a generated model with "
                           "tools/split_model), found %u", o->n_split);
    return o->sparse ? loom_synth_write_sparse(&par, o->n_split, out_path, err) : loom_synth_write(&par, out_path, err);
}
