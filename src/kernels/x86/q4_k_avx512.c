/* q4_k_avx512.c — AVX-512 (VNNI) Q4_K x Q8_K dots of 4 and 8 activation rows sharing each unpacked weight
 * block, in the reference's repacked gemv order (q4_k.c loom_q4_k_gemv, the one-row decode
 * order). Only the whole-block integer sums enter the float arithmetic, and they are exact, so the results
 * are bit-identical to the scalar kernel per row. (A one-row 512-bit kernel measured no faster than AVX2's.) */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx512.h"
#include "kernels/protos.h"

/* One Q4_K block unpacked for 512-bit lanes: w[g] holds group g's 32 low nibbles (sub-block 2g) in bytes
 * 0..31 and its 32 high nibbles (sub-block 2g+1) in bytes 32..63, matching the Q8_K quants at
 * qs[64g .. 64g+63]; sc[g] holds the two sub-blocks' scales as int16 in the same halves. */
struct q4_k_unpacked {
    __m512i w[4], sc[4];
    __m128i scales_mins; /* the 8 scales then the 8 mins, as bytes (loom_k4_scales_si128) */
};

static inline void unpack_block(const struct loom_block_q4_k *x, struct q4_k_unpacked *u)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
    u->scales_mins = loom_k4_scales_si128(x->scales);
    /* the 8 scales as int16 in every 128-bit lane; byte shuffles then pick scale 2g for the low 256 bits
     * and 2g + 1 for the high */
    __m512i sc16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(u->scales_mins));
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qs + 32 * g)));
        u->w[g] = _mm512_and_si512(_mm512_srlv_epi64(b, shift), m4);
        const long long lo = 0x0100010001000100ll + 0x0202020202020202ll * (2 * g);
        const long long hi = lo + 0x0202020202020202ll;
        u->sc[g] = _mm512_shuffle_epi8(sc16, _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo));
    }
}

/* The 16 int32 lanes whose total is the block's scaled quant sum sum_j sc[j] * sum(q[j] * q8[j]). */
static inline __m512i block_lanes(const struct q4_k_unpacked *u, const struct loom_block_q8_k *y)
{
    __m512i sumi = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m512i q8 = _mm512_loadu_si512((const void *)(y->qs + 64 * g));
        sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(u->w[g], q8), u->sc[g]);
    }
    return sumi;
}

/* Fold 16 int32 lanes to 8 (exact, wrapping). */
static inline __m256i fold_i32x16(__m512i v)
{
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* The 16 mins as int16 with min m[j / 2] in lane j, so that madd with the 16 bsums of a Q8_K block
 * gives lanes whose total is imin = sum_k m[2k] (b[4k] + b[4k+1]) + m[2k+1] (b[4k+2] + b[4k+3]). */
static inline __m256i mins_per_bsum(__m128i scales_mins)
{
    const __m128i pick = _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scales_mins, pick));
}

/* Four activation rows y[0..3] against one unpacked block: lanes k of acc (low half) and accm (high half)
 * advance as the one-row kernel's acc/accm for row k. The integer sums are exact, so any grouping of
 * them is; the float steps are the one-row kernel's. */
static inline void block_x4(const struct loom_block_q4_k *x, const struct q4_k_unpacked *u,
                            const struct loom_block_q8_k *const y[4], __m256 *acc)
{
    __m256i m16 = mins_per_bsum(u->scales_mins);
    __m256i s[4], m[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        s[k] = fold_i32x16(block_lanes(u, y[k]));
        m[k] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[k]->bsums), m16);
    }
    __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    /* low half: isum of rows 0..3; high half: imin of rows 0..3 */
    __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
    __m128 da = _mm_set_ps(y[3]->d, y[2]->d, y[1]->d, y[0]->d);
    __m256 dd = _mm256_mul_ps(_mm256_set_m128(_mm_set1_ps(loom_f16c_to_f32(x->dmin)), _mm_set1_ps(loom_f16c_to_f32(x->d))),
                              _mm256_set_m128(da, da));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), dd, *acc);
}

void loom_q4_k_gemv_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_q4_k *x = w;
    const char *act = a;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        struct q4_k_unpacked u;
        unpack_block(&x[i], &u);
        const struct loom_block_q8_k *y[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            y[k] = (const struct loom_block_q8_k *)(act + k * a_stride) + i;
        block_x4(&x[i], &u, y, &acc);
    }
    _mm_storeu_ps(s, _mm_sub_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)));
}

void loom_q4_k_gemv_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_q4_k *x = w;
    const char *act = a;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        struct q4_k_unpacked u;
        unpack_block(&x[i], &u);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const struct loom_block_q8_k *y[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                y[k] = (const struct loom_block_q8_k *)(act + (4 * h + k) * a_stride) + i;
            block_x4(&x[i], &u, y, &acc[h]);
        }
    }
    for (int h = 0; h < 2; h++)
        _mm_storeu_ps(s + 4 * h, _mm_sub_ps(_mm256_castps256_ps128(acc[h]), _mm256_extractf128_ps(acc[h], 1)));
}
