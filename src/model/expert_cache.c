/* expert_cache.c — the expert cache of a model loaded with a memory budget (expert_cache.h): the budget's
 * accounting, the slots and their eviction order (evict_before), a step's protocol (held experts first, then
 * reads in order of arrival, so each expert's compute starts as soon as its bytes are in), the reads ahead (P1
 * predictions and their staleness, P2 warming from history), and the reads themselves through io_uring
 * (liburing) or pread, with O_DIRECT where the file system takes it. A dense model's cache has no slot: only the
 * budget's accounting. */
#include "model/expert_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kernels/ops.h"
#include "model/model.h"
#include "util/error.h"

#define ALIGN 4096u      /* O_DIRECT offsets, lengths and buffers: the largest logical block size in use */
#define QUEUE_DEPTH 64   /* io_uring entries: 21 experts of 3 matrices in flight at once */
#define LAT_BUCKETS 512  /* latency histogram: 8 buckets per power of two of nanoseconds */

enum { SLOT_FREE, SLOT_LOADING, SLOT_READY };
enum { STEP, AHEAD_PREDICTED, AHEAD_WARM }; /* why an expert is read: P0, P1, P2 */
enum { ALLOW_P1 = 1, ALLOW_P2 = 2 };         /* the reads ahead allowed (loom_model_params.read_ahead) */
#define CANCEL_TAG UINT64_MAX /* the user data of a cancel request's own completion */

/* Where expert 0 of one expert tensor of a layer lies: the part, the file offset, the stride. */
struct mat_src {
    uint32_t part;
    uint64_t offset;
    const struct loom_experts *x; /* the layer's binding (type and shape) */
    char name[128];
};

struct layer_src {
    int n_mats;
    struct mat_src mats[LOOM_EXPERT_MATS];
};

struct slot {
    unsigned char *buf;  /* slot_bytes, ALIGN aligned */
    int32_t key;         /* il * n_expert + e, or -1 */
    int state;
    int pinned;
    int pending;         /* reads in flight */
    int failed;          /* one of its reads failed (1), or was cancelled (2) */
    int wanted;          /* the current step needs it (hand it out when its reads are in) */
    int ahead;           /* read ahead (AHEAD_PREDICTED, AHEAD_WARM) and not needed by a step since, or 0 */
    int cancelling;      /* a stale prediction whose reads were asked to be cancelled while in flight */
    int reported;        /* a failed read of it filled the step's fault */
    int64_t last_use;    /* eviction order, least first: a clock tick of its last use in a decode-sized step;
                          * read for a scan-sized step (prefill), minus that read's scan tick (see begin) */
    uint64_t issued_ns;
    size_t data_off[LOOM_EXPERT_MATS]; /* each matrix's bytes in buf */
};

struct loom_expert_cache {
    pthread_mutex_t lock;
    const struct loom_model *m;
    uint32_t n_layer, n_expert, n_used;
    struct layer_src *layers;
    uint32_t n_parts;
    int *fd;            /* per part: the reads' descriptor (O_DIRECT when direct) */
    char **path;        /* per part, for messages */
    int direct;
    struct io_uring ring;
    int uring;
    size_t slot_bytes, region[LOOM_EXPERT_MATS]; /* region i of a slot holds matrix i with its alignment */
    uint64_t budget, dense, reserved;
    int n_alloc, max_slots; /* slots in use (slots[0, n_alloc)); the most the budget can ever give */
    int n_faulted;          /* slots whose memory may be resident (faulted in at load, given back by shrink) */
    struct slot *slots;     /* [max_slots] */
    unsigned char *arena;   /* max_slots * slot_bytes reserved (touched as slots come into use), huge pages */
    size_t arena_bytes;
    int32_t *where;     /* [n_layer * n_expert]: the slot holding it, or -1 */
    uint32_t *needs;    /* [n_layer * n_expert]: decode-sized steps that needed it since load (LFU) */
    int64_t clock, scan_clock;
    int scan;           /* the step is prefill-sized (loom_expert_cache_begin): its reads are not promoted */
    /* the step */
    uint32_t il;
    int32_t queued[LOOM_MAX_EXPERTS]; /* experts still to read, in the order asked */
    int n_queued, next_queued;
    int32_t ready[LOOM_MAX_EXPERTS];  /* experts in, not yet handed out */
    int n_ready, next_ready;
    int in_flight;      /* reads */
    int wanted_loading; /* slots of the step's experts whose reads are in flight */
    int read_ahead;     /* ALLOW_P1, ALLOW_P2 (io_uring only: pread would block the step) */
    int broken;         /* the errno with which the ring itself failed: no read can be trusted to land */
    uint64_t busy_since;
    /* faults for tests */
    int fault_in, fault_errno, force_pread;
    /* pread completions (no io_uring): res per user_data, in submission order */
    struct { uint64_t user; int res; } done_q[QUEUE_DEPTH];
    int n_done_q;
    loom_expert_stats st;
    uint64_t lat[LAT_BUCKETS];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void wait_one(struct loom_expert_cache *c, loom_error *fault);

/* The bytes of one expert of layer il (all its matrices). */
static uint64_t expert_bytes(const struct loom_expert_cache *c, uint32_t il)
{
    uint64_t b = 0;
    for (int i = 0; i < c->layers[il].n_mats; i++)
        b += c->layers[il].mats[i].x->expert_bytes;
    return b;
}

/* ---- setting up ----------------------------------------------------------------------------------- */

/* Record layer il's expert tensors (the weight table's expert rows the file has, in table order) and make
 * the region each needs in a slot (its bytes, aligned reads included). */
static int record_layer(struct loom_expert_cache *c, struct loom_model *m, uint32_t il, loom_error *err)
{
    struct layer_src *ls = &c->layers[il];
    for (int i = 0; i < m->arch->n_weights; i++) {
        const struct loom_weight_row *r = &m->arch->weights[i];
        if (!r->experts || !(r->kinds & (1u << m->layers[il].kind)))
            continue;
        struct loom_experts *x = (struct loom_experts *)(void *)((char *)&m->layers[il] + r->field);
        if (!x->n_expert)
            continue;
        char name[128];
        snprintf(name, sizeof name, "blk.%u.%s", il, r->name);
        const struct loom_gguf_tensor *t = loom_gguf_find_tensor(m->gguf, name);
        if (ls->n_mats >= LOOM_EXPERT_MATS || !t)
            return loom_errorf(err, LOOM_E_INTERNAL, "expert cache: layer %u's expert tensors", il);
        struct mat_src *s = &ls->mats[ls->n_mats];
        *s = (struct mat_src){t->part, m->gguf->parts[t->part].data_offset + t->offset, x, ""};
        snprintf(s->name, sizeof s->name, "%s", name);
        size_t need = round_up(x->expert_bytes + ALIGN, ALIGN) + ALIGN;
        if (need > c->region[ls->n_mats])
            c->region[ls->n_mats] = need;
        ls->n_mats++;
        x->w.data = NULL; /* read only through the cache */
        x->w.rows = NULL;
    }
    const struct loom_experts *gate = &m->layers[il].ffn_gate_exps, *up = &m->layers[il].ffn_up_exps;
    uint32_t vg = loom_type_traits(gate->w.type)->vec_dot_type, vu = loom_type_traits(up->w.type)->vec_dot_type;
    if (gate->n_expert && up->n_expert && vg != vu) /* one gathered copy of the activations serves both */
        return loom_errorf(err, LOOM_E_FORMAT, "blk.%u.ffn_up_exps.weight: streaming experts expects the gate and up "
                           "experts to take activations alike, found %s (ffn_gate_exps: %s); load without a memory "
                           "budget", il, loom_type_traits(vu)->name, loom_type_traits(vg)->name);
    return LOOM_OK;
}

/* The bytes at the start of tensor data `data` that a repacked copy replaces (its full groups of 16 rows), or 0. */
static uint64_t repacked_prefix(const struct loom_model *m, const void *data)
{
    const struct loom_weight *w = &m->output;
    if (w->layout == LOOM_WEIGHT_X16 && w->rows == data)
        return (uint64_t)(w->n_out / 16) * 16 * w->row_bytes;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        for (int i = 0; i < m->arch->n_weights; i++) {
            const struct loom_weight_row *r = &m->arch->weights[i];
            if (r->vector || r->experts)
                continue;
            w = loom_layer_matrix(&m->layers[il], r);
            if (w->layout == LOOM_WEIGHT_X16 && w->rows == data)
                return (uint64_t)(w->n_out / 16) * 16 * w->row_bytes;
        }
    return 0;
}

/* The file ranges of part `part` of model m that stay held: its metadata and every tensor except the routed
 * experts and the full groups of repacked matrices (their copies are in the model's store; the tail rows stay). */
static size_t dense_ranges(const struct loom_model *m, uint32_t part, struct loom_byte_range *keep)
{
    const struct loom_gguf *g = m->gguf;
    const struct loom_gguf_part *p = &g->parts[part];
    size_t k = 0;
    keep[k++] = (struct loom_byte_range){0, p->data_offset};
    for (uint64_t i = p->first_tensor; i < p->first_tensor + p->n_tensors; i++) {
        const struct loom_gguf_tensor *t = &g->tensors[i];
        static const char suffix[] = "_exps.weight"; /* the routed expert tensors (the weight table's names) */
        size_t ls = sizeof suffix - 1;
        if (t->name.len > ls && !memcmp(t->name.ptr + t->name.len - ls, suffix, ls))
            continue;
        uint64_t begin = p->data_offset + t->offset, end = begin + t->nbytes;
        begin += repacked_prefix(m, t->data);
        if (end > begin)
            keep[k++] = (struct loom_byte_range){begin, end};
    }
    return k;
}

/* Open part i's file for reads (O_DIRECT when the file system takes it) and hold its dense part. */
static int open_part(struct loom_expert_cache *c, struct loom_model *m, uint32_t i, loom_error *err)
{
    const char *path = m->gguf->parts[i].path;
    if (!path)
        return loom_errorf(err, LOOM_E_ARG, "mem budget: expected a model opened from a file, found a buffer");
    c->path[i] = strdup(path);
    c->fd[i] = open(path, O_RDONLY | O_CLOEXEC | (c->direct ? O_DIRECT : 0));
    if (c->fd[i] < 0 && c->direct) {
        c->direct = 0; /* the file system refuses O_DIRECT: buffered reads, their pages dropped */
        for (uint32_t j = 0; j < i; j++) {
            close(c->fd[j]);
            c->fd[j] = open(c->path[j], O_RDONLY | O_CLOEXEC);
        }
        c->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (c->fd[i] < 0 || !c->path[i])
        return loom_errorf(err, LOOM_E_IO, "mem budget: opening %s for reads: %s", path, strerror(errno));
    const struct loom_gguf_part *p = &m->gguf->parts[i];
    struct loom_byte_range *keep = malloc(sizeof *keep * (p->n_tensors + 1));
    if (!keep)
        return loom_errorf(err, LOOM_E_NOMEM, "mem budget: allocating the held ranges failed");
    size_t n = dense_ranges(m, i, keep);
    int plain = open(path, O_RDONLY | O_CLOEXEC); /* holding reads unaligned ranges */
    uint64_t held = 0;
    int rc = plain < 0 ? loom_errorf(err, LOOM_E_IO, "mem budget: opening %s: %s", path, strerror(errno))
                       : loom_gguf_hold(m->gguf, i, plain, keep, n, &held, err);
    if (plain >= 0)
        close(plain);
    free(keep);
    c->dense += held;
    return rc;
}

static void slot_layout(struct loom_expert_cache *c)
{
    c->slot_bytes = 0;
    for (int i = 0; i < LOOM_EXPERT_MATS; i++)
        c->slot_bytes += c->region[i];
}

/* Slots the budget leaves now (negative: the fixed part alone exceeds it). */
static int64_t capacity(const struct loom_expert_cache *c)
{
    uint64_t fixed = c->dense + LOOM_MEM_RESERVE + c->reserved;
    if (fixed > c->budget)
        return -1;
    if (!c->slot_bytes) /* a dense model: no expert to hold */
        return 0;
    uint64_t n = (c->budget - fixed) / c->slot_bytes;
    return n > INT32_MAX ? INT32_MAX : (int64_t)n;
}

/* The budget refused, `when`, with its parts in MiB to 0.1 (the least that fits rounded up, the budget down);
 * `extra` session bytes beyond those reserved (in doubles: no sum wraps). At load the sessions are still to come. */
static int refuse(const struct loom_expert_cache *c, const char *when, uint64_t extra, loom_error *err)
{
    double mb = 1048576.0, sessions = ((double)c->reserved + (double)extra) / mb;
    double need = (double)c->dense / mb + (double)LOOM_MEM_RESERVE / mb + sessions +
                  c->n_used * (double)c->slot_bytes / mb;
    double up = ceil(need * 10) / 10;
    char found[32], experts[96]; /* under 1 MiB in bytes: 0.0 MiB would hide what was given */
    if (c->budget < 1048576)
        snprintf(found, sizeof found, "%llu bytes", (unsigned long long)c->budget);
    else
        snprintf(found, sizeof found, "%.1f MiB", floor((double)c->budget / mb * 10) / 10);
    if (c->n_expert)
        snprintf(experts, sizeof experts, " + one step's %u experts of %.2f MiB each", c->n_used,
                 (double)c->slot_bytes / mb);
    else
        snprintf(experts, sizeof experts, "; a dense model: every weight is in the dense part, nothing streams");
    return loom_errorf(err, LOOM_E_RANGE, "memory budget %s: expected at least %.1f MiB (dense part %.1f MiB + process "
                       "reserve %.0f MiB + sessions %.1f MiB%s), found %s%s", when, up, (double)c->dense / mb,
                       (double)LOOM_MEM_RESERVE / mb, sessions, experts, found,
                       extra || c->reserved ? "" : "; every session then adds its arena and checkpoint budget");
}

int loom_expert_cache_open(struct loom_model *m, uint64_t budget, uint64_t repacked_bytes,
                           struct loom_expert_cache **out, loom_error *err)
{
    *out = NULL;
    struct loom_expert_cache *c = calloc(1, sizeof *c);
    if (!c)
        return loom_errorf(err, LOOM_E_NOMEM, "mem budget: allocating the expert cache failed");
    *out = c;
    pthread_mutex_init(&c->lock, NULL);
    c->m = m;
    c->n_layer = m->hp.n_layer, c->n_expert = m->hp.n_expert, c->n_used = m->hp.n_expert_used;
    c->budget = budget;
    c->dense = repacked_bytes;
    c->direct = 1;
    c->n_parts = m->gguf->n_parts;
    c->layers = calloc(c->n_layer, sizeof *c->layers);
    c->fd = malloc(sizeof *c->fd * c->n_parts);
    for (uint32_t i = 0; c->fd && i < c->n_parts; i++)
        c->fd[i] = -1;
    c->path = calloc(c->n_parts, sizeof *c->path);
    size_t n_keys = (size_t)c->n_layer * c->n_expert, n_alloc = n_keys ? n_keys : 1; /* a dense model: none */
    c->where = malloc(sizeof *c->where * n_alloc);
    c->needs = calloc(n_alloc, sizeof *c->needs);
    if (!c->layers || !c->fd || !c->path || !c->where || !c->needs)
        return loom_errorf(err, LOOM_E_NOMEM, "mem budget: allocating the expert cache's tables failed");
    for (size_t i = 0; i < n_keys; i++)
        c->where[i] = -1;
    int rc = LOOM_OK;
    for (uint32_t il = 0; il < c->n_layer && !rc; il++)
        rc = record_layer(c, m, il, err);
    for (uint32_t i = 0; i < c->n_parts && !rc; i++)
        rc = open_part(c, m, i, err);
    if (rc)
        return rc;
    slot_layout(c);
    int64_t max = capacity(c);
    if (max < c->n_used)
        return refuse(c, "at load", 0, err);
    if (!c->n_expert) /* a dense model: its whole weight set held as the dense part, no slot, nothing to read */
        return LOOM_OK;
    /* the slots' memory: reserved once, touched as slots come into use; huge pages, so that the first read into a
     * slot faults in one page rather than 500 (zeroing them was most of a short run's time) */
    if (max > (int64_t)n_keys) /* more would never be used */
        max = (int64_t)n_keys;
    c->max_slots = (int)max;
    c->arena_bytes = round_up((size_t)max * c->slot_bytes, (size_t)2 << 20);
    c->arena = mmap(NULL, c->arena_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    c->slots = calloc((size_t)max, sizeof *c->slots);
    if (c->arena == MAP_FAILED || !c->slots) {
        c->arena = c->arena == MAP_FAILED ? NULL : c->arena;
        return loom_errorf(err, LOOM_E_NOMEM, "mem budget: reserving %zu bytes for %lld expert slots failed",
                           c->arena_bytes, (long long)max);
    }
    madvise(c->arena, c->arena_bytes, MADV_HUGEPAGE); /* advice only */
    /* fault the slots in now: else the kernel zeroes each slot's pages inside the first read into it (O_DIRECT pins
     * them), on the computing thread, a third of a short run's time. Advice only: without it they fault in later */
    madvise(c->arena, c->arena_bytes, MADV_POPULATE_WRITE);
    c->n_faulted = c->max_slots;
    c->uring = io_uring_queue_init((unsigned)QUEUE_DEPTH, &c->ring, 0) == 0;
    struct io_uring_probe *probe = c->uring ? io_uring_get_probe_ring(&c->ring) : NULL;
    if (c->uring && (!probe || !io_uring_opcode_supported(probe, IORING_OP_READ))) { /* before Linux 5.6 */
        io_uring_queue_exit(&c->ring);
        c->uring = 0;
    }
    if (probe)
        io_uring_free_probe(probe);
    c->read_ahead = ALLOW_P1;
    c->st.io_uring = c->uring;
    return LOOM_OK;
}

void loom_expert_cache_free(struct loom_expert_cache *c)
{
    if (!c)
        return;
    loom_error ignored = {0};
    while (c->n_done_q || (c->in_flight && !c->broken)) /* predictions' reads must land before their slots go */
        wait_one(c, &ignored);
    if (c->uring)
        io_uring_queue_exit(&c->ring);
    for (uint32_t i = 0; c->fd && i < c->n_parts; i++)
        if (c->fd[i] >= 0)
            close(c->fd[i]);
    for (uint32_t i = 0; c->path && i < c->n_parts; i++)
        free(c->path[i]);
    if (c->arena && !c->in_flight) /* with a failed ring and reads in flight, the kernel may still write there */
        munmap(c->arena, c->arena_bytes);
    pthread_mutex_destroy(&c->lock);
    free(c->slots);
    free(c->where);
    free(c->needs);
    free(c->path);
    free(c->fd);
    free(c->layers);
    free(c);
}

/* Free unpinned slots past the capacity (the last allocated first, evicting what they hold). */
static void shrink(struct loom_expert_cache *c)
{
    int64_t cap = capacity(c);
    while (c->n_alloc > cap && c->n_alloc > 0 && !c->slots[c->n_alloc - 1].pinned &&
           c->slots[c->n_alloc - 1].state != SLOT_LOADING) {
        struct slot *s = &c->slots[--c->n_alloc];
        if (s->key >= 0)
            c->where[s->key] = -1;
        if (s->ahead)
            c->st.bytes_wasted += expert_bytes(c, (uint32_t)s->key / c->n_expert);
        *s = (struct slot){.key = -1};
    }
    int keep = cap > c->n_alloc ? (int)cap : c->n_alloc;
    if (c->n_faulted > keep) { /* their memory goes back; the addresses stay reserved */
        size_t at = (size_t)keep * c->slot_bytes;
        madvise(c->arena + at, (size_t)(c->n_faulted - keep) * c->slot_bytes, MADV_DONTNEED);
        c->n_faulted = keep;
    }
}

int loom_expert_cache_reserve(struct loom_expert_cache *c, uint64_t bytes, loom_error *err)
{
    pthread_mutex_lock(&c->lock);
    int rc = LOOM_OK;
    if (bytes > c->budget - c->reserved) { /* c->reserved <= c->budget always: the sum cannot wrap */
        rc = refuse(c, "with this session", bytes, err);
    } else {
        c->reserved += bytes;
        if (capacity(c) < c->n_used) {
            c->reserved -= bytes;
            rc = refuse(c, "with this session", bytes, err);
        } else {
            while (c->n_done_q || (c->in_flight && !c->broken)) /* predictions land before slots may go */
                wait_one(c, NULL);
            shrink(c);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void loom_expert_cache_unreserve(struct loom_expert_cache *c, uint64_t bytes)
{
    pthread_mutex_lock(&c->lock);
    c->reserved -= bytes;
    pthread_mutex_unlock(&c->lock);
}

/* ---- slots ---------------------------------------------------------------------------------------- */

/* Whether slot a goes before slot b in the eviction order: fewer needs by decode-sized steps (LFU), then the
 * older last use (scan reads, with negative ticks, first; bench_expert_cache measured the policies). */
static int evict_before(const struct loom_expert_cache *c, const struct slot *a, const struct slot *b)
{
    uint32_t na = c->needs[a->key], nb = c->needs[b->key];
    return na < nb || (na == nb && a->last_use < b->last_use);
}

/* A free slot, else the unpinned ready one first in the eviction order (evict_before), passing over experts read
 * ahead and not needed since when spare_ahead; -1 when none. */
static int victim(const struct loom_expert_cache *c, int spare_ahead)
{
    int best = -1;
    for (int i = 0; i < c->n_alloc; i++) {
        const struct slot *s = &c->slots[i];
        if (s->state == SLOT_FREE)
            return i;
        if (s->state == SLOT_READY && !s->pinned && !(spare_ahead && s->ahead) &&
            (best < 0 || evict_before(c, s, &c->slots[best])))
            best = i;
    }
    return best;
}

/* Slot si emptied for a read: what it held is no longer held. */
static int evict(struct loom_expert_cache *c, int si)
{
    struct slot *s = si < 0 ? NULL : &c->slots[si];
    if (s && s->state == SLOT_READY) {
        if (s->ahead) /* read ahead, and no step needed it */
            c->st.bytes_wasted += expert_bytes(c, (uint32_t)s->key / c->n_expert);
        c->where[s->key] = -1;
        s->key = -1, s->state = SLOT_FREE, s->ahead = 0;
    }
    return si;
}

/* A new slot while the capacity allows. */
static int new_slot(struct loom_expert_cache *c)
{
    if (c->n_alloc >= capacity(c) || c->n_alloc >= c->max_slots)
        return -1;
    c->slots[c->n_alloc] = (struct slot){.buf = c->arena + (size_t)c->n_alloc * c->slot_bytes, .key = -1};
    if (c->n_faulted <= c->n_alloc) /* faulted in by its first read */
        c->n_faulted = c->n_alloc + 1;
    return c->n_alloc++;
}

/* A slot to read a step's expert or a prediction into: a new one, else a free one, else the first in the eviction
 * order; -1 when every slot is pinned or loading. */
static int take_slot(struct loom_expert_cache *c)
{
    int si = new_slot(c);
    return si >= 0 ? si : evict(c, victim(c, 0));
}

/* A slot to warm an expert that decode steps needed `need` times into: a new or free one, else the first in the
 * eviction order if that expert was needed less than half as often (a margin, so that counts that differ by
 * chance do not trade places back and forth); never one read ahead and not needed since. -1: none. */
static int warm_slot(struct loom_expert_cache *c, uint32_t need)
{
    int si = new_slot(c);
    if (si >= 0)
        return si;
    si = victim(c, 1);
    if (si < 0 || (c->slots[si].state == SLOT_READY && 2 * (uint64_t)c->needs[c->slots[si].key] >= need))
        return -1;
    return evict(c, si);
}

/* ---- reads ---------------------------------------------------------------------------------------- */

/* The file range a read of matrix `mat` of expert e covers, and where its data lands in the slot. */
static void read_range(const struct loom_expert_cache *c, uint32_t il, int32_t e, int mat, uint64_t *off,
                       size_t *len, size_t *pad)
{
    const struct mat_src *s = &c->layers[il].mats[mat];
    uint64_t begin = s->offset + (uint64_t)e * s->x->expert_bytes, end = begin + s->x->expert_bytes;
    uint64_t a0 = c->direct ? begin / ALIGN * ALIGN : begin, a1 = c->direct ? round_up(end, ALIGN) : end;
    *off = a0, *len = (size_t)(a1 - a0), *pad = (size_t)(begin - a0);
}

static uint64_t user_data(int slot, int mat) { return (uint64_t)slot * LOOM_EXPERT_MATS + (uint64_t)mat; }

/* The result of one read as the fault injection has it: an errno, or one byte short of the `need` bytes. */
static int injected(struct loom_expert_cache *c, int res, size_t need)
{
    if (c->fault_in > 0 && --c->fault_in == 0)
        return c->fault_errno ? -c->fault_errno : (int)need - 1;
    return res;
}

/* A submission queue entry: when the queue is full, what is there is submitted and the freed entry taken. */
static struct io_uring_sqe *take_sqe(struct loom_expert_cache *c)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
    if (!sqe) {
        io_uring_submit(&c->ring);
        sqe = io_uring_get_sqe(&c->ring);
    }
    return sqe;
}

static void submit_read(struct loom_expert_cache *c, int slot, int mat, int part, void *buf, size_t len, uint64_t off)
{
    if (c->in_flight++ == 0)
        c->busy_since = now_ns();
    if (c->uring && !c->force_pread) {
        struct io_uring_sqe *sqe = take_sqe(c);
        io_uring_prep_read(sqe, c->fd[part], buf, (unsigned)len, off);
        io_uring_sqe_set_data64(sqe, user_data(slot, mat));
        return;
    }
    size_t got = 0;
    int res = 0;
    while (got < len) {
        ssize_t r = pread(c->fd[part], (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            res = r < 0 ? -errno : (int)got;
            break;
        }
        got += (size_t)r;
        res = (int)got;
    }
    c->done_q[c->n_done_q].user = user_data(slot, mat);
    c->done_q[c->n_done_q++].res = res;
}

/* Issue the reads of expert e of layer il into a slot, for the step (kind STEP) or ahead (AHEAD_PREDICTED,
 * AHEAD_WARM); 0 when no slot is free or the queue is full. */
static int issue(struct loom_expert_cache *c, uint32_t il, int32_t e, int kind)
{
    if (c->n_done_q + LOOM_EXPERT_MATS > QUEUE_DEPTH || c->in_flight + LOOM_EXPERT_MATS > QUEUE_DEPTH)
        return 0;
    uint32_t key = il * c->n_expert + (uint32_t)e;
    int si = kind == AHEAD_WARM ? warm_slot(c, c->needs[key]) : take_slot(c);
    if (si < 0)
        return 0;
    int wanted = kind == STEP;
    struct slot *s = &c->slots[si];
    const struct layer_src *ls = &c->layers[il];
    s->key = (int32_t)key;
    c->where[s->key] = si;
    s->state = SLOT_LOADING, s->pinned = wanted, s->wanted = wanted, s->ahead = kind, s->failed = 0;
    s->pending = ls->n_mats;
    s->issued_ns = now_ns();
    s->last_use = c->scan && wanted ? -++c->scan_clock : ++c->clock;
    c->wanted_loading += wanted;
    size_t at = 0;
    for (int i = 0; i < ls->n_mats; i++) {
        uint64_t off;
        size_t len, pad;
        read_range(c, il, e, i, &off, &len, &pad);
        s->data_off[i] = at + pad;
        submit_read(c, si, i, (int)ls->mats[i].part, s->buf + at, len, off);
        at += c->region[i];
    }
    if (c->uring && !c->force_pread)
        io_uring_submit(&c->ring);
    if (kind == AHEAD_PREDICTED) {
        c->st.prefetches++;
        c->st.bytes_prefetched += expert_bytes(c, il);
    } else if (kind == AHEAD_WARM) {
        c->st.warms++;
        c->st.bytes_warmed += expert_bytes(c, il);
    }
    return 1;
}

static void record_latency(struct loom_expert_cache *c, uint64_t ns)
{
    int exp;
    double frac = frexp((double)(ns ? ns : 1), &exp); /* ns = frac * 2^exp, frac in [0.5, 1) */
    int b = exp * 8 + (int)((frac - 0.5) * 16);
    c->lat[b < 0 ? 0 : b >= LAT_BUCKETS ? LAT_BUCKETS - 1 : b]++;
}

/* Account one completed read (res: bytes or -errno); the slot's expert becomes ready when its last read is in,
 * and is handed to the step when the step wants it. A failed read of a wanted expert fills *fault. */
static void complete(struct loom_expert_cache *c, uint64_t user, int res, loom_error *fault)
{
    int si = (int)(user / LOOM_EXPERT_MATS), mat = (int)(user % LOOM_EXPERT_MATS);
    struct slot *s = &c->slots[si];
    uint32_t il = (uint32_t)s->key / c->n_expert;
    int32_t e = (int32_t)((uint32_t)s->key % c->n_expert);
    const struct mat_src *src = &c->layers[il].mats[mat];
    uint64_t off;
    size_t len, pad;
    read_range(c, il, e, mat, &off, &len, &pad);
    res = injected(c, res, pad + src->x->expert_bytes);
    if (--c->in_flight == 0)
        c->st.busy_ns += now_ns() - c->busy_since;
    c->st.reads++;
    if (res == -ECANCELED && s->cancelling) {
        s->failed |= 2; /* a stale prediction's read the kernel had not started: not an error */
    } else if (res < 0 || (size_t)res < pad + src->x->expert_bytes) {
        c->st.read_errors++;
        if (s->wanted && !s->failed && fault && !fault->code && (s->reported = 1))
            loom_errorf(fault, LOOM_E_IO, "reading expert %d of layer %u (tensor '%s', %llu bytes at offset %llu of "
                        "%s): %s", e, il, src->name, (unsigned long long)src->x->expert_bytes,
                        (unsigned long long)(off + pad), c->path[src->part],
                        res < 0 ? strerror(-res) : "short read (the file is shorter than when it was loaded)");
        s->failed |= 1;
    } else {
        c->st.bytes_read += src->x->expert_bytes;
        if (s->cancelling && !s->wanted)
            c->st.bytes_wasted += src->x->expert_bytes;
        if (!c->direct)
            posix_fadvise(c->fd[src->part], (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
    }
    if (--s->pending > 0)
        return;
    c->wanted_loading -= s->wanted;
    if (s->failed) { /* not published */
        if (s->wanted && !s->reported) /* a read ahead failed before the step wanted it: read it again */
            c->queued[c->n_queued++] = e;
        c->st.prefetch_cancelled += s->failed == 2;
        c->where[s->key] = -1;
        s->key = -1, s->state = SLOT_FREE, s->pinned = 0, s->wanted = 0, s->ahead = 0, s->reported = 0;
        s->cancelling = 0;
        return;
    }
    if (s->cancelling) /* every read of a stale prediction ran: first in the eviction order */
        s->cancelling = 0, s->last_use = -++c->scan_clock;
    s->state = SLOT_READY;
    record_latency(c, now_ns() - s->issued_ns);
    if (s->wanted)
        c->ready[c->n_ready++] = e;
}

/* Account the completions that are in, without waiting. */
static void reap(struct loom_expert_cache *c, loom_error *fault)
{
    struct io_uring_cqe *cqe;
    while (c->uring && !c->broken && io_uring_peek_cqe(&c->ring, &cqe) == 0) {
        uint64_t user = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&c->ring, cqe);
        if (user != CANCEL_TAG) /* a cancel request's own answer: its read completes on its own */
            complete(c, user, res, fault);
    }
}

/* Wait for and account one completion (c->broken set when the ring itself fails). */
static void wait_one(struct loom_expert_cache *c, loom_error *fault)
{
    if (c->n_done_q) {
        uint64_t user = c->done_q[0].user;
        int res = c->done_q[0].res;
        memmove(c->done_q, c->done_q + 1, sizeof c->done_q[0] * (size_t)--c->n_done_q);
        complete(c, user, res, fault);
        return;
    }
    struct io_uring_cqe *cqe;
    int rc;
    while ((rc = io_uring_wait_cqe(&c->ring, &cqe)) == -EINTR)
        ;
    if (rc < 0) { /* the ring itself failed: nothing in flight can be trusted to arrive */
        c->broken = -rc;
        return;
    }
    uint64_t user = io_uring_cqe_get_data64(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&c->ring, cqe);
    if (user != CANCEL_TAG)
        complete(c, user, res, fault);
}

/* Predictions for layer il that its step did not need (stale): the reads still in flight are asked to be
 * cancelled (the kernel cancels those it has not started), the experts in go first in the eviction order. */
static void stale_predictions(struct loom_expert_cache *c, uint32_t il)
{
    int asked = 0;
    for (uint32_t e = 0; e < c->n_expert; e++) {
        int32_t si = c->where[il * c->n_expert + e];
        struct slot *s = si < 0 ? NULL : &c->slots[si];
        if (!s || s->ahead != AHEAD_PREDICTED)
            continue;
        s->ahead = 0;
        c->st.prefetch_stale++;
        if (s->state == SLOT_READY) {
            c->st.bytes_wasted += expert_bytes(c, il);
            s->last_use = -++c->scan_clock;
            continue;
        }
        s->cancelling = 1;
        for (int i = 0; i < c->layers[il].n_mats; i++) {
            struct io_uring_sqe *sqe = take_sqe(c);
            io_uring_prep_cancel64(sqe, user_data(si, i), 0);
            io_uring_sqe_set_data64(sqe, CANCEL_TAG);
            asked = 1;
        }
    }
    if (asked)
        io_uring_submit(&c->ring);
}

/* P2: between steps, with no read in flight, warm one expert of the layer after next (two steps of compute
 * ahead): the one decode steps needed most that no slot holds, if a slot is free or holds one needed less than
 * half as often (warm_slot). Decode's history only: a prefill-sized step warms nothing. */
static void warm(struct loom_expert_cache *c)
{
    if (!(c->read_ahead & ALLOW_P2) || !c->uring || c->force_pread || c->broken || c->scan ||
        c->in_flight)
        return;
    uint32_t il = (c->il + 2) % c->n_layer, base = il * c->n_expert;
    int32_t best = -1;
    for (uint32_t e = 0; e < c->n_expert; e++) {
        uint32_t need = c->needs[base + e];
        if (c->where[base + e] < 0 && need && (best < 0 || need > c->needs[base + (uint32_t)best]))
            best = (int32_t)e;
    }
    if (best >= 0)
        issue(c, il, best, AHEAD_WARM);
}

/* ---- a step --------------------------------------------------------------------------------------- */

void loom_expert_cache_begin(struct loom_expert_cache *c, uint32_t il, const int32_t *ids, int n, int scan)
{
    pthread_mutex_lock(&c->lock);
    c->il = il;
    c->n_queued = c->next_queued = c->n_ready = c->next_ready = 0;
    /* A scan-sized step (prefill touches nearly every expert of every layer, in layer order: a cycle longer
     * than the cache) under plain LRU evicts each layer's experts just before the next chunk needs them again:
     * 0% hits. So a scan's needs are not counted, its reads go to the front of the eviction order (the most
     * recent first) and its hits keep their place: a scan churns a few slots and leaves the rest as it was. */
    c->scan = scan;
    reap(c, NULL); /* predictions that landed (or failed) meanwhile */
    for (int i = 0; i < n && !c->scan; i++) /* decode-sized steps count (LFU); scans do not */
        c->needs[il * c->n_expert + (uint32_t)ids[i]]++;
    c->st.steps++;
    for (int i = 0; i < n; i++) {
        int32_t si = c->where[il * c->n_expert + (uint32_t)ids[i]];
        if (si < 0) {
            c->queued[c->n_queued++] = ids[i];
            c->st.misses++;
            continue;
        }
        struct slot *s = &c->slots[si];
        c->st.hits++;
        c->st.prefetch_hits += s->ahead == AHEAD_PREDICTED;
        c->st.warm_hits += s->ahead == AHEAD_WARM;
        s->ahead = 0, s->pinned = 1, s->wanted = 1;
        if (s->state == SLOT_READY)
            c->ready[c->n_ready++] = ids[i];
        else /* a prediction's reads still in flight: handed out when they are in */
            c->wanted_loading++;
    }
    if (c->uring && !c->broken)
        stale_predictions(c, il);
    while (c->next_queued < c->n_queued && issue(c, il, c->queued[c->next_queued], STEP))
        c->next_queued++;
}

void loom_expert_cache_prefetch(struct loom_expert_cache *c, uint32_t il, const int32_t *ids, int n)
{
    if (!loom_expert_cache_prefetching(c) || il >= c->n_layer)
        return;
    for (int i = 0; i < n; i++)
        if (c->where[il * c->n_expert + (uint32_t)ids[i]] < 0 && !issue(c, il, ids[i], AHEAD_PREDICTED))
            break;
}

static void fill(const struct loom_expert_cache *c, int32_t e, struct loom_expert_ready *r)
{
    const struct slot *s = &c->slots[c->where[c->il * c->n_expert + (uint32_t)e]];
    const struct layer_src *ls = &c->layers[c->il];
    r->expert = e;
    r->n_mats = ls->n_mats;
    for (int i = 0; i < ls->n_mats; i++) {
        r->mats[i] = ls->mats[i].x->w;
        r->mats[i].data = s->buf + s->data_off[i];
        r->mats[i].rows = NULL;
    }
}

int loom_expert_cache_next(struct loom_expert_cache *c, struct loom_expert_ready *r, loom_error *err)
{
    for (;;) {
        if (c->broken)
            return loom_errorf(err, LOOM_E_IO, "reading experts: the io_uring ring failed (%s); this model can read "
                               "no more experts", strerror(c->broken));
        while (c->next_queued < c->n_queued && issue(c, c->il, c->queued[c->next_queued], STEP))
            c->next_queued++;
        if (c->next_ready < c->n_ready) {
            fill(c, c->ready[c->next_ready++], r);
            return 1;
        }
        if (!c->wanted_loading && c->next_queued == c->n_queued)
            return 0;
        if (!c->in_flight && !c->n_done_q)
            return loom_errorf(err, LOOM_E_INTERNAL, "expert cache: no slot for expert %d of layer %u (%d slots, all "
                               "pinned)", c->queued[c->next_queued], c->il, c->n_alloc);
        err->code = 0;
        uint64_t t0 = now_ns();
        wait_one(c, err); /* a prediction's completion may also free a slot for the queue */
        c->st.wait_ns += now_ns() - t0;
        if (err->code)
            return err->code;
    }
}

void loom_expert_cache_done(struct loom_expert_cache *c, int32_t e)
{
    struct slot *s = &c->slots[c->where[c->il * c->n_expert + (uint32_t)e]];
    s->pinned = 0, s->wanted = 0;
    if (!c->scan)
        s->last_use = ++c->clock;
}

void loom_expert_cache_end(struct loom_expert_cache *c)
{
    loom_error ignored = {0};
    while (c->n_done_q || (c->wanted_loading && !c->broken)) /* predictions' reads may stay in flight */
        wait_one(c, &ignored);
    reap(c, NULL);
    for (int i = 0; i < c->n_alloc; i++)
        if (c->slots[i].pinned) {
            c->slots[i].pinned = 0, c->slots[i].wanted = 0;
            if (!c->scan)
                c->slots[i].last_use = ++c->clock;
        }
    warm(c);
    pthread_mutex_unlock(&c->lock);
}

/* ---- identity ------------------------------------------------------------------------------------ */

void loom_expert_cache_hash_tensor(struct loom_expert_cache *c, const char *name, XXH3_state_t *st)
{
    const struct loom_gguf_tensor *t = loom_gguf_find_tensor(c->m->gguf, name);
    if (!t)
        return;
    enum { BLOCK = 4 << 20 };
    char *buf = malloc(BLOCK);
    char self[64]; /* the file loaded, even if another now has its name: its descriptor's inode, not O_DIRECT */
    snprintf(self, sizeof self, "/proc/self/fd/%d", c->fd[t->part]);
    int fd = open(self, O_RDONLY | O_CLOEXEC);
    uint64_t at = c->m->gguf->parts[t->part].data_offset + t->offset, left = t->nbytes;
    while (buf && fd >= 0 && left) {
        ssize_t r = pread(fd, buf, left < BLOCK ? (size_t)left : BLOCK, (off_t)at);
        if (r <= 0)
            break;
        XXH3_64bits_update(st, buf, (size_t)r);
        posix_fadvise(fd, (off_t)at, (off_t)r, POSIX_FADV_DONTNEED);
        at += (uint64_t)r, left -= (uint64_t)r;
    }
    if (left)
        XXH3_64bits_update(st, "unreadable", 10);
    if (fd >= 0)
        close(fd);
    free(buf);
}

/* ---- figures -------------------------------------------------------------------------------------- */

static double percentile(const struct loom_expert_cache *c, double q)
{
    uint64_t total = 0, acc = 0;
    for (int b = 0; b < LAT_BUCKETS; b++)
        total += c->lat[b];
    if (!total)
        return 0;
    uint64_t rank = (uint64_t)ceil(q * (double)total);
    for (int b = 0; b < LAT_BUCKETS; b++)
        if ((acc += c->lat[b]) >= rank) /* the bucket's upper edge: 2^(b/8 + 1/8) scaled by frexp's half */
            return ldexp(0.5 + ((b % 8) + 1) / 16.0, b / 8) / 1000.0;
    return 0;
}

void loom_expert_cache_stats(struct loom_expert_cache *c, loom_expert_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->st;
    out->budget_bytes = c->budget;
    out->dense_bytes = c->dense;
    out->session_bytes = c->reserved;
    out->slot_bytes = c->slot_bytes;
    int64_t cap = capacity(c);
    out->n_slots = cap < 0 ? 0 : cap > c->max_slots ? c->max_slots : (int)cap; /* more would never be used */
    out->n_slots_used = c->n_alloc;
    out->direct_io = c->direct;
    out->io_uring = c->uring && !c->force_pread;
    out->latency_p50_us = percentile(c, 0.50);
    out->latency_p95_us = percentile(c, 0.95);
    out->latency_p99_us = percentile(c, 0.99);
    pthread_mutex_unlock(&c->lock);
}

void loom_expert_cache_inject_fault(struct loom_expert_cache *c, int n, int errno_value)
{
    c->fault_in = n;
    c->fault_errno = errno_value;
}

void loom_expert_cache_force_pread(struct loom_expert_cache *c, int on) { c->force_pread = on; }

void loom_expert_cache_set_read_ahead(struct loom_expert_cache *c, enum loom_read_ahead r)
{
    c->read_ahead = r == LOOM_READ_AHEAD_NONE ? 0 : r == LOOM_READ_AHEAD_HISTORY ? ALLOW_P2
                  : r == LOOM_READ_AHEAD_ALL ? ALLOW_P1 | ALLOW_P2 : ALLOW_P1;
}

int loom_expert_cache_prefetching(const struct loom_expert_cache *c)
{
    return (c->read_ahead & ALLOW_P1) && c->uring && !c->force_pread && !c->broken;
}
