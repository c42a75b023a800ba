/* bench_mem.h — the machine probes of `loom bench --mem`: a streaming read of a buffer (memory bandwidth, the
 * decode roofline), chains of independent FP32 fused multiply-adds and of int8 dot products (a core's arithmetic
 * peaks), in AVX2 and AVX-512 variants (bench_mem_avx2.c, bench_mem_avx512.c) chosen by the caller from CPU features. */
#ifndef LOOM_CLI_BENCH_MEM_H
#define LOOM_CLI_BENCH_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Read buf[bytes] once with vector loads (buf 64-byte aligned, bytes a multiple of 256) and return a digest
 * of it, so that the reads cannot be optimised away. */
uint64_t loom_bench_read_avx2(const void *buf, size_t bytes);
uint64_t loom_bench_read_avx512(const void *buf, size_t bytes);

/* Run iters steps of LOOM_BENCH_FMA_CHAINS independent FMA chains, each one vector wide: the AVX2 variant does
 * iters * LOOM_BENCH_FMA_CHAINS * 8 FMAs (2 FLOP each), the AVX-512 one * 16. Returns a sum of the chains. */
#define LOOM_BENCH_FMA_CHAINS 12
float loom_bench_fma_avx2(int64_t iters);
float loom_bench_fma_avx512(int64_t iters);

/* Run iters steps of LOOM_BENCH_FMA_CHAINS independent chains of AVX-512 VNNI int8 dot products (vpdpbusd, the
 * instruction of loom's K-quant prefill kernels): iters * LOOM_BENCH_FMA_CHAINS * 64 multiply-adds (2 ops
 * each). Returns a digest of the chains. Needs AVX-512 VNNI. */
uint32_t loom_bench_dot_i8_avx512(int64_t iters);

#endif
