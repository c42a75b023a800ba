/* ops_avx2.c — the AVX2 set of the per-head ops of ops.h: the scalar C of ops_impl.h compiled again with
 * AVX2, FMA, F16C and BMI2 enabled (the Makefile's flags for *_avx2.c), so bitwise the same as the scalar
 * set. The ops outside the loom_ops_kernels table are private copies here. */
#define OPS(name) loom_ops_##name##_avx2
#define OPS_INNER static
#include "kernels/ops_impl.h"
