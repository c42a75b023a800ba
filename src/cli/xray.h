/* xray.h — comparing loom's circuit edges with the reference engine's intermediate tensors for the same token ids
 * (xray.c): the engine behind `loom xray` and the divergence summaries of `loom certify`. */
#ifndef LOOM_CLI_XRAY_H
#define LOOM_CLI_XRAY_H

#include "cli/refengine.h"
#include "loom.h"

/* What to compare: the token ids (n_prompt evaluated as one batch, or one by one with per_token, then n_decode
 * ids one by one: given, or loom's greedy choices), the numerics of loom's session, the layers [layer_lo,
 * layer_hi] and the edges whose names match the fnmatch pattern (NULL: all). perturb (NULL: none) names an edge whose first value loom changes by
 * one ULP at position perturb_pos (-1: the edge's first row), a planted fault. */
struct xray_request {
    const int32_t *tokens; /* [n_prompt], then (when decode_given) the n_decode ids to decode */
    int n_prompt, n_decode;
    int decode_given; /* 0: each decoded id is loom's greedy choice */
    int per_token;
    enum loom_numerics numerics;
    enum loom_kv_type k_type; /* both engines' K cache type (--cache-type-k) */
    int n_threads;
    int layer_lo, layer_hi;
    const char *pattern;
    const char *perturb;
    int perturb_pos;
};
#define XRAY_ALL_LAYERS (1 << 30) /* layer_hi when every layer is compared */

/* One compared edge at one position. */
struct xray_row {
    int edge; /* index into the model's edge list (loom_model_edges) */
    int pos;
    int shape_ok;     /* the reference's row has the edge's width */
    int64_t n_diff;   /* elements whose bits differ */
    double max_abs;   /* largest |loom - reference| */
    double rmse;
    uint32_t max_ulp; /* largest distance in units in the last place (floats) */
};

struct xray_result {
    loom_edge *edges; /* the model's edges */
    int n_edges;
    struct xray_row *rows; /* in comparison order: position, then layer, then the edge's place */
    int n_rows, cap_rows;
    int first_div, last_exact; /* indices into rows, -1 when none */
    int n_missing;             /* selected edges the reference never showed */
    char missing[8][48];       /* the first few of them */
};

/* Evaluate req's tokens in loom (model m) and in the reference (rm, opened r) and compare every selected edge
 * at every position both represent (state edges only at the ends of steps both engines take). Returns LOOM_OK
 * with *out filled (free with xray_result_free), or an error. */
int xray_compare(const loom_model *m, const struct loom_ref *r, struct loom_ref_model *rm,
                 const struct xray_request *req, struct xray_result *out, loom_error *err);
void xray_result_free(struct xray_result *res);

/* selected[i] (of edges[n], the model's list) = whether q compares edge i: its layer within [layer_lo, layer_hi]
 * (edges outside the layers always), its name matching the pattern, or the edge q perturbs. LOOM_OK, or
 * LOOM_E_ARG naming the problem: layers the model lacks, a pattern that selects nothing, a --perturb edge that is
 * not there, holds int32, or a state edge at a position inside the batched prompt. */
int xray_select(const struct xray_request *q, const loom_edge *edges, int n, char *selected, loom_error *err);

/* One line describing row i of res ("blk.3.gdn.conv pos 5: 12 of 1536 differ, max |d| 1.2e-07, ..."). */
void xray_describe(const struct xray_result *res, int i, char *buf, size_t cap);

#endif
