/* q4_k_avx2.c — AVX2 Q4_K x Q8_K dot products (and a 4-activation-row form of the repacked gemm one): the
 * same exact integer lanes and float orders as q4_k.c (llama.cpp's AVX2 ggml_vec_dot_q4_K_q8_K, and its
 * repacked gemv/gemm), bit-identical to the scalar ones. */
#include <immintrin.h>

#include "kernels/blocks.h"
#include "kernels/helpers_avx2.h"
#include "kernels/protos.h"

/* The 8 integer lanes of one block (as q4_k.c block_sums) and, in accm lanes, the 4 min sums. */
static inline __m256i block_lanes(const struct loom_block_q4_k *x, const struct loom_block_q8_k *y, __m128i *mins)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    __m128i sm = loom_k4_scales_si128(x->scales);
    __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm)); /* the 8 scales as int16, twice */
    __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * g));
        __m256i q8l = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * g));
        __m256i q8h = _mm256_loadu_si256((const __m256i *)(y->qs + 64 * g + 32));
        __m256i pl = _mm256_maddubs_epi16(_mm256_and_si256(bits, m4), q8l);
        __m256i ph = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), q8h);
        pl = _mm256_madd_epi16(pl, _mm256_shuffle_epi8(sc16, loom_pick16(2 * g)));
        ph = _mm256_madd_epi16(ph, _mm256_shuffle_epi8(sc16, loom_pick16(2 * g + 1)));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
    }
    *mins = loom_k4_mins_dot(sm, y->bsums);
    return sumi;
}

void loom_q4_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i mins;
        __m256i sumi = block_lanes(&x[i], &y[i], &mins);
        float d = y[i].d * loom_f16c_to_f32(x[i].d);
        float dmin = -y[i].d * loom_f16c_to_f32(x[i].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins), accm);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    *s = loom_hsum8_ps(acc) + _mm_cvtss_f32(accm);
}

/* The gemv order: per block, isum and imin (exact) in lanes 0 and 1, and lane 0 of acc advancing as
 * fma(isum, d * d_a, acc), lane 1 as fma(imin, dmin * d_a, accm). */
void loom_q4_k_gemv_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y = a;
    const __m128i pick = _mm_set_epi8(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    const __m256i m4 = _mm256_set1_epi8(15);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i sm = loom_k4_scales_si128(x[i].scales);
        __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m256i sumi = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * g));
            __m256i pl = _mm256_maddubs_epi16(_mm256_and_si256(bits, m4), _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g)));
            __m256i ph = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                                              _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(pl, _mm256_shuffle_epi8(sc16, loom_pick16(2 * g))),
                                                           _mm256_madd_epi16(ph, _mm256_shuffle_epi8(sc16, loom_pick16(2 * g + 1)))));
        }
        /* bsum j times min j / 2: lanes totalling imin (as loom_k4_mins_dot's 4 lanes) */
        __m256i mm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums),
                                       _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, pick)));
        __m256i h = _mm256_hadd_epi32(sumi, mm);
        __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        q = _mm_hadd_epi32(q, q); /* isum, imin, isum, imin */
        uint32_t dd;
        memcpy(&dd, &x[i].d, sizeof dd); /* d and dmin, adjacent F16 */
        __m128 dw = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(y[i].d));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(q), dw, acc);
    }
    *s = _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_shuffle_ps(acc, acc, 1));
}

/* The repacked gemm order (q4_k.c loom_q4_k_gemm): one fma per pair of sub-blocks. */
void loom_q4_k_gemm_avx2(int64_t n, float *s, const void *w, const void *a)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y = a;
    const __m256i m4 = _mm256_set1_epi8(15);
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i sm = loom_k4_scales_si128(x[i].scales);
        __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        int32_t mins[4];
        _mm_storeu_si128((__m128i *)mins, loom_k4_mins_dot(sm, y[i].bsums));
        float d = loom_f16c_to_f32(x[i].d) * y[i].d, dmin = loom_f16c_to_f32(x[i].dmin) * y[i].d;
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * g));
            __m256i q8l = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g));
            __m256i q8h = _mm256_loadu_si256((const __m256i *)(y[i].qs + 64 * g + 32));
            __m256i pl = _mm256_maddubs_epi16(_mm256_and_si256(bits, m4), q8l);
            __m256i ph = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), q8h);
            pl = _mm256_madd_epi16(pl, _mm256_shuffle_epi8(sc16, loom_pick16(2 * g)));
            ph = _mm256_madd_epi16(ph, _mm256_shuffle_epi8(sc16, loom_pick16(2 * g + 1)));
            __m256i p = _mm256_add_epi32(pl, ph);
            int32_t isum = loom_hsum_i32x8(p);
            acc = fmaf((float)isum, d, acc);
            accm = fmaf((float)mins[g], dmin, accm);
        }
    }
    *s = acc - accm;
}

/* loom_q4_k_gemm_avx2 for 4 activation rows (a + k * a_stride bytes) at once: the
 * weight nibbles and scales are unpacked once; token k's sums run in lane k, in the same order. */
void loom_q4_k_gemm_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = (const struct loom_block_q8_k *)((const char *)a + k * a_stride);
    const __m256i m4 = _mm256_set1_epi8(15);
    __m128 acc = _mm_setzero_ps(), accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i sm = loom_k4_scales_si128(x[i].scales);
        __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m128 da = _mm_set_ps(y[3][i].d, y[2][i].d, y[1][i].d, y[0][i].d);
        __m128 d = _mm_mul_ps(_mm_set1_ps(loom_f16c_to_f32(x[i].d)), da);
        __m128 dmin = _mm_mul_ps(_mm_set1_ps(loom_f16c_to_f32(x[i].dmin)), da);
        /* mins per token (lanes g) transposed to per g (lanes token) */
        __m128i m0 = loom_k4_mins_dot(sm, y[0][i].bsums), m1 = loom_k4_mins_dot(sm, y[1][i].bsums);
        __m128i m2 = loom_k4_mins_dot(sm, y[2][i].bsums), m3 = loom_k4_mins_dot(sm, y[3][i].bsums);
        __m128i t0 = _mm_unpacklo_epi32(m0, m1), t1 = _mm_unpacklo_epi32(m2, m3);
        __m128i t2 = _mm_unpackhi_epi32(m0, m1), t3 = _mm_unpackhi_epi32(m2, m3);
        __m128i mins[4] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1), _mm_unpacklo_epi64(t2, t3),
                           _mm_unpackhi_epi64(t2, t3)};
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * g));
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            __m256i sl = _mm256_shuffle_epi8(sc16, loom_pick16(2 * g)), sh = _mm256_shuffle_epi8(sc16, loom_pick16(2 * g + 1));
            __m256i p[4];
            for (int k = 0; k < 4; k++) {
                __m256i q8l = _mm256_loadu_si256((const __m256i *)(y[k][i].qs + 64 * g));
                __m256i q8h = _mm256_loadu_si256((const __m256i *)(y[k][i].qs + 64 * g + 32));
                p[k] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, q8l), sl),
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(hi, q8h), sh));
            }
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(loom_hsum_i32x8_x4(p[0], p[1], p[2], p[3])), d, acc);
            accm = _mm_fmadd_ps(_mm_cvtepi32_ps(mins[g]), dmin, accm);
        }
    }
    _mm_storeu_ps(s, _mm_sub_ps(acc, accm));
}

/* loom_q4_k_gemv_avx2 (the gemv order) for 4 activation rows (a + k * a_stride bytes): the
 * weight nibbles and scales are unpacked once; token k's whole-block sums run in lane k. */
void loom_q4_k_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride)
{
    const struct loom_block_q4_k *x = w;
    const struct loom_block_q8_k *y[4];
    for (int k = 0; k < 4; k++)
        y[k] = (const struct loom_block_q8_k *)((const char *)a + k * a_stride);
    const __m256i m4 = _mm256_set1_epi8(15);
    __m128 acc = _mm_setzero_ps(), accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / LOOM_QK_K; i++) {
        __m128i sm = loom_k4_scales_si128(x[i].scales);
        __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        __m128 da = _mm_set_ps(y[3][i].d, y[2][i].d, y[1][i].d, y[0][i].d);
        __m128 d = _mm_mul_ps(_mm_set1_ps(loom_f16c_to_f32(x[i].d)), da);
        __m128 dmin = _mm_mul_ps(_mm_set1_ps(loom_f16c_to_f32(x[i].dmin)), da);
        __m128i imin = _mm_hadd_epi32(_mm_hadd_epi32(loom_k4_mins_dot(sm, y[0][i].bsums), loom_k4_mins_dot(sm, y[1][i].bsums)),
                                      _mm_hadd_epi32(loom_k4_mins_dot(sm, y[2][i].bsums), loom_k4_mins_dot(sm, y[3][i].bsums)));
        __m256i p[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i bits = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * g));
            __m256i lo = _mm256_and_si256(bits, m4), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            __m256i sl = _mm256_shuffle_epi8(sc16, loom_pick16(2 * g)), sh = _mm256_shuffle_epi8(sc16, loom_pick16(2 * g + 1));
            for (int k = 0; k < 4; k++) {
                __m256i q8l = _mm256_loadu_si256((const __m256i *)(y[k][i].qs + 64 * g));
                __m256i q8h = _mm256_loadu_si256((const __m256i *)(y[k][i].qs + 64 * g + 32));
                p[k] = _mm256_add_epi32(p[k], _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, q8l), sl),
                                                               _mm256_madd_epi16(_mm256_maddubs_epi16(hi, q8h), sh)));
            }
        }
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(loom_hsum_i32x8_x4(p[0], p[1], p[2], p[3])), d, acc);
        accm = _mm_fmadd_ps(_mm_cvtepi32_ps(imin), dmin, accm);
    }
    _mm_storeu_ps(s, _mm_sub_ps(acc, accm));
}
