/* spm.c — SentencePiece-style tokenization (tokenizer.ggml.model = "llama"): the score-driven merge loop
 * over the UTF-8 characters of one raw fragment, and the byte-token fallback for symbols that are not
 * tokens. Semantics follow llama-vocab.cpp's llm_tokenizer_spm_session. */
#include "text/text_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/error.h"

/* A symbol: the text span [off, off + n) (n == 0 once merged into its left neighbour), in a linked list. */
struct loom_spm_sym {
    uint32_t off, n;
    int32_t prev, next;
};

/* A candidate merge of adjacent symbols; valid while left and right still span size bytes together. */
struct loom_spm_pair {
    float score;
    int32_t left, right;
    uint32_t size;
};

/* Highest score first; leftmost on ties. */
static int pair_before(const struct loom_spm_pair *a, const struct loom_spm_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

LOOM_DEFINE_PAIR_HEAP(heap, struct loom_spm_pair, pair_before)

static int reserve(struct loom_bpe_scratch *s, size_t n)
{
    struct loom_spm_sym *syms = loom_grow(s->spm_syms, &s->cap_spm_syms, n, sizeof *syms);
    s->spm_syms = syms ? syms : s->spm_syms;
    /* n - 1 initial pairs, at most 2 more per merge */
    struct loom_spm_pair *heap = syms ? loom_grow(s->spm_heap, &s->cap_spm_heap, 3 * n, sizeof *heap) : NULL;
    s->spm_heap = heap ? heap : s->spm_heap;
    return heap ? LOOM_OK : LOOM_E_NOMEM;
}

static void try_pair(const struct loom_tokenizer *tok, struct loom_bpe_scratch *s, const unsigned char *text,
                     size_t *n_heap, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    const struct loom_spm_sym *l = &s->spm_syms[left], *r = &s->spm_syms[right];
    int32_t id = loom_tokenizer_find(tok, (const char *)text + l->off, (size_t)l->n + r->n);
    if (id < 0)
        return;
    heap_push(s->spm_heap, n_heap, (struct loom_spm_pair){tok->scores[id], left, right, l->n + r->n});
}

int loom_spm_fragment(const struct loom_tokenizer *tok, struct loom_bpe_scratch *s, const unsigned char *text, size_t n,
                      int32_t *out, int cap, size_t *n_out)
{
    if (n == 0)
        return LOOM_OK;
    if (n > INT32_MAX / 4 || reserve(s, n) != LOOM_OK)
        return LOOM_E_NOMEM;
    size_t n_sym = 0;
    for (size_t off = 0; off < n;) { /* characters by their lead byte's length, cut at the end */
        unsigned b = text[off];
        size_t len = b < 0x80 ? 1 : (b >> 4) == 0xF ? 4 : (b >> 5) == 0x7 ? 3 : (b >> 6) == 0x3 ? 2 : 1;
        if (len > n - off)
            len = n - off;
        s->spm_syms[n_sym] = (struct loom_spm_sym){(uint32_t)off, (uint32_t)len, (int32_t)n_sym - 1,
                                                   off + len < n ? (int32_t)n_sym + 1 : -1};
        n_sym++;
        off += len;
    }
    size_t n_heap = 0;
    for (size_t i = 1; i < n_sym; i++)
        try_pair(tok, s, text, &n_heap, (int32_t)i - 1, (int32_t)i);
    while (n_heap > 0) {
        struct loom_spm_pair p = heap_pop(s->spm_heap, &n_heap);
        struct loom_spm_sym *l = &s->spm_syms[p.left], *r = &s->spm_syms[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size)
            continue; /* stale: one side has merged since this pair was queued */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            s->spm_syms[r->next].prev = p.left;
        try_pair(tok, s, text, &n_heap, l->prev, p.left);
        try_pair(tok, s, text, &n_heap, p.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = s->spm_syms[i].next) {
        const struct loom_spm_sym *sym = &s->spm_syms[i];
        int32_t id = loom_tokenizer_find(tok, (const char *)text + sym->off, sym->n);
        if (id >= 0) {
            loom_tokens_emit(id, out, cap, n_out);
            continue;
        }
        for (uint32_t j = 0; j < sym->n; j++) /* not a token: its bytes, as <0xXX> tokens */
            if (tok->byte_token[text[sym->off + j]] >= 0)
                loom_tokens_emit(tok->byte_token[text[sym->off + j]], out, cap, n_out);
    }
    return LOOM_OK;
}
