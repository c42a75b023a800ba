/* jinja_parse.c — Jinja template text to an AST: the lexer (jinja2's rules for data, {{ }}, {% %} and {# #},
 * whitespace control with '-' and '+', trim_blocks and lstrip_blocks, newline normalisation and the dropped
 * trailing newline, Python string escapes) and a recursive-descent parser with jinja2's operator precedence
 * (conditional < or < and < not < comparisons < + - < ~ < * / // % < ** < unary, filters and tests). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"
#include "text/jinja_internal.h"
#include "util/error.h"

enum tk { T_DATA, T_VBEGIN, T_VEND, T_BBEGIN, T_BEND, T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF };

struct tok {
    int t, line;
    const char *s; /* T_DATA, T_STR: processed text; T_NAME, T_OP: the spelling */
    size_t n;
    int64_t i;
    double f;
};

struct lexer {
    struct jz *z;
    const char *src;
    size_t n, pos;
    int line;
    struct tok *v;
    size_t nt, cap;
};

static void push(struct lexer *L, struct tok t)
{
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        L->v = jz_grow(L->z, L->v, L->nt, cap, sizeof *L->v);
        L->cap = cap;
    }
    L->v[L->nt++] = t;
}

static int count_nl(const char *s, size_t n)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '\n';
    return k;
}

/* Length of the run of whitespace (Python's \s) at s[0..n). */
static size_t ws_run(const char *s, size_t n)
{
    size_t i = 0, w;
    while (i < n && (w = ju_space_at(s + i, n - i)) > 0)
        i += w;
    return i;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void put_utf8(struct jz *z, struct jsb *b, unsigned long cp, int line)
{
    char u[4];
    size_t k;
    if (cp > 0x10ffff)
        jz_fail(z, LOOM_E_FORMAT, line, "string escape: code point %lx is out of range", cp);
    if (cp < 0x80) {
        u[0] = (char)cp, k = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), k = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[2] = (char)(0x80 | (cp & 0x3f));
        k = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f)), k = 4;
    }
    jsb_put(z, b, u, k, JO_LIT);
}

/* A string literal's body s[n] decoded as Python's unicode-escape does (jinja2's lexer). */
static struct jstr unescape(struct jz *z, const char *s, size_t n, int line)
{
    struct jsb b = {0};
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            jsb_put(z, &b, s + i, 1, JO_LIT);
            continue;
        }
        char c = s[++i];
        const char *simple = "\\\\''\"\"n\nt\tr\ra\ab\bf\fv\v";
        const char *hit = NULL;
        for (const char *p = simple; *p; p += 2)
            if (*p == c)
                hit = p;
        if (hit) {
            jsb_put(z, &b, hit + 1, 1, JO_LIT);
        } else if (c == '\n') {
            /* line continuation: nothing */
        } else if (c >= '0' && c <= '7') {
            unsigned long v = 0;
            size_t k = 0;
            for (; k < 3 && i + k < n && s[i + k] >= '0' && s[i + k] <= '7'; k++)
                v = v * 8 + (unsigned long)(s[i + k] - '0');
            i += k - 1;
            put_utf8(z, &b, v, line);
        } else if (c == 'x' || c == 'u' || c == 'U') {
            size_t want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            unsigned long v = 0;
            for (size_t k = 1; k <= want; k++) {
                int h = i + k < n ? hexval((unsigned char)s[i + k]) : -1;
                if (h < 0)
                    jz_fail(z, LOOM_E_FORMAT, line, "string escape: truncated \\%c escape", c);
                v = v * 16 + (unsigned long)h;
            }
            i += want;
            put_utf8(z, &b, v, line);
        } else if (c == 'N') {
            jz_fail(z, LOOM_E_FORMAT, line, "string escape \\N{...} is not supported");
        } else { /* unknown escape: kept as written */
            jsb_put(z, &b, s + i - 1, 2, JO_LIT);
        }
    }
    return jsb_done(z, &b);
}

/* The data before a tag, after '-' (strip all whitespace) or lstrip_blocks (spaces and tabs from the line start
 * up to a block or comment tag). */
static void lex_data(struct lexer *L, size_t a, size_t b, int sign, int kind, int line_starting)
{
    const char *s = L->src + a;
    size_t n = b - a;
    int line = L->line;
    if (sign == '-') {
        size_t w;
        while (n && (w = ju_space_before(s, n)) > 0)
            n -= w;
    } else if (sign != '+' && kind != T_VBEGIN) {
        size_t l = n;
        while (l && s[l - 1] != '\n')
            l--;
        if ((l > 0 || line_starting) && l < n && ws_run(s + l, n - l) == n - l)
            n = l;
    }
    if (n)
        push(L, (struct tok){.t = T_DATA, .line = line, .s = s, .n = n});
    L->line += count_nl(L->src + a, b - a);
}

static int is_name_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* Digits with single underscores between them at s[i..n): end offset. */
static size_t digits(const char *s, size_t i, size_t n)
{
    while (i < n && (is_digit(s[i]) || (s[i] == '_' && i + 1 < n && is_digit(s[i + 1]) && i > 0 && is_digit(s[i - 1]))))
        i++;
    return i;
}

static void lex_number(struct lexer *L)
{
    const char *s = L->src;
    size_t a = L->pos, i = digits(s, a, L->n), e = i;
    int is_float = 0;
    if (i + 1 < L->n && s[i] == '.' && is_digit(s[i + 1])) {
        e = digits(s, i + 1, L->n);
        is_float = 1;
    }
    if (e < L->n && (s[e] == 'e' || s[e] == 'E')) {
        size_t k = e + 1 + (e + 1 < L->n && (s[e + 1] == '+' || s[e + 1] == '-'));
        if (k < L->n && is_digit(s[k])) {
            e = digits(s, k, L->n);
            is_float = 1;
        }
    }
    char buf[80];
    size_t m = 0;
    for (size_t k = a; k < e && m + 1 < sizeof buf; k++)
        if (s[k] != '_')
            buf[m++] = s[k];
    buf[m] = '\0';
    struct tok t = {.t = is_float ? T_FLOAT : T_INT, .line = L->line, .s = s + a, .n = e - a};
    errno = 0;
    if (is_float)
        t.f = strtod(buf, NULL);
    else
        t.i = strtoll(buf, NULL, 10);
    if (errno == ERANGE && !is_float)
        jz_fail(L->z, LOOM_E_FORMAT, L->line, "integer literal %s is out of range", buf);
    push(L, t);
    L->pos = e;
}

/* Tokens of one {{ }} or {% %} tag from L->pos; returns after its end (and the whitespace it eats). */
static void lex_tag(struct lexer *L, int block, int *line_starting)
{
    const char *s = L->src;
    const char *end = block ? "%}" : "}}";
    int depth = 0;
    for (;;) {
        size_t w0 = ws_run(s + L->pos, L->n - L->pos);
        L->line += count_nl(s + L->pos, w0);
        L->pos += w0;
        if (L->pos >= L->n)
            jz_fail(L->z, LOOM_E_FORMAT, L->line, "unexpected end of template, expected '%s'", end);
        size_t p = L->pos;
        char c = s[p];
        if (depth == 0) {
            int sign = (c == '-' || (c == '+' && block)) ? c : 0;
            if (!strncmp(s + p + (sign != 0), end, 2)) {
                L->pos = p + (sign != 0) + 2;
                size_t w = 0;
                if (sign == '-')
                    w = ws_run(s + L->pos, L->n - L->pos);
                else if (block && !sign && L->pos < L->n && s[L->pos] == '\n')
                    w = 1;
                push(L, (struct tok){.t = block ? T_BEND : T_VEND, .line = L->line});
                size_t last = L->pos + w - 1;
                *line_starting = s[last] == '\n';
                L->line += count_nl(s + L->pos, w);
                L->pos += w;
                return;
            }
        }
        if (is_name_start((unsigned char)c)) {
            size_t e = p;
            while (e < L->n && (is_name_start((unsigned char)s[e]) || is_digit(s[e])))
                e++;
            push(L, (struct tok){.t = T_NAME, .line = L->line, .s = s + p, .n = e - p});
            L->pos = e;
        } else if (is_digit(c)) {
            lex_number(L);
        } else if (c == '\'' || c == '"') {
            size_t e = p + 1;
            while (e < L->n && s[e] != c)
                e += s[e] == '\\' ? 2 : 1;
            if (e >= L->n)
                jz_fail(L->z, LOOM_E_FORMAT, L->line, "unterminated string literal");
            struct jstr v = unescape(L->z, s + p + 1, e - p - 1, L->line);
            push(L, (struct tok){.t = T_STR, .line = L->line, .s = v.p, .n = v.n});
            L->line += count_nl(s + p, e - p);
            L->pos = e + 1;
        } else {
            static const char *ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                        "]", "(", ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};
            size_t k = 0, m = 0;
            for (; k < sizeof ops / sizeof *ops; k++) {
                m = strlen(ops[k]);
                if (!strncmp(s + p, ops[k], m))
                    break;
            }
            if (k == sizeof ops / sizeof *ops)
                jz_fail(L->z, LOOM_E_FORMAT, L->line, "unexpected character '%c'", c);
            depth += (c == '(' || c == '[' || c == '{') - (c == ')' || c == ']' || c == '}');
            if (depth < 0)
                jz_fail(L->z, LOOM_E_FORMAT, L->line, "unexpected '%c'", c);
            push(L, (struct tok){.t = T_OP, .line = L->line, .s = ops[k], .n = m});
            L->pos = p + m;
        }
    }
}

/* A comment from L->pos (after "{#" and its sign) to its end and the whitespace that end eats. */
static void lex_comment(struct lexer *L, int *line_starting)
{
    const char *s = L->src;
    size_t p = L->pos;
    for (; p < L->n; p++) {
        int sign = (s[p] == '-' || s[p] == '+') && p + 2 < L->n + 1 && !strncmp(s + p + 1, "#}", 2);
        if (sign || !strncmp(s + p, "#}", 2)) {
            size_t e = p + (sign ? 3 : 2), w = 0;
            if (sign && s[p] == '-')
                w = ws_run(s + e, L->n - e);
            else if (!sign && e < L->n && s[e] == '\n')
                w = 1;
            L->line += count_nl(s + L->pos, e + w - L->pos);
            *line_starting = s[e + w - 1] == '\n';
            L->pos = e + w;
            return;
        }
    }
    jz_fail(L->z, LOOM_E_FORMAT, L->line, "missing end of comment tag");
}

static void lex(struct lexer *L)
{
    int line_starting = 1;
    const char *s = L->src;
    while (L->pos < L->n) {
        size_t k = L->pos;
        while (k + 1 < L->n && !(s[k] == '{' && (s[k + 1] == '{' || s[k + 1] == '%' || s[k + 1] == '#')))
            k++;
        if (k + 1 >= L->n) {
            lex_data(L, L->pos, L->n, '+', T_DATA, 0);
            break;
        }
        int kind = s[k + 1] == '{' ? T_VBEGIN : s[k + 1] == '%' ? T_BBEGIN : T_DATA;
        int sign = k + 2 < L->n && (s[k + 2] == '-' || s[k + 2] == '+') ? s[k + 2] : 0;
        lex_data(L, L->pos, k, sign, kind, line_starting);
        L->pos = k + 2 + (sign != 0);
        if (kind == T_DATA) {
            lex_comment(L, &line_starting);
        } else {
            push(L, (struct tok){.t = kind, .line = L->line});
            lex_tag(L, kind == T_BBEGIN, &line_starting);
        }
    }
    push(L, (struct tok){.t = T_EOF, .line = L->line});
}

/* ---- parser ---- */

struct parser {
    struct jz *z;
    struct tok *v;
    size_t i;
};

static struct tok *cur(struct parser *P)
{
    return &P->v[P->i];
}

static int is_op(struct parser *P, const char *op)
{
    struct tok *t = cur(P);
    return t->t == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}

static int is_name(struct parser *P, const char *name)
{
    struct tok *t = cur(P);
    return t->t == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static int is_name_at(struct parser *P, size_t k, const char *name)
{
    struct tok *t = &P->v[P->i + k];
    return t->t == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static const char *describe(struct parser *P, char *buf, size_t cap)
{
    struct tok *t = cur(P);
    static const char *kinds[] = {"text", "'{{'", "end of print statement", "'{%'", "end of statement block",
                                  "name", "string", "integer", "float", "operator", "end of template"};
    if (t->t == T_NAME || t->t == T_OP)
        snprintf(buf, cap, "'%.*s'", (int)t->n, t->s);
    else
        snprintf(buf, cap, "%s", kinds[t->t]);
    return buf;
}

static _Noreturn void expected(struct parser *P, const char *what)
{
    char buf[80];
    jz_fail(P->z, LOOM_E_FORMAT, cur(P)->line, "expected %s, found %s", what, describe(P, buf, sizeof buf));
}

static void expect_op(struct parser *P, const char *op)
{
    char what[16];
    snprintf(what, sizeof what, "'%s'", op);
    if (!is_op(P, op))
        expected(P, what);
    P->i++;
}

static const char *take_name(struct parser *P)
{
    struct tok *t = cur(P);
    if (t->t != T_NAME)
        expected(P, "a name");
    char *s = jz_alloc(P->z, t->n + 1);
    memcpy(s, t->s, t->n);
    P->i++;
    return s;
}

static struct node *mk(struct parser *P, int kind, int line)
{
    struct node *n = jz_alloc(P->z, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

static void nl_push(struct jz *z, struct nlist *l, struct node *n, const char *kw)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        l->v = jz_grow(z, l->v, l->n, cap, sizeof *l->v);
        l->kw = jz_grow(z, l->kw, l->n, cap, sizeof *l->kw);
        l->cap = cap;
    }
    l->kw[l->n] = kw;
    l->v[l->n++] = n;
}

static struct node *p_expr(struct parser *P);
static struct node *p_or(struct parser *P);
static struct node *p_unary(struct parser *P, int with_filter);

/* ( args ): positional and name=value arguments */
static void p_call_args(struct parser *P, struct nlist *args)
{
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (args->n)
            expect_op(P, ",");
        if (is_op(P, ")"))
            break;
        const char *kw = NULL;
        if (cur(P)->t == T_NAME && P->v[P->i + 1].t == T_OP && P->v[P->i + 1].n == 1 && P->v[P->i + 1].s[0] == '=')
            kw = take_name(P), P->i++;
        if (is_op(P, "*") || is_op(P, "**"))
            jz_fail(P->z, LOOM_E_FORMAT, cur(P)->line, "*args and **kwargs in calls are not supported");
        nl_push(P->z, args, p_expr(P), kw);
    }
    P->i++;
}

static struct node *p_primary(struct parser *P)
{
    struct tok *t = cur(P);
    struct node *n;
    if (t->t == T_NAME) {
        static const char *consts[] = {"true", "false", "none", "True", "False", "None"};
        for (int k = 0; k < 6; k++)
            if (is_name(P, consts[k])) {
                P->i++;
                n = mk(P, N_LIT, t->line);
                n->lit = k % 3 == 2 ? jv_none(JO_LIT) : jv_bool(k % 3 == 0, JO_LIT);
                return n;
            }
        n = mk(P, N_NAME, t->line);
        n->name = take_name(P);
        return n;
    }
    if (t->t == T_STR) {
        struct jsb b = {0};
        while (cur(P)->t == T_STR) { /* adjacent literals concatenate */
            jsb_put(P->z, &b, cur(P)->s, cur(P)->n, JO_LIT);
            P->i++;
        }
        n = mk(P, N_LIT, t->line);
        n->lit = jv_str(jsb_done(P->z, &b));
        return n;
    }
    if (t->t == T_INT || t->t == T_FLOAT) {
        P->i++;
        n = mk(P, N_LIT, t->line);
        n->lit = t->t == T_INT ? jv_int(t->i, JO_LIT) : jv_float(t->f, JO_LIT);
        return n;
    }
    if (is_op(P, "(")) {
        P->i++;
        if (is_op(P, ")")) {
            P->i++;
            return mk(P, N_TUPLE, t->line);
        }
        struct node *e = p_expr(P);
        if (!is_op(P, ",")) {
            expect_op(P, ")");
            return e;
        }
        n = mk(P, N_TUPLE, t->line);
        nl_push(P->z, &n->args, e, NULL);
        while (is_op(P, ",")) {
            P->i++;
            if (is_op(P, ")"))
                break;
            nl_push(P->z, &n->args, p_expr(P), NULL);
        }
        expect_op(P, ")");
        return n;
    }
    if (is_op(P, "[") || is_op(P, "{")) {
        int dict = is_op(P, "{");
        P->i++;
        n = mk(P, dict ? N_DICT : N_LIST, t->line);
        while (!is_op(P, dict ? "}" : "]")) {
            if (n->args.n)
                expect_op(P, ",");
            if (is_op(P, dict ? "}" : "]"))
                break;
            nl_push(P->z, &n->args, p_expr(P), NULL);
            if (dict) {
                expect_op(P, ":");
                nl_push(P->z, &n->args, p_expr(P), NULL);
            }
        }
        P->i++;
        return n;
    }
    expected(P, "an expression");
}

/* obj[...]: an index or a slice a:b:c */
static struct node *p_subscript(struct parser *P, struct node *obj)
{
    int line = cur(P)->line;
    expect_op(P, "[");
    struct node *part[3] = {NULL, NULL, NULL};
    int k = 0, slice = 0;
    for (;;) {
        if (is_op(P, ":")) {
            if (++k > 2)
                expected(P, "']'");
            slice = 1;
            P->i++;
            continue;
        }
        if (is_op(P, "]"))
            break;
        if (part[k])
            expected(P, "']'");
        part[k] = p_expr(P);
    }
    P->i++;
    struct node *n = mk(P, slice ? N_SLICE : N_ITEM, line);
    n->a = obj;
    n->b = part[0];
    if (!slice && !part[0])
        expected(P, "a subscript");
    n->c = part[1];
    n->d = part[2];
    return n;
}

static struct node *p_postfix(struct parser *P, struct node *n)
{
    for (;;) {
        int line = cur(P)->line;
        if (is_op(P, ".")) {
            P->i++;
            struct node *a = mk(P, N_ATTR, line);
            a->a = n;
            if (cur(P)->t == T_INT) { /* x.0 is x[0] */
                a->kind = N_ITEM;
                a->b = mk(P, N_LIT, line);
                a->b->lit = jv_int(cur(P)->i, JO_LIT);
                P->i++;
            } else {
                a->name = take_name(P);
            }
            n = a;
        } else if (is_op(P, "[")) {
            n = p_subscript(P, n);
        } else if (is_op(P, "(")) {
            struct node *c = mk(P, N_CALL, line);
            c->a = n;
            p_call_args(P, &c->args);
            n = c;
        } else {
            return n;
        }
    }
}

static struct node *p_filter(struct parser *P, struct node *n)
{
    int line = cur(P)->line;
    struct node *f = mk(P, N_FILTER, line);
    f->a = n;
    f->name = take_name(P);
    while (is_op(P, ".")) { /* dotted filter names are not jinja2's builtins */
        P->i++;
        take_name(P);
        jz_fail(P->z, LOOM_E_FORMAT, line, "dotted filter names are not supported");
    }
    if (!jb_has_filter(f->name))
        jz_fail(P->z, LOOM_E_FORMAT, line, "filter '%s' is not supported", f->name);
    if (is_op(P, "("))
        p_call_args(P, &f->args);
    return f;
}

static struct node *p_test(struct parser *P, struct node *n)
{
    int line = cur(P)->line;
    P->i++; /* is */
    struct node *t = mk(P, N_TEST, line);
    t->a = n;
    if (is_name(P, "not")) {
        t->op = 1;
        P->i++;
    }
    t->name = take_name(P);
    if (!jb_has_test(t->name))
        jz_fail(P->z, LOOM_E_FORMAT, line, "test '%s' is not supported", t->name);
    struct tok *c = cur(P);
    if (is_op(P, "(")) {
        p_call_args(P, &t->args);
    } else if ((c->t == T_NAME || c->t == T_STR || c->t == T_INT || c->t == T_FLOAT || is_op(P, "[") ||
                is_op(P, "{")) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is"))
            expected(P, "a test argument");
        nl_push(P->z, &t->args, p_postfix(P, p_primary(P)), NULL);
    }
    return t;
}

static struct node *p_filter_expr(struct parser *P, struct node *n)
{
    for (;;) {
        if (is_op(P, "|")) {
            P->i++;
            n = p_filter(P, n);
        } else if (is_name(P, "is")) {
            n = p_test(P, n);
        } else if (is_op(P, "(")) {
            struct node *c = mk(P, N_CALL, cur(P)->line);
            c->a = n;
            p_call_args(P, &c->args);
            n = c;
        } else {
            return n;
        }
    }
}

static struct node *p_unary(struct parser *P, int with_filter)
{
    int line = cur(P)->line;
    struct node *n;
    if (is_op(P, "-") || is_op(P, "+")) {
        int neg = is_op(P, "-");
        P->i++;
        n = mk(P, neg ? N_NEG : N_POS, line);
        n->a = p_unary(P, 0);
    } else {
        n = p_postfix(P, p_primary(P));
    }
    return with_filter ? p_filter_expr(P, n) : n;
}

static struct node *bin(struct parser *P, int op, struct node *a, struct node *b, int line)
{
    struct node *n = mk(P, N_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static struct node *p_pow(struct parser *P)
{
    struct node *n = p_unary(P, 1);
    while (is_op(P, "**")) {
        int line = cur(P)->line;
        P->i++;
        n = bin(P, B_POW, n, p_unary(P, 1), line);
    }
    return n;
}

static struct node *p_math2(struct parser *P)
{
    struct node *n = p_pow(P);
    for (;;) {
        int line = cur(P)->line;
        int op = is_op(P, "*") ? B_MUL : is_op(P, "/") ? B_DIV : is_op(P, "//") ? B_FDIV : is_op(P, "%") ? B_MOD : -1;
        if (op < 0)
            return n;
        P->i++;
        n = bin(P, op, n, p_pow(P), line);
    }
}

static struct node *p_concat(struct parser *P)
{
    struct node *n = p_math2(P);
    while (is_op(P, "~")) {
        int line = cur(P)->line;
        P->i++;
        n = bin(P, B_CAT, n, p_math2(P), line);
    }
    return n;
}

static struct node *p_math1(struct parser *P)
{
    struct node *n = p_concat(P);
    while (is_op(P, "+") || is_op(P, "-")) {
        int line = cur(P)->line, op = is_op(P, "+") ? B_ADD : B_SUB;
        P->i++;
        n = bin(P, op, n, p_concat(P), line);
    }
    return n;
}

static struct node *p_compare(struct parser *P)
{
    struct node *n = p_math1(P);
    for (;;) {
        int line = cur(P)->line, op;
        if (is_op(P, "=="))
            op = B_EQ;
        else if (is_op(P, "!="))
            op = B_NE;
        else if (is_op(P, "<"))
            op = B_LT;
        else if (is_op(P, "<="))
            op = B_LE;
        else if (is_op(P, ">"))
            op = B_GT;
        else if (is_op(P, ">="))
            op = B_GE;
        else if (is_name(P, "in"))
            op = B_IN;
        else if (is_name(P, "not") && is_name_at(P, 1, "in"))
            op = B_NOTIN, P->i++;
        else
            return n;
        P->i++;
        /* a chain a < b < c is (a < b) and (b < c) in jinja2; loom evaluates it left to right as Python would
         * for two operands only */
        n = bin(P, op, n, p_math1(P), line);
    }
}

static struct node *p_not(struct parser *P)
{
    if (is_name(P, "not")) {
        struct node *n = mk(P, N_NOT, cur(P)->line);
        P->i++;
        n->a = p_not(P);
        return n;
    }
    return p_compare(P);
}

/* operand (KEYWORD operand)*, grouped to the left as nodes of the given kind (N_AND, N_OR) */
static struct node *p_logic(struct parser *P, const char *keyword, int kind, struct node *(*operand)(struct parser *))
{
    struct node *n = operand(P);
    while (is_name(P, keyword)) {
        struct node *a = mk(P, kind, cur(P)->line);
        P->i++;
        a->a = n;
        a->b = operand(P);
        n = a;
    }
    return n;
}

static struct node *p_and(struct parser *P)
{
    return p_logic(P, "and", N_AND, p_not);
}

static struct node *p_or(struct parser *P)
{
    return p_logic(P, "or", N_OR, p_and);
}

/* or-expression [if or-expression [else conditional]] */
static struct node *p_expr(struct parser *P)
{
    struct node *n = p_or(P);
    while (is_name(P, "if")) {
        struct node *c = mk(P, N_COND, cur(P)->line);
        P->i++;
        c->a = n;
        c->b = p_or(P);
        if (is_name(P, "else")) {
            P->i++;
            c->c = p_expr(P);
        }
        n = c;
    }
    return n;
}

/* expr or expr, expr, ... (a tuple); with_cond 0: no conditional expressions (a for loop's iterable). */
static struct node *p_tuple(struct parser *P, int with_cond)
{
    int line = cur(P)->line;
    struct node *e = with_cond ? p_expr(P) : p_or(P);
    if (!is_op(P, ","))
        return e;
    struct node *t = mk(P, N_TUPLE, line);
    nl_push(P->z, &t->args, e, NULL);
    while (is_op(P, ",")) {
        P->i++;
        if (cur(P)->t == T_BEND || cur(P)->t == T_VEND || is_op(P, "=") || is_name(P, "in") || is_name(P, "if"))
            break;
        nl_push(P->z, &t->args, with_cond ? p_expr(P) : p_or(P), NULL);
    }
    return t;
}

/* An assignment target: name, name.attr (set only), or names separated by commas, maybe in parentheses. */
static struct node *p_target(struct parser *P, int allow_attr)
{
    int line = cur(P)->line, paren = is_op(P, "(");
    if (paren)
        P->i++;
    struct node *t = mk(P, N_NAME, line);
    t->name = take_name(P);
    if (allow_attr && is_op(P, ".")) {
        P->i++;
        struct node *a = mk(P, N_ATTR, line);
        a->a = t;
        a->name = take_name(P);
        return a;
    }
    if (is_op(P, ",")) {
        struct node *tu = mk(P, N_TUPLE, line);
        nl_push(P->z, &tu->args, t, NULL);
        while (is_op(P, ",")) {
            P->i++;
            if (cur(P)->t != T_NAME || is_name(P, "in"))
                break;
            struct node *x = mk(P, N_NAME, cur(P)->line);
            x->name = take_name(P);
            nl_push(P->z, &tu->args, x, NULL);
        }
        t = tu;
    }
    if (paren)
        expect_op(P, ")");
    return t;
}

static void expect_bend(struct parser *P)
{
    if (cur(P)->t != T_BEND)
        expected(P, "end of statement block");
    P->i++;
}

/* Statements up to a {% name %} in ends (left unconsumed: P->i at its name) or the end of the template. */
static void p_body(struct parser *P, struct nlist *body, const char *const *ends, const char *inside);

static struct node *p_if(struct parser *P, int line)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    struct node *n = mk(P, S_IF, line);
    n->a = p_tuple(P, 1);
    expect_bend(P);
    p_body(P, &n->body, ends, "if");
    if (is_name(P, "elif")) {
        int l = cur(P)->line;
        P->i++;
        nl_push(P->z, &n->orelse, p_if(P, l), NULL);
        return n;
    }
    if (is_name(P, "else")) {
        static const char *const endif[] = {"endif", NULL};
        P->i++;
        expect_bend(P);
        p_body(P, &n->orelse, endif, "if");
    }
    P->i++; /* endif */
    expect_bend(P);
    return n;
}

static struct node *p_for(struct parser *P, int line)
{
    static const char *const ends[] = {"endfor", "else", NULL}, *const endfor[] = {"endfor", NULL};
    struct node *n = mk(P, S_FOR, line);
    n->a = p_target(P, 0);
    if (!is_name(P, "in"))
        expected(P, "'in'");
    P->i++;
    n->b = p_tuple(P, 0);
    if (is_name(P, "if")) {
        P->i++;
        n->c = p_expr(P);
    }
    if (is_name(P, "recursive"))
        jz_fail(P->z, LOOM_E_FORMAT, line, "recursive for loops are not supported");
    expect_bend(P);
    p_body(P, &n->body, ends, "for");
    if (is_name(P, "else")) {
        P->i++;
        expect_bend(P);
        p_body(P, &n->orelse, endfor, "for");
    }
    P->i++;
    expect_bend(P);
    return n;
}

static struct node *p_set(struct parser *P, int line)
{
    struct node *n = mk(P, S_SET, line);
    n->a = p_target(P, 1);
    if (is_op(P, "=")) {
        P->i++;
        n->b = p_tuple(P, 1);
        expect_bend(P);
        return n;
    }
    static const char *const ends[] = {"endset", NULL};
    if (n->a->kind != N_NAME)
        expected(P, "'='");
    n->kind = S_SETBLOCK;
    if (is_op(P, "|"))
        jz_fail(P->z, LOOM_E_FORMAT, line, "filtered block assignments are not supported");
    expect_bend(P);
    p_body(P, &n->body, ends, "set");
    P->i++;
    expect_bend(P);
    return n;
}

static struct node *p_macro(struct parser *P, int line)
{
    static const char *const ends[] = {"endmacro", NULL};
    struct node *n = mk(P, S_MACRO, line);
    n->name = take_name(P);
    expect_op(P, "(");
    while (!is_op(P, ")")) { /* parameters: args names, defaults in orelse-free form: name[=default] */
        if (n->args.n)
            expect_op(P, ",");
        const char *pname = take_name(P);
        struct node *def = NULL;
        if (is_op(P, "=")) {
            P->i++;
            def = p_expr(P);
        }
        nl_push(P->z, &n->args, def, pname);
    }
    P->i++;
    expect_bend(P);
    p_body(P, &n->body, ends, "macro");
    P->i++;
    if (cur(P)->t == T_NAME)
        P->i++; /* {% endmacro name %} */
    expect_bend(P);
    return n;
}

static struct node *p_statement(struct parser *P)
{
    int line = cur(P)->line;
    P->i++; /* {% */
    struct tok *t = cur(P);
    if (t->t != T_NAME)
        expected(P, "a tag name");
    if (is_name(P, "if") || is_name(P, "for") || is_name(P, "set") || is_name(P, "macro")) {
        char k = t->s[0];
        P->i++;
        return k == 'i' ? p_if(P, line) : k == 'f' ? p_for(P, line) : k == 's' ? p_set(P, line) : p_macro(P, line);
    }
    if (is_name(P, "break") || is_name(P, "continue")) {
        struct node *n = mk(P, is_name(P, "break") ? S_BREAK : S_CONTINUE, line);
        P->i++;
        expect_bend(P);
        return n;
    }
    jz_fail(P->z, LOOM_E_FORMAT, line, "tag '%.*s' is not supported", (int)t->n, t->s);
}

static void p_body(struct parser *P, struct nlist *body, const char *const *ends, const char *inside)
{
    for (;;) {
        struct tok *t = cur(P);
        if (t->t == T_EOF) {
            if (ends)
                jz_fail(P->z, LOOM_E_FORMAT, t->line, "unexpected end of template: '%s' block not closed",
                        inside);
            return;
        }
        if (t->t == T_DATA) {
            struct node *n = mk(P, S_TEXT, t->line);
            n->text = jstr_make(P->z, t->s, t->n, JO_LIT);
            nl_push(P->z, body, n, NULL);
            P->i++;
        } else if (t->t == T_VBEGIN) {
            struct node *n = mk(P, S_OUT, t->line);
            P->i++;
            n->a = p_tuple(P, 1);
            if (cur(P)->t != T_VEND)
                expected(P, "end of print statement");
            P->i++;
            nl_push(P->z, body, n, NULL);
        } else {
            struct tok *name = &P->v[P->i + 1];
            for (int k = 0; ends && ends[k]; k++)
                if (name->t == T_NAME && name->n == strlen(ends[k]) && !memcmp(name->s, ends[k], name->n)) {
                    P->i++;
                    return;
                }
            static const char *const closers[] = {"endif", "endfor", "endset", "endmacro", "elif", "else", NULL};
            for (int k = 0; name->t == T_NAME && closers[k]; k++)
                if (name->n == strlen(closers[k]) && !memcmp(name->s, closers[k], name->n))
                    jz_fail(P->z, LOOM_E_FORMAT, name->line, "unexpected tag '%s'%s%s", closers[k],
                            inside ? " inside " : "", inside ? inside : "");
            nl_push(P->z, body, p_statement(P), NULL);
        }
    }
}

/* The source with every newline (\r\n, \r) as \n and one trailing newline dropped (jinja2's
 * keep_trailing_newline = False). */
static char *normalize(struct jz *z, const char *src, size_t len, size_t *n)
{
    char *s = jz_alloc(z, len + 1);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            i += i + 1 < len && src[i + 1] == '\n';
        } else {
            s[k++] = src[i];
        }
    }
    if (k && s[k - 1] == '\n')
        k--;
    s[k] = '\0';
    *n = k;
    return s;
}

int loom_jinja_parse(const char *src, size_t len, struct loom_jinja **out, loom_error *err)
{
    struct loom_jinja *t = calloc(1, sizeof *t);
    if (!t)
        return loom_errorf(err, LOOM_E_NOMEM, "jinja: cannot allocate a template");
    jmp_buf jb;
    t->z.fail = &jb;
    t->z.err = err;
    if (setjmp(jb)) {
        int code = t->z.code;
        jz_free_all(&t->z);
        free(t);
        return code;
    }
    struct lexer L = {.z = &t->z, .line = 1};
    L.src = normalize(&t->z, src, len, &L.n);
    lex(&L);
    struct parser P = {.z = &t->z, .v = L.v};
    p_body(&P, &t->body, NULL, NULL);
    t->z.fail = NULL;
    *out = t;
    return LOOM_OK;
}

void loom_jinja_free(struct loom_jinja *t)
{
    if (!t)
        return;
    jz_free_all(&t->z);
    free(t);
}
