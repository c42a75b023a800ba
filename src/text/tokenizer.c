/* tokenizer.c — loading a byte-level BPE vocabulary from GGUF tokenizer.ggml.* metadata (token texts,
 * types, merges, special ids), the end-of-generation set and sampleable rows, encoding (special-token
 * partition, then pre-tokens, then BPE) and token pieces. Semantics follow llama-vocab.cpp. */
#include "text/text_internal.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "util/error.h"

/* ---- text -> id table -------------------------------------------------------------------------- */

int32_t loom_tokenizer_find(const struct loom_tokenizer *tok, const char *s, size_t len)
{
    for (uint64_t i = XXH3_64bits(s, len) & tok->text_mask;; i = (i + 1) & tok->text_mask) {
        int32_t id = tok->text_slots[i];
        if (id < 0)
            return -1;
        size_t tl;
        const char *t = loom_tokenizer_text(tok, id, &tl);
        if (tl == len && memcmp(t, s, len) == 0)
            return id;
    }
}

/* A later duplicate text replaces the earlier id, as the reference's token_to_id map does. */
static void text_insert(struct loom_tokenizer *tok, int32_t id)
{
    size_t len;
    const char *s = loom_tokenizer_text(tok, id, &len);
    for (uint64_t i = XXH3_64bits(s, len) & tok->text_mask;; i = (i + 1) & tok->text_mask) {
        int32_t cur = tok->text_slots[i];
        size_t cl = 0;
        const char *c = cur >= 0 ? loom_tokenizer_text(tok, cur, &cl) : NULL;
        if (!c || (cl == len && memcmp(c, s, len) == 0)) {
            tok->text_slots[i] = id;
            return;
        }
    }
}

/* ---- loading ----------------------------------------------------------------------------------- */

static int load_texts(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    const struct loom_gguf_kv *kv;
    int rc = loom_gguf_get_arr(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, 0, &kv, err);
    if (rc != LOOM_OK)
        return rc;
    if (kv->arr_n == 0 || kv->arr_n > INT32_MAX / 2)
        return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.tokens: expected 1..%d tokens, found %llu",
                           INT32_MAX / 2, (unsigned long long)kv->arr_n);
    tok->n_vocab = (uint32_t)kv->arr_n;
    struct loom_gguf_str *strs = malloc(kv->arr_n * sizeof *strs);
    if (!strs)
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer.ggml.tokens: cannot allocate %u strings", tok->n_vocab);
    rc = loom_gguf_kv_strings(kv, strs, kv->arr_n, err);
    uint64_t total = 0;
    for (uint32_t i = 0; rc == LOOM_OK && i < tok->n_vocab; i++)
        total += strs[i].len;
    tok->text_off = rc == LOOM_OK ? malloc(((size_t)tok->n_vocab + 1) * sizeof *tok->text_off) : NULL;
    tok->blob = rc == LOOM_OK ? malloc(total ? total : 1) : NULL;
    if (rc == LOOM_OK && (!tok->text_off || !tok->blob))
        rc = loom_errorf(err, LOOM_E_NOMEM, "tokenizer.ggml.tokens: cannot allocate %llu bytes of text",
                         (unsigned long long)total);
    if (rc == LOOM_OK) {
        uint64_t off = 0;
        for (uint32_t i = 0; i < tok->n_vocab; i++) {
            tok->text_off[i] = off;
            memcpy(tok->blob + off, strs[i].ptr, strs[i].len);
            off += strs[i].len;
        }
        tok->text_off[tok->n_vocab] = off;
    }
    free(strs);
    return rc;
}

static int load_types(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    const struct loom_gguf_kv *kv = NULL;
    int rc = loom_gguf_get_arr(g, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, 1, &kv, err);
    if (rc != LOOM_OK)
        return rc;
    if (kv && kv->arr_n < tok->n_vocab)
        return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.token_type: expected at least %u entries, found %llu",
                           tok->n_vocab, (unsigned long long)kv->arr_n);
    for (uint32_t i = 0; i < tok->n_vocab; i++) {
        int32_t t = LOOM_TOK_NORMAL;
        if (kv)
            memcpy(&t, kv->data + 4 * (size_t)i, 4);
        tok->type[i] = (uint8_t)(t >= LOOM_TOK_NORMAL && t <= LOOM_TOK_BYTE ? t : 0);
    }
    return LOOM_OK;
}

static int build_text_table(struct loom_tokenizer *tok, loom_error *err)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)tok->n_vocab)
        cap *= 2;
    tok->text_slots = malloc(cap * sizeof *tok->text_slots);
    if (!tok->text_slots)
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer: cannot allocate the text table (%llu slots)",
                           (unsigned long long)cap);
    memset(tok->text_slots, 0xFF, cap * sizeof *tok->text_slots);
    tok->text_mask = cap - 1;
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        if (tok->text_off[i + 1] > tok->text_off[i]) /* empty texts never match anything */
            text_insert(tok, (int32_t)i);
    for (int b = 0; b < 256; b++) {
        unsigned char u[4];
        int n = loom_utf8_encode(loom_bytelevel_cp((unsigned char)b), u);
        tok->byte_token[b] = loom_tokenizer_find(tok, (const char *)u, (size_t)n);
    }
    return LOOM_OK;
}

static int load_merges(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    const struct loom_gguf_kv *kv;
    int rc = loom_gguf_get_arr(g, "tokenizer.ggml.merges", LOOM_GGUF_STRING, 0, &kv, err);
    if (rc != LOOM_OK)
        return rc;
    struct loom_gguf_str *strs = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof *strs);
    if (!strs)
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer.ggml.merges: cannot allocate %llu strings",
                           (unsigned long long)kv->arr_n);
    rc = loom_gguf_kv_strings(kv, strs, kv->arr_n, err);
    if (rc == LOOM_OK)
        rc = loom_merges_build(tok, strs, kv->arr_n, err);
    free(strs);
    return rc;
}

/* Token spellings llama.cpp treats as end-of-generation whatever the file's types say (it makes them CONTROL
 * too): turn and text ends across model families, and Qwen's FIM pad / repo / file-separator tokens. */
static const char *const k_eog_names[] = {
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|return|>", "<|call|>",
    "<|flush|>", "<|calls|>", "<end_of_turn>", "</s>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", /* DeepSeek's, in U+FF5C and U+2581 */
    "[e~[", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
};
/* Qwen's other FIM tokens: CONTROL (so plain text never produces them) but not end-of-generation. */
static const char *const k_fim_names[] = {"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"};

static void mark_named(struct loom_tokenizer *tok, const char *name, int eog)
{
    int32_t id = loom_tokenizer_find(tok, name, strlen(name));
    if (id < 0)
        return;
    tok->type[id] = LOOM_TOK_CONTROL;
    if (eog)
        tok->eog[id] = 1;
}

/* An optional special-token id key; ids outside the vocabulary count as absent. */
static int read_special_id(const struct loom_gguf *g, const char *key, uint32_t n_vocab, int32_t *out,
                           loom_error *err)
{
    uint32_t v = UINT32_MAX;
    int rc = loom_gguf_get_u32(g, key, 1, &v, err);
    *out = rc == LOOM_OK && v < n_vocab ? (int32_t)v : -1;
    return rc;
}

static int load_specials(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    static const char *const eog_keys[] = {
        "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.eot_token_id",     "tokenizer.ggml.eom_token_id",
        "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id",
    };
    for (size_t i = 0; i < sizeof k_eog_names / sizeof *k_eog_names; i++)
        mark_named(tok, k_eog_names[i], 1);
    for (size_t i = 0; i < sizeof k_fim_names / sizeof *k_fim_names; i++)
        mark_named(tok, k_fim_names[i], 0);
    for (size_t i = 0; i < sizeof eog_keys / sizeof *eog_keys; i++) {
        int32_t id;
        int rc = read_special_id(g, eog_keys[i], tok->n_vocab, &id, err);
        if (rc != LOOM_OK)
            return rc;
        if (id >= 0)
            tok->eog[id] = 1;
    }
    int32_t bos;
    int rc = read_special_id(g, "tokenizer.ggml.bos_token_id", tok->n_vocab, &bos, err);
    if (rc != LOOM_OK)
        return rc;
    const struct loom_gguf_kv *add = loom_gguf_find_kv(g, "tokenizer.ggml.add_bos_token");
    if (add && add->type != LOOM_GGUF_BOOL)
        return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.add_bos_token: expected type bool, found type %u",
                           add->type);
    tok->bos = add && add->data[0] ? bos : -1;
    return LOOM_OK;
}

struct special_key {
    uint64_t len;
    int32_t id;
};

static int special_cmp(const void *a, const void *b)
{
    const struct special_key *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Ids of CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first (ties by id). */
static int build_special_list(struct loom_tokenizer *tok, loom_error *err)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        n += loom_tokenizer_piece_mode(tok, (int32_t)i) == LOOM_PIECE_RAW && tok->text_off[i + 1] > tok->text_off[i];
    struct special_key *keys = malloc((n ? n : 1) * sizeof *keys);
    tok->specials = malloc((n ? n : 1) * sizeof *tok->specials);
    if (!keys || !tok->specials) {
        free(keys);
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer: cannot allocate %u special tokens", n);
    }
    n = 0;
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        if (loom_tokenizer_piece_mode(tok, (int32_t)i) == LOOM_PIECE_RAW && tok->text_off[i + 1] > tok->text_off[i])
            keys[n++] = (struct special_key){tok->text_off[i + 1] - tok->text_off[i], (int32_t)i};
    qsort(keys, n, sizeof *keys, special_cmp);
    for (uint32_t i = 0; i < n; i++)
        tok->specials[i] = keys[i].id;
    tok->n_specials = n;
    free(keys);
    return LOOM_OK;
}

static int check_model(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    struct loom_gguf_str model, pre = {0, NULL};
    int rc = loom_gguf_get_str(g, "tokenizer.ggml.model", 0, &model, err);
    if (rc != LOOM_OK)
        return rc;
    if (!loom_gguf_str_eq(model, "gpt2"))
        return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.model: expected \"gpt2\" (byte-level BPE), found \"%.*s\"",
                           (int)(model.len > 64 ? 64 : model.len), model.ptr);
    rc = loom_gguf_get_str(g, "tokenizer.ggml.pre", 1, &pre, err);
    if (rc != LOOM_OK)
        return rc;
    if (pre.ptr && loom_gguf_str_eq(pre, "qwen35"))
        tok->pre = LOOM_PRE_QWEN35;
    else if (pre.ptr && loom_gguf_str_eq(pre, "qwen2"))
        tok->pre = LOOM_PRE_QWEN2;
    else
        return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.pre: expected \"qwen35\" or \"qwen2\", found \"%.*s\"",
                           (int)(pre.len > 64 ? 64 : pre.len), pre.ptr ? pre.ptr : "");
    return LOOM_OK;
}

int loom_tokenizer_load(const struct loom_gguf *g, uint32_t n_rows, struct loom_tokenizer **out, loom_error *err)
{
    *out = NULL;
    struct loom_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer: cannot allocate");
    int rc = check_model(tok, g, err);
    if (rc == LOOM_OK)
        rc = load_texts(tok, g, err);
    if (rc == LOOM_OK) {
        tok->n_rows = n_rows ? n_rows : tok->n_vocab;
        tok->type = malloc(tok->n_vocab);
        tok->eog = calloc(tok->n_vocab, 1);
        tok->sampleable = malloc(tok->n_rows);
        if (!tok->type || !tok->eog || !tok->sampleable)
            rc = loom_errorf(err, LOOM_E_NOMEM, "tokenizer: cannot allocate per-token flags (%u tokens, %u rows)",
                             tok->n_vocab, tok->n_rows);
    }
    if (rc == LOOM_OK)
        rc = load_types(tok, g, err);
    if (rc == LOOM_OK) {
        for (uint32_t i = 0; i < tok->n_rows; i++)
            tok->sampleable[i] = i < tok->n_vocab && tok->type[i] != LOOM_TOK_UNUSED;
        rc = build_text_table(tok, err);
    }
    if (rc == LOOM_OK)
        rc = load_merges(tok, g, err);
    if (rc == LOOM_OK)
        rc = load_specials(tok, g, err);
    if (rc == LOOM_OK)
        rc = build_special_list(tok, err);
    if (rc != LOOM_OK) {
        loom_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return LOOM_OK;
}

void loom_tokenizer_free(struct loom_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->blob);
    free(tok->text_off);
    free(tok->type);
    free(tok->sampleable);
    free(tok->eog);
    free(tok->text_slots);
    free(tok->merges.slots);
    free(tok->specials);
    free(tok);
}

uint32_t loom_tokenizer_n_vocab(const struct loom_tokenizer *tok)
{
    return tok->n_vocab;
}

const uint8_t *loom_tokenizer_sampleable(const struct loom_tokenizer *tok)
{
    return tok->sampleable;
}

int loom_tokenizer_is_eog(const struct loom_tokenizer *tok, int32_t id)
{
    return id >= 0 && (uint32_t)id < tok->n_vocab && tok->eog[id];
}

int32_t loom_tokenizer_bos(const struct loom_tokenizer *tok)
{
    return tok->bos;
}

int loom_tokenizer_piece(const struct loom_tokenizer *tok, int32_t id, char *buf, int cap)
{
    if (id < 0 || (uint32_t)id >= tok->n_vocab)
        return LOOM_E_ARG;
    size_t len, n = 0;
    const char *text = loom_tokenizer_text(tok, id, &len);
    size_t room = cap > 0 ? (size_t)cap : 0;
    switch (loom_tokenizer_piece_mode(tok, id)) {
    case LOOM_PIECE_RAW:
        if (room)
            memcpy(buf, text, len < room ? len : room);
        n = len;
        break;
    case LOOM_PIECE_BYTELEVEL:
        for (size_t pos = 0; pos < len;) {
            unsigned char c[4];
            int k = loom_bytelevel_next(text, len, &pos, c);
            for (int j = 0; j < k; j++, n++)
                if (n < room)
                    buf[n] = (char)c[j];
        }
        break;
    case LOOM_PIECE_EMPTY:
        break;
    }
    return n > INT32_MAX ? LOOM_E_RANGE : (int)n;
}
