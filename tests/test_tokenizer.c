/* test_tokenizer.c — the tokenizer: UTF-8 and byte-level internals, the qwen pre-tokenizer, a tiny
 * hand-made vocabulary (special tokens, data mode against Qwen's USER_DEFINED markers, EOG set, sampleable
 * rows, streaming detokenizer), the reference's vocabularies' test cases (in data mode too) when those files
 * are present, and the compact tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "test.h"
#include "text/text_internal.h"
#include "text/tokenizer.h"

/* ---- internals ---------------------------------------------------------------------------------- */

static void test_bytelevel(void)
{
    int seen[324] = {0}, ok = 1;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = loom_bytelevel_cp((unsigned char)b);
        ok &= cp < 324 && !seen[cp] && loom_bytelevel_byte(cp) == b;
        if (cp < 324)
            seen[cp] = 1;
    }
    CHECK(ok, "byte-level map is a bijection with its inverse");
    CHECK(loom_bytelevel_cp(' ') == 0x120 && loom_bytelevel_cp('\n') == 0x10A && loom_bytelevel_cp(0xAD) == 0x143,
          "space -> U+0120, newline -> U+010A, 0xAD -> U+0143");
    CHECK(loom_bytelevel_byte(0x20) == -1 && loom_bytelevel_byte(0x144) == -1, "outside the alphabet");
}

static void test_decode_lenient(void)
{
    uint32_t cps[16];
    size_t n = loom_utf8_decode_lenient("a\xC3\xA9\xF0\x9F\xA6\x99", 7, cps);
    CHECK(n == 3 && cps[0] == 'a' && cps[1] == 0xE9 && cps[2] == 0x1F999, "valid: n=%zu", n);
    n = loom_utf8_decode_lenient("\x80\xE2\x82", 3, cps);
    CHECK(n == 3 && cps[0] == 0xFFFD && cps[1] == 0xFFFD && cps[2] == 0xFFFD, "stray and cut: n=%zu", n);
    n = loom_utf8_decode_lenient("\xC0\x80\xF7\xBF\xBF\xBF", 6, cps);
    CHECK(n == 5 && cps[0] == 0 && cps[1] == 0xFFFD, "overlong kept, past U+10FFFF rejected: n=%zu", n);
}

/* Pre-tokens of UTF-8 s as "|"-joined text. */
static void pre_split(enum loom_pre_kind kind, const char *s, char *out)
{
    uint32_t cps[64], ends[64];
    size_t n = loom_utf8_decode_lenient(s, strlen(s), cps), w = loom_pretokenize(kind, cps, n, ends), start = 0;
    out[0] = 0;
    for (size_t i = 0; i < w; i++) {
        char *p = out + strlen(out);
        if (i)
            *p++ = '|';
        for (size_t j = start; j < ends[i]; j++)
            p += loom_utf8_encode(cps[j], (unsigned char *)p);
        *p = 0;
        start = ends[i];
    }
}

static void test_pretokenize(void)
{
    static const struct {
        enum loom_pre_kind kind;
        const char *in, *want;
    } cases[] = {
        {LOOM_PRE_QWEN35, "12345", "1|2|3|4|5"},
        {LOOM_PRE_QWEN35, "Hello world", "Hello| world"},
        {LOOM_PRE_QWEN35, "a  b", "a| | b"},
        {LOOM_PRE_QWEN35, "\n\n  x", "\n\n| | x"},
        {LOOM_PRE_QWEN35, "I'M here's", "I|'M| here|'s"},
        {LOOM_PRE_QWEN35, " !!\n\nok", " !!\n\n|ok"},
        {LOOM_PRE_QWEN35, "x  ", "x|  "},
        {LOOM_PRE_QWEN35, "a\xCC\x81" "b", "a\xCC\x81" "b"},
        {LOOM_PRE_QWEN2, "a\xCC\x81" "b", "a|\xCC\x81" "b"},
        {LOOM_PRE_QWEN35, "\xE4\xBD\xA0\xE5\xA5\xBD!", "\xE4\xBD\xA0\xE5\xA5\xBD|!"},
        {LOOM_PRE_GPT2, "Hello world's 12345  x", "Hello| world|'s| 12345| | x"},
        {LOOM_PRE_GPT2, "I'M", "I|'|M"},
        {LOOM_PRE_GPT2, "a\n\nb ", "a|\n|\n|b| "},
        {LOOM_PRE_LLAMA3, "1234567 I'M", "123|456|7| I|'M"},
        {LOOM_PRE_STARCODER, " 123 abc", " |1|2|3| abc"},
        {LOOM_PRE_DEEPSEEK_CODER, "a\nb", "a|\n|b"},
        {LOOM_PRE_DEEPSEEK_CODER, "foo, bar", "foo|,| bar"},
        {LOOM_PRE_DEEPSEEK_CODER, "x123 \xE4\xB8\xAD\xE6\x96\x87" "abc", "x|1|2|3| |\xE4\xB8\xAD\xE6\x96\x87|abc"},
        {LOOM_PRE_DEEPSEEK_CODER, "$$ \xE3\x80\x80x", "$$ |\xE3\x80\x80x"},
        {LOOM_PRE_NONE, "a b", "a b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char got[256];
        pre_split(cases[i].kind, cases[i].in, got);
        CHECK(strcmp(got, cases[i].want) == 0, "case %zu: got '%s' want '%s'", i, got, cases[i].want);
    }
}

/* ---- a tiny vocabulary: 256 byte tokens, a few merges, specials ---------------------------------- */

/* After T_PAD: Qwen's USER_DEFINED markers (as in real Qwen3 and Qwen3.5 GGUFs), a [PAD] row as older
 * conversions typed it, and two plain-text USER_DEFINED tokens (MPT's two spaces, DeepSeek-Coder's "õ"). */
enum {
    T_ML = 256, T_MLA, T_HE, T_HEL, T_START, T_END, T_EOT, T_THINK, T_PAD, T_THINK_END, T_TOOL, T_TOOL_END,
    T_RESP, T_RESP_END, T_PAD_ROW, T_SPACES, T_OTILDE, N_TINY
};

/* The tiny vocabulary, with id_key (when not NULL) set to id in place of the file's own value of that key. */
static int write_tiny_vocab_id(const char *path, const char *model, int add_bos, const char *id_key, uint32_t id)
{
    static char texts[N_TINY][24];
    struct loom_gguf_str toks[N_TINY];
    int32_t types[N_TINY];
    for (int b = 0; b < 256; b++) {
        int n = loom_utf8_encode(loom_bytelevel_cp((unsigned char)b), (unsigned char *)texts[b]);
        texts[b][n] = 0;
        types[b] = 1;
    }
    const char *extra[] = {"\xC3\xB0\xC5\x81", "\xC3\xB0\xC5\x81\xC2\xA6", "He", "Hel",
                           "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "<pad_x>", "</think>",
                           "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "[PAD270]", "  ",
                           "\xC3\xB5"};
    const int32_t extra_types[] = {1, 1, 1, 1, 3, 3, 3, 4, 5, 4, 4, 4, 4, 4, 4, 4, 4};
    _Static_assert(sizeof extra / sizeof *extra == N_TINY - 256 && sizeof extra_types / 4 == N_TINY - 256, "");
    for (int i = 0; i < N_TINY - 256; i++) {
        strcpy(texts[256 + i], extra[i]);
        types[256 + i] = extra_types[i];
    }
    for (int i = 0; i < N_TINY; i++)
        toks[i] = (struct loom_gguf_str){strlen(texts[i]), texts[i]};
    /* "ð Ł" makes F0 9F; "ðŁ ¦" adds A6: U+1F999 (F0 9F A6 99) then spans two tokens */
    const char *merge_text[] = {"\xC3\xB0 \xC5\x81", "\xC3\xB0\xC5\x81 \xC2\xA6", "H e", "He l"};
    struct loom_gguf_str merges[4];
    for (int i = 0; i < 4; i++)
        merges[i] = (struct loom_gguf_str){strlen(merge_text[i]), merge_text[i]};
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    loom_error err = {0};
    int rc = !w || loom_gguf_writer_set_str(w, "tokenizer.ggml.model", model) ||
             loom_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen35") ||
             loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, N_TINY) ||
             loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, types, N_TINY) ||
             loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 4) ||
             loom_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id",
                                      id_key && !strcmp(id_key, "tokenizer.ggml.eos_token_id") ? id : T_EOT) ||
             loom_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id",
                                      id_key && !strcmp(id_key, "tokenizer.ggml.bos_token_id") ? id : T_EOT) ||
             (id_key && strcmp(id_key, "tokenizer.ggml.eos_token_id") &&
              strcmp(id_key, "tokenizer.ggml.bos_token_id") && loom_gguf_writer_set_u32(w, id_key, id)) ||
             (add_bos && loom_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1)) ||
             loom_gguf_writer_write(w, path, NULL, NULL, &err);
    loom_gguf_writer_free(w);
    return rc;
}

static int write_tiny_vocab(const char *path, const char *model, int add_bos)
{
    return write_tiny_vocab_id(path, model, add_bos, NULL, 0);
}

static struct loom_tokenizer *load_tiny(const char *path, uint32_t n_rows, loom_error *err, struct loom_gguf **g)
{
    struct loom_tokenizer *tok = NULL;
    *g = NULL;
    if (loom_gguf_open(path, g, err) != LOOM_OK)
        return NULL;
    if (loom_tokenizer_load(*g, n_rows, &tok, err) != LOOM_OK) {
        loom_gguf_close(*g);
        *g = NULL;
    }
    return tok;
}

/* Stream ids through a detokenizer; returns the joined output length in out (and each delta's length). */
static int stream(const struct loom_tokenizer *tok, const int32_t *ids, int n, char *out, int *delta_len)
{
    struct loom_detok d;
    loom_detok_init(&d, tok);
    int len = 0;
    for (int i = 0; i < n; i++) {
        int k = loom_detok_push(&d, ids[i], out + len, 256);
        if (k < 0)
            return k;
        if (delta_len)
            delta_len[i] = k;
        len += k;
    }
    int k = loom_detok_flush(&d, out + len, 256);
    return k < 0 ? k : len + k;
}

static int has_id(const int32_t *ids, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* The public handle of a vocabulary-only file (tiny vocab with add_bos_token): rows, attributes, declared special
 * ids, the end-of-generation set, no chat template, no warnings; a missing file is refused. */
static void test_open(const char *path)
{
    loom_error err = {0};
    loom_tokenizer *tok = loom_tokenizer_open(path, &err);
    CHECK(tok != NULL, "loom_tokenizer_open: %s", err.msg);
    if (!tok)
        return;
    CHECK(loom_tokenizer_n_rows(tok) == N_TINY && loom_tokenizer_n_vocab(tok) == N_TINY, "rows = vocabulary");
    CHECK(loom_tokenizer_token_attr(tok, 'a') == (LOOM_TOKEN_NORMAL | LOOM_TOKEN_SAMPLEABLE) &&
              loom_tokenizer_token_attr(tok, T_END) == (LOOM_TOKEN_CONTROL | LOOM_TOKEN_EOG | LOOM_TOKEN_SAMPLEABLE) &&
              loom_tokenizer_token_attr(tok, T_THINK) == (LOOM_TOKEN_USER_DEFINED | LOOM_TOKEN_SAMPLEABLE) &&
              loom_tokenizer_token_attr(tok, T_PAD) == LOOM_TOKEN_UNUSED &&
              loom_tokenizer_token_attr(tok, N_TINY) == 0 && loom_tokenizer_token_attr(tok, -1) == 0,
          "token attributes: normal, control + EOG, user-defined, unused, outside");
    CHECK(loom_tokenizer_special(tok, LOOM_SPECIAL_ID_BOS) == T_EOT &&
              loom_tokenizer_special(tok, LOOM_SPECIAL_ID_EOS) == T_EOT &&
              loom_tokenizer_special(tok, LOOM_SPECIAL_ID_PAD) == -1 &&
              loom_tokenizer_special(tok, LOOM_SPECIAL_ID_COUNT) == -1,
          "declared special ids: bos and eos, no pad");
    int32_t eog[64];
    int n = loom_tokenizer_eog(tok, eog, 64), all = n > 0;
    for (int i = 0; i < n; i++)
        all &= loom_tokenizer_is_eog(tok, eog[i]);
    CHECK(all && has_id(eog, n, T_EOT) && has_id(eog, n, T_END) && !has_id(eog, n, T_START),
          "the end-of-generation set lists its ids (%d)", n);
    CHECK(!loom_tokenizer_chat_template(tok) && loom_tokenizer_n_warnings(tok) == 0 && !loom_tokenizer_warning(tok, 0),
          "no chat template, no warnings");
    loom_tokenizer_free(tok);
    CHECK(!loom_tokenizer_open("/nonexistent/vocab.gguf", &err) && err.code == LOOM_E_IO,
          "a missing file is refused: %s", err.msg);
}

static void test_tiny_specials(const struct loom_tokenizer *tok)
{
    static const char text[] = "<|im_start|>Hello<|im_end|><think>";
    int32_t ids[64];
    int n = loom_tokenizer_encode(tok, text, strlen(text), LOOM_SPECIAL_DATA, ids, 64, NULL);
    CHECK(n > 0 && !has_id(ids, n, T_START) && !has_id(ids, n, T_END) && !has_id(ids, n, T_THINK),
          "data mode: no CONTROL ids, no USER_DEFINED marker (n=%d)", n);
    n = loom_tokenizer_encode(tok, text, strlen(text), LOOM_SPECIAL_USER_DEFINED, ids, 64, NULL);
    CHECK(n > 0 && !has_id(ids, n, T_START) && !has_id(ids, n, T_END), "reference mode: no control ids (n=%d)", n);
    CHECK(n > 0 && ids[n - 1] == T_THINK, "reference mode: USER_DEFINED tokens split out, as in the reference");
    CHECK(loom_tokenizer_encode(tok, text, strlen(text), 3, ids, 64, NULL) == LOOM_E_ARG, "unknown mode rejected");
    n = loom_tokenizer_encode(tok, text, strlen(text), 1, ids, 64, NULL);
    CHECK(n == 6 && ids[0] == T_START && ids[1] == T_HEL && ids[2] == 'l' && ids[3] == 'o' && ids[4] == T_END &&
              ids[5] == T_THINK,
          "parse_special=1: n=%d ids %d %d .. %d", n, ids[0], ids[1], n > 0 ? ids[n - 1] : -1);
    int need = loom_tokenizer_encode(tok, text, strlen(text), 1, ids, 2, NULL);
    CHECK(need == 6 && ids[0] == T_START, "cap smaller than needed returns the full count");
    CHECK(loom_tokenizer_encode(tok, "", 0, 1, ids, 0, NULL) == 0, "empty text");
    CHECK(loom_tokenizer_is_eog(tok, T_EOT) && loom_tokenizer_is_eog(tok, T_END) && !loom_tokenizer_is_eog(tok, T_START) &&
              !loom_tokenizer_is_eog(tok, 'a') && !loom_tokenizer_is_eog(tok, N_TINY),
          "EOG set = {<|endoftext|>, <|im_end|>}");
    char buf[32];
    int k = loom_tokenizer_piece(tok, T_END, buf, sizeof buf);
    CHECK(k == 10 && memcmp(buf, "<|im_end|>", 10) == 0, "control piece is its text");
    k = loom_tokenizer_piece(tok, 0xF0, buf, sizeof buf);
    CHECK(k == 1 && (unsigned char)buf[0] == 0xF0, "byte token piece is its byte");
    k = loom_tokenizer_piece(tok, ' ', buf, sizeof buf);
    CHECK(k == 1 && buf[0] == ' ', "the token for byte 0x20 decodes to a space");
    CHECK(loom_tokenizer_piece(tok, N_TINY, buf, sizeof buf) == LOOM_E_ARG &&
              loom_tokenizer_piece(tok, -1, buf, sizeof buf) == LOOM_E_ARG,
          "piece of an id outside the vocabulary");
    CHECK(loom_tokenizer_piece(tok, T_PAD, buf, sizeof buf) == 0, "UNUSED tokens have an empty piece");
    CHECK(loom_tokenizer_bos(tok) == -1, "no add_bos_token key: no BOS");
}

/* Data mode (the rule at loom_special_mode in loom.h): caller text spelling Qwen's USER_DEFINED markers or a [PAD]
 * row keeps them as text, while trusted text (ALL) and the reference's parse_special = false (USER_DEFINED) match
 * them; plain-text USER_DEFINED tokens match in every mode, as in the reference. */
static void test_tiny_data_mode(const struct loom_tokenizer *tok)
{
    static const char text[] = "a<think>b</think><tool_call>{}</tool_call><tool_response>x</tool_response>[PAD270]";
    static const int32_t markers[] = {T_THINK, T_THINK_END, T_TOOL, T_TOOL_END, T_RESP, T_RESP_END, T_PAD_ROW};
    int32_t ids[128];
    char back[128];
    for (int mode = 0; mode <= 2; mode++) {
        int n = loom_tokenizer_encode(tok, text, strlen(text), mode, ids, 128, NULL), found = 0;
        for (size_t i = 0; i < sizeof markers / sizeof *markers; i++)
            found += has_id(ids, n, markers[i]);
        int want = mode == LOOM_SPECIAL_DATA ? 0 : 7;
        CHECK(n > 0 && found == want, "mode %d: %d of the 7 marker ids, want %d (n=%d)", mode, found, want, n);
        int m = loom_tokenizer_detokenize(tok, ids, (size_t)n, back, sizeof back);
        CHECK(m == (int)strlen(text) && !memcmp(back, text, (size_t)m), "mode %d: ids decode back to the text", mode);
    }
    static const char plain[] = "x  y\xC3\xB5z";
    for (int mode = 0; mode <= 2; mode++) {
        int n = loom_tokenizer_encode(tok, plain, strlen(plain), mode, ids, 128, NULL);
        CHECK(n == 5 && ids[0] == 'x' && ids[1] == T_SPACES && ids[2] == 'y' && ids[3] == T_OTILDE && ids[4] == 'z',
              "mode %d: plain-text USER_DEFINED tokens match (n=%d)", mode, n);
    }
}

static void test_tiny_detok(const struct loom_tokenizer *tok)
{
    static const char emoji[] = "x\xF0\x9F\xA6\x99y";
    int32_t ids[16];
    int n = loom_tokenizer_encode(tok, emoji, strlen(emoji), 0, ids, 16, NULL);
    CHECK(n == 4 && ids[1] == T_MLA && ids[2] == 0x99, "emoji spans two tokens: n=%d", n);
    char out[1024];
    int delta[16] = {0};
    int len = stream(tok, ids, n, out, delta);
    CHECK(len == 6 && memcmp(out, emoji, 6) == 0, "joined deltas equal the text (len %d)", len);
    CHECK(delta[1] == 0 && delta[2] == 4, "the emoji comes out whole with its second token (%d, %d)", delta[1], delta[2]);
    char oneshot[64];
    int m = 0;
    for (int i = 0; i < n; i++)
        m += loom_tokenizer_piece(tok, ids[i], oneshot + m, 64 - m);
    CHECK(m == len && memcmp(oneshot, out, (size_t)m) == 0, "streamed output equals one-shot decode");

    int32_t bad[] = {0xFF, 'a', 0xE2, 'b', 0xF0};
    len = stream(tok, bad, 5, out, delta);
    CHECK(len == 11 && memcmp(out, "\xEF\xBF\xBD" "a\xEF\xBF\xBD" "b\xEF\xBF\xBD", 11) == 0,
          "invalid bytes become U+FFFD, a cut tail at flush too (len %d)", len);
    CHECK(delta[4] == 0, "an incomplete tail is held back");
    int32_t sur[] = {0xED, 0xA0, 0x80};
    len = stream(tok, sur, 3, out, NULL);
    CHECK(len == 9, "a surrogate is three invalid subparts (len %d)", len);

    struct loom_detok d;
    loom_detok_init(&d, tok);
    CHECK(loom_detok_push(&d, T_START, out, 4) == LOOM_E_RANGE && d.n_pending == 0, "small out: E_RANGE, no state change");
    CHECK(loom_detok_push(&d, N_TINY, out, 64) == LOOM_E_ARG, "push of an id outside the vocabulary");
}

static void test_tiny(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/loom-test-tok-%d.gguf", (int)getpid());
    CHECK(write_tiny_vocab(path, "gpt2", 0) == 0, "write tiny vocab");
    loom_error err = {0};
    struct loom_gguf *g;
    struct loom_tokenizer *tok = load_tiny(path, N_TINY + 7, &err, &g);
    CHECK(tok != NULL, "load tiny vocab: %s", err.msg);
    if (tok) {
        const uint8_t *ok = loom_tokenizer_sampleable(tok);
        int good = 1;
        for (int i = 0; i < N_TINY + 7; i++)
            good &= ok[i] == (i < N_TINY && i != T_PAD);
        CHECK(good, "sampleable: rows past the vocabulary and UNUSED tokens are not");
        CHECK(loom_tokenizer_n_vocab(tok) == N_TINY && tok->n_merges_skipped == 0, "vocab size and merges");
        test_tiny_specials(tok);
        test_tiny_data_mode(tok);
        test_tiny_detok(tok);
        loom_tokenizer_free(tok);
        loom_gguf_close(g);
    }
    CHECK(write_tiny_vocab(path, "gpt2", 1) == 0, "write tiny vocab with add_bos");
    tok = load_tiny(path, 0, &err, &g);
    CHECK(tok && loom_tokenizer_bos(tok) == T_EOT, "add_bos_token true gives the BOS id");
    loom_tokenizer_free(tok);
    loom_gguf_close(g);
    test_open(path);
    CHECK(write_tiny_vocab(path, "bert", 0) == 0, "write a vocab of an unsupported model");
    tok = load_tiny(path, 0, &err, &g);
    CHECK(!tok && err.code == LOOM_E_FORMAT && strstr(err.msg, "tokenizer.ggml.model"), "wrong model rejected: %s",
          err.msg);
    unlink(path);
}

/* A special token id key whose id is outside the vocabulary (N_TINY tokens; N_TINY itself is the first id past
 * it): the ids that decide output (bos, prepended; the end-of-generation ids) refuse the file naming the key, the
 * vocabulary size and the id; the others (reported or unused by loom) are ignored with a warning naming the key,
 * and an ignored FIM id leaves its token to be found by spelling, as an absent key does. */
static void test_bad_special_ids(void)
{
    static const char *const refused[] = {
        "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",     "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
        "tokenizer.ggml.fim_sep_token_id",
    };
    static const struct {
        const char *key;
        enum loom_special_token which; /* LOOM_SPECIAL_ID_COUNT: not reported */
    } ignored[] = {
        {"tokenizer.ggml.unknown_token_id", LOOM_SPECIAL_ID_UNK},
        {"tokenizer.ggml.seperator_token_id", LOOM_SPECIAL_ID_SEP},
        {"tokenizer.ggml.padding_token_id", LOOM_SPECIAL_ID_PAD},
        {"tokenizer.ggml.mask_token_id", LOOM_SPECIAL_ID_MASK},
        {"tokenizer.ggml.fim_pre_token_id", LOOM_SPECIAL_ID_COUNT},
        {"tokenizer.ggml.fim_suf_token_id", LOOM_SPECIAL_ID_COUNT},
        {"tokenizer.ggml.fim_mid_token_id", LOOM_SPECIAL_ID_COUNT},
    };
    char path[64], want[160];
    snprintf(path, sizeof path, "/tmp/loom-test-tok-ids-%d.gguf", (int)getpid());
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        for (uint32_t id = N_TINY; id <= N_TINY + 1000; id += 1000) {
            loom_error err = {0};
            CHECK(write_tiny_vocab_id(path, "gpt2", 1, refused[i], id) == 0, "write vocab with %s", refused[i]);
            loom_tokenizer *tok = loom_tokenizer_open(path, &err);
            snprintf(want, sizeof want, "key '%s': expected a token id below the vocabulary size %d, found %u",
                     refused[i], N_TINY, id);
            CHECK(!tok && err.code == LOOM_E_FORMAT && strstr(err.msg, want), "%s = %u refused: '%s'", refused[i],
                  id, err.msg);
            loom_tokenizer_free(tok);
        }
        loom_error err = {0}; /* the last id inside the vocabulary is taken */
        CHECK(write_tiny_vocab_id(path, "gpt2", 1, refused[i], N_TINY - 1) == 0, "write vocab");
        loom_tokenizer *tok = loom_tokenizer_open(path, &err);
        CHECK(tok && loom_tokenizer_n_warnings(tok) == 0, "%s = %d taken: %s", refused[i], N_TINY - 1, err.msg);
        loom_tokenizer_free(tok);
    }
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) {
        loom_error err = {0};
        CHECK(write_tiny_vocab_id(path, "gpt2", 1, ignored[i].key, N_TINY) == 0, "write vocab with %s", ignored[i].key);
        loom_tokenizer *tok = loom_tokenizer_open(path, &err);
        CHECK(tok != NULL, "%s = %d ignored, not refused: %s", ignored[i].key, N_TINY, err.msg);
        if (!tok)
            continue;
        snprintf(want, sizeof want, "key '%s': token id %d is outside the vocabulary (%d tokens); ignored",
                 ignored[i].key, N_TINY, N_TINY);
        const char *w = loom_tokenizer_warning(tok, 0);
        CHECK(loom_tokenizer_n_warnings(tok) == 1 && w && strstr(w, want), "%s: warning '%s'", ignored[i].key,
              w ? w : "(none)");
        CHECK(ignored[i].which == LOOM_SPECIAL_ID_COUNT || loom_tokenizer_special(tok, ignored[i].which) == -1,
              "%s: reported as absent", ignored[i].key);
        CHECK(loom_tokenizer_bos(tok) == T_EOT && loom_tokenizer_is_eog(tok, T_EOT) &&
                  loom_tokenizer_is_eog(tok, T_END) && !loom_tokenizer_is_eog(tok, N_TINY),
              "%s: BOS and the end-of-generation set as without the key", ignored[i].key);
        loom_tokenizer_free(tok);
    }
    unlink(path);
}

/* ---- a tiny SentencePiece vocabulary: <unk> <s> </s>, 256 byte tokens, a few scored pieces ------------- */

enum { S_BYTE0 = 3, S_SPACE = 259, S_H, S_E, S_SH, S_LL, S_SHE, S_LLO, S_SHELLO, N_SPM };

static int write_tiny_spm(const char *path)
{
    static char texts[N_SPM][16];
    struct loom_gguf_str toks[N_SPM];
    int32_t types[N_SPM];
    float scores[N_SPM];
    const char *fixed[] = {"<unk>", "<s>", "</s>"};
    const int32_t fixed_types[] = {2, 3, 3};
    for (int i = 0; i < 3; i++) {
        strcpy(texts[i], fixed[i]);
        types[i] = fixed_types[i];
    }
    for (int b = 0; b < 256; b++) {
        snprintf(texts[S_BYTE0 + b], sizeof texts[0], "<0x%02X>", b);
        types[S_BYTE0 + b] = 6;
    }
    const char *pieces[] = {"\xE2\x96\x81", "H", "e", "\xE2\x96\x81H", "ll", "\xE2\x96\x81He", "llo",
                            "\xE2\x96\x81Hello"};
    const float piece_scores[] = {-9, -9, -9, -1, -2, -3, -4, -5};
    for (int i = 0; i < N_SPM - S_SPACE; i++) {
        strcpy(texts[S_SPACE + i], pieces[i]);
        types[S_SPACE + i] = 1;
    }
    for (int i = 0; i < N_SPM; i++) {
        toks[i] = (struct loom_gguf_str){strlen(texts[i]), texts[i]};
        scores[i] = i >= S_SPACE ? piece_scores[i - S_SPACE] : 0.0f;
    }
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    loom_error err = {0};
    int rc = !w || loom_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") ||
             loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, N_SPM) ||
             loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, types, N_SPM) ||
             loom_gguf_writer_set_arr(w, "tokenizer.ggml.scores", LOOM_GGUF_FLOAT32, scores, N_SPM) ||
             loom_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) ||
             loom_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) ||
             loom_gguf_writer_write(w, path, NULL, NULL, &err);
    loom_gguf_writer_free(w);
    return rc;
}

static void test_tiny_spm(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/loom-test-spm-%d.gguf", (int)getpid());
    CHECK(write_tiny_spm(path) == 0, "write tiny SentencePiece vocab");
    loom_error err = {0};
    struct loom_gguf *g;
    struct loom_tokenizer *tok = load_tiny(path, 0, &err, &g);
    CHECK(tok != NULL, "load tiny SentencePiece vocab: %s", err.msg);
    if (tok) {
        int32_t ids[16];
        int n = loom_tokenizer_encode(tok, "Hello", 5, 0, ids, 16, NULL);
        CHECK(n == 1 && ids[0] == S_SHELLO, "highest-score merges first: 'Hello' -> one token (n=%d)", n);
        n = loom_tokenizer_encode(tok, "Hi\xFF", 3, 0, ids, 16, NULL);
        CHECK(n == 3 && ids[0] == S_SH && ids[1] == S_BYTE0 + 'i' && ids[2] == S_BYTE0 + 0xFF,
              "characters that are not tokens fall back to byte tokens (n=%d)", n);
        n = loom_tokenizer_encode(tok, "</s>He", 6, 1, ids, 16, NULL);
        CHECK(n == 2 && ids[0] == 2 && ids[1] == S_SHE, "a space prefix after a special token (n=%d)", n);
        char text[32];
        int32_t hello[] = {S_SHELLO, S_SHE};
        int m = loom_tokenizer_detokenize(tok, hello, 2, text, sizeof text);
        CHECK(m == 8 && memcmp(text, "Hello He", 8) == 0, "detokenize drops the one prefix space (%d)", m);
        CHECK(loom_tokenizer_piece(tok, S_BYTE0 + 0x41, text, sizeof text) == 1 && text[0] == 'A', "<0x41> is 'A'");
        CHECK(loom_tokenizer_bos(tok) == 1, "SentencePiece adds BOS by default");
        loom_tokenizer_free(tok);
        loom_gguf_close(g);
    }
    unlink(path);
}

/* ---- the reference's qwen35 vocabulary and its test cases ------------------------------------------ */

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *len = (size_t)n;
    }
    return buf;
}

/* Each case of .inp (cases end with "\n__ggml_vocab_test__\n") against its line of .out, encoded in mode
 * (enum loom_special_mode): ids, and the detokenized ids give the text back. The .out files were made by the
 * reference with parse_special = false (mode USER_DEFINED); no case spells a tag, so data mode must give the
 * same ids (MPT's runs of spaces and DeepSeek-Coder's "õ" are plain-text USER_DEFINED tokens). Returns the
 * number of cases. */
static int run_vocab_cases(const struct loom_tokenizer *tok, const char *name, const char *inp_path,
                           const char *out_path, int mode)
{
    size_t ni, no;
    char *inp = read_all(inp_path, &ni), *outs = read_all(out_path, &no);
    CHECK(inp && outs, "read %s and .out", inp_path);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n_cases = 0, n_ok = 0, n_round = 0;
    char *pos = inp, *line = outs;
    static int32_t ids[4096], want[4096];
    static char text[65536];
    while (inp && outs && pos < inp + ni && *line) {
        char *end = strstr(pos, sep);
        size_t len = end ? (size_t)(end - pos) : strlen(pos);
        char *eol = strchr(line, '\n');
        if (eol)
            *eol = 0;
        int nw = 0;
        for (char *p = line; nw < 4096;) {
            char *q;
            long v = strtol(p, &q, 10);
            if (q == p)
                break;
            want[nw++] = (int32_t)v;
            p = q;
        }
        int n = loom_tokenizer_encode(tok, pos, len, mode, ids, 4096, NULL);
        int same = n == nw && memcmp(ids, want, (size_t)nw * sizeof *ids) == 0;
        CHECK(same, "%s mode %d case %d ('%.*s'): %d ids, want %d", name, mode, n_cases, (int)(len > 40 ? 40 : len),
              pos, n, nw);
        n_ok += same;
        int m = n >= 0 && n <= 4096 ? loom_tokenizer_detokenize(tok, ids, (size_t)n, text, sizeof text) : -1;
        int round = m == (int)len && memcmp(text, pos, len) == 0;
        CHECK(round, "%s case %d round trip ('%.*s')", name, n_cases, m > 0 && m < 60 ? m : 0, text);
        n_round += round;
        n_cases++;
        pos += len + (end ? strlen(sep) : 0);
        line = eol ? eol + 1 : line + strlen(line);
    }
    printf("%s mode %d: %d/%d ids equal, %d/%d round trips\n", name, mode, n_ok, n_cases, n_round, n_cases);
    free(inp);
    free(outs);
    return n_cases;
}

static void ref_dir(char *dir, size_t cap)
{
    const char *ref = getenv("LOOM_REF");
    if (ref && *ref)
        snprintf(dir, cap, "%s", ref);
    else
        snprintf(dir, cap, "%s/.cache/loom/ref", getenv("HOME") ? getenv("HOME") : ".");
}

/* Open the reference's ggml-vocab-<name>.gguf; NULL (and a skip message) when absent. */
static struct loom_tokenizer *open_ref_vocab(const char *name, uint32_t n_rows, struct loom_gguf **g, char *path,
                                             size_t cap)
{
    char dir[512];
    ref_dir(dir, sizeof dir);
    snprintf(path, cap, "%s/src/models/ggml-vocab-%s.gguf", dir, name);
    *g = NULL;
    if (access(path, R_OK) != 0) {
        printf("skip: %s not found (reference vocab tests not run)\n", path);
        return NULL;
    }
    loom_error err = {0};
    struct loom_tokenizer *tok = NULL;
    CHECK(loom_gguf_open(path, g, &err) == LOOM_OK && loom_tokenizer_load(*g, n_rows, &tok, &err) == LOOM_OK,
          "load %s: %s", path, err.msg);
    if (!tok) {
        loom_gguf_close(*g);
        *g = NULL;
    }
    return tok;
}

/* Pre-tokens of s under the vocabulary's pre-tokenizer, counted. */
static size_t count_pretokens(enum loom_pre_kind kind, const char *s)
{
    uint32_t cps[64], ends[64];
    size_t n = loom_utf8_decode_lenient(s, strlen(s), cps);
    return loom_pretokenize(kind, cps, n, ends);
}

static void test_qwen35_vocab(void)
{
    char path[600], inp[620], out[620];
    struct loom_gguf *g;
    struct loom_tokenizer *tok = open_ref_vocab("qwen35", 151936 + 64, &g, path, sizeof path);
    if (!tok)
        return;
    CHECK(tok->n_merges_skipped == 0, "every merge maps to tokens (%u skipped)", tok->n_merges_skipped);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(out, sizeof out, "%s.out", path);
    for (int mode = LOOM_SPECIAL_DATA; mode <= LOOM_SPECIAL_USER_DEFINED; mode += 2) {
        int n_cases = run_vocab_cases(tok, "qwen35", inp, out, mode);
        CHECK(n_cases == 50, "qwen35 has 50 cases, found %d", n_cases);
    }

    int32_t ids[64];
    int n = loom_tokenizer_encode(tok, "12345", 5, 0, ids, 64, NULL);
    CHECK(n == 5 && ids[0] == 16 && ids[4] == 20, "12345 splits digit by digit (n=%d)", n);
    static const char chat[] = "<|im_start|>Hello<|im_end|>";
    n = loom_tokenizer_encode(tok, chat, strlen(chat), 0, ids, 64, NULL);
    CHECK(n > 2 && !has_id(ids, n, 151644) && !has_id(ids, n, 151645), "parse_special=0: plain text (n=%d)", n);
    n = loom_tokenizer_encode(tok, chat, strlen(chat), 1, ids, 64, NULL);
    CHECK(n == 3 && ids[0] == 151644 && ids[1] == 9707 && ids[2] == 151645, "parse_special=1: %d ids", n);
    static const char user[] = "<|im_start|>Hello World<|im_end|>";
    n = loom_tokenizer_encode(tok, user, strlen(user), 0, ids, 64, NULL);
    CHECK(n > 2 && !has_id(ids, n, 151644) && !has_id(ids, n, 151645), "user text spelling controls: no control ids");
    int eog = 0;
    for (int32_t i = 0; i < 151936; i++)
        eog += loom_tokenizer_is_eog(tok, i);
    /* "</s>" (a plain token here) ends generation because llama.cpp's name list says so */
    CHECK(eog == 3 && loom_tokenizer_is_eog(tok, 151643) && loom_tokenizer_is_eog(tok, 151645) &&
              loom_tokenizer_is_eog(tok, 128247),
          "EOG set = {<|endoftext|>, <|im_end|>, </s>} (%d ids)", eog);
    const uint8_t *ok = loom_tokenizer_sampleable(tok);
    CHECK(ok[151935] == 1 && ok[151936] == 0 && ok[151936 + 63] == 0, "rows past the vocabulary not sampleable");

    /* " this is 🦙.cpp": the emoji's bytes span three tokens; stream equals one-shot */
    static const char llama[] = " this is \xF0\x9F\xA6\x99.cpp";
    n = loom_tokenizer_encode(tok, llama, strlen(llama), 0, ids, 64, NULL);
    char streamed[256];
    int delta[64] = {0};
    int len = stream(tok, ids, n, streamed, delta);
    CHECK(len == (int)strlen(llama) && memcmp(streamed, llama, (size_t)len) == 0, "stream round trip");
    CHECK(n == 7 && delta[2] == 1 && delta[3] == 0 && delta[4] == 4, "emoji held back until complete (%d %d %d)",
          delta[2], delta[3], delta[4]);
    loom_tokenizer_free(tok);
    loom_gguf_close(g);
}

/* The must-hold splits (Qwen3.5 vocabulary's pre-tokenizer, and qwen2's for contrast). */
static void test_must_hold(void)
{
    char got[256];
    pre_split(LOOM_PRE_QWEN35, "\n\nA", got);
    CHECK(strcmp(got, "\n\n|A") == 0, "\\n\\nA splits as \\n\\n + A: '%s'", got);
    pre_split(LOOM_PRE_QWEN35, "a\r\nb", got);
    CHECK(strcmp(got, "a|\r\n|b") == 0, "a\\r\\nb splits as a + \\r\\n + b: '%s'", got);
    pre_split(LOOM_PRE_QWEN35, "a  b", got);
    CHECK(strcmp(got, "a| | b") == 0, "'a  b' splits as a + ' ' + ' b': '%s'", got);
    static const char hindi[] = "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80";
    size_t n35 = count_pretokens(LOOM_PRE_QWEN35, hindi), n2 = count_pretokens(LOOM_PRE_QWEN2, hindi);
    CHECK(n35 == 1 && n2 == 4, "Hindi: %zu pre-token(s) under qwen35 (want 1), %zu under qwen2 (want 4)", n35, n2);
}

/* Every case of the reference's other vocabularies' test files. */
static void test_ref_vocabs(void)
{
    static const char *const names[] = {"qwen2", "llama-bpe", "gpt-2", "llama-spm", "phi-3", "deepseek-coder",
                                        "starcoder", "mpt", "refact"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[600], inp[620], out[620];
        struct loom_gguf *g;
        struct loom_tokenizer *tok = open_ref_vocab(names[i], 0, &g, path, sizeof path);
        if (!tok)
            continue;
        snprintf(inp, sizeof inp, "%s.inp", path);
        snprintf(out, sizeof out, "%s.out", path);
        for (int mode = LOOM_SPECIAL_DATA; mode <= LOOM_SPECIAL_USER_DEFINED; mode += 2) {
            int n_cases = run_vocab_cases(tok, names[i], inp, out, mode);
            CHECK(n_cases > 0, "%s: found %d cases", names[i], n_cases);
        }
        CHECK(tok->n_merges_skipped == 0, "%s: every merge maps to tokens (%u skipped)", names[i], tok->n_merges_skipped);
        loom_tokenizer_free(tok);
        loom_gguf_close(g);
    }
}

/* Bytes of path, or NULL (*len set). */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (f)
        fclose(f);
    *len = n > 0 ? (size_t)n : 0;
    return buf;
}

/* The compact tables: qwen35 (byte-level BPE) keeps no text table and no merged array (its merges make
 * tokens in rank order), llama-bpe (ignore_merges) keeps both; the merge table stays at most half full;
 * the metadata pages released after loading read back equal to the file, and a caller's buffer is left as
 * it was (release is a no-op there) with the same ids as from the file. */
static void test_compact_tables(void)
{
    char path[600], path3[600];
    struct loom_gguf *g, *g3;
    struct loom_tokenizer *tok = open_ref_vocab("qwen35", 0, &g, path, sizeof path);
    struct loom_tokenizer *tok3 = open_ref_vocab("llama-bpe", 0, &g3, path3, sizeof path3);
    size_t len = 0;
    unsigned char *file = tok ? read_file(path, &len) : NULL, *copy = file ? malloc(len) : NULL;
    if (!tok || !tok3 || !file || !copy)
        goto out;
    const struct loom_merges *m = &tok->merges, *m3 = &tok3->merges;
    CHECK(!tok->text_slots && !m->merged && m->merged_base == 256 && tok3->text_slots && m3->merged,
          "qwen35: no text table, implicit merges (base %d); llama-bpe: both kept", m->merged_base);
    CHECK(2 * (uint64_t)m->n <= m->mask + 1 && 2 * (uint64_t)m3->n <= m3->mask + 1, "merge tables at most half full");
    const struct loom_gguf_kv *kv = loom_gguf_find_kv(g, "tokenizer.ggml.merges");
    const uint8_t *end = kv ? kv->data : NULL;
    for (uint64_t i = 0; kv && i < kv->arr_n; i++)
        loom_text_next_str(&end);
    size_t at = kv ? (size_t)(kv->data - g->map) : 0;
    CHECK(kv && !memcmp(kv->data, file + at, (size_t)(end - kv->data)), "released merges read back from the file");
    memcpy(copy, file, len);
    struct loom_gguf *gb = NULL;
    struct loom_tokenizer *tb = NULL;
    loom_error err = {0};
    CHECK(loom_gguf_open_buffer(copy, len, &gb, &err) == LOOM_OK && loom_tokenizer_load(gb, 0, &tb, &err) == LOOM_OK,
          "load from a buffer: %s", err.msg);
    CHECK(!memcmp(copy, file, len), "loading from a caller's buffer left it unchanged");
    const char *text = "Hello world, ça va? 123 tokens\n\tend";
    int32_t a[64], b[64];
    int na = loom_tokenizer_encode(tok, text, strlen(text), 0, a, 64, &err);
    int nb = tb ? loom_tokenizer_encode(tb, text, strlen(text), 0, b, 64, &err) : -1;
    CHECK(na > 0 && na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na), "same ids from the file and the buffer");
    loom_tokenizer_free(tb);
    loom_gguf_close(gb);
out:
    free(file);
    free(copy);
    loom_tokenizer_free(tok);
    loom_tokenizer_free(tok3);
    loom_gguf_close(g);
    loom_gguf_close(g3);
}

int main(void)
{
    test_bytelevel();
    test_decode_lenient();
    test_pretokenize();
    test_tiny();
    test_bad_special_ids();
    test_tiny_spm();
    test_must_hold();
    test_qwen35_vocab();
    test_ref_vocabs();
    test_compact_tables();
    return test_finish();
}
