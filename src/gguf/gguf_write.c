/* gguf_write.c — the GGUF writer: collects metadata (serialized as it will appear on disk) and tensor
 * infos, then writes a v3 file with 32-byte alignment to a new temporary file beside PATH (PATH.<pid>.tmp, or a
 * shortened name that fits the directory's limits), streaming each tensor's bytes from a fill callback through one
 * reused buffer, and publishes it with fsync + rename; several files (a split model's parts) all at once or none. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"
#include "util/array.h"
#include "util/error.h"

/* One key with its value bytes exactly as written after the type field. */
struct wkv {
    char *key;
    size_t key_len;
    uint32_t type;
    uint8_t *val;
    size_t val_len;
};

struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[LOOM_GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset; /* in the data section, aligned */
};

struct loom_gguf_writer {
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    uint64_t data_size; /* bytes of the data section so far, padded */
};

static const uint8_t fixed_size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8}; /* 0: STRING, ARRAY */

static uint64_t align_up(uint64_t x)
{
    return (x + LOOM_GGUF_DEFAULT_ALIGNMENT - 1) / LOOM_GGUF_DEFAULT_ALIGNMENT * LOOM_GGUF_DEFAULT_ALIGNMENT;
}

struct loom_gguf_writer *loom_gguf_writer_new(void)
{
    return calloc(1, sizeof(struct loom_gguf_writer));
}

void loom_gguf_writer_free(struct loom_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

/* Install key = (type, val); takes ownership of val (freed on failure). An existing key is replaced; an
 * empty key (which the reference refuses to read) is LOOM_E_ARG. */
static int set_kv(struct loom_gguf_writer *w, const char *key, size_t key_len, uint32_t type, uint8_t *val,
                  size_t val_len)
{
    if (!key_len) {
        free(val);
        return LOOM_E_ARG;
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        struct wkv *kv = &w->kv[i];
        if (kv->key_len == key_len && !memcmp(kv->key, key, key_len)) {
            free(kv->val);
            kv->type = type;
            kv->val = val;
            kv->val_len = val_len;
            return LOOM_OK;
        }
    }
    char *k = malloc(key_len + 1);
    struct wkv *kvs = k ? loom_grow(w->kv, &w->cap_kv, w->n_kv + 1, sizeof *kvs) : NULL;
    if (!kvs) {
        free(k);
        free(val);
        return LOOM_E_NOMEM;
    }
    w->kv = kvs;
    memcpy(k, key, key_len);
    k[key_len] = 0;
    w->kv[w->n_kv++] = (struct wkv){k, key_len, type, val, val_len};
    return LOOM_OK;
}

static int set_scalar(struct loom_gguf_writer *w, const char *key, uint32_t type, const void *v)
{
    if (!w || !key)
        return LOOM_E_ARG;
    uint8_t *val = malloc(fixed_size[type]);
    if (!val)
        return LOOM_E_NOMEM;
    memcpy(val, v, fixed_size[type]);
    return set_kv(w, key, strlen(key), type, val, fixed_size[type]);
}

int loom_gguf_writer_set_u32(struct loom_gguf_writer *w, const char *key, uint32_t v)
{
    return set_scalar(w, key, LOOM_GGUF_UINT32, &v);
}

int loom_gguf_writer_set_u16(struct loom_gguf_writer *w, const char *key, uint16_t v)
{
    return set_scalar(w, key, LOOM_GGUF_UINT16, &v);
}

int loom_gguf_writer_set_i32(struct loom_gguf_writer *w, const char *key, int32_t v)
{
    return set_scalar(w, key, LOOM_GGUF_INT32, &v);
}

int loom_gguf_writer_set_f32(struct loom_gguf_writer *w, const char *key, float v)
{
    return set_scalar(w, key, LOOM_GGUF_FLOAT32, &v);
}

int loom_gguf_writer_set_bool(struct loom_gguf_writer *w, const char *key, int v)
{
    uint8_t b = v != 0;
    return set_scalar(w, key, LOOM_GGUF_BOOL, &b);
}

int loom_gguf_writer_set_str(struct loom_gguf_writer *w, const char *key, const char *v)
{
    if (!w || !key || !v)
        return LOOM_E_ARG;
    uint64_t len = strlen(v);
    uint8_t *val = malloc(8 + len);
    if (!val)
        return LOOM_E_NOMEM;
    memcpy(val, &len, 8);
    memcpy(val + 8, v, len);
    return set_kv(w, key, strlen(key), LOOM_GGUF_STRING, val, 8 + len);
}

/* Allocate an array value: element type, count, then `payload` bytes left for the caller. */
static uint8_t *array_value(uint32_t elem_type, uint64_t n, uint64_t payload, size_t *len)
{
    if (payload > SIZE_MAX - 12)
        return NULL;
    *len = 12 + (size_t)payload;
    uint8_t *val = malloc(*len);
    if (val) {
        memcpy(val, &elem_type, 4);
        memcpy(val + 4, &n, 8);
    }
    return val;
}

int loom_gguf_writer_set_arr(struct loom_gguf_writer *w, const char *key, uint32_t elem_type, const void *data,
                             uint64_t n)
{
    uint64_t bytes;
    if (!w || !key || (n && !data) || elem_type > LOOM_GGUF_FLOAT64 || !fixed_size[elem_type] ||
        __builtin_mul_overflow(n, (uint64_t)fixed_size[elem_type], &bytes))
        return LOOM_E_ARG;
    if (elem_type == LOOM_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return LOOM_E_ARG;
    size_t len;
    uint8_t *val = array_value(elem_type, n, bytes, &len);
    if (!val)
        return LOOM_E_NOMEM;
    if (bytes)
        memcpy(val + 12, data, (size_t)bytes);
    return set_kv(w, key, strlen(key), LOOM_GGUF_ARRAY, val, len);
}

int loom_gguf_writer_set_arr_str(struct loom_gguf_writer *w, const char *key, const struct loom_gguf_str *s,
                                 uint64_t n)
{
    if (!w || !key || (n && !s))
        return LOOM_E_ARG;
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < n; i++)
        if ((s[i].len && !s[i].ptr) || __builtin_add_overflow(bytes, 8 + s[i].len, &bytes))
            return LOOM_E_ARG;
    size_t len;
    uint8_t *val = array_value(LOOM_GGUF_STRING, n, bytes, &len);
    if (!val)
        return LOOM_E_NOMEM;
    uint8_t *p = val + 12;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(p, &s[i].len, 8);
        if (s[i].len)
            memcpy(p + 8, s[i].ptr, (size_t)s[i].len);
        p += 8 + s[i].len;
    }
    return set_kv(w, key, strlen(key), LOOM_GGUF_ARRAY, val, len);
}

/* Bytes of `n` strings laid out back to back from p (already validated by the reader). */
static uint64_t strings_bytes(const uint8_t *p, uint64_t n)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        memcpy(&len, p + total, 8);
        total += 8 + len;
    }
    return total;
}

int loom_gguf_writer_copy_kv(struct loom_gguf_writer *w, const struct loom_gguf_kv *kv)
{
    if (!w || !kv || kv->type > LOOM_GGUF_FLOAT64)
        return LOOM_E_ARG;
    const uint8_t *src = kv->data;
    uint64_t bytes;
    size_t len;
    uint8_t *val;
    if (kv->type == LOOM_GGUF_ARRAY) {
        if (kv->arr_type > LOOM_GGUF_FLOAT64 || kv->arr_type == LOOM_GGUF_ARRAY)
            return LOOM_E_ARG;
        bytes = kv->arr_type == LOOM_GGUF_STRING ? strings_bytes(src, kv->arr_n) : kv->arr_n * fixed_size[kv->arr_type];
        if (!(val = array_value(kv->arr_type, kv->arr_n, bytes, &len)))
            return LOOM_E_NOMEM;
        memcpy(val + 12, src, (size_t)bytes);
    } else {
        len = kv->type == LOOM_GGUF_STRING ? (size_t)strings_bytes(src, 1) : fixed_size[kv->type];
        if (!(val = malloc(len)))
            return LOOM_E_NOMEM;
        memcpy(val, src, len);
    }
    return set_kv(w, kv->key.ptr, (size_t)kv->key.len, kv->type, val, len);
}

int loom_gguf_writer_add_tensor(struct loom_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne)
{
    const struct loom_type_traits *tr = loom_type_traits(type);
    if (!w || !name || strlen(name) >= LOOM_GGUF_MAX_NAME || !ne || !tr || n_dims < 1 || n_dims > LOOM_GGUF_MAX_DIMS ||
        ne[0] % (uint64_t)tr->block_size)
        return LOOM_E_ARG;
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return LOOM_E_ARG;
    struct wtensor t = {NULL, type, n_dims, {1, 1, 1, 1}, ne[0] / (uint64_t)tr->block_size, w->data_size};
    int ovf = __builtin_mul_overflow(t.nbytes, (uint64_t)tr->type_size, &t.nbytes);
    int64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        t.ne[d] = ne[d];
        ovf |= ne[d] > (uint64_t)INT64_MAX || __builtin_mul_overflow(nel, (int64_t)ne[d], &nel);
        if (d)
            ovf |= __builtin_mul_overflow(t.nbytes, ne[d], &t.nbytes);
    }
    if (ovf || t.nbytes > UINT64_MAX - w->data_size - LOOM_GGUF_DEFAULT_ALIGNMENT)
        return LOOM_E_ARG;
    while (t.n_dims > 1 && t.ne[t.n_dims - 1] == 1) /* as ggml's writer (ggml_n_dims): no trailing 1s */
        t.n_dims--;
    struct wtensor *ts = (t.name = strdup(name)) ? loom_grow(w->t, &w->cap_t, w->n_t + 1, sizeof *ts) : NULL;
    if (!ts) {
        free(t.name);
        return LOOM_E_NOMEM;
    }
    w->t = ts;
    w->t[w->n_t++] = t;
    w->data_size = align_up(w->data_size + t.nbytes);
    return LOOM_OK;
}

/* ---- writing --------------------------------------------------------------------------------- */

struct out {
    FILE *f;
    const char *path;
    uint64_t pos;
    loom_error *err;
};

static int out_put(struct out *o, const void *p, uint64_t n)
{
    if (n && fwrite(p, 1, (size_t)n, o->f) != n)
        return loom_errorf(o->err, LOOM_E_IO, "write '%s': %s", o->path, strerror(errno));
    o->pos += n;
    return LOOM_OK;
}

static int out_pad(struct out *o)
{
    static const uint8_t zeros[LOOM_GGUF_DEFAULT_ALIGNMENT];
    return out_put(o, zeros, align_up(o->pos) - o->pos);
}

static int write_header(struct loom_gguf_writer *w, struct out *o)
{
    uint32_t version = 3;
    uint64_t n_t = w->n_t, n_kv = w->n_kv;
    int rc = out_put(o, "GGUF", 4) || out_put(o, &version, 4) || out_put(o, &n_t, 8) || out_put(o, &n_kv, 8);
    for (size_t i = 0; !rc && i < w->n_kv; i++) {
        const struct wkv *kv = &w->kv[i];
        uint64_t kl = kv->key_len;
        rc = out_put(o, &kl, 8) || out_put(o, kv->key, kl) || out_put(o, &kv->type, 4) ||
             out_put(o, kv->val, kv->val_len);
    }
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        uint64_t nl = strlen(t->name);
        rc = out_put(o, &nl, 8) || out_put(o, t->name, nl) || out_put(o, &t->n_dims, 4) ||
             out_put(o, t->ne, 8 * (uint64_t)t->n_dims) || out_put(o, &t->type, 4) || out_put(o, &t->offset, 8);
    }
    if (!rc && w->n_t)
        rc = out_pad(o);
    return rc ? LOOM_E_IO : LOOM_OK;
}

static int write_data(struct loom_gguf_writer *w, struct out *o, loom_gguf_fill_fn fill, void *ctx)
{
    uint64_t max = 1;
    for (size_t i = 0; i < w->n_t; i++)
        max = w->t[i].nbytes > max ? w->t[i].nbytes : max;
    if (max > SIZE_MAX)
        return loom_errorf(o->err, LOOM_E_NOMEM, "tensor of %" PRIu64 " bytes does not fit in memory", max);
    uint8_t *buf = malloc((size_t)max);
    if (!buf)
        return loom_errorf(o->err, LOOM_E_NOMEM, "out of memory for a %" PRIu64 "-byte tensor buffer", max);
    int rc = LOOM_OK;
    for (size_t i = 0; !rc && i < w->n_t; i++) {
        rc = fill(ctx, i, buf, w->t[i].nbytes, o->err);
        if (!rc)
            rc = out_put(o, buf, w->t[i].nbytes);
        if (!rc)
            rc = out_pad(o);
    }
    free(buf);
    return rc;
}

/* No data (a NULL fill callback): the file grows to its full size as a hole, read back as zeros. */
static int write_holes(const struct loom_gguf_writer *w, struct out *o)
{
    uint64_t end = o->pos + w->data_size;
    if (fflush(o->f) || ftruncate(fileno(o->f), (off_t)end))
        return loom_errorf(o->err, LOOM_E_IO, "extend '%s' to %" PRIu64 " bytes: %s", o->path, end, strerror(errno));
    o->pos = end;
    return LOOM_OK;
}

/* The key general.alignment, if set, must agree with the 32 bytes this writer uses. */
static int check_alignment_key(const struct loom_gguf_writer *w, loom_error *err)
{
    for (size_t i = 0; i < w->n_kv; i++) {
        const struct wkv *kv = &w->kv[i];
        if (strcmp(kv->key, "general.alignment"))
            continue;
        uint32_t a = 0;
        if (kv->type == LOOM_GGUF_UINT32)
            memcpy(&a, kv->val, 4);
        if (a != LOOM_GGUF_DEFAULT_ALIGNMENT)
            return loom_errorf(err, LOOM_E_ARG, "key 'general.alignment': the writer supports only UINT32 %d",
                               LOOM_GGUF_DEFAULT_ALIGNMENT);
    }
    return LOOM_OK;
}

/* The directory holding path into dir[cap]: "." for a bare name, "/" for a name at the root; "." too when the
 * directory's name does not fit. */
static void parent_dir(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == path ? 1 : slash ? (size_t)(slash - path) : 0;
    if (n && n < cap)
        snprintf(dir, cap, "%.*s", (int)n, path);
    else
        snprintf(dir, cap, ".");
}

/* Make the rename durable: fsync the directory holding path (best effort). */
static void fsync_parent(const char *path)
{
    char dir[PATH_MAX];
    parent_dir(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* A temporary name's suffix: ".<pid>.tmp", or ".<pid>-<n>.tmp" (n < 100) when that was taken; at most this long. */
#define TMP_SUFFIX_MAX (sizeof ".4294967295-99.tmp" - 1)
/* A shortened temporary name's "~" and 16 hex digits of the output name's hash. */
#define TMP_HASH_LEN 17

/* The longest file name path's directory takes (its file system's NAME_MAX, 255 unless it says otherwise). */
static size_t name_max(const char *path)
{
    char dir[PATH_MAX];
    parent_dir(path, dir, sizeof dir);
    long n = pathconf(dir, _PC_NAME_MAX);
    return n > 0 ? (size_t)n : NAME_MAX;
}

/* The bytes the name of a file beside path may have: NAME_MAX, less when the path would reach PATH_MAX (the
 * directory part of path is dir_len bytes, under PATH_MAX - 1). */
static size_t name_room(const char *path, size_t dir_len)
{
    size_t room = name_max(path);
    return room < PATH_MAX - 1 - dir_len ? room : PATH_MAX - 1 - dir_len;
}

static uint64_t name_hash(const char *s) /* FNV-1a */
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* Temporary name n (0, 1, ...) for path into tmp[cap] (cap >= strlen(path) + TMP_SUFFIX_MAX + 1): path.<pid>.tmp
 * (path.<pid>-<n>.tmp) when that fits the directory's limits, else the file name cut at a UTF-8 character boundary
 * followed by ~<its hash> and the suffix, as long as fits (loom_gguf_check_output leaves room for it). */
static void temporary_name(const char *path, int n, char *tmp, size_t cap)
{
    char suffix[TMP_SUFFIX_MAX + 1];
    if (n)
        snprintf(suffix, sizeof suffix, ".%u-%u.tmp", (unsigned)getpid(), (unsigned)n % 100);
    else
        snprintf(suffix, sizeof suffix, ".%u.tmp", (unsigned)getpid());
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t dir_len = (size_t)(base - path), base_len = strlen(base), s = strlen(suffix);
    size_t room = name_room(path, dir_len);
    if (base_len + s <= room) {
        snprintf(tmp, cap, "%s%s", path, suffix);
        return;
    }
    size_t keep = room > s + TMP_HASH_LEN ? room - s - TMP_HASH_LEN : 0; /* (0: a file system of tiny names) */
    while (keep && ((uint8_t)base[keep] & 0xc0) == 0x80)
        keep--;
    snprintf(tmp, cap, "%.*s~%016llx%s", (int)(dir_len + keep), path, (unsigned long long)name_hash(base), suffix);
}

/* A new temporary file beside path (O_EXCL: never another's file, nor one of a concurrent writer to the same path),
 * named by temporary_name into tmp[cap]; NULL with errno set. Its mode is fopen's (0666 less the umask), as the
 * published file's. */
static FILE *create_temporary(const char *path, char *tmp, size_t cap)
{
    for (int n = 0; n < 100; n++) {
        temporary_name(path, n, tmp, cap);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            FILE *f = fdopen(fd, "wb");
            int e = errno; /* fdopen's, kept through the clean-up */
            if (!f)
                close(fd), unlink(tmp), errno = e;
            return f;
        }
        if (errno != EEXIST)
            return NULL;
    }
    return NULL; /* errno EEXIST */
}

/* The failure to create path's temporary file (errno e), said of path and its directory: the temporary's name is
 * the writer's own. */
static int create_failed(const char *path, int e, loom_error *err)
{
    char dir[PATH_MAX];
    struct stat st;
    parent_dir(path, dir, sizeof dir);
    if (e == ENOENT && stat(dir, &st) != 0) /* (a directory that exists may refuse new names with ENOENT: /proc) */
        return loom_errorf(err, LOOM_E_IO, "output '%s': directory '%s' does not exist", path, dir);
    return loom_errorf(err, LOOM_E_IO, "output '%s': cannot create a file in directory '%s': %s", path, dir,
                       strerror(e));
}

int loom_gguf_check_output(const char *path, loom_error *err)
{
    if (!path || !*path)
        return loom_errorf(err, LOOM_E_ARG, "output: expected a file name, found '%s'", path ? path : "(null)");
    size_t len = strlen(path);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t dir_len = (size_t)(base - path), base_len = len - dir_len;
    if (len >= PATH_MAX)
        return loom_errorf(err, LOOM_E_ARG, "output '%.200s...': path of %zu bytes, expected under %d (PATH_MAX)", path,
                           len, PATH_MAX);
    if (PATH_MAX - 1 - dir_len < TMP_SUFFIX_MAX + TMP_HASH_LEN + 1)
        return loom_errorf(err, LOOM_E_ARG, "output '%.200s...': directory part of %zu bytes, expected at most %d "
                           "(PATH_MAX less room for the writer's temporary file name)", path, dir_len,
                           PATH_MAX - 1 - (int)(TMP_SUFFIX_MAX + TMP_HASH_LEN + 1));
    size_t room = name_room(path, dir_len), max = name_max(path);
    if (base_len > room && room == max)
        return loom_errorf(err, LOOM_E_ARG, "output '%s': file name of %zu bytes, expected at most %zu (NAME_MAX, "
                           "the longest file name its file system takes)", path, base_len, room);
    if (base_len > room)
        return loom_errorf(err, LOOM_E_ARG, "output '%s': file name of %zu bytes, expected at most %zu (PATH_MAX "
                           "%d less its directory's %zu bytes)", path, base_len, room, PATH_MAX, dir_len);
    /* the rename replaces the directory entry: never let it replace a device, FIFO or symlink */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return loom_errorf(err, LOOM_E_ARG, "output '%s': expected a regular file or a new path, found %s", path,
                           S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory"
                                                                                       : "a device, FIFO or socket");
    return LOOM_OK;
}

/* Write w's file into o->f: header, then the data from fill (or holes), flushed and synced; closes o->f. */
static int write_file(struct loom_gguf_writer *w, struct out *o, loom_gguf_fill_fn fill, void *ctx)
{
    int rc = write_header(w, o);
    if (!rc && fill)
        rc = write_data(w, o, fill, ctx);
    else if (!rc)
        rc = write_holes(w, o);
    if (!rc && (fflush(o->f) || fsync(fileno(o->f))))
        rc = loom_errorf(o->err, LOOM_E_IO, "flush '%s': %s", o->path, strerror(errno));
    if (fclose(o->f) && !rc)
        rc = loom_errorf(o->err, LOOM_E_IO, "close '%s': %s", o->path, strerror(errno));
    return rc;
}

int loom_gguf_writer_stage(struct loom_gguf_writer *w, const char *path, loom_gguf_fill_fn fill, void *ctx,
                           struct loom_gguf_staged *staged, loom_error *err)
{
    *staged = (struct loom_gguf_staged){NULL, NULL};
    if (!w)
        return loom_errorf(err, LOOM_E_ARG, "gguf writer: missing writer");
    int rc = loom_gguf_check_output(path, err);
    if (!rc)
        rc = check_alignment_key(w, err);
    if (rc)
        return rc;
    struct stat st;
    int existed = lstat(path, &st) == 0;
    size_t cap = strlen(path) + TMP_SUFFIX_MAX + 1;
    char *tmp = malloc(cap), *copy = strdup(path);
    if (!tmp || !copy) {
        free(tmp);
        free(copy);
        return loom_errorf(err, LOOM_E_NOMEM, "output '%s': out of memory", path);
    }
    struct out o = {create_temporary(path, tmp, cap), path, 0, err};
    if (o.f && existed && fchmod(fileno(o.f), st.st_mode & 07777) != 0) { /* a replaced file keeps its mode */
        int e = errno;
        fclose(o.f), unlink(tmp), errno = e, o.f = NULL;
    }
    int created = o.f != NULL;
    rc = created ? write_file(w, &o, fill, ctx) : create_failed(path, errno, err);
    if (rc) {
        if (created)
            unlink(tmp);
        free(tmp);
        free(copy);
        return rc;
    }
    *staged = (struct loom_gguf_staged){copy, tmp};
    return LOOM_OK;
}

/* Whether paths a and b name files of one directory (as written: "d/x" and "d/y"). */
static int same_dir(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    size_t na = sa ? (size_t)(sa - a) : 0, nb = sb ? (size_t)(sb - b) : 0;
    return na == nb && !memcmp(a, b, na);
}

void loom_gguf_discard(struct loom_gguf_staged *staged, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (staged[i].tmp)
            unlink(staged[i].tmp);
        free(staged[i].path);
        free(staged[i].tmp);
        staged[i] = (struct loom_gguf_staged){NULL, NULL};
    }
}

int loom_gguf_publish(struct loom_gguf_staged *staged, size_t n, loom_error *err)
{
    size_t done = 0;
    while (done < n && rename(staged[done].tmp, staged[done].path) == 0)
        done++;
    int rc = LOOM_OK;
    if (done < n) {
        rc = loom_errorf(err, LOOM_E_IO, "replace '%s' with the file written: %s%s", staged[done].path,
                         strerror(errno), done ? " (the files of this write already in place were removed)" : "");
        for (size_t i = 0; i < done; i++)
            unlink(staged[i].path);
    }
    for (size_t i = 0; i < done; i++) { /* renamed: no temporary left; one fsync per directory */
        if (!rc && (i + 1 == done || !same_dir(staged[i].path, staged[i + 1].path)))
            fsync_parent(staged[i].path);
        free(staged[i].tmp);
        staged[i].tmp = NULL;
    }
    loom_gguf_discard(staged, n);
    return rc;
}

int loom_gguf_writer_write(struct loom_gguf_writer *w, const char *path, loom_gguf_fill_fn fill, void *ctx,
                           loom_error *err)
{
    struct loom_gguf_staged staged;
    int rc = loom_gguf_writer_stage(w, path, fill, ctx, &staged, err);
    return rc ? rc : loom_gguf_publish(&staged, 1, err);
}
