/* gguf_cases.h — GGUF files built byte by byte for the reader's tests: a small emitter, and a catalogue of
 * files that break (or keep) one rule each of the reference engine's GGUF reader or of the GGUF convention.
 * Each case states the reference's verdict (read from its gguf.cpp and llama-model-loader), which
 * tests/parity/test_ref_gguf.c confirms against the reference itself; tests/test_gguf.c checks loom's
 * message. */
#ifndef LOOM_TEST_GGUF_CASES_H
#define LOOM_TEST_GGUF_CASES_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kernels/types.h"

/* ---- a tiny GGUF byte emitter ------------------------------------------------------------------ */

/* Bytes p[0..n); a file written from it holds hole_len zero bytes (a sparse hole) at hole_at when hole_len
 * is nonzero, so that files over the reference's 1 GiB limits cost no disk. */
struct gb {
    uint8_t *p;
    size_t n, cap;
    size_t hole_at;
    uint64_t hole_len;
};

static inline void gb_put(struct gb *b, const void *v, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p)
            abort();
    }
    if (n)
        memcpy(b->p + b->n, v, n);
    b->n += n;
}

static inline void gb_u32(struct gb *b, uint32_t v) { gb_put(b, &v, 4); }
static inline void gb_u64(struct gb *b, uint64_t v) { gb_put(b, &v, 8); }

static inline void gb_strn(struct gb *b, const char *s, size_t n)
{
    gb_u64(b, n);
    gb_put(b, s, n);
}

static inline void gb_str(struct gb *b, const char *s) { gb_strn(b, s, strlen(s)); }

static inline void gb_header(struct gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gb_put(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}

static inline void gb_kv_u32(struct gb *b, const char *key, uint32_t v)
{
    gb_str(b, key);
    gb_u32(b, LOOM_GGUF_UINT32);
    gb_u32(b, v);
}

static inline void gb_kv_str(struct gb *b, const char *key, const char *v)
{
    gb_str(b, key);
    gb_u32(b, LOOM_GGUF_STRING);
    gb_str(b, v);
}

static inline void gb_tensor_named(struct gb *b, const char *name, size_t name_len, uint32_t n_dims,
                                   const uint64_t *ne, uint32_t type, uint64_t offset)
{
    gb_strn(b, name, name_len);
    gb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        gb_u64(b, ne[i]);
    gb_u32(b, type);
    gb_u64(b, offset);
}

static inline void gb_tensor(struct gb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                             uint64_t offset)
{
    gb_tensor_named(b, name, strlen(name), n_dims, ne, type, offset);
}

/* Pad to `align` and append `n` zero data bytes. */
static inline void gb_data_aligned(struct gb *b, size_t align, size_t n)
{
    static const uint8_t z[64];
    gb_put(b, z, (align - b->n % align) % align);
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        gb_put(b, z, k);
        n -= k;
    }
}

static inline void gb_data(struct gb *b, size_t n) { gb_data_aligned(b, 32, n); }

/* Write b to path (with its hole, if any); 0 on success. */
static inline int gb_write_file(const struct gb *b, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    size_t head = b->hole_len ? b->hole_at : b->n;
    int bad = write(fd, b->p, head) != (ssize_t)head;
    if (!bad && b->hole_len) {
        off_t tail = (off_t)(b->hole_at + b->hole_len);
        bad = ftruncate(fd, tail) != 0 ||
              pwrite(fd, b->p + b->hole_at, b->n - b->hole_at, tail) != (ssize_t)(b->n - b->hole_at);
    }
    return close(fd) != 0 || bad ? -1 : 0;
}

/* ---- the catalogue ------------------------------------------------------------------------------ */

enum gguf_verdict {
    GC_ACCEPT,      /* the reference accepts; loom accepts without a warning */
    GC_WARN,        /* the reference accepts; only the GGUF convention forbids it: loom accepts and warns */
    GC_REFUSE,      /* the reference refuses; so does loom */
    GC_LOOM_REFUSES /* the reference accepts; loom refuses by design: a tensor type it does not implement, or a
                     * shape of 2^64 elements whose count and size wrap to 0 in the reference */
};

struct gguf_case {
    const char *name;
    enum gguf_verdict verdict;
    const char *says; /* part of loom's error (refused) or first warning (GC_WARN); NULL for GC_ACCEPT */
    void (*build)(struct gb *b);
};

#define GC_BIG ((1ull << 30) + 1) /* one over the reference's 1 GiB limits on strings and arrays */

static const uint64_t gc_ne_a[1] = {8}, gc_ne_b[2] = {4, 2};

/* Tensors "a" F32 [8] at 0 and "b" F32 [4, 2] at 32, then the data section (alignment 32). */
static inline void gc_tensors(struct gb *b)
{
    gb_tensor(b, "a", 1, gc_ne_a, LOOM_TYPE_F32, 0);
    gb_tensor(b, "b", 2, gc_ne_b, LOOM_TYPE_F32, 32);
    gb_data(b, 64);
}

/* A valid v3 file with general.architecture, `extra` more keys written by kvs, and the two tensors. */
static inline void gc_file(struct gb *b, uint64_t extra, void (*kvs)(struct gb *b))
{
    gb_header(b, 3, 2, 1 + extra);
    gb_kv_str(b, "general.architecture", "test");
    if (kvs)
        kvs(b);
    gc_tensors(b);
}

/* Header and general.architecture, then the tensor infos tinfos writes and `data` zero bytes after padding. */
static inline void gc_tensor_file(struct gb *b, uint64_t n_tensors, void (*tinfos)(struct gb *b), size_t data)
{
    gb_header(b, 3, n_tensors, 1);
    gb_kv_str(b, "general.architecture", "test");
    tinfos(b);
    gb_data(b, data);
}

/* -- keys -- */
static void gck_empty(struct gb *b)
{
    gb_kv_u32(b, "", 1);
    gb_kv_str(b, "general.name", "x");
}
static void gc_empty_key(struct gb *b) { gc_file(b, 2, gck_empty); }
static void gck_dup(struct gb *b) { gb_kv_str(b, "general.architecture", "again"); }
static void gc_dup_key(struct gb *b) { gc_file(b, 1, gck_dup); }
static void gc_big_key(struct gb *b)
{
    gb_header(b, 3, 0, 1);
    gb_u64(b, GC_BIG);
    b->hole_at = b->n, b->hole_len = GC_BIG; /* the key's bytes */
    gb_u32(b, LOOM_GGUF_UINT8);
    gb_put(b, "\1", 1);
}
static void gc_big_string(struct gb *b)
{
    gb_header(b, 3, 0, 1);
    gb_str(b, "k");
    gb_u32(b, LOOM_GGUF_STRING);
    gb_u64(b, GC_BIG);
    b->hole_at = b->n, b->hole_len = GC_BIG;
}
static void gc_big_array(struct gb *b)
{
    gb_header(b, 3, 0, 1);
    gb_str(b, "k");
    gb_u32(b, LOOM_GGUF_ARRAY);
    gb_u32(b, LOOM_GGUF_UINT8);
    gb_u64(b, GC_BIG);
    b->hole_at = b->n, b->hole_len = GC_BIG;
}
static void gck_bad_utf8(struct gb *b) { gb_kv_u32(b, "general.\xff\xfe", 1); }
static void gc_key_bad_utf8(struct gb *b) { gc_file(b, 1, gck_bad_utf8); }
static void gck_upper(struct gb *b) { gb_kv_u32(b, "General.Count", 1); }
static void gc_key_upper(struct gb *b) { gc_file(b, 1, gck_upper); }
static void gck_hyphen(struct gb *b) { gb_kv_u32(b, "general.my-count", 1); }
static void gc_key_hyphen(struct gb *b) { gc_file(b, 1, gck_hyphen); }
static void gck_empty_seg(struct gb *b) { gb_kv_u32(b, "general..count", 1); }
static void gc_key_empty_segment(struct gb *b) { gc_file(b, 1, gck_empty_seg); }
static void gck_nul(struct gb *b)
{
    gb_strn(b, "general.count\0x", 15);
    gb_u32(b, LOOM_GGUF_UINT32);
    gb_u32(b, 1);
}
static void gc_key_nul(struct gb *b) { gc_file(b, 1, gck_nul); }
static void gck_long(struct gb *b)
{
    char *k = malloc(65536);
    memset(k, 'k', 65536);
    gb_strn(b, k, 65536);
    gb_u32(b, LOOM_GGUF_UINT32);
    gb_u32(b, 1);
    free(k);
}
static void gc_key_65536(struct gb *b) { gc_file(b, 1, gck_long); }
static void gck_digits(struct gb *b) { gb_kv_str(b, "general.base_model.0.name", "x"); }
static void gc_key_digits(struct gb *b) { gc_file(b, 1, gck_digits); }
static void gck_arch(struct gb *b) { gb_kv_u32(b, "command-r.block_count", 1); }
static void gc_key_arch_hyphen(struct gb *b) { gc_file(b, 1, gck_arch); }

/* -- values -- */
static void gck_vtype13(struct gb *b)
{
    gb_str(b, "k");
    gb_u32(b, 13);
    gb_u32(b, 0);
}
static void gc_vtype_13(struct gb *b) { gc_file(b, 1, gck_vtype13); }
static void gck_vtype_neg(struct gb *b)
{
    gb_str(b, "k");
    gb_u32(b, 0xffffffffu);
    gb_u32(b, 0);
}
static void gc_vtype_negative(struct gb *b) { gc_file(b, 1, gck_vtype_neg); }
static void gck_nested(struct gb *b)
{
    gb_str(b, "k");
    gb_u32(b, LOOM_GGUF_ARRAY);
    gb_u32(b, LOOM_GGUF_ARRAY);
    gb_u64(b, 0);
}
static void gc_nested_array(struct gb *b) { gc_file(b, 1, gck_nested); }
static void gck_etype13(struct gb *b)
{
    gb_str(b, "k");
    gb_u32(b, LOOM_GGUF_ARRAY);
    gb_u32(b, 13);
    gb_u64(b, 0);
}
static void gc_array_type_13(struct gb *b) { gc_file(b, 1, gck_etype13); }
static void gc_string_past_end(struct gb *b)
{
    gb_header(b, 3, 0, 1);
    gb_str(b, "k");
    gb_u32(b, LOOM_GGUF_STRING);
    gb_u64(b, 1000);
    gb_put(b, "short", 5);
}
static void gc_strings_past_end(struct gb *b)
{
    gb_header(b, 3, 0, 1);
    gb_str(b, "k");
    gb_u32(b, LOOM_GGUF_ARRAY);
    gb_u32(b, LOOM_GGUF_STRING);
    gb_u64(b, 1u << 29);
    gb_str(b, "one");
}
static void gck_bool2(struct gb *b)
{
    gb_str(b, "general.flag");
    gb_u32(b, LOOM_GGUF_BOOL);
    gb_put(b, "\2", 1);
}
static void gc_bool_2(struct gb *b) { gc_file(b, 1, gck_bool2); }
static void gck_bools(struct gb *b)
{
    gb_str(b, "general.flags");
    gb_u32(b, LOOM_GGUF_ARRAY);
    gb_u32(b, LOOM_GGUF_BOOL);
    gb_u64(b, 3);
    gb_put(b, "\1\0\7", 3);
}
static void gc_bool_array_7(struct gb *b) { gc_file(b, 1, gck_bools); }
static void gc_cut_in_value(struct gb *b)
{
    gb_header(b, 3, 0, 1);
    gb_str(b, "k");
    gb_u32(b, LOOM_GGUF_UINT64);
    gb_u32(b, 7);
}

/* -- header -- */
static void gc_valid(struct gb *b) { gc_file(b, 0, NULL); }
static void gc_version(struct gb *b, uint32_t v)
{
    gc_valid(b);
    memcpy(b->p + 4, &v, 4);
}
static void gc_version_0(struct gb *b) { gc_version(b, 0); }
static void gc_version_1(struct gb *b) { gc_version(b, 1); }
static void gc_version_2(struct gb *b) { gc_version(b, 2); }
static void gc_version_4(struct gb *b) { gc_version(b, 4); }
static void gc_version_swapped(struct gb *b) { gc_version(b, 0x03000000u); }
static void gc_bad_magic(struct gb *b)
{
    gc_valid(b);
    b->p[3] = 'G';
}
static void gc_short_header(struct gb *b)
{
    gc_valid(b);
    b->n = 20;
}
static void gc_n_tensors_negative(struct gb *b)
{
    gc_valid(b);
    uint64_t n = 1ull << 63;
    memcpy(b->p + 8, &n, 8);
}
static void gc_n_kv_huge(struct gb *b)
{
    gc_valid(b);
    uint64_t n = 1ull << 40;
    memcpy(b->p + 16, &n, 8);
}
static void gc_trailing_bytes(struct gb *b)
{
    gc_valid(b);
    gb_put(b, "trailing", 8);
}

/* -- alignment -- */
static void gc_align_file(struct gb *b, uint32_t type, uint64_t a)
{
    gb_header(b, 3, 2, 2);
    gb_kv_str(b, "general.architecture", "test");
    gb_str(b, "general.alignment");
    gb_u32(b, type);
    gb_put(b, &a, type == LOOM_GGUF_UINT64 ? 8 : 4);
    gb_tensor(b, "a", 1, gc_ne_a, LOOM_TYPE_F32, 0);
    gb_tensor(b, "b", 2, gc_ne_b, LOOM_TYPE_F32, 32);
    gb_data_aligned(b, a && !(a & (a - 1)) ? (size_t)a : 32, 64);
}
static void gc_align_u64(struct gb *b) { gc_align_file(b, LOOM_GGUF_UINT64, 32); }
static void gc_align_0(struct gb *b) { gc_align_file(b, LOOM_GGUF_UINT32, 0); }
static void gc_align_24(struct gb *b) { gc_align_file(b, LOOM_GGUF_UINT32, 24); }
static void gc_align_4(struct gb *b) { gc_align_file(b, LOOM_GGUF_UINT32, 4); }
static void gc_align_64(struct gb *b) { gc_align_file(b, LOOM_GGUF_UINT32, 64); } /* b at 32: refused */

/* -- tensor infos -- */
static void gct_name64(struct gb *b)
{
    gb_tensor_named(b, "0123456789012345678901234567890123456789012345678901234567890123", 64, 1, gc_ne_a,
                    LOOM_TYPE_F32, 0);
}
static void gc_name_64(struct gb *b) { gc_tensor_file(b, 1, gct_name64, 32); }
static void gct_name63(struct gb *b)
{
    gb_tensor_named(b, "012345678901234567890123456789012345678901234567890123456789012", 63, 1, gc_ne_a,
                    LOOM_TYPE_F32, 0);
}
static void gc_name_63(struct gb *b) { gc_tensor_file(b, 1, gct_name63, 32); }
static void gct_dup(struct gb *b)
{
    gb_tensor(b, "a", 1, gc_ne_a, LOOM_TYPE_F32, 0);
    gb_tensor(b, "a", 1, gc_ne_a, LOOM_TYPE_F32, 32);
}
static void gc_dup_tensor(struct gb *b) { gc_tensor_file(b, 2, gct_dup, 64); }
static void gct_dup_nul(struct gb *b)
{
    gb_tensor_named(b, "w\0x", 3, 1, gc_ne_a, LOOM_TYPE_F32, 0);
    gb_tensor_named(b, "w\0y", 3, 1, gc_ne_a, LOOM_TYPE_F32, 32);
}
static void gc_dup_tensor_after_nul(struct gb *b) { gc_tensor_file(b, 2, gct_dup_nul, 64); }
static void gct_nul(struct gb *b) { gb_tensor_named(b, "w\0junk", 6, 1, gc_ne_a, LOOM_TYPE_F32, 0); }
static void gc_tensor_name_nul(struct gb *b) { gc_tensor_file(b, 1, gct_nul, 32); }
static void gct_bad_utf8(struct gb *b) { gb_tensor(b, "w\xc0\xaf", 1, gc_ne_a, LOOM_TYPE_F32, 0); }
static void gc_tensor_name_bad_utf8(struct gb *b) { gc_tensor_file(b, 1, gct_bad_utf8, 32); }
static void gct_dims5(struct gb *b)
{
    static const uint64_t ne[5] = {8, 1, 1, 1, 1};
    gb_tensor(b, "a", 5, ne, LOOM_TYPE_F32, 0);
}
static void gc_n_dims_5(struct gb *b) { gc_tensor_file(b, 1, gct_dims5, 32); }
static void gct_dims0(struct gb *b)
{
    gb_tensor(b, "s", 0, gc_ne_a, LOOM_TYPE_F32, 0);
    gb_tensor(b, "a", 1, gc_ne_a, LOOM_TYPE_F32, 32);
}
static void gc_n_dims_0(struct gb *b) { gc_tensor_file(b, 2, gct_dims0, 64); }
static void gct_neg(struct gb *b)
{
    static const uint64_t ne[2] = {8, 1ull << 63};
    gb_tensor(b, "a", 2, ne, LOOM_TYPE_F32, 0);
}
static void gc_ne_negative(struct gb *b) { gc_tensor_file(b, 1, gct_neg, 32); }
static void gct_ovf(struct gb *b)
{
    static const uint64_t ne[2] = {1ull << 32, 1ull << 31};
    gb_tensor(b, "a", 2, ne, LOOM_TYPE_F32, 0);
}
static void gc_nelements_overflow(struct gb *b) { gc_tensor_file(b, 1, gct_ovf, 32); }
/* 2^64 elements: the reference's element count wraps to 0, which skips its overflow check, and its byte size
 * wraps to 0 too, so it accepts the tensor; loom refuses it. */
static void gct_wrap(struct gb *b)
{
    static const uint64_t ne[2] = {1ull << 32, 1ull << 32};
    gb_tensor(b, "a", 2, ne, LOOM_TYPE_F32, 0);
}
static void gc_nelements_wrap(struct gb *b) { gc_tensor_file(b, 1, gct_wrap, 32); }
static void gct_zero_huge(struct gb *b)
{
    static const uint64_t ne[2] = {0, INT64_MAX};
    gb_tensor(b, "e", 2, ne, LOOM_TYPE_F32, 0);
}
static void gc_zero_and_huge_dims(struct gb *b) { gc_tensor_file(b, 1, gct_zero_huge, 0); }
static void gct_empty(struct gb *b)
{
    static const uint64_t ne[2] = {0, 3};
    gb_tensor(b, "e", 2, ne, LOOM_TYPE_F32, 0);
    gb_tensor(b, "a", 1, gc_ne_a, LOOM_TYPE_F32, 0);
}
static void gc_zero_elements(struct gb *b) { gc_tensor_file(b, 2, gct_empty, 32); }
static void gct_type(struct gb *b, uint32_t type) { gb_tensor(b, "a", 1, gc_ne_a, type, 0); }
static void gct_type40(struct gb *b) { gct_type(b, 40); }
static void gc_type_40(struct gb *b) { gc_tensor_file(b, 1, gct_type40, 32); }
static void gct_type4(struct gb *b) { gct_type(b, 4); }
static void gc_type_removed(struct gb *b) { gc_tensor_file(b, 1, gct_type4, 32); }
static void gct_type_neg(struct gb *b) { gct_type(b, 0xffffffffu); }
static void gc_type_negative(struct gb *b) { gc_tensor_file(b, 1, gct_type_neg, 32); }
static void gct_type_i8(struct gb *b) { gct_type(b, 24); }
static void gc_type_i8(struct gb *b) { gc_tensor_file(b, 1, gct_type_i8, 32); }
static void gct_block(struct gb *b)
{
    static const uint64_t ne[1] = {16};
    gb_tensor(b, "a", 1, ne, LOOM_TYPE_Q8_0, 0);
}
static void gc_partial_block(struct gb *b) { gc_tensor_file(b, 1, gct_block, 64); }
static void gct_offsets(struct gb *b, uint64_t off_a, uint64_t off_b)
{
    gb_tensor(b, "a", 1, gc_ne_a, LOOM_TYPE_F32, off_a);
    gb_tensor(b, "b", 2, gc_ne_b, LOOM_TYPE_F32, off_b);
}
static void gct_gap(struct gb *b) { gct_offsets(b, 0, 64); }
static void gc_offset_gap(struct gb *b) { gc_tensor_file(b, 2, gct_gap, 96); }
static void gct_swapped(struct gb *b) { gct_offsets(b, 32, 0); }
static void gc_offsets_out_of_order(struct gb *b) { gc_tensor_file(b, 2, gct_swapped, 64); }
static void gct_unaligned(struct gb *b) { gct_offsets(b, 0, 33); }
static void gc_offset_unaligned(struct gb *b) { gc_tensor_file(b, 2, gct_unaligned, 96); }
static void gct_overlap(struct gb *b) { gct_offsets(b, 0, 0); }
static void gc_offset_overlap(struct gb *b) { gc_tensor_file(b, 2, gct_overlap, 64); }
static void gct_valid(struct gb *b) { gct_offsets(b, 0, 32); }
static void gc_data_past_end(struct gb *b) { gc_tensor_file(b, 2, gct_valid, 60); }
static void gc_data_section_past_end(struct gb *b)
{
    gb_header(b, 3, 1, 1);
    gb_kv_str(b, "general.architecture", "test");
    static const uint64_t ne[1] = {0};
    gb_tensor(b, "e", 1, ne, LOOM_TYPE_F32, 0); /* the file ends here, 101 bytes: no room to pad to 128 */
}
static void gc_cut_in_tensor_info(struct gb *b)
{
    gb_header(b, 3, 1, 1);
    gb_kv_str(b, "general.architecture", "test");
    gb_str(b, "a");
    gb_u32(b, 1);
    gb_u32(b, 8); /* half of ne[0] */
}

static const struct gguf_case gguf_cases[] = {
    {"valid file", GC_ACCEPT, NULL, gc_valid},
    {"version 2", GC_ACCEPT, NULL, gc_version_2},
    {"trailing bytes after the data", GC_ACCEPT, NULL, gc_trailing_bytes},
    {"key with a digit segment", GC_ACCEPT, NULL, gc_key_digits},
    {"architecture prefix with a hyphen", GC_ACCEPT, NULL, gc_key_arch_hyphen},
    {"tensor name of 63 bytes", GC_ACCEPT, NULL, gc_name_63},
    {"tensor with 0 dims", GC_ACCEPT, NULL, gc_n_dims_0},
    {"tensor with 0 elements", GC_ACCEPT, NULL, gc_zero_elements},
    {"empty key among valid keys", GC_REFUSE, "key #1 at offset 68: name is empty, expected 1 or more bytes",
     gc_empty_key},
    {"duplicate key", GC_REFUSE, "duplicate key 'general.architecture'", gc_dup_key},
    {"key over 1 GiB", GC_REFUSE, "key name has length 1073741825 at offset 24, expected at most 1073741824",
     gc_big_key},
    {"string over 1 GiB", GC_REFUSE, "string value of 'k' has length 1073741825", gc_big_string},
    {"array over 2^30 elements", GC_REFUSE, "key 'k': array length 1073741825, expected at most 1073741824",
     gc_big_array},
    {"key not valid UTF-8", GC_WARN, "key #1 'general.\\xff\\xfe' is not valid UTF-8 (byte 8)", gc_key_bad_utf8},
    {"key with capitals", GC_WARN, "key #1 'General.Count' has byte 0x47 at 0, outside [a-z0-9_.]", gc_key_upper},
    {"key with a hyphen", GC_WARN, "has byte 0x2d at 10", gc_key_hyphen},
    {"key with an empty segment", GC_WARN, "has an empty segment at byte 8", gc_key_empty_segment},
    {"key holding a NUL byte", GC_WARN, "has byte 0x00 at 13", gc_key_nul},
    {"key of 65536 bytes", GC_WARN, "is 65536 bytes long, more than 65535", gc_key_65536},
    {"value type 13", GC_REFUSE, "value type 13 is unknown", gc_vtype_13},
    {"value type -1", GC_REFUSE, "value type 4294967295 is unknown", gc_vtype_negative},
    {"array of arrays", GC_REFUSE, "array of arrays", gc_nested_array},
    {"array element type 13", GC_REFUSE, "array element type 13 is unknown", gc_array_type_13},
    {"string past the end", GC_REFUSE, "string value of 'k' has length 1000", gc_string_past_end},
    {"strings past the end", GC_REFUSE, "536870912 strings cannot fit", gc_strings_past_end},
    {"BOOL value 2", GC_WARN, "key 'general.flag': BOOL value 0 is 2", gc_bool_2},
    {"BOOL array holding 7", GC_WARN, "key 'general.flags': BOOL value 2 is 7", gc_bool_array_7},
    {"file cut inside a value", GC_REFUSE, "key 'k': 1 UINT64 values need more bytes than the 4 left", gc_cut_in_value},
    {"bad magic", GC_REFUSE, "magic: expected 'GGUF'", gc_bad_magic},
    {"version 0", GC_REFUSE, "version: expected 2 or 3, found 0", gc_version_0},
    {"version 1", GC_REFUSE, "version: expected 2 or 3, found 1", gc_version_1},
    {"version 4", GC_REFUSE, "version: expected 2 or 3, found 4", gc_version_4},
    {"big-endian version", GC_REFUSE, "big-endian", gc_version_swapped},
    {"header cut short", GC_REFUSE, "truncated header", gc_short_header},
    {"n_tensors negative", GC_REFUSE, "n_tensors 9223372036854775808", gc_n_tensors_negative},
    {"n_kv huge", GC_REFUSE, "n_kv 1099511627776", gc_n_kv_huge},
    {"general.alignment UINT64", GC_REFUSE, "general.alignment': expected type UINT32, found UINT64", gc_align_u64},
    {"general.alignment 0", GC_REFUSE, "expected a nonzero power of two, found 0", gc_align_0},
    {"general.alignment 24", GC_REFUSE, "expected a nonzero power of two, found 24", gc_align_24},
    {"general.alignment 4", GC_WARN, "general.alignment': 4 is not a multiple of 8", gc_align_4},
    {"general.alignment 64, tensor at 32", GC_REFUSE, "tensor 'b': offset 32, expected 64", gc_align_64},
    {"tensor name of 64 bytes", GC_REFUSE, "name is 64 bytes long, expected at most 63", gc_name_64},
    {"duplicate tensor name", GC_REFUSE, "duplicate tensor name 'a'", gc_dup_tensor},
    {"tensor names equal up to a NUL", GC_REFUSE, "duplicate tensor name 'w'", gc_dup_tensor_after_nul},
    {"tensor name holding a NUL", GC_WARN, "tensor #0 name 'w\\x00junk' holds a NUL byte at 1; read as 'w'",
     gc_tensor_name_nul},
    {"tensor name not valid UTF-8", GC_WARN, "tensor #0 name 'w\\xc0\\xaf' is not valid UTF-8 (byte 1)",
     gc_tensor_name_bad_utf8},
    {"n_dims 5", GC_REFUSE, "tensor 'a': n_dims is 5, expected 0..4", gc_n_dims_5},
    {"negative dimension", GC_REFUSE, "overflows int64", gc_ne_negative},
    {"element count overflow", GC_REFUSE, "overflows int64", gc_nelements_overflow},
    {"element count wrapping to 0", GC_LOOM_REFUSES, "overflows int64", gc_nelements_wrap},
    {"dims 0 and 2^63-1", GC_ACCEPT, NULL, gc_zero_and_huge_dims},
    {"tensor type 40", GC_REFUSE, "type id 40 is unknown", gc_type_40},
    {"removed tensor type 4", GC_REFUSE, "type id 4 is unknown", gc_type_removed},
    {"tensor type -1", GC_REFUSE, "type id 4294967295 is unknown", gc_type_negative},
    {"tensor type I8", GC_LOOM_REFUSES, "type id 24 is unknown to loom", gc_type_i8},
    {"ne[0] not a multiple of the block", GC_REFUSE, "ne[0] = 16 is not a multiple of the Q8_0 block size 32",
     gc_partial_block},
    {"gap between tensors", GC_REFUSE, "tensor 'b': offset 64, expected 32", gc_offset_gap},
    {"tensors out of order", GC_REFUSE, "tensor 'a': offset 32, expected 0", gc_offsets_out_of_order},
    {"unaligned offset", GC_REFUSE, "tensor 'b': offset 33, expected 32", gc_offset_unaligned},
    {"overlapping tensors", GC_REFUSE, "tensor 'b': offset 0, expected 32", gc_offset_overlap},
    {"data past the end", GC_REFUSE, "tensor 'b': data at offset 32 + 32 bytes", gc_data_past_end},
    {"data section past the end", GC_REFUSE, "data section: starts at", gc_data_section_past_end},
    {"file cut inside a tensor info", GC_REFUSE, "truncated file", gc_cut_in_tensor_info},
};

#define GGUF_N_CASES (sizeof gguf_cases / sizeof gguf_cases[0])

#endif
