/* matmul.h — weight matrix times activation rows, parallel over the thread pool: matrix-vector for
 * decode and a blocked matrix-matrix path for prefill. Activations are converted once per row to the
 * weight type's partner (vec_dot_type) exactly where llama.cpp's CPU backend converts them. */
#ifndef LOOM_KERNELS_MATMUL_H
#define LOOM_KERNELS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/types.h"

struct loom_pool;

/* How a weight's bytes are arranged in memory. ROWS: the GGUF layout, n_out rows of row_bytes. X16: rows
 * 0 .. 16 * (n_out / 16) - 1 in groups of 16 rows interleaved per block column (struct loom_block_q4_k_x16
 * or loom_block_q6_k_x16: n_in / 256 of them per group, 16 * row_bytes bytes), made at model load when the
 * model's kernel set has x16 kernels for the type (Q4_K and Q6_K: AVX2, AVX-512); the remaining
 * n_out % 16 rows stay in the GGUF layout in `rows`. */
enum loom_weight_layout { LOOM_WEIGHT_ROWS = 0, LOOM_WEIGHT_X16 = 1 };

/* Most bytes a row of an X16 weight may have (matmul unpacks one row on the stack where it must). */
#define LOOM_WEIGHT_X16_MAX_ROW_BYTES (256 * 144)

/* A 2-D weight matrix W[n_out][n_in] in GGUF layout (ne[0] = n_in contiguous, ne[1] = n_out rows). */
struct loom_weight {
    uint32_t type;    /* enum loom_type */
    int64_t n_in;     /* elements per row */
    int64_t n_out;    /* rows */
    size_t row_bytes; /* loom_type_row_bytes(type, n_in) */
    const void *data; /* in `layout` (X16: 64-byte aligned, owned by the model) */
    uint32_t layout;  /* enum loom_weight_layout */
    const void *rows; /* X16: the tensor in the GGUF layout (the file map: identity digests and the tail
                       * rows read it; the pages of the full groups may have been released) */
    int ref_plain_buffer; /* 0 (the default): mirror the reference as llama.cpp places the weight by default
                           * (use_extra_bufts: Q4_K, Q4_0, IQ4_NL, MXFP4 and, on AVX-512 CPUs, Q2_K weights with
                           * n_out % 8 == 0 in its CPU_REPACK buffer, multiplied by its gemv/gemm kernels);
                           * 1: as in a plain CPU buffer (use_extra_bufts off: vec_dot, tinyBLAS, iqp) */
};

/* The dot kernels loom_matmul uses, from set ks, for the outputs of activation row t (< n_tok) in
 * W[n_out][n_in] (of `type`) times n_tok rows: those of the kernel the reference's CPU backend uses there
 * (ggml-cpu.c ggml_compute_forward_mul_mat): for a weight in the CPU_REPACK buffer (plain_buffer 0, see
 * ref_plain_buffer) the gemm order for rows t < n_tok - n_tok % 4 and the gemv order for the rest; else
 * tinyBLAS for F32/F16/BF16 when n_tok >= 2, n_out % 4 == 0 and n_in is a multiple of its step, and for
 * IQ4_NL when n_tok >= 2 (any n_out); iqp for the IQ panel types (IQ4_XS, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S) when n_tok >= 8 and n_out % 8 == 0; else vec_dot (TQ1_0 and TQ2_0 always).
 * NULL for a type loom does not know. */
const struct loom_dot_kernels *loom_matmul_dot(const struct loom_kernel_set *ks, uint32_t type, int64_t n_out,
                                               int64_t n_in, int64_t n_tok, int64_t t, int plain_buffer);

/* Scratch bytes loom_matmul needs for n_tok activation rows of length n_in against weight type `type`. */
size_t loom_matmul_scratch_bytes(uint32_t type, int64_t n_in, int64_t n_tok);

/* y[t][o] = sum_i W[o][i] * x[t][i] for t < n_tok, o < n_out.
 * x is [n_tok][n_in] F32, y is [n_tok][n_out] F32 (rows contiguous). scratch holds the converted
 * activations (loom_matmul_scratch_bytes). Never allocates. */
void loom_matmul(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                 const float *x, int64_t n_tok, float *y, void *scratch);

/* As loom_matmul, with every row t in the float order of a one-row product (the decode kernel), so
 * y[t] does not depend on n_tok: bitwise equal to n_tok calls with one row each. Same scratch. */
void loom_matmul_rowwise(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                         const float *x, int64_t n_tok, float *y, void *scratch);

/* Activation rows read by several matrices (the q/k/v/z/alpha/beta projections, ffn gate and up): converted
 * once per activation type and shared. Set x, n_tok, scratch (loom_matmul_scratch_bytes for the largest
 * reader) and type = LOOM_TYPE_COUNT (nothing converted yet); loom_matmul_shared keeps type current. The
 * rows x must not change while the struct is in use. */
struct loom_matmul_act {
    const float *x; /* [n_tok][n_in] F32 */
    int64_t n_tok;
    uint32_t type;  /* the type scratch holds x in; LOOM_TYPE_COUNT: none */
    void *scratch;
};

/* loom_matmul (rowwise = 0) or loom_matmul_rowwise (rowwise = 1) of act's rows, converting them only when
 * scratch does not already hold them as w's vec_dot_type. Same results bit for bit. */
void loom_matmul_shared(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                        struct loom_matmul_act *act, float *y, int rowwise);

/* The most matrices loom_matmul_shared_n takes. */
#define LOOM_MATMUL_MAX_SHARED 4

/* loom_matmul_shared for n (<= LOOM_MATMUL_MAX_SHARED) matrices w[k] reading the same rows act, y[k] =
 * w[k] . act, in one pass over the pool (one barrier instead of n) when all have the same vec_dot_type (one
 * after the other otherwise). Each output is the same dot as loom_matmul_shared's: bit for bit its results. */
void loom_matmul_shared_n(const struct loom_kernel_set *ks, struct loom_pool *pool, int n,
                          const struct loom_weight *const *w, struct loom_matmul_act *act, float *const *y,
                          int rowwise);

/* act's rows as w's vec_dot_type: *rows points at them (act->x itself for an F32 partner, else act->scratch,
 * converted there unless it already holds them); returns the bytes per row. */
size_t loom_matmul_act_rows(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                            struct loom_matmul_act *act, const void **rows);

/* The dot kernels of the reference's MUL_MAT_ID for one expert W_e[n_out][n_in] (of `type`) that n_rows
 * activation rows of a ubatch were routed to. Per expert, in sequence, ggml-cpu.c
 * ggml_compute_forward_mul_mat_id multiplies each of its rows by one call per output (never tinyBLAS):
 *   an expert tensor in the CPU_REPACK buffer (the types and n_out of loom_matmul_dot's gemv rule;
 *     repack.cpp forward_mul_mat_id): the gemv order for every row, whatever n_rows (never gemm)
 *   the IQ panel types (loom_matmul_dot's) with n_in % 256 == 0 and n_out % 8 == 0 when n_rows >= 8 (iqp.cpp
 *     ggml_compute_forward_mul_mat_id_iqp, GGML_IQP_MIN_BATCH_ID): the IQ panel order
 *   else vec_dot, one row and one output at a time (mul_mat_id_one_chunk).
 * The activation rows are converted by the vec_dot_type's from_float, row by row, as for loom_matmul. */
const struct loom_dot_kernels *loom_matmul_dot_id(const struct loom_kernel_set *ks, uint32_t type, int64_t n_out,
                                                  int64_t n_in, int64_t n_rows, int plain_buffer);

/* The expert matmuls of a ubatch (MUL_MAT_ID), rows grouped by expert: expert e < n_expert is the matrix w
 * with its data at w->data + e * expert_bytes (layout ROWS, or X16 with n_out % 16 == 0 and its GGUF rows at
 * w->rows + e * expert_bytes), and its activation rows are r in [start[e], start[e + 1]) (start[0] = 0):
 * y[r][o] = sum_i W_e[o][i] * a_r[i] for o < n_out, with a_r at act + r * act_bytes already in w's
 * vec_dot_type (loom_matmul_act_rows) and y [start[n_expert]][n_out].
 * Each expert's rows in loom_matmul_dot_id's order for their count, or (rowwise = 1) for one row, so
 * that row r does not depend on what else the ubatch routed. Only experts with rows are read.
 * n_expert <= LOOM_OPS_MAX_EXPERTS (kernels/ops.h). */
void loom_matmul_experts(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                         size_t expert_bytes, int n_expert, const int32_t *start, const void *act, size_t act_bytes,
                         float *y, int rowwise);

/* One expert's matrix W_e = we (its data anywhere, e.g. in an expert cache slot) times its n_rows activation rows,
 * as loom_matmul_experts multiplies each expert: y[r][o] = sum_i W_e[o][i] * a_r[i] for r < n_rows, o <
 * we->n_out, a_r at act + r * act_bytes in we's vec_dot_type, in loom_matmul_dot_id's order for n_rows (rowwise:
 * for one row). Bitwise what loom_matmul_experts gives that expert's rows whatever else it multiplies. */
void loom_matmul_expert(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *we,
                        int64_t n_rows, const void *act, size_t act_bytes, float *y, int rowwise);

/* Bytes of the X16 copy of w (layout ROWS) that model load makes, or 0 when w is not repacked: kernel set
 * ks has no x16 kernels for its type, it has fewer than 16 rows, the reference's order for one token is
 * not the one those kernels have (Q4_K with n_out % 8 != 0: vec_dot's, not gemv's), or its rows exceed
 * LOOM_WEIGHT_X16_MAX_ROW_BYTES. */
size_t loom_weight_x16_bytes(const struct loom_kernel_set *ks, const struct loom_weight *w);

/* Repack w's full groups of 16 rows into dst (loom_weight_x16_bytes(w) bytes, 64-byte aligned, owned by
 * the caller), the groups shared among pool's threads (NULL: on the caller; the bytes do not depend on it):
 * afterwards w->layout = X16, w->data = dst and w->rows = the old data (still read: the tail rows and
 * digests). */
void loom_weight_repack_x16(struct loom_pool *pool, struct loom_weight *w, void *dst);

/* Copy row `row` of W dequantized to F32 into dst[n_in] (token embedding lookup); any layout. */
void loom_weight_get_row(const struct loom_weight *w, int64_t row, float *dst);

#endif
