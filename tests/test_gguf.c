/* test_gguf.c — the GGUF reader and writer: malformed files built byte by byte must be rejected with a
 * message naming the field (every case of tests/gguf_cases.h, whose verdicts the parity test confirms against
 * the reference), convention breaches warned about, every value type must survive a writer -> reader round
 * trip, output names at the file system's limits written or refused before any work, files staged and published
 * together or not at all, truncation at every byte must fail cleanly, and the reference vocabulary file must
 * open. */
#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf_cases.h"
#include "kernels/types.h"
#include "model/model.h"
#include "test.h"
#include "util/error.h"

/* Knobs of the two-tensor test file; each case changes one. */
struct spec {
    uint32_t version;
    int align_kind; /* 0: no key, 1: UINT32 value align, 2: UINT64 value */
    uint32_t align;
    uint32_t n_dims_a;
    uint64_t ne_a[4];
    uint32_t type_a;
    uint64_t off_a, off_b;
    const char *name_b;
    size_t data_bytes;
};

static struct spec base_spec(void)
{
    return (struct spec){3, 1, 32, 1, {8, 1, 1, 1}, LOOM_TYPE_F32, 0, 32, "b", 64};
}

/* Header, general.architecture, optional general.alignment, tensors "a" and name_b (F32 [4, 2]). */
static struct gb build(struct spec s)
{
    struct gb b = {0};
    gb_header(&b, s.version, 2, s.align_kind ? 2 : 1);
    gb_kv_str(&b, "general.architecture", "test");
    if (s.align_kind == 1)
        gb_kv_u32(&b, "general.alignment", s.align);
    if (s.align_kind == 2) {
        gb_str(&b, "general.alignment");
        gb_u32(&b, LOOM_GGUF_UINT64);
        gb_u64(&b, s.align);
    }
    gb_tensor(&b, "a", s.n_dims_a, s.ne_a, s.type_a, s.off_a);
    const uint64_t ne_b[2] = {4, 2};
    gb_tensor(&b, s.name_b, 2, ne_b, LOOM_TYPE_F32, s.off_b);
    gb_data(&b, s.data_bytes);
    return b;
}

/* Open a copy of exactly n bytes (so ASan sees any over-read); returns the status and fills err. */
static int open_bytes(const uint8_t *p, size_t n, loom_error *err)
{
    uint8_t *copy = malloc(n ? n : 1);
    if (n)
        memcpy(copy, p, n);
    struct loom_gguf *g = NULL;
    int rc = loom_gguf_open_buffer(copy, n, &g, err);
    if (!rc && !g)
        rc = 1;
    loom_gguf_close(g);
    free(copy);
    return rc;
}

#define EXPECT_REJECT(label, s, needle)                                                                  \
    do {                                                                                                 \
        struct gb b_ = build(s);                                                                         \
        loom_error e_ = {0};                                                                             \
        int rc_ = open_bytes(b_.p, b_.n, &e_);                                                           \
        CHECK(rc_ == LOOM_E_FORMAT, "%s: rc %d (%s)", label, rc_, e_.msg);                               \
        CHECK(strstr(e_.msg, needle) != NULL, "%s: message '%s' lacks '%s'", label, e_.msg, needle);     \
        free(b_.p);                                                                                      \
    } while (0)

static void test_valid_base(void)
{
    struct gb b = build(base_spec());
    struct loom_gguf *g = NULL;
    loom_error e = {0};
    int rc = loom_gguf_open_buffer(b.p, b.n, &g, &e);
    CHECK(rc == LOOM_OK, "base file: %s", e.msg);
    if (!rc) {
        CHECK(g->version == 3 && g->n_kv == 2 && g->n_tensors == 2 && g->alignment == 32, "header fields");
        const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, "b");
        CHECK(t && t->nbytes == 32 && t->ne[0] == 4 && t->ne[1] == 2 && t->ne[2] == 1, "tensor b geometry");
        CHECK(t && (const uint8_t *)t->data == b.p + g->data_offset + 32, "tensor b data pointer");
        CHECK(g->data_offset % 32 == 0, "data offset %" PRIu64 " aligned", g->data_offset);
        CHECK(!loom_gguf_find_tensor(g, "c") && !loom_gguf_find_kv(g, "x"), "absent look-ups");
        struct loom_gguf_str s;
        CHECK(!loom_gguf_get_str(g, "general.architecture", 0, &s, &e) && loom_gguf_str_eq(s, "test"), "arch");
        uint32_t u = 7;
        CHECK(!loom_gguf_get_u32(g, "missing.key", 1, &u, &e) && u == 7, "optional missing leaves value");
        CHECK(loom_gguf_get_u32(g, "missing.key", 0, &u, &e) == LOOM_E_FORMAT && strstr(e.msg, "missing.key"),
              "required missing: %s", e.msg);
        CHECK(loom_gguf_get_u32(g, "general.architecture", 0, &u, &e) == LOOM_E_FORMAT &&
                  strstr(e.msg, "expected UINT32, found STRING"),
              "wrong type: %s", e.msg);
    }
    loom_gguf_close(g);
    free(b.p);
}

static void test_malformed(void)
{
    struct spec s;
    {
        struct gb b = build(base_spec());
        loom_error e = {0};
        CHECK(open_bytes(b.p, 10, &e) == LOOM_E_FORMAT && strstr(e.msg, "header"), "truncated header: %s", e.msg);
        b.p[0] = 'X';
        CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "magic"), "bad magic: %s", e.msg);
        free(b.p);
    }
    s = base_spec(), s.version = 1;
    EXPECT_REJECT("version 1", s, "version: expected 2 or 3, found 1");
    s = base_spec(), s.version = 2;
    {
        struct gb b = build(s);
        loom_error e = {0};
        CHECK(open_bytes(b.p, b.n, &e) == LOOM_OK, "version 2 accepted: %s", e.msg);
        free(b.p);
    }
    s = base_spec(), s.n_dims_a = 5;
    EXPECT_REJECT("n_dims 5", s, "tensor 'a': n_dims is 5");
    s = base_spec(), s.n_dims_a = 4, s.ne_a[0] = 1ull << 32, s.ne_a[1] = 1ull << 32;
    EXPECT_REJECT("element overflow", s, "overflows int64");
    s = base_spec(), s.n_dims_a = 1, s.ne_a[0] = UINT64_MAX;
    EXPECT_REJECT("dimension above int64", s, "overflows int64");
    s = base_spec(), s.ne_a[0] = 1000;
    EXPECT_REJECT("data past end", s, "tensor 'a': data at offset 0 + 4000 bytes");
    s = base_spec(), s.off_b = 33;
    EXPECT_REJECT("unaligned offset", s, "tensor 'b': offset 33, expected 32");
    s = base_spec(), s.align = 0;
    EXPECT_REJECT("alignment 0", s, "general.alignment': expected a nonzero power of two, found 0");
    s = base_spec(), s.align = 24;
    EXPECT_REJECT("alignment 24", s, "general.alignment': expected a nonzero power of two, found 24");
    s = base_spec(), s.align_kind = 2;
    EXPECT_REJECT("alignment UINT64", s, "general.alignment': expected type UINT32, found UINT64");
    s = base_spec(), s.name_b = "a";
    EXPECT_REJECT("duplicate tensor", s, "duplicate tensor name 'a'");
    s = base_spec(), s.type_a = 99;
    EXPECT_REJECT("unknown type", s, "tensor 'a': type id 99 is unknown");
    s = base_spec(), s.type_a = 4; /* a removed ggml type id with no traits */
    EXPECT_REJECT("removed type", s, "type id 4 is unknown");
    s = base_spec(), s.type_a = LOOM_TYPE_Q8_0, s.ne_a[0] = 16;
    EXPECT_REJECT("partial block", s, "ne[0] = 16 is not a multiple of the Q8_0 block size 32");
    s = base_spec(), s.off_b = 0;
    EXPECT_REJECT("overlap", s, "tensor 'b': offset 0, expected 32");
}

/* Cases the spec builder cannot express: metadata-level corruption. */
static void test_malformed_kv(void)
{
    loom_error e = {0};
    struct gb b = {0};
    gb_header(&b, 3, 0, 1);
    gb_u64(&b, 1000000); /* a key longer than the file */
    gb_put(&b, "general.name", 12);
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "key name has length 1000000"),
          "long key: %s", e.msg);
    b.n = 0;
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "k");
    gb_u32(&b, LOOM_GGUF_STRING);
    gb_u64(&b, 1ull << 40); /* a string value longer than the file */
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "string value of 'k' has length"),
          "long string: %s", e.msg);
    b.n = 0;
    gb_header(&b, 3, 0, 2);
    gb_kv_u32(&b, "k", 1);
    gb_kv_u32(&b, "k", 2);
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "duplicate key 'k'"), "dup key: %s", e.msg);
    b.n = 0;
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "nest");
    gb_u32(&b, LOOM_GGUF_ARRAY);
    gb_u32(&b, LOOM_GGUF_ARRAY);
    gb_u64(&b, 1);
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "'nest': array of arrays"), "nested: %s",
          e.msg);
    b.n = 0;
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "big");
    gb_u32(&b, LOOM_GGUF_ARRAY);
    gb_u32(&b, LOOM_GGUF_STRING);
    gb_u64(&b, 1ull << 29); /* more strings than the file could hold */
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "strings cannot fit"), "huge arr: %s", e.msg);
    b.n = 0;
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "flag");
    gb_u32(&b, LOOM_GGUF_BOOL);
    gb_put(&b, "\x02", 1);
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_OK, "bool 2 is read as true, with a warning: %s", e.msg);
    b.n = 0;
    gb_header(&b, 3, 0, 1);
    gb_str(&b, "t");
    gb_u32(&b, 13);
    gb_u32(&b, 0);
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "value type 13 is unknown"), "vtype: %s", e.msg);
    b.n = 0;
    gb_header(&b, 3, 1ull << 40, 0);
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_E_FORMAT && strstr(e.msg, "n_tensors"), "huge count: %s", e.msg);
    free(b.p);
}

/* Every catalogue case, written to a file and opened as `loom inspect` opens it: refused with the stated piece
 * of message, or accepted with (GC_WARN) or without (GC_ACCEPT) a warning. */
static void test_cases(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/case.gguf", dir);
    for (size_t i = 0; i < GGUF_N_CASES; i++) {
        const struct gguf_case *c = &gguf_cases[i];
        struct gb b = {0};
        c->build(&b);
        CHECK(gb_write_file(&b, path) == 0, "%s: writing %s", c->name, path);
        free(b.p);
        struct loom_gguf *g = NULL;
        loom_error e = {0};
        int rc = loom_gguf_open(path, &g, &e);
        const char *w = g ? loom_gguf_warning(g, 0) : NULL;
        if (c->verdict == GC_REFUSE || c->verdict == GC_LOOM_REFUSES)
            CHECK(rc == LOOM_E_FORMAT && strstr(e.msg, c->says), "%s: expected a refusal saying '%s', found rc %d '%s'",
                  c->name, c->says, rc, e.msg);
        else if (c->verdict == GC_WARN)
            CHECK(rc == LOOM_OK && w && strstr(w, c->says), "%s: expected a warning saying '%s', found rc %d '%s' '%s'",
                  c->name, c->says, rc, e.msg, w ? w : "(none)");
        else
            CHECK(rc == LOOM_OK && !g->n_warnings, "%s: expected a clean acceptance, found rc %d '%s' '%s'", c->name,
                  rc, e.msg, w ? w : "(no warning)");
        loom_gguf_close(g);
        unlink(path);
    }
}

/* A file shorter than a GGUF header is named by its magic when it has 4 bytes that are not 'GGUF' (a short text
 * file is not a GGUF file, not a truncated one), and as a truncated header otherwise; by path and from memory. */
static void test_short_files(const char *dir)
{
    static const struct {
        const char *bytes, *says;
    } cases[] = {
        {"hello this is a text\n", "magic: expected 'GGUF', found bytes 68 65 6c 6c ('hell'): not a GGUF file"},
        {"GGUF\3\0\0\0", "truncated header: the file has 8 bytes, a GGUF header needs 24"},
        {"GG", "truncated header: the file has 2 bytes"},
        {"", "truncated header: the file has 0 bytes"},
        {"\x01\x02\x7f\xff", "found bytes 01 02 7f ff ('....')"},
    };
    char path[512];
    snprintf(path, sizeof path, "%s/short.gguf", dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = strlen(cases[i].bytes) + (i == 1 ? 3 : 0); /* case 1 holds NULs: GGUF, then version 3 */
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(cases[i].bytes, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
        struct loom_gguf *g = NULL;
        loom_error e = {0};
        int rc = loom_gguf_open(path, &g, &e);
        CHECK(rc == LOOM_E_FORMAT && strstr(e.msg, cases[i].says), "short file %zu: expected '%s', found rc %d '%s'", i,
              cases[i].says, rc, e.msg);
        loom_gguf_close(g);
        g = NULL;
        e = (loom_error){0};
        rc = loom_gguf_open_buffer(cases[i].bytes, n, &g, &e);
        CHECK(rc == LOOM_E_FORMAT && strstr(e.msg, cases[i].says), "short buffer %zu: expected '%s', found rc %d '%s'", i,
              cases[i].says, rc, e.msg);
        loom_gguf_close(g);
        unlink(path);
    }
}

/* Open a catalogue case from memory (it must have no hole); NULL with err filled when refused. */
static struct loom_gguf *open_case(void (*build)(struct gb *b), struct gb *b, loom_error *err)
{
    *b = (struct gb){0};
    build(b);
    struct loom_gguf *g = NULL;
    loom_gguf_open_buffer(b->p, b->n, &g, err);
    return g;
}

/* What accepted oddities read as: a tensor name up to its NUL, a 0-dim tensor as one element, a zero-element
 * tensor sharing its offset; warnings are all counted, the first LOOM_GGUF_WARNINGS_KEPT kept. */
static void test_case_details(void)
{
    loom_error e = {0};
    struct gb b;
    struct loom_gguf *g = open_case(gc_tensor_name_nul, &b, &e);
    CHECK(g && loom_gguf_find_tensor(g, "w") && g->n_warnings == 1, "NUL name read as 'w': %s", e.msg);
    loom_gguf_close(g);
    free(b.p);
    g = open_case(gc_n_dims_0, &b, &e);
    const struct loom_gguf_tensor *t = g ? loom_gguf_find_tensor(g, "s") : NULL;
    CHECK(t && t->n_dims == 0 && t->ne[0] == 1 && t->ne[3] == 1 && t->nbytes == 4, "0-dim tensor: %s", e.msg);
    loom_gguf_close(g);
    free(b.p);
    g = open_case(gc_zero_elements, &b, &e);
    t = g ? loom_gguf_find_tensor(g, "e") : NULL;
    CHECK(t && t->nbytes == 0 && loom_gguf_find_tensor(g, "a")->offset == 0, "zero-element tensor: %s", e.msg);
    loom_gguf_close(g);
    free(b.p);
    b = (struct gb){0};
    gb_header(&b, 3, 0, 10);
    char key[16];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "Key.%d", i);
        gb_kv_u32(&b, key, 1);
    }
    g = NULL;
    CHECK(loom_gguf_open_buffer(b.p, b.n, &g, &e) == LOOM_OK, "ten bad keys: %s", e.msg);
    CHECK(g && g->n_warnings == 10 && loom_gguf_warning(g, LOOM_GGUF_WARNINGS_KEPT - 1) &&
              !loom_gguf_warning(g, LOOM_GGUF_WARNINGS_KEPT) && strstr(loom_gguf_warning(g, 0), "'Key.0'"),
          "warnings counted, the first %d kept", LOOM_GGUF_WARNINGS_KEPT);
    loom_gguf_close(g);
    free(b.p);
}

/* The writer refuses to write what the reader (and the reference) would refuse. */
static void test_writer_refusals(void)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    const uint64_t ne[1] = {8};
    CHECK(loom_gguf_writer_set_u32(w, "", 1) == LOOM_E_ARG, "empty key refused");
    CHECK(loom_gguf_writer_set_str(w, "", "x") == LOOM_E_ARG, "empty key refused (string)");
    CHECK(loom_gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                      LOOM_TYPE_F32, 1, ne) == LOOM_E_ARG,
          "64-byte tensor name refused");
    CHECK(loom_gguf_writer_add_tensor(w, "012345678901234567890123456789012345678901234567890123456789012",
                                      LOOM_TYPE_F32, 1, ne) == LOOM_OK,
          "63-byte tensor name accepted");
    loom_gguf_writer_free(w);
}

/* Admission on in-memory files: a missing required key and one of the wrong type. */
static void test_admission_keys(void)
{
    loom_error e = {0};
    const struct loom_arch *arch;
    struct loom_hparams hp;
    struct loom_geometry geo;
    struct gb b = {0};
    gb_header(&b, 3, 0, 1);
    gb_kv_str(&b, "general.architecture", "qwen35");
    struct loom_gguf *g = NULL;
    CHECK(loom_gguf_open_buffer(b.p, b.n, &g, &e) == LOOM_OK, "%s", e.msg);
    CHECK(g && loom_arch_admit(g, &arch, &hp, &geo, &e) == LOOM_E_FORMAT &&
              strstr(e.msg, "missing required key 'qwen35.context_length'"),
          "missing key: %s", e.msg);
    loom_gguf_close(g);
    b.n = 0;
    gb_header(&b, 3, 0, 2);
    gb_kv_str(&b, "general.architecture", "qwen35");
    gb_kv_str(&b, "qwen35.context_length", "4096");
    CHECK(loom_gguf_open_buffer(b.p, b.n, &g, &e) == LOOM_OK, "%s", e.msg);
    CHECK(g && loom_arch_admit(g, &arch, &hp, &geo, &e) == LOOM_E_FORMAT &&
              strstr(e.msg, "'qwen35.context_length': expected UINT32, found STRING"),
          "wrong key type: %s", e.msg);
    loom_gguf_close(g);
    b.n = 0;
    gb_header(&b, 3, 0, 1);
    gb_kv_str(&b, "general.architecture", "llama");
    CHECK(loom_gguf_open_buffer(b.p, b.n, &g, &e) == LOOM_OK, "%s", e.msg);
    CHECK(g && loom_arch_admit(g, &arch, &hp, &geo, &e) == LOOM_E_FORMAT && strstr(e.msg, "found 'llama'"), "arch: %s",
          e.msg);
    loom_gguf_close(g);
    free(b.p);
}

/* ---- writer round trip of every value type ----------------------------------------------------- */

static const uint8_t scalar_bytes[13][8] = {
    [LOOM_GGUF_UINT8] = {0xfe},           [LOOM_GGUF_INT8] = {0x80},
    [LOOM_GGUF_UINT16] = {0x34, 0x12},    [LOOM_GGUF_INT16] = {0xff, 0xff},
    [LOOM_GGUF_UINT32] = {1, 2, 3, 4},    [LOOM_GGUF_INT32] = {0xff, 0xff, 0xff, 0x7f},
    [LOOM_GGUF_FLOAT32] = {0, 0, 0xc0, 0x3f}, [LOOM_GGUF_BOOL] = {1},
    [LOOM_GGUF_UINT64] = {1, 2, 3, 4, 5, 6, 7, 8}, [LOOM_GGUF_INT64] = {0, 0, 0, 0, 0, 0, 0, 0x80},
    [LOOM_GGUF_FLOAT64] = {0, 0, 0, 0, 0, 0, 0xf0, 0x3f},
};
static const uint8_t vsize[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* A file with one scalar key and one 3-element array key per fixed type, plus strings. */
static struct gb build_all_types(void)
{
    struct gb b = {0};
    gb_header(&b, 3, 0, 24);
    char key[32];
    for (uint32_t t = 0; t <= LOOM_GGUF_FLOAT64; t++) {
        if (!vsize[t])
            continue;
        snprintf(key, sizeof key, "scalar.%u", t);
        gb_str(&b, key);
        gb_u32(&b, t);
        gb_put(&b, scalar_bytes[t], vsize[t]);
        snprintf(key, sizeof key, "array.%u", t);
        gb_str(&b, key);
        gb_u32(&b, LOOM_GGUF_ARRAY);
        gb_u32(&b, t);
        gb_u64(&b, 3);
        for (int i = 0; i < 3; i++)
            gb_put(&b, scalar_bytes[t], vsize[t]);
    }
    gb_kv_str(&b, "scalar.string", "h\xc3\xa9llo");
    gb_str(&b, "array.string");
    gb_u32(&b, LOOM_GGUF_ARRAY);
    gb_u32(&b, LOOM_GGUF_STRING);
    gb_u64(&b, 3);
    gb_str(&b, "one");
    gb_str(&b, "");
    gb_str(&b, "three");
    return b;
}

static int fill_pattern(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx;
    (void)err;
    for (uint64_t i = 0; i < nbytes; i++)
        ((uint8_t *)buf)[i] = (uint8_t)(index * 7 + i);
    return LOOM_OK;
}

static int fill_fail(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)buf, (void)nbytes;
    return index == 1 ? loom_errorf(err, LOOM_E_INTERNAL, "fill refused tensor 1") : LOOM_OK;
}

/* Serialized bytes of a kv's value as the reader sees them. */
static int kv_same(const struct loom_gguf_kv *a, const struct loom_gguf_kv *b)
{
    if (a->type != b->type || a->arr_type != b->arr_type || a->arr_n != b->arr_n)
        return 0;
    uint32_t t = a->type == LOOM_GGUF_ARRAY ? a->arr_type : a->type;
    uint64_t n = a->type == LOOM_GGUF_ARRAY ? a->arr_n : 1;
    if (t != LOOM_GGUF_STRING)
        return !memcmp(a->data, b->data, n * vsize[t]);
    const uint8_t *p = a->data, *q = b->data;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t la, lb;
        memcpy(&la, p, 8);
        memcpy(&lb, q, 8);
        if (la != lb || memcmp(p + 8, q + 8, la))
            return 0;
        p += 8 + la, q += 8 + lb;
    }
    return 1;
}

static void test_round_trip(const char *dir)
{
    struct gb b = build_all_types();
    struct loom_gguf *src = NULL, *g = NULL;
    loom_error e = {0};
    CHECK(loom_gguf_open_buffer(b.p, b.n, &src, &e) == LOOM_OK, "all-types file: %s", e.msg);
    if (!src) {
        free(b.p);
        return;
    }
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    for (uint64_t i = 0; i < src->n_kv; i++)
        CHECK(loom_gguf_writer_copy_kv(w, &src->kv[i]) == LOOM_OK, "copy kv %" PRIu64, i);
    CHECK(loom_gguf_writer_set_u32(w, "set.u32", 0xdeadbeef) == LOOM_OK, "set u32");
    CHECK(loom_gguf_writer_set_i32(w, "set.i32", -5) == LOOM_OK, "set i32");
    CHECK(loom_gguf_writer_set_f32(w, "set.f32", 0.25f) == LOOM_OK, "set f32");
    CHECK(loom_gguf_writer_set_bool(w, "set.bool", 7) == LOOM_OK, "set bool");
    CHECK(loom_gguf_writer_set_str(w, "set.str", "x") == LOOM_OK, "set str");
    CHECK(loom_gguf_writer_set_str(w, "set.str", "replaced") == LOOM_OK, "replace str");
    const struct loom_gguf_str strs[2] = {{2, "ab"}, {0, NULL}};
    CHECK(loom_gguf_writer_set_arr_str(w, "set.arr_str", strs, 2) == LOOM_OK, "set arr str");
    const int32_t ints[3] = {1, -2, 3};
    CHECK(loom_gguf_writer_set_arr(w, "set.arr_i32", LOOM_GGUF_INT32, ints, 3) == LOOM_OK, "set arr");
    CHECK(loom_gguf_writer_set_arr(w, "bad", LOOM_GGUF_STRING, ints, 3) == LOOM_E_ARG, "arr of STRING refused");
    const uint64_t ne1[1] = {40}, ne2[2] = {64, 3}, ne3[3] = {2, 3, 4};
    CHECK(loom_gguf_writer_add_tensor(w, "t.f32", LOOM_TYPE_F32, 1, ne1) == LOOM_OK, "add t.f32");
    CHECK(loom_gguf_writer_add_tensor(w, "t.q8", LOOM_TYPE_Q8_0, 2, ne2) == LOOM_OK, "add t.q8");
    CHECK(loom_gguf_writer_add_tensor(w, "t.f16", LOOM_TYPE_F16, 3, ne3) == LOOM_OK, "add t.f16");
    CHECK(loom_gguf_writer_add_tensor(w, "t.f16", LOOM_TYPE_F16, 1, ne1) == LOOM_E_ARG, "duplicate refused");
    CHECK(loom_gguf_writer_add_tensor(w, "t.bad", LOOM_TYPE_Q4_K, 1, ne1) == LOOM_E_ARG, "partial block refused");
    char path[512];
    snprintf(path, sizeof path, "%s/round.gguf", dir);
    CHECK(loom_gguf_writer_write(w, path, fill_fail, NULL, &e) == LOOM_E_INTERNAL && access(path, F_OK) != 0,
          "failed fill leaves no file: %s", e.msg);
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    CHECK(loom_gguf_writer_write(w, fifo, fill_pattern, NULL, &e) == LOOM_E_ARG && strstr(e.msg, "regular file"),
          "a FIFO (or device) at the output path is refused, not replaced: %s", e.msg);
    CHECK(loom_gguf_writer_write(w, dir, fill_pattern, NULL, &e) == LOOM_E_ARG, "a directory output is refused");
    unlink(fifo);
    CHECK(loom_gguf_writer_write(w, path, fill_pattern, NULL, &e) == LOOM_OK, "write: %s", e.msg);
    loom_gguf_writer_free(w);
    CHECK(loom_gguf_open(path, &g, &e) == LOOM_OK, "reopen: %s", e.msg);
    if (g) {
        CHECK(g->version == 3 && g->n_kv == src->n_kv + 7 && g->n_tensors == 3, "counts");
        for (uint64_t i = 0; i < src->n_kv; i++) {
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)src->kv[i].key.len, src->kv[i].key.ptr);
            const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, key);
            CHECK(kv && kv_same(kv, &src->kv[i]), "key %s survives the round trip", key);
        }
        uint32_t u = 0;
        float f = 0;
        struct loom_gguf_str s = {0};
        const struct loom_gguf_kv *arr = NULL;
        struct loom_gguf_str out[2];
        CHECK(!loom_gguf_get_u32(g, "set.u32", 0, &u, &e) && u == 0xdeadbeef, "u32");
        CHECK(loom_gguf_get_u32(g, "set.i32", 0, &u, &e) == LOOM_E_FORMAT && strstr(e.msg, ">= 0"), "neg i32");
        CHECK(!loom_gguf_get_f32(g, "set.f32", 0, &f, &e) && f == 0.25f, "f32");
        CHECK(!loom_gguf_get_str(g, "set.str", 0, &s, &e) && loom_gguf_str_eq(s, "replaced"), "str");
        CHECK(!loom_gguf_get_arr(g, "set.arr_str", LOOM_GGUF_STRING, 0, &arr, &e) &&
                  !loom_gguf_kv_strings(arr, out, 2, &e) && loom_gguf_str_eq(out[0], "ab") &&
                  loom_gguf_str_eq(out[1], ""),
              "arr str");
        CHECK(loom_gguf_get_arr(g, "set.arr_i32", LOOM_GGUF_FLOAT32, 0, &arr, &e) == LOOM_E_FORMAT &&
                  strstr(e.msg, "expected array of FLOAT32, found array of INT32"),
              "arr type: %s", e.msg);
        const struct loom_gguf_kv *bk = loom_gguf_find_kv(g, "set.bool");
        CHECK(bk && bk->type == LOOM_GGUF_BOOL && bk->data[0] == 1, "bool");
        const struct loom_gguf_tensor *t = loom_gguf_find_tensor(g, "t.q8");
        CHECK(t && t->type == LOOM_TYPE_Q8_0 && t->nbytes == 2 * 34 * 3 && t->offset % 32 == 0, "q8 tensor");
        CHECK(t && ((const uint8_t *)t->data)[5] == (uint8_t)(1 * 7 + 5), "q8 data streamed");
        t = loom_gguf_find_tensor(g, "t.f16");
        CHECK(t && t->n_dims == 3 && t->ne[2] == 4 && t->nbytes == 48, "f16 tensor");
        CHECK(t && ((const uint8_t *)t->data)[47] == (uint8_t)(2 * 7 + 47), "f16 data streamed");
    }
    loom_gguf_close(g);
    loom_gguf_close(src);
    unlink(path);
    free(b.p);
}


/* sub/NAME where NAME is `len` bytes of 'n' ending in ".gguf", into path[cap]. */
static const char *long_name(char *path, size_t cap, const char *sub, size_t len)
{
    int at = snprintf(path, cap, "%s/", sub);
    memset(path + at, 'n', len - 5);
    memcpy(path + at + len - 5, ".gguf", 6);
    return path;
}

/* A writer of one small tensor. */
static struct loom_gguf_writer *small_writer(void)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    const uint64_t ne[2] = {32, 2};
    CHECK(w && loom_gguf_writer_set_u32(w, "k", 1) == LOOM_OK &&
              loom_gguf_writer_add_tensor(w, "t", LOOM_TYPE_F32, 2, ne) == LOOM_OK,
          "small writer");
    return w;
}

/* Output names at and past the limits: a file name of NAME_MAX (255) bytes and one of 250 (whose PATH.<pid>.tmp
 * would pass NAME_MAX) are written, through a temporary that fits, leaving nothing else; 256 bytes and a path of
 * PATH_MAX bytes are refused before anything is created, naming the path and the limit. */
static void test_writer_names(const char *dir)
{
    char sub[512], path[8192];
    snprintf(sub, sizeof sub, "%s/names", dir);
    CHECK(mkdir(sub, 0700) == 0, "mkdir %s", sub);
    struct loom_gguf_writer *w = small_writer();
    loom_error e = {0};
    const size_t ok[2] = {255, 250};
    for (int i = 0; i < 2; i++) {
        long_name(path, sizeof path, sub, ok[i]);
        CHECK(loom_gguf_writer_write(w, path, fill_pattern, NULL, &e) == LOOM_OK && access(path, R_OK) == 0 &&
                  dir_entries(sub) == 1,
              "a %zu-byte file name is written, nothing else left: %s", ok[i], e.msg);
        struct loom_gguf *g = NULL;
        CHECK(loom_gguf_open(path, &g, &e) == LOOM_OK && g->n_tensors == 1, "reopen the %zu-byte name: %s", ok[i],
              e.msg);
        loom_gguf_close(g);
        unlink(path);
    }
    long_name(path, sizeof path, sub, 256);
    int rc = loom_gguf_writer_write(w, path, fill_pattern, NULL, &e);
    CHECK(rc == LOOM_E_ARG && strstr(e.msg, path) && strstr(e.msg, "file name of 256 bytes, expected at most 255") &&
              strstr(e.msg, "NAME_MAX") && dir_entries(sub) == 0,
          "a 256-byte file name is refused naming the path and NAME_MAX, nothing created: rc %d, %s", rc, e.msg);
    int at = snprintf(path, sizeof path, "%s", sub);
    for (; at < 4200; at += 100) /* directories 'd...d/' of 99 bytes each: a path past PATH_MAX */
        snprintf(path + at, sizeof path - (size_t)at, "/%099d", 0);
    rc = loom_gguf_writer_write(w, path, fill_pattern, NULL, &e);
    CHECK(rc == LOOM_E_ARG && strstr(e.msg, "PATH_MAX") && dir_entries(sub) == 0,
          "a path past PATH_MAX is refused naming the limit: rc %d, %s", rc, e.msg);
    loom_gguf_writer_free(w);
    rmdir(sub);
}

/* Several files at once: staged files are not in place until published; a failure while staging the second
 * (the first discarded) or while publishing (the second's temporary gone: the first, already renamed, is
 * removed) leaves nothing; a publish that succeeds puts both in place. */
static void test_writer_staging(const char *dir)
{
    char sub[512], a[600], b[600];
    snprintf(sub, sizeof sub, "%s/staged", dir);
    snprintf(a, sizeof a, "%s/a.gguf", sub);
    snprintf(b, sizeof b, "%s/b.gguf", sub);
    CHECK(mkdir(sub, 0700) == 0, "mkdir %s", sub);
    struct loom_gguf_writer *w = small_writer();
    struct loom_gguf_staged st[2];
    loom_error e = {0};
    int rc = loom_gguf_writer_stage(w, a, fill_pattern, NULL, &st[0], &e);
    CHECK(rc == LOOM_OK && access(a, F_OK) != 0 && dir_entries(sub) == 1, "staged, not in place: %s", e.msg);
    const uint64_t ne[1] = {32};
    loom_gguf_writer_add_tensor(w, "u", LOOM_TYPE_F32, 1, ne); /* fill_fail refuses tensor 1 */
    rc = loom_gguf_writer_stage(w, b, fill_fail, NULL, &st[1], &e);
    CHECK(rc == LOOM_E_INTERNAL && !st[1].tmp && dir_entries(sub) == 1, "a failed stage leaves nothing: %s", e.msg);
    loom_gguf_discard(st, 1);
    CHECK(dir_entries(sub) == 0, "discarded: nothing left");

    rc = loom_gguf_writer_stage(w, a, fill_pattern, NULL, &st[0], &e) ||
         loom_gguf_writer_stage(w, b, fill_pattern, NULL, &st[1], &e);
    CHECK(rc == LOOM_OK && dir_entries(sub) == 2, "two staged: %s", e.msg);
    unlink(st[1].tmp);
    rc = loom_gguf_publish(st, 2, &e);
    CHECK(rc == LOOM_E_IO && strstr(e.msg, b) && dir_entries(sub) == 0,
          "a failed publish removes the file already renamed: rc %d, %s", rc, e.msg);

    rc = loom_gguf_writer_stage(w, a, fill_pattern, NULL, &st[0], &e) ||
         loom_gguf_writer_stage(w, b, fill_pattern, NULL, &st[1], &e) || loom_gguf_publish(st, 2, &e);
    CHECK(rc == LOOM_OK && access(a, R_OK) == 0 && access(b, R_OK) == 0 && dir_entries(sub) == 2,
          "published: both in place, no temporary: %s", e.msg);
    loom_gguf_writer_free(w);
    unlink(a);
    unlink(b);
    rmdir(sub);
}

/* A valid file cut at every byte must fail (no crash, no over-read), and the whole file must open. */
static void test_truncation(void)
{
    struct gb b = build_all_types();
    struct gb t = build(base_spec());
    int all_fail = 1;
    loom_error e;
    for (size_t n = 0; n < b.n; n++)
        all_fail &= open_bytes(b.p, n, &e) != LOOM_OK;
    CHECK(all_fail, "every truncation of the all-types file fails");
    CHECK(open_bytes(b.p, b.n, &e) == LOOM_OK, "whole all-types file opens: %s", e.msg);
    all_fail = 1;
    for (size_t n = 0; n < t.n; n++)
        all_fail &= open_bytes(t.p, n, &e) != LOOM_OK;
    CHECK(all_fail, "every truncation of the tensor file fails");
    free(b.p);
    free(t.p);
}

/* The synthetic-model recipe: copy the vocabulary's tokens and append UNUSED padding rows. */
static void check_vocab_padding(const struct loom_gguf *src, const struct loom_gguf_kv *tok, const char *dir)
{
    enum { PAD = 3 };
    uint64_t n = tok->arr_n;
    struct loom_gguf_str *s = malloc((n + PAD) * sizeof *s);
    int32_t *types = malloc((n + PAD) * sizeof *types);
    const struct loom_gguf_kv *tt = NULL;
    loom_error e = {0};
    CHECK(loom_gguf_kv_strings(tok, s, n, &e) == LOOM_OK, "%s", e.msg);
    CHECK(loom_gguf_get_arr(src, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, 0, &tt, &e) == LOOM_OK &&
              tt->arr_n == n,
          "token_type: %s", e.msg);
    if (tt)
        memcpy(types, tt->data, n * sizeof *types);
    for (int i = 0; i < PAD; i++) {
        s[n + i] = (struct loom_gguf_str){5, "[PAD]"};
        types[n + i] = 5; /* UNUSED */
    }
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    const struct loom_gguf_kv *merges = loom_gguf_find_kv(src, "tokenizer.ggml.merges");
    CHECK(merges && loom_gguf_writer_copy_kv(w, merges) == LOOM_OK, "copy merges");
    CHECK(loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", s, n + PAD) == LOOM_OK, "set tokens");
    CHECK(loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, types, n + PAD) == LOOM_OK,
          "set token_type");
    char path[512];
    snprintf(path, sizeof path, "%s/vocab.gguf", dir);
    CHECK(loom_gguf_writer_write(w, path, NULL, NULL, &e) == LOOM_OK, "write padded vocab: %s", e.msg);
    loom_gguf_writer_free(w);
    struct loom_gguf *g = NULL;
    const struct loom_gguf_kv *t2 = NULL, *m2 = NULL;
    CHECK(loom_gguf_open(path, &g, &e) == LOOM_OK, "reopen padded vocab: %s", e.msg);
    if (g) {
        CHECK(!loom_gguf_get_arr(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, 0, &t2, &e) && t2->arr_n == n + PAD,
              "padded token count");
        struct loom_gguf_str *s2 = malloc((n + PAD) * sizeof *s2);
        CHECK(t2 && !loom_gguf_kv_strings(t2, s2, n + PAD, &e), "padded strings");
        int same = t2 != NULL;
        for (uint64_t i = 0; same && i < n + PAD; i++)
            same = s2[i].len == s[i].len && !memcmp(s2[i].ptr, s[i].ptr, s[i].len);
        CHECK(same, "every token string survives");
        m2 = loom_gguf_find_kv(g, "tokenizer.ggml.merges");
        CHECK(m2 && merges && kv_same(m2, merges), "merges copied verbatim");
        free(s2);
    }
    loom_gguf_close(g);
    unlink(path);
    free(s);
    free(types);
}

/* Corrupt every header byte of a valid file three ways: no crash, and an accepted file stays in bounds. */
static void test_byte_flips(void)
{
    struct gb b = build(base_spec());
    static const int ops[3] = {0x00, 0xff, -1};
    int ok = 1;
    size_t header = b.n - 64; /* everything before the data section */
    for (size_t pos = 0; pos < header; pos++)
        for (int k = 0; k < 3; k++) {
            uint8_t *copy = malloc(b.n);
            memcpy(copy, b.p, b.n);
            copy[pos] = ops[k] < 0 ? (uint8_t)(copy[pos] ^ 0x80) : (uint8_t)ops[k];
            struct loom_gguf *g = NULL;
            loom_error e;
            if (loom_gguf_open_buffer(copy, b.n, &g, &e) == LOOM_OK)
                for (uint64_t i = 0; i < g->n_tensors; i++) {
                    const struct loom_gguf_tensor *t = &g->tensors[i];
                    ok &= (const uint8_t *)t->data >= copy && (const uint8_t *)t->data + t->nbytes <= copy + b.n;
                }
            else
                ok &= e.msg[0] != 0;
            loom_gguf_close(g);
            free(copy);
        }
    CHECK(ok, "byte flips: every result is an error with a message or an in-bounds file");
    free(b.p);
}

static void test_reference_vocab(const char *dir)
{
    const char *home = getenv("HOME");
    char path[1024];
    snprintf(path, sizeof path, "%s/.cache/loom/ref/src/models/ggml-vocab-qwen35.gguf", home ? home : "");
    if (access(path, R_OK)) {
        printf("note: %s not found, skipping the reference vocabulary check\n", path);
        return;
    }
    struct loom_gguf *g = NULL;
    loom_error e = {0};
    CHECK(loom_gguf_open(path, &g, &e) == LOOM_OK, "open %s: %s", path, e.msg);
    if (!g)
        return;
    const struct loom_gguf_kv *tok = NULL;
    CHECK(loom_gguf_get_arr(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, 0, &tok, &e) == LOOM_OK, "%s", e.msg);
    CHECK(tok && tok->arr_n == 151936, "tokens: %" PRIu64, tok ? tok->arr_n : 0);
    if (tok && tok->arr_n == 151936) {
        struct loom_gguf_str *s = malloc(151936 * sizeof *s);
        CHECK(loom_gguf_kv_strings(tok, s, 151936, &e) == LOOM_OK, "%s", e.msg);
        CHECK(loom_gguf_str_eq(s[0], "!"), "token 0 is '!'");
        free(s);
        check_vocab_padding(g, tok, dir);
    }
    loom_gguf_close(g);
}

int main(void)
{
    char dir[] = "/tmp/loom-test-gguf-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_valid_base();
    test_malformed();
    test_malformed_kv();
    test_cases(dir);
    test_short_files(dir);
    test_case_details();
    test_writer_refusals();
    test_admission_keys();
    test_round_trip(dir);
    test_writer_names(dir);
    test_writer_staging(dir);
    test_truncation();
    test_byte_flips();
    test_reference_vocab(dir);
    rmdir(dir);
    return test_finish();
}
