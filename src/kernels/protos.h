/* protos.h — the prototypes of every kernel, by family (one scalar file per family, its x86/ variants beside):
 * what the kernel sets (sets.c) and the type traits (types.c) point at. Names follow the scheme documented in
 * kernels/kernels.h: <type>_<order>[_rows4|_rows8][_isa], <order> the reference kernel whose float order it has. */
#ifndef LOOM_KERNELS_PROTOS_H
#define LOOM_KERNELS_PROTOS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/types.h"

/* --- F32, F16, BF16 (float.c, x86/float_avx2.c, x86/float_avx512.c) --- */
void loom_f32_to_float(const void *src, float *dst, int64_t n);
void loom_f32_from_float(const float *src, void *dst, int64_t n);
void loom_f32_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_f32_tinyblas(int64_t n, float *s, const void *w, const void *a);
void loom_f16_to_float(const void *src, float *dst, int64_t n);
void loom_f16_from_float(const float *src, void *dst, int64_t n);
void loom_f16_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_f16_tinyblas(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_to_float(const void *src, float *dst, int64_t n);
void loom_bf16_from_float(const float *src, void *dst, int64_t n);
void loom_bf16_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_tinyblas(int64_t n, float *s, const void *w, const void *a);
void loom_f32_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_f32_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_f32_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_f16_from_float_avx2(const float *src, void *dst, int64_t n);
void loom_f16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_f16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_f16_tinyblas_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_bf16_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_tinyblas_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_bf16_tinyblas_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);

/* --- Q8_0, Q8_1, Q8_K: the activation types (q8_0.c, q8_1.c, q8_k.c, x86/q8_*.c) --- */
void loom_q8_0_to_float(const void *src, float *dst, int64_t n);
void loom_q8_0_from_float(const float *src, void *dst, int64_t n);
void loom_q8_0_quantize(const float *src, void *dst, int64_t n);
void loom_q8_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q8_0_from_float_avx2(const float *src, void *dst, int64_t n);
void loom_q8_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q8_0_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_q8_1_to_float(const void *src, float *dst, int64_t n);
void loom_q8_1_from_float(const float *src, void *dst, int64_t n);
void loom_q8_1_from_float_avx2(const float *src, void *dst, int64_t n);
void loom_q8_k_to_float(const void *src, float *dst, int64_t n);
void loom_q8_k_from_float(const float *src, void *dst, int64_t n);
void loom_q8_k_from_float_avx2(const float *src, void *dst, int64_t n);

/* --- Q4_0, Q4_1 (q4_0.c, x86/q4_0_avx2.c) and Q5_0, Q5_1 (q5_0.c, x86/q5_0_avx2.c) --- */
void loom_q4_0_to_float(const void *src, float *dst, int64_t n);
void loom_q4_0_quantize(const float *src, void *dst, int64_t n);
void loom_q4_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q4_0_gemv(int64_t n, float *s, const void *w, const void *a);
void loom_q4_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_0_gemv_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_0_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q4_1_to_float(const void *src, float *dst, int64_t n);
void loom_q4_1_quantize(const float *src, void *dst, int64_t n);
void loom_q4_1_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q4_1_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q5_0_to_float(const void *src, float *dst, int64_t n);
void loom_q5_0_quantize(const float *src, void *dst, int64_t n);
void loom_q5_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q5_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q5_1_to_float(const void *src, float *dst, int64_t n);
void loom_q5_1_quantize(const float *src, void *dst, int64_t n);
void loom_q5_1_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q5_1_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);

/* --- IQ4_NL, IQ4_XS (iq4.c, x86/iq4_avx2.c) --- */
void loom_iq4_nl_to_float(const void *src, float *dst, int64_t n);
void loom_iq4_nl_quantize(const float *src, void *dst, int64_t n);
void loom_iq4_nl_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_gemv(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_tinyblas(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_gemv_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_nl_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq4_nl_tinyblas_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_to_float(const void *src, float *dst, int64_t n);
void loom_iq4_xs_quantize(const float *src, void *dst, int64_t n);
void loom_iq4_xs_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq4_xs_iqp_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq4_xs_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_iqp_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq4_xs_iqp_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq4_xs_iqp_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);

/* --- the grid IQ types: IQ2_XXS, IQ2_XS, IQ2_S (iq2.c), IQ3_XXS, IQ3_S (iq3.c), x86/ variants; no quantizer.
 * vec_dot: ggml-cpu's AVX2 ggml_vec_dot_iq*_q8_K order; iqp: its IQ panel gemm (iqp.cpp), 8 or more rows --- */
/* Weight quantizers of the grid types (iq_quant.c), bytewise ggml-quants.c quantize_iq3_s/iq3_xxs/iq2_s/iq2_xs/
 * iq2_xxs for one row of n (a multiple of 256) floats, qw[n] the importance weights (the _quantize forms pass
 * none; IQ2_XXS and IQ2_XS require them, as the reference). The search tables are built on first use of each
 * type (pthread_once, static storage); loom_iq_quant_table_stats builds one and returns 1 when it is complete,
 * with *neighbours the neighbour-list entries it holds (0 for a type without a table). */
void loom_iq3_s_quantize(const float *src, void *dst, int64_t n);
void loom_iq3_s_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_iq3_xxs_quantize(const float *src, void *dst, int64_t n);
void loom_iq3_xxs_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_iq2_s_quantize(const float *src, void *dst, int64_t n);
void loom_iq2_s_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_iq2_xs_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_iq2_xxs_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
int loom_iq_quant_table_stats(uint32_t type, size_t *neighbours);
void loom_iq2_xxs_to_float(const void *src, float *dst, int64_t n);
void loom_iq2_xxs_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xxs_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xs_to_float(const void *src, float *dst, int64_t n);
void loom_iq2_xs_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xs_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_s_to_float(const void *src, float *dst, int64_t n);
void loom_iq2_s_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_s_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_xxs_to_float(const void *src, float *dst, int64_t n);
void loom_iq3_xxs_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_xxs_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_s_to_float(const void *src, float *dst, int64_t n);
void loom_iq3_s_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_s_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xxs_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xxs_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xxs_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq2_xxs_iqp_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq2_xs_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xs_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xs_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq2_xs_iqp_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq2_s_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_s_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_s_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq2_s_iqp_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq3_xxs_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_xxs_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_xxs_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq3_xxs_iqp_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq3_s_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_s_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_s_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq3_s_iqp_rows8_avx2(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
/* The same built for the AVX-512 set (x86/iq2_avx512.c, iq3_avx512.c). */
void loom_iq2_xxs_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xxs_iqp_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xxs_iqp_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq2_xxs_iqp_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq2_xs_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xs_iqp_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_xs_iqp_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq2_xs_iqp_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq2_s_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_s_iqp_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq2_s_iqp_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq2_s_iqp_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq3_xxs_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_xxs_iqp_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_xxs_iqp_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq3_xxs_iqp_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_iq3_s_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_s_iqp_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_iq3_s_iqp_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq3_s_iqp_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);

/* --- IQ1_S, IQ1_M (iq1.c; quantizers in iq1_quant.c), TQ1_0, TQ2_0 (tq.c), MXFP4 (mxfp4.c), x86/ variants.
 * quantize: bytewise ggml_quantize_chunk (TQ1_0, TQ2_0, MXFP4 ignore an importance matrix; IQ1_M without one
 * weights by x^2; IQ1_S has only the weighted quantizer, as the reference requires one). vec_dot:
 * ggml-cpu's AVX2 ggml_vec_dot_<type>_<vec_dot_type> order; iqp (IQ1): its IQ panel gemm, 8 or more rows;
 * gemv (MXFP4): its repacked 8x8 gemv/gemm, weights in the CPU_REPACK buffer --- */
void loom_iq1_s_to_float(const void *src, float *dst, int64_t n);
void loom_iq1_s_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq1_s_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_iq1_m_to_float(const void *src, float *dst, int64_t n);
void loom_iq1_m_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_iq1_m_iqp(int64_t n, float *s, const void *w, const void *a);
void loom_tq1_0_to_float(const void *src, float *dst, int64_t n);
void loom_tq1_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_tq2_0_to_float(const void *src, float *dst, int64_t n);
void loom_tq2_0_vec_dot(int64_t n, float *s, const void *w, const void *a);
/* 2^(e - 128): half the E8M0 scale e (MXFP4's values are the E2M1 values doubled); e < 2 give subnormals. */
float loom_e8m0_half_to_f32(uint8_t e);
void loom_mxfp4_to_float(const void *src, float *dst, int64_t n);
void loom_mxfp4_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_mxfp4_gemv(int64_t n, float *s, const void *w, const void *a);
void loom_tq1_0_quantize(const float *src, void *dst, int64_t n);
void loom_tq2_0_quantize(const float *src, void *dst, int64_t n);
void loom_mxfp4_quantize(const float *src, void *dst, int64_t n);
void loom_iq1_m_quantize(const float *src, void *dst, int64_t n);
void loom_iq1_s_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_iq1_m_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
/* The code map and neighbour lists of a 3-level lattice of groups of 8 (ggml-quants.c iq2xs_init_impl), codes
 * 2 bits an element: see iq1_quant.c. loom_iq1_quant_init builds IQ1's once (pthread_once, static storage) and
 * returns its neighbour entry count (> 0), or -1 if they did not fit (a build error: the size is fixed). */
#define LOOM_IQ_MAP_SIZE 43692
int loom_iq_grid_neighbours(const uint16_t *codes, int grid_size, int nwant, int32_t *map, uint16_t *nb,
                            int nb_cap);
int loom_iq1_quant_init(void);
void loom_iq1_s_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq1_s_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq1_m_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq1_m_iqp_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_tq1_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_tq2_0_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_tq1_0_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_tq2_0_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_mxfp4_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_mxfp4_gemv_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_iq1_s_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_iq1_m_iqp_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_mxfp4_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
/* MXFP4 in the x16 weight layout (mxfp4.c, x86/mxfp4_avx512.c): pack and unpack as loom_q4_k_x16_pack /
 * _unpack_row for MXFP4 rows (n_in / 32 blocks of 16 * 17 bytes); the AVX-512 group dot as
 * loom_q4_k_x16_gemv_avx512, each row bit-identical to loom_mxfp4_gemv. */
void loom_mxfp4_x16_pack(const void *rows, size_t row_bytes, void *dst, int64_t n_in);
void loom_mxfp4_x16_unpack_row(const void *group, int r, void *dst, int64_t n_in);
void loom_mxfp4_x16_gemv_avx512(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                                size_t a_stride);
int loom_iq1_s_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq1_m_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_tq1_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_tq2_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_mxfp4_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);

/* --- the K-quants: Q2_K (q2_k.c), Q3_K (q3_k.c), Q4_K (q4_k.c), Q5_K (q5_k.c), Q6_K (q6_k.c), x86/ variants --- */
void loom_q2_k_to_float(const void *src, float *dst, int64_t n);
void loom_q2_k_quantize(const float *src, void *dst, int64_t n);
void loom_q2_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_gemv(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_gemm(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_gemv_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q2_k_gemm_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q3_k_to_float(const void *src, float *dst, int64_t n);
void loom_q3_k_quantize(const float *src, void *dst, int64_t n);
void loom_q3_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q3_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_to_float(const void *src, float *dst, int64_t n);
void loom_q4_k_quantize(const float *src, void *dst, int64_t n);
void loom_q4_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_gemv(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_gemm(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_gemv_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_gemv_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q4_k_gemm_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q4_k_gemm_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q4_k_gemv_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q4_k_gemv_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
void loom_q5_k_to_float(const void *src, float *dst, int64_t n);
void loom_q5_k_quantize(const float *src, void *dst, int64_t n);
void loom_q5_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q5_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_to_float(const void *src, float *dst, int64_t n);
void loom_q6_k_quantize(const float *src, void *dst, int64_t n);
void loom_q6_k_vec_dot(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_vec_dot_avx2(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_vec_dot_rows4_avx2(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q6_k_vec_dot_avx512(int64_t n, float *s, const void *w, const void *a);
void loom_q6_k_vec_dot_rows4_avx512(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
void loom_q6_k_vec_dot_rows8_avx512(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);

/* Weighted weight quantizers (the types' quantize_w trait; types.h loom_quantize_w_fn): one row of n elements
 * with importance weights qw[n], bytewise ggml_quantize_chunk's with an imatrix. In the types' files. */
void loom_q4_0_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_q4_1_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_q2_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_q3_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_q4_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_q5_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_q6_k_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_iq4_nl_quantize_w(const float *src, void *dst, int64_t n, const float *qw);
void loom_iq4_xs_quantize_w(const float *src, void *dst, int64_t n, const float *qw);

/* The scale searches of the imatrix path (quant_fit.c), each in the reference's float order (no FMA):
 * loom_fit_qx: ggml-quants.c make_qx_quants with rmse_type 1: symmetric quants in [-nmax, nmax - 1] around the
 * signed extreme of x[n], 18 nearby scales tried, weights qw (x^2 when NULL); L[n] = quant + nmax; returns the
 * scale (0 for an all-zero group). loom_fit_qkx3: make_qkx3_quants, x[n] (n <= 32) ~ scale * L - min, L in
 * 0..nmax, weights (x^2 when NULL), nstep + 1 scales (rmin + rdelta * is + nmax) / (max - min); returns the
 * scale, *neg_min = -min. loom_fit_qp: make_qp_quants, non-negative x[n] ~ scale * L with L in 0..nmax,
 * weights qw, 8 nearby scales then coordinate descent; returns the scale. */
float loom_fit_qx(int n, int nmax, const float *x, const float *qw, int8_t *L);
float loom_fit_qkx3(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *neg_min, float rmin,
                    float rdelta, int nstep, int use_mad);
float loom_fit_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw);

/* Fit one 256-weight super-block of Q4_K (nmax 15) or Q5_K (nmax 31, clamp_scales 1) on the imatrix path
 * (quantize_row_q4_K_impl / q5_K_impl): per sub-block of 32 make_qkx3_quants with weights qw * sqrt(sigma2 +
 * x^2), sigma2 = 2 * mean(x^2); scales and mins to 6 bits by make_qp_quants weighted by the sub-block weight
 * sums; then L[256] recomputed from the rounded scales. q4_k.c. */
void loom_k4_quantize_superblock_w(const float x[256], const float qw[256], int nmax, int clamp_scales,
                                   uint8_t L[256], uint8_t scales[12], uint16_t *d, uint16_t *dmin);

/* ggml-quants.c make_qkx2_quants: fit x[n] (n <= 32) ~ scale * L - min with L[n] in 0..nmax, min <= 0,
 * weights w[n]: start from the (min, max) grid, then try nstep + 1 scales iscale = (rmin + 0.1 is + nmax)
 * / (max - min), refit (scale, min) by weighted least squares on each rounding and keep the one with the
 * smallest weighted error (absolute if use_mad, else squared). Returns the scale, *neg_min = -min >= 0.
 * Float operations in the reference's order (no FMA), so bit-identical. Q2_K, Q4_K, Q5_K. q4_k.c. */
float loom_k_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                           int nstep, int use_mad);

/* Fit one 256-weight super-block of Q4_K (nmax 15) or Q5_K (nmax 31), as ggml-quants.c
 * quantize_row_q4_K_ref / quantize_row_q5_K_ref: per 32-weight sub-block a (scale, min) pair by
 * make_qkx2_quants' weighted search (rmin, 0.1 step, nstep steps), both quantized to 6 bits against the
 * F16 super-scales *d and *dmin, then L[256] (0..nmax) recomputed from the rounded scales. q4_k.c. */
void loom_k4_quantize_superblock(const float x[256], int nmax, float rmin, int nstep, uint8_t L[256],
                                 uint8_t scales[12], uint16_t *d, uint16_t *dmin);

/* --- Q4_K in the x16 weight layout (q4_k_x16.c, x86/q4_k_x16_avx2.c, x86/q4_k_x16_avx512.c) --- */
/* Pack 16 standard rows (row_bytes apart) of n_in elements into n_in / 256 x16 blocks at dst; unpack row r
 * (< 16) of such a group into n_in / 256 standard blocks at dst (bytewise the original). */
void loom_q4_k_x16_pack(const void *rows, size_t row_bytes, void *dst, int64_t n_in);
void loom_q4_k_x16_unpack_row(const void *group, int r, void *dst, int64_t n_in);
/* y[r] (r < 16) = dot of row r of an x16 group with one Q8_K row of n elements, in the order of
 * loom_q4_k_gemv (bit-identical to it per row). The scalar oracle of the SIMD x16 kernels. */
void loom_q4_k_x16_gemv(int64_t n, float *y, const void *w, const void *a);
/* y[k * y_stride + r] for row r < 16 of the group w and activation row k < n_act (1..8) at a + k * a_stride
 * bytes; each bit-identical to loom_q4_k_x16_gemv. AVX-512: VNNI outer products; AVX2: VPMADDUBSW with
 * int16 sub-block sums. */
void loom_q4_k_x16_gemv_avx2(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                             size_t a_stride);
void loom_q4_k_x16_gemv_avx512(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                               size_t a_stride);

/* --- Q6_K in the x16 weight layout (q6_k_x16.c, x86/q6_k_x16_avx2.c, x86/q6_k_x16_avx512.c) --- */
/* Pack and unpack as loom_q4_k_x16_pack / _unpack_row, for Q6_K rows. */
void loom_q6_k_x16_pack(const void *rows, size_t row_bytes, void *dst, int64_t n_in);
void loom_q6_k_x16_unpack_row(const void *group, int r, void *dst, int64_t n_in);
/* y[r] (r < 16) = dot of row r of an x16 group with one Q8_K row of n elements, in the order of
 * loom_q6_k_vec_dot (bit-identical to it per row). The scalar oracle of the SIMD x16 kernels. */
void loom_q6_k_x16_vec_dot(int64_t n, float *y, const void *w, const void *a);
/* y[k * y_stride + r] for row r < 16 of the group w and activation row k < n_act (1..8) at a + k * a_stride
 * bytes; each bit-identical to loom_q6_k_x16_vec_dot. AVX-512: VNNI outer products, two chunks' sums scaled
 * by one VPDPWSSD; AVX2: VPMADDUBSW pair sums scaled per chunk by VPMADDWD. */
void loom_q6_k_x16_vec_dot_avx2(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                                size_t a_stride);
void loom_q6_k_x16_vec_dot_avx512(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                                  size_t a_stride);

/* --- row validators (validate.c), the type traits' validate_row: ggml_validate_row_data's rules --- */
int loom_f32_validate_row(const void *row, int64_t n, struct loom_row_fault *fault);
int loom_f16_validate_row(const void *row, int64_t n, struct loom_row_fault *fault);
int loom_bf16_validate_row(const void *row, int64_t n, struct loom_row_fault *fault);
int loom_q8_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q4_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q4_1_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q5_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q5_1_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q8_0_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q2_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q3_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q4_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q5_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_q6_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq4_nl_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq4_xs_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq2_xxs_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq2_xs_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq2_s_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq3_xxs_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);
int loom_iq3_s_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault);

#endif
