/* iq2_avx2.c — AVX2 dot products of IQ2_XXS, IQ2_XS and IQ2_S with Q8_K (vec_dot and IQ panel orders), with the
 * exact integer lanes and float orders of iq2.c, bit-identical to the scalar kernels (iq_grid_avx2.h). */
#include "kernels/x86/iq_grid_avx2.h"

static inline void decode_iq2_xxs(const struct loom_block_iq2_xxs *x, int b, struct iqg_sub *u)
{
    uint32_t aux[2];
    memcpy(aux, x->qs + 4 * b, sizeof aux);
    const uint64_t *g = loom_iq2xxs_grid;
    u->grid = _mm256_set_epi64x((long long)g[aux[0] >> 24], (long long)g[aux[0] >> 16 & 255],
                                (long long)g[aux[0] >> 8 & 255], (long long)g[aux[0] & 255]);
    u->mask = iqg_ksign_mask4(aux[1]);
    u->ls_lo = u->ls_hi = (int)(aux[1] >> 28);
}

static inline void decode_iq2_xs(const struct loom_block_iq2_xs *x, int b, struct iqg_sub *u)
{
    const uint16_t *q = x->qs + 4 * b;
    u->grid = _mm256_set_epi64x((long long)loom_iq2xs_grid[q[3] & 511], (long long)loom_iq2xs_grid[q[2] & 511],
                                (long long)loom_iq2xs_grid[q[1] & 511], (long long)loom_iq2xs_grid[q[0] & 511]);
    u->mask = _mm256_set_epi64x((long long)iqg_ksign_mask[q[3] >> 9], (long long)iqg_ksign_mask[q[2] >> 9],
                                (long long)iqg_ksign_mask[q[1] >> 9], (long long)iqg_ksign_mask[q[0] >> 9]);
    u->ls_lo = x->scales[b] & 15;
    u->ls_hi = x->scales[b] >> 4;
}

static inline void decode_iq2_s(const struct loom_block_iq2_s *x, int b, struct iqg_sub *u)
{
    const uint8_t *q = x->qs + 4 * b;
    int h = x->qh[b];
    u->grid = _mm256_set_epi64x((long long)loom_iq2s_grid[q[3] | (h << 2 & 0x300)],
                                (long long)loom_iq2s_grid[q[2] | (h << 4 & 0x300)],
                                (long long)loom_iq2s_grid[q[1] | (h << 6 & 0x300)],
                                (long long)loom_iq2s_grid[q[0] | (h << 8 & 0x300)]);
    uint32_t signs;
    memcpy(&signs, x->qs + 32 + 4 * b, sizeof signs);
    u->mask = iqg_sign_mask(signs);
    u->ls_lo = x->scales[b] & 15;
    u->ls_hi = x->scales[b] >> 4;
}

/* The IQ2 types: db = d * (2 ls + 1) / 8, so the sum is scaled by 0.125 (vec_dot) and d by 0.125 (iqp). */
#define IQ2_POST(sum) (0.125f * (sum))
#define IQ2_DFAC(d) ((d) * 0.125f)
LOOM_IQ_GRID_AVX2_KERNELS(iq2_xxs, IQ2_POST, IQ2_DFAC, 0)
LOOM_IQ_GRID_AVX2_KERNELS(iq2_xs, IQ2_POST, IQ2_DFAC, 1)
LOOM_IQ_GRID_AVX2_KERNELS(iq2_s, IQ2_POST, IQ2_DFAC, 1)
