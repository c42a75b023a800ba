/* iq1_grid_derive.h — derives the 2048-entry lattice of the IQ1_S and IQ1_M weight types (each entry 8 values in
 * {-1, 0, 1}) from the reference itself: crafted IQ1_S blocks (F16 d = 1, sub-block scale 0 so dl = 1, delta bit 0
 * so delta = +1/8, one grid index per group of 8 weights) go through ggml-base's to_float, and each weight minus
 * 1/8 is its grid value. Shared by tools/gen_iq1_grid.c, which writes src/kernels/iq1_grid.c, and
 * tests/parity/test_ref_iq1_grid.c, which checks that file against a new derivation. */
#ifndef LOOM_IQ1_GRID_DERIVE_H
#define LOOM_IQ1_GRID_DERIVE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"

#define IQ1G_ENTRIES 2048
#define IQ1G_BLOCK_BYTES 50 /* ggml-common.h block_iq1_s: F16 d, qs[32], qh[8] as uint16 */

/* Entry i's byte j (little-endian) is weight j (as int8: 0xff, 0x00 or 0x01) of a group whose grid index is i.
 * Group l (< 4) of sub-block ib (< 8) takes index qs[4 ib + l] | ((qh[ib] >> 3 l) & 7) << 8; 32 groups a block,
 * so 64 blocks cover the table. Returns 0, or -1 with a message in err naming the entry, weight and value. */
static inline int iq1g_derive(uint64_t grid[IQ1G_ENTRIES], char *err, size_t cap)
{
    for (int first = 0; first < IQ1G_ENTRIES; first += 32) {
        uint8_t blk[IQ1G_BLOCK_BYTES] = {0};
        blk[1] = 0x3c; /* d = 1.0 */
        for (int k = 0; k < 32; k++) {
            int idx = first + k, ib = k / 4, l = k % 4;
            blk[2 + 4 * ib + l] = (uint8_t)(idx & 255);
            uint16_t qh;
            memcpy(&qh, blk + 34 + 2 * ib, 2);
            qh = (uint16_t)(qh | (idx >> 8) << (3 * l)); /* scale bits 12..14 and delta bit 15 stay 0 */
            memcpy(blk + 34 + 2 * ib, &qh, 2);
        }
        float y[256];
        ggml_get_type_traits(GGML_TYPE_IQ1_S)->to_float(blk, y, 256);
        for (int k = 0; k < 32; k++) {
            uint64_t e = 0;
            for (int j = 0; j < 8; j++) {
                float v = y[8 * k + j] - 0.125f;
                if (v != -1.0f && v != 0.0f && v != 1.0f) {
                    snprintf(err, cap, "IQ1_S: weight %d of entry %d: expected -1, 0 or 1 after removing delta 1/8, "
                             "found %g", j, first + k, (double)v);
                    return -1;
                }
                e |= (uint64_t)(uint8_t)(int8_t)v << (8 * j);
            }
            grid[first + k] = e;
        }
    }
    return 0;
}

#endif
