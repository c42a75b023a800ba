/* matmul.c — weight matrix times activation rows on the thread pool. Each activation row is converted
 * once to the weight type's partner (vec_dot_type), as ggml-cpu's ggml_compute_forward_mul_mat does,
 * then every output element is one dot of a weight row with a converted row, in the float order of the
 * kernel the reference picks for that product (loom_matmul_dot), so results do not depend on the
 * thread count or on how rows are chunked. */
#include "kernels/matmul.h"

#include <string.h>

#include "kernels/ops.h"
#include "kernels/protos.h"
#include "util/pool.h"

/* Prefill blocking: TOKEN_TILE tokens' converted rows are used against each weight row in turn (they
 * stay in L1), and a block of weight rows of about ROW_BLOCK_BYTES stays in L2 while all tiles pass. */
#define TOKEN_TILE 8
#define ROW_BLOCK_BYTES (64 * 1024)

struct matmul_job {
    const struct loom_weight *w;
    const char *act;       /* converted activations, act_bytes per token */
    size_t act_bytes;
    int64_t n_tok;
    float *y;              /* [n_tok][n_out] */
    loom_dot_fn dot_group, dot_rest;     /* for tokens t < n_group, and for the rest */
    loom_dot_rows4_fn rows4_group;       /* 4-token form of dot_group, or NULL */
    loom_dot_rows8_fn rows8_group;       /* 8-token form of dot_group, or NULL */
    int64_t n_group;
    const struct loom_x16_kernels *x16;  /* an X16 weight's group kernels in dot_group's order, or NULL */
};

/* tinyBLAS's vector step per type on the reference's AVX-512 and AVX2 builds (float-order profiles avx512 and
 * haswell): it runs only when n_in is a multiple. */
static const int64_t tinyblas_step[2][LOOM_TYPE_COUNT] = {
    [LOOM_ORDERS_AVX512] = {[LOOM_TYPE_F32] = 16, [LOOM_TYPE_F16] = 16, [LOOM_TYPE_BF16] = 32, [LOOM_TYPE_IQ4_NL] = 32},
    [LOOM_ORDERS_HASWELL] = {[LOOM_TYPE_F32] = 8, [LOOM_TYPE_F16] = 8, [LOOM_TYPE_BF16] = 8, [LOOM_TYPE_IQ4_NL] = 32},
};

/* Whether a type with a repacked order is repacked: every one but Q2_K, which llama.cpp's AVX-512 builds alone
 * repack (repack.cpp: ggml_cpu_has_avx512(), the build's compile-time __AVX512F__, not the machine's): always in
 * the avx512 profile, never in the haswell profile (docs/haswell-numerics.md D11). */
static int repacked(const struct loom_kernel_set *ks, uint32_t type)
{
    return type != LOOM_TYPE_Q2_K || ks->orders == LOOM_ORDERS_AVX512;
}

const struct loom_dot_kernels *loom_matmul_dot(const struct loom_kernel_set *ks, uint32_t type, int64_t n_out,
                                               int64_t n_in, int64_t n_tok, int64_t t, int plain_buffer)
{
    if (!loom_type_traits(type))
        return 0;
    const struct loom_type_kernels *k = &ks->types[type];
    if (k->gemv.row && n_out % 8 == 0 && !plain_buffer && repacked(ks, type))
        return t < n_tok - n_tok % 4 ? &k->gemm : &k->gemv;
    if (k->iqp.row && n_out % 8 == 0 && n_tok >= 8)
        return &k->iqp;
    /* tinyBLAS's quantized (Q0) kernels take any row count; its float ones need n_out % 4 == 0 */
    if (n_tok >= 2 && (n_out % 4 == 0 || type == LOOM_TYPE_IQ4_NL) && k->tinyblas.row &&
        n_in % tinyblas_step[ks->orders][type] == 0)
        return &k->tinyblas;
    return &k->vec_dot;
}

size_t loom_matmul_scratch_bytes(uint32_t type, int64_t n_in, int64_t n_tok)
{
    const struct loom_type_traits *t = loom_type_traits(type);
    if (!t || t->vec_dot_type == LOOM_TYPE_F32)
        return 0; /* F32 weights read the F32 activations directly */
    return loom_type_row_bytes(t->vec_dot_type, n_in) * (size_t)n_tok;
}

struct convert_job {
    loom_from_float_fn from_float;
    const float *x;
    int64_t n_in;
    char *dst;
    size_t dst_bytes;
};

static void convert_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct convert_job *c = ctx;
    for (int64_t t = begin; t < end; t++)
        c->from_float(c->x + t * c->n_in, c->dst + (size_t)t * c->dst_bytes, c->n_in);
}

/* Groups (16 rows each: 9 KiB of a 1024-wide Q4_K matrix) a repacking thread takes at a time: taking work costs
 * nothing beside the copy, and a pool's threads end a matrix together. */
#define REPACK_GRAIN_GROUPS 8

/* The types with an x16 layout: 16 GGUF rows into one group, and row r of a group back. */
static const struct {
    void (*pack)(const void *rows, size_t row_bytes, void *dst, int64_t n_in);
    void (*unpack_row)(const void *group, int r, void *dst, int64_t n_in);
} x16_layouts[LOOM_TYPE_COUNT] = {
    [LOOM_TYPE_Q4_K] = {loom_q4_k_x16_pack, loom_q4_k_x16_unpack_row},
    [LOOM_TYPE_Q6_K] = {loom_q6_k_x16_pack, loom_q6_k_x16_unpack_row},
    [LOOM_TYPE_MXFP4] = {loom_mxfp4_x16_pack, loom_mxfp4_x16_unpack_row},
};

/* The float order a type's x16 kernels reproduce per row: gemv's where the type has one, else vec_dot's. */
static const struct loom_dot_kernels *x16_order(const struct loom_kernel_set *ks, uint32_t type)
{
    const struct loom_type_kernels *k = &ks->types[type];
    return k->gemv.row ? &k->gemv : &k->vec_dot;
}

/* Copy row o of an X16 weight in the GGUF layout to dst (row_bytes): unpacked from its group, or a tail row
 * copied from the file map. */
static void weight_row_to(const struct loom_weight *w, int64_t o, void *dst)
{
    if (o >= w->n_out / 16 * 16)
        memcpy(dst, (const char *)w->rows + (size_t)o * w->row_bytes, w->row_bytes);
    else
        x16_layouts[w->type].unpack_row((const char *)w->data + (size_t)(o / 16) * 16 * w->row_bytes, (int)(o % 16),
                                        dst, w->n_in);
}

/* Output rows [r0, r1) for the tokens [t0, t1): weight rows outer, then the tokens, 8 or 4 at a time
 * through the 8- and 4-row kernels where there are some. Row o is at rows + (o - r0) * row_bytes. */
static void matmul_tile(const struct matmul_job *j, const char *rows, int64_t r0, int64_t r1, int64_t t0,
                        int64_t t1)
{
    const struct loom_weight *w = j->w;
    for (int64_t o = r0; o < r1; o++) {
        const void *row = rows + (size_t)(o - r0) * w->row_bytes;
        int64_t t = t0;
        for (; j->rows8_group && t + 8 <= t1 && t + 8 <= j->n_group; t += 8) {
            float s[8];
            j->rows8_group(w->n_in, s, row, j->act + (size_t)t * j->act_bytes, j->act_bytes);
            for (int k = 0; k < 8; k++)
                j->y[(t + k) * w->n_out + o] = s[k];
        }
        for (; j->rows4_group && t + 4 <= t1 && t + 4 <= j->n_group; t += 4) {
            float s[4];
            j->rows4_group(w->n_in, s, row, j->act + (size_t)t * j->act_bytes, j->act_bytes);
            for (int k = 0; k < 4; k++)
                j->y[(t + k) * w->n_out + o] = s[k];
        }
        for (; t < t1; t++)
            (t < j->n_group ? j->dot_group : j->dot_rest)(w->n_in, &j->y[t * w->n_out + o], row,
                                                         j->act + (size_t)t * j->act_bytes);
    }
}

/* Output rows [begin, end) for every token, in blocks of about ROW_BLOCK_BYTES of weights: each block
 * stays in cache while all token tiles pass over it, so every weight byte is read from memory once. The
 * rows of an X16 weight are unpacked block by block into a stack buffer first. */
static void matmul_rows(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct matmul_job *j = ctx;
    const struct loom_weight *w = j->w;
    _Alignas(64) unsigned char buf[ROW_BLOCK_BYTES > LOOM_WEIGHT_X16_MAX_ROW_BYTES ? ROW_BLOCK_BYTES
                                                                                   : LOOM_WEIGHT_X16_MAX_ROW_BYTES];
    int64_t rows = (int64_t)(ROW_BLOCK_BYTES / w->row_bytes);
    rows = rows > 0 ? rows : 1;
    for (int64_t r0 = begin; r0 < end; r0 += rows) {
        int64_t r1 = r0 + rows < end ? r0 + rows : end;
        const char *block = (const char *)w->data + (size_t)r0 * w->row_bytes;
        if (w->layout != LOOM_WEIGHT_ROWS) {
            for (int64_t o = r0; o < r1; o++)
                weight_row_to(w, o, buf + (size_t)(o - r0) * w->row_bytes);
            block = (const char *)buf;
        }
        for (int64_t t0 = 0; t0 < j->n_tok; t0 += TOKEN_TILE)
            matmul_tile(j, block, r0, r1, t0, t0 + TOKEN_TILE < j->n_tok ? t0 + TOKEN_TILE : j->n_tok);
    }
}

/* Group g of an X16 weight (its 16 rows) for the tokens [t0, t1), up to 8 at a time. */
static void x16_tile(const struct matmul_job *j, int64_t g, int64_t t0, int64_t t1)
{
    const struct loom_weight *w = j->w;
    const char *grp = (const char *)w->data + (size_t)g * 16 * w->row_bytes;
    for (int64_t t = t0; t < t1; t += 8)
        j->x16->dot(w->n_in, t1 - t < 8 ? (int)(t1 - t) : 8, j->y + t * w->n_out + g * 16, (size_t)w->n_out, grp,
                    j->act + (size_t)t * j->act_bytes, j->act_bytes);
}

/* Items [begin, end) of an X16 weight with group kernels: item g < n_out / 16 is group g, item n_out / 16
 * (when n_out % 16 != 0) the remaining rows. Groups go in blocks of about ROW_BLOCK_BYTES, as matmul_rows. */
static void matmul_groups(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct matmul_job *j = ctx;
    int64_t n_groups = j->w->n_out / 16, per_block = (int64_t)(ROW_BLOCK_BYTES / (16 * j->w->row_bytes));
    per_block = per_block > 0 ? per_block : 1;
    for (int64_t g0 = begin; g0 < end && g0 < n_groups; g0 += per_block) {
        int64_t g1 = g0 + per_block < end ? g0 + per_block : end;
        g1 = g1 < n_groups ? g1 : n_groups;
        for (int64_t t0 = 0; t0 < j->n_tok; t0 += TOKEN_TILE)
            for (int64_t g = g0; g < g1; g++)
                x16_tile(j, g, t0, t0 + TOKEN_TILE < j->n_tok ? t0 + TOKEN_TILE : j->n_tok);
    }
    if (end > n_groups)
        matmul_rows(ctx, 16 * n_groups, j->w->n_out, thread);
}

size_t loom_matmul_act_rows(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                            struct loom_matmul_act *act, const void **rows)
{
    uint32_t vt = loom_type_traits(w->type)->vec_dot_type;
    *rows = act->x;
    if (vt == LOOM_TYPE_F32)
        return (size_t)w->n_in * sizeof(float); /* F32 weights read the F32 activations directly */
    size_t bytes = loom_type_row_bytes(vt, w->n_in);
    if (act->type != vt) {
        struct convert_job c = {ks->types[vt].from_float, act->x, w->n_in, act->scratch, bytes};
        loom_pool_parallel_for(pool, act->n_tok, 1, convert_rows, &c);
        act->type = vt;
    }
    *rows = act->scratch;
    return bytes;
}

/* Precondition: w->type has a dot product (ks's vec_dot; every type but the activation-only Q8_1 and Q8_K), as
 * checked at model load. With rowwise = 0, as in the reference, the float order of token t's outputs
 * depends on n_tok (one row vs several; Q4_K rows in groups of 4), so a prompt evaluated in the same
 * chunks as the reference's ubatches reproduces its results bit for bit. With rowwise = 1 every row goes
 * through the kernel of a one-row product (the decode kernel; its 4- and 8-row forms where set ks
 * has them, which are bit-identical per row), so row t's outputs do not depend on n_tok. */
/* The job of w times act's rows into y (act converted to w's vec_dot_type first) and its work items: the
 * groups of an X16 weight whose group kernels have the order every token asks for, else blocks of `rows` output
 * rows (16 for one token, 4 for several). Returns the number of items. */
static int64_t plan_matmul(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                           struct loom_matmul_act *act, float *y, int rowwise, struct matmul_job *job, int64_t *rows)
{
    int64_t n_tok = act->n_tok;
    /* the reference picks one kernel for the activation rows in groups of 4 and one for the rest */
    int64_t n_group = rowwise ? n_tok : n_tok - n_tok % 4;
    const struct loom_dot_kernels *group =
        loom_matmul_dot(ks, w->type, w->n_out, w->n_in, rowwise ? 1 : n_tok, 0, w->ref_plain_buffer);
    const struct loom_dot_kernels *rest =
        rowwise ? group : loom_matmul_dot(ks, w->type, w->n_out, w->n_in, n_tok, n_tok - 1, w->ref_plain_buffer);
    *job = (struct matmul_job){.w = w, .n_tok = n_tok, .y = y, .dot_group = group->row, .dot_rest = rest->row,
                               .rows4_group = group->rows4, .rows8_group = group->rows8, .n_group = n_group};
    const void *act_rows;
    job->act_bytes = loom_matmul_act_rows(ks, pool, w, act, &act_rows);
    job->act = act_rows;
    /* an X16 weight runs its group kernels when every token asks for the order they have (the same row kernel;
     * Q4_K: gemv's, in CANONICAL or for one token; Q6_K: vec_dot's, always; MXFP4: gemv's, whose gemm slot holds
     * the same kernel); otherwise (Q4_K's REFERENCE_BATCH prefill, another kernel set) its rows are unpacked */
    const struct loom_dot_kernels *all = n_group == n_tok || group->row == rest->row ? group : n_group == 0 ? rest : 0;
    const struct loom_x16_kernels *x16 = &ks->types[w->type].x16;
    if (w->layout == LOOM_WEIGHT_X16 && all && all->row == x16_order(ks, w->type)->row && x16->dot) {
        job->x16 = x16;
        *rows = 16;
        return w->n_out / 16 + (w->n_out % 16 != 0);
    }
    *rows = n_tok == 1 ? 16 : 4;
    return (w->n_out + *rows - 1) / *rows;
}

/* Items [begin, end) of a planned job (plan_matmul's items, `rows` output rows each). */
static void run_items(const struct matmul_job *job, int64_t rows, int64_t begin, int64_t end, int thread)
{
    if (job->x16)
        matmul_groups((void *)job, begin, end, thread);
    else
        matmul_rows((void *)job, begin * rows, end * rows < job->w->n_out ? end * rows : job->w->n_out, thread);
}

void loom_matmul_shared(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                        struct loom_matmul_act *act, float *y, int rowwise)
{
    struct matmul_job job;
    int64_t rows, items = plan_matmul(ks, pool, w, act, y, rowwise, &job, &rows);
    if (job.x16)
        loom_pool_parallel_for(pool, items, 1, matmul_groups, &job);
    else
        loom_pool_parallel_for(pool, w->n_out, rows, matmul_rows, &job);
}

/* Several planned jobs as one range of items, job after job (first[k]: job k's first item). */
struct multi_job {
    int n;
    struct matmul_job jobs[LOOM_MATMUL_MAX_SHARED];
    int64_t rows[LOOM_MATMUL_MAX_SHARED];
    int64_t first[LOOM_MATMUL_MAX_SHARED + 1];
};

static void multi_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct multi_job *m = ctx;
    for (int k = 0; k < m->n; k++) {
        int64_t b = begin > m->first[k] ? begin : m->first[k], e = end < m->first[k + 1] ? end : m->first[k + 1];
        if (b < e)
            run_items(&m->jobs[k], m->rows[k], b - m->first[k], e - m->first[k], thread);
    }
}

void loom_matmul_shared_n(const struct loom_kernel_set *ks, struct loom_pool *pool, int n,
                          const struct loom_weight *const *w, struct loom_matmul_act *act, float *const *y,
                          int rowwise)
{
    uint32_t vt = n > 0 ? loom_type_traits(w[0]->type)->vec_dot_type : 0;
    int same = n <= LOOM_MATMUL_MAX_SHARED;
    for (int k = 1; k < n && same; k++)
        same = loom_type_traits(w[k]->type)->vec_dot_type == vt;
    if (!same) { /* one conversion of act at a time: one matrix after the other */
        for (int k = 0; k < n; k++)
            loom_matmul_shared(ks, pool, w[k], act, y[k], rowwise);
        return;
    }
    struct multi_job m = {.n = n};
    for (int k = 0; k < n; k++)
        m.first[k + 1] = m.first[k] + plan_matmul(ks, pool, w[k], act, y[k], rowwise, &m.jobs[k], &m.rows[k]);
    loom_pool_parallel_for(pool, m.first[n], 1, multi_task, &m);
}

void loom_matmul(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                 const float *x, int64_t n_tok, float *y, void *scratch)
{
    struct loom_matmul_act act = {x, n_tok, LOOM_TYPE_COUNT, scratch};
    loom_matmul_shared(ks, pool, w, &act, y, 0);
}

void loom_matmul_rowwise(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                         const float *x, int64_t n_tok, float *y, void *scratch)
{
    struct loom_matmul_act act = {x, n_tok, LOOM_TYPE_COUNT, scratch};
    loom_matmul_shared(ks, pool, w, &act, y, 1);
}

const struct loom_dot_kernels *loom_matmul_dot_id(const struct loom_kernel_set *ks, uint32_t type, int64_t n_out,
                                                  int64_t n_in, int64_t n_rows, int plain_buffer)
{
    if (!loom_type_traits(type))
        return 0;
    const struct loom_type_kernels *k = &ks->types[type];
    if (k->gemv.row && n_out % 8 == 0 && !plain_buffer && repacked(ks, type))
        return &k->gemv;
    if (k->iqp.row && n_out % 8 == 0 && n_in % 256 == 0 && n_rows >= 8)
        return &k->iqp;
    return &k->vec_dot;
}

/* Output rows per work item of an expert with n_rows activation rows: a block of about ROW_BLOCK_BYTES of
 * weights when enough rows share it, else 16 rows (decode: the work of the few selected experts is spread
 * over the pool by rows); whole groups of 16 rows for an X16 expert tensor. */
static int64_t expert_block_rows(const struct loom_weight *w, int64_t n_rows)
{
    int64_t rows = n_rows >= TOKEN_TILE ? (int64_t)(ROW_BLOCK_BYTES / w->row_bytes) : 16;
    if (w->layout == LOOM_WEIGHT_X16)
        return rows >= 16 ? rows / 16 * 16 : 16;
    return rows > 0 ? rows : 1;
}

struct experts_job {
    const struct loom_kernel_set *ks;
    const struct loom_weight *mats; /* [n_active] each active expert's matrix */
    const int32_t *start;   /* [n_active + 1] their activation rows */
    const char *act;
    size_t act_bytes;
    float *y;
    int rowwise;
    int n_active;           /* experts with rows */
    const int64_t *first;   /* [n_active + 1] their first work item */
};

/* The matmul_job of active expert a's rows; an X16 expert runs its group kernels when its rows ask for their
 * order (they all do, or none). */
static struct matmul_job expert_job(const struct experts_job *j, int a)
{
    const struct loom_weight *we = &j->mats[a];
    int64_t n = j->start[a + 1] - j->start[a];
    const struct loom_dot_kernels *k =
        loom_matmul_dot_id(j->ks, we->type, we->n_out, we->n_in, j->rowwise ? 1 : n, we->ref_plain_buffer);
    const struct loom_x16_kernels *x16 = &j->ks->types[we->type].x16;
    return (struct matmul_job){.w = we, .act = j->act + (size_t)j->start[a] * j->act_bytes, .act_bytes = j->act_bytes,
                               .n_tok = n, .y = j->y + (size_t)j->start[a] * (size_t)we->n_out, .dot_group = k->row,
                               .dot_rest = k->row, .rows4_group = k->rows4, .rows8_group = k->rows8, .n_group = n,
                               .x16 = we->layout == LOOM_WEIGHT_X16 && k == x16_order(j->ks, we->type) && x16->dot
                                          ? x16
                                          : 0};
}

/* Work items [begin, end): the row blocks of the experts with rows, expert after expert. */
static void experts_task(void *ctx, int64_t begin, int64_t end, int thread)
{
    const struct experts_job *j = ctx;
    int lo = 0, hi = j->n_active - 1; /* the active expert whose items hold `begin` */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (j->first[mid] <= begin)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (int a = lo; a < j->n_active && j->first[a] < end; a++) {
        const struct loom_weight *we = &j->mats[a];
        int64_t block = expert_block_rows(we, j->start[a + 1] - j->start[a]);
        struct matmul_job job = expert_job(j, a);
        int64_t i0 = begin > j->first[a] ? begin - j->first[a] : 0, i1 = end - j->first[a];
        for (int64_t i = i0; i < i1 && i * block < we->n_out; i++) {
            int64_t r0 = i * block, r1 = r0 + block < we->n_out ? r0 + block : we->n_out;
            if (job.x16)
                matmul_groups(&job, r0 / 16, r1 / 16, thread); /* n_out % 16 == 0 for an X16 expert tensor */
            else
                matmul_rows(&job, r0, r1, thread);
        }
    }
}

/* The experts mats[n_active] with activation rows [start[a], start[a + 1]) each, over the pool. */
static void run_experts(struct experts_job *j, struct loom_pool *pool)
{
    int64_t first[LOOM_OPS_MAX_EXPERTS + 1];
    first[0] = 0;
    for (int a = 0; a < j->n_active; a++) {
        int64_t block = expert_block_rows(&j->mats[a], j->start[a + 1] - j->start[a]);
        first[a + 1] = first[a] + (j->mats[a].n_out + block - 1) / block;
    }
    j->first = first;
    loom_pool_parallel_for(pool, first[j->n_active], 1, experts_task, j);
}

void loom_matmul_experts(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *w,
                         size_t expert_bytes, int n_expert, const int32_t *start, const void *act, size_t act_bytes,
                         float *y, int rowwise)
{
    struct loom_weight mats[LOOM_OPS_MAX_EXPERTS]; /* 64 KiB of stack */
    int32_t active_start[LOOM_OPS_MAX_EXPERTS + 1];
    int n_active = 0;
    for (int e = 0; e < n_expert && e < LOOM_OPS_MAX_EXPERTS; e++) {
        if (start[e + 1] > start[e]) {
            mats[n_active] = *w;
            mats[n_active].data = (const char *)w->data + (size_t)e * expert_bytes;
            if (w->rows)
                mats[n_active].rows = (const char *)w->rows + (size_t)e * expert_bytes;
            active_start[n_active] = start[e];
            active_start[++n_active] = start[e + 1];
        }
    }
    struct experts_job j = {ks, mats, active_start, act, act_bytes, y, rowwise, n_active, NULL};
    run_experts(&j, pool);
}

void loom_matmul_expert(const struct loom_kernel_set *ks, struct loom_pool *pool, const struct loom_weight *we,
                        int64_t n_rows, const void *act, size_t act_bytes, float *y, int rowwise)
{
    int32_t start[2] = {0, (int32_t)n_rows};
    struct experts_job j = {ks, we, start, act, act_bytes, y, rowwise, 1, NULL};
    run_experts(&j, pool);
}

void loom_weight_get_row(const struct loom_weight *w, int64_t row, float *dst)
{
    _Alignas(64) unsigned char buf[LOOM_WEIGHT_X16_MAX_ROW_BYTES];
    const void *src = (const char *)w->data + (size_t)row * w->row_bytes;
    if (w->layout != LOOM_WEIGHT_ROWS) {
        weight_row_to(w, row, buf);
        src = buf;
    }
    loom_type_traits(w->type)->to_float(src, dst, w->n_in);
}

size_t loom_weight_x16_bytes(const struct loom_kernel_set *ks, const struct loom_weight *w)
{
    if (w->layout != LOOM_WEIGHT_ROWS || !ks->types[w->type].x16.dot || !x16_layouts[w->type].pack ||
        w->n_out < 16 || loom_matmul_dot(ks, w->type, w->n_out, w->n_in, 1, 0, 0) != x16_order(ks, w->type) ||
        w->row_bytes > LOOM_WEIGHT_X16_MAX_ROW_BYTES)
        return 0;
    return (size_t)(w->n_out / 16) * 16 * w->row_bytes;
}

struct repack_job {
    const struct loom_weight *w;
    char *dst;
};

/* Groups [begin, end) of a repack_job: each group's 16 rows into its place in dst. */
static void repack_groups(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    const struct repack_job *j = ctx;
    size_t group_bytes = 16 * j->w->row_bytes;
    for (int64_t g = begin; g < end; g++)
        x16_layouts[j->w->type].pack((const char *)j->w->data + (size_t)g * group_bytes, j->w->row_bytes,
                                     j->dst + (size_t)g * group_bytes, j->w->n_in);
}

void loom_weight_repack_x16(struct loom_pool *pool, struct loom_weight *w, void *dst)
{
    struct repack_job j = {w, dst};
    loom_pool_parallel_for(pool, w->n_out / 16, REPACK_GRAIN_GROUPS, repack_groups, &j);
    w->rows = w->data;
    w->data = dst;
    w->layout = LOOM_WEIGHT_X16;
}
