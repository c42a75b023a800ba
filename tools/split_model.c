/* split_model.c — test tooling: `split_model IN.gguf PREFIX N` writes IN as N parts PREFIX-0000K-of-0000N.gguf in
 * llama.cpp's gguf-split layout (the first part carries all metadata, the tensors follow in file order spread
 * as evenly as their count allows, split.no / split.count / split.tensors.count in every part), with loom's GGUF
 * writer (src/gguf/gguf_split.c). The command-line tests split the cached tiny model with it. */
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "loom.h"

int main(int argc, char **argv)
{
    if (argc != 4 || atoi(argv[3]) < 1 || atoi(argv[3]) > 65535) {
        fprintf(stderr, "usage: split_model IN.gguf PREFIX N (1 <= N <= 65535)\n");
        return 2;
    }
    uint32_t n_parts = (uint32_t)atoi(argv[3]);
    loom_gguf *g = NULL;
    loom_error err = {0};
    int rc = loom_gguf_open(argv[1], &g, &err);
    for (uint32_t k = 0; !rc && k < n_parts; k++) {
        uint64_t lo = k * g->n_tensors / n_parts, hi = (k + 1) * g->n_tensors / n_parts;
        struct loom_split_part p = {k, n_parts, (int32_t)g->n_tensors, lo, hi - lo, k == 0};
        char path[4096];
        if (!(rc = loom_split_path(path, sizeof path, argv[2], k, n_parts, &err)))
            rc = loom_gguf_write_part(g, &p, path, &err);
    }
    loom_gguf_close(g);
    if (rc) {
        fprintf(stderr, "split_model: %s\n", err.msg);
        return 1;
    }
    return 0;
}
