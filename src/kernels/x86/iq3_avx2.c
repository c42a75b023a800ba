/* iq3_avx2.c — AVX2 dot products of IQ3_XXS and IQ3_S with Q8_K (vec_dot and IQ panel orders), with the exact
 * integer lanes and float orders of iq3.c, bit-identical to the scalar kernels (iq_grid_avx2.h). */
#include "kernels/x86/iq_grid_avx2.h"

/* 8 four-byte grid entries, the first in the low bytes. */
static inline __m256i grid8(const uint32_t *grid, const int idx[8])
{
    return _mm256_set_epi32((int)grid[idx[7]], (int)grid[idx[6]], (int)grid[idx[5]], (int)grid[idx[4]],
                            (int)grid[idx[3]], (int)grid[idx[2]], (int)grid[idx[1]], (int)grid[idx[0]]);
}

static inline void decode_iq3_xxs(const struct loom_block_iq3_xxs *x, int b, struct iqg_sub *u)
{
    const uint8_t *q = x->qs + 8 * b;
    const uint32_t *g = loom_iq3xxs_grid;
    u->grid = _mm256_set_epi32((int)g[q[7]], (int)g[q[6]], (int)g[q[5]], (int)g[q[4]], (int)g[q[3]], (int)g[q[2]],
                               (int)g[q[1]], (int)g[q[0]]);
    uint32_t aux;
    memcpy(&aux, x->qs + 64 + 4 * b, sizeof aux);
    u->mask = iqg_ksign_mask4(aux);
    u->ls_lo = u->ls_hi = (int)(aux >> 28);
}

/* IQ3_S: the 8 indices in vector lanes (bit m of qh moved to bit 8 of lane m), then 8 grid loads. */
static inline void decode_iq3_s(const struct loom_block_iq3_s *x, int b, struct iqg_sub *u)
{
    int idx[8];
    __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->qs + 8 * b)));
    __m256i hi = _mm256_sllv_epi32(_mm256_set1_epi32(x->qh[b]), _mm256_set_epi32(1, 2, 3, 4, 5, 6, 7, 8));
    _mm256_storeu_si256((__m256i *)idx, _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi32(256))));
    u->grid = grid8(loom_iq3s_grid, idx);
    uint32_t signs;
    memcpy(&signs, x->signs + 4 * b, sizeof signs);
    u->mask = iqg_sign_mask(signs);
    u->ls_lo = u->ls_hi = x->scales[b / 2] >> (4 * (b % 2)) & 15;
}

/* IQ3_XXS: db = d * (2 ls + 1) / 4; IQ3_S: db = d * (2 ls + 1), neither scaled. */
#define IQ3_XXS_POST(sum) (0.25f * (sum))
#define IQ3_XXS_DFAC(d) ((d) * 0.25f)
#define IQ3_S_POST(sum) (sum)
#define IQ3_S_DFAC(d) (d)
LOOM_IQ_GRID_AVX2_KERNELS(iq3_xxs, IQ3_XXS_POST, IQ3_XXS_DFAC, 0)
LOOM_IQ_GRID_AVX2_KERNELS(iq3_s, IQ3_S_POST, IQ3_S_DFAC, 0)
