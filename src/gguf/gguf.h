/* gguf.h — the GGUF container: a bounds-checked reader over an mmap'd file (v2 and v3), the view of a split
 * model's parts as one (gguf_split.c) and a streaming writer. The reader validates every count, size and offset
 * with checked arithmetic before allocating, and never aborts on bad input: errors name the field, the
 * expectation and the finding. */
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
    uint32_t part;                   /* the file it is in: parts[part] of its handle (0 unless split) */
    uint64_t offset;                 /* relative to the data section of that file */
    uint64_t nbytes;                 /* computed from type and shape */
    const void *data;                /* into the map; valid until loom_gguf_close */
};

/* One file a handle's tensors come from: the file itself, or one part of a split model (gguf_split.c). Tensor t
 * lies at byte data_offset + t->offset of the file at path (what a reader with pread needs). */
struct loom_gguf_part {
    char *path;              /* as opened (the first part's as the caller named it); NULL for a caller's buffer */
    struct loom_gguf *file;  /* that file's own handle, which owns its map; NULL for part 0 (the handle itself) */
    uint64_t size;           /* file bytes */
    uint64_t data_offset;    /* start of its tensor data section */
    uint64_t first_tensor;   /* its tensors are tensors[first_tensor, first_tensor + n_tensors) of the handle */
    uint64_t n_tensors;
};

/* Metadata keys of a split model, as llama.cpp's gguf-split writes them (UINT16, UINT16, INT32). */
#define LOOM_SPLIT_NO "split.no"
#define LOOM_SPLIT_COUNT "split.count"
#define LOOM_SPLIT_TENSORS "split.tensors.count"

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
    /* The files the tensors come from, in split.no order: one (the file itself) unless loom_gguf_open_model opened
     * a split model, whose metadata are its first part's (map, size, kv, data_offset above) and whose tensor table
     * is every part's, part by part in file order. */
    uint32_t n_parts;
    struct loom_gguf_part *parts;
    /* What the GGUF convention forbids but the reference engine accepts (a key that is not lower_snake_case
     * ASCII, a BOOL byte other than 0 or 1, ...): counted, the first LOOM_GGUF_WARNINGS_KEPT messages kept. */
    uint64_t n_warnings;
    char warnings[LOOM_GGUF_WARNINGS_KEPT][200];
};

/* loom_gguf_open over a caller-owned buffer (for tests); the buffer must outlive the handle. */
int loom_gguf_open_buffer(const void *buf, size_t size, struct loom_gguf **out, loom_error *err);

/* Replace g's tensor table by tensors[n] (taking ownership; each tensor's part and data already set) and rebuild
 * its name index: LOOM_E_FORMAT on a duplicate name, LOOM_E_NOMEM. For gguf_split.c, which merges parts. */
int loom_gguf_adopt_tensors(struct loom_gguf *g, struct loom_gguf_tensor *tensors, uint64_t n, loom_error *err);

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
/* A byte range [begin, end) of a file. */
struct loom_byte_range {
    uint64_t begin, end;
};

/* Hold in anonymous memory the pages of part `part` of g's map (g itself for part 0) that cover keep[n] (file
 * byte ranges, sorted here), at the same addresses, read through fd (that part's file, open); make every other
 * page of the map an inaccessible anonymous reservation (its addresses stay the map's until loom_gguf_close)
 * and drop the file's page cache. Afterwards no page of that map is backed by the file (a truncation cannot
 * raise SIGBUS) and pointers into the kept ranges stay valid; *held = the bytes held (whole pages). For a map
 * loom_gguf_open made (not a caller's buffer). LOOM_OK, LOOM_E_NOMEM, or LOOM_E_IO naming the bytes that could
 * not be read (the handle must then be closed). */
int loom_gguf_hold(const struct loom_gguf *g, uint32_t part, int fd, struct loom_byte_range *keep, size_t n,
                   uint64_t *held, loom_error *err);

/* For a message about a tensor g lacks: " (in none of the N parts)" when g is a split model, else "". */
const char *loom_gguf_in_no_part(const struct loom_gguf *g, char *buf, size_t cap);
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
 * The file appears atomically (written to a new temporary file beside it, fsync, rename): PATH.<pid>.tmp, or when
 * that name would pass the directory's NAME_MAX (or the path PATH_MAX), PATH's name cut short followed by
 * ~<16 hex digits of its hash>.<pid>.tmp. Errors name PATH (and its directory when the file cannot be created
 * there), never the temporary file. */
struct loom_gguf_writer;

struct loom_gguf_writer *loom_gguf_writer_new(void);
void loom_gguf_writer_free(struct loom_gguf_writer *w);
int loom_gguf_writer_set_u32(struct loom_gguf_writer *w, const char *key, uint32_t v);
int loom_gguf_writer_set_u16(struct loom_gguf_writer *w, const char *key, uint16_t v);
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
/* Declare a tensor (ne in ggml order, n_dims 1..4, ggml type id). Data comes later. Trailing dimensions of 1
 * are not written (n_dims as ggml_n_dims counts them, as llama.cpp's writer does: [2048, 1] is a 1-D tensor). */
int loom_gguf_writer_add_tensor(struct loom_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                const uint64_t *ne);
/* Produce each tensor's bytes in declaration order: fill(ctx, index, buf, nbytes) writes exactly the
 * tensor's nbytes into buf and returns LOOM_OK or an error. fill NULL: no tensor data is written; the file is
 * extended to its full size (ftruncate), so the data reads as zeros and a file system with sparse files stores
 * only the header (loom synth --sparse: geometry tests of models larger than the disk). */
typedef int (*loom_gguf_fill_fn)(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err);
int loom_gguf_writer_write(struct loom_gguf_writer *w, const char *path, loom_gguf_fill_fn fill, void *ctx,
                           loom_error *err);

/* What the writer refuses of an output path before writing anything (LOOM_E_ARG naming the path, the limit and the
 * finding): an empty name, a path of PATH_MAX bytes or more (less the room a temporary name needs), a file name
 * longer than its directory takes (NAME_MAX), an existing entry that is not a regular file (the rename would
 * replace a device, FIFO, symbolic link or directory). Writers of several files check every path first. */
int loom_gguf_check_output(const char *path, loom_error *err);

/* Several files that appear together or not at all (a split model's parts): each written with
 * loom_gguf_writer_stage to its temporary file, synced, not yet in place; then loom_gguf_publish renames them all
 * into place, or loom_gguf_discard removes them all. */
struct loom_gguf_staged {
    char *path; /* the output (a copy) */
    char *tmp;  /* its temporary file, written and synced */
};
/* loom_gguf_writer_write up to the rename: *staged holds the file to publish or discard (on failure nothing is
 * left and *staged is empty). */
int loom_gguf_writer_stage(struct loom_gguf_writer *w, const char *path, loom_gguf_fill_fn fill, void *ctx,
                           struct loom_gguf_staged *staged, loom_error *err);
/* Rename staged[0..n) into place in order, then sync their directories. When a rename fails, the files of this
 * call already renamed are removed and the remaining temporaries too, so that no part of the set is left (an
 * earlier file at one of those paths that was replaced is gone): LOOM_E_IO naming the path. Frees staged[]'s
 * strings either way. */
int loom_gguf_publish(struct loom_gguf_staged *staged, size_t n, loom_error *err);
/* Remove staged[0..n)'s temporary files and free their strings (entries already empty are skipped). */
void loom_gguf_discard(struct loom_gguf_staged *staged, size_t n);

/* ---- split models (gguf_split.c) ----------------------------------------------------------------
 * Write tensors [first, first + count) of `in` as one part of a split model, as llama.cpp's gguf-split writes one:
 * with all of in's metadata (split keys excepted) when with_meta, then split.no = part_no, split.count = n_parts
 * and split.tensors.count = n_total (values taken as given, so tests can write inconsistent parts). One file:
 * loom_gguf_write_split writes a whole set. */
struct loom_split_part {
    uint32_t part_no, n_parts;
    int32_t n_total;
    uint64_t first, count;
    int with_meta;
};
int loom_gguf_write_part(const struct loom_gguf *in, const struct loom_split_part *p, const char *path,
                         loom_error *err);
/* Write the n parts p[0..n) of a split model, part k to loom_split_path(prefix, k, n), all of them or none: every
 * part's path is checked (loom_gguf_check_output) before any is written, each is staged, and they are published
 * together (loom_gguf_publish); on any failure no part and no temporary file is left. */
int loom_gguf_write_split(const struct loom_gguf *in, const struct loom_split_part *p, uint32_t n, const char *prefix,
                          loom_error *err);
/* The name of part `index` (0-based) of n_parts: PREFIX-%05d-of-%05d.gguf (index + 1), as llama_split_path.
 * LOOM_E_ARG when it does not fit in cap bytes. */
int loom_split_path(char *buf, size_t cap, const char *prefix, uint32_t index, uint32_t n_parts, loom_error *err);

#endif
