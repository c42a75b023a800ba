/* detok.c — the streaming detokenizer: token pieces go through a strict UTF-8 decoder so that output only
 * ever holds whole characters; an incomplete tail waits for the next token, and bytes that cannot belong
 * to a valid character come out as U+FFFD (one per maximal invalid subpart, as Unicode recommends). */
#include "text/text_internal.h"

#include <string.h>

static const unsigned char k_replacement[3] = {0xEF, 0xBF, 0xBD};

struct sink {
    char *out;
    size_t cap, n;
    int full;
};

static void sink_put(struct sink *s, const unsigned char *b, size_t k)
{
    if (s->n + k > s->cap) {
        s->full = 1;
        return;
    }
    memcpy(s->out + s->n, b, k);
    s->n += k;
}

/* Total length of the sequence a lead byte starts, or 0 if it cannot start one. */
static int utf8_seq_len(unsigned char b)
{
    if (b < 0x80)
        return 1;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF)
        return 3;
    if (b >= 0xF0 && b <= 0xF4)
        return 4;
    return 0;
}

/* Whether b may follow the valid prefix p[n] (n >= 1): the second byte's range depends on the lead,
 * which rules out overlong forms, surrogates and code points past U+10FFFF. */
static int utf8_continues(const unsigned char *p, int n, unsigned char b)
{
    unsigned lo = 0x80, hi = 0xBF;
    if (n == 1) {
        switch (p[0]) {
        case 0xE0: lo = 0xA0; break;
        case 0xED: hi = 0x9F; break;
        case 0xF0: lo = 0x90; break;
        case 0xF4: hi = 0x8F; break;
        default: break;
        }
    }
    return b >= lo && b <= hi;
}

static void feed_byte(struct loom_detok *d, unsigned char b, struct sink *s)
{
    if (d->n_pending > 0) {
        if (utf8_continues(d->pending, d->n_pending, b)) {
            d->pending[d->n_pending++] = b;
            if (d->n_pending == utf8_seq_len(d->pending[0])) {
                sink_put(s, d->pending, (size_t)d->n_pending);
                d->n_pending = 0;
            }
            return;
        }
        sink_put(s, k_replacement, 3); /* the prefix so far is a maximal invalid subpart */
        d->n_pending = 0;
    }
    int len = utf8_seq_len(b);
    if (len == 1)
        sink_put(s, &b, 1);
    else if (len == 0)
        sink_put(s, k_replacement, 3);
    else
        d->pending[d->n_pending++] = b;
}

struct feed {
    struct loom_detok *d;
    struct sink s;
};

static void feed_put(void *ctx, unsigned char b)
{
    struct feed *f = ctx;
    feed_byte(f->d, b, &f->s);
}

void loom_detok_init(struct loom_detok *d, const struct loom_tokenizer *tok)
{
    memset(d, 0, sizeof *d);
    d->tok = tok;
}

int loom_detok_push(struct loom_detok *d, int32_t id, char *out, int cap)
{
    const struct loom_tokenizer *tok = d->tok;
    if (id < 0 || (uint32_t)id >= tok->n_vocab || cap < 0)
        return LOOM_E_ARG;
    struct loom_detok saved = *d;
    struct feed ctx = {d, {out, (size_t)cap, 0, 0}};
    loom_tokenizer_piece_bytes(tok, id, feed_put, &ctx);
    struct sink s = ctx.s;
    if (s.full) {
        *d = saved; /* nothing consumed: the caller may retry with more room */
        return LOOM_E_RANGE;
    }
    return (int)s.n;
}

int loom_detok_flush(struct loom_detok *d, char *out, int cap)
{
    if (d->n_pending == 0)
        return 0;
    if (cap < 3)
        return LOOM_E_RANGE;
    memcpy(out, k_replacement, 3);
    d->n_pending = 0;
    return 3;
}
