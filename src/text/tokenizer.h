/* tokenizer.h — inside loom: building the tokenizer (include/loom.h: loom_tokenizer, "Text: tokenizer") from an
 * open GGUF, for the model loader. Every other tokenizer function is public (loom.h). */
#ifndef LOOM_TEXT_TOKENIZER_H
#define LOOM_TEXT_TOKENIZER_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "loom.h"

/* Build from g's tokenizer.ggml.* keys (and tokenizer.chat_template). n_rows is the logits width (rows of the
 * output head), 0 for the vocabulary size: ids at or past the vocabulary size, and ids typed UNUSED, are not
 * sampleable. The tokenizer reads the token texts in g's map (no copy): g must stay open until
 * loom_tokenizer_free, which does not close it. A special token id key ignored for being outside the vocabulary
 * adds a warning to g (tokenizer.c read_special_id). */
int loom_tokenizer_load(struct loom_gguf *g, uint32_t n_rows, struct loom_tokenizer **out, loom_error *err);

#endif
