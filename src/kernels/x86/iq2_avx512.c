/* iq2_avx512.c — the AVX-512 set's IQ2 grid kernels: iq2_avx2.c's decoders and kernel bodies built with the
 * AVX-512 flags, where iq_grid_avx2.h names them _avx512 and adds each sub-block's scaled pair sums with one
 * VPDPWSSD (the same exact int32 lanes, so bit-identical to the scalar kernels as the AVX2 ones). */
#include "kernels/x86/iq2_avx2.c"
