/* prefetch.h — software prefetch of the bytes a streaming kernel reads next (weights, recurrent state). With one
 * or two threads a core's demand misses and its hardware prefetcher (which stops at each 4 KiB page) keep too few
 * lines in flight to stream a matrix-vector product at the memory's speed: asking for the bytes a few KiB ahead in
 * the x16 group kernels took the 0.8b Q4_K_M decode from 53-55 to 93 tok/s (2 threads, a 68 GB/s VM). The same in
 * the row kernels' driver, over weights read from the file map (Q8_0, Q5_K, F16 rows), measured no faster, and is
 * not done. */
#ifndef LOOM_KERNELS_PREFETCH_H
#define LOOM_KERNELS_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

/* How far ahead of the bytes being read the prefetches run: measured on the 0.8b Q4_K_M decode (2-core
 * Zen4, 2 threads): 53 tok/s without prefetch, 78-80 at 1 KiB, 79-83 at 2 and 4 KiB, 74-81 at 8 KiB. */
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

#endif
