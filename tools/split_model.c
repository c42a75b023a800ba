/* split_model.c — test tooling: `split_model [--no-tensor-first-split] IN.gguf PREFIX N` writes IN as N parts
 * PREFIX-0000K-of-0000N.gguf in llama.cpp's gguf-split layout (the first part carries all metadata, the tensors
 * follow in file order spread as evenly as their count allows, split.no / split.count / split.tensors.count in
 * every part; with --no-tensor-first-split, as gguf-split's option, the first part holds only the metadata and the
 * others share the tensors), with loom's GGUF writer (loom_gguf_write_split: every part or none, no temporary file
 * left on failure). The command-line tests split the cached tiny model with it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "loom.h"

/* g's tensors spread over n parts p[n] in file order (the j-th of the parts that hold tensors, of `spread`: tensors
 * [j * t / spread, (j + 1) * t / spread)); first_empty: part 0 holds none. */
static void spread_parts(const loom_gguf *g, struct loom_split_part *p, uint32_t n, int first_empty)
{
    uint32_t spread = n - (first_empty != 0);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t j = k - (first_empty != 0);
        uint64_t lo = first_empty && k == 0 ? 0 : j * g->n_tensors / spread;
        uint64_t hi = first_empty && k == 0 ? 0 : (j + 1) * g->n_tensors / spread;
        p[k] = (struct loom_split_part){k, n, (int32_t)g->n_tensors, lo, hi - lo, k == 0};
    }
}

int main(int argc, char **argv)
{
    int first_empty = argc > 1 && !strcmp(argv[1], "--no-tensor-first-split");
    argv += first_empty, argc -= first_empty;
    int lo = 1 + first_empty; /* with an empty first part, at least one part for the tensors */
    if (argc != 4 || atoi(argv[3]) < lo || atoi(argv[3]) > 65535) {
        fprintf(stderr, "usage: split_model [--no-tensor-first-split] IN.gguf PREFIX N (1 <= N <= 65535; 2 <= N "
                "with --no-tensor-first-split)\n");
        return 2;
    }
    uint32_t n_parts = (uint32_t)atoi(argv[3]);
    loom_gguf *g = NULL;
    loom_error err = {0};
    struct loom_split_part *p = calloc(n_parts, sizeof *p);
    int rc = p ? loom_gguf_open(argv[1], &g, &err)
               : loom_errorf(&err, LOOM_E_NOMEM, "out of memory for %u parts", n_parts);
    if (!rc) {
        spread_parts(g, p, n_parts, first_empty);
        rc = loom_gguf_write_split(g, p, n_parts, argv[2], &err);
    }
    loom_gguf_close(g);
    free(p);
    if (rc) {
        fprintf(stderr, "split_model: %s\n", err.msg);
        return 1;
    }
    return 0;
}
