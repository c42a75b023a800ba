/* bpe.c — byte-level BPE: GPT-2's byte-to-unicode alphabet, the merge table (token-id pairs hashed once at
 * load; lookups never allocate), and the merge loop over one pre-token (lowest rank first, leftmost on
 * ties, as llama-vocab.cpp's llm_tokenizer_bpe_session does). */
#include "text/text_internal.h"

#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/array.h"
#include "util/error.h"

/* Bytes GPT-2 shows as themselves: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF. The other 68 bytes map, in
 * ascending order, to U+0100.. (openai/gpt-2 encoder.py bytes_to_unicode). */
uint32_t loom_bytelevel_cp(unsigned char b)
{
    if (b <= 0x20)
        return 256u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 256u + 33u + (b - 0x7Fu);
    if (b == 0xAD)
        return 256u + 67u;
    return b;
}

int loom_bytelevel_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp >= 256 && cp < 256 + 33)
        return (int)(cp - 256);
    if (cp >= 256 + 33 && cp < 256 + 67)
        return (int)(cp - 256 - 33 + 0x7F);
    if (cp == 256 + 67)
        return 0xAD;
    return -1;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The key of a pair as the slots store it above the rank bits. */
static uint64_t merge_key(const struct loom_merges *m, int32_t left, int32_t right)
{
    return (uint64_t)(uint32_t)right << m->id_bits | (uint32_t)left;
}

int32_t loom_merges_rank(const struct loom_merges *m, int32_t left, int32_t right)
{
    if (!m->slots || left < 0 || right < 0)
        return -1;
    uint64_t key = merge_key(m, left, right);
    for (uint64_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        uint64_t v = m->slots[i];
        if (v == 0)
            return -1;
        if (v >> m->rank_bits == key)
            return (int32_t)(v & ((1ull << m->rank_bits) - 1)) - 1;
    }
}

/* Append the merge (left, right) -> merged at the next rank unless the pair is already there (the first,
 * lowest-ranked occurrence of a pair wins, as in the reference). */
static void merges_insert(struct loom_merges *m, int32_t left, int32_t right, int32_t merged)
{
    uint64_t key = merge_key(m, left, right);
    for (uint64_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->slots[i] == 0) {
            m->merged[m->n++] = merged;
            m->slots[i] = key << m->rank_bits | m->n;
            return;
        }
        if (m->slots[i] >> m->rank_bits == key)
            return;
    }
}

/* A vocabulary built by its merges in order makes token rank + merged[0] at every rank: keep that base
 * instead of the array (loom_merges_token). */
static void merges_drop_implicit(struct loom_merges *m)
{
    int32_t base = m->n ? m->merged[0] : 0;
    for (uint32_t r = 0; r < m->n; r++)
        if (m->merged[r] != (int32_t)r + base)
            return;
    free(m->merged);
    m->merged = NULL;
    m->merged_base = base;
}

/* Bits that hold every value up to n. */
static int bits_for(uint64_t n)
{
    int b = 1;
    while (b < 64 && (n >> b) != 0)
        b++;
    return b;
}

/* Add the merge spelled s ("left right"); 0 when it names a text outside the vocabulary. joined has room
 * for s.len bytes. */
static int merges_add(struct loom_tokenizer *tok, struct loom_gguf_str s, char *joined)
{
    const char *space = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
    if (!space)
        return 0;
    size_t ll = (size_t)(space - s.ptr), rl = s.len - ll - 1;
    memcpy(joined, s.ptr, ll);
    memcpy(joined + ll, space + 1, rl);
    int32_t left = loom_tokenizer_find(tok, s.ptr, ll);
    int32_t right = loom_tokenizer_find(tok, space + 1, rl);
    int32_t merged = loom_tokenizer_find(tok, joined, ll + rl);
    if (left < 0 || right < 0 || merged < 0)
        return 0;
    merges_insert(&tok->merges, left, right, merged);
    return 1;
}

int loom_merges_build(struct loom_tokenizer *tok, const struct loom_gguf_kv *merges, loom_error *err)
{
    uint64_t n = merges->arr_n, cap = 16, max_len = 0;
    struct loom_merges *m = &tok->merges;
    m->id_bits = bits_for(tok->n_vocab - 1);
    m->rank_bits = bits_for(n);
    if (n > INT32_MAX || 2 * m->id_bits + m->rank_bits > 64)
        return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.merges: expected token ids and ranks to fit 64 bits "
                           "(at most 2^21 tokens and merges), found %u tokens and %llu merges", tok->n_vocab,
                           (unsigned long long)n);
    while (cap < 2 * n)
        cap *= 2;
    const uint8_t *p = merges->data;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = loom_text_next_str(&p).len;
        max_len = len > max_len ? len : max_len;
    }
    m->slots = calloc(cap, sizeof *m->slots);
    m->merged = malloc((n ? n : 1) * sizeof *m->merged);
    char *joined = malloc(max_len + 1);
    if (!m->slots || !m->merged || !joined) {
        free(joined);
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer.ggml.merges: cannot allocate the merge table (%llu merges)",
                           (unsigned long long)n);
    }
    m->mask = cap - 1;
    m->n = 0;
    tok->n_merges_skipped = 0;
    p = merges->data;
    for (uint64_t i = 0; i < n; i++)
        tok->n_merges_skipped += !merges_add(tok, loom_text_next_str(&p), joined);
    free(joined);
    merges_drop_implicit(m);
    return LOOM_OK;
}

/* A symbol of the word being merged: a token id (or DEAD once merged into its left neighbour) in a
 * doubly linked list over positions. */
struct loom_bpe_sym {
    int32_t id, prev, next;
};
#define DEAD (-2)

/* A candidate merge of adjacent symbols left/right, valid while their ids are still left_id/right_id. */
struct loom_bpe_pair {
    int32_t rank, left, right, left_id, right_id, merged;
};

void loom_bpe_scratch_free(struct loom_bpe_scratch *s)
{
    free(s->syms);
    free(s->heap);
    free(s->spm_syms);
    free(s->spm_heap);
    memset(s, 0, sizeof *s);
}

static int pair_before(const struct loom_bpe_pair *a, const struct loom_bpe_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

LOOM_DEFINE_PAIR_HEAP(heap, struct loom_bpe_pair, pair_before)

static void push_pair(const struct loom_tokenizer *tok, struct loom_bpe_scratch *s, size_t *n_heap, int32_t left,
                      int32_t right)
{
    if (left < 0 || right < 0)
        return;
    int32_t rank = loom_merges_rank(&tok->merges, s->syms[left].id, s->syms[right].id);
    if (rank < 0)
        return;
    struct loom_bpe_pair p = {rank, left, right, s->syms[left].id, s->syms[right].id,
                              loom_merges_token(&tok->merges, rank)};
    heap_push(s->heap, n_heap, p);
}

static int scratch_reserve(struct loom_bpe_scratch *s, size_t n)
{
    struct loom_bpe_sym *syms = loom_grow(s->syms, &s->cap_syms, n, sizeof *syms);
    s->syms = syms ? syms : s->syms;
    /* n - 1 initial pairs, at most 2 more per merge */
    struct loom_bpe_pair *heap = syms ? loom_grow(s->heap, &s->cap_heap, 3 * n, sizeof *heap) : NULL;
    s->heap = heap ? heap : s->heap;
    return heap ? LOOM_OK : LOOM_E_NOMEM;
}

int loom_bpe_word(const struct loom_tokenizer *tok, struct loom_bpe_scratch *s, const unsigned char *bytes, size_t n,
                  int32_t *out, int cap, size_t *n_out)
{
    if (n == 0)
        return LOOM_OK;
    if (n > INT32_MAX / 4 || scratch_reserve(s, n) != LOOM_OK)
        return LOOM_E_NOMEM;
    for (size_t i = 0; i < n; i++)
        s->syms[i] = (struct loom_bpe_sym){tok->byte_token[bytes[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
    size_t n_heap = 0;
    for (size_t i = 1; i < n; i++)
        push_pair(tok, s, &n_heap, (int32_t)i - 1, (int32_t)i);
    while (n_heap > 0) {
        struct loom_bpe_pair p = heap_pop(s->heap, &n_heap);
        struct loom_bpe_sym *l = &s->syms[p.left], *r = &s->syms[p.right];
        if (l->id != p.left_id || r->id != p.right_id || l->next != p.right)
            continue; /* stale: one side has merged since this pair was queued */
        l->id = p.merged;
        r->id = DEAD;
        l->next = r->next;
        if (r->next >= 0)
            s->syms[r->next].prev = p.left;
        push_pair(tok, s, &n_heap, l->prev, p.left);
        push_pair(tok, s, &n_heap, p.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        if (s->syms[i].id < 0)
            continue; /* a byte with no token of its own: the reference drops it too */
        loom_tokens_emit(s->syms[i].id, out, cap, n_out);
    }
    return LOOM_OK;
}

int loom_bytelevel_next(const char *text, size_t len, size_t *pos, unsigned char *out)
{
    const unsigned char *s = (const unsigned char *)text + *pos;
    size_t left = len - *pos;
    size_t n = s[0] < 0xC0 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    if (n > left || (n == 2 && (s[1] & 0xC0) != 0x80))
        n = 1;
    int b = -1; /* the alphabet is U+0021..U+0143: one- and two-byte characters only */
    if (n == 1 && s[0] < 0x80)
        b = loom_bytelevel_byte(s[0]);
    else if (n == 2)
        b = loom_bytelevel_byte(((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu));
    *pos += n;
    if (b >= 0) {
        out[0] = (unsigned char)b;
        return 1;
    }
    memcpy(out, s, n); /* not in the alphabet: the character's own bytes */
    return (int)n;
}
