/* gguf_hold.c — holding the parts of a mapped GGUF file that a loaded model still reads in anonymous memory:
 * copies replace the file pages at the same addresses (so every pointer into the map stays valid), the rest of
 * the map becomes an inaccessible reservation and the file's page cache is dropped. Afterwards a file truncated
 * under the process cannot raise SIGBUS (no page of the map is backed by the file); the memory held is the
 * ranges kept. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "util/error.h"

/* Replace the map's pages [begin, end) by an inaccessible anonymous reservation: no file behind them, no memory,
 * and the addresses stay the map's (nothing else can be placed there before loom_gguf_close unmaps it all). */
static void release_pages(const uint8_t *map, uint64_t begin, uint64_t end)
{
    if (end > begin)
        mmap((void *)(map + begin), (size_t)(end - begin), PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

static int cmp_range(const void *a, const void *b)
{
    const struct loom_byte_range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Copy file bytes [begin, end) (page aligned, end may pass the end of the file: zeros there) into anonymous
 * memory at map + begin. */
static int hold_pages(int fd, const uint8_t *map, uint64_t size, uint64_t begin, uint64_t end, loom_error *err)
{
    size_t len = (size_t)(end - begin);
    void *anon = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (anon == MAP_FAILED)
        return loom_errorf(err, LOOM_E_NOMEM, "holding %zu bytes of the model file: %s", len, strerror(errno));
    uint64_t want = (end < size ? end : size) - begin, got = 0;
    while (got < want) {
        ssize_t r = pread(fd, (char *)anon + got, (size_t)(want - got), (off_t)(begin + got));
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            munmap(anon, len);
            return loom_errorf(err, LOOM_E_IO, "holding the model file: reading bytes %llu..%llu: %s",
                               (unsigned long long)(begin + got), (unsigned long long)(begin + want),
                               e ? strerror(e) : "the file ended early (truncated while loading?)");
        }
        got += (uint64_t)r;
    }
    if (mprotect(anon, len, PROT_READ) ||
        mremap(anon, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(map + begin)) == MAP_FAILED) {
        int e = errno;
        munmap(anon, len);
        return loom_errorf(err, LOOM_E_IO, "holding the model file: placing %zu bytes: %s", len, strerror(e));
    }
    return LOOM_OK;
}

int loom_gguf_hold(const struct loom_gguf *g, uint32_t part, int fd, struct loom_byte_range *keep, size_t n,
                   uint64_t *held, loom_error *err)
{
    const struct loom_gguf *f = part == 0 ? g : g->parts[part].file;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), size = f->size;
    uint64_t mapped = (size + page - 1) / page * page, cur = 0; /* [0, cur) is settled */
    qsort(keep, n, sizeof *keep, cmp_range);
    *held = 0;
    for (size_t i = 0; i < n;) {
        uint64_t begin = keep[i].begin / page * page, end = (keep[i].end + page - 1) / page * page;
        for (i++; i < n && keep[i].begin / page * page <= end; i++) /* merge ranges that share or touch pages */
            if ((keep[i].end + page - 1) / page * page > end)
                end = (keep[i].end + page - 1) / page * page;
        if (begin < cur)
            begin = cur;
        if (end > mapped)
            end = mapped;
        if (begin >= end)
            continue;
        release_pages(f->map, cur, begin);
        int rc = hold_pages(fd, f->map, size, begin, end, err);
        if (rc)
            return rc;
        posix_fadvise(fd, (off_t)begin, (off_t)(end - begin), POSIX_FADV_DONTNEED); /* no second copy meanwhile */
        *held += end - begin;
        cur = end;
    }
    release_pages(f->map, cur, mapped);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* advice only: the copies are what the process reads now */
    return LOOM_OK;
}
