/* mini_vocab.h — the smallest vocabulary a synthetic model can carry, for tests that write many models fast: a GGUF
 * of tokenizer keys only (GPT-2 BPE, the qwen35 pre-tokenizer, tokens "tok0".. typed NORMAL, no merges), which
 * synth pads to a preset's vocabulary rows. */
#ifndef LOOM_TEST_MINI_VOCAB_H
#define LOOM_TEST_MINI_VOCAB_H

#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "util/error.h"

/* Write the n-token vocabulary (n >= 1) to path. LOOM_OK or the writer's error code (err says why). */
static inline int write_mini_vocab_file(const char *path, int n, loom_error *err)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    struct loom_gguf_str *toks = calloc((size_t)n, sizeof *toks);
    char(*text)[16] = calloc((size_t)n, sizeof *text);
    int32_t *types = calloc((size_t)n, sizeof *types);
    int rc = w && toks && text && types ? LOOM_OK : loom_errorf(err, LOOM_E_NOMEM, "mini vocabulary: out of memory");
    for (int i = 0; rc == LOOM_OK && i < n; i++) {
        toks[i].len = (uint64_t)snprintf(text[i], sizeof text[i], "tok%d", i);
        toks[i].ptr = text[i];
        types[i] = 1;
    }
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen35");
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n);
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, types, (uint64_t)n);
    if (rc == LOOM_OK)
        rc = loom_gguf_writer_write(w, path, NULL, NULL, err); /* no tensors */
    loom_gguf_writer_free(w);
    free(toks);
    free(text);
    free(types);
    return rc;
}

#endif
