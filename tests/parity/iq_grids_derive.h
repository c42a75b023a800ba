/* iq_grids_derive.h — derives the lattice tables of the IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S weight types
 * (and the IQ2 sign tables) from the reference itself: crafted blocks (F16 d = 1, sub-block scale 0, sign bits 0,
 * one grid index per group of 8 or 4 weights) go through ggml-base's to_float, and each group's values divided by
 * the block's known step are the grid entry's bytes. Shared by tools/gen_iq_grids.c, which writes
 * src/kernels/iq_grids.c, and tests/parity/test_ref_iq_grids.c, which checks that file against a new derivation. */
#ifndef LOOM_IQ_GRIDS_DERIVE_H
#define LOOM_IQ_GRIDS_DERIVE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"

/* Entry i's byte j (little-endian) is the magnitude of weight j of a group whose grid index is i. */
struct iq_grids {
    uint64_t iq2xxs[256], iq2xs[512], iq2s[1024];
    uint32_t iq3xxs[256], iq3s[512];
    uint8_t ksigns[128]; /* IQ2_XXS/IQ2_XS/IQ3_XXS 7-bit sign index -> 8 sign bits (bit j: weight j negative) */
    uint8_t kmask[8];    /* the sign bit that governs weight j of a group of 8 */
};

/* Bytes per block of the five types (ggml-common.h block_iq2_xxs ... block_iq3_s), d first in each. */
enum { IQG_IQ2_XXS = 66, IQG_IQ2_XS = 74, IQG_IQ2_S = 82, IQG_IQ3_XXS = 98, IQG_IQ3_S = 110 };

/* Dequantize one crafted block of `type` through the reference with d = 1 (F16 0x3c00). */
static inline void iqg_dequant(enum ggml_type type, uint8_t *blk, float y[256])
{
    blk[0] = 0x00;
    blk[1] = 0x3c;
    ggml_get_type_traits(type)->to_float(blk, y, 256);
}

/* The `per` grid entries of groups g < 256 / width starting at weight width * g, each value y / step an integer
 * in 1..255 (grid bytes are positive; sign bits are zero), into out[first + g] (width bytes, little-endian).
 * Returns 0, or -1 with a message in err naming the type, weight and value found. */
static inline int iqg_read_groups(const char *name, const float y[256], float step, int width, int first,
                                  uint64_t *out64, uint32_t *out32, char *err, size_t cap)
{
    for (int g = 0; g < 256 / width; g++) {
        uint64_t e = 0;
        for (int j = 0; j < width; j++) {
            float q = y[width * g + j] / step;
            if (!(q >= 1 && q <= 255) || q != floorf(q)) {
                snprintf(err, cap, "%s: weight %d of entry %d: expected a positive multiple of %g up to 255x, found %g",
                         name, j, first + g, step, y[width * g + j]);
                return -1;
            }
            e |= (uint64_t)(int)q << (8 * j);
        }
        if (out64)
            out64[first + g] = e;
        else
            out32[first + g] = (uint32_t)e;
    }
    return 0;
}

/* IQ2_XXS: 8 groups of 4 per block, group (ib32, l) indexed by byte 8 ib32 + l; step d * 0.5 * 0.25. */
static inline int iqg_iq2xxs(struct iq_grids *g, char *err, size_t cap)
{
    for (int first = 0; first < 256; first += 32) {
        uint8_t blk[IQG_IQ2_XXS] = {0};
        float y[256];
        for (int k = 0; k < 32; k++)
            blk[2 + 8 * (k / 4) + k % 4] = (uint8_t)(first + k);
        iqg_dequant(GGML_TYPE_IQ2_XXS, blk, y);
        if (iqg_read_groups("IQ2_XXS", y, 0.125f, 8, first, g->iq2xxs, 0, err, cap))
            return -1;
    }
    return 0;
}

/* IQ2_XS: 32 uint16 per block, the low 9 bits the index; step 0.125. */
static inline int iqg_iq2xs(struct iq_grids *g, char *err, size_t cap)
{
    for (int first = 0; first < 512; first += 32) {
        uint8_t blk[IQG_IQ2_XS] = {0};
        float y[256];
        for (int k = 0; k < 32; k++) {
            blk[2 + 2 * k] = (uint8_t)((first + k) & 255);
            blk[3 + 2 * k] = (uint8_t)((first + k) >> 8);
        }
        iqg_dequant(GGML_TYPE_IQ2_XS, blk, y);
        if (iqg_read_groups("IQ2_XS", y, 0.125f, 8, first, g->iq2xs, 0, err, cap))
            return -1;
    }
    return 0;
}

/* IQ2_S: index k's low 8 bits in qs[k] (bytes 2..33), its top 2 bits at bits 2(k%4).. of qh[k/4] (byte 66 + k/4);
 * step 0.125. */
static inline int iqg_iq2s(struct iq_grids *g, char *err, size_t cap)
{
    for (int first = 0; first < 1024; first += 32) {
        uint8_t blk[IQG_IQ2_S] = {0};
        float y[256];
        for (int k = 0; k < 32; k++) {
            blk[2 + k] = (uint8_t)((first + k) & 255);
            blk[66 + k / 4] = (uint8_t)(blk[66 + k / 4] | ((first + k) >> 8) << (2 * (k % 4)));
        }
        iqg_dequant(GGML_TYPE_IQ2_S, blk, y);
        if (iqg_read_groups("IQ2_S", y, 0.125f, 8, first, g->iq2s, 0, err, cap))
            return -1;
    }
    return 0;
}

/* IQ3_XXS: 64 index bytes per block (byte 2 + k: weights 4k..4k+3); step d * 0.5 * 0.5. */
static inline int iqg_iq3xxs(struct iq_grids *g, char *err, size_t cap)
{
    for (int first = 0; first < 256; first += 64) {
        uint8_t blk[IQG_IQ3_XXS] = {0};
        float y[256];
        for (int k = 0; k < 64; k++)
            blk[2 + k] = (uint8_t)(first + k);
        iqg_dequant(GGML_TYPE_IQ3_XXS, blk, y);
        if (iqg_read_groups("IQ3_XXS", y, 0.25f, 4, first, 0, g->iq3xxs, err, cap))
            return -1;
    }
    return 0;
}

/* IQ3_S: index k's low 8 bits in qs[k] (byte 2 + k), its 9th bit at bit k%8 of qh[k/8] (byte 66 + k/8); step
 * d * (1 + 2 * 0). */
static inline int iqg_iq3s(struct iq_grids *g, char *err, size_t cap)
{
    for (int first = 0; first < 512; first += 64) {
        uint8_t blk[IQG_IQ3_S] = {0};
        float y[256];
        for (int k = 0; k < 64; k++) {
            blk[2 + k] = (uint8_t)((first + k) & 255);
            blk[66 + k / 8] = (uint8_t)(blk[66 + k / 8] | ((first + k) >> 8) << (k % 8));
        }
        iqg_dequant(GGML_TYPE_IQ3_S, blk, y);
        if (iqg_read_groups("IQ3_S", y, 1.0f, 4, first, 0, g->iq3s, err, cap))
            return -1;
    }
    return 0;
}

/* Sign tables. ksigns: IQ2_XXS groups (grid index 0) with sign index s in bits 7l.. of the group's second word,
 * the negated weights' positions giving the byte. kmask: IQ2_S groups with one explicit sign bit b set. */
static inline int iqg_signs(struct iq_grids *g, char *err, size_t cap)
{
    for (int first = 0; first < 128; first += 32) {
        uint8_t blk[IQG_IQ2_XXS] = {0};
        float y[256];
        for (int k = 0; k < 32; k++) {
            uint8_t *w = blk + 2 + 8 * (k / 4) + 4; /* the sub-block's sign and scale word */
            uint32_t v;
            memcpy(&v, w, 4);
            v |= (uint32_t)(first + k) << (7 * (k % 4));
            memcpy(w, &v, 4);
        }
        iqg_dequant(GGML_TYPE_IQ2_XXS, blk, y);
        for (int k = 0; k < 32; k++) {
            uint8_t s = 0;
            for (int j = 0; j < 8; j++)
                s = (uint8_t)(s | (signbit(y[8 * k + j]) ? 1 : 0) << j);
            g->ksigns[first + k] = s;
        }
    }
    uint8_t blk[IQG_IQ2_S] = {0};
    float y[256];
    for (int b = 0; b < 8; b++)
        blk[2 + 32 + b] = (uint8_t)(1u << b); /* sign byte of group b: bit b */
    iqg_dequant(GGML_TYPE_IQ2_S, blk, y);
    for (int b = 0; b < 8; b++) {
        int found = -1, count = 0;
        for (int j = 0; j < 8; j++)
            if (signbit(y[8 * b + j])) {
                found = j;
                count++;
            }
        if (count != 1) {
            snprintf(err, cap, "IQ2_S: sign bit %d negated %d weights of its group, expected 1", b, count);
            return -1;
        }
        g->kmask[found] = (uint8_t)(1u << b);
    }
    return 0;
}

/* Every table. Returns 0, or -1 with a message in err[cap]. */
static inline int iq_grids_derive(struct iq_grids *g, char *err, size_t cap)
{
    memset(g, 0, sizeof *g);
    return iqg_iq2xxs(g, err, cap) || iqg_iq2xs(g, err, cap) || iqg_iq2s(g, err, cap) || iqg_iq3xxs(g, err, cap) ||
                   iqg_iq3s(g, err, cap) || iqg_signs(g, err, cap)
               ? -1
               : 0;
}

#endif
