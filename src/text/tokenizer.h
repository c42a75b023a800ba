/* tokenizer.h — the tokenizer built from a GGUF's tokenizer.ggml.* metadata (byte-level BPE with the
 * qwen35, qwen2, llama-bpe, gpt-2, starcoder or deepseek-coder pre-tokenizer; SentencePiece vocabularies),
 * token types, the end-of-generation set, and a streaming detokenizer that never emits half a UTF-8
 * character. */
#ifndef LOOM_TEXT_TOKENIZER_H
#define LOOM_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "loom.h"

struct loom_tokenizer;

/* Build from g's tokenizer.ggml.* keys. n_rows is the logits width (rows of the output head): ids at or
 * past the vocabulary size, and ids typed UNUSED, are not sampleable. The tokenizer reads the token texts
 * in g's map (no copy): g must stay open until loom_tokenizer_free. */
int loom_tokenizer_load(const struct loom_gguf *g, uint32_t n_rows, struct loom_tokenizer **out, loom_error *err);
void loom_tokenizer_free(struct loom_tokenizer *tok);

uint32_t loom_tokenizer_n_vocab(const struct loom_tokenizer *tok);
/* Which spellings of special tokens in the text become their ids (rule: caller text stays data).
 * DATA: the mode for anything a user, tool or file wrote. Only a vocabulary's plain-text added tokens match:
 * USER_DEFINED tokens not spelled as a tag (MPT's runs of spaces, DeepSeek-Coder's "õ"), exactly as the
 * reference matches them with parse_special = false. A USER_DEFINED token spelled as a tag — "<" ... ">" or
 * "[" ... "]", three bytes or more (Qwen's <think> and <tool_call>, [PAD151646]) — is a control marker and,
 * like every CONTROL token, stays text. ALL: CONTROL and USER_DEFINED tokens — only for trusted,
 * template-authored text. USER_DEFINED: every USER_DEFINED token, markers included, which is what the
 * reference (and Hugging Face) do with parse_special = false; kept for parity tests against it. */
enum loom_special_mode { LOOM_SPECIAL_DATA = 0, LOOM_SPECIAL_ALL = 1, LOOM_SPECIAL_USER_DEFINED = 2 };

/* Encode UTF-8 text; parse_special is an enum loom_special_mode. Writes at most cap ids to out; returns the
 * count the text needs (may exceed cap) or a negative code (LOOM_E_ARG for an unknown mode). */
int loom_tokenizer_encode(const struct loom_tokenizer *tok, const char *text, size_t len, int parse_special,
                          int32_t *out, int cap, loom_error *err);
/* Raw bytes of one token (byte-level BPE decoded; control tokens give their spelling). Returns the byte count
 * (may exceed cap; nothing past cap is written) or LOOM_E_ARG for an id outside the vocabulary. */
int loom_tokenizer_piece(const struct loom_tokenizer *tok, int32_t id, char *buf, int cap);
/* Text of ids[n]: the pieces back to back, less the one leading space a SentencePiece vocabulary's space
 * prefix added (llama_detokenize without its clean-up of spaces). Writes at most cap bytes; returns the
 * byte count the text needs (may exceed cap), LOOM_E_ARG for an id outside the vocabulary. */
int loom_tokenizer_detokenize(const struct loom_tokenizer *tok, const int32_t *ids, size_t n, char *out, size_t cap);
/* Per-row flags [n_rows]: 1 where the row may be sampled. */
const uint8_t *loom_tokenizer_sampleable(const struct loom_tokenizer *tok);
int loom_tokenizer_is_eog(const struct loom_tokenizer *tok, int32_t id);
/* Beginning-of-sequence id to prepend (or -1 when the vocabulary does not add one). */
int32_t loom_tokenizer_bos(const struct loom_tokenizer *tok);

/* Streaming detokenizer: feed ids one by one; complete UTF-8 characters come out, an incomplete tail is held
 * back until it completes. Bytes that can never form a valid character come out as U+FFFD. */
struct loom_detok {
    const struct loom_tokenizer *tok;
    unsigned char pending[8];
    int n_pending;
};
void loom_detok_init(struct loom_detok *d, const struct loom_tokenizer *tok);
/* Append the text that becomes complete after id to out (cap bytes); returns bytes written or a negative code. */
int loom_detok_push(struct loom_detok *d, int32_t id, char *out, int cap);
/* Flush whatever is held back at the end of generation (invalid tails as U+FFFD); returns bytes written. */
int loom_detok_flush(struct loom_detok *d, char *out, int cap);

#endif
