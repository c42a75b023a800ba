/* router.c — the mixture-of-experts router of one token (ops.h): softmax over the router logits, the top k
 * by the reference's argsort (libstdc++'s std::sort, ties included), and the selected weights normalized,
 * each step with the rounding points of llama.cpp's CPU backend (see ops.h for the op-by-op source; the softmax
 * passed in is the kernel set's, in its float-order profile: orders_haswell.h has haswell's). */
#include <math.h>

#include "kernels/ops.h"

/* ---- libstdc++'s std::sort on indices, compared by x[a] > x[b] --------------------------------------
 * The algorithm of bits/stl_algo.h and bits/stl_heap.h (introsort), written out for int32 indices so that
 * equal keys end in the same order as in the reference's ggml_compute_forward_argsort_f32. */

#define SORT_THRESHOLD 16 /* _S_threshold */

static inline int before(const float *x, int32_t a, int32_t b) { return x[a] > x[b]; }

static void swap_idx(int32_t *a, int32_t *b)
{
    int32_t t = *a;
    *a = *b;
    *b = t;
}

/* Move `val` down past the elements before `last` that it sorts before. libstdc++ has no lower bound check
 * here (the elements before always hold one that stops it); loom stops at lo too, which never happens for
 * keys that compare consistently and keeps a NaN key (whose comparisons are inconsistent) inside the array. */
static void unguarded_linear_insert(const float *x, int32_t *lo, int32_t *last)
{
    int32_t val = *last;
    int32_t *next = last - 1;
    while (next >= lo && before(x, val, *next)) {
        *last = *next;
        last = next;
        next--;
    }
    *last = val;
}

static void insertion_sort(const float *x, int32_t *first, int32_t *last)
{
    if (first == last)
        return;
    for (int32_t *i = first + 1; i != last; i++) {
        if (before(x, *i, *first)) {
            int32_t val = *i;
            for (int32_t *p = i; p != first; p--)
                *p = p[-1];
            *first = val;
        } else {
            unguarded_linear_insert(x, first, i);
        }
    }
}

/* Sift `value` from hole down to a leaf, then back up (std::__adjust_heap). */
static void adjust_heap(const float *x, int32_t *first, long hole, long len, int32_t value)
{
    long top = hole, child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (before(x, first[child], first[child - 1]))
            child--;
        first[hole] = first[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        first[hole] = first[child - 1];
        hole = child - 1;
    }
    long parent = (hole - 1) / 2;
    while (hole > top && before(x, first[parent], value)) {
        first[hole] = first[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    first[hole] = value;
}

/* std::__partial_sort(first, last, last): make_heap, then sort_heap. */
static void heap_sort(const float *x, int32_t *first, int32_t *last)
{
    long len = last - first;
    if (len >= 2)
        for (long parent = (len - 2) / 2;; parent--) {
            adjust_heap(x, first, parent, len, first[parent]);
            if (parent == 0)
                break;
        }
    while (last - first > 1) {
        last--;
        int32_t value = *last;
        *last = *first;
        adjust_heap(x, first, 0, last - first, value);
    }
}

/* Put the median of a, b, c at result (std::__move_median_to_first). */
static void median_to_first(const float *x, int32_t *result, int32_t *a, int32_t *b, int32_t *c)
{
    if (before(x, *a, *b)) {
        if (before(x, *b, *c))
            swap_idx(result, b);
        else if (before(x, *a, *c))
            swap_idx(result, c);
        else
            swap_idx(result, a);
    } else if (before(x, *a, *c)) {
        swap_idx(result, a);
    } else if (before(x, *b, *c)) {
        swap_idx(result, c);
    } else {
        swap_idx(result, b);
    }
}

/* Hoare partition of [first, last) around *pivot (std::__unguarded_partition; the bounds checks never
 * trigger for consistent keys, as in unguarded_linear_insert). */
static int32_t *unguarded_partition(const float *x, int32_t *first, int32_t *last, const int32_t *pivot)
{
    int32_t *lo = first, *hi = last;
    for (;;) {
        while (first < hi - 1 && before(x, *first, *pivot))
            first++;
        last--;
        while (last > lo && before(x, *pivot, *last))
            last--;
        if (!(first < last))
            return first;
        swap_idx(first, last);
        first++;
    }
}

static void introsort_loop(const float *x, int32_t *first, int32_t *last, int depth_limit)
{
    while (last - first > SORT_THRESHOLD) {
        if (depth_limit == 0) {
            heap_sort(x, first, last);
            return;
        }
        depth_limit--;
        int32_t *mid = first + (last - first) / 2;
        median_to_first(x, first, first + 1, mid, last - 1);
        int32_t *cut = unguarded_partition(x, first + 1, last, first);
        introsort_loop(x, cut, last, depth_limit);
        last = cut;
    }
}

void loom_ops_argsort_desc(int n, const float *x, int32_t *idx)
{
    for (int i = 0; i < n; i++)
        idx[i] = i;
    if (n <= 1)
        return;
    int lg = 0;
    while ((2L << lg) <= n)
        lg++;
    introsort_loop(x, idx, idx + n, 2 * lg);
    if (n > SORT_THRESHOLD) {
        insertion_sort(x, idx, idx + SORT_THRESHOLD);
        for (int32_t *i = idx + SORT_THRESHOLD; i != idx + n; i++)
            unguarded_linear_insert(x, idx, i);
    } else {
        insertion_sort(x, idx, idx + n);
    }
}

/* ---- the router ------------------------------------------------------------------------------------ */

/* ggml's MAX and MIN macros: a NaN operand yields the other one or the NaN as these comparisons do. */
static inline float ggml_max(float a, float b) { return a > b ? a : b; }
static inline float ggml_min(float a, float b) { return a < b ? a : b; }

void loom_ops_softmax_router(int n, float *p)
{
    float max = -INFINITY;
    for (int i = 0; i < n; i++)
        max = ggml_max(max, p[i]);
    double sum = 0.0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int l = 0; l < 16; l++)
            p[i + l] = loom_ops_expf_poly(p[i + l] - max);
        sum += (double)loom_ops_reduce16(p + i);
    }
    for (; i < n; i++) {
        p[i] = expf(p[i] - max);
        sum += (double)p[i];
    }
    float inv = (float)(1.0 / sum);
    for (i = 0; i < n; i++)
        p[i] *= inv;
}

void loom_ops_moe_route(void (*softmax)(int n, float *p), int n, int k, float *logits, int32_t *ids,
                        float *weights)
{
    int32_t order[LOOM_OPS_MAX_EXPERTS];
    softmax(n, logits);
    loom_ops_argsort_desc(n, logits, order);
    double sum = 0.0;
    for (int j = 0; j < k; j++) {
        ids[j] = order[j];
        weights[j] = logits[order[j]];
        sum += (double)weights[j];
    }
    float clamped = ggml_max(ggml_min((float)sum, INFINITY), 6.103515625e-5f);
    for (int j = 0; j < k; j++)
        weights[j] /= clamped;
}

void loom_ops_moe_group(int n_tok, int k, int n_expert, const int32_t *ids, int32_t *start, int32_t *perm,
                        int32_t *pos)
{
    int n = n_tok * k;
    for (int e = 0; e <= n_expert; e++)
        start[e] = 0;
    for (int i = 0; i < n; i++)
        start[ids[i] + 1]++;
    for (int e = 0; e < n_expert; e++)
        start[e + 1] += start[e];
    for (int i = 0; i < n; i++) /* start[e] becomes the next free position of expert e... */
        pos[i] = start[ids[i]]++;
    for (int e = n_expert; e > 0; e--) /* ...and then expert e's end: shift back */
        start[e] = start[e - 1];
    start[0] = 0;
    for (int i = 0; i < n; i++)
        perm[pos[i]] = i;
}
