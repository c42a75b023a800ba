/* test_ref_tokenizer.c — loom's tokenizer against the reference's (llama_tokenize on a vocab-only load) on
 * the test vocabularies qwen35, qwen2, llama-bpe, gpt-2, llama-spm, phi-3, deepseek-coder and starcoder:
 * over 100,000 generated strings in all (mixed scripts, combining marks, decomposed and precomposed forms,
 * emoji sequences, whitespace runs, digits, contractions, invalid UTF-8, embedded NUL, special-token
 * spellings), with parse_special off and on; every token's piece, the end-of-generation set, and the
 * detokenized text where the reference does not clean up spaces. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "parity.h"
#include "test.h"
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

/* Tokenize generated strings with both; returns the number of mismatches. With check_text, the ids also
 * detokenize to the reference's text (llama_detokenize keeping specials). */
static int compare_strings(const struct llama_vocab *vocab, const struct loom_tokenizer *tok, int parse_special,
                           int check_text, uint64_t seed, int *n_ids, int *text_bad)
{
    static struct buf b;
    static int32_t want[MAX_IDS], got[MAX_IDS];
    static char ta[4 * MAX_TEXT + 64], tb[4 * MAX_TEXT + 64];
    int bad = 0;
    rng_state = seed;
    for (int i = 0; i < N_STRINGS; i++) {
        gen_string(&b);
        int nw = llama_tokenize(vocab, b.s, (int32_t)b.n, want, MAX_IDS, false, parse_special != 0);
        int ng = loom_tokenizer_encode(tok, b.s, b.n, parse_special ? LOOM_SPECIAL_ALL : LOOM_SPECIAL_USER_DEFINED,
                                       got, MAX_IDS, NULL);
        *n_ids += nw > 0 ? nw : 0;
        if (nw != ng || (nw > 0 && memcmp(want, got, (size_t)nw * sizeof *want) != 0)) {
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
            if ((*text_bad)++ < 3)
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

/* check_text: the reference leaves spaces as they are when detokenizing (clean_spaces off), so its text
 * must equal loom's. */
static void run_vocab(const char *path, int check_text)
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
        for (int ps = 0; ps <= 1; ps++) {
            int n_ids = 0, text_bad = 0;
            double t0 = parity_now();
            int bad = compare_strings(vocab, tok, ps, check_text, 0x70C3A1ull + (uint64_t)ps, &n_ids, &text_bad);
            CHECK(bad == 0, "%s parse_special=%d: %d of %d strings differ", file, ps, bad, N_STRINGS);
            CHECK(text_bad == 0, "%s parse_special=%d: %d detokenized texts differ", file, ps, text_bad);
            printf("%s parse_special=%d: %d/%d strings equal (%d reference ids)%s, %.2f s\n", file, ps,
                   N_STRINGS - bad, N_STRINGS, n_ids, check_text ? ", texts equal" : "", parity_now() - t0);
            n_strings_total += N_STRINGS;
        }
        compare_vocab(vocab, tok, file);
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
        {"deepseek-coder", 1}, {"starcoder", 0},
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
        run_vocab(path, vocabs[i].check_text);
    }
    /* a synthetic model's padded vocabulary (UNUSED rows), when scripts/prepare-models.sh has made it */
    snprintf(path, sizeof path, "%s/models/qwen35-tiny-F32.gguf", cache);
    run_vocab(path, 1);
    printf("%d generated strings compared in %.1f s\n", n_strings_total, parity_now() - t0);
    llama_backend_free();
    return test_finish();
}
