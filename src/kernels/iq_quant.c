/* iq_quant.c — weight quantizers of the grid IQ types IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS and IQ2_XXS, bytewise equal
 * to llama.cpp's ggml-quants.c quantize_iq3_s/iq3_xxs/iq2_s/iq2_xs/iq2_xxs (with and without importance weights,
 * float operations in the reference's order, no FMA), and the lattice search tables they need. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/iq_grids.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* ---- search tables ----
 * For each grid: pos[j] = the grid entry j as levels 2l + 1 (l the index of the entry's magnitude among the
 * type's levels); map[u] over every point u of the level lattice (2 bits per weight for IQ2, 3 for IQ3): the grid
 * index of u, or -(offset + 1) with nb[offset] the count of u's nearest grid entries (all within the nwant
 * smallest squared distances, increasing index within a distance) followed by their indices, as
 * iq2xs_init_impl/iq3xs_init_impl build them. Built once per type, by the first quantization of that type
 * (pthread_once: concurrent callers wait for it), into static storage (no allocation); about 0.3-0.7 s for an IQ2
 * table, 0.01-0.03 s for an IQ3 one, measured on the 2-core dev machine under load. */
#define IQ2_MAP_SIZE 43692 /* 2-bit levels of 8 weights (the reference's kmap size; points reach 0xAAAA) */
#define IQ3_MAP_SIZE 4096  /* 3-bit levels of 4 weights */

enum { T_IQ2_XXS, T_IQ2_XS, T_IQ2_S, T_IQ3_XXS, T_IQ3_S, T_COUNT };

/* Neighbour-list entries each table holds (counts and indices), exactly: the tables are fixed functions of the
 * grids; a build that would need more marks the table incomplete (tests/test_quantize.c checks). */
#define NB_IQ2_XXS 417400
#define NB_IQ2_XS 551722
#define NB_IQ2_S 209100
#define NB_IQ3_XXS 22825
#define NB_IQ3_S 28317

struct iq_search {
    int group;     /* weights per grid entry: 8 (IQ2) or 4 (IQ3) */
    int bits;      /* bits per level in a lattice point: 2 or 3 */
    int grid_size; /* 256, 512 or 1024 */
    int nwant;     /* distinct distances whose entries are neighbours */
    int map_size;
    int ok;        /* 1 once built and every grid byte was a known level */
    size_t nb_used, nb_cap;
    int8_t pos[1024][8];
    int32_t *map;
    uint16_t *nb;
};

static int32_t map_iq2_xxs[IQ2_MAP_SIZE], map_iq2_xs[IQ2_MAP_SIZE], map_iq2_s[IQ2_MAP_SIZE];
static int32_t map_iq3_xxs[IQ3_MAP_SIZE], map_iq3_s[IQ3_MAP_SIZE];
static uint16_t nb_iq2_xxs[NB_IQ2_XXS], nb_iq2_xs[NB_IQ2_XS], nb_iq2_s[NB_IQ2_S], nb_iq3_xxs[NB_IQ3_XXS],
    nb_iq3_s[NB_IQ3_S];
static struct iq_search tables[T_COUNT] = {
    [T_IQ2_XXS] = {.map = map_iq2_xxs, .nb = nb_iq2_xxs, .nb_cap = NB_IQ2_XXS},
    [T_IQ2_XS] = {.map = map_iq2_xs, .nb = nb_iq2_xs, .nb_cap = NB_IQ2_XS},
    [T_IQ2_S] = {.map = map_iq2_s, .nb = nb_iq2_s, .nb_cap = NB_IQ2_S},
    [T_IQ3_XXS] = {.map = map_iq3_xxs, .nb = nb_iq3_xxs, .nb_cap = NB_IQ3_XXS},
    [T_IQ3_S] = {.map = map_iq3_s, .nb = nb_iq3_s, .nb_cap = NB_IQ3_S},
};
static pthread_once_t table_once[T_COUNT] = {PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                             PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT};

static const uint8_t iq2_levels[3] = {8, 25, 43};
static const uint8_t iq3xxs_levels[8] = {4, 12, 20, 28, 36, 44, 52, 62};
static const uint8_t iq3s_levels[8] = {1, 3, 5, 7, 9, 11, 13, 15};

/* Grid entry j's byte i (little-endian) of the type's dequantization grid. */
static int grid_byte(int type, int j, int i)
{
    switch (type) {
    case T_IQ2_XXS: return (int)(loom_iq2xxs_grid[j] >> (8 * i) & 255);
    case T_IQ2_XS: return (int)(loom_iq2xs_grid[j] >> (8 * i) & 255);
    case T_IQ2_S: return (int)(loom_iq2s_grid[j] >> (8 * i) & 255);
    case T_IQ3_XXS: return (int)(loom_iq3xxs_grid[j] >> (8 * i) & 255);
    default: return (int)(loom_iq3s_grid[j] >> (8 * i) & 255);
    }
}

/* pos[] from the dequantization grid; 0 when a byte is not one of the type's levels. */
static int build_pos(struct iq_search *t, int type)
{
    const uint8_t *lv = type <= T_IQ2_S ? iq2_levels : type == T_IQ3_XXS ? iq3xxs_levels : iq3s_levels;
    int nlv = type <= T_IQ2_S ? 3 : 8;
    for (int j = 0; j < t->grid_size; j++)
        for (int i = 0; i < t->group; i++) {
            int b = grid_byte(type, j, i), l = 0;
            while (l < nlv && lv[l] != b)
                l++;
            if (l == nlv)
                return 0;
            t->pos[j][i] = (int8_t)(2 * l + 1);
        }
    return 1;
}

/* Append point u's neighbour list at t->nb + t->nb_used; 0 when the storage is full. */
static int build_neighbours(struct iq_search *t, int u)
{
    int8_t p[8];
    int d2[1024], mask = (1 << t->bits) - 1;
    for (int k = 0; k < t->group; k++)
        p[k] = (int8_t)(2 * (u >> (t->bits * k) & mask) + 1);
    for (int j = 0; j < t->grid_size; j++) {
        int d = 0;
        for (int k = 0; k < t->group; k++)
            d += (t->pos[j][k] - p[k]) * (t->pos[j][k] - p[k]);
        d2[j] = d;
    }
    size_t start = t->nb_used, at = start + 1;
    if (at > t->nb_cap)
        return 0;
    int prev = -1;
    for (int have = 0; have < t->nwant; have++) {
        int next = -1; /* the smallest distance above prev */
        for (int j = 0; j < t->grid_size; j++)
            if (d2[j] > prev && (next < 0 || d2[j] < next))
                next = d2[j];
        if (next < 0)
            break;
        for (int j = 0; j < t->grid_size; j++)
            if (d2[j] == next) {
                if (at >= t->nb_cap)
                    return 0;
                t->nb[at++] = (uint16_t)j;
            }
        prev = next;
    }
    t->nb[start] = (uint16_t)(at - start - 1);
    t->map[u] = -(int32_t)start - 1;
    t->nb_used = at;
    return 1;
}

static void build_table(int type)
{
    static const int gsize[T_COUNT] = {256, 512, 1024, 256, 512}, nwant[T_COUNT] = {2, 2, 1, 2, 3};
    struct iq_search *t = &tables[type];
    int iq2 = type <= T_IQ2_S;
    t->group = iq2 ? 8 : 4;
    t->bits = iq2 ? 2 : 3;
    t->grid_size = gsize[type];
    t->nwant = nwant[type];
    t->map_size = iq2 ? IQ2_MAP_SIZE : IQ3_MAP_SIZE;
    if (!build_pos(t, type))
        return;
    for (int u = 0; u < t->map_size; u++)
        t->map[u] = -1;
    for (int j = 0; j < t->grid_size; j++) {
        int u = 0;
        for (int k = 0; k < t->group; k++)
            u |= (t->pos[j][k] - 1) / 2 << (t->bits * k);
        t->map[u] = j;
    }
    for (int u = 0; u < t->map_size; u++)
        if (t->map[u] < 0 && !build_neighbours(t, u))
            return;
    t->ok = 1;
}

static void build_iq2_xxs(void) { build_table(T_IQ2_XXS); }
static void build_iq2_xs(void) { build_table(T_IQ2_XS); }
static void build_iq2_s(void) { build_table(T_IQ2_S); }
static void build_iq3_xxs(void) { build_table(T_IQ3_XXS); }
static void build_iq3_s(void) { build_table(T_IQ3_S); }

static const struct iq_search *table(int type)
{
    static void (*const build[T_COUNT])(void) = {build_iq2_xxs, build_iq2_xs, build_iq2_s, build_iq3_xxs,
                                                 build_iq3_s};
    pthread_once(&table_once[type], build[type]);
    return &tables[type];
}

int loom_iq_quant_table_stats(uint32_t type, size_t *neighbours)
{
    int t = type == LOOM_TYPE_IQ2_XXS ? T_IQ2_XXS : type == LOOM_TYPE_IQ2_XS ? T_IQ2_XS
          : type == LOOM_TYPE_IQ2_S ? T_IQ2_S : type == LOOM_TYPE_IQ3_XXS ? T_IQ3_XXS
          : type == LOOM_TYPE_IQ3_S ? T_IQ3_S : -1;
    if (t < 0)
        return 0;
    const struct iq_search *s = table(t);
    *neighbours = s->nb_used;
    return s->ok;
}

/* ---- the shared scale search ---- */

enum iq_second {
    SECOND_ALL_IF_OFF, /* IQ3_S: groups start "off grid"; redo every group when one is off */
    SECOND_OFF_ONLY,   /* IQ3_XXS, IQ2_XS, IQ2_S: redo only the off-grid groups */
    SECOND_ALWAYS,     /* IQ2_XXS: redo every group whenever the scale is positive */
};

struct iq_fit_cfg {
    const struct iq_search *t;
    int n;          /* weights per sub-block: 32 or 16 */
    int kmax;       /* levels: 8 (IQ3) or 3 (IQ2) */
    int is_range;   /* scales tried: is = -is_range..is_range */
    float step;     /* 0.2 (IQ3) or 0.1 (IQ2) */
    enum iq_second second;
};

static inline int clamp_l(int l, int hi) { return l < 0 ? 0 : l > hi ? hi : l; }

/* The lattice point of one group's levels L[group]. */
static int group_point(const struct iq_search *t, const int8_t *L)
{
    int u = 0;
    for (int i = 0; i < t->group; i++)
        u |= L[i] << (t->bits * i);
    return u;
}

/* Of the neighbours at t->nb + off, the entry minimising sum w (scale q - x)^2 (the first on ties); its
 * levels into L (iq2/iq3_find_best_neighbour). */
static void best_neighbour(const struct iq_search *t, int off, const float *xval, const float *w, float scale,
                           int8_t *L)
{
    const uint16_t *nb = t->nb + off;
    float best = FLT_MAX;
    int gi = nb[1];
    for (int j = 1; j <= nb[0]; j++) {
        const int8_t *pg = t->pos[nb[j]];
        float d2 = 0;
        for (int i = 0; i < t->group; i++) {
            float diff = scale * (float)pg[i] - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    for (int i = 0; i < t->group; i++)
        L[i] = (int8_t)((t->pos[gi][i] - 1) / 2);
}

/* Round one group at inverse scale id to levels L (clamped to 0..kmax-1); off the grid, the best neighbour at
 * `scale`. Returns 1 when the rounding was on the grid. */
static int place_group(const struct iq_fit_cfg *c, const float *xval, const float *waux, float id, float scale,
                       int8_t *L)
{
    for (int i = 0; i < c->t->group; i++)
        L[i] = (int8_t)clamp_l(loom_nearest_int(0.5f * (id * xval[i] - 1)), c->kmax - 1);
    int m = c->t->map[group_point(c->t, L)];
    if (m >= 0)
        return 1;
    best_neighbour(c->t, -m - 1, xval, waux, scale, L);
    return 0;
}

/* sum w x q and sum w q q with q = 2 L + 1. */
static void level_sums(int n, const float *xval, const float *weight, const int8_t *L, float *sumqx, float *sumq2)
{
    float sx = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        float w = weight[i], q = (float)(2 * L[i] + 1);
        sx += w * xval[i] * q;
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* Scale and levels L[n] of one sub-block of magnitudes xval: the best of 2 is_range + 1 trial scales around
 * (2 kmax - 1) / max, then the off-grid groups re-placed at that scale and the scale refitted. `scale` is the
 * start value kept when no trial improves. May return a negative scale (the caller flips the signs). */
static float iq_fit(const struct iq_fit_cfg *c, const float *xval, const float *weight, const float *waux, float max,
                    float scale, int8_t *L)
{
    const int g = c->t->group, ng = c->n / g;
    int8_t Laux[32];
    int on[8], on_aux[8];
    float best = 0, sumqx, sumq2;
    for (int k = 0; k < ng; k++)
        on[k] = c->second != SECOND_ALL_IF_OFF;
    for (int is = -c->is_range; is <= c->is_range; is++) {
        float id = ((float)(2 * c->kmax - 1) + (float)is * c->step) / max, this_scale = 1 / id;
        for (int k = 0; k < ng; k++)
            on_aux[k] = place_group(c, xval + g * k, waux + g * k, id, this_scale, Laux + g * k);
        level_sums(c->n, xval, weight, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)c->n);
            memcpy(on, on_aux, sizeof(int) * (size_t)ng);
        }
    }
    int n_off = 0;
    for (int k = 0; k < ng; k++)
        n_off += !on[k];
    if (!(scale > 0) || (c->second != SECOND_ALWAYS && n_off == 0))
        return scale;
    float id = 1 / scale;
    for (int k = 0; k < ng; k++)
        if (c->second != SECOND_OFF_ONLY || !on[k])
            place_group(c, xval + g * k, waux + g * k, id, scale, L + g * k);
    level_sums(c->n, xval, weight, L, &sumqx, &sumq2);
    if (sumq2 > 0)
        scale = sumqx / sumq2;
    return scale;
}

/* The grid index of a group's levels: on the grid after iq_fit for finite input. Levels off the lattice (left by
 * make_qp_quants when the input overflows, where the reference reads out of bounds and aborts) give index 0. */
static int group_index(const struct iq_search *t, const int8_t *L)
{
    for (int i = 0; i < t->group; i++)
        if (L[i] < 0 || L[i] >= 1 << t->bits)
            return 0;
    int u = group_point(t, L), m = u < t->map_size ? t->map[u] : -1;
    return m < 0 ? 0 : m;
}

/* sum of x^2 over a super-block, in order. */
static float block_sumx2(const float *x)
{
    float s = 0;
    for (int i = 0; i < LOOM_QK_K; i++)
        s += x[i] * x[i];
    return s;
}

/* Magnitudes of 8 weights into xval and their sign bits (bit i: x[i] < 0). With parity, an odd count of
 * negatives flips the sign of the weight with the smallest weight * x^2 (its magnitude stored negated), and the
 * result keeps 7 bits (the 8th is implied by even parity). */
static uint8_t group_signs(const float *x, const float *weight, float *xval, int parity)
{
    uint8_t s = 0;
    int nflip = 0;
    for (int i = 0; i < 8; i++) {
        if (x[i] >= 0) {
            xval[i] = x[i];
        } else {
            xval[i] = -x[i];
            nflip++;
            s |= (uint8_t)(1 << i);
        }
    }
    if (!parity)
        return s;
    if (nflip % 2) {
        int imin = 0;
        float min = weight[0] * x[0] * x[0];
        for (int i = 1; i < 8; i++) {
            float ax = weight[i] * x[i] * x[i];
            if (ax < min) {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= (uint8_t)(1 << imin);
    }
    return s & 127;
}

/* weight[i] = qw[i] * sqrt(sigma2 + x^2), or without qw `plain` + x^2 (plain 0 or sigma2 / 4); waux = sqrt. */
static void group_weights(int n, const float *x, const float *qw, float sigma2, float plain, float *weight,
                          float *waux)
{
    for (int i = 0; i < n; i++)
        weight[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i]) : plain == 0 ? x[i] * x[i] : plain + x[i] * x[i];
    for (int i = 0; i < n; i++)
        waux[i] = sqrtf(weight[i]);
}

static float max_of(int n, const float *x)
{
    float m = x[0];
    for (int i = 1; i < n; i++)
        m = m > x[i] ? m : x[i];
    return m;
}

/* The 4-bit scale of a sub-block: nearest_int((scale / d - 1) / 2) in 0..15, as (0.5 (id scale - 1)). */
static int scale_nibble(float id, float scale) { return clamp_l(loom_nearest_int(0.5f * (id * scale - 1)), 15); }

/* ---- IQ3_S: sub-blocks of 32, 8 groups of 4, explicit signs; d carries the fudge 1.033 ---- */

static void iq3_s_block(const float *xbl, const float *qw, struct loom_block_iq3_s *y)
{
    const struct iq_fit_cfg c = {table(T_IQ3_S), 32, 8, 9, 0.2f, SECOND_ALL_IF_OFF};
    float scales[8], weight[32], xval[32], waux[32], max_scale = 0;
    int8_t L[32];
    uint8_t bsig[4], *qs = y->qs, *sg = y->signs;
    memset(y, 0, sizeof *y);
    float sigma2 = 2 * block_sumx2(xbl) / LOOM_QK_K;
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        group_weights(32, xb, qw ? qw + 32 * ib : NULL, sigma2, 0, weight, waux);
        for (int k = 0; k < 4; k++)
            bsig[k] = group_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, 0);
        float max = max_of(32, xval);
        memset(L, 0, sizeof L);
        if (!max) { /* the reference then leaves qs and signs where they are: the next sub-block writes here */
            scales[ib] = 0;
            continue;
        }
        float scale = iq_fit(&c, xval, weight, waux, max, max / 15, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++)
                bsig[k] = (uint8_t)~bsig[k];
        }
        for (int k = 0; k < 8; k++) {
            int gi = group_index(c.t, L + 4 * k);
            qs[k] = (uint8_t)(gi & 255);
            y->qh[ib] |= (uint8_t)((gi >> 8) << k);
        }
        qs += 8;
        memcpy(sg, bsig, 4);
        sg += 4;
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!max_scale)
        return;
    float d = max_scale / 31, id = 1 / d;
    y->d = loom_f32_to_f16(d * 1.033f);
    for (int ib = 0; ib < 8; ib += 2)
        y->scales[ib / 2] = (uint8_t)(scale_nibble(id, scales[ib]) | scale_nibble(id, scales[ib + 1]) << 4);
}

void loom_iq3_s_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_iq3_s *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq3_s_block(src + LOOM_QK_K * i, qw ? qw + LOOM_QK_K * i : NULL, &y[i]);
}

void loom_iq3_s_quantize(const float *src, void *dst, int64_t n) { loom_iq3_s_quantize_w(src, dst, n, NULL); }

/* ---- IQ3_XXS: sub-blocks of 32, 8 groups of 4, parity signs; fudge 1.0125 ---- */

static void iq3_xxs_block(const float *xbl, const float *qw, struct loom_block_iq3_xxs *y)
{
    const struct iq_fit_cfg c = {table(T_IQ3_XXS), 32, 8, 15, 0.2f, SECOND_OFF_ONLY};
    float scales[8], weight[32], xval[32], waux[32], max_scale = 0;
    int8_t L[32];
    uint8_t bsig[4], q3[64] = {0};
    uint32_t sas[8] = {0};
    float sigma2 = 2 * block_sumx2(xbl) / LOOM_QK_K;
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        group_weights(32, xb, qw ? qw + 32 * ib : NULL, sigma2, 0, weight, waux);
        for (int k = 0; k < 4; k++)
            bsig[k] = group_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, 1);
        float max = max_of(32, xval);
        memset(L, 0, sizeof L);
        if (max < 1e-8f) { /* GROUP_MAX_EPS_IQ3_XXS */
            scales[ib] = 0;
            continue;
        }
        float scale = iq_fit(&c, xval, weight, waux, max, max / 15, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++)
                bsig[k] = (uint8_t)(~bsig[k] & 127);
        }
        for (int k = 0; k < 8; k++)
            q3[8 * ib + k] = (uint8_t)group_index(c.t, L + 4 * k);
        sas[ib] = (uint32_t)bsig[0] | (uint32_t)bsig[1] << 7 | (uint32_t)bsig[2] << 14 | (uint32_t)bsig[3] << 21;
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    memset(y, 0, sizeof *y);
    if (!max_scale)
        return;
    float d = max_scale / 31, id = 1 / d;
    y->d = loom_f32_to_f16(d * 1.0125f);
    for (int ib = 0; ib < 8; ib++)
        sas[ib] |= (uint32_t)scale_nibble(id, scales[ib]) << 28;
    memcpy(y->qs, q3, 64);
    memcpy(y->qs + 64, sas, sizeof sas);
}

void loom_iq3_xxs_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_iq3_xxs *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq3_xxs_block(src + LOOM_QK_K * i, qw ? qw + LOOM_QK_K * i : NULL, &y[i]);
}

void loom_iq3_xxs_quantize(const float *src, void *dst, int64_t n) { loom_iq3_xxs_quantize_w(src, dst, n, NULL); }

/* ---- IQ2_S: sub-blocks of 16, 2 groups of 8, explicit signs; fudge 0.9875 ---- */

static void iq2_s_block(const float *xbl, const float *qw, struct loom_block_iq2_s *y)
{
    const struct iq_fit_cfg c = {table(T_IQ2_S), 16, 3, 9, 0.1f, SECOND_OFF_ONLY};
    float scales[16], weight[16], xval[16], waux[16], max_scale = 0;
    int8_t L[16];
    uint8_t bsig[2];
    memset(y, 0, sizeof *y);
    float sigma2 = 2 * block_sumx2(xbl) / LOOM_QK_K;
    for (int ib = 0; ib < 16; ib++) {
        const float *xb = xbl + 16 * ib;
        group_weights(16, xb, qw ? qw + 16 * ib : NULL, sigma2, 0.25f * sigma2, weight, waux);
        for (int k = 0; k < 2; k++)
            bsig[k] = group_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, 0);
        float max = max_of(16, xval);
        memset(L, 0, sizeof L);
        if (max < 1e-8f) { /* GROUP_MAX_EPS_IQ2_S */
            scales[ib] = 0;
            continue;
        }
        float scale = iq_fit(&c, xval, weight, waux, max, max / 5, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 2; k++)
                bsig[k] = (uint8_t)~bsig[k];
        }
        for (int k = 0; k < 2; k++) {
            int gi = group_index(c.t, L + 8 * k), i8 = 2 * ib + k;
            y->qs[i8] = (uint8_t)(gi & 255);
            y->qh[i8 / 4] |= (uint8_t)((gi >> 8) << 2 * (i8 % 4));
            y->qs[32 + i8] = bsig[k];
        }
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!max_scale)
        return;
    float d = max_scale / 31, id = 1 / d;
    y->d = loom_f32_to_f16(d * 0.9875f);
    for (int ib = 0; ib < 16; ib += 2)
        y->scales[ib / 2] = (uint8_t)(scale_nibble(id, scales[ib]) | scale_nibble(id, scales[ib + 1]) << 4);
}

void loom_iq2_s_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_iq2_s *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq2_s_block(src + LOOM_QK_K * i, qw ? qw + LOOM_QK_K * i : NULL, &y[i]);
}

void loom_iq2_s_quantize(const float *src, void *dst, int64_t n) { loom_iq2_s_quantize_w(src, dst, n, NULL); }

/* ---- IQ2_XS: sub-blocks of 16, 2 groups of 8, parity signs; weights required ---- */

static void iq2_xs_block(const float *xbl, const float *qw, struct loom_block_iq2_xs *y)
{
    const struct iq_fit_cfg c = {table(T_IQ2_XS), 16, 3, 9, 0.1f, SECOND_OFF_ONLY};
    float scales[16], weight[16], xval[16], waux[16], max_scale = 0;
    int8_t L[16];
    uint8_t bsig[2];
    uint16_t q2[32] = {0};
    memset(y, 0, sizeof *y);
    float sigma2 = block_sumx2(xbl) / LOOM_QK_K;
    for (int ib = 0; ib < 16; ib++) {
        const float *xb = xbl + 16 * ib;
        group_weights(16, xb, qw + 16 * ib, sigma2, 0, weight, waux);
        for (int k = 0; k < 2; k++)
            bsig[k] = group_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, 1);
        float max = max_of(16, xval);
        memset(L, 0, sizeof L);
        if (max < 1e-15f) { /* GROUP_MAX_EPS */
            scales[ib] = 0;
            continue;
        }
        float scale = iq_fit(&c, xval, weight, waux, max, max / 5, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 2; k++)
                bsig[k] = (uint8_t)(~bsig[k] & 127);
        }
        for (int k = 0; k < 2; k++)
            q2[2 * ib + k] = (uint16_t)(group_index(c.t, L + 8 * k) | bsig[k] << 9);
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!max_scale)
        return;
    float d = max_scale / 31, id = 1 / d;
    y->d = loom_f32_to_f16(d);
    for (int ib = 0; ib < 16; ib += 2)
        y->scales[ib / 2] = (uint8_t)(scale_nibble(id, scales[ib]) | scale_nibble(id, scales[ib + 1]) << 4);
    memcpy(y->qs, q2, sizeof q2);
}

void loom_iq2_xs_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_iq2_xs *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq2_xs_block(src + LOOM_QK_K * i, qw + LOOM_QK_K * i, &y[i]);
}

/* ---- IQ2_XXS: sub-blocks of 32, 4 groups of 8, parity signs, start scale from make_qp_quants; weights
 * required ---- */

static void iq2_xxs_block(const float *xbl, const float *qw, struct loom_block_iq2_xxs *y)
{
    const struct iq_fit_cfg c = {table(T_IQ2_XXS), 32, 3, 6, 0.1f, SECOND_ALWAYS};
    float scales[8], weight[32], xval[32], waux[32], max_scale = 0;
    int8_t L[32];
    uint8_t bsig[4], Lq[32];
    uint32_t q2[16] = {0};
    memset(y, 0, sizeof *y);
    float sigma2 = block_sumx2(xbl) / LOOM_QK_K;
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xbl + 32 * ib;
        group_weights(32, xb, qw + 32 * ib, sigma2, 0, weight, waux);
        for (int k = 0; k < 4; k++)
            bsig[k] = group_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k, 1);
        float max = max_of(32, xval);
        if (max < 1e-15f) { /* GROUP_MAX_EPS */
            scales[ib] = 0;
            continue;
        }
        float scale = loom_fit_qp(32, 4, xval, Lq, weight), eff_max = scale * 3;
        if (eff_max <= 0) {
            scales[ib] = 0;
            continue;
        }
        for (int i = 0; i < 32; i++)
            L[i] = (int8_t)Lq[i];
        scale = iq_fit(&c, xval, weight, waux, eff_max, scale, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++)
                bsig[k] = (uint8_t)(~bsig[k] & 127);
        }
        for (int k = 0; k < 4; k++) {
            q2[2 * ib] |= (uint32_t)group_index(c.t, L + 8 * k) << 8 * k;
            q2[2 * ib + 1] |= (uint32_t)bsig[k] << 7 * k;
        }
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!max_scale)
        return;
    float d = max_scale / 31, id = 1 / d;
    y->d = loom_f32_to_f16(d);
    for (int ib = 0; ib < 8; ib++)
        q2[2 * ib + 1] |= (uint32_t)scale_nibble(id, scales[ib]) << 28;
    memcpy(y->qs, q2, sizeof q2);
}

void loom_iq2_xxs_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    struct loom_block_iq2_xxs *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq2_xxs_block(src + LOOM_QK_K * i, qw + LOOM_QK_K * i, &y[i]);
}
