/* expert_cache.h — routed experts streamed from the model file under a memory budget (loom_model_params
 * .mem_budget): where each expert's matrices lie in the file, a set of cache slots each holding one expert of
 * one layer (its gate and up, or fused gate_up, and down matrices), filled by explicit reads (io_uring, O_DIRECT
 * where the file system allows, pread when io_uring is unavailable), pinned while a step computes with them and
 * otherwise evicted least frequently needed by decode steps (then least recently used; a prefill's reads first:
 * evict_before in expert_cache.c). The cache is the one mutable part of a loaded model: a step holds its
 * lock from loom_expert_cache_begin to loom_expert_cache_end. */
#ifndef LOOM_MODEL_EXPERT_CACHE_H
#define LOOM_MODEL_EXPERT_CACHE_H

#include <stdint.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "kernels/matmul.h"
#include "loom.h"

struct loom_model;
struct loom_expert_cache;

/* Matrices of one expert per layer: gate, up, down (separate) or gate_up, down (fused). */
#define LOOM_EXPERT_MATS 3

/* Set up streaming for model m, bound and repacked except its expert tensors (their data pointers NULL): open
 * the file's parts, record each expert tensor's file location, hold the dense part in anonymous memory
 * (loom_gguf_hold; dense = *dense_bytes besides the repacked copies) and check the budget: the dense part, the
 * repacked copies, LOOM_MEM_RESERVE and n_expert_used slots must fit, else LOOM_E_RANGE with the numbers. A dense
 * model (no routed experts) gets no slot and reads nothing: its whole weight set is the dense part, and the budget
 * bounds it, the reserve and the sessions. LOOM_OK, LOOM_E_RANGE, LOOM_E_IO, LOOM_E_NOMEM, LOOM_E_ARG (not opened
 * from a file), LOOM_E_FORMAT (an expert tensor loom cannot stream, named). */
int loom_expert_cache_open(struct loom_model *m, uint64_t budget, uint64_t repacked_bytes,
                           struct loom_expert_cache **out, loom_error *err);
void loom_expert_cache_free(struct loom_expert_cache *c);

/* Sessions' arenas count against the budget: reserve bytes (LOOM_E_RANGE with the numbers when what is left
 * would not hold n_expert_used slots; slots beyond the new capacity are freed) and give them back. */
int loom_expert_cache_reserve(struct loom_expert_cache *c, uint64_t bytes, loom_error *err);
void loom_expert_cache_unreserve(struct loom_expert_cache *c, uint64_t bytes);

/* One expert of a step, ready: its matrices (gate/up or gate_up first, down last; n_mats of them) with data in
 * its cache slot, which stays pinned until loom_expert_cache_done. */
struct loom_expert_ready {
    int32_t expert;
    int n_mats;
    struct loom_weight mats[LOOM_EXPERT_MATS];
};

/* A step of layer il that needs experts ids[n] (distinct, each < n_expert): takes the cache lock, pins the ones
 * held and issues reads for the others as slots allow. scan: a prefill-sized step (its tokens route more pairs
 * than half the layer's experts), whose needs are not counted and whose reads are not promoted. */
void loom_expert_cache_begin(struct loom_expert_cache *c, uint32_t il, const int32_t *ids, int n, int scan);
/* Within a step: read ahead experts ids[n] of layer il (a prediction for the next layer's step: P1) into slots
 * no step needs now, as far as free or evictable slots and the queue allow, behind the step's own reads. Their
 * reads may stay in flight after loom_expert_cache_end; the next step takes those it needs (hits) and makes the
 * others stale (reads the kernel has not started are cancelled, experts in are evicted first; their bytes count
 * as wasted). Nothing with pread (it would block the step) or when P1 is not allowed (set_read_ahead). */
void loom_expert_cache_prefetch(struct loom_expert_cache *c, uint32_t il, const int32_t *ids, int n);

/* The next expert of the step whose bytes are in (held ones first, then in order of arrival): 1 with *r
 * filled, 0 when every expert of the step was handed out, or LOOM_E_IO (err names the expert, the tensor, the
 * file and what failed; the failed read's slot is not published; a prediction's failed read is read again for
 * the step instead), LOOM_E_INTERNAL (no slot: every one pinned). Blocks while reads are in flight. */
int loom_expert_cache_next(struct loom_expert_cache *c, struct loom_expert_ready *r, loom_error *err);
/* The step is done with expert e's slot (it may be evicted from now on). */
void loom_expert_cache_done(struct loom_expert_cache *c, int32_t e);
/* End the step (also after an error): waits for the step's reads still in flight (frees the slots of those that
 * failed), unpins, releases the lock. */
void loom_expert_cache_end(struct loom_expert_cache *c);

/* Add tensor `name`'s file bytes to st (read in blocks through a descriptor of its own, pages dropped after; a
 * tensor the file lacks adds nothing, a failed read adds a marker, so the digest cannot match a whole file's). */
void loom_expert_cache_hash_tensor(struct loom_expert_cache *c, const char *name, XXH3_state_t *st);

void loom_expert_cache_stats(struct loom_expert_cache *c, loom_expert_stats *out);

/* Tests only: make the n-th read from now (1 = the next) fail: with errno_value (EIO, ...) or, for 0, as a short
 * read; n = 0 clears. Force pread instead of io_uring (nonzero). */
void loom_expert_cache_inject_fault(struct loom_expert_cache *c, int n, int errno_value);
void loom_expert_cache_force_pread(struct loom_expert_cache *c, int on);
/* Which reads ahead are allowed (io_uring only): predictions (loom_expert_cache_prefetch, P1), warming from
 * history (P2, between steps when no read is in flight), both or none (loom_model_params.read_ahead). */
void loom_expert_cache_set_read_ahead(struct loom_expert_cache *c, enum loom_read_ahead r);
/* Whether loom_expert_cache_prefetch would read anything (predictions allowed, io_uring in use): when not, a
 * prediction need not be computed. */
int loom_expert_cache_prefetching(const struct loom_expert_cache *c);

#endif
