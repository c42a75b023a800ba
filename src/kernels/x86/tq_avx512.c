/* tq_avx512.c — the AVX-512 set's TQ1_0 and TQ2_0 dots: tq_avx2.c built with the AVX-512 flags, where it names
 * them _avx512 and sums each 32-element chunk into its int32 lanes with one VPDPBUSD (the same exact lanes, so
 * bit-identical to the scalar kernels as the AVX2 ones). */
#include "kernels/x86/tq_avx2.c"
