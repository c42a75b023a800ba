/* pretokenize.c — the text side of tokenization before BPE: a lenient UTF-8 decoder that treats bad bytes
 * exactly as llama.cpp does, Unicode classes of code points (utf8proc), and the hand-matched qwen2/qwen35
 * pre-tokenizer pattern that cuts a text fragment into the words BPE runs on. */
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

unsigned loom_cp_class(uint32_t cp)
{
    if (cp > 0x10FFFF)
        return 0;
    if (cp < 0x80) { /* fast path; same answers as the tables */
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return LOOM_CP_VALID | LOOM_CP_LETTER;
        if (cp >= '0' && cp <= '9')
            return LOOM_CP_VALID | LOOM_CP_NUMBER;
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
    case UTF8PROC_CATEGORY_CN:
        /* Unicode 15.1 (newer than utf8proc 2.8's tables) added CJK Extension I, U+2EBF0..U+2EE5D, Lo */
        return LOOM_CP_VALID | (cp >= 0x2EBF0 && cp <= 0x2EE5D ? LOOM_CP_LETTER : 0);
    default:
        return LOOM_CP_VALID;
    }
}

struct splitter {
    const uint32_t *cps;
    size_t n;
    unsigned word;  /* classes a letter run takes: L, plus M for qwen35 */
    unsigned punct; /* classes that end a punctuation run: \s, L, N, plus M for qwen35 */
};

static unsigned cls_at(const struct splitter *sp, size_t i)
{
    return i < sp->n ? loom_cp_class(sp->cps[i]) : 0;
}

static uint32_t ascii_lower(uint32_t c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* (?:'s|'t|'re|'ve|'m|'ll|'d), case-insensitive: length of the match at pos, or 0. */
static size_t match_contraction(const struct splitter *sp, size_t pos)
{
    if (sp->cps[pos] != '\'' || pos + 1 >= sp->n)
        return 0;
    uint32_t c1 = ascii_lower(sp->cps[pos + 1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
        return 2;
    if (pos + 2 >= sp->n)
        return 0;
    uint32_t c2 = ascii_lower(sp->cps[pos + 2]);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return 3;
    return 0;
}

/* End of the pre-token starting at pos (pos < n). The branches follow the pattern's alternatives in order. */
static size_t match_at(const struct splitter *sp, size_t pos)
{
    uint32_t c = sp->cps[pos];
    unsigned f = cls_at(sp, pos);
    size_t len = match_contraction(sp, pos);
    if (len)
        return pos + len;

    /* [^\r\n\p{L}\p{N}]?\p{L}+ (qwen35: [\p{L}\p{M}]+) */
    if (c != '\r' && c != '\n' && !(f & LOOM_CP_NUMBER) && ((f & sp->word) || (cls_at(sp, pos + 1) & sp->word))) {
        size_t end = pos + 1;
        while (cls_at(sp, end) & sp->word)
            end++;
        return end;
    }
    /* \p{N} */
    if (f & LOOM_CP_NUMBER)
        return pos + 1;
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
    /* \s*[\r\n]+ | \s+(?!\S) | \s+ */
    size_t n_space = 0, after_newline = 0;
    while (cls_at(sp, pos + n_space) & LOOM_CP_SPACE) {
        uint32_t cs = sp->cps[pos + n_space];
        n_space++;
        if (cs == '\r' || cs == '\n')
            after_newline = pos + n_space;
    }
    if (after_newline)
        return after_newline;
    if (n_space > 1 && pos + n_space < sp->n)
        return pos + n_space - 1;
    if (n_space > 0)
        return pos + n_space;
    return pos + 1; /* nothing matched: the code point stands alone */
}

size_t loom_pretokenize(enum loom_pre_kind kind, const uint32_t *cps, size_t n, uint32_t *ends)
{
    struct splitter sp = {.cps = cps, .n = n};
    unsigned mark = kind == LOOM_PRE_QWEN35 ? LOOM_CP_MARK : 0;
    sp.word = LOOM_CP_LETTER | mark;
    sp.punct = LOOM_CP_SPACE | LOOM_CP_LETTER | LOOM_CP_NUMBER | mark;
    size_t count = 0;
    for (size_t pos = 0; pos < n;) {
        pos = match_at(&sp, pos);
        ends[count++] = (uint32_t)pos;
    }
    return count;
}
