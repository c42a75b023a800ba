/* iq1_grid.h — the lattice of the IQ1_S and IQ1_M weight types (llama.cpp ggml-common.h iq1s_grid), generated
 * into iq1_grid.c by tools/gen_iq1_grid.c from the reference's dequantization. */
#ifndef LOOM_KERNELS_IQ1_GRID_H
#define LOOM_KERNELS_IQ1_GRID_H

#include <stdint.h>

#define LOOM_IQ1S_GRID_SIZE 2048

/* Entry i (an 11-bit grid index): byte j (little-endian) is weight j of a group of 8, as int8 in {-1, 0, 1}. */
extern const uint64_t loom_iq1s_grid[LOOM_IQ1S_GRID_SIZE];

#endif
