/* chat_tokens.c — token ids of a chat render with provenance: special tokens come only from CONTROL bytes
 * (template-authored markers); the text between two markers, DATA and CONTROL alike, is encoded as one plain
 * run so that byte-level BPE sees the same pre-tokens as when the whole render is tokenized at once. */
#include <limits.h>
#include <stdlib.h>

#include "text/chat.h"
#include "util/error.h"

#define MARKER_MAX 64 /* longest special-token spelling looked for, bytes */

struct idbuf {
    int32_t *v;
    int n, cap;
};

/* Append the plain encoding (parse_special = 0) of text[len], or the single id when id >= 0. */
static int idbuf_add(struct idbuf *b, const struct loom_tokenizer *tok, const char *text, size_t len, int32_t id,
                     loom_error *err)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int k = 1;
        if (id >= 0) {
            if (b->n < b->cap)
                b->v[b->n] = id;
        } else {
            k = loom_tokenizer_encode(tok, text, len, 0, b->v + b->n, b->cap - b->n, err);
            if (k < 0)
                return k;
        }
        if (k <= b->cap - b->n) {
            b->n += k;
            return LOOM_OK;
        }
        if (k > INT_MAX / 4 - b->n)
            return loom_errorf(err, LOOM_E_RANGE, "chat tokenize: more than %d ids", INT_MAX / 4);
        int cap = 2 * (b->n + k);
        int32_t *v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v)
            return loom_errorf(err, LOOM_E_NOMEM, "chat tokenize: could not allocate %d ids", cap);
        b->v = v;
        b->cap = cap;
    }
    return loom_errorf(err, LOOM_E_INTERNAL, "chat tokenize: the tokenizer gave a different count on retry");
}

/* When CONTROL bytes s[0..n) start with the spelling of a special token ("<" ... ">" holding a letter, which
 * byte-level pre-tokenization never keeps in one piece, and which encodes to one id with parse_special = 1),
 * return its length and set *id; else 0. The longest spelling wins. */
static size_t marker_at(const struct loom_tokenizer *tok, const char *s, size_t n, int32_t *id)
{
    size_t best = 0;
    int letter = 0;
    for (size_t j = 1; s[0] == '<' && j < n && j < MARKER_MAX; j++) {
        char c = s[j];
        letter |= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        int32_t one[2];
        if (c == '>' && letter && loom_tokenizer_encode(tok, s, j + 1, 1, one, 2, NULL) == 1) {
            best = j + 1;
            *id = one[0];
        }
    }
    return best;
}

int loom_chat_tokenize(const struct loom_tokenizer *tok, const struct loom_chat_render *r, int32_t **ids, int *n,
                       loom_error *err)
{
    size_t guess = r->len / 2 + 16;
    struct idbuf b = {malloc((guess < (1u << 20) ? guess : (1u << 20)) * sizeof(int32_t)), 0, 0};
    if (!b.v)
        return loom_errorf(err, LOOM_E_NOMEM, "chat tokenize: could not allocate %zu ids", guess);
    b.cap = (int)(guess < (1u << 20) ? guess : (1u << 20));
    size_t run = 0; /* start of the plain text not yet encoded */
    int rc = LOOM_OK;
    for (size_t k = 0; rc == LOOM_OK && k < r->n_seg; k++) {
        const struct loom_chat_segment *s = &r->seg[k];
        for (size_t i = s->off; rc == LOOM_OK && s->kind == LOOM_CHAT_CONTROL && i < s->off + s->len; i++) {
            int32_t id;
            size_t m = r->text[i] == '<' ? marker_at(tok, r->text + i, s->off + s->len - i, &id) : 0;
            if (m == 0)
                continue;
            rc = idbuf_add(&b, tok, r->text + run, i - run, -1, err);
            if (rc == LOOM_OK)
                rc = idbuf_add(&b, tok, NULL, 0, id, err);
            run = i + m;
            i = run - 1;
        }
    }
    if (rc == LOOM_OK)
        rc = idbuf_add(&b, tok, r->text + run, r->len - run, -1, err);
    if (rc != LOOM_OK) {
        free(b.v);
        return rc;
    }
    *ids = b.v;
    *n = b.n;
    return LOOM_OK;
}
