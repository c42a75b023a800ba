/* encode.c — text to token ids: split out the special-token spellings the mode matches (longest first, as
 * llama-vocab.cpp's tokenizer_st_partition does), then cut each remaining fragment into pre-tokens and run
 * byte-level BPE on each, or (SentencePiece vocabularies) escape its spaces and run the score-driven merge. */
#include "text/text_internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/error.h"

/* A piece of the input: raw text [off, off + len) when id < 0, else one special token. */
struct frag {
    size_t off, len;
    int32_t id;
};

struct frag_list {
    struct frag *v;
    size_t n, cap;
};

static int frag_push(struct frag_list *l, size_t off, size_t len, int32_t id)
{
    struct frag *v = loom_grow(l->v, &l->cap, l->n + 1, sizeof *v);
    if (!v)
        return LOOM_E_NOMEM;
    l->v = v;
    l->v[l->n++] = (struct frag){off, len, id};
    return LOOM_OK;
}

/* Split the raw fragments of *a at every occurrence of special token id, left to right, into *b. */
static int split_on(const struct loom_tokenizer *tok, const char *text, int32_t id, const struct frag_list *a,
                    struct frag_list *b)
{
    size_t slen;
    const char *s = loom_tokenizer_text(tok, id, &slen);
    b->n = 0;
    for (size_t i = 0; i < a->n; i++) {
        struct frag f = a->v[i];
        if (f.id >= 0) {
            if (frag_push(b, f.off, f.len, f.id) != LOOM_OK)
                return LOOM_E_NOMEM;
            continue;
        }
        size_t off = f.off, end = f.off + f.len;
        const char *hit;
        while (off < end && (hit = memmem(text + off, end - off, s, slen)) != NULL) {
            size_t at = (size_t)(hit - text), left_end = at;
            if (tok->strip && (tok->strip[id] & LOOM_STRIP_LEFT))
                while (left_end > off && isspace((unsigned char)text[left_end - 1]))
                    left_end--;
            if ((left_end > off && frag_push(b, off, left_end - off, -1) != LOOM_OK) ||
                frag_push(b, at, slen, id) != LOOM_OK)
                return LOOM_E_NOMEM;
            off = at + slen;
            if (tok->strip && (tok->strip[id] & LOOM_STRIP_RIGHT))
                while (off < end && isspace((unsigned char)text[off]))
                    off++;
        }
        if (off < end && frag_push(b, off, end - off, -1) != LOOM_OK)
            return LOOM_E_NOMEM;
    }
    return LOOM_OK;
}

/* Partition text[len] into raw fragments and the special tokens that parse_special (enum loom_special_mode)
 * splits out (tok->special_modes): DATA only plain-text USER_DEFINED tokens, USER_DEFINED every USER_DEFINED
 * token (CONTROL and UNKNOWN spellings stay plain text, as in the reference with parse_special = false), ALL
 * every special token. */
static int partition(const struct loom_tokenizer *tok, const char *text, size_t len, int parse_special,
                     struct frag_list *out)
{
    struct frag_list tmp = {0};
    int rc = frag_push(out, 0, len, -1);
    for (uint32_t k = 0; rc == LOOM_OK && k < tok->n_specials; k++) {
        if (!(tok->special_modes[k] & (1u << parse_special)))
            continue;
        rc = split_on(tok, text, tok->specials[k], out, &tmp);
        struct frag_list swap = *out;
        *out = tmp;
        tmp = swap;
    }
    free(tmp.v);
    return rc;
}

struct encode_buf {
    uint32_t *cps, *ends;
    unsigned char *bytes; /* 4 * len + 4 */
    unsigned char *level; /* 8 * len: a word in the byte-level alphabet (llama3's whole-word lookup) */
    struct loom_bpe_scratch bpe;
};

static void emit(int32_t id, int32_t *out, int cap, size_t *n_out)
{
    if (*n_out < (size_t)cap)
        out[*n_out] = id;
    (*n_out)++;
}

/* The token whose byte-level text spells bytes[n], or -1. */
static int32_t find_whole_word(const struct loom_tokenizer *tok, unsigned char *level, const unsigned char *bytes,
                               size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += (size_t)loom_utf8_encode(loom_bytelevel_cp(bytes[i]), level + m);
    return loom_tokenizer_find(tok, (const char *)level, m);
}

/* Pre-tokenize and BPE one raw fragment (the buffers hold at least len code points, 4 * len bytes). */
static int encode_raw(const struct loom_tokenizer *tok, struct encode_buf *b, const char *text, size_t len,
                      int32_t *out, int cap, size_t *n_out)
{
    size_t n_cp = loom_utf8_decode_lenient(text, len, b->cps);
    size_t n_words = loom_pretokenize(tok->pre, b->cps, n_cp, b->ends);
    size_t start = 0;
    for (size_t w = 0; w < n_words; w++) {
        size_t nb = 0;
        for (size_t j = start; j < b->ends[w]; j++)
            nb += (size_t)loom_utf8_encode(b->cps[j], b->bytes + nb);
        start = b->ends[w];
        int32_t whole = tok->ignore_merges ? find_whole_word(tok, b->level, b->bytes, nb) : -1;
        if (whole >= 0)
            emit(whole, out, cap, n_out);
        else if (loom_bpe_word(tok, &b->bpe, b->bytes, nb, out, cap, n_out) != LOOM_OK)
            return LOOM_E_NOMEM;
    }
    return LOOM_OK;
}

/* SentencePiece: ' ' first when add_space_prefix asks and the fragment starts the text or follows a special
 * token, every space escaped as U+2581, then the merge loop. */
static int encode_spm(const struct loom_tokenizer *tok, struct encode_buf *b, const char *text, size_t len,
                      int prefix, int32_t *out, int cap, size_t *n_out)
{
    static const unsigned char k_space[3] = {0xE2, 0x96, 0x81};
    size_t m = 0;
    if (prefix) {
        memcpy(b->bytes, k_space, 3);
        m = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(b->bytes + m, k_space, 3);
            m += 3;
        } else {
            b->bytes[m++] = (unsigned char)text[i];
        }
    }
    return loom_spm_fragment(tok, &b->bpe, b->bytes, m, out, cap, n_out);
}

int loom_tokenizer_encode(const struct loom_tokenizer *tok, const char *text, size_t len, int parse_special,
                          int32_t *out, int cap, loom_error *err)
{
    if (parse_special != LOOM_SPECIAL_DATA && parse_special != LOOM_SPECIAL_ALL &&
        parse_special != LOOM_SPECIAL_USER_DEFINED)
        return loom_errorf(err, LOOM_E_ARG, "tokenizer encode: special-token mode %d is not 0, 1 or 2",
                           parse_special);
    if ((!text && len) || cap < 0 || (!out && cap > 0))
        return loom_errorf(err, LOOM_E_ARG, "tokenizer encode: text, out or cap invalid (len %zu, cap %d)", len, cap);
    if (len > (size_t)INT_MAX / 4)
        return loom_errorf(err, LOOM_E_RANGE, "tokenizer encode: text of %zu bytes exceeds the limit of %d", len,
                           INT_MAX / 4);
    if (len == 0)
        return 0;
    struct frag_list frags = {0};
    struct encode_buf b = {0};
    size_t n_out = 0;
    int rc = partition(tok, text, len, parse_special, &frags);
    if (rc == LOOM_OK) {
        b.cps = malloc(len * sizeof *b.cps);
        b.ends = malloc(len * sizeof *b.ends);
        b.bytes = malloc(4 * len + 4);
        b.level = tok->ignore_merges ? malloc(8 * len) : NULL;
        if (!b.cps || !b.ends || !b.bytes || (tok->ignore_merges && !b.level))
            rc = LOOM_E_NOMEM;
    }
    int prev_special = 1;
    for (size_t i = 0; rc == LOOM_OK && i < frags.n; i++) {
        const struct frag *f = &frags.v[i];
        if (f->id >= 0)
            emit(f->id, out, cap, &n_out);
        else if (tok->kind == LOOM_VOCAB_SPM)
            rc = encode_spm(tok, &b, text + f->off, f->len, tok->add_space_prefix && prev_special, out, cap, &n_out);
        else
            rc = encode_raw(tok, &b, text + f->off, f->len, out, cap, &n_out);
        prev_special = f->id >= 0;
    }
    free(frags.v);
    free(b.cps);
    free(b.ends);
    free(b.bytes);
    free(b.level);
    loom_bpe_scratch_free(&b.bpe);
    if (rc != LOOM_OK)
        return loom_errorf(err, rc, "tokenizer encode: out of memory on a text of %zu bytes", len);
    if (n_out > (size_t)INT_MAX)
        return loom_errorf(err, LOOM_E_RANGE, "tokenizer encode: %zu tokens exceed the limit of %d", n_out, INT_MAX);
    return (int)n_out;
}
