/* imatrix.h — importance matrices for quantization: llama.cpp's llama-imatrix GGUF format (tools/imatrix; read as
 * common/imatrix-loader.cpp reads it) turned into the per-column weights tools/quantize/quantize.cpp hands
 * llama_model_quantize: for each weight tensor, one row of weights per expert (2-D tensors: one row). */
#ifndef LOOM_MODEL_IMATRIX_H
#define LOOM_MODEL_IMATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* The weights of one tensor: n_mat rows of n_per_row floats (n_mat = the expert count of a 3-D expert tensor,
 * else 1); row e weights the columns of expert e's matrix. */
struct loom_imatrix_entry {
    const char *name;      /* the weight tensor's name ("blk.0.ffn_down_exps.weight"), NUL-terminated */
    uint64_t n_per_row;    /* columns: the tensor's ne[0] */
    uint64_t n_mat;        /* rows of weights: the tensor's ne[2] */
    const float *weights;  /* [n_mat][n_per_row]: sum of squared activations / count, or 1 where count is 0 */
};

struct loom_imatrix {
    char *path;            /* as given to loom_imatrix_load (quantize.imatrix.file records it) */
    size_t n;              /* entries, sorted by name (bytewise) */
    struct loom_imatrix_entry *e;
    size_t n_datasets;     /* imatrix.datasets: the text files the activations came from */
    char **datasets;
    uint32_t chunk_count;  /* imatrix.chunk_count */
    uint32_t chunk_size;   /* imatrix.chunk_size (tokens per chunk) */
    char *names_;          /* storage of the entries' names and weights (one allocation each) */
    float *weights_;
};

/* Load the importance matrix GGUF at path (written by llama-imatrix). Each entry N is the pair of F32 tensors
 * "N.in_sum2" (sums of squared activations, n_mat * n_per_row values) and "N.counts" (n_mat activation counts,
 * rounded to integers as the reference does); weights = sum / count per expert row, 1 for a row whose count
 * is 0 (an expert the text never routed to), as llama-quantize computes them. Everything is checked before
 * anything is allocated for the weights; errors name the file and what was expected and found:
 * LOOM_E_IO (cannot open), LOOM_E_FORMAT for a file that is not GGUF (the legacy .dat format is not read),
 * general.type other than "imatrix", imatrix.datasets / chunk_count / chunk_size missing or of another type
 * (the reference refuses a file without them), no entries, an in_sum2 without its counts or the reverse, a
 * tensor that is not F32, no counts or a sum length that is not a multiple of the count length, and a NaN,
 * infinite or negative count or a NaN or infinite sum (the reference refuses non-finite weights);
 * LOOM_E_NOMEM. *out is set only on LOOM_OK; free with loom_imatrix_free. */
int loom_imatrix_load(const char *path, struct loom_imatrix **out, loom_error *err);
void loom_imatrix_free(struct loom_imatrix *m);

/* The entry for the weight tensor called name, or NULL (llama_model_quantize then quantizes it without). */
const struct loom_imatrix_entry *loom_imatrix_find(const struct loom_imatrix *m, const char *name);

#endif
