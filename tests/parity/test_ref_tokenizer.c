/* test_ref_tokenizer.c — loom's tokenizer against the reference's (llama_tokenize on a vocab-only load) on
 * the test vocabularies qwen35, qwen2, llama-bpe, gpt-2, llama-spm, phi-3, deepseek-coder, starcoder, mpt,
 * refact and a qwen35 copy carrying Qwen's markers: over 100,000 generated strings in all (mixed scripts,
 * combining marks, decomposed and precomposed forms, emoji sequences, whitespace runs, digits, contractions,
 * invalid UTF-8, embedded NUL, special-token spellings), with parse_special off and on, and loom's data mode
 * against parse_special off; each vocabulary's USER_DEFINED tokens against the table of declared data-mode
 * exceptions; every token's piece, the end-of-generation set, and the detokenized text where the reference
 * does not clean up spaces. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "parity.h"
#include "test.h"
#include "vocab_fixture.h"
#include "text/text_internal.h"
#include "text/tokenizer.h"

enum { N_STRINGS = 6400, MAX_TEXT = 1024, MAX_IDS = 2048 };

static uint64_t rng_state;
static int n_strings_total;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t pick(uint32_t n)
{
    return (uint32_t)(rnd() % n);
}

struct buf {
    char s[MAX_TEXT + 64];
    size_t n;
};

static void put_bytes(struct buf *b, const char *s, size_t n)
{
    if (b->n + n <= MAX_TEXT) {
        memcpy(b->s + b->n, s, n);
        b->n += n;
    }
}

static void put_str(struct buf *b, const char *s)
{
    put_bytes(b, s, strlen(s));
}

/* UTF-8 of any code point up to U+10FFFF, surrogates included (the reference decodes those too). */
static void put_cp(struct buf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    put_bytes(b, u, n);
}

/* Code point ranges by script: [lo, hi]. */
static const uint32_t k_ranges[][2] = {
    {'a', 'z'},       {'A', 'Z'},       {0xC0, 0x24F},    {0x300, 0x36F},   {0x370, 0x3FF},  {0x400, 0x4FF},
    {0x590, 0x5FF},   {0x600, 0x6FF},   {0x900, 0x97F},   {0xE00, 0xE7F},   {0x1100, 0x11FF}, {0x3040, 0x30FF},
    {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xFF00, 0xFFEF}, {0x2000, 0x206F}, {0x2190, 0x23FF}, {0x1F300, 0x1FAFF},
    {0x2460, 0x24FF}, {0x1D400, 0x1D7FF}, {0x20000, 0x2A6DF}, {0x2EBF0, 0x2EE5D}, {0xFE00, 0xFE0F}, {0x0, 0x7F},
};

static const char *const k_words[] = {
    "Hello", "world", "the", "The", "don't", "I'm", "we'RE", "you've", "she'll", "it'd", "'s", "'S", "'ll", "'",
    "café", "naïve", "Äpfel", "über", "résumé", "Привет", "мир", "你好", "世界", "こんにちは", "안녕하세요",
    "مرحبا", "שלום", "नमस्ते", "สวัสดี", "Ελληνικά", "🦙", "🚀", "😶‍🌫️", "👍🏽", "👨‍👩‍👧‍👦", "✅", "🇺🇸",
    "e\xCC\x81", "a\xCC\x80\xCC\x81", "\xD9\x85\xD9\x8E", "x²", "½", "Ⅻ", "①", "٣٤٥", "१२३", "12345", "3.14159",
    "1,000,000", "0x1F", "C++", "a_b", "foo.bar()", "{\"k\": [1, 2]}", "<div>", "</s>", "...", "!!!", "?!", "—",
    "«»", "“quoted”", "#include", "$$", "100%", "@user", "http://x.org/a?b=c", "\\n", "ſ", "K", "İ",
    /* precomposed and decomposed forms of the same text */
    "\xC3\xA9", "e\xCC\x81", "\xC3\x85", "A\xCC\x8A", "\xE1\xBB\x87", "e\xCC\xA3\xCC\x82", "\xEA\xB0\x80",
    "\xE1\x84\x80\xE1\x85\xA1", "\xE3\x81\x8C", "\xE3\x81\x8B\xE3\x82\x99", "\xEF\xAC\x81", "fi",
    /* scripts with combining signs: Devanagari, Thai, Arabic with harakat, Hangul, CJK */
    "हिन्दी", "क्षत्रिय", "ภาษาไทย", "กิ่ง", "العَرَبِيَّة", "한국어", "漢字かな交じり", "中文，标点。",
    /* emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors */
    "👩🏾‍💻", "🧑🏻‍🤝‍🧑🏿", "👋🏻", "🏳️‍🌈", "1️⃣", "❤️", "☺︎", "🇯🇵🇰🇷",
    /* number runs */
    "0", "00", "007", "1234567890", "3.", ".5", "-42", "1e-9", "٠١٢٣٤٥٦٧٨٩", "१०", "２０２４", "Ⅻ",
};

static const char *const k_spaces[] = {
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "  \n\n  ", "\t\n", "\xC2\xA0", "\xE3\x80\x80",
    "\xE2\x80\xA8", "\xC2\x85", "\x0B", "\x0C", " \t ", "\r", "\n\n\n", "\r\n\r\n", "\t\t", " \xC2\xA0 ",
    "\xE3\x80\x80\xE3\x80\x80", "\xE2\x80\x83", "\xE1\x9A\x80", "    ", "\n    ", "\x1C\x1D\x1E\x1F",
};

/* Control spellings of the vocabularies under test (and near misses). */
static const char *const k_specials[] = {
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "[PAD151700]", "[PAD151646]", "<|im_", "<|im_end|",
    "<|im_start|>user\n", "<|im_end|>\n", "<|endoftext|><|endoftext|>", "<<|im_end|>>", "[PAD",
    "<s>", "</s>", "<unk>", "<s> ", " </s>", "<|user|>", "<|assistant|>", "<|end|>\n", "<|system|> x", "<|end|> \n ",
    "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>", "<|reserved_special_token_5|>",
    "<fim_prefix>", "<fim_middle>", "<file_sep>", "<|endoftext|> ", "<｜begin▁of▁sentence｜>", "<｜fim▁hole｜>",
    "<0x0A>", "<0xFF>", "▁", "▁▁x",
    /* USER_DEFINED tokens: Qwen's markers, DeepSeek-Coder's, [PAD] rows of mpt, deepseek-coder and refact */
    "<think>", "</think>", "<tool_call>\n{}</tool_call>", "<tool_response>", "</tool_response>", "<|User|>",
    "<|Assistant|>", "<pad>", "[PAD50300]", "[PAD32100]", "[PAD49200]", "õ", "aõb", "÷ÿ",
};

/* Bytes that cannot form valid UTF-8 but that the reference still accepts (never a code point past U+10FFFF). */
static void put_invalid(struct buf *b)
{
    static const char *const bad[] = {
        "\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF8", "\xFF", "\xFE\xFF",
        "\xC3", "\xE2\x82", "\xF0\x9F\xA6", "\xC3 ", "\xE2\x82x", "\xF5z", "\xF0\x9F\xA6!",
    };
    put_str(b, bad[pick(sizeof bad / sizeof *bad)]);
}

static void gen_string(struct buf *b)
{
    b->n = 0;
    int parts = 1 + (int)pick(12);
    for (int p = 0; p < parts; p++) {
        switch (pick(10)) {
        case 0: case 1: case 2:
            put_str(b, k_words[pick(sizeof k_words / sizeof *k_words)]);
            break;
        case 3: case 4:
            put_str(b, k_spaces[pick(sizeof k_spaces / sizeof *k_spaces)]);
            break;
        case 5: {
            const uint32_t *r = k_ranges[pick(sizeof k_ranges / sizeof *k_ranges)];
            for (int k = 1 + (int)pick(6); k > 0; k--)
                put_cp(b, r[0] + pick(r[1] - r[0] + 1));
            break;
        }
        case 6:
            for (int k = 1 + (int)pick(8); k > 0; k--)
                put_cp(b, '0' + pick(10));
            break;
        case 7:
            put_str(b, k_specials[pick(sizeof k_specials / sizeof *k_specials)]);
            break;
        case 8:
            if (pick(4) == 0)
                put_bytes(b, "\0", 1); /* embedded NUL */
            else
                put_cp(b, pick(0x110000)); /* anything: unassigned, private use, surrogates, controls */
            break;
        default:
            if (pick(3) == 0)
                put_invalid(b);
            else
                put_cp(b, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"[pick(32)]);
            break;
        }
    }
}

static void print_mismatch(const char *what, const struct buf *b, const int32_t *want, int nw, const int32_t *got,
                           int ng)
{
    fprintf(stderr, "mismatch (%s) on %zu bytes:", what, b->n);
    for (size_t i = 0; i < b->n && i < 80; i++)
        fprintf(stderr, " %02x", (unsigned char)b->s[i]);
    fprintf(stderr, "\n  ref (%d):", nw);
    for (int i = 0; i < nw && i < 40; i++)
        fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n  loom (%d):", ng);
    for (int i = 0; i < ng && i < 40; i++)
        fprintf(stderr, " %d", got[i]);
    fputc('\n', stderr);
}

/* USER_DEFINED tokens of the vocabularies under test and what loom's data mode does with each (the rule at
 * loom_special_mode in include/loom.h). TEXT: plain text, matched as the reference matches it with
 * parse_special = false. MARKER: spelled as a tag; a declared exception: the reference matches it with
 * parse_special = false, data mode keeps it text (trusted text and parse_special = true still match it). CONTROL: USER_DEFINED in the
 * file but made CONTROL by its spelling at load (the reference's FIM and end-of-generation names, loom's
 * too), matched by neither. Source of the ids and spellings: each file's tokenizer.ggml.tokens and
 * token_type (listed with a GGUF reader); qwen35-markers is the fixture of vocab_fixture.h. The
 * [PAD<id>] rows are placeholders older conversions typed USER_DEFINED (convert_hf_to_gguf.py now writes
 * UNUSED). llama-bpe, gpt-2, llama-spm and starcoder have none. check_user_defined verifies that the rows
 * cover exactly the tokens typed USER_DEFINED in the file or by the reference. */
enum ud_class { UD_TEXT, UD_MARKER, UD_CONTROL };
enum ud_spelling {
    SP_LITERAL, /* text */
    SP_CHARS,   /* the (id - first)-th UTF-8 character of text */
    SP_PAD,     /* "[PAD<id>]" */
    SP_SPACES,  /* last - id + 2 spaces */
};
static const struct ud_row {
    const char *vocab;
    int32_t first, last;
    enum ud_class cls;
    enum ud_spelling spelling;
    const char *text;
} k_user_defined[] = {
    {"qwen35", 151646, 151935, UD_MARKER, SP_PAD, NULL},
    {"qwen2", 151646, 151935, UD_MARKER, SP_PAD, NULL},
    {"phi-3", 2, 2, UD_CONTROL, SP_LITERAL, "</s>"},
    {"deepseek-coder", 32000, 32012, UD_TEXT, SP_CHARS, "õ÷ÁýÀÿøúþüùöû"},
    {"deepseek-coder", 32015, 32015, UD_CONTROL, SP_LITERAL, "<｜fim▁hole｜>"},
    {"deepseek-coder", 32016, 32016, UD_CONTROL, SP_LITERAL, "<｜fim▁begin｜>"},
    {"deepseek-coder", 32017, 32017, UD_CONTROL, SP_LITERAL, "<｜fim▁end｜>"},
    {"deepseek-coder", 32018, 32018, UD_MARKER, SP_LITERAL, "<pad>"},
    {"deepseek-coder", 32019, 32019, UD_MARKER, SP_LITERAL, "<|User|>"},
    {"deepseek-coder", 32020, 32020, UD_MARKER, SP_LITERAL, "<|Assistant|>"},
    {"deepseek-coder", 32021, 32021, UD_MARKER, SP_LITERAL, "<|EOT|>"},
    {"deepseek-coder", 32022, 32255, UD_MARKER, SP_PAD, NULL},
    {"mpt", 50254, 50276, UD_TEXT, SP_SPACES, NULL},
    {"mpt", 50277, 50431, UD_MARKER, SP_PAD, NULL},
    {"refact", 49152, 49215, UD_MARKER, SP_PAD, NULL},
    {"qwen35-markers", 151657, 151657, UD_MARKER, SP_LITERAL, "<tool_call>"},
    {"qwen35-markers", 151658, 151658, UD_MARKER, SP_LITERAL, "</tool_call>"},
    {"qwen35-markers", 151665, 151665, UD_MARKER, SP_LITERAL, "<tool_response>"},
    {"qwen35-markers", 151666, 151666, UD_MARKER, SP_LITERAL, "</tool_response>"},
    {"qwen35-markers", 151667, 151667, UD_MARKER, SP_LITERAL, "<think>"},
    {"qwen35-markers", 151668, 151668, UD_MARKER, SP_LITERAL, "</think>"},
    {"qwen35-markers", 151669, 151935, UD_MARKER, SP_PAD, NULL},
};

/* The spelling of id under row r into out (64 bytes); returns its length. */
static size_t ud_spell(const struct ud_row *r, int32_t id, char *out)
{
    switch (r->spelling) {
    case SP_LITERAL:
        return (size_t)snprintf(out, 64, "%s", r->text);
    case SP_PAD:
        return (size_t)snprintf(out, 64, "[PAD%d]", id);
    case SP_SPACES:
        memset(out, ' ', (size_t)(r->last - id + 2));
        return (size_t)(r->last - id + 2);
    case SP_CHARS:
        break;
    }
    const char *p = r->text;
    for (int32_t k = 0; k <= id - r->first; k++) {
        size_t n = 1;
        while (p[n] && ((unsigned char)p[n] & 0xC0) == 0x80)
            n++;
        if (k == id - r->first) {
            memcpy(out, p, n);
            return n;
        }
        p += n;
    }
    return 0;
}

/* Per id of vocabulary `name` (n ids): the index of its row in k_user_defined, -1 for none. */
static int16_t *ud_rows(const char *name, int n)
{
    int16_t *row = malloc((size_t)n * sizeof *row);
    for (int i = 0; row && i < n; i++)
        row[i] = -1;
    for (size_t k = 0; row && k < sizeof k_user_defined / sizeof *k_user_defined; k++)
        for (int32_t id = k_user_defined[k].first; id <= k_user_defined[k].last && id < n; id++)
            if (!strcmp(k_user_defined[k].vocab, name))
                row[id] = (int16_t)k;
    return row;
}

static int has_id(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static int ids_equal(const int32_t *a, int na, const int32_t *b, int nb)
{
    return na == nb && (na <= 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

/* The spelling of USER_DEFINED token id alone, in every mode, against its class. Returns 1 when it holds. */
static int check_ud_token(const struct llama_vocab *vocab, const struct loom_tokenizer *tok, int32_t id,
                          enum ud_class cls, const char *s, size_t len)
{
    int32_t ref[64], ref_sp[64], data[64], user[64], all[64];
    int nr = llama_tokenize(vocab, s, (int32_t)len, ref, 64, false, false);
    int nrs = llama_tokenize(vocab, s, (int32_t)len, ref_sp, 64, false, true);
    int nd = loom_tokenizer_encode(tok, s, len, LOOM_SPECIAL_DATA, data, 64, NULL);
    int nu = loom_tokenizer_encode(tok, s, len, LOOM_SPECIAL_USER_DEFINED, user, 64, NULL);
    int na = loom_tokenizer_encode(tok, s, len, LOOM_SPECIAL_ALL, all, 64, NULL);
    int one = nr == 1 && ref[0] == id, ok = ids_equal(ref_sp, nrs, all, na) && ids_equal(ref, nr, user, nu);
    char back[256];
    int nb = nd > 0 ? loom_tokenizer_detokenize(tok, data, (size_t)nd, back, sizeof back) : -1;
    switch (cls) {
    case UD_TEXT:
        return ok && one && ids_equal(ref, nr, data, nd);
    case UD_MARKER:
        return ok && one && na == 1 && all[0] == id && nd > 1 && !has_id(data, nd, id) && nb == (int)len &&
               !memcmp(back, s, len);
    case UD_CONTROL:
        return ok && !has_id(ref, nr, id) && ids_equal(ref, nr, data, nd) && na == 1 && all[0] == id;
    }
    return 0;
}

/* The table's rows for `name` against the file (g), the reference's attributes and loom's behaviour; returns
 * the per-id flags of the declared exceptions (MARKER rows), which the caller frees. */
static uint8_t *check_user_defined(const struct llama_vocab *vocab, const struct loom_tokenizer *tok,
                                   const struct loom_gguf *g, const char *name)
{
    int n = (int)loom_tokenizer_n_vocab(tok), cover_bad = 0, spell_bad = 0, behave_bad = 0, count[3] = {0};
    const struct loom_gguf_kv *types = loom_gguf_find_kv(g, "tokenizer.ggml.token_type");
    int16_t *row = ud_rows(name, n);
    uint8_t *marker = calloc((size_t)n, 1);
    if (!row || !marker || !types) {
        CHECK(0, "%s: USER_DEFINED table (allocation or token_type missing)", name);
        free(row);
        free(marker);
        return NULL;
    }
    for (int32_t id = 0; id < n; id++) {
        int32_t file_type;
        memcpy(&file_type, types->data + 4 * (size_t)id, 4);
        int attr = llama_vocab_get_attr(vocab, id);
        /* the reference adds CONTROL to a USER_DEFINED token it makes CONTROL by name; CONTROL wins */
        int ud = file_type == 4 || (attr & LLAMA_TOKEN_ATTR_USER_DEFINED), ctl = (attr & LLAMA_TOKEN_ATTR_CONTROL) != 0;
        const struct ud_row *r = row[id] >= 0 ? &k_user_defined[row[id]] : NULL;
        int covered = r ? ud && (r->cls == UD_CONTROL) == ctl : !ud;
        if (!covered && cover_bad++ < 3)
            fprintf(stderr, "%s: id %d (file type %d, reference attr 0x%x) not as the table says\n", name, id,
                    file_type, attr);
        if (!r)
            continue;
        char s[64];
        size_t len = ud_spell(r, id, s), tl;
        const char *t = loom_tokenizer_text(tok, id, &tl);
        if (tl != len || memcmp(t, s, len)) {
            if (spell_bad++ < 3)
                fprintf(stderr, "%s: id %d is spelled '%.*s', the table says '%.*s'\n", name, id, (int)tl, t,
                        (int)len, s);
            continue;
        }
        count[r->cls]++;
        marker[id] = r->cls == UD_MARKER;
        if (!check_ud_token(vocab, tok, id, r->cls, s, len) && behave_bad++ < 3)
            fprintf(stderr, "%s: id %d ('%.*s') does not encode as a %s token\n", name, id, (int)len, s,
                    r->cls == UD_TEXT ? "plain-text" : r->cls == UD_MARKER ? "marker" : "control");
    }
    CHECK(cover_bad == 0, "%s: %d ids USER_DEFINED in the file or the reference differ from the table", name,
          cover_bad);
    CHECK(spell_bad == 0, "%s: %d table spellings differ from the file", name, spell_bad);
    CHECK(behave_bad == 0, "%s: %d USER_DEFINED tokens encode against their class", name, behave_bad);
    printf("%s: USER_DEFINED as the table says: %d plain text (matched in data mode), %d markers (declared "
           "exceptions), %d made CONTROL\n", name, count[UD_TEXT], count[UD_MARKER], count[UD_CONTROL]);
    free(row);
    return marker;
}

struct string_stats {
    int n_ids, text_bad, data_bad, data_excepted;
};

/* Tokenize generated strings with both; returns the number of mismatches. With check_text, the ids also
 * detokenize to the reference's text (llama_detokenize keeping specials). With marker (parse_special off),
 * loom's data mode too must give the reference's ids, except where those hold a declared marker: there it
 * must hold none. */
static int compare_strings(const struct llama_vocab *vocab, const struct loom_tokenizer *tok, int parse_special,
                           int check_text, uint64_t seed, const uint8_t *marker, struct string_stats *st)
{
    static struct buf b;
    static int32_t want[MAX_IDS], got[MAX_IDS];
    static char ta[4 * MAX_TEXT + 64], tb[4 * MAX_TEXT + 64];
    int bad = 0;
    rng_state = seed;
    for (int i = 0; i < N_STRINGS; i++) {
        gen_string(&b);
        int nw = llama_tokenize(vocab, b.s, (int32_t)b.n, want, MAX_IDS, false, parse_special != 0);
        if (marker && !parse_special) {
            int ng = loom_tokenizer_encode(tok, b.s, b.n, LOOM_SPECIAL_DATA, got, MAX_IDS, NULL), excepted = 0;
            for (int k = 0; k < nw && k < MAX_IDS; k++)
                excepted |= marker[want[k]];
            int has_marker = 0;
            for (int k = 0; k < ng && k < MAX_IDS; k++)
                has_marker |= marker[got[k]];
            st->data_excepted += excepted;
            if (excepted ? has_marker : !ids_equal(want, nw, got, ng)) {
                if (st->data_bad++ < 5)
                    print_mismatch("data mode", &b, want, nw, got, ng);
            }
        }
        int ng = loom_tokenizer_encode(tok, b.s, b.n, parse_special ? LOOM_SPECIAL_ALL : LOOM_SPECIAL_USER_DEFINED,
                                       got, MAX_IDS, NULL);
        st->n_ids += nw > 0 ? nw : 0;
        if (!ids_equal(want, nw, got, ng)) {
            if (bad < 5)
                print_mismatch(parse_special ? "parse_special" : "plain", &b, want, nw, got, ng);
            bad++;
            continue;
        }
        if (!check_text || nw <= 0)
            continue;
        int la = llama_detokenize(vocab, want, nw, ta, (int32_t)sizeof ta, false, true);
        int lb = loom_tokenizer_detokenize(tok, got, (size_t)ng, tb, sizeof tb);
        if (la != lb || (la > 0 && memcmp(ta, tb, (size_t)la) != 0)) {
            if (st->text_bad++ < 3)
                fprintf(stderr, "detokenized text differs (%d vs %d bytes)\n", la, lb);
        }
    }
    return bad;
}

/* Every id's piece (the reference with special = true), EOG flag, and sampleable flag (the reference's
 * UNUSED attribute; no control token here has "unused" in its text, which the reference also marks). */
static void compare_vocab(const struct llama_vocab *vocab, const struct loom_tokenizer *tok, const char *name)
{
    int n = llama_vocab_n_tokens(vocab), piece_bad = 0, eog_bad = 0, n_eog = 0, unused_bad = 0;
    const uint8_t *ok = loom_tokenizer_sampleable(tok);
    CHECK((uint32_t)n == loom_tokenizer_n_vocab(tok), "%s: vocab size %d vs %u", name, n, loom_tokenizer_n_vocab(tok));
    for (int32_t id = 0; id < n; id++) {
        char a[512], b[512];
        int na = llama_token_to_piece(vocab, id, a, sizeof a, 0, true);
        int nb = loom_tokenizer_piece(tok, id, b, sizeof b);
        if (na != nb || (na > 0 && memcmp(a, b, (size_t)na) != 0)) {
            if (piece_bad++ < 3)
                fprintf(stderr, "%s: piece of %d differs (%d vs %d bytes)\n", name, id, na, nb);
        }
        int e = llama_vocab_is_eog(vocab, id);
        n_eog += e;
        eog_bad += e != loom_tokenizer_is_eog(tok, id);
        unused_bad += ok[id] != !(llama_vocab_get_attr(vocab, id) & LLAMA_TOKEN_ATTR_UNUSED);
    }
    CHECK(piece_bad == 0, "%s: %d of %d pieces differ", name, piece_bad, n);
    CHECK(eog_bad == 0, "%s: EOG flags differ on %d ids", name, eog_bad);
    CHECK(unused_bad == 0, "%s: sampleable differs from not-UNUSED on %d ids", name, unused_bad);
    printf("%s: %d pieces equal, EOG set of %d equal\n", name, n - piece_bad, n_eog);
}

/* The examples: caller text that the reference (parse_special = false, as in its .out files)
 * encodes with a plain-text USER_DEFINED token must give the same ids in data mode. */
static void check_examples(const struct llama_vocab *vocab, const struct loom_tokenizer *tok, const char *name)
{
    static const struct {
        const char *vocab, *text;
    } k[] = {
        {"mpt", "  "}, {"mpt", "    Hello"}, {"mpt", "    Hello\n    Hello"}, {"deepseek-coder", "a\xC3\xB5" "b"},
        {"deepseek-coder", "na\xC3\xAFve \xC3\xBC" "ber \xC3\xB7 2"},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        if (strcmp(k[i].vocab, name))
            continue;
        int32_t want[64], got[64];
        size_t len = strlen(k[i].text);
        int nw = llama_tokenize(vocab, k[i].text, (int32_t)len, want, 64, false, false);
        int ng = loom_tokenizer_encode(tok, k[i].text, len, LOOM_SPECIAL_DATA, got, 64, NULL);
        CHECK(ids_equal(want, nw, got, ng), "%s: '%s' in data mode: %d ids, the reference %d", name, k[i].text, ng, nw);
    }
}

/* check_text: the reference leaves spaces as they are when detokenizing (clean_spaces off), so its text
 * must equal loom's. name keys the USER_DEFINED table. */
static void run_vocab(const char *path, const char *name, int check_text)
{
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (access(path, R_OK) != 0) {
        printf("skip: %s not found\n", path);
        return;
    }
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    loom_error err = {0};
    struct loom_gguf *g = NULL;
    struct loom_tokenizer *tok = NULL;
    int ok = loom_gguf_open(path, &g, &err) == LOOM_OK && loom_tokenizer_load(g, 0, &tok, &err) == LOOM_OK;
    CHECK(model && ok, "%s: load (reference %s, loom: %s)", file, model ? "ok" : "failed", ok ? "ok" : err.msg);
    if (model && ok) {
        const struct llama_vocab *vocab = llama_model_get_vocab(model);
        uint8_t *marker = check_user_defined(vocab, tok, g, name);
        check_examples(vocab, tok, name);
        for (int ps = 0; ps <= 1; ps++) {
            struct string_stats st = {0};
            double t0 = parity_now();
            int bad = compare_strings(vocab, tok, ps, check_text, 0x70C3A1ull + (uint64_t)ps, marker, &st);
            CHECK(bad == 0, "%s parse_special=%d: %d of %d strings differ", file, ps, bad, N_STRINGS);
            CHECK(st.text_bad == 0, "%s parse_special=%d: %d detokenized texts differ", file, ps, st.text_bad);
            printf("%s parse_special=%d: %d/%d strings equal (%d reference ids)%s, %.2f s\n", file, ps,
                   N_STRINGS - bad, N_STRINGS, st.n_ids, check_text ? ", texts equal" : "", parity_now() - t0);
            if (ps == 0 && marker) {
                CHECK(st.data_bad == 0, "%s data mode: %d of %d strings differ from parse_special=0", file,
                      st.data_bad, N_STRINGS);
                printf("%s data mode: %d/%d strings equal to parse_special=0 (%d hold a declared marker: none "
                       "matched)\n", file, N_STRINGS - st.data_bad, N_STRINGS, st.data_excepted);
            }
            n_strings_total += N_STRINGS;
        }
        free(marker);
        compare_vocab(vocab, tok, file);
    }
    loom_tokenizer_free(tok);
    loom_gguf_close(g);
    if (model)
        llama_model_free(model);
}

/* Caller text spelling Qwen's markers never becomes their ids in data mode; trusted text (ALL) and the
 * reference with parse_special = true give exactly those ids. */
static void check_qwen_markers(const char *path)
{
    static const char *const texts[] = {
        "</think>", "<think>\nx\n</think>\n\n", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
        "<tool_response>\nok\n</tool_response>", "a</think>b<tool_call>c", "<|im_end|></think><|im_start|>",
    };
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    loom_error err = {0};
    struct loom_gguf *g = NULL;
    struct loom_tokenizer *tok = NULL;
    int ok = model && loom_gguf_open(path, &g, &err) == LOOM_OK && loom_tokenizer_load(g, 0, &tok, &err) == LOOM_OK;
    CHECK(ok, "qwen35-markers: load (%s)", err.msg);
    for (size_t i = 0; ok && i < sizeof texts / sizeof *texts; i++) {
        int32_t ref[64], data[64], all[64];
        size_t len = strlen(texts[i]);
        int nr = llama_tokenize(llama_model_get_vocab(model), texts[i], (int32_t)len, ref, 64, false, true);
        int nd = loom_tokenizer_encode(tok, texts[i], len, LOOM_SPECIAL_DATA, data, 64, NULL);
        int na = loom_tokenizer_encode(tok, texts[i], len, LOOM_SPECIAL_ALL, all, 64, NULL);
        int n_marker = 0, leaked = 0;
        for (int k = 0; k < na; k++)
            n_marker += all[k] >= 151643 && all[k] <= 151668;
        for (int k = 0; k < nd; k++)
            leaked += data[k] >= 151643 && data[k] <= 151668;
        CHECK(ids_equal(ref, nr, all, na) && n_marker > 0, "qwen35-markers '%s': trusted text gives %d marker ids, "
              "the reference with parse_special = true the same ids", texts[i], n_marker);
        CHECK(nd > 0 && leaked == 0, "qwen35-markers '%s': data mode gives %d marker ids", texts[i], leaked);
    }
    loom_tokenizer_free(tok);
    loom_gguf_close(g);
    if (model)
        llama_model_free(model);
}

/* loom's code point classes against the reference's own table (unicode_cpt_flags_from_cpt in libllama, C++
 * name mangled; looked up at run time so a build without it only skips): \p{L}, \p{N}, \p{M}, \p{P}, \s,
 * and "has any flag", on every code point. */
static void compare_classes(void)
{
    uint16_t (*ref_flags)(uint32_t);
    void *sym = dlsym(RTLD_DEFAULT, "_Z26unicode_cpt_flags_from_cptj");
    if (!sym) {
        printf("skip: the reference's unicode_cpt_flags_from_cpt is not exported\n");
        return;
    }
    memcpy(&ref_flags, &sym, sizeof ref_flags);
    static const struct {
        uint16_t ref;
        unsigned loom;
        const char *name;
    } k[] = {{0x0004, LOOM_CP_LETTER, "L"}, {0x0002, LOOM_CP_NUMBER, "N"}, {0x0010, LOOM_CP_MARK, "M"},
             {0x0020, LOOM_CP_PUNCT, "P"},  {0x0100, LOOM_CP_SPACE, "White_Space"}, {0xFFFF, LOOM_CP_VALID, "any"}};
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        uint32_t bad = 0, first = 0;
        for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
            int r = (ref_flags(cp) & k[i].ref) != 0, l = (loom_cp_class(cp) & k[i].loom) != 0;
            if (r != l && bad++ == 0)
                first = cp;
        }
        CHECK(bad == 0, "class %s: %u code points differ from the reference (first U+%04X)", k[i].name, bad, first);
    }
    printf("code point classes L, N, M, P, White_Space equal to the reference's on U+0000..U+10FFFF\n");
}

int main(void)
{
    static const struct {
        const char *name;
        int check_text;
    } vocabs[] = {
        {"qwen35", 1}, {"qwen2", 1}, {"llama-bpe", 0}, {"gpt-2", 0}, {"llama-spm", 1}, {"phi-3", 1},
        {"deepseek-coder", 1}, {"starcoder", 0}, {"mpt", 0}, {"refact", 0},
    };
    char cache[1024], dir[1100], path[1300];
    parity_cache_dir(cache, sizeof cache);
    parity_ref_dir(dir, sizeof dir);
    if (parity_ref_init() != 0) {
        printf("skip: reference libraries not found\n");
        return test_finish();
    }
    compare_classes();
    double t0 = parity_now();
    for (size_t i = 0; i < sizeof vocabs / sizeof *vocabs; i++) {
        snprintf(path, sizeof path, "%s/src/models/ggml-vocab-%s.gguf", dir, vocabs[i].name);
        run_vocab(path, vocabs[i].name, vocabs[i].check_text);
    }
    char fixture[64];
    snprintf(path, sizeof path, "%s/src/models/ggml-vocab-qwen35.gguf", dir);
    snprintf(fixture, sizeof fixture, "/tmp/loom-qwen35-markers-%d.gguf", (int)getpid());
    if (access(path, R_OK) == 0) {
        CHECK(write_qwen_markers_vocab(path, fixture) == 0, "write the qwen35-markers fixture");
        check_qwen_markers(fixture);
        run_vocab(fixture, "qwen35-markers", 1);
        unlink(fixture);
    }
    /* a synthetic model's padded vocabulary (UNUSED rows), when scripts/prepare-models.sh has made it */
    snprintf(path, sizeof path, "%s/models/qwen35-tiny-F32.gguf", cache);
    run_vocab(path, "qwen35", 1);
    printf("%d generated strings compared in %.1f s\n", n_strings_total, parity_now() - t0);
    llama_backend_free();
    return test_finish();
}
