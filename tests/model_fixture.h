/* model_fixture.h — what the tests that build a synthetic micro model share: the tokenizer-only GGUF of
 * MINI_TOKENS tokens they hand to loom_synth_write as its vocabulary, so the model stays small, and
 * writing and loading the model. Include after test.h. */
#ifndef LOOM_TEST_MODEL_FIXTURE_H
#define LOOM_TEST_MODEL_FIXTURE_H

#include <stdio.h>

#include "gguf/gguf.h"
#include "loom.h"
#include "model/synth.h"
#include "util/error.h"

#define MINI_TOKENS 300

static inline int mini_vocab_no_tensors(void *ctx, uint64_t index, void *buf, uint64_t nbytes, loom_error *err)
{
    (void)ctx, (void)index, (void)buf, (void)nbytes;
    return loom_errorf(err, LOOM_E_INTERNAL, "vocabulary file has no tensors");
}

/* Write to path a gpt2/qwen35 vocabulary of MINI_TOKENS NORMAL tokens ("t", "o", "to", then "tok3"..) and
 * the one merge "t o". Returns LOOM_OK or the writer's error (also reported with CHECK). */
static inline int write_mini_vocab(const char *path)
{
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    static struct loom_gguf_str toks[MINI_TOKENS];
    static char text[MINI_TOKENS][16];
    static int32_t types[MINI_TOKENS];
    for (int i = 0; i < MINI_TOKENS; i++) {
        const char *fixed[3] = {"t", "o", "to"};
        toks[i].len = (uint64_t)(i < 3 ? snprintf(text[i], sizeof text[i], "%s", fixed[i])
                                       : snprintf(text[i], sizeof text[i], "tok%d", i));
        toks[i].ptr = text[i];
        types[i] = 1;
    }
    loom_error err = {0};
    int rc = w ? LOOM_OK : LOOM_E_NOMEM;
    if (!rc)
        rc = loom_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    if (!rc)
        rc = loom_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen35");
    if (!rc)
        rc = loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, MINI_TOKENS);
    if (!rc)
        rc = loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, types, MINI_TOKENS);
    struct loom_gguf_str merge = {3, "t o"};
    if (!rc)
        rc = loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", &merge, 1);
    if (!rc)
        rc = loom_gguf_writer_write(w, path, mini_vocab_no_tensors, NULL, &err);
    loom_gguf_writer_free(w);
    CHECK(rc == LOOM_OK, "writing %s: %s", path, err.msg);
    return rc;
}

/* Synthesize the micro preset with weights of `type` and `seed` over the vocabulary file vocab into path,
 * and load it. Returns the model, or NULL (each failure reported with CHECK). */
static inline loom_model *load_micro_model(const char *vocab, const char *path, uint32_t type, uint64_t seed)
{
    loom_error err = {0};
    struct loom_synth_params p = {loom_synth_find_preset("micro"), type, seed, vocab, NULL, NULL, NULL, NULL, 0};
    int rc = loom_synth_write(&p, path, &err);
    CHECK(rc == LOOM_OK, "synth micro: %s", err.msg);
    loom_model *m = rc ? NULL : loom_model_load(path, &err);
    CHECK(m != NULL, "load %s: %s", path, err.msg);
    return m;
}

#endif
