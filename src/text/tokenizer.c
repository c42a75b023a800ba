/* tokenizer.c — loading a vocabulary from GGUF tokenizer.ggml.* metadata (byte-level BPE: token texts,
 * types, merges; SentencePiece: texts, types, scores; special ids and flags; the chat template), from a
 * model's open GGUF or a file of its own (loom_tokenizer_open), the end-of-generation set and sampleable rows,
 * the public per-token queries, token pieces and detokenization. Semantics follow llama-vocab.cpp. */
#include "text/text_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "util/error.h"

/* ---- text -> id table -------------------------------------------------------------------------- */

int32_t loom_tokenizer_find(const struct loom_tokenizer *tok, const char *s, size_t len)
{
    if (!tok->text_slots)
        return -1;
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

static size_t text_len(const struct loom_tokenizer *tok, uint32_t id)
{
    return tok->text_off[id + 1] - 8 - tok->text_off[id];
}

/* Token texts stay in the map: text_off records where each one's bytes start. */
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
    tok->texts = (const char *)kv->data;
    tok->text_off = malloc(((size_t)tok->n_vocab + 1) * sizeof *tok->text_off);
    if (!tok->text_off)
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer.ggml.tokens: cannot allocate %u text offsets", tok->n_vocab);
    const uint8_t *p = kv->data;
    for (uint32_t i = 0; i <= tok->n_vocab; i++) {
        uint64_t off = (uint64_t)(p - kv->data) + 8;
        if (off > UINT32_MAX)
            return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.tokens: expected at most 4 GiB of token text, "
                               "found more before token %u", i);
        tok->text_off[i] = (uint32_t)off;
        if (i < tok->n_vocab)
            loom_text_next_str(&p);
    }
    return LOOM_OK;
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
        if (text_len(tok, i) > 0) /* empty texts never match anything */
            text_insert(tok, (int32_t)i);
    for (int b = 0; b < 256; b++) {
        unsigned char u[8];
        if (tok->kind == LOOM_VOCAB_SPM) { /* "<0xXX>", else the byte itself as a text */
            snprintf((char *)u, sizeof u, "<0x%02X>", (unsigned)b);
            tok->byte_token[b] = loom_tokenizer_find(tok, (const char *)u, 6);
            if (tok->byte_token[b] < 0) {
                u[0] = (unsigned char)b;
                tok->byte_token[b] = loom_tokenizer_find(tok, (const char *)u, 1);
            }
            continue;
        }
        int n = loom_utf8_encode(loom_bytelevel_cp((unsigned char)b), u);
        tok->byte_token[b] = loom_tokenizer_find(tok, (const char *)u, (size_t)n);
    }
    return LOOM_OK;
}

static int load_scores(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    const struct loom_gguf_kv *kv;
    int rc = loom_gguf_get_arr(g, "tokenizer.ggml.scores", LOOM_GGUF_FLOAT32, 0, &kv, err);
    if (rc != LOOM_OK)
        return rc;
    if (kv->arr_n < tok->n_vocab)
        return loom_errorf(err, LOOM_E_FORMAT, "tokenizer.ggml.scores: expected at least %u entries, found %llu",
                           tok->n_vocab, (unsigned long long)kv->arr_n);
    tok->scores = malloc((size_t)tok->n_vocab * sizeof *tok->scores);
    if (!tok->scores)
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer.ggml.scores: cannot allocate %u scores", tok->n_vocab);
    memcpy(tok->scores, kv->data, (size_t)tok->n_vocab * sizeof *tok->scores);
    return LOOM_OK;
}

static int load_merges(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    if (tok->kind == LOOM_VOCAB_SPM)
        return load_scores(tok, g, err);
    const struct loom_gguf_kv *kv;
    int rc = loom_gguf_get_arr(g, "tokenizer.ggml.merges", LOOM_GGUF_STRING, 0, &kv, err);
    if (rc != LOOM_OK)
        return rc;
    return loom_merges_build(tok, kv, err);
}

/* Token spellings llama.cpp treats as end-of-generation whatever the file's types say (it makes them CONTROL
 * too): turn and text ends across model families. */
static const char *const k_eog_names[] = {
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|return|>", "<|call|>",
    "<|flush|>", "<|calls|>", "<end_of_turn>", "</s>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", /* DeepSeek's, in U+FF5C and U+2581 */
    "[e~[",
};

/* Fill-in-the-middle tokens found by spelling when the file gives no id key: all become CONTROL; pad, repo
 * and file separator also end generation (llama-vocab.cpp's auto-detection). U+FF5C and U+2581 spelled out. */
#define FW_BAR "\xEF\xBD\x9C"
#define SP_MARK "\xE2\x96\x81"
static const struct {
    const char *key;
    int eog;
    const char *names[8];
} k_fim[] = {
    {"tokenizer.ggml.fim_pre_token_id", 0, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<" FW_BAR "fim" SP_MARK
     "begin" FW_BAR ">", "<PRE>", SP_MARK "<PRE>", "<|code_prefix|>", "<|prefix|>"}},
    {"tokenizer.ggml.fim_suf_token_id", 0, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<" FW_BAR "fim" SP_MARK
     "hole" FW_BAR ">", "<SUF>", SP_MARK "<SUF>", "<|code_suffix|>", "<|suffix|>"}},
    {"tokenizer.ggml.fim_mid_token_id", 0, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<" FW_BAR "fim" SP_MARK
     "end" FW_BAR ">", "<MID>", SP_MARK "<MID>", "<|code_middle|>", "<|middle|>"}},
    {"tokenizer.ggml.fim_pad_token_id", 1, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {"tokenizer.ggml.fim_rep_token_id", 1, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {"tokenizer.ggml.fim_sep_token_id", 1, {"<|file_sep|>"}},
};
#undef FW_BAR
#undef SP_MARK

_Static_assert(sizeof k_eog_names / sizeof *k_eog_names + 3 + 11 <= LOOM_MAX_EOG, "room for every EOG source");

/* Add id (inside the vocabulary) to the end-of-generation set unless it is there. */
static void eog_add(struct loom_tokenizer *tok, int32_t id)
{
    for (uint32_t i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id)
            return;
    if (tok->n_eog < LOOM_MAX_EOG)
        tok->eog[tok->n_eog++] = id;
}

static void mark_named(struct loom_tokenizer *tok, const char *name, int eog)
{
    int32_t id = loom_tokenizer_find(tok, name, strlen(name));
    if (id < 0)
        return;
    tok->type[id] = LOOM_TOK_CONTROL;
    if (eog)
        eog_add(tok, id);
}

/* An optional special-token id key (-1 when absent). An id outside the vocabulary is handled by what loom does
 * with the id (the reference, llama-vocab.cpp "bad special token", warns and keeps its default id for every key):
 *   SPECIAL_REFUSE: ids that decide output, the end-of-generation ids (eos, eot, eom, fim_pad, fim_rep,
 *     fim_sep: stop tokens are an explicit set) and bos (prepended to prompts). Ignoring a bad one would stop on
 *     a different set than the file declares, or encode a prompt without the start the file asks for, and it
 *     would not match the reference either (it falls back to a vocabulary-type default, e.g. eos = bos = 11 for
 *     byte-level BPE, an ordinary token in Qwen's vocabulary), so the file is refused naming the key, the
 *     vocabulary size and the id.
 *   SPECIAL_IGNORE: ids loom only reports or never uses (unk, sep, pad, mask, and fim_pre/suf/mid, whose tokens
 *     are then found by spelling as when the key is absent, as the reference does): ignored with a warning on g
 *     (loom_tokenizer_warning), since ignoring them cannot change what loom encodes, samples or stops on. */
enum special_policy { SPECIAL_REFUSE, SPECIAL_IGNORE };

static int read_special_id(struct loom_gguf *g, const char *key, uint32_t n_vocab, enum special_policy policy,
                           int32_t *out, loom_error *err)
{
    uint32_t v = UINT32_MAX;
    *out = -1;
    const int present = loom_gguf_find_kv(g, key) != NULL;
    int rc = loom_gguf_get_u32(g, key, 1, &v, err);
    if (rc != LOOM_OK || !present)
        return rc;
    if (v < n_vocab) {
        *out = (int32_t)v;
        return LOOM_OK;
    }
    if (policy == SPECIAL_REFUSE)
        return loom_errorf(err, LOOM_E_FORMAT,
                           "key '%s': expected a token id below the vocabulary size %u, found %u", key, n_vocab, v);
    loom_gguf_warnf(g, "key '%s': token id %u is outside the vocabulary (%u tokens); ignored, as the reference does",
                    key, v, n_vocab);
    return LOOM_OK;
}

/* An optional bool key into *flag (left as is when absent). */
static int read_flag(const struct loom_gguf *g, const char *key, int *flag, loom_error *err)
{
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, key);
    if (!kv)
        return LOOM_OK;
    if (kv->type != LOOM_GGUF_BOOL)
        return loom_errorf(err, LOOM_E_FORMAT, "%s: expected type bool, found type %u", key, kv->type);
    *flag = kv->data[0] != 0;
    return LOOM_OK;
}

/* The declared ids that play no part in encoding (unk, sep, pad, mask), and the chat template: a
 * tokenizer.chat_template that is not a string counts as absent (the reference reads it only as text). */
static int load_other_specials(struct loom_tokenizer *tok, struct loom_gguf *g, loom_error *err)
{
    static const char *const keys[] = {
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id",
    };
    _Static_assert(LOOM_SPECIAL_ID_UNK + sizeof keys / sizeof *keys == LOOM_SPECIAL_ID_COUNT, "one key per id");
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        int rc = read_special_id(g, keys[i], tok->n_vocab, SPECIAL_IGNORE, &tok->special_id[LOOM_SPECIAL_ID_UNK + i],
                                 err);
        if (rc != LOOM_OK)
            return rc;
    }
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, "tokenizer.chat_template");
    struct loom_gguf_str t;
    if (!kv || kv->type != LOOM_GGUF_STRING ||
        loom_gguf_get_str(g, "tokenizer.chat_template", 0, &t, err) != LOOM_OK)
        return LOOM_OK;
    tok->chat_template = strndup(t.ptr, t.len);
    return tok->chat_template ? LOOM_OK
                              : loom_errorf(err, LOOM_E_NOMEM, "tokenizer.chat_template: cannot copy %llu bytes",
                                            (unsigned long long)t.len);
}

static int load_specials(struct loom_tokenizer *tok, struct loom_gguf *g, loom_error *err)
{
    static const char *const eog_keys[] = {
        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
    };
    for (size_t i = 0; i < sizeof k_eog_names / sizeof *k_eog_names; i++)
        mark_named(tok, k_eog_names[i], 1);
    for (size_t i = 0; i < sizeof eog_keys / sizeof *eog_keys; i++) {
        int32_t *id = &tok->special_id[LOOM_SPECIAL_ID_EOS + i];
        int rc = read_special_id(g, eog_keys[i], tok->n_vocab, SPECIAL_REFUSE, id, err);
        if (rc != LOOM_OK)
            return rc;
        if (*id >= 0)
            eog_add(tok, *id);
    }
    for (size_t i = 0; i < sizeof k_fim / sizeof *k_fim; i++) {
        int32_t id;
        int rc = read_special_id(g, k_fim[i].key, tok->n_vocab, k_fim[i].eog ? SPECIAL_REFUSE : SPECIAL_IGNORE, &id,
                                 err);
        if (rc != LOOM_OK)
            return rc;
        if (id >= 0 && k_fim[i].eog)
            eog_add(tok, id);
        for (size_t j = 0; id < 0 && j < 8 && k_fim[i].names[j]; j++)
            mark_named(tok, k_fim[i].names[j], k_fim[i].eog);
    }
    /* CONTROL tokens spelling "unused" are unused (never sampled) */
    for (uint32_t i = 0; i < tok->n_vocab && i < tok->n_rows; i++) {
        size_t len;
        const char *text = loom_tokenizer_text(tok, (int32_t)i, &len);
        if (tok->type[i] == LOOM_TOK_CONTROL && memmem(text, len, "unused", 6))
            tok->sampleable[i] = 0;
    }
    int32_t bos;
    int rc = read_special_id(g, "tokenizer.ggml.bos_token_id", tok->n_vocab, SPECIAL_REFUSE, &bos, err);
    if (rc != LOOM_OK)
        return rc;
    tok->special_id[LOOM_SPECIAL_ID_BOS] = bos;
    /* SentencePiece and llama3 vocabularies add BOS unless the file says otherwise */
    int add_bos = tok->kind == LOOM_VOCAB_SPM || tok->pre == LOOM_PRE_LLAMA3;
    rc = read_flag(g, "tokenizer.ggml.add_bos_token", &add_bos, err);
    if (rc == LOOM_OK) {
        tok->add_space_prefix = tok->kind == LOOM_VOCAB_SPM;
        rc = read_flag(g, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix, err);
    }
    tok->bos = add_bos ? bos : -1;
    return rc == LOOM_OK ? load_other_specials(tok, g, err) : rc;
}

/* Whether general.name, lowered, contains any of the words (the reference's model-name attribute fixes). */
static int name_has(const struct loom_gguf *g, const char *const *words, size_t n_words)
{
    struct loom_gguf_str name = {0, NULL};
    if (loom_gguf_get_str(g, "general.name", 1, &name, NULL) != LOOM_OK || !name.ptr || name.len > 4096)
        return 0;
    char low[4097];
    for (size_t i = 0; i < name.len; i++)
        low[i] = (char)tolower((unsigned char)name.ptr[i]);
    low[name.len] = 0;
    for (size_t i = 0; i < n_words; i++)
        if (strstr(low, words[i]))
            return 1;
    return 0;
}

static void set_strip(struct loom_tokenizer *tok, const char *text, uint8_t bits)
{
    int32_t id = loom_tokenizer_find(tok, text, strlen(text));
    if (id >= 0)
        tok->strip[id] = bits;
}

/* Phi-3 vocabularies: white space after a special token's spelling is dropped, except after <unk>, <s> and
 * <|endoftext|> (llama-vocab.cpp, by model name). */
static int load_strip(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    static const char *const phi3[] = {"phi-3", "phi3"};
    if (!name_has(g, phi3, 2))
        return LOOM_OK;
    if (!(tok->strip = calloc(tok->n_vocab, 1)))
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer: cannot allocate strip flags for %u tokens", tok->n_vocab);
    for (uint32_t i = 0; i < tok->n_specials; i++)
        tok->strip[tok->specials[i]] = LOOM_STRIP_RIGHT;
    set_strip(tok, "</s>", LOOM_STRIP_RIGHT);
    set_strip(tok, "<unk>", 0);
    set_strip(tok, "<s>", 0);
    set_strip(tok, "<|endoftext|>", 0);
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

/* Whether text[n] is spelled as a tag, "<" ... ">" or "[" ... "]" of three bytes or more: a USER_DEFINED
 * token spelled so is a control marker (Qwen's <think>, </think>, <tool_call>; DeepSeek's <|User|>; the
 * [PAD151646] rows of older conversions), any other USER_DEFINED token is plain text. */
static int spelled_as_tag(const char *text, size_t n)
{
    return n >= 3 && ((text[0] == '<' && text[n - 1] == '>') || (text[0] == '[' && text[n - 1] == ']'));
}

/* The enum loom_special_mode set that splits id out of text: ALL every special token; USER_DEFINED (the
 * reference's parse_special = false) USER_DEFINED tokens; DATA USER_DEFINED tokens that are plain text. */
static uint8_t special_modes(const struct loom_tokenizer *tok, int32_t id)
{
    uint8_t modes = 1u << LOOM_SPECIAL_ALL;
    if (tok->type[id] != LOOM_TOK_USER_DEFINED)
        return modes;
    size_t len;
    const char *text = loom_tokenizer_text(tok, id, &len);
    modes |= 1u << LOOM_SPECIAL_USER_DEFINED;
    return spelled_as_tag(text, len) ? modes : (uint8_t)(modes | 1u << LOOM_SPECIAL_DATA);
}

/* Ids of CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first (ties by id), and the modes that
 * match each. */
static int build_special_list(struct loom_tokenizer *tok, loom_error *err)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        n += loom_tokenizer_piece_mode(tok, (int32_t)i) == LOOM_PIECE_RAW && text_len(tok, i) > 0;
    struct special_key *keys = malloc((n ? n : 1) * sizeof *keys);
    tok->specials = malloc((n ? n : 1) * sizeof *tok->specials);
    tok->special_modes = malloc(n ? n : 1);
    if (!keys || !tok->specials || !tok->special_modes) {
        free(keys);
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer: cannot allocate %u special tokens", n);
    }
    n = 0;
    for (uint32_t i = 0; i < tok->n_vocab; i++)
        if (loom_tokenizer_piece_mode(tok, (int32_t)i) == LOOM_PIECE_RAW && text_len(tok, i) > 0)
            keys[n++] = (struct special_key){text_len(tok, i), (int32_t)i};
    qsort(keys, n, sizeof *keys, special_cmp);
    for (uint32_t i = 0; i < n; i++) {
        tok->specials[i] = keys[i].id;
        tok->special_modes[i] = special_modes(tok, keys[i].id);
    }
    tok->n_specials = n;
    free(keys);
    return LOOM_OK;
}

/* tokenizer.ggml.pre names and the pre-tokenizer each selects (llama-vocab.cpp's name table, for the
 * expressions implemented in pretokenize.c). */
static const struct {
    const char *name;
    enum loom_pre_kind kind;
} k_pre_names[] = {
    {"qwen35", LOOM_PRE_QWEN35},        {"qwen2", LOOM_PRE_QWEN2},      {"deepseek-r1-qwen", LOOM_PRE_QWEN2},
    {"stablelm2", LOOM_PRE_QWEN2},      {"llama3", LOOM_PRE_LLAMA3},    {"llama-v3", LOOM_PRE_LLAMA3},
    {"llama-bpe", LOOM_PRE_LLAMA3},     {"gpt-2", LOOM_PRE_GPT2},       {"phi-2", LOOM_PRE_GPT2},
    {"mpt", LOOM_PRE_GPT2},             {"starcoder", LOOM_PRE_STARCODER}, {"refact", LOOM_PRE_STARCODER},
    {"smollm", LOOM_PRE_STARCODER},     {"deepseek-coder", LOOM_PRE_DEEPSEEK_CODER},
};

static int check_model(struct loom_tokenizer *tok, const struct loom_gguf *g, loom_error *err)
{
    struct loom_gguf_str model, pre = {0, NULL};
    int rc = loom_gguf_get_str(g, "tokenizer.ggml.model", 0, &model, err);
    if (rc != LOOM_OK)
        return rc;
    if (loom_gguf_str_eq(model, "llama")) {
        tok->kind = LOOM_VOCAB_SPM;
        tok->pre = LOOM_PRE_NONE;
        return LOOM_OK;
    }
    if (!loom_gguf_str_eq(model, "gpt2"))
        return loom_errorf(err, LOOM_E_FORMAT,
                           "tokenizer.ggml.model: expected \"gpt2\" (byte-level BPE) or \"llama\" (SentencePiece), "
                           "found \"%.*s\"", (int)(model.len > 64 ? 64 : model.len), model.ptr);
    tok->kind = LOOM_VOCAB_BPE;
    rc = loom_gguf_get_str(g, "tokenizer.ggml.pre", 1, &pre, err);
    if (rc != LOOM_OK)
        return rc;
    for (size_t i = 0; pre.ptr && i < sizeof k_pre_names / sizeof *k_pre_names; i++) {
        if (loom_gguf_str_eq(pre, k_pre_names[i].name)) {
            tok->pre = k_pre_names[i].kind;
            tok->ignore_merges = tok->pre == LOOM_PRE_LLAMA3;
            return LOOM_OK;
        }
    }
    return loom_errorf(err, LOOM_E_FORMAT,
                       "tokenizer.ggml.pre: expected a supported pre-tokenizer (qwen35, qwen2, llama-bpe, gpt-2, "
                       "starcoder, deepseek-coder, ...), found \"%.*s\"",
                       (int)(pre.len > 64 ? 64 : pre.len), pre.ptr ? pre.ptr : "");
}

/* Drop from memory the map's pages of the metadata read only at load: token types, merges, scores (the token
 * texts stay: pieces are read from the map). */
static void release_metadata(const struct loom_gguf *g)
{
    static const struct {
        const char *key;
        uint32_t elem_type;
    } once[] = {
        {"tokenizer.ggml.token_type", LOOM_GGUF_INT32},
        {"tokenizer.ggml.merges", LOOM_GGUF_STRING},
        {"tokenizer.ggml.scores", LOOM_GGUF_FLOAT32},
    };
    for (size_t i = 0; i < sizeof once / sizeof *once; i++) {
        const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, once[i].key);
        if (!kv || kv->type != LOOM_GGUF_ARRAY || kv->arr_type != once[i].elem_type)
            continue;
        const uint8_t *end = kv->data;
        if (once[i].elem_type != LOOM_GGUF_STRING)
            end += 4 * kv->arr_n;
        for (uint64_t j = 0; once[i].elem_type == LOOM_GGUF_STRING && j < kv->arr_n; j++)
            loom_text_next_str(&end);
        loom_gguf_release(g, kv->data, (uint64_t)(end - kv->data));
    }
}

int loom_tokenizer_load(struct loom_gguf *g, uint32_t n_rows, struct loom_tokenizer **out, loom_error *err)
{
    *out = NULL;
    struct loom_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return loom_errorf(err, LOOM_E_NOMEM, "tokenizer: cannot allocate");
    tok->gguf = g;
    for (int i = 0; i < LOOM_SPECIAL_ID_COUNT; i++)
        tok->special_id[i] = -1;
    int rc = check_model(tok, g, err);
    if (rc == LOOM_OK)
        rc = load_texts(tok, g, err);
    if (rc == LOOM_OK) {
        tok->n_rows = n_rows ? n_rows : tok->n_vocab;
        tok->type = malloc(tok->n_vocab);
        tok->sampleable = malloc(tok->n_rows);
        if (!tok->type || !tok->sampleable)
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
    if (rc == LOOM_OK)
        rc = load_strip(tok, g, err);
    if (rc == LOOM_OK && tok->kind == LOOM_VOCAB_BPE && !tok->ignore_merges) {
        free(tok->text_slots); /* encoding never looks a text up: the table served loading only */
        tok->text_slots = NULL;
    }
    if (rc == LOOM_OK)
        release_metadata(g);
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
    free(tok->text_off);
    free(tok->type);
    free(tok->sampleable);
    free(tok->text_slots);
    free(tok->merges.slots);
    free(tok->merges.merged);
    free(tok->specials);
    free(tok->special_modes);
    free(tok->scores);
    free(tok->strip);
    free(tok->chat_template);
    loom_gguf_close(tok->own_gguf);
    free(tok);
}

loom_tokenizer *loom_tokenizer_open(const char *path, loom_error *err)
{
    struct loom_gguf *g = NULL;
    struct loom_tokenizer *tok = NULL;
    if (!path) {
        loom_errorf(err, LOOM_E_ARG, "tokenizer path: expected a file name, found NULL");
        return NULL;
    }
    if (loom_gguf_open_model(path, &g, err) != LOOM_OK || loom_tokenizer_load(g, 0, &tok, err) != LOOM_OK) {
        loom_gguf_close(g);
        return NULL;
    }
    tok->own_gguf = g;
    return tok;
}

int loom_tokenizer_n_warnings(const loom_tokenizer *tok)
{
    return tok->gguf->n_warnings > INT32_MAX ? INT32_MAX : (int)tok->gguf->n_warnings;
}

const char *loom_tokenizer_warning(const loom_tokenizer *tok, int i)
{
    return i < 0 ? NULL : loom_gguf_warning(tok->gguf, (uint64_t)i);
}

uint32_t loom_tokenizer_n_vocab(const struct loom_tokenizer *tok)
{
    return tok->n_vocab;
}

uint32_t loom_tokenizer_n_rows(const struct loom_tokenizer *tok)
{
    return tok->n_rows;
}

const uint8_t *loom_tokenizer_sampleable(const struct loom_tokenizer *tok)
{
    return tok->sampleable;
}

unsigned loom_tokenizer_token_attr(const struct loom_tokenizer *tok, int32_t id)
{
    if (id < 0 || (uint32_t)id >= tok->n_vocab)
        return 0;
    unsigned type = tok->type[id]; /* enum loom_tok_type, 1..6 */
    unsigned attr = type >= LOOM_TOK_NORMAL && type <= LOOM_TOK_BYTE ? 1u << (type - LOOM_TOK_NORMAL) : 0;
    if (loom_tokenizer_is_eog(tok, id))
        attr |= LOOM_TOKEN_EOG;
    if ((uint32_t)id < tok->n_rows && tok->sampleable[id])
        attr |= LOOM_TOKEN_SAMPLEABLE;
    return attr;
}

int32_t loom_tokenizer_special(const struct loom_tokenizer *tok, enum loom_special_token which)
{
    return (int)which >= 0 && which < LOOM_SPECIAL_ID_COUNT ? tok->special_id[which] : -1;
}

int loom_tokenizer_eog(const struct loom_tokenizer *tok, int32_t *out, int cap)
{
    for (uint32_t i = 0; i < tok->n_eog && (int)i < cap; i++)
        out[i] = tok->eog[i];
    return (int)tok->n_eog;
}

const char *loom_tokenizer_chat_template(const struct loom_tokenizer *tok)
{
    return tok->chat_template;
}

int loom_tokenizer_is_eog(const struct loom_tokenizer *tok, int32_t id)
{
    for (uint32_t i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id)
            return 1;
    return 0;
}

int32_t loom_tokenizer_bos(const struct loom_tokenizer *tok)
{
    return tok->bos;
}

void loom_tokenizer_piece_bytes(const struct loom_tokenizer *tok, int32_t id, void (*put)(void *ctx, unsigned char b),
                                void *ctx)
{
    size_t len;
    const char *text = loom_tokenizer_text(tok, id, &len);
    switch (loom_tokenizer_piece_mode(tok, id)) {
    case LOOM_PIECE_RAW:
        for (size_t i = 0; i < len; i++)
            put(ctx, (unsigned char)text[i]);
        break;
    case LOOM_PIECE_BYTELEVEL:
        for (size_t pos = 0; pos < len;) {
            unsigned char c[4];
            int k = loom_bytelevel_next(text, len, &pos, c);
            for (int j = 0; j < k; j++)
                put(ctx, c[j]);
        }
        break;
    case LOOM_PIECE_SPM:
        for (size_t i = 0; i < len; i++) {
            if (i + 3 <= len && memcmp(text + i, "\xE2\x96\x81", 3) == 0) {
                put(ctx, ' ');
                i += 2;
            } else {
                put(ctx, (unsigned char)text[i]);
            }
        }
        break;
    case LOOM_PIECE_SPM_BYTE: { /* "<0xXX>" */
        char hex[3] = {len > 3 ? text[3] : '0', len > 4 ? text[4] : '0', 0};
        put(ctx, (unsigned char)strtoul(hex, NULL, 16));
        break;
    }
    case LOOM_PIECE_EMPTY:
        break;
    }
}

/* A bounded output buffer: bytes past cap are counted, not written; skip drops that many leading spaces. */
struct piece_sink {
    char *buf;
    size_t cap, n;
    int skip_space;
};

static void sink_put(void *ctx, unsigned char b)
{
    struct piece_sink *s = ctx;
    if (s->skip_space) {
        s->skip_space = 0;
        if (b == ' ')
            return;
    }
    if (s->n < s->cap)
        s->buf[s->n] = (char)b;
    s->n++;
}

int loom_tokenizer_piece(const struct loom_tokenizer *tok, int32_t id, char *buf, int cap)
{
    if (id < 0 || (uint32_t)id >= tok->n_vocab)
        return LOOM_E_ARG;
    struct piece_sink s = {buf, cap > 0 ? (size_t)cap : 0, 0, 0};
    loom_tokenizer_piece_bytes(tok, id, sink_put, &s);
    return s.n > INT32_MAX ? LOOM_E_RANGE : (int)s.n;
}

int loom_tokenizer_detokenize(const struct loom_tokenizer *tok, const int32_t *ids, size_t n, char *out, size_t cap)
{
    struct piece_sink s = {out, cap, 0, tok->add_space_prefix};
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= tok->n_vocab)
            return LOOM_E_ARG;
        loom_tokenizer_piece_bytes(tok, ids[i], sink_put, &s);
        s.skip_space = 0;
    }
    return s.n > INT32_MAX ? LOOM_E_RANGE : (int)s.n;
}
