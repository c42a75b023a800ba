/* kernels.h — the kernel sets: one const table per instruction set (scalar, AVX2, AVX-512) naming every kernel
 * that differs between them, chosen once and held by pointer (a model holds the set it was loaded with and
 * passes it down to matmul and the ops). The ISA-independent type traits are in types.h. */
#ifndef LOOM_KERNELS_KERNELS_H
#define LOOM_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "kernels/types.h"
#include "loom.h"

/* Kernel names. A dot kernel takes one weight row in the GGUF layout and computes its dot with activation rows
 * in the float order of one reference kernel (llama.cpp's CPU backend), after which it is named:
 *   loom_<type>_vec_dot   ggml_vec_dot_<type>_<vec_dot_type>: one activation row (decode), weights in a plain
 *                         CPU buffer
 *   loom_<type>_gemv      repack.cpp ggml_gemv_<type>_8x8_<vec_dot_type>: weights in the reference's CPU_REPACK
 *                         buffer (use_extra_bufts: Q4_0, Q4_K, IQ4_NL, MXFP4; Q2_K on AVX-512), one activation row
 *   loom_<type>_gemm      repack.cpp ggml_gemm_<type>_8x8_<vec_dot_type>: the same weights, activation rows in
 *                         groups of 4; only Q4_K and Q2_K have a per-row order of their own, the others' gemm
 *                         slot holds their gemv kernel
 *   loom_<type>_tinyblas  llamafile/sgemm.cpp tinyBLAS (F32, F16, BF16; IQ4_NL's Q0 kernel): batches of rows
 *   loom_<type>_iqp       iqp.cpp ggml_compute_forward_mul_mat_iqp (IQ4_XS, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
 *                         IQ2_S, IQ3_XXS, IQ3_S): batches of 8 rows or more
 * _rows4 / _rows8: the same dot for 4 / 8 activation rows at once (row k at a + k * a_stride bytes, result s[k]),
 * each row bit-identical to the one-row kernel. The reference's 8x8 repacking is only mirrored in the order;
 * a layout name stands only for loom's own weight layouts: loom_q4_k_x16_gemv and loom_q6_k_x16_vec_dot read
 * 16 rows interleaved (struct loom_block_q4_k_x16 / _q6_k_x16) and write the 16 outputs of each activation
 * row, in gemv's / vec_dot's order.
 * _avx2 / _avx512 name the instruction set a kernel is built for; no suffix: the scalar reference. */

/* *s = dot(w[0..n), a[0..n)) where w is a weight row of the type and a an activation row of its vec_dot_type. */
typedef void (*loom_dot_fn)(int64_t n, float *s, const void *w, const void *a);
/* s[k] = dot(w, a + k * a_stride bytes) for k < 4 (8): each bit-identical to the loom_dot_fn it stands for. */
typedef void (*loom_dot_rows4_fn)(int64_t n, float s[4], const void *w, const void *a, size_t a_stride);
typedef void (*loom_dot_rows8_fn)(int64_t n, float s[8], const void *w, const void *a, size_t a_stride);
/* Over a 16-row x16 weight group: y[k * y_stride + r] for group row r < 16 and the n_act (1..8) activation
 * rows k < n_act at a + k * a_stride bytes. */
typedef void (*loom_x16_dot_fn)(int64_t n, int n_act, float *y, size_t y_stride, const void *w, const void *a,
                                size_t a_stride);

/* One float order (one reference kernel): its one-row kernel, or NULL where the type has none, and its 4- and
 * 8-row forms where the set has them (NULL: matmul calls the one-row kernel per row). */
struct loom_dot_kernels {
    loom_dot_fn row;
    loom_dot_rows4_fn rows4;
    loom_dot_rows8_fn rows8;
};

/* The x16 layout's kernel, or NULL where the set has none for the type. */
struct loom_x16_kernels {
    loom_x16_dot_fn dot;
};

/* A type's kernels in one set. */
struct loom_type_kernels {
    loom_from_float_fn from_float; /* activation quantization into this type (F32/F16/BF16/Q8_0/Q8_1/Q8_K) */
    struct loom_dot_kernels vec_dot, gemv, gemm, tinyblas, iqp; /* per order, named above */
    struct loom_x16_kernels x16;   /* weights in the x16 layout, in gemv's order where the type has a gemv, else
                                    * in vec_dot's (Q4_K in the SIMD sets, Q6_K in the AVX-512 one) */
};

struct loom_kernel_set {
    const char *name;           /* "scalar", "avx2", "avx512" */
    enum loom_kernel_mode mode; /* LOOM_KERNELS_SCALAR, _AVX2, _AVX512 */
    enum loom_orders orders;    /* the float-order profile its F32/F16/BF16 dots and ops follow (loom.h) */
    struct loom_type_kernels types[LOOM_TYPE_COUNT];
    struct loom_ops_kernels ops; /* the per-head ops (ops.h) */
};

/* The set for `mode` in the active float-order profile (AUTO: the widest this CPU runs), or NULL when the CPU lacks its instructions (AVX2: AVX2,
 * FMA, F16C, BMI2; AVX-512: those and F, BW, VL, DQ, VNNI, BF16) or mode is unknown. */
const struct loom_kernel_set *loom_kernels_for(enum loom_kernel_mode mode);

/* The process-wide default set: the one loom_kernels_select chose last, else AUTO's (chosen at the first
 * call). Read by model load (the set a model holds) and by callers without a model (quantization). */
const struct loom_kernel_set *loom_kernels_active(void);

/* The process-wide float-order profile (loom_orders_select; until then the CPU's: HASWELL without AVX-512F,
 * else AVX512): the sets above are its, and the router (router.c), which no set holds, reads it. */
enum loom_orders loom_orders_active(void);

/* The profile's name ("avx512", "haswell"), or NULL for a value that is none (read from a file). */
const char *loom_orders_label(enum loom_orders orders);

#endif
