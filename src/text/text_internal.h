/* text_internal.h — what the tokenizer's files share: the tokenizer struct, the lenient UTF-8 codec and
 * code point classes the pre-tokenizers use, the pre-token splitters (qwen35, qwen2, llama-bpe, gpt-2,
 * starcoder, deepseek-coder), GPT-2's byte-level alphabet, the BPE merge table and the SentencePiece
 * merge loop. Not part of any public interface. */
#ifndef LOOM_TEXT_INTERNAL_H
#define LOOM_TEXT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text/tokenizer.h"

/* Token types as numbered by GGUF's tokenizer.ggml.token_type. */
enum loom_tok_type {
    LOOM_TOK_NORMAL = 1, LOOM_TOK_UNKNOWN = 2, LOOM_TOK_CONTROL = 3,
    LOOM_TOK_USER_DEFINED = 4, LOOM_TOK_UNUSED = 5, LOOM_TOK_BYTE = 6,
};

/* ---- code points (pretokenize.c) ------------------------------------------------------------- */

/* Code point classes the pre-tokenizer regexes ask about (\p{L}, \p{M}, \p{N}, \s). */
enum {
    LOOM_CP_LETTER = 1, LOOM_CP_MARK = 2, LOOM_CP_NUMBER = 4, LOOM_CP_SPACE = 8,
    LOOM_CP_VALID = 16, /* any code point at or below U+10FFFF; 0 stands for "past the fragment" */
    LOOM_CP_PUNCT = 32, /* general category P (\p{P}) */
};

/* Decode text[len] leniently into cps (cap >= len is always enough): a byte that does not start a
 * sequence, or a sequence cut short, becomes U+FFFD and consumes one byte; lengths follow the lead byte
 * without overlong or surrogate checks (as llama.cpp's unicode_cpts_from_utf8 does, so the same bytes
 * tokenize the same). Code points past U+10FFFF count as invalid lead bytes. Returns the count. */
size_t loom_utf8_decode_lenient(const char *text, size_t len, uint32_t *cps);
/* Encode one code point (<= U+10FFFF, surrogates included) into out[4]; returns the byte count. */
int loom_utf8_encode(uint32_t cp, unsigned char *out);
/* Class bits of cp (LOOM_CP_*), from utf8proc's categories (Unicode 15.0) plus the CJK Extension I
 * letters of 15.1, and the White_Space property for LOOM_CP_SPACE (white space is never L, M, N or P). */
unsigned loom_cp_class(uint32_t cp);

/* Pre-tokenizers, by their tokenizer.ggml.pre names. */
enum loom_pre_kind {
    LOOM_PRE_QWEN2 = 0, LOOM_PRE_QWEN35, LOOM_PRE_LLAMA3, LOOM_PRE_GPT2, LOOM_PRE_STARCODER,
    LOOM_PRE_DEEPSEEK_CODER, LOOM_PRE_NONE, /* SentencePiece vocabularies: no pre-tokenizer */
};

/* Split cps[n] into pre-tokens (llama-vocab.cpp's regex list for the kind, applied in order, each one
 * cutting the pieces the previous left; unicode.cpp's semantics, matched by hand):
 *   qwen2:   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen35:  qwen2 with [\p{L}\p{M}]+ for \p{L}+ and \p{M} excluded from the punctuation run
 *   llama3:  qwen2 with \p{N}{1,3}
 *   gpt-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
 *   starcoder: \p{N}, then gpt-2
 *   deepseek-coder: [\r\n], \s?\p{L}+, \s?\p{P}+, [U+4E00-U+9FA5 U+0800-U+4E00 U+AC00-U+D7FF]+, \p{N}
 * With a list of expressions, text between matches stays a piece of its own.
 * Writes the end index of each pre-token to ends[] (capacity n); returns the count. */
size_t loom_pretokenize(enum loom_pre_kind kind, const uint32_t *cps, size_t n, uint32_t *ends);

/* ---- byte-level alphabet and BPE (bpe.c) ----------------------------------------------------- */

/* GPT-2's byte-to-unicode map: the code point that stands for byte b in token texts. */
uint32_t loom_bytelevel_cp(unsigned char b);
/* The byte a code point of a token text stands for, or -1 if it is not in the alphabet. */
int loom_bytelevel_byte(uint32_t cp);
/* Decode the next character of a byte-level token text at text[*pos] (len bytes in all) into out[4]:
 * one byte for a character of the alphabet, else the character's own UTF-8 bytes. Advances *pos;
 * returns the number of bytes written (1..4). */
int loom_bytelevel_next(const char *text, size_t len, size_t *pos, unsigned char *out);

/* The merge table. Ranks are priorities: positions in the file's list less the merges skipped. Slots of an
 * open-addressed table (load factor at most 1/2) each pack one merge as (right << id_bits | left) <<
 * rank_bits | (rank + 1), 0 = empty, so that a probe reads 8 bytes and needs nothing else. The token a
 * merge makes is merged[rank], or rank + merged_base in vocabularies built by their merges in order (most
 * byte-level BPE ones: qwen35, qwen2, gpt-2, starcoder, deepseek-coder), which keep no merged array.
 * qwen35's 151k merges: 4 MiB. Vocabularies whose ids and ranks do not fit 64 bits (over 2^21 tokens) are
 * refused. */
struct loom_merges {
    uint64_t *slots;  /* [mask + 1] */
    int32_t *merged;  /* [n], or NULL */
    int32_t merged_base;
    uint64_t mask;    /* capacity - 1 (power of two) */
    int id_bits, rank_bits;
    uint32_t n;
};

/* Rank of the merge of (left, right), or -1 if there is none. Allocation-free. */
int32_t loom_merges_rank(const struct loom_merges *m, int32_t left, int32_t right);

/* The token the merge of rank `rank` makes. */
static inline int32_t loom_merges_token(const struct loom_merges *m, int32_t rank)
{
    return m->merged ? m->merged[rank] : rank + m->merged_base;
}

/* The next string of a GGUF string array: *p walks the array's data (each string a little-endian u64
 * length, then its bytes; the GGUF reader has checked that every one lies inside the map). Walking in
 * place needs no per-array allocation at load. */
static inline struct loom_gguf_str loom_text_next_str(const uint8_t **p)
{
    struct loom_gguf_str s;
    memcpy(&s.len, *p, 8);
    s.ptr = (const char *)*p + 8;
    *p += 8 + s.len;
    return s;
}

/* Define static prefix##_push(PAIR *h, size_t *n, PAIR p) and PAIR prefix##_pop(PAIR *h, size_t *n) (*n > 0):
 * a binary heap over h[*n] that pops first the pair for which before(&a, &b) holds against every other.
 * The merge queues of BPE (bpe.c, lowest rank first) and SentencePiece (spm.c, highest score first). */
#define LOOM_DEFINE_PAIR_HEAP(prefix, PAIR, before)                                                            \
    static void prefix##_push(PAIR *h, size_t *n, PAIR p)                                                      \
    {                                                                                                          \
        size_t i = (*n)++;                                                                                     \
        while (i > 0) {                                                                                        \
            size_t parent = (i - 1) / 2;                                                                       \
            if (!before(&p, &h[parent]))                                                                       \
                break;                                                                                         \
            h[i] = h[parent];                                                                                  \
            i = parent;                                                                                        \
        }                                                                                                      \
        h[i] = p;                                                                                              \
    }                                                                                                          \
    static PAIR prefix##_pop(PAIR *h, size_t *n)                                                               \
    {                                                                                                          \
        PAIR top = h[0], last = h[--(*n)];                                                                     \
        size_t i = 0;                                                                                          \
        for (;;) {                                                                                             \
            size_t c = 2 * i + 1;                                                                              \
            if (c >= *n)                                                                                       \
                break;                                                                                         \
            if (c + 1 < *n && before(&h[c + 1], &h[c]))                                                        \
                c++;                                                                                           \
            if (!before(&h[c], &last))                                                                         \
                break;                                                                                         \
            h[i] = h[c];                                                                                       \
            i = c;                                                                                             \
        }                                                                                                      \
        if (*n > 0)                                                                                            \
            h[i] = last;                                                                                       \
        return top;                                                                                            \
    }

/* Count one output token: out[*n_out] = id while *n_out < cap, then ++*n_out (so the caller learns the
 * length it needs). */
static inline void loom_tokens_emit(int32_t id, int32_t *out, int cap, size_t *n_out)
{
    if (*n_out < (size_t)(cap > 0 ? cap : 0))
        out[*n_out] = id;
    (*n_out)++;
}

/* Scratch for BPE over one word; grown by loom_bpe_word as needed, freed by loom_bpe_scratch_free. */
struct loom_bpe_scratch {
    struct loom_bpe_sym *syms;
    struct loom_bpe_pair *heap;
    size_t cap_syms, cap_heap;
    struct loom_spm_sym *spm_syms; /* SentencePiece (spm.c) */
    struct loom_spm_pair *spm_heap;
    size_t cap_spm_syms, cap_spm_heap;
};
void loom_bpe_scratch_free(struct loom_bpe_scratch *s);

/* ---- the tokenizer (tokenizer.c) ------------------------------------------------------------- */

/* Vocabulary families by tokenizer.ggml.model: "gpt2" (byte-level BPE) and "llama" (SentencePiece). */
enum loom_vocab_kind { LOOM_VOCAB_BPE = 0, LOOM_VOCAB_SPM = 1 };

/* Room for the end-of-generation set: its sources (tokenizer.c) add at most one id each, 36 in all (22
 * spellings, 3 id keys, 11 fill-in-the-middle spellings). */
#define LOOM_MAX_EOG 40

/* Per-token partition attributes: strip white space on that side of a special token's match. */
enum { LOOM_STRIP_LEFT = 1, LOOM_STRIP_RIGHT = 2 };

struct loom_tokenizer {
    uint32_t n_vocab;
    uint32_t n_rows;
    const char *texts;       /* tokenizer.ggml.tokens in the GGUF map (not copied: the GGUF outlives us) */
    uint32_t *text_off;      /* [n_vocab + 1] offset of each text's bytes from texts; each is preceded by its
                              * 8-byte length, so text i ends at text_off[i + 1] - 8 (text_off[n_vocab] is the
                              * array's end + 8); the array spans at most 4 GiB */
    uint8_t *type;           /* [n_vocab] enum loom_tok_type after llama.cpp's name-based fixes */
    uint8_t *sampleable;     /* [n_rows] */
    int32_t eog[LOOM_MAX_EOG]; /* the end-of-generation set [n_eog] (a few ids) */
    uint32_t n_eog;
    int32_t *text_slots;     /* open-addressed text -> id table, -1 = empty; freed after loading when the
                              * encoder never looks a text up (byte-level BPE without ignore_merges) */
    uint64_t text_mask;
    struct loom_merges merges;
    uint32_t n_merges_skipped; /* merges naming a text outside the vocabulary */
    int32_t byte_token[256]; /* id of the one-character token for each byte, -1 if missing */
    int32_t *specials;       /* CONTROL / USER_DEFINED / UNKNOWN ids, longest text first */
    uint8_t *special_modes;  /* [n_specials] bit 1 << m set when enum loom_special_mode m splits specials[k] out */
    uint32_t n_specials;
    int32_t bos;             /* id to prepend, or -1 */
    int32_t special_id[LOOM_SPECIAL_ID_COUNT]; /* ids the file declares (enum loom_special_token), -1 = none */
    char *chat_template;     /* tokenizer.chat_template (NUL-terminated copy), or NULL */
    const struct loom_gguf *gguf; /* the file (its warnings) */
    struct loom_gguf *own_gguf;   /* the same when loom_tokenizer_open opened it (closed by loom_tokenizer_free) */
    enum loom_pre_kind pre;
    enum loom_vocab_kind kind;
    int ignore_merges;       /* llama3: a pre-token that is itself a token is taken whole */
    int add_space_prefix;    /* SentencePiece: a raw fragment after a special token (or first) gets ' ' */
    float *scores;           /* [n_vocab] SentencePiece merge scores, NULL for BPE */
    uint8_t *strip;          /* [n_vocab] LOOM_STRIP_* bits; NULL when no token strips (all but Phi-3) */
};

/* Token text of id (not NUL-terminated) and its length. id must be inside the vocabulary. */
static inline const char *loom_tokenizer_text(const struct loom_tokenizer *tok, int32_t id, size_t *len)
{
    *len = (size_t)(tok->text_off[id + 1] - 8 - tok->text_off[id]);
    return tok->texts + tok->text_off[id];
}

/* How a token's piece is made from its text. */
enum loom_piece_mode {
    LOOM_PIECE_EMPTY = 0, LOOM_PIECE_RAW, LOOM_PIECE_BYTELEVEL,
    LOOM_PIECE_SPM,      /* text with U+2581 standing for a space */
    LOOM_PIECE_SPM_BYTE, /* "<0xXX>": the byte XX */
};
static inline enum loom_piece_mode loom_tokenizer_piece_mode(const struct loom_tokenizer *tok, int32_t id)
{
    switch (tok->type[id]) {
    case LOOM_TOK_CONTROL: case LOOM_TOK_USER_DEFINED: case LOOM_TOK_UNKNOWN:
        return LOOM_PIECE_RAW;
    case LOOM_TOK_NORMAL:
        return tok->kind == LOOM_VOCAB_SPM ? LOOM_PIECE_SPM : LOOM_PIECE_BYTELEVEL;
    case LOOM_TOK_BYTE:
        return tok->kind == LOOM_VOCAB_SPM ? LOOM_PIECE_SPM_BYTE : LOOM_PIECE_BYTELEVEL;
    default:
        return LOOM_PIECE_EMPTY;
    }
}

/* Write the piece of id (inside the vocabulary) byte by byte through put(ctx, byte). */
void loom_tokenizer_piece_bytes(const struct loom_tokenizer *tok, int32_t id, void (*put)(void *ctx, unsigned char b),
                                void *ctx);

/* Id of the token whose text is s[len], or -1. Allocation-free. After loading only for vocabularies that
 * keep the text table (SentencePiece, ignore_merges); without it every text is -1. */
int32_t loom_tokenizer_find(const struct loom_tokenizer *tok, const char *s, size_t len);

/* Build tok->merges from tokenizer.ggml.merges (an array of strings "left right", split at the first space
 * after the first byte, as llama.cpp does); merges naming a text outside the vocabulary are skipped and
 * counted, a repeated pair keeps its first rank. Returns LOOM_OK, LOOM_E_FORMAT or LOOM_E_NOMEM. */
int loom_merges_build(struct loom_tokenizer *tok, const struct loom_gguf_kv *merges, loom_error *err);

/* Byte-level BPE of one pre-token: bytes[n] (already UTF-8) become token ids, appended to out at *n_out
 * (written only below cap; *n_out counts all). Ranks: lowest first, leftmost on ties (llama-vocab.cpp
 * llm_tokenizer_bpe_session). Returns LOOM_OK or LOOM_E_NOMEM. */
int loom_bpe_word(const struct loom_tokenizer *tok, struct loom_bpe_scratch *s, const unsigned char *bytes, size_t n,
                  int32_t *out, int cap, size_t *n_out);

/* SentencePiece over one raw fragment text[n] (already space-escaped with U+2581): start from UTF-8
 * characters, repeatedly merge the adjacent pair whose joined text is the token of highest score
 * (leftmost on ties), then any symbol that is not a token becomes its byte tokens (llama-vocab.cpp
 * llm_tokenizer_spm_session). Appends like loom_bpe_word. Returns LOOM_OK or LOOM_E_NOMEM. */
int loom_spm_fragment(const struct loom_tokenizer *tok, struct loom_bpe_scratch *s, const unsigned char *text, size_t n,
                      int32_t *out, int cap, size_t *n_out);

#endif
