/* split_fixture.h — writing a model file as a split model the way llama.cpp's gguf-split does (the first part
 * carries all metadata, the tensors follow in file order, split keys in every part), for the tests of split
 * loading (tests/test_split.c, tests/parity/test_ref_split.c). Include after test.h. */
#ifndef LOOM_TEST_SPLIT_FIXTURE_H
#define LOOM_TEST_SPLIT_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "loom.h"

/* Write the file `in` as n_parts parts PREFIX-0000K-of-0000N.gguf, its tensors spread as evenly as in order
 * (part k gets tensors [k * n / n_parts, (k + 1) * n / n_parts)); with first_empty, the first part holds only
 * the metadata (gguf-split --no-tensor-first-split) and the others share the tensors. All parts or none
 * (loom_gguf_write_split). Returns LOOM_OK or the error (also reported with CHECK). */
static inline int split_write(const char *in, const char *prefix, uint32_t n_parts, int first_empty)
{
    loom_gguf *g = NULL;
    loom_error err = {0};
    struct loom_split_part *p = calloc(n_parts, sizeof *p);
    int rc = p ? loom_gguf_open(in, &g, &err) : loom_errorf(&err, LOOM_E_NOMEM, "out of memory");
    uint32_t spread = n_parts - (first_empty != 0);
    for (uint32_t k = 0; !rc && k < n_parts; k++) {
        uint32_t j = k - (first_empty != 0); /* index among the parts that hold tensors */
        uint64_t lo = first_empty && k == 0 ? 0 : j * g->n_tensors / spread;
        uint64_t hi = first_empty && k == 0 ? 0 : (j + 1) * g->n_tensors / spread;
        p[k] = (struct loom_split_part){k, n_parts, (int32_t)g->n_tensors, lo, hi - lo, k == 0};
    }
    if (!rc)
        rc = loom_gguf_write_split(g, p, n_parts, prefix, &err);
    CHECK(rc == LOOM_OK, "splitting %s into %u parts: %s", in, n_parts, err.msg);
    loom_gguf_close(g);
    free(p);
    return rc;
}

#endif
