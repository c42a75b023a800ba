/* test_split.c — split models (llama.cpp's gguf-split layout) made from synthetic micro (dense) and tiny-moe
 * models: loom's logits on the split model bitwise equal to the unsplit file's, the part table and each tensor's
 * file identity (part, offset), the model identity across split and unsplit, inspect's view, every broken
 * set refused naming the part file and the field, and a set written whole or not at all. Writes its files into a private folder under /tmp. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "model_fixture.h"
#include "split_fixture.h"
#include "kernels/types.h"

enum { N_TOK = 6 };

static char dir[] = "/tmp/loom-test-split-XXXXXX";

/* dir/name into buf. */
static const char *at(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

/* Teacher-forced logits of N_TOK tokens ([N_TOK][*n]) of the model at path (malloc'd), or NULL. */
static float *logits_of(const char *path, int *n)
{
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    CHECK(m != NULL, "load %s: %s", path, err.msg);
    if (!m)
        return NULL;
    loom_session_params sp = {.n_ctx = 64, .n_threads = 1};
    loom_session *s = loom_session_new(m, &sp, &err);
    *n = loom_model_n_logits(m);
    float *out = s ? malloc(sizeof(float) * (size_t)*n * N_TOK) : NULL;
    const int32_t tok[N_TOK] = {1, 7, 42, 3, 99, 250};
    int rc = out ? loom_session_eval(s, tok, N_TOK, out, LOOM_LOGITS_ALL, &err) : LOOM_E_NOMEM;
    CHECK(rc == LOOM_OK, "eval %s: %s", path, err.msg);
    if (rc) {
        free(out);
        out = NULL;
    }
    loom_session_free(s);
    loom_model_free(m);
    return out;
}

/* The split model named by first loads and its logits are bitwise those of whole. */
static void check_same_logits(const char *whole, const char *first, const char *what)
{
    int n1 = 0, n2 = 0;
    float *a = logits_of(whole, &n1), *b = logits_of(first, &n2);
    CHECK(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * (size_t)n1 * N_TOK),
          "%s: split logits differ from the unsplit file's", what);
    free(a);
    free(b);
}

/* Bytes [off, off + n) of file path equal p: a tensor's file identity is where its data is. */
static int file_holds(const char *path, uint64_t off, const void *p, uint64_t n)
{
    int fd = open(path, O_RDONLY);
    char *buf = malloc((size_t)n + 1);
    int ok = fd >= 0 && buf && pread(fd, buf, (size_t)n, (off_t)off) == (ssize_t)n && !memcmp(buf, p, (size_t)n);
    free(buf);
    if (fd >= 0)
        close(fd);
    return ok;
}

/* The part table of the 3-part model: names, tensors per part adding up, and every tensor's (part, offset)
 * naming the bytes the loaded view reads. */
static void check_parts(const char *first, const char *prefix, const char *whole)
{
    loom_gguf *g = NULL, *w = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open_model(first, &g, &err) == LOOM_OK && loom_gguf_open(whole, &w, &err) == LOOM_OK,
          "open: %s", err.msg);
    if (!g || !w)
        goto out;
    CHECK(loom_gguf_n_parts(g) == 3 && loom_gguf_n_parts(w) == 1, "parts: %u and %u", loom_gguf_n_parts(g),
          loom_gguf_n_parts(w));
    CHECK(g->n_tensors == w->n_tensors, "tensors: %llu, whole %llu", (unsigned long long)g->n_tensors,
          (unsigned long long)w->n_tensors);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < loom_gguf_n_parts(g); i++) {
        loom_gguf_part_info p;
        char name[1024];
        loom_split_path(name, sizeof name, prefix, i, 3, NULL);
        CHECK(loom_gguf_part_at(g, i, &p, &err) == LOOM_OK && !strcmp(p.path, name) && p.first_tensor == sum,
              "part %u: %s, first tensor %llu", i, p.path, (unsigned long long)p.first_tensor);
        sum += p.n_tensors;
    }
    CHECK(sum == g->n_tensors, "tensors over the parts: %llu", (unsigned long long)sum);
    int bad = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        loom_gguf_tensor_info t;
        loom_gguf_part_info p;
        loom_gguf_tensor_at(g, i, &t, NULL);
        loom_gguf_part_at(g, t.part, &p, NULL);
        const struct loom_gguf_tensor *u = loom_gguf_find_tensor(w, t.name);
        bad += !u || i < p.first_tensor || i >= p.first_tensor + p.n_tensors ||
               !file_holds(p.path, t.file_offset, u->data, u->nbytes);
    }
    CHECK(bad == 0, "%d tensors whose (part, file offset) do not hold the unsplit file's bytes", bad);
    loom_gguf_part_info p3;
    CHECK(loom_gguf_part_at(g, 3, &p3, &err) == LOOM_E_RANGE, "part 3 of 3 accepted");
out:
    loom_gguf_close(g);
    loom_gguf_close(w);
}

/* A state saved on the split model restores on the unsplit file (one identity), and not on a split model
 * whose last part's data differ (the identity covers every part). */
static void check_identity(const char *whole, const char *first, const char *prefix)
{
    loom_error err = {0};
    char state[1024], last[1024];
    loom_model *a = loom_model_load(first, &err), *b = loom_model_load(whole, &err);
    loom_session_params sp = {.n_ctx = 64, .n_threads = 1};
    loom_session *sa = a ? loom_session_new(a, &sp, &err) : NULL, *sb = b ? loom_session_new(b, &sp, &err) : NULL;
    const int32_t tok[3] = {5, 6, 7};
    int rc = sa && sb ? loom_session_eval(sa, tok, 3, NULL, LOOM_LOGITS_LAST, &err) : LOOM_E_ARG;
    if (!rc)
        rc = loom_session_save(sa, at(state, sizeof state, "state.bin"), &err);
    if (!rc)
        rc = loom_session_restore(sb, state, &err);
    CHECK(rc == LOOM_OK && loom_session_digest(sa) == loom_session_digest(sb), "split -> unsplit restore: %s",
          err.msg);
    loom_session_free(sa);
    loom_session_free(sb);
    loom_model_free(a);
    loom_model_free(b);
    /* flip one byte of the last tensor's data in the last part */
    loom_split_path(last, sizeof last, prefix, 2, 3, NULL);
    loom_gguf_info f;
    loom_gguf *g = NULL;
    CHECK(loom_gguf_open(last, &g, &err) == LOOM_OK, "open %s: %s", last, err.msg);
    if (!g)
        return;
    loom_gguf_get_info(g, &f);
    uint64_t off = f.data_offset + g->tensors[g->n_tensors - 1].offset;
    loom_gguf_close(g);
    int fd = open(last, O_RDWR);
    unsigned char byte = 0;
    CHECK(fd >= 0 && pread(fd, &byte, 1, (off_t)off) == 1, "read %s", last);
    byte ^= 1; /* the low mantissa bit of a value: stays finite */
    CHECK(fd >= 0 && pwrite(fd, &byte, 1, (off_t)off) == 1, "write %s", last);
    if (fd >= 0)
        close(fd);
    a = loom_model_load(first, &err);
    sa = a ? loom_session_new(a, &sp, &err) : NULL;
    rc = sa ? loom_session_restore(sa, state, &err) : LOOM_E_ARG;
    CHECK(rc == LOOM_E_FORMAT && strstr(err.msg, "another model"), "restore on a changed last part: %d %s", rc,
          err.msg);
    loom_session_free(sa);
    loom_model_free(a);
}

/* Loading path fails, with a message holding want (and want2 when non-NULL). */
static void expect_refused(const char *path, const char *want, const char *want2, const char *what)
{
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    CHECK(!m && strstr(err.msg, want) && (!want2 || strstr(err.msg, want2)), "%s: %s", what,
          m ? "loaded" : err.msg);
    loom_model_free(m);
    if (!m)
        printf("  %-34s %s\n", what, err.msg);
}

/* Write part k of 3 of `in` (tensors [lo, hi)) under prefix, with the split keys given. */
static void write_part(const loom_gguf *in, const char *prefix, uint32_t k, uint32_t no, uint32_t count,
                       int32_t total, uint64_t lo, uint64_t hi)
{
    char path[1024];
    loom_error err = {0};
    struct loom_split_part p = {no, count, total, lo, hi - lo, k == 0};
    int rc = loom_split_path(path, sizeof path, prefix, k, 3, &err);
    if (!rc)
        rc = loom_gguf_write_part(in, &p, path, &err);
    CHECK(rc == LOOM_OK, "write %s: %s", path, err.msg);
}

/* A broken 3-part set of `in` under prefix: part k's keys and tensor range as given, the others good. */
static void write_set(const loom_gguf *in, const char *prefix, uint32_t bad_k, uint32_t no, uint32_t count,
                      int32_t total, uint64_t lo, uint64_t hi)
{
    uint64_t n = in->n_tensors;
    for (uint32_t k = 0; k < 3; k++) {
        if (k == bad_k)
            write_part(in, prefix, k, no, count, total, lo, hi);
        else
            write_part(in, prefix, k, k, 3, total, k * n / 3, (k + 1) * n / 3);
    }
}

static void check_failures(const char *whole)
{
    loom_gguf *in = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open(whole, &in, &err) == LOOM_OK, "open %s: %s", whole, err.msg);
    if (!in)
        return;
    uint64_t n = in->n_tensors;
    int32_t nt = (int32_t)n;
    char prefix[512], first[1024], second[1024], third[1024], want[1200];
    at(prefix, sizeof prefix, "bad");
    loom_split_path(first, sizeof first, prefix, 0, 3, NULL);
    loom_split_path(second, sizeof second, prefix, 1, 3, NULL);
    loom_split_path(third, sizeof third, prefix, 2, 3, NULL);

    write_set(in, prefix, 9, 0, 0, nt, 0, 0); /* good */
    unlink(third);
    snprintf(want, sizeof want, "expected file '%s'", third);
    expect_refused(first, want, "split part 3 of 3", "missing part");

    write_set(in, prefix, 1, 2, 3, nt, n / 3, 2 * n / 3);
    expect_refused(first, "key 'split.no': expected 1", second, "split.no not its position");

    write_set(in, prefix, 2, 2, 4, nt, 2 * n / 3, n);
    expect_refused(first, "key 'split.count': expected 3", third, "split.count disagreeing");

    write_set(in, prefix, 1, 1, 3, nt + 1, n / 3 - 1, 2 * n / 3); /* part 2 repeats part 1's last tensor */
    expect_refused(first, "expected in one part of the split model, found in", second, "tensor in two parts");

    write_set(in, prefix, 1, 1, 3, nt - 1, n / 3 + 1, 2 * n / 3); /* part 1's next tensor is in no part */
    snprintf(want, sizeof want, "%.*s", (int)in->tensors[n / 3].name.len, in->tensors[n / 3].name.ptr);
    expect_refused(first, want, "(in none of the 3 parts)", "tensor missing from all parts");

    write_set(in, prefix, 1, 1, 3, nt + 5, n / 3, 2 * n / 3);
    snprintf(want, sizeof want, "key 'split.tensors.count': expected the %llu tensors its 3 parts hold, found %d",
             (unsigned long long)n, nt + 5);
    expect_refused(first, want, first, "split.tensors.count wrong");

    write_set(in, prefix, 9, 0, 0, nt, 0, 0);
    snprintf(want, sizeof want, "name its first part instead: %s", first);
    expect_refused(second, want, "key 'split.no': expected 0, found 1", "second part named");

    FILE *f = fopen(second, "r+b"); /* a part that the single-file reader refuses */
    CHECK(f && ftruncate(fileno(f), 40) == 0, "truncate %s", second);
    if (f)
        fclose(f);
    expect_refused(first, "split part 2 of 3", "bytes follow the header", "a part the reader refuses");

    char other[1024];
    write_set(in, prefix, 9, 0, 0, nt, 0, 0);
    CHECK(rename(first, at(other, sizeof other, "renamed.gguf")) == 0, "rename");
    expect_refused(other, "file name: expected PREFIX-00001-of-00003.gguf", NULL, "first part renamed");

    struct loom_split_part whole1 = {1, 1, nt, 0, n, 1}; /* not split, yet split.no 1 */
    CHECK(loom_gguf_write_part(in, &whole1, at(other, sizeof other, "one.gguf"), &err) == LOOM_OK, "%s", err.msg);
    expect_refused(other, "key 'split.no': expected 0 in a file that is not split", NULL, "unsplit, split.no 1");
    struct loom_split_part whole2 = {0, 1, nt - 1, 0, n, 1};
    CHECK(loom_gguf_write_part(in, &whole2, other, &err) == LOOM_OK, "%s", err.msg);
    expect_refused(other, "key 'split.tensors.count': expected the file's", NULL, "unsplit, tensors.count wrong");
    loom_gguf_close(in);

    struct loom_gguf_writer *w = loom_gguf_writer_new(); /* a split key of another type than gguf-split's */
    CHECK(w && loom_gguf_writer_set_u32(w, LOOM_SPLIT_COUNT, 3) == LOOM_OK &&
          loom_gguf_writer_write(w, at(other, sizeof other, "typed-00001-of-00003.gguf"), NULL, NULL, &err) == LOOM_OK,
          "write: %s", err.msg);
    loom_gguf_writer_free(w);
    expect_refused(other, "key 'split.count': expected UINT16 (as gguf-split writes it), found UINT32", NULL,
                   "split.count of another type");
}

/* What gguf-split itself writes besides the plain layout loads too: a merged file (split.count 0, as --merge
 * leaves it) and a first part that holds no tensors (--no-tensor-first-split). */
static void check_variants(const char *whole)
{
    loom_gguf *in = NULL;
    loom_error err = {0};
    char path[1024], prefix[512];
    CHECK(loom_gguf_open(whole, &in, &err) == LOOM_OK, "open: %s", err.msg);
    if (!in)
        return;
    struct loom_split_part merged = {0, 0, (int32_t)in->n_tensors, 0, in->n_tensors, 1};
    CHECK(loom_gguf_write_part(in, &merged, at(path, sizeof path, "merged.gguf"), &err) == LOOM_OK, "%s", err.msg);
    check_same_logits(whole, path, "merged (split.count 0)");
    loom_gguf_close(in);
    split_write(whole, at(prefix, sizeof prefix, "empty-first"), 3, 1);
    loom_split_path(path, sizeof path, prefix, 0, 3, NULL);
    check_same_logits(whole, path, "first part without tensors");
}

/* Files in dir whose names start with prefix's last component (parts and temporaries of that prefix). */
static int files_of(const char *prefix)
{
    const char *base = strrchr(prefix, '/') + 1;
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += !strncmp(e->d_name, base, strlen(base));
    if (d)
        closedir(d);
    return n;
}

/* loom_gguf_write_split writes a whole set (loaded with the unsplit file's logits) or nothing: a part whose path is
 * taken by a directory, or whose name passes NAME_MAX with its suffix, is refused before any part is written, and
 * no part or temporary file is left. */
static void check_write_split(const char *whole)
{
    loom_gguf *in = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open(whole, &in, &err) == LOOM_OK, "open: %s", err.msg);
    if (!in)
        return;
    uint64_t n = in->n_tensors;
    struct loom_split_part p[3];
    for (uint32_t k = 0; k < 3; k++)
        p[k] = (struct loom_split_part){k, 3, (int32_t)n, k * n / 3, (k + 1) * n / 3 - k * n / 3, k == 0};
    char prefix[512], path[1024];
    at(prefix, sizeof prefix, "all");
    loom_split_path(path, sizeof path, prefix, 2, 3, NULL);
    CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
    int rc = loom_gguf_write_split(in, p, 3, prefix, &err);
    CHECK(rc == LOOM_E_ARG && strstr(err.msg, path) && strstr(err.msg, "found a directory") && files_of(prefix) == 1,
          "a third part's path taken by a directory: refused, no part written: rc %d, %s", rc, err.msg);
    rmdir(path);
    rc = loom_gguf_write_split(in, p, 3, prefix, &err);
    CHECK(rc == LOOM_OK && files_of(prefix) == 3, "write_split: %s", err.msg);
    loom_split_path(path, sizeof path, prefix, 0, 3, NULL);
    if (rc == LOOM_OK)
        check_same_logits(whole, path, "written by loom_gguf_write_split");
    int len = snprintf(prefix, sizeof prefix, "%s/", dir);
    memset(prefix + len, 'p', 236); /* + "-00001-of-00003.gguf": 256 bytes */
    prefix[len + 236] = 0;
    rc = loom_gguf_write_split(in, p, 3, prefix, &err);
    CHECK(rc == LOOM_E_ARG && strstr(err.msg, "file name of 256 bytes, expected at most 255") && files_of(prefix) == 0,
          "a part name past NAME_MAX: refused naming the limit, nothing written: rc %d, %s", rc, err.msg);
    loom_gguf_close(in);
}

/* Bytes of file path (0 when it cannot be read). */
static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* A failure partway through loom_gguf_write_split (part 1, metadata only, staged; part 2, all the tensors, past the
 * file size limit, as under `ulimit -f`) fails naming part 2 and leaves neither part nor any temporary file. */
static void check_write_split_partway(const char *whole)
{
    loom_gguf *in = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open(whole, &in, &err) == LOOM_OK, "open: %s", err.msg);
    if (!in)
        return;
    struct loom_split_part p[2] = {{0, 2, (int32_t)in->n_tensors, 0, 0, 1},
                                   {1, 2, (int32_t)in->n_tensors, 0, in->n_tensors, 0}};
    char prefix[512], first[1024], second[1024];
    at(prefix, sizeof prefix, "sized");
    loom_split_path(first, sizeof first, prefix, 0, 2, NULL);
    loom_split_path(second, sizeof second, prefix, 1, 2, NULL);
    int rc = loom_gguf_write_split(in, p, 2, prefix, &err);
    long long s1 = file_size(first), s2 = file_size(second);
    CHECK(rc == LOOM_OK && s1 > 0 && s2 > s1 + 1, "the sizing write: rc %d, parts of %lld and %lld bytes: %s", rc, s1,
          s2, err.msg);
    unlink(first);
    unlink(second);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = (struct rlimit){(rlim_t)(s1 + s2) / 2, old.rlim_max}; /* part 1 fits, part 2 does not */
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);                 /* a write past the limit fails with EFBIG */
    at(prefix, sizeof prefix, "limited");
    loom_split_path(second, sizeof second, prefix, 1, 2, NULL);
    if (rc == LOOM_OK && setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        rc = loom_gguf_write_split(in, p, 2, prefix, &err);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK(rc == LOOM_E_IO && strstr(err.msg, second) && strstr(err.msg, strerror(EFBIG)) && files_of(prefix) == 0,
              "part 2 past the file size limit: rc %d, %d files left: %s", rc, files_of(prefix), err.msg);
        printf("  %-34s %s\n", "part 2 past the file size limit", err.msg);
    }
    signal(SIGXFSZ, was);
    loom_gguf_close(in);
}

/* Synthesize preset (type) over the mini vocabulary, split it in 3 and compare. */
static void check_model(const char *vocab, const char *preset, uint32_t type, int full)
{
    char whole[512], prefix[512], first[1024];
    snprintf(whole, sizeof whole, "%s/%s.gguf", dir, preset);
    snprintf(prefix, sizeof prefix, "%s/%s-split", dir, preset);
    loom_error err = {0};
    struct loom_synth_params p = {loom_synth_find_preset(preset), type, 7, vocab, NULL, NULL, NULL, NULL, 0, NULL};
    int rc = loom_synth_write(&p, whole, &err);
    CHECK(rc == LOOM_OK, "synth %s: %s", preset, err.msg);
    if (rc || split_write(whole, prefix, 3, 0))
        return;
    loom_split_path(first, sizeof first, prefix, 0, 3, NULL);
    check_same_logits(whole, first, preset);
    check_parts(first, prefix, whole);
    if (!full)
        return;
    check_variants(whole);
    check_write_split(whole);
    check_write_split_partway(whole);
    check_identity(whole, first, prefix);
    check_failures(whole);
}

int main(void)
{
    char vocab[512];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return test_finish();
    }
    if (write_mini_vocab(at(vocab, sizeof vocab, "vocab.gguf")) == LOOM_OK) {
        check_model(vocab, "micro", LOOM_TYPE_F32, 1);
        check_model(vocab, "tiny-moe", LOOM_TYPE_F16, 0);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_finish();
}
