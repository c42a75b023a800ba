/* iq1_quant.c — the weight quantizers of IQ1_S and IQ1_M (block layouts in kernels/blocks.h, lattice in
 * kernels/iq1_grid.h), bytewise llama.cpp's ggml-quants.c quantize_iq1_s / quantize_iq1_m, and the lattice's
 * code map and neighbour lists they search (the reference's iq2xs_init_impl), built once on first use. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/iq1_grid.h"
#include "kernels/protos.h"
#include "util/fp16.h"

/* ---- code map and neighbour lists (any 3-level lattice of groups of 8) ---------------------------------- */

/* Squared distance of two codes (2 bits an element, values 0..2) in levels. */
static int code_dist2(const int8_t a[8], const int8_t b[8])
{
    int d = 0;
    for (int k = 0; k < 8; k++)
        d += (a[k] - b[k]) * (a[k] - b[k]);
    return d;
}

/* Appends to nb at *used the neighbour list of code u (not on the grid): its count, then the grid indices of
 * the nwant smallest distinct distances, by distance then index (the reference's qsort of (distance, index)
 * pairs with a total order, which this reproduces without sorting). Returns 0, or -1 when nb_cap is short. */
static int code_neighbours(int u, const int8_t (*lev)[8], int grid_size, int nwant, uint16_t *nb, int nb_cap,
                           int *used, uint8_t *dist)
{
    int8_t pos[8];
    int count[33] = {0}, limit = -1, have = 0, n = 0;
    for (int k = 0; k < 8; k++)
        pos[k] = (int8_t)((u >> (2 * k)) & 3);
    for (int j = 0; j < grid_size; j++)
        count[dist[j] = (uint8_t)code_dist2(lev[j], pos)]++;
    for (int v = 0; v <= 32 && have < nwant; v++)
        if (count[v]) {
            have++;
            limit = v;
            n += count[v];
        }
    if (*used + 1 + n > nb_cap)
        return -1;
    nb[(*used)++] = (uint16_t)n;
    for (int v = 0; v <= limit; v++)
        for (int j = 0; count[v] && j < grid_size; j++)
            if (dist[j] == v)
                nb[(*used)++] = (uint16_t)j;
    return 0;
}

/* Build the code map and neighbour lists of a lattice of grid_size (<= 2048) groups of 8, whose point k has
 * code codes[k] (element j's level 0..2 in bits 2j, 2j+1), as ggml-quants.c iq2xs_init_impl builds them (the
 * distances there are of 2 * level + 1, four times these, so the order is the same): map[LOOM_IQ_MAP_SIZE]
 * gets, for each code u, the grid index when u is on the grid, else -(o + 1) with nb[o] the count of u's
 * neighbours and nb[o + 1 ..] their grid indices (nwant: how many distinct distances the list spans; 3 for
 * IQ1_S/IQ1_M, 2 for IQ2_XXS/IQ2_XS/IQ3, 1 for IQ2_S in the reference). Codes holding a level 3 (which no
 * quantizer forms) get nb[0], an empty list. Returns the nb entries used, or -1 when nb_cap is too small.
 * Shared by the grid types (IQ2 may call it with its own grid). Allocates nothing; reentrant. */
int loom_iq_grid_neighbours(const uint16_t *codes, int grid_size, int nwant, int32_t *map, uint16_t *nb,
                            int nb_cap)
{
    int8_t lev[LOOM_IQ1S_GRID_SIZE][8]; /* 18 KB of stack: callers may build their tables concurrently */
    uint8_t dist[LOOM_IQ1S_GRID_SIZE];
    if (grid_size > LOOM_IQ1S_GRID_SIZE || nb_cap < 1)
        return -1;
    for (int u = 0; u < LOOM_IQ_MAP_SIZE; u++)
        map[u] = -1;
    nb[0] = 0;
    int used = 1;
    for (int k = 0; k < grid_size; k++) {
        map[codes[k]] = k;
        for (int j = 0; j < 8; j++)
            lev[k][j] = (int8_t)((codes[k] >> (2 * j)) & 3);
    }
    for (int u = 0; u < LOOM_IQ_MAP_SIZE; u++) {
        if (map[u] >= 0 || ((u & (u >> 1)) & 0x5555))
            continue;
        int at = used;
        if (code_neighbours(u, (const int8_t(*)[8])lev, grid_size, nwant, nb, nb_cap, &used, dist))
            return -1;
        map[u] = -(at + 1);
    }
    return used;
}

/* The IQ1 lattice's tables: filled once (pthread_once) into static storage, never in a kernel's loop. Their
 * size is fixed by the grid: LOOM_IQ1_NB_ENTRIES neighbour entries (checked when built). */
#define LOOM_IQ1_NB_ENTRIES 332235
static int32_t iq1_map[LOOM_IQ_MAP_SIZE];
static uint16_t iq1_nb[LOOM_IQ1_NB_ENTRIES];
static int iq1_nb_used;
static pthread_once_t iq1_once = PTHREAD_ONCE_INIT;

static void iq1_tables_build(void)
{
    uint16_t codes[LOOM_IQ1S_GRID_SIZE];
    for (int k = 0; k < LOOM_IQ1S_GRID_SIZE; k++) {
        unsigned c = 0;
        for (int j = 0; j < 8; j++)
            c |= (unsigned)((int8_t)(uint8_t)(loom_iq1s_grid[k] >> (8 * j)) + 1) << (2 * j);
        codes[k] = (uint16_t)c;
    }
    iq1_nb_used = loom_iq_grid_neighbours(codes, LOOM_IQ1S_GRID_SIZE, 3, iq1_map, iq1_nb, LOOM_IQ1_NB_ENTRIES);
}

int loom_iq1_quant_init(void)
{
    pthread_once(&iq1_once, iq1_tables_build);
    return iq1_nb_used;
}

/* ---- the shared search --------------------------------------------------------------------------------- */

/* Level (0..2) of element j of grid point idx. */
static inline int glevel(int idx, int j) { return (int8_t)(uint8_t)(loom_iq1s_grid[idx] >> (8 * j)) + 1; }

/* A (value, index) pair laid out as the reference's float pairs, sorted by the same libc qsort with a
 * comparator on the value only: equal values keep libc's order (glibc's qsort, a merge sort for arrays this
 * small, keeps them in input order), the same in both since the call is the same. */
struct iq1_pair {
    float v;
    int32_t i;
};

static int iq1_pair_cmp(const void *a, const void *b)
{
    float l = ((const struct iq1_pair *)a)->v, r = ((const struct iq1_pair *)b)->v;
    return l < r ? -1 : l > r ? 1 : 0;
}

static void iq1_sort(const float *xb, int n, struct iq1_pair *p)
{
    for (int j = 0; j < n; j++)
        p[j] = (struct iq1_pair){xb[j], j};
    qsort(p, (size_t)n, sizeof *p, iq1_pair_cmp);
}

/* The group of 8 at L (levels 0..2) as a grid index: its own point when on the grid (returns 1), else the
 * neighbour of least weighted squared error sum w (scale * xg[level] - x)^2, first on ties (ggml-quants.c
 * iq1_find_best_neighbour2), whose levels replace L (returns 0). Where every error is NaN or >= FLT_MAX the
 * reference's fallback reads past its input and then aborts; loom takes the first neighbour. */
static int iq1_group_index(int8_t *L, const float *x, const float *w, float scale, const float *xg, uint16_t *index)
{
    unsigned u = 0;
    for (int j = 0; j < 8; j++)
        u |= (unsigned)L[j] << (2 * j);
    int32_t m = iq1_map[u];
    if (m >= 0) {
        *index = (uint16_t)m;
        return 1;
    }
    const uint16_t *nb = iq1_nb + (-m - 1);
    float best = FLT_MAX;
    int gi = nb[0] ? nb[1] : 0;
    for (int k = 1; k <= nb[0]; k++) {
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            float diff = scale * xg[glevel(nb[k], i)] - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            gi = nb[k];
        }
    }
    for (int i = 0; i < 8; i++)
        L[i] = (int8_t)glevel(gi, i);
    *index = (uint16_t)gi;
    return 0;
}

/* sigma2 = 2 * mean(x^2) over the 256 weights of a super-block (sequential sum). */
static float iq1_sigma2(const float *x)
{
    float s = 0;
    for (int i = 0; i < LOOM_QK_K; i++)
        s += x[i] * x[i];
    return 2 * s / LOOM_QK_K;
}

/* weight[n]: qw * sqrt(sigma2 + x^2), or x^2 without qw. */
static void iq1_weights(const float *x, const float *qw, float sigma2, int n, float *weight)
{
    for (int i = 0; i < n; i++)
        weight[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i]) : x[i] * x[i];
}

static float iq1_absmax(const float *x, int n)
{
    float m = fabsf(x[0]);
    for (int i = 1; i < n; i++)
        m = m > fabsf(x[i]) ? m : fabsf(x[i]);
    return m;
}

/* Levels of the sorted elements: below i1 level 0, below i2 level 1, else 2; all mirrored when scale < 0. */
static void iq1_levels(const struct iq1_pair *p, int n, int i1, int i2, int8_t *L)
{
    for (int j = 0; j < n; j++)
        L[p[j].i] = (int8_t)(j < i1 ? 0 : j < i2 ? 1 : 2);
}

/* ---- IQ1_S ----------------------------------------------------------------------------------------------- */

static const float iq1_xp[3] = {-1 + 0.125f, 0.125f, 1 + 0.125f}; /* level values, delta +1/8 */
static const float iq1_xm[3] = {-1 - 0.125f, -0.125f, 1 - 0.125f}; /* delta -1/8 */

/* Exhaustive split search of one IQ1_S sub-block of 32 (sorted pairs p, prefix sums sx, sw of weight * x and
 * weight): best (i1, i2, shift) by sumqx^2 / sumq2 over both deltas. Returns the shift (0: none found). */
static int iq1_s_split(const float *sx, const float *sw, float *scale, int *bi1, int *bi2)
{
    float best = -FLT_MAX;
    int shift = 0;
    for (int i1 = 0; i1 <= 32; i1++)
        for (int i2 = i1; i2 <= 32; i2++)
            for (int s = 0; s < 2; s++) {
                const float *v = s ? iq1_xm : iq1_xp;
                float a = sx[i1] - sx[0], b = sx[i2] - sx[i1], c = sx[32] - sx[i2];
                float wa = sw[i1] - sw[0], wb = sw[i2] - sw[i1], wc = sw[32] - sw[i2];
                float sumqx = a * v[0] + b * v[1] + c * v[2];
                float sumq2 = wa * v[0] * v[0] + wb * v[1] * v[1] + wc * v[2] * v[2];
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    *scale = sumqx / sumq2;
                    best = *scale * sumqx;
                    *bi1 = i1;
                    *bi2 = i2;
                    shift = s ? -1 : 1;
                }
            }
    return shift;
}

/* One sub-block ib (32 weights at xb, weights weight) of an IQ1_S block: indices and qh index bits into y;
 * returns its scale (0 for a skipped sub-block) and *shift (+1: delta +1/8, -1: -1/8). */
static float iq1_s_sub(const float *xb, const float *weight, struct loom_block_iq1_s *y, int ib, int *shift)
{
    struct iq1_pair p[32];
    float sx[33], sw[33], scale = iq1_absmax(xb, 32);
    int8_t L[32];
    int i1 = -1, i2 = -1;
    *shift = 1;
    if (scale < 1e-12f)
        return 0;
    iq1_sort(xb, 32, p);
    sx[0] = sw[0] = 0;
    for (int j = 0; j < 32; j++) {
        sx[j + 1] = sx[j] + weight[p[j].i] * xb[p[j].i];
        sw[j + 1] = sw[j] + weight[p[j].i];
    }
    int s = iq1_s_split(sx, sw, &scale, &i1, &i2);
    if (s == 0 || i1 < 0 || i2 < 0)
        return 0;
    iq1_levels(p, 32, i1, i2, L);
    if (scale < 0) {
        for (int j = 0; j < 32; j++)
            L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        s = -s;
    }
    const float *xx = s == 1 ? iq1_xp : iq1_xm;
    uint16_t index[4];
    int on_grid = 1;
    for (int k = 0; k < 4; k++)
        on_grid &= iq1_group_index(L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xx, &index[k]);
    if (!on_grid) {
        float sumqx = 0, sumq2 = 0;
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 8; j++) {
                float w = weight[8 * k + j], q = xx[glevel(index[k], j)];
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        if (sumqx > 0 && sumq2 > 0)
            scale = sumqx / sumq2;
    }
    unsigned h = 0;
    for (int k = 0; k < 4; k++) {
        y->qs[4 * ib + k] = (uint8_t)(index[k] & 255);
        h |= (unsigned)(index[k] >> 8) << (3 * k);
    }
    y->qh[ib] = (uint16_t)h;
    *shift = s;
    return scale;
}

static void iq1_s_block(const float *x, const float *qw, struct loom_block_iq1_s *y)
{
    float scales[8], weight[32], max_scale = 0, sigma2 = iq1_sigma2(x);
    int shifts[8];
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < 8; ib++) {
        iq1_weights(x + 32 * ib, qw + 32 * ib, sigma2, 32, weight);
        scales[ib] = iq1_s_sub(x + 32 * ib, weight, y, ib, &shifts[ib]);
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (max_scale == 0)
        return;
    float d = max_scale / 15, id = 1 / d;
    y->d = loom_f32_to_f16(d * 1.125f);
    for (int ib = 0; ib < 8; ib++) {
        int l = loom_nearest_int(0.5f * (id * scales[ib] - 1));
        l = l < 0 ? 0 : l > 7 ? 7 : l;
        if (shifts[ib] == -1)
            l |= 8;
        y->qh[ib] = (uint16_t)(y->qh[ib] | l << 12);
    }
}

/* One row of n (a multiple of 256) with importance weights qw[n]: scales by an exhaustive split search per
 * 32-weight sub-block, weights qw * sqrt(2 mean(x^2) + x^2), groups snapped to the lattice by its neighbour
 * lists (ggml-quants.c quantize_row_iq1_s_impl; the reference refuses to run without weights). */
void loom_iq1_s_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    loom_iq1_quant_init();
    struct loom_block_iq1_s *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq1_s_block(src + LOOM_QK_K * i, qw + LOOM_QK_K * i, &y[i]);
}

/* ---- IQ1_M ----------------------------------------------------------------------------------------------- */

/* Prefix sums over the sorted pairs, per half (elements 0..7, 8..15) of a 16-weight sub-block. */
static void iq1_m_prefix(const struct iq1_pair *p, const float *xb, const float *weight, float px[2][17],
                         float pw[2][17])
{
    px[0][0] = px[1][0] = pw[0][0] = pw[1][0] = 0;
    for (int j = 0; j < 16; j++) {
        int i = p[j].i, h = i < 8 ? 0 : 1;
        px[h][j + 1] = px[h][j] + weight[i] * xb[i];
        px[1 - h][j + 1] = px[1 - h][j];
        pw[h][j + 1] = pw[h][j] + weight[i];
        pw[1 - h][j + 1] = pw[1 - h][j];
    }
}

/* Exhaustive split search of an IQ1_M sub-block: best (i1, i2, k) with k the deltas of the two halves (0: +,+;
 * 1: +,-; 2: -,+; 3: -,-), each half's sums in the reference's collapsed form T v2 - px[i1] - px[i2]. Returns k
 * (-1: none found). */
static int iq1_m_split(float px[2][17], float pw[2][17], float *scale, int *bi1, int *bi2)
{
    const float p2 = iq1_xp[2], m2 = iq1_xm[2];
    const float cp1 = iq1_xp[0] * iq1_xp[0] - iq1_xp[1] * iq1_xp[1], cp2 = iq1_xp[1] * iq1_xp[1] - iq1_xp[2] * iq1_xp[2];
    const float cm1 = iq1_xm[0] * iq1_xm[0] - iq1_xm[1] * iq1_xm[1], cm2 = iq1_xm[1] * iq1_xm[1] - iq1_xm[2] * iq1_xm[2];
    float best = -FLT_MAX;
    int best_k = -1;
    for (int i1 = 0; i1 <= 16; i1++)
        for (int i2 = i1; i2 <= 16; i2++) {
            float qxp[2], qxm[2], q2p[2], q2m[2], sumqx[4], sumq2[4];
            for (int h = 0; h < 2; h++) {
                float sx = px[h][i1] + px[h][i2];
                qxp[h] = px[h][16] * p2 - sx;
                qxm[h] = px[h][16] * m2 - sx;
                q2p[h] = pw[h][16] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                q2m[h] = pw[h][16] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
            }
            sumqx[0] = qxp[0] + qxp[1];
            sumqx[1] = qxp[0] + qxm[1];
            sumqx[2] = qxm[0] + qxp[1];
            sumqx[3] = qxm[0] + qxm[1];
            sumq2[0] = q2p[0] + q2p[1];
            sumq2[1] = q2p[0] + q2m[1];
            sumq2[2] = q2m[0] + q2p[1];
            sumq2[3] = q2m[0] + q2m[1];
            for (int k = 0; k < 4; k++)
                if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best * sumq2[k]) {
                    *scale = sumqx[k] / sumq2[k];
                    best = *scale * sumqx[k];
                    *bi1 = i1;
                    *bi2 = i2;
                    best_k = k;
                }
        }
    return best_k;
}

/* Level values of group k (0, 1) of an IQ1_M sub-block with deltas k_shift (see iq1_m_split). */
static inline const float *iq1_m_xx(int k_shift, int k)
{
    return (k == 0 ? k_shift < 2 : k_shift % 2 == 0) ? iq1_xp : iq1_xm;
}

/* One 16-weight sub-block ib of an IQ1_M block: indices and qh index bits into y; returns its scale (0 for a
 * skipped sub-block) and *shift (the deltas, 0..3). */
static float iq1_m_sub(const float *xb, const float *weight, struct loom_block_iq1_m *y, int ib, int *shift)
{
    struct iq1_pair p[16];
    float px[2][17], pw[2][17], scale = iq1_absmax(xb, 16);
    int8_t L[16];
    int i1 = -1, i2 = -1;
    *shift = 0;
    if (scale < 1e-7f)
        return 0;
    iq1_sort(xb, 16, p);
    iq1_m_prefix(p, xb, weight, px, pw);
    int k_shift = iq1_m_split(px, pw, &scale, &i1, &i2);
    if (k_shift < 0 || i1 < 0 || i2 < 0)
        return 0;
    iq1_levels(p, 16, i1, i2, L);
    if (scale < 0) {
        for (int j = 0; j < 16; j++)
            L[j] = (int8_t)(2 - L[j]);
        scale = -scale;
        k_shift = 3 - k_shift;
    }
    uint16_t index[2];
    int on_grid = 1;
    for (int k = 0; k < 2; k++)
        on_grid &= iq1_group_index(L + 8 * k, xb + 8 * k, weight + 8 * k, scale, iq1_m_xx(k_shift, k), &index[k]);
    if (!on_grid) {
        float sumqx = 0, sumq2 = 0;
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 8; j++) {
                float w = weight[8 * k + j], q = iq1_m_xx(k_shift, k)[glevel(index[k], j)];
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        if (sumqx > 0 && sumq2 > 0)
            scale = sumqx / sumq2;
    }
    y->qs[2 * ib] = (uint8_t)(index[0] & 255);
    y->qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
    y->qh[ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
    *shift = k_shift;
    return scale;
}

/* The super-scale fit after the sub-block scales are rounded to 3 bits: d = sum w q x / sum w q^2 over the
 * whole block with q = level value * (2 l + 1) (d keeps max_scale / 15 when the sum of w q^2 is 0). Writes the
 * scale bits and delta bits; returns the F16 bits of d * 1.1125. */
static uint16_t iq1_m_scales(const float *x, const float *qw, float sigma2, const float *scales, const int *shifts,
                             float max_scale, struct loom_block_iq1_m *y, uint16_t sc[4])
{
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    float d = max_scale / 15, id = 1 / d, sumqx = 0, sumq2 = 0, weight[16];
    for (int ib = 0; ib < 16; ib++) {
        int l = loom_nearest_int(0.5f * (id * scales[ib] - 1));
        l = l < 0 ? 0 : l > 7 ? 7 : l;
        sc[ib / 4] = (uint16_t)(sc[ib / 4] | l << (3 * (ib % 4)));
        y->qh[ib] |= masks[shifts[ib]];
        const float *xb = x + 16 * ib;
        iq1_weights(xb, qw ? qw + 16 * ib : NULL, sigma2, 16, weight);
        for (int k = 0; k < 2; k++) {
            const float *xx = iq1_m_xx(shifts[ib], k);
            int idx = y->qs[2 * ib + k] | ((y->qh[ib] >> (4 * k)) & 7) << 8;
            for (int j = 0; j < 8; j++) {
                float w = weight[8 * k + j], q = xx[glevel(idx, j)] * (float)(2 * l + 1);
                sumqx += w * q * xb[8 * k + j];
                sumq2 += w * q * q;
            }
        }
    }
    if (sumq2 > 0)
        d = sumqx / sumq2;
    return loom_f32_to_f16(d * 1.1125f);
}

static void iq1_m_block(const float *x, const float *qw, struct loom_block_iq1_m *y)
{
    float scales[16], weight[16], max_scale = 0, sigma2 = iq1_sigma2(x);
    int shifts[16];
    memset(y, 0, sizeof *y);
    for (int ib = 0; ib < 16; ib++) {
        iq1_weights(x + 16 * ib, qw ? qw + 16 * ib : NULL, sigma2, 16, weight);
        scales[ib] = iq1_m_sub(x + 16 * ib, weight, y, ib, &shifts[ib]);
        max_scale = max_scale > scales[ib] ? max_scale : scales[ib];
    }
    if (max_scale == 0)
        return;
    uint16_t sc[4] = {0, 0, 0, 0};
    uint16_t d = iq1_m_scales(x, qw, sigma2, scales, shifts, max_scale, y, sc);
    sc[0] = (uint16_t)(sc[0] | (d & 0x000f) << 12);
    sc[1] = (uint16_t)(sc[1] | (d & 0x00f0) << 8);
    sc[2] = (uint16_t)(sc[2] | (d & 0x0f00) << 4);
    sc[3] = (uint16_t)(sc[3] | (d & 0xf000));
    for (int k = 0; k < 4; k++) {
        y->scales[2 * k] = (uint8_t)(sc[k] & 255);
        y->scales[2 * k + 1] = (uint8_t)(sc[k] >> 8);
    }
}

/* One row of n (a multiple of 256), with importance weights qw[n] (weights qw * sqrt(2 mean(x^2) + x^2)) or
 * without (NULL: weights x^2): per 16-weight sub-block an exhaustive split search with a delta per group of 8,
 * groups snapped to the lattice, 3-bit sub-block scales and a refitted F16 super-scale (ggml-quants.c
 * quantize_row_iq1_m_impl). */
void loom_iq1_m_quantize_w(const float *src, void *dst, int64_t n, const float *qw)
{
    loom_iq1_quant_init();
    struct loom_block_iq1_m *y = dst;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++)
        iq1_m_block(src + LOOM_QK_K * i, qw ? qw + LOOM_QK_K * i : NULL, &y[i]);
}

void loom_iq1_m_quantize(const float *src, void *dst, int64_t n) { loom_iq1_m_quantize_w(src, dst, n, NULL); }
