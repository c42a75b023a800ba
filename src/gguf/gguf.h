/* gguf.h — the GGUF container: a bounds-checked reader over an mmap'd file (v2 and v3) and a
 * streaming writer. The reader validates every count, size and offset with checked arithmetic before
 * allocating, and never aborts on bad input: errors name the field, the expectation and the finding. */
#ifndef LOOM_GGUF_H
#define LOOM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* The metadata value types (enum loom_gguf_vtype), LOOM_GGUF_MAX_DIMS, LOOM_GGUF_MAX_NAME and
 * LOOM_GGUF_WARNINGS_KEPT are public (loom.h), as are loom_gguf_open, loom_gguf_close and loom_gguf_warning. */
#define LOOM_GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the mapped file: not NUL-terminated. */
struct loom_gguf_str {
    uint64_t len;
    const char *ptr;
};

/* One metadata key/value. For scalars, `data` points at the little-endian value in the map.
 * For arrays, arr_type/arr_n describe the elements and `data` points at the first element; arrays of
 * strings are walked with loom_gguf_kv_strings. */
struct loom_gguf_kv {
    struct loom_gguf_str key;
    uint32_t type;     /* enum loom_gguf_vtype */
    uint32_t arr_type; /* element type when type == ARRAY */
    uint64_t arr_n;    /* element count when type == ARRAY */
    const uint8_t *data;
};

struct loom_gguf_tensor {
    struct loom_gguf_str name;
    uint32_t n_dims;
    uint64_t ne[LOOM_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the contiguous (row) dimension; unused = 1 */
    uint32_t type;                   /* ggml type id (enum loom_type in kernels/types.h) */
    uint64_t offset;                 /* relative to the data section */
    uint64_t nbytes;                 /* computed from type and shape */
    const void *data;                /* into the map; valid until loom_gguf_close */
};

struct loom_gguf {
    const uint8_t *map;
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    struct loom_gguf_kv *kv;
    uint64_t n_tensors;
    struct loom_gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset; /* start of the tensor data section in the file */
    /* What the GGUF convention forbids but the reference engine accepts (a key that is not lower_snake_case
     * ASCII, a BOOL byte other than 0 or 1, ...): counted, the first LOOM_GGUF_WARNINGS_KEPT messages kept. */
    uint64_t n_warnings;
    char warnings[LOOM_GGUF_WARNINGS_KEPT][200];
};

/* loom_gguf_open over a caller-owned buffer (for tests); the buffer must outlive the handle. */
int loom_gguf_open_buffer(const void *buf, size_t size, struct loom_gguf **out, loom_error *err);

const struct loom_gguf_kv *loom_gguf_find_kv(const struct loom_gguf *g, const char *key);
const struct loom_gguf_tensor *loom_gguf_find_tensor(const struct loom_gguf *g, const char *name);

/* Typed getters: LOOM_E_FORMAT naming the key when missing (unless optional) or of another type.
 * get_u32 accepts UINT32 (and INT32 >= 0); get_f32 accepts FLOAT32. When optional is nonzero a missing
 * key leaves *out untouched and returns LOOM_OK. */
int loom_gguf_get_u32(const struct loom_gguf *g, const char *key, int optional, uint32_t *out, loom_error *err);
int loom_gguf_get_f32(const struct loom_gguf *g, const char *key, int optional, float *out, loom_error *err);
int loom_gguf_get_str(const struct loom_gguf *g, const char *key, int optional, struct loom_gguf_str *out,
                      loom_error *err);
/* An array key with elements of elem_type; *out points at it. */
int loom_gguf_get_arr(const struct loom_gguf *g, const char *key, uint32_t elem_type, int optional,
                      const struct loom_gguf_kv **out, loom_error *err);
/* Fill out[0..n) with the strings of an array-of-strings kv (n must equal kv->arr_n). */
int loom_gguf_kv_strings(const struct loom_gguf_kv *kv, struct loom_gguf_str *out, uint64_t n, loom_error *err);
/* Count a warning on g and keep its message while there is room (g->warnings): what the file's readers accept
 * but report (the reader's GGUF-convention warnings, the tokenizer's ignored special token ids). */
void loom_gguf_warnf(struct loom_gguf *g, const char *fmt, ...) LOOM_PRINTF_FORMAT(2, 3);
/* Compare a mapped string with a C string. */
int loom_gguf_str_eq(struct loom_gguf_str s, const char *c);
/* Advice that the bytes [ptr, ptr + len) of g's map will not be read again soon (metadata consumed at load,
 * such as the tokenizer's merges): for a mapped file the whole pages inside are dropped from memory, and a
 * later read faults them back in from the file; nothing for a caller's buffer or a range outside the map. */
void loom_gguf_release(const struct loom_gguf *g, const void *ptr, uint64_t len);

/* ---- writer ----------------------------------------------------------------------------------
 * Build a file: add metadata and tensor infos, then stream tensor data in the order added. Setters and
 * add_tensor return LOOM_E_ARG for what the reader would refuse (an empty key, a tensor name of
 * LOOM_GGUF_MAX_NAME bytes or more, a duplicate tensor, a partial block).
 * The file appears atomically (written to PATH.tmp, fsync, rename). */
struct loom_gguf_writer;

struct loom_gguf_writer *loom_gguf_writer_new(void);
void loom_gguf_writer_free(struct loom_gguf_writer *w);
int loom_gguf_writer_set_u32(struct loom_gguf_writer *w, const char *key, uint32_t v);
int loom_gguf_writer_set_i32(struct loom_gguf_writer *w, const char *key, int32_t v);
int loom_gguf_writer_set_f32(struct loom_gguf_writer *w, const char *key, float v);
int loom_gguf_writer_set_bool(struct loom_gguf_writer *w, const char *key, int v);
int loom_gguf_writer_set_str(struct loom_gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (elem_type not STRING/ARRAY); data is copied. */
int loom_gguf_writer_set_arr(struct loom_gguf_writer *w, const char *key, uint32_t elem_type, const void *data,
                             uint64_t n);
/* Array of strings; the strings are copied. */
int loom_gguf_writer_set_arr_str(struct loom_gguf_writer *w, const char *key, const struct loom_gguf_str *s,
                                 uint64_t n);
/* Copy one kv verbatim from a reader (e.g. the tokenizer arrays of a vocab file). */
int loom_gguf_writer_copy_kv(struct loom_gguf_writer *w, const struct loom_gguf_kv *kv);
/* Declare a tensor (ne in ggml order, n_dims 1..4, ggml type id). Data comes later. */
int loom_gguf_writer_add_tensor(struct loom_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne);
/* Produce each tensor's bytes in declaration order: fill(ctx, index, buf, nbytes) writes exactly the
 * tensor's nbytes into buf and returns LOOM_OK or an error. */
typedef int (*loom_gguf_fill_fn)(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err);
int loom_gguf_writer_write(struct loom_gguf_writer *w, const char *path, loom_gguf_fill_fn fill, void *ctx,
                           loom_error *err);

#endif
