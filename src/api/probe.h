/* probe.h — the kernels of loom_probe_machine (probe.c): a streaming read of a buffer (memory bandwidth),
 * chains of independent FP32 fused multiply-adds and of int8 dot products (a core's arithmetic peaks), in AVX2
 * (probe_avx2.c) and AVX-512 (probe_avx512.c) variants that probe.c chooses from the CPU's features. */
#ifndef LOOM_API_PROBE_H
#define LOOM_API_PROBE_H

#include <stddef.h>
#include <stdint.h>

/* Read buf[bytes] once with vector loads (buf 64-byte aligned, bytes a multiple of 256) and return a digest
 * of it, so that the reads cannot be optimised away. */
uint64_t loom_probe_read_avx2(const void *buf, size_t bytes);
uint64_t loom_probe_read_avx512(const void *buf, size_t bytes);

/* Run iters steps of LOOM_PROBE_CHAINS independent FMA chains, each one vector wide: the AVX2 variant does
 * iters * LOOM_PROBE_CHAINS * 8 FMAs (2 FLOP each), the AVX-512 one * 16. Returns a sum of the chains. */
#define LOOM_PROBE_CHAINS 12
float loom_probe_fma_avx2(int64_t iters);
float loom_probe_fma_avx512(int64_t iters);

/* Run iters steps of LOOM_PROBE_CHAINS independent chains of AVX-512 VNNI int8 dot products (vpdpbusd):
 * iters * LOOM_PROBE_CHAINS * 64 multiply-adds (2 ops each). Returns a digest of the chains. Needs VNNI. */
uint32_t loom_probe_dot_i8_avx512(int64_t iters);

#endif
