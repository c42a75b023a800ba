/* iq_grids.h — the lattice ("grid") tables the IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S weight types decode
 * through, and the IQ2 sign tables; the data is generated into iq_grids.c by tools/gen_iq_grids.c from the
 * reference's dequantization. (The IQ1_S/IQ1_M grid lives in iq1_grid.c.) */
#ifndef LOOM_KERNELS_IQ_GRIDS_H
#define LOOM_KERNELS_IQ_GRIDS_H

#include <stdint.h>

/* Grid entry i: byte j (little-endian) is the magnitude of weight j of a group with index i; 8 weights per
 * entry for the IQ2 types (values 8, 25, 43), 4 for the IQ3 types (IQ3_XXS 4, 12, ..., 52, 62; IQ3_S the odd
 * 1..15). Index widths: IQ2_XXS 8 bits, IQ2_XS 9, IQ2_S 10, IQ3_XXS 8, IQ3_S 9. */
extern const uint64_t loom_iq2xxs_grid[256];
extern const uint64_t loom_iq2xs_grid[512];
extern const uint64_t loom_iq2s_grid[1024];
extern const uint32_t loom_iq3xxs_grid[256];
extern const uint32_t loom_iq3s_grid[512];

/* Sign index s (7 bits, IQ2_XXS/IQ2_XS/IQ3_XXS) -> 8 sign bits: the 7 bits of s and their parity as bit 7. */
extern const uint8_t loom_iq2_ksigns[128];
/* kmask[j]: the sign bit governing weight j of a group of 8 (1 << j). */
extern const uint8_t loom_iq2_kmask[8];

#endif
