/* blocks.h — the quantized block layouts loom reads and writes, byte-compatible with GGUF/ggml (ggml-common.h),
 * and the Q4_K and Q6_K x16 layouts loom repacks weights into. Each struct says how its bytes map to weight values. */
#ifndef LOOM_KERNELS_BLOCKS_H
#define LOOM_KERNELS_BLOCKS_H

#include <stdint.h>

#define LOOM_QK8_0 32
#define LOOM_QK_K 256

/* Q8_0: 32 weights q[i] in [-127, 127] with one F16 scale d; value = d * q[i]. 34 bytes. */
struct loom_block_q8_0 {
    uint16_t d;     /* F16 scale */
    int8_t qs[32];  /* signed quants, element i at qs[i] */
};
_Static_assert(sizeof(struct loom_block_q8_0) == 34, "Q8_0 block is 34 bytes");

/* Q8_K (activation type of the K-quants): 256 values with an F32 scale and the sums of each group of 16
 * quants (used to apply the weights' per-sub-block minimums). value = d * qs[i]. 292 bytes. */
struct loom_block_q8_k {
    float d;            /* F32 scale */
    int8_t qs[256];     /* signed quants in [-127, 127] */
    int16_t bsums[16];  /* bsums[j] = sum of qs[16j .. 16j+15] */
};
_Static_assert(sizeof(struct loom_block_q8_k) == 292, "Q8_K block is 292 bytes");

/* Q4_K: 256 weights in 8 sub-blocks of 32; each sub-block has a 6-bit scale sc and 6-bit min m, and
 * value = d*sc * q - dmin*m with q the 4-bit quant. scales[12] packs the 8 (sc, m) pairs:
 * sub-block j < 4: sc = scales[j] & 63, m = scales[j+4] & 63; j >= 4: sc = (scales[j+4] & 15) |
 * (scales[j-4] >> 6) << 4, m = (scales[j+4] >> 4) | (scales[j] >> 6) << 4. qs holds 4 groups of 32 bytes;
 * group g's low nibbles are sub-block 2g, its high nibbles sub-block 2g+1. 144 bytes. */
struct loom_block_q4_k {
    uint16_t d;          /* F16 super-scale of the scales */
    uint16_t dmin;       /* F16 super-scale of the mins */
    uint8_t scales[12];  /* packed 6-bit scales and mins */
    uint8_t qs[128];     /* 4-bit quants, layout above */
};
_Static_assert(sizeof(struct loom_block_q4_k) == 144, "Q4_K block is 144 bytes");

/* Q4_K x16: one 256-weight block column of 16 consecutive Q4_K rows, interleaved for 16-row SIMD lanes
 * (q4_k_x16.c), exactly as many bytes as the 16 standard blocks. qs[s][r] = bytes 4s..4s+3 of row r's
 * qs (low nibbles: sub-block 2(s/8) at positions 4(s%8)..+3; high nibbles: sub-block 2(s/8)+1). The
 * 6-bit scales sc[j] and mins m[j] of row r in 3 planes of 64 bytes, byte 4r + q (q < 4): sc_lo = low
 * nibbles of sc[q] | sc[4+q] << 4, m_lo = low nibbles of m[M(q)] | m[4+M(q)] << 4 with M = (0, 2, 1, 3),
 * hi = the top 2 bits of those four values at bits 0, 2, 4, 6. d and dmin: the rows' F16 super-scales. */
struct loom_block_q4_k_x16 {
    uint8_t qs[32][16][4];
    uint8_t sc_lo[64], m_lo[64], hi[64];
    uint16_t d[16], dmin[16];
};
_Static_assert(sizeof(struct loom_block_q4_k_x16) == 16 * sizeof(struct loom_block_q4_k), "Q4_K x16 is 16 blocks");

/* Q5_K: as Q4_K with a fifth bit per weight: element l of sub-block j (l < 32) has its high bit in
 * bit j of qh[l], so q = nibble + 16 * bit in [0, 31]. 176 bytes. */
struct loom_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[32];      /* bit j of qh[l]: high bit of element l of sub-block j */
    uint8_t qs[128];     /* low 4 bits, laid out as in Q4_K */
};
_Static_assert(sizeof(struct loom_block_q5_k) == 176, "Q5_K block is 176 bytes");

/* Q6_K: 256 weights in 16 sub-blocks of 16 with signed 8-bit scales; value = d * scales[s] * (q - 32) with
 * q a 6-bit quant. Two halves of 128 weights; in half h, element 32c + l (c < 4, l < 32) takes its low
 * 4 bits from ql[64h + l + 32(c & 1)] (low nibble for c < 2, high nibble for c >= 2) and its top 2 bits
 * from bits 2c, 2c+1 of qh[32h + l]; its scale is scales[8h + 2c + l/16]. 210 bytes. */
struct loom_block_q6_k {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;          /* F16 super-scale */
};
_Static_assert(sizeof(struct loom_block_q6_k) == 210, "Q6_K block is 210 bytes");

/* Q6_K x16: one 256-weight block column of 16 consecutive Q6_K rows, interleaved for 16-row SIMD lanes
 * (q6_k_x16.c), exactly as many bytes as the 16 standard blocks: every 4-byte word of a row's ql, qh and
 * scales moves beside the same word of the other 15 rows, in the order the kernels read them. scales[s][r]
 * = row r's scales 4s..4s+3; d: the rows' F16 super-scales; q[l][h] the words of positions 4l..4l+3 of
 * half h's chunks: q[l][h][0][r] = bytes 4(8h + l).. of row r's qh, q[l][h][1][r] and q[l][h][2][r] =
 * bytes 4(16h + l).. and 4(16h + 8 + l).. of its ql. */
struct loom_block_q6_k_x16 {
    int8_t scales[4][16][4];
    uint16_t d[16];
    uint8_t q[8][2][3][16][4];
};
_Static_assert(sizeof(struct loom_block_q6_k_x16) == 16 * sizeof(struct loom_block_q6_k), "Q6_K x16 is 16 blocks");

/* Q4_0: 32 weights, 4-bit quants q with one F16 scale d; value = d * (q - 8). Element j < 16 is the low
 * nibble of qs[j], element j + 16 its high nibble. 18 bytes. */
struct loom_block_q4_0 {
    uint16_t d;      /* F16 scale */
    uint8_t qs[16];  /* nibbles, layout above */
};
_Static_assert(sizeof(struct loom_block_q4_0) == 18, "Q4_0 block is 18 bytes");

/* Q4_1: as Q4_0 with an F16 offset m and unsigned quants; value = d * q + m. 20 bytes. */
struct loom_block_q4_1 {
    uint16_t d;      /* F16 scale */
    uint16_t m;      /* F16 offset (the block minimum) */
    uint8_t qs[16];  /* nibbles, laid out as in Q4_0 */
};
_Static_assert(sizeof(struct loom_block_q4_1) == 20, "Q4_1 block is 20 bytes");

/* Q5_0: Q4_0's nibbles plus a fifth bit per weight: bit j of qh (little-endian 32 bits) is the high bit
 * of element j, so q = nibble + 16 * bit in [0, 31]; value = d * (q - 16). 22 bytes. */
struct loom_block_q5_0 {
    uint16_t d;      /* F16 scale */
    uint8_t qh[4];   /* high bits, element j at bit j */
    uint8_t qs[16];  /* low 4 bits, laid out as in Q4_0 */
};
_Static_assert(sizeof(struct loom_block_q5_0) == 22, "Q5_0 block is 22 bytes");

/* Q5_1: Q5_0's quants, unsigned, with an F16 offset; value = d * q + m. 24 bytes. */
struct loom_block_q5_1 {
    uint16_t d;      /* F16 scale */
    uint16_t m;      /* F16 offset */
    uint8_t qh[4];
    uint8_t qs[16];
};
_Static_assert(sizeof(struct loom_block_q5_1) == 24, "Q5_1 block is 24 bytes");

/* Q8_1 (activation type of Q4_1/Q5_1): Q8_0 plus s = d * sum(qs) as F16, which carries the weights'
 * offset term. 36 bytes. */
struct loom_block_q8_1 {
    uint16_t d;      /* F16 scale */
    uint16_t s;      /* F16 d * sum of qs */
    int8_t qs[32];
};
_Static_assert(sizeof(struct loom_block_q8_1) == 36, "Q8_1 block is 36 bytes");

/* Q2_K: 256 weights in 16 sub-blocks of 16; scales[s] holds sub-block s's 4-bit scale (low nibble) and
 * 4-bit min (high nibble); value = d * sc * q - dmin * m with q a 2-bit quant. Element 128h + 32k + l
 * (h < 2, k < 4, l < 32) is bits 2k, 2k+1 of qs[32h + l] and belongs to sub-block 8h + 2k + l/16. 84 bytes. */
struct loom_block_q2_k {
    uint8_t scales[16];  /* low nibble scale, high nibble min */
    uint8_t qs[64];      /* 2-bit quants, layout above */
    uint16_t d;          /* F16 super-scale of the scales */
    uint16_t dmin;       /* F16 super-scale of the mins */
};
_Static_assert(sizeof(struct loom_block_q2_k) == 84, "Q2_K block is 84 bytes");

/* Q3_K: 256 weights in 16 sub-blocks of 16 with signed 6-bit scales; value = d * (sc - 32) * q, q in
 * [-4, 3]. Element 128h + 32k + l has its low 2 bits at bits 2k, 2k+1 of qs[32h + l] (as Q2_K) and
 * q = low - 4 unless bit 4h + k of hmask[l] is set. Sub-block s's scale: low 4 bits are the low nibble
 * of scales[s] (s < 8) or the high nibble of scales[s - 8], top 2 bits are bits 2(s/4), 2(s/4)+1 of
 * scales[8 + s % 4]. 110 bytes. */
struct loom_block_q3_k {
    uint8_t hmask[32];   /* high bits, layout above */
    uint8_t qs[64];      /* low 2 bits */
    uint8_t scales[12];  /* packed 6-bit scales */
    uint16_t d;          /* F16 super-scale */
};
_Static_assert(sizeof(struct loom_block_q3_k) == 110, "Q3_K block is 110 bytes");

/* IQ4_NL: 32 weights as 4-bit indices into the non-linear table loom_iq4nl_values; value = d *
 * values[index]. Nibble layout as Q4_0. 18 bytes. */
struct loom_block_iq4_nl {
    uint16_t d;      /* F16 scale */
    uint8_t qs[16];  /* indices, laid out as in Q4_0 */
};
_Static_assert(sizeof(struct loom_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");

/* IQ4_XS: 256 weights in 8 sub-blocks of 32 as IQ4_NL indices with 6-bit sub-block scales; value =
 * d * (ls - 32) * values[index]. Sub-block s: ls = nibble s % 2 of scales_l[s / 2] | (bits 2s, 2s+1 of
 * scales_h) << 4; its 32 indices are qs[16s .. 16s+15] laid out as in Q4_0. 136 bytes. */
struct loom_block_iq4_xs {
    uint16_t d;          /* F16 super-scale */
    uint16_t scales_h;   /* top 2 bits of the 8 scales */
    uint8_t scales_l[4]; /* low 4 bits of the 8 scales */
    uint8_t qs[128];
};
_Static_assert(sizeof(struct loom_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");

/* The grid IQ types (iq2.c, iq3.c; tables in iq_grids.h): 256 weights in 8 sub-blocks of 32, each made of groups
 * of 8 (IQ2) or 4 (IQ3) weights that are one grid entry's magnitudes with per-weight signs; value = db * grid
 * byte * sign, db = d * (0.5 + ls) / 4 for IQ2 (d * (0.5 + ls) / 2 for IQ3_XXS, d * (1 + 2 ls) for IQ3_S) with ls
 * the 4-bit scale of the weight's sub-block (IQ2_XS, IQ2_S: of its half of 16). An IQ2_XXS/IQ2_XS/IQ3_XXS sign
 * index s (7 bits) stands for the 8 signs loom_iq2_ksigns[s]; bit j set: weight j negative. */

/* IQ2_XXS: sub-block b is the 8 bytes at qs + 4b: bytes 0..3 the grid indices of its 4 groups of 8, then a
 * 32-bit word whose bits 7l..7l+6 are group l's sign index and bits 28..31 ls. 66 bytes. */
struct loom_block_iq2_xxs {
    uint16_t d;       /* F16 super-scale */
    uint16_t qs[32];  /* layout above */
};
_Static_assert(sizeof(struct loom_block_iq2_xxs) == 66, "IQ2_XXS block is 66 bytes");

/* IQ2_XS: group g (< 32, weights 8g..8g+7) is qs[g]: bits 0..8 its grid index, bits 9..15 its sign index.
 * scales[b]: low nibble the ls of sub-block b's first 16 weights, high nibble of its last 16. 74 bytes. */
struct loom_block_iq2_xs {
    uint16_t d;
    uint16_t qs[32];
    uint8_t scales[8];
};
_Static_assert(sizeof(struct loom_block_iq2_xs) == 74, "IQ2_XS block is 74 bytes");

/* IQ2_S: group g (< 32): grid index qs[g] | bits 2(g%4), 2(g%4)+1 of qh[g/4] << 8 (10 bits); its 8 signs are
 * the byte qs[32 + g] (bit j: weight j). scales as IQ2_XS. 82 bytes. */
struct loom_block_iq2_s {
    uint16_t d;
    uint8_t qs[64];    /* 32 low index bytes, then 32 sign bytes */
    uint8_t qh[8];
    uint8_t scales[8];
};
_Static_assert(sizeof(struct loom_block_iq2_s) == 82, "IQ2_S block is 82 bytes");

/* IQ3_XXS: group k (< 64, weights 4k..4k+3) has grid index qs[k]; sub-block b's 32-bit word at qs + 64 + 4b
 * holds the sign indices of its 4 pairs of groups (bits 7l..7l+6 for weights 8l..8l+7) and ls (bits 28..31).
 * 98 bytes. */
struct loom_block_iq3_xxs {
    uint16_t d;
    uint8_t qs[96];
};
_Static_assert(sizeof(struct loom_block_iq3_xxs) == 98, "IQ3_XXS block is 98 bytes");

/* IQ3_S: group k (< 64) has grid index qs[k] | bit k%8 of qh[k/8] << 8 (9 bits); weights 8m..8m+7 take their
 * signs from the byte signs[m]. scales[p]: low nibble the ls of sub-block 2p, high nibble of 2p+1. 110 bytes. */
struct loom_block_iq3_s {
    uint16_t d;
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t signs[32];
    uint8_t scales[4];
};
_Static_assert(sizeof(struct loom_block_iq3_s) == 110, "IQ3_S block is 110 bytes");

/* The 16 values of the IQ4_NL/IQ4_XS non-linear grid (llama.cpp ggml-common.h kvalues_iq4nl). */
static const int8_t loom_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* The 1-bit lattice types (iq1.c; lattice loom_iq1s_grid in iq1_grid.h, entries of 8 values in {-1, 0, 1}):
 * 256 weights in 8 sub-blocks of 32, each 4 groups of 8 that take one grid entry plus a shift delta = +-1/8. */

/* IQ1_S: group l of sub-block ib has grid index qs[4ib + l] | bits 3l..3l+2 of qh[ib] << 8; bits 12..14 of
 * qh[ib] are its scale ls, bit 15 the sign of its delta (set: -1/8); value = d * (2 ls + 1) * (grid + delta).
 * 50 bytes. */
struct loom_block_iq1_s {
    uint16_t d;        /* F16 super-scale */
    uint8_t qs[32];    /* low 8 bits of the grid indices */
    uint16_t qh[8];    /* per sub-block: index high bits, scale, delta sign */
};
_Static_assert(sizeof(struct loom_block_iq1_s) == 50, "IQ1_S block is 50 bytes");

/* IQ1_M: group l of sub-block ib has grid index qs[4ib + l] | (nibble & 7) << 8 and delta sign nibble bit 3
 * (set: -1/8), nibble l%2 (low first) of qh[2ib + l/2]. The scales are 4 little-endian 16-bit words sc[4]:
 * sub-block ib's groups 0-1 take 3-bit ls at bits 6(ib%2)..+2 of sc[ib/2], groups 2-3 bits 6(ib%2)+3..+5;
 * the top nibbles of sc[0..3] form the F16 super-scale d (sc[0]'s lowest); value = d * (2 ls + 1) *
 * (grid + delta). 56 bytes. */
struct loom_block_iq1_m {
    uint8_t qs[32];
    uint8_t qh[16];
    uint8_t scales[8];
};
_Static_assert(sizeof(struct loom_block_iq1_m) == 56, "IQ1_M block is 56 bytes");

/* TQ1_0 (ternary, tq.c): 256 weights t - 1 with t in {0, 1, 2} and one F16 scale d; value = d * (t - 1). Each
 * byte holds 5 (qs) or 4 (qh) base-3 digits: digit n of byte b is (3 * (uint8_t)(b * 3^n)) >> 8. Elements
 * 32n + m (n < 5, m < 32) are digit n of qs[m]; 160 + 16n + m (n < 5, m < 16) digit n of qs[32 + m];
 * 240 + 4n + j (n < 4, j < 4) digit n of qh[j]. 54 bytes. */
struct loom_block_tq1_0 {
    uint8_t qs[48];
    uint8_t qh[4];
    uint16_t d;        /* F16 scale */
};
_Static_assert(sizeof(struct loom_block_tq1_0) == 54, "TQ1_0 block is 54 bytes");

/* TQ2_0 (ternary, 2 bits a weight): element 128h + 32l + m (h < 2, l < 4, m < 32) is t = bits 2l, 2l+1 of
 * qs[32h + m]; value = d * (t - 1). 66 bytes. */
struct loom_block_tq2_0 {
    uint8_t qs[64];
    uint16_t d;        /* F16 scale */
};
_Static_assert(sizeof(struct loom_block_tq2_0) == 66, "TQ2_0 block is 66 bytes");

/* MXFP4 (mxfp4.c; OCP microscaling): 32 E2M1 weights as 4-bit indices into loom_mxfp4_values (the E2M1 values
 * doubled) with an E8M0 scale e; value = values[index] * 2^(e - 128). Nibble layout as Q4_0. 17 bytes. */
struct loom_block_mxfp4 {
    uint8_t e;         /* E8M0 exponent (bias 127) */
    uint8_t qs[16];
};
_Static_assert(sizeof(struct loom_block_mxfp4) == 17, "MXFP4 block is 17 bytes");

/* The 16 E2M1 values times 2 (0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; OCP MX spec v1.0 section 5.3.3). */
static const int8_t loom_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* The body of an x16 kernel's entry point: the activation rows 4 at a time (the last pass 1 to 4), each pass's
 * count a constant of the file's always-inline dot(n, y, y_stride, w, a, a_stride, rows), so each count is its
 * own specialized loop. Advances y and a. */
#define LOOM_X16_BY_FOUR(dot, n, n_act, y, y_stride, w, a, a_stride)                                              \
    for (; (n_act) > 0; (n_act) -= 4, (y) += 4 * (y_stride), (a) = (const char *)(a) + 4 * (a_stride))           \
        switch (n_act) {                                                                                          \
        case 1: dot(n, y, y_stride, w, a, a_stride, 1); break;                                                    \
        case 2: dot(n, y, y_stride, w, a, a_stride, 2); break;                                                    \
        case 3: dot(n, y, y_stride, w, a, a_stride, 3); break;                                                    \
        default: dot(n, y, y_stride, w, a, a_stride, 4); break;                                                   \
        }

#endif
