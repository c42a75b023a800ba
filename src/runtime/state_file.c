/* state_file.c — saving a sequence's public state to a file and restoring it: the model's identity digest,
 * the position, the token history, every state owner (loom_session_state_owners order) and the last logits,
 * closed by an XXH3 checksum. Written to a temporary file, fsynced and renamed into place; a restore checks
 * everything before changing the session. Layout (host byte order, x86-64): struct file_header, then
 * int32 history[pos], then per owner its public bytes (conv/recurrent whole; K per head its rows 0..pos-1, in
 * the K cache type the header names; V as [heads][dim] slices of pos values), then float logits[n_logits] when
 * has_logits, then uint64 checksum of all that precedes it. */
#define XXH_STATIC_LINKING_ONLY
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "model/expert_cache.h"
#include "runtime/session.h"
#include "util/error.h"

#define STATE_MAGIC "LOOMSEQ\1"
#define STATE_VERSION 5u /* 2: the identity hashes the hyper-parameters field by field; 3: and the weight table's
                          * fused attention row (attn_qkv in attention layers); 4: K rows per head (session.h);
                          * 5: the float-order profile that computed the state */

struct file_header {
    char magic[8];
    uint32_t version;
    uint32_t n_layer;
    uint64_t model_id;
    int32_t pos;
    int32_t has_logits;
    int32_t n_logits;
    int32_t k_type; /* enum loom_kv_type of the K rows (0 = F16: the field was reserved, 0, before Q8_0 K) */
    int32_t orders; /* enum loom_orders of the model that computed the state: its sums continue bitwise only there */
    int32_t reserved; /* 0 */
    uint64_t payload_bytes; /* everything between the header and the checksum */
};

/* A weight's type, shape and GGUF bytes (for an X16 weight its file bytes, whose pages are given back
 * again afterwards; for a model that streams its experts, whose map holds only the dense part, read from the
 * file as tensor `name`), so the identity does not depend on the layout chosen at load. An empty field (a row
 * the layer does not bind) has no bytes in either case, even where another row's tensor has its name (attn_qkv:
 * the Gated DeltaNet's in a recurrent layer, the fused q/k/v in an attention layer). */
static void hash_weight(XXH3_state_t *st, const struct loom_model *m, const char *name, const struct loom_weight *w)
{
    int64_t shape[3] = {w->type, w->n_in, w->n_out};
    XXH3_64bits_update(st, shape, sizeof shape);
    if (!w->data)
        return;
    if (m->experts) {
        loom_expert_cache_hash_tensor(m->experts, name, st);
        return;
    }
    const void *bytes = w->layout == LOOM_WEIGHT_ROWS ? w->data : w->rows;
    if (bytes)
        XXH3_64bits_update(st, bytes, w->row_bytes * (size_t)w->n_out);
    loom_weight_release_rows(w);
}

/* An expert tensor: its type, shape and every expert's GGUF bytes (as hash_weight for an X16 one). */
static void hash_experts(XXH3_state_t *st, const struct loom_model *m, const char *name, const struct loom_experts *x)
{
    int64_t shape[4] = {x->w.type, x->w.n_in, x->w.n_out, x->n_expert};
    XXH3_64bits_update(st, shape, sizeof shape);
    if (m->experts) {
        loom_expert_cache_hash_tensor(m->experts, name, st);
        return;
    }
    const void *bytes = x->w.layout == LOOM_WEIGHT_ROWS ? x->w.data : x->w.rows;
    if (bytes)
        XXH3_64bits_update(st, bytes, x->expert_bytes * x->n_expert);
    loom_experts_release_rows(x);
}

static void hash_floats(XXH3_state_t *st, const float *v, size_t n)
{
    if (v)
        XXH3_64bits_update(st, v, n * sizeof(float));
}

/* The hyper-parameters, field by field (not the struct's bytes: fields a later architecture adds must not
 * change the identity of the files an earlier one admitted). */
static void hash_hparams(XXH3_state_t *st, const struct loom_hparams *hp)
{
    XXH3_64bits_update(st, hp->arch, strlen(hp->arch));
    const uint32_t u[] = {hp->n_vocab, hp->n_ctx_train, hp->n_embd, hp->n_layer, hp->n_ff, hp->n_head,
                          hp->n_head_kv, hp->head_dim_k, hp->head_dim_v, hp->n_rot, hp->rope_sections[0],
                          hp->rope_sections[1], hp->rope_sections[2], hp->rope_sections[3], hp->full_attn_interval,
                          hp->ssm_conv_kernel, hp->ssm_inner, hp->ssm_head_dim, hp->ssm_n_v_heads, hp->ssm_n_k_heads,
                          (uint32_t)hp->tied_output};
    const float f[] = {hp->rope_freq_base, hp->rms_eps};
    XXH3_64bits_update(st, u, sizeof u);
    XXH3_64bits_update(st, f, sizeof f);
    if (hp->n_expert) { /* appended for MoE models only: dense identities stay as they were */
        const uint32_t moe[] = {hp->n_expert, hp->n_expert_used, hp->n_ff_exp, hp->n_ff_shexp};
        XXH3_64bits_update(st, moe, sizeof moe);
    }
    if (hp->custom_plan) /* appended for a plan no full_attention_interval gives: other identities stay */
        XXH3_64bits_update(st, hp->attn_layer_bits, (hp->n_layer + 7) / 8);
}

/* Identity of a loaded model: its hyper-parameters and every tensor's type, shape and bytes. */
static uint64_t model_identity(const struct loom_model *m)
{
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    const struct loom_hparams *hp = &m->hp;
    hash_hparams(&st, hp);
    hash_weight(&st, m, "token_embd.weight", &m->tok_embd);
    hash_weight(&st, m, hp->tied_output ? "token_embd.weight" : "output.weight", &m->output);
    hash_floats(&st, m->output_norm, hp->n_embd);
    const struct loom_arch *a = m->arch;
    for (uint32_t il = 0; il < hp->n_layer; il++) { /* every matrix and expert row (absent: empty), then vectors */
        const struct loom_layer *L = &m->layers[il];
        char name[128];
        for (int i = 0; i < a->n_weights; i++) {
            snprintf(name, sizeof name, "blk.%u.%s", il, a->weights[i].name);
            if (a->weights[i].experts)
                hash_experts(&st, m, name, loom_layer_experts(L, &a->weights[i]));
            else if (!a->weights[i].vector)
                hash_weight(&st, m, name, loom_layer_matrix(L, &a->weights[i]));
        }
        for (int i = 0; i < a->n_weights; i++) {
            const struct loom_weight_row *r = &a->weights[i];
            if (r->vector)
                hash_floats(&st, loom_layer_vector(L, r), m->geo.dim[r->ne[0]] * m->geo.dim[r->ne[1]]);
        }
    }
    return XXH3_64bits_digest(&st);
}

/* One piece of the payload: where it lives in the session and how many bytes. */
struct piece {
    void *at;
    size_t bytes;
};

struct runs {
    void (*fn)(void *ctx, struct piece p);
    void *ctx;
    uint64_t bytes;
};

static void visit_run(void *ctx, void *at, size_t bytes)
{
    struct runs *r = ctx;
    r->fn(r->ctx, (struct piece){at, bytes});
    r->bytes += bytes;
}

/* Visit the payload pieces in file order for a sequence at position pos; returns the payload bytes. */
static uint64_t visit_payload(struct loom_session *s, int pos, int has_logits,
                              void (*fn)(void *ctx, struct piece p), void *ctx)
{
    uint64_t total = 0;
    struct piece hist = {s->history, (size_t)pos * sizeof(int32_t)};
    fn(ctx, hist);
    total += hist.bytes;
    struct runs r = {fn, ctx, 0};
    for (int i = 0; i < s->n_owners; i++) {
        const struct loom_state_owner *o = &s->owners[i];
        if (o->pos_axis < 0)
            visit_run(&r, loom_owner_data(s, o, s->cur), o->bytes);
        else
            loom_owner_runs(s, o, 0, pos, visit_run, &r);
    }
    total += r.bytes;
    if (has_logits) {
        struct piece lg = {s->logits, (size_t)s->n_logits * sizeof(float)};
        fn(ctx, lg);
        total += lg.bytes;
    }
    return total;
}

static void count_piece(void *ctx, struct piece p)
{
    (void)ctx, (void)p;
}

struct writer {
    FILE *f;
    XXH3_state_t *st;
    int failed;
};

static void write_piece(void *ctx, struct piece p)
{
    struct writer *w = ctx;
    XXH3_64bits_update(w->st, p.at, p.bytes);
    if (p.bytes && fwrite(p.at, 1, p.bytes, w->f) != p.bytes)
        w->failed = 1;
}

int loom_session_save(const loom_session *session, const char *path, loom_error *err)
{
    struct loom_session *s = (struct loom_session *)session; /* visit_payload only reads here */
    struct file_header h = {STATE_MAGIC, STATE_VERSION, s->model->hp.n_layer, model_identity(s->model), s->pos,
                            s->has_logits, s->n_logits, (int32_t)s->k_type, (int32_t)s->model->kernels->orders, 0,
                            0};
    h.payload_bytes = visit_payload(s, s->pos, s->has_logits, count_piece, NULL);
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp)
        return loom_errorf(err, LOOM_E_NOMEM, "save %s: out of memory", path);
    snprintf(tmp, len + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return loom_errorf(err, LOOM_E_IO, "save %s: creating a temporary file: %s", path, strerror(e));
    }
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset(&st);
    struct writer w = {fdopen(fd, "wb"), &st, 0};
    if (!w.f) {
        close(fd);
        w.failed = 1;
    } else {
        write_piece(&w, (struct piece){&h, sizeof h});
        visit_payload(s, s->pos, s->has_logits, write_piece, &w);
        uint64_t sum = XXH3_64bits_digest(&st);
        w.failed |= fwrite(&sum, sizeof sum, 1, w.f) != 1;
        w.failed |= fflush(w.f) != 0 || fsync(fileno(w.f)) != 0;
        w.failed |= fclose(w.f) != 0;
    }
    int e = errno;
    if (w.failed || rename(tmp, path) != 0) {
        e = w.failed ? e : errno;
        unlink(tmp);
        free(tmp);
        return loom_errorf(err, LOOM_E_IO, "save %s: writing the state failed: %s", path, strerror(e));
    }
    free(tmp);
    return LOOM_OK;
}

struct reader {
    const char *at;
};

static void read_piece(void *ctx, struct piece p)
{
    struct reader *r = ctx;
    memmove(p.at, r->at, p.bytes);
    r->at += p.bytes;
}

/* The whole file into *buf (malloc'd), *len its size. */
static int slurp(const char *path, char **buf, size_t *len, loom_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return loom_errorf(err, LOOM_E_IO, "restore %s: %s", path, strerror(errno));
    struct stat sb;
    int rc = LOOM_OK;
    *buf = NULL;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 0)
        rc = loom_errorf(err, LOOM_E_IO, "restore %s: cannot stat the file", path);
    else if (!(*buf = malloc((size_t)sb.st_size + 1)))
        rc = loom_errorf(err, LOOM_E_NOMEM, "restore %s: allocating %lld bytes failed", path, (long long)sb.st_size);
    else if (fread(*buf, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size)
        rc = loom_errorf(err, LOOM_E_IO, "restore %s: reading the file failed", path);
    *len = rc ? 0 : (size_t)sb.st_size;
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    fclose(f);
    return rc;
}

/* Check a file image against the session: LOOM_OK when it can be restored, else LOOM_E_FORMAT. */
static int check_image(struct loom_session *s, const char *path, const char *buf, size_t len, loom_error *err)
{
    struct file_header h;
    if (len < sizeof h + sizeof(uint64_t))
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: %zu bytes is too short for a loom state file", path, len);
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, STATE_MAGIC, 8) != 0)
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: not a loom state file", path);
    if (h.version != STATE_VERSION)
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: a loom state file of version %u, expected %u (saved by "
                           "another loom version: save it again)", path, h.version, STATE_VERSION);
    uint64_t sum;
    memcpy(&sum, buf + len - sizeof sum, sizeof sum);
    if (XXH3_64bits(buf, len - sizeof sum) != sum || h.payload_bytes != len - sizeof h - sizeof sum)
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: the file is damaged (checksum or length mismatch)", path);
    uint64_t id = model_identity(s->model);
    if (h.model_id != id || h.n_layer != s->model->hp.n_layer || h.n_logits != s->n_logits)
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: saved from another model (identity %016llx, this model "
                           "%016llx)", path, (unsigned long long)h.model_id, (unsigned long long)id);
    if (h.k_type != (int32_t)s->k_type) {
        const char *saved = loom_kv_type_name((enum loom_kv_type)h.k_type);
        char num[32];
        snprintf(num, sizeof num, "%d (unknown)", h.k_type);
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: saved with K cache type %s, this session's is %s "
                           "(--cache-type-k)", path, saved ? saved : num, loom_kv_type_name(s->k_type));
    }
    if (h.orders != (int32_t)s->model->kernels->orders) {
        const char *saved = loom_orders_label((enum loom_orders)h.orders);
        char num[32];
        snprintf(num, sizeof num, "%d (unknown)", h.orders);
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: saved in the %s float-order profile, this model runs in "
                           "%s (the profile active at its load: LOOM_ORDERS, loom_orders_select; a state continues "
                           "bitwise only in the profile that computed it)", path, saved ? saved : num,
                           loom_orders_label(s->model->kernels->orders));
    }
    if (h.pos < 0 || h.pos > s->n_ctx || (h.has_logits != 0 && h.has_logits != 1))
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: position %d does not fit this session's context of %d",
                           path, h.pos, s->n_ctx);
    if (visit_payload(s, h.pos, h.has_logits, count_piece, NULL) != h.payload_bytes)
        return loom_errorf(err, LOOM_E_FORMAT, "restore %s: payload of %llu bytes does not match the model's state",
                           path, (unsigned long long)h.payload_bytes);
    int64_t n_rows = s->model->tok_embd.n_out;
    for (int32_t i = 0; i < h.pos; i++) {
        int32_t t;
        memcpy(&t, buf + sizeof h + (size_t)i * sizeof t, sizeof t);
        if (t < 0 || t >= n_rows)
            return loom_errorf(err, LOOM_E_FORMAT, "restore %s: history token %d is %d, outside [0, %lld)", path, i,
                               t, (long long)n_rows);
    }
    return LOOM_OK;
}

int loom_session_restore(loom_session *session, const char *path, loom_error *err)
{
    size_t len = 0;
    char *buf = NULL;
    int rc = slurp(path, &buf, &len, err);
    if (rc == LOOM_OK)
        rc = check_image(session, path, buf, len, err);
    if (rc == LOOM_OK) {
        struct file_header h;
        memcpy(&h, buf, sizeof h);
        struct reader r = {buf + sizeof h};
        loom_session_drop_checkpoints(session, -1);
        visit_payload(session, h.pos, h.has_logits, read_piece, &r);
        session->pos = h.pos;
        session->has_logits = h.has_logits;
    }
    free(buf);
    return rc;
}
