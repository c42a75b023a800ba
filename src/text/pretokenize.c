/* pretokenize.c — the text side of tokenization before BPE: a lenient UTF-8 decoder that treats bad bytes
 * exactly as llama.cpp does, Unicode classes of code points (utf8proc), and the hand-matched pre-tokenizer
 * patterns (qwen35, qwen2, llama3, gpt-2, starcoder, deepseek-coder) that cut a text fragment into the
 * words BPE runs on. */
#include "text/text_internal.h"

#include <utf8proc.h>

size_t loom_utf8_decode_lenient(const char *text, size_t len, uint32_t *cps)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = 0, i = 0;
    while (i < len) {
        unsigned b0 = s[i];
        uint32_t cp = 0xFFFD;
        size_t used = 1;
        if (b0 < 0x80) {
            cp = b0;
        } else if ((b0 & 0x40) == 0) {
            /* a continuation byte cannot start a sequence */
        } else if ((b0 & 0x20) == 0) {
            if (i + 1 < len && (s[i + 1] & 0xC0) == 0x80) {
                cp = ((b0 & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
                used = 2;
            }
        } else if ((b0 & 0x10) == 0) {
            if (i + 2 < len && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80) {
                cp = ((b0 & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
                used = 3;
            }
        } else if ((b0 & 0x08) == 0) {
            if (i + 3 < len && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 && (s[i + 3] & 0xC0) == 0x80) {
                uint32_t v = ((b0 & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) |
                             (s[i + 3] & 0x3Fu);
                if (v <= 0x10FFFF) {
                    cp = v;
                    used = 4;
                }
            }
        }
        cps[n++] = cp;
        i += used;
    }
    return n;
}

int loom_utf8_encode(uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The White_Space property: what \s means to the reference's pre-tokenizer. */
static int cp_is_space(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

/* ASCII punctuation (general category P): !"#%&'()*,-./:;?@[\]_{} */
static int ascii_is_punct(uint32_t c)
{
    return (c >= 0x21 && c <= 0x23) || (c >= 0x25 && c <= 0x2A) || (c >= 0x2C && c <= 0x2F) || c == 0x3A ||
           c == 0x3B || c == 0x3F || c == 0x40 || (c >= 0x5B && c <= 0x5D) || c == 0x5F || c == 0x7B || c == 0x7D;
}

unsigned loom_cp_class(uint32_t cp)
{
    if (cp > 0x10FFFF)
        return 0;
    if (cp < 0x80) { /* fast path; same answers as the tables */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return LOOM_CP_VALID | LOOM_CP_LETTER;
        if (cp >= '0' && cp <= '9')
            return LOOM_CP_VALID | LOOM_CP_NUMBER;
        if (ascii_is_punct(cp))
            return LOOM_CP_VALID | LOOM_CP_PUNCT;
        return LOOM_CP_VALID | (cp_is_space(cp) ? LOOM_CP_SPACE : 0);
    }
    if (cp_is_space(cp))
        return LOOM_CP_VALID | LOOM_CP_SPACE;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return LOOM_CP_VALID | LOOM_CP_LETTER;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        return LOOM_CP_VALID | LOOM_CP_MARK;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return LOOM_CP_VALID | LOOM_CP_NUMBER;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO:
        return LOOM_CP_VALID | LOOM_CP_PUNCT;
    case UTF8PROC_CATEGORY_CN:
        /* Unicode 15.1 (newer than utf8proc 2.8's tables) added CJK Extension I, U+2EBF0..U+2EE5D, Lo */
        return LOOM_CP_VALID | (cp >= 0x2EBF0 && cp <= 0x2EE5D ? LOOM_CP_LETTER : 0);
    default:
        return LOOM_CP_VALID;
    }
}

/* One fragment being split: cps[0, n); positions past it have class 0. */
struct splitter {
    const uint32_t *cps;
    size_t n;
    unsigned word;   /* classes a letter run takes: L, plus M for qwen35 */
    unsigned punct;  /* classes that end a punctuation run: \s, L, N, plus M for qwen35 */
    size_t max_digits; /* \p{N} (1) or \p{N}{1,3} (3) */
};

static unsigned cls_at(const struct splitter *sp, size_t i)
{
    return i < sp->n ? loom_cp_class(sp->cps[i]) : 0;
}

static uint32_t ascii_lower(uint32_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* (?:'s|'t|'re|'ve|'m|'ll|'d), case-insensitive when fold: length of the match at pos, or 0. (The
 * reference lowers with full Unicode tables, but no non-ASCII code point lowers to s, t, r, e, v, m, l, d.) */
static size_t match_contraction(const struct splitter *sp, size_t pos, int fold)
{
    if (sp->cps[pos] != '\'' || pos + 1 >= sp->n)
        return 0;
    uint32_t c1 = fold ? ascii_lower(sp->cps[pos + 1]) : sp->cps[pos + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
        return 2;
    if (pos + 2 >= sp->n)
        return 0;
    uint32_t c2 = fold ? ascii_lower(sp->cps[pos + 2]) : sp->cps[pos + 2];
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return 3;
    return 0;
}

/* \s+(?!\S) | \s+ at pos, with \s*[\r\n]+ first when newlines count: end of the match, or pos. */
static size_t match_spaces(const struct splitter *sp, size_t pos, int newlines)
{
    size_t n_space = 0, after_newline = 0;
    while (cls_at(sp, pos + n_space) & LOOM_CP_SPACE) {
        uint32_t cs = sp->cps[pos + n_space];
        n_space++;
        if (newlines && (cs == '\r' || cs == '\n'))
            after_newline = pos + n_space;
    }
    if (after_newline)
        return after_newline;
    if (n_space > 1 && pos + n_space < sp->n)
        return pos + n_space - 1;
    return pos + n_space;
}

/* qwen2 / qwen35 / llama3: end of the pre-token starting at pos (pos < n). The branches follow the
 * pattern's alternatives in order (unicode.cpp unicode_regex_split_custom_qwen2/qwen35/llama3). */
static size_t match_qwen(const struct splitter *sp, size_t pos)
{
    uint32_t c = sp->cps[pos];
    unsigned f = cls_at(sp, pos);
    size_t len = match_contraction(sp, pos, 1);
    if (len)
        return pos + len;

    /* [^\r\n\p{L}\p{N}]?\p{L}+ (qwen35: [\p{L}\p{M}]+) */
    if (c != '\r' && c != '\n' && !(f & LOOM_CP_NUMBER) && ((f & sp->word) || (cls_at(sp, pos + 1) & sp->word))) {
        size_t end = pos + 1;
        while (cls_at(sp, end) & sp->word)
            end++;
        return end;
    }
    /* \p{N} or \p{N}{1,3} */
    if (f & LOOM_CP_NUMBER) {
        size_t end = pos + 1;
        while (end - pos < sp->max_digits && (cls_at(sp, end) & LOOM_CP_NUMBER))
            end++;
        return end;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*': a class of 0 (past the fragment) never continues a run */
    unsigned f2 = c == ' ' ? cls_at(sp, pos + 1) : f;
    if (!(f2 & sp->punct) && f) {
        size_t end = pos + (c == ' ');
        for (unsigned fe = cls_at(sp, end); fe && !(fe & sp->punct); fe = cls_at(sp, end))
            end++;
        while (end < sp->n && (sp->cps[end] == '\r' || sp->cps[end] == '\n'))
            end++;
        return end;
    }
    size_t end = match_spaces(sp, pos, 1);
    return end > pos ? end : pos + 1; /* nothing matched: the code point stands alone */
}

/* gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) (case-sensitive
 * contractions; unicode.cpp unicode_regex_split_custom_gpt2). End of the pre-token at pos. */
static size_t match_gpt2(const struct splitter *sp, size_t pos)
{
    uint32_t c = sp->cps[pos];
    size_t len = match_contraction(sp, pos, 0);
    if (len)
        return pos + len;
    unsigned f2 = c == ' ' ? cls_at(sp, pos + 1) : cls_at(sp, pos);
    static const unsigned runs[] = {LOOM_CP_LETTER, LOOM_CP_NUMBER};
    for (int r = 0; r < 2; r++) {
        if (f2 & runs[r]) {
            size_t end = pos + (c == ' ');
            while (cls_at(sp, end) & runs[r])
                end++;
            return end;
        }
    }
    const unsigned stop = LOOM_CP_SPACE | LOOM_CP_LETTER | LOOM_CP_NUMBER;
    if (f2 && !(f2 & stop)) {
        size_t end = pos + (c == ' ');
        for (unsigned fe = cls_at(sp, end); fe && !(fe & stop); fe = cls_at(sp, end))
            end++;
        return end;
    }
    size_t end = match_spaces(sp, pos, 0);
    return end > pos ? end : pos + 1;
}

/* ---- single expressions matched with std::regex by the reference (unicode_regex_split_stl) ---------
 * Each returns the end of a match starting at pos, or pos when none starts there. The reference runs
 * them on a "collapsed" text where \s is ASCII white space or any non-ASCII White_Space code point. */

static size_t match_newline(const struct splitter *sp, size_t pos) /* [\r\n] */
{
    return pos + (sp->cps[pos] == '\r' || sp->cps[pos] == '\n');
}

static size_t match_digit(const struct splitter *sp, size_t pos) /* \p{N} */
{
    return pos + !!(cls_at(sp, pos) & LOOM_CP_NUMBER);
}

static size_t match_space_run(const struct splitter *sp, size_t pos, unsigned cls) /* \s?X+ */
{
    size_t end = pos;
    if ((cls_at(sp, pos) & LOOM_CP_SPACE) && (cls_at(sp, pos + 1) & cls))
        end++; /* white space is never in X, so \s? takes it only when X follows */
    while (cls_at(sp, end) & cls)
        end++;
    return end;
}

static size_t match_letters(const struct splitter *sp, size_t pos) /* \s?\p{L}+ */
{
    return match_space_run(sp, pos, LOOM_CP_LETTER);
}

static size_t match_puncts(const struct splitter *sp, size_t pos) /* \s?\p{P}+ */
{
    return match_space_run(sp, pos, LOOM_CP_PUNCT);
}

/* [U+4E00-U+9FA5 U+0800-U+4E00 U+AC00-U+D7FF]+; white space in those ranges
 * (U+1680, U+2000.., U+3000) was replaced before matching, so it never matches. */
static int cp_is_cjk_range(uint32_t c)
{
    return ((c >= 0x800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF)) && !cp_is_space(c);
}

static size_t match_cjk(const struct splitter *sp, size_t pos)
{
    size_t end = pos;
    while (end < sp->n && cp_is_cjk_range(sp->cps[end]))
        end++;
    return end;
}

typedef size_t (*matcher_fn)(const struct splitter *sp, size_t pos);

/* One expression of a pre-tokenizer: whole (every position starts a pre-token: the hand-matched patterns)
 * or a search (text between matches is a piece of its own). */
struct stage {
    matcher_fn match;
    int search;
};

struct plan {
    struct stage stages[5];
    int n_stages;
};

static struct plan plan_for(enum loom_pre_kind kind)
{
    switch (kind) {
    case LOOM_PRE_GPT2:
        return (struct plan){{{match_gpt2, 0}}, 1};
    case LOOM_PRE_STARCODER:
        return (struct plan){{{match_digit, 1}, {match_gpt2, 0}}, 2};
    case LOOM_PRE_DEEPSEEK_CODER:
        return (struct plan){
            {{match_newline, 1}, {match_letters, 1}, {match_puncts, 1}, {match_cjk, 1}, {match_digit, 1}}, 5};
    case LOOM_PRE_NONE:
        return (struct plan){{{0}}, 0};
    default:
        return (struct plan){{{match_qwen, 0}}, 1};
    }
}

struct split_out {
    uint32_t *ends;
    size_t count;
};

static void split_stage(const struct plan *pl, int k, const struct splitter *base, size_t lo, size_t hi,
                        struct split_out *out);

/* Hand the piece [lo, hi) on to the next stage, or record it when this was the last. */
static void emit_piece(const struct plan *pl, int k, const struct splitter *base, size_t lo, size_t hi,
                       struct split_out *out)
{
    if (hi <= lo)
        return;
    if (k + 1 < pl->n_stages)
        split_stage(pl, k + 1, base, lo, hi, out);
    else
        out->ends[out->count++] = (uint32_t)hi;
}

static void split_stage(const struct plan *pl, int k, const struct splitter *base, size_t lo, size_t hi,
                        struct split_out *out)
{
    struct splitter sp = *base;
    sp.cps = base->cps + lo;
    sp.n = hi - lo;
    const struct stage *st = &pl->stages[k];
    size_t gap = 0;
    for (size_t pos = 0; pos < sp.n;) {
        size_t end = st->match(&sp, pos);
        if (!st->search) {
            emit_piece(pl, k, base, lo + pos, lo + end, out);
            pos = end;
        } else if (end > pos) {
            emit_piece(pl, k, base, lo + gap, lo + pos, out);
            emit_piece(pl, k, base, lo + pos, lo + end, out);
            pos = gap = end;
        } else {
            pos++;
        }
    }
    if (st->search)
        emit_piece(pl, k, base, lo + gap, hi, out);
}

size_t loom_pretokenize(enum loom_pre_kind kind, const uint32_t *cps, size_t n, uint32_t *ends)
{
    struct plan pl = plan_for(kind);
    unsigned mark = kind == LOOM_PRE_QWEN35 ? LOOM_CP_MARK : 0;
    struct splitter sp = {
        .cps = cps, .n = n, .word = LOOM_CP_LETTER | mark,
        .punct = LOOM_CP_SPACE | LOOM_CP_LETTER | LOOM_CP_NUMBER | mark,
        .max_digits = kind == LOOM_PRE_LLAMA3 ? 3 : 1,
    };
    struct split_out out = {ends, 0};
    if (pl.n_stages == 0) {
        if (n > 0)
            ends[out.count++] = (uint32_t)n;
        return out.count;
    }
    split_stage(&pl, 0, &sp, 0, n, &out);
    return out.count;
}
