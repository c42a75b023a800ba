/* prefetch.h — software prefetch of the bytes a streaming kernel reads next (weights, recurrent state). With one
 * or two threads a core's demand misses and its hardware prefetcher keep too few lines in flight to stream a
 * matrix-vector product at the memory's speed (hardware prefetchers generally stop at 4 KiB page boundaries: our
 * explanation, not checked with counters, which this VM does not expose): asking for the bytes a few KiB ahead in
 * the x16 group kernels took the 0.8b Q4_K_M decode from 53-58 to 93 tok/s (2 threads, a 68 GB/s VM, quiet). Not
 * done where it measured no faster: the row kernels' driver over weights read from the file map (Q8_0, Q5_K, F16
 * rows), and the AVX2 set's delta rule and conv (slower in 3 of 4 A/B pairs). */
#ifndef LOOM_KERNELS_PREFETCH_H
#define LOOM_KERNELS_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

/* How far ahead of the bytes being read the prefetches run: measured on the 0.8b Q4_K_M decode (2-core Zen4,
 * 2 threads, tg64, not quiet: load 1.7-2.1 at the ends, builds running): without prefetch 48-55 tok/s, 1 KiB 78-80,
 * 2 KiB 79-83, 4 KiB 75-84, 8 KiB 74-81, 16 KiB 71-78. */
#define LOOM_PREFETCH_AHEAD 4096

/* Prefetch (into L1, for reading) the cache lines of [p + LOOM_PREFETCH_AHEAD, p + LOOM_PREFETCH_AHEAD + bytes):
 * called once per piece of a contiguous stream, the pieces in order, it keeps the stream's next bytes in flight.
 * A prefetch never faults, so the lines past the end of the stream cost only the request (the addresses are
 * computed as integers: they may lie past the end of the object). */
static inline void loom_prefetch_ahead(const void *p, size_t bytes)
{
    uintptr_t q = (uintptr_t)p + LOOM_PREFETCH_AHEAD;
    for (size_t l = 0; l < bytes; l += 64)
        __builtin_prefetch((const void *)(q + l), 0, 3);
}

/* Part `part` (< parts) of loom_prefetch_ahead(p, bytes): the lines [part * L / parts, (part + 1) * L / parts) of
 * the L = bytes / 64 (rounded up) it asks for. A kernel that calls it at each of `parts` steps of its work on a
 * block spreads the block's requests through that work instead of issuing them all at its start (a burst of 53
 * for a Q6_K x16 block: more than a core keeps misses in flight, our explanation). The AVX2 x16 kernels do, one
 * part per step: 0.8b Q4_K_M decode (2-core Zen3, 2 threads, tg128, 5 alternating A/B pairs from load 0.15)
 * 36.4-42.9 -> 45.3-50.2 tok/s, +21% (median of the pairs' ratios); moe-mid Q4_K_M tg64 +32% (3 pairs, load
 * 1.2), pp512 +10%. The AVX-512 ones still ask at each block's start (not measured: no AVX-512 machine then). */
static inline void loom_prefetch_ahead_part(const void *p, size_t bytes, int part, int parts)
{
    uintptr_t q = (uintptr_t)p + LOOM_PREFETCH_AHEAD;
    size_t lines = (bytes + 63) / 64;
    for (size_t l = (size_t)part * lines / (size_t)parts; l < (size_t)(part + 1) * lines / (size_t)parts; l++)
        __builtin_prefetch((const void *)(q + 64 * l), 0, 3);
}

#endif
