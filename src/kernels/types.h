/* types.h — the tensor element types loom understands (numbered as ggml's type ids, as GGUF stores
 * them) and their traits, which no instruction set changes (one const table, as ggml's type_traits): block
 * geometry, the activation type, dequantization, the weight quantizer and the row validator. The kernels
 * that differ per instruction set (activation quantization, dot products) are in the kernel sets (kernels.h). */
#ifndef LOOM_KERNELS_TYPES_H
#define LOOM_KERNELS_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

enum loom_type {
    LOOM_TYPE_F32 = 0,
    LOOM_TYPE_F16 = 1,
    LOOM_TYPE_Q4_0 = 2,
    LOOM_TYPE_Q4_1 = 3,
    LOOM_TYPE_Q5_0 = 6,
    LOOM_TYPE_Q5_1 = 7,
    LOOM_TYPE_Q8_0 = 8,
    LOOM_TYPE_Q8_1 = 9,
    LOOM_TYPE_Q2_K = 10,
    LOOM_TYPE_Q3_K = 11,
    LOOM_TYPE_Q4_K = 12,
    LOOM_TYPE_Q5_K = 13,
    LOOM_TYPE_Q6_K = 14,
    LOOM_TYPE_Q8_K = 15,
    LOOM_TYPE_IQ2_XXS = 16,
    LOOM_TYPE_IQ2_XS = 17,
    LOOM_TYPE_IQ3_XXS = 18,
    LOOM_TYPE_IQ1_S = 19,
    LOOM_TYPE_IQ4_NL = 20,
    LOOM_TYPE_IQ3_S = 21,
    LOOM_TYPE_IQ2_S = 22,
    LOOM_TYPE_IQ4_XS = 23,
    LOOM_TYPE_IQ1_M = 29,
    LOOM_TYPE_BF16 = 30,
    LOOM_TYPE_TQ1_0 = 34,
    LOOM_TYPE_TQ2_0 = 35,
    LOOM_TYPE_MXFP4 = 39,
    LOOM_TYPE_COUNT = 40,
};

/* dequantize n elements (n a multiple of block_size) */
typedef void (*loom_to_float_fn)(const void *src, float *dst, int64_t n);
/* quantize n floats (n a multiple of block_size) into blocks: activation rows (a kernel set's from_float) and
 * weights (the traits' quantize) */
typedef void (*loom_from_float_fn)(const float *src, void *dst, int64_t n);

/* quantize one row of n floats (the tensor's row length, a multiple of block_size: some types take statistics
 * over the whole row) with per-column importance weights w[n] (an imatrix row: mean squared activations) */
typedef void (*loom_quantize_w_fn)(const float *src, void *dst, int64_t n, const float *w);

/* What a row validator found: the block (the element, for F32/F16/BF16) and what was wrong with it. */
struct loom_row_fault {
    int64_t index;     /* block or element index within the row */
    const char *field; /* "value", "scale d", "scale dmin", "minimum m" */
    const char *what;  /* "inf", "nan" */
};
/* 1 when the n_blocks blocks at row pass ggml_validate_row_data's rules for the type (finite values and
 * block scales), else 0 with *fault describing the first failure. Reads only the bytes the rule checks. */
typedef int (*loom_validate_fn)(const void *row, int64_t n_blocks, struct loom_row_fault *fault);

struct loom_type_traits {
    const char *name;          /* "Q4_K" */
    int64_t block_size;        /* elements per block */
    size_t type_size;          /* bytes per block */
    enum loom_type vec_dot_type; /* activation type this weight type is paired with */
    loom_to_float_fn to_float;   /* the scalar reference (no set has another); NULL for types loom cannot run */
    loom_from_float_fn quantize; /* weight quantization, reference path (no imatrix) */
    loom_validate_fn validate_row; /* NULL for Q8_1, a type ggml_validate_row_data rejects outright */
    loom_quantize_w_fn quantize_w; /* weight quantization with an importance matrix (llama.cpp's
                                    * quantize_<type>(..., quant_weights) path); NULL where the reference ignores
                                    * the weights (Q8_0, F16, ...) or loom has no such quantizer */
};

/* Traits of a type id, or NULL when loom does not know it (unknown ids are a format error upstream). */
const struct loom_type_traits *loom_type_traits(uint32_t type);
/* Validate n_rows rows of n elements each (n a multiple of the block size), back to back at data, with the
 * type's validate_row. Returns -1 when all pass, else the index of the first failing row with *fault
 * filled (a type without a validator fails at row 0, field "type", what "without a validation rule"). */
int64_t loom_type_validate_rows(uint32_t type, const void *data, int64_t n, int64_t n_rows,
                                struct loom_row_fault *fault);
/* "block 3 scale d is inf" / "element 5 is nan" / "type Q8_1 has no validation rule" into buf[cap]. */
void loom_row_fault_describe(uint32_t type, const struct loom_row_fault *fault, char *buf, size_t cap);
/* Where row `row` (counted over the whole tensor) of a tensor of n_dims dimensions with ne1 rows per matrix
 * lies, as messages name it, into buf[cap]: "row R", or for 3 or more dimensions (an expert tensor: matrices
 * of ne1 rows) "expert E row R" with R counted within expert E. */
void loom_row_where(uint32_t n_dims, int64_t ne1, int64_t row, char *buf, size_t cap);
/* Bytes of a row of n elements; 0 when n is not a multiple of the block size or the type is unknown. */
size_t loom_type_row_bytes(uint32_t type, int64_t n);

#endif
