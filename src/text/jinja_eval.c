/* jinja_eval.c — the Jinja evaluator: expressions (Python semantics for operators, truthiness, and/or returning an
 * operand, slicing, undefined values as jinja2's default Undefined), statements (if, for with loop.* and else,
 * set with namespace attributes, macros, break/continue) with jinja2's scoping (each loop iteration and macro call
 * gets its own scope; if does not), global functions (raise_exception, strftime_now, namespace, range, dict), and
 * loom_jinja_render: the output's per-byte origins become DATA/CONTROL segments. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja.h"
#include "text/jinja_internal.h"
#include "util/array.h"
#include "util/error.h"

#define MAX_DEPTH 64 /* nested macro calls */

enum { ST_OK, ST_BREAK, ST_CONTINUE };
enum { F_RAISE = 1, F_STRFTIME, F_NAMESPACE, F_RANGE, F_DICT };

static const struct {
    const char *name;
    int id;
} k_globals[] = {{"raise_exception", F_RAISE}, {"strftime_now", F_STRFTIME}, {"namespace", F_NAMESPACE},
                 {"range", F_RANGE}, {"dict", F_DICT}};

static int exec_body(struct jctx *c, struct jscope *s, const struct nlist *body, struct jsb *out);

static const char *fmt(struct jz *z, const char *f, const char *a)
{
    size_t n = strlen(f) + strlen(a) + 1;
    char *s = jz_alloc(z, n);
    snprintf(s, n, f, a);
    return s;
}

static struct jscope *scope_new(struct jctx *c, struct jscope *parent)
{
    struct jscope *s = jz_alloc(&c->z, sizeof *s);
    s->parent = parent;
    return s;
}

static struct jval lookup(struct jctx *c, struct jscope *s, const char *name)
{
    for (; s; s = s->parent) {
        struct jval *v = jd_getc(&s->vars, name);
        if (v)
            return *v;
    }
    for (size_t i = 0; i < sizeof k_globals / sizeof *k_globals; i++)
        if (!strcmp(name, k_globals[i].name))
            return (struct jval){.t = JT_FUNC, .lit = JO_LIT, .u.i = k_globals[i].id};
    return jv_undef(fmt(&c->z, "'%s' is undefined", name));
}

_Noreturn static void undefined_error(struct jctx *c, struct jval v, int line)
{
    jz_fail(&c->z, LOOM_E_FORMAT, line, "%s", v.u.why ? v.u.why : "undefined value");
}

/* ---- operators ---- */

static int is_num(struct jval v)
{
    return v.t == JT_BOOL || v.t == JT_INT || v.t == JT_FLOAT;
}

static double as_f(struct jval v)
{
    return v.t == JT_FLOAT ? v.u.f : (double)v.u.i;
}

_Noreturn static void bad_operands(struct jctx *c, const char *op, struct jval a, struct jval b, int line)
{
    jz_fail(&c->z, LOOM_E_FORMAT, line, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_typename(a),
            jv_typename(b));
}

static struct jval concat_lists(struct jctx *c, struct jval a, struct jval b)
{
    struct jval r = jv_list(&c->z, a.lit & b.lit);
    r.tuple = a.tuple;
    for (size_t i = 0; i < a.u.l->n; i++)
        jl_push(&c->z, r.u.l, a.u.l->v[i]);
    for (size_t i = 0; i < b.u.l->n; i++)
        jl_push(&c->z, r.u.l, b.u.l->v[i]);
    return r;
}

static struct jval repeat(struct jctx *c, struct jval a, int64_t k)
{
    if (a.t == JT_STR) {
        struct jsb b = {0};
        for (int64_t i = 0; i < k; i++)
            jsb_str(&c->z, &b, a.u.s);
        return jv_str(jsb_done(&c->z, &b));
    }
    struct jval r = jv_list(&c->z, a.lit);
    r.tuple = a.tuple;
    for (int64_t i = 0; i < k; i++)
        for (size_t j = 0; j < a.u.l->n; j++)
            jl_push(&c->z, r.u.l, a.u.l->v[j]);
    return r;
}

/* One operand of str + str appended to s: as it is, or HTML-escaped as markupsafe.escape does (& < > " ' become
 * &amp; &lt; &gt; &#34; &#39;, each entity with the escaped byte's origin) when the sum is Markup and it is not. */
static void add_markup_operand(struct jctx *c, struct jsb *s, struct jval v, int markup)
{
    if (!markup || v.markup) {
        jsb_str(&c->z, s, v.u.s);
        return;
    }
    for (size_t i = 0; i < v.u.s.n; i++) {
        char ch = v.u.s.p[i];
        const char *e = ch == '&' ? "&amp;" : ch == '<' ? "&lt;" : ch == '>' ? "&gt;" : ch == '"' ? "&#34;"
                      : ch == '\'' ? "&#39;" : NULL;
        if (e)
            jsb_puts(&c->z, s, e, v.u.s.o[i]);
        else
            jsb_put(&c->z, s, v.u.s.p + i, 1, v.u.s.o[i]);
    }
}

static struct jval arith(struct jctx *c, int op, struct jval a, struct jval b, int line)
{
    static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (a.t == JT_UNDEF)
        undefined_error(c, a, line);
    if (b.t == JT_UNDEF)
        undefined_error(c, b, line);
    int lit = a.lit & b.lit;
    if (op == B_ADD && a.t == JT_STR && b.t == JT_STR) {
        struct jsb s = {0};
        add_markup_operand(c, &s, a, a.markup || b.markup);
        add_markup_operand(c, &s, b, a.markup || b.markup);
        struct jval r = jv_str(jsb_done(&c->z, &s));
        r.markup = a.markup || b.markup;
        return r;
    }
    if (op == B_ADD && a.t == JT_LIST && b.t == JT_LIST && a.tuple == b.tuple)
        return concat_lists(c, a, b);
    if (op == B_ADD && a.t == JT_STR)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "can only concatenate str (not \"%s\") to str", jv_typename(b));
    if (op == B_MUL && (a.t == JT_STR || a.t == JT_LIST) && (b.t == JT_INT || b.t == JT_BOOL))
        return repeat(c, a, b.u.i);
    if (op == B_MUL && (b.t == JT_STR || b.t == JT_LIST) && (a.t == JT_INT || a.t == JT_BOOL))
        return repeat(c, b, a.u.i);
    if (op == B_MOD && a.t == JT_STR)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "string formatting with %% is not supported");
    if (!is_num(a) || !is_num(b))
        bad_operands(c, names[op], a, b, line);
    int ints = a.t != JT_FLOAT && b.t != JT_FLOAT;
    int64_t x = a.u.i, y = b.u.i, r;
    double fx = as_f(a), fy = as_f(b);
    if ((op == B_DIV || op == B_FDIV || op == B_MOD) && (ints ? y == 0 : fy == 0))
        jz_fail(&c->z, LOOM_E_FORMAT, line, "%s", op == B_DIV ? "division by zero"
                                                   : ints    ? "integer division or modulo by zero"
                                                             : "float division or modulo by zero");
    switch (op) {
    case B_ADD:
        if (ints && !__builtin_add_overflow(x, y, &r))
            return jv_int(r, lit);
        return jv_float(fx + fy, lit);
    case B_SUB:
        if (ints && !__builtin_sub_overflow(x, y, &r))
            return jv_int(r, lit);
        return jv_float(fx - fy, lit);
    case B_MUL:
        if (ints && !__builtin_mul_overflow(x, y, &r))
            return jv_int(r, lit);
        return jv_float(fx * fy, lit);
    case B_DIV:
        return jv_float(fx / fy, lit);
    case B_FDIV:
        if (ints)
            return jv_int(x / y - ((x % y != 0) && ((x < 0) != (y < 0))), lit);
        return jv_float(floor(fx / fy), lit);
    case B_MOD:
        if (ints) {
            int64_t m = x % y;
            return jv_int(m && ((m < 0) != (y < 0)) ? m + y : m, lit);
        } else {
            double m = fmod(fx, fy);
            return jv_float(m && ((m < 0) != (fy < 0)) ? m + fy : m, lit);
        }
    default: /* B_POW */
        if (ints && y >= 0) {
            int64_t p = 1;
            for (int64_t i = 0; i < y; i++)
                if (__builtin_mul_overflow(p, x, &p))
                    return jv_float(pow(fx, fy), lit);
            return jv_int(p, lit);
        }
        return jv_float(pow(fx, fy), lit);
    }
}

static int compare(struct jctx *c, int op, struct jval a, struct jval b, int line);

/* <0, 0, >0 for ordered operands (numbers, strings, lists); else a TypeError naming op. */
static int order(struct jctx *c, const char *op, struct jval a, struct jval b, int line)
{
    if (a.t == JT_UNDEF)
        undefined_error(c, a, line);
    if (b.t == JT_UNDEF)
        undefined_error(c, b, line);
    if (is_num(a) && is_num(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT)
            return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        return (as_f(a) > as_f(b)) - (as_f(a) < as_f(b));
    }
    if (a.t == JT_STR && b.t == JT_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int k = memcmp(a.u.s.p, b.u.s.p, n);
        return k ? k : (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
    }
    if (a.t == JT_LIST && b.t == JT_LIST && a.tuple == b.tuple) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++)
            if (!jv_eq(a.u.l->v[i], b.u.l->v[i]))
                return order(c, op, a.u.l->v[i], b.u.l->v[i], line);
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    jz_fail(&c->z, LOOM_E_FORMAT, line, "'%s' not supported between instances of '%s' and '%s'", op,
            jv_typename(a), jv_typename(b));
}

static int contains(struct jctx *c, struct jval hay, struct jval x, int line)
{
    switch (hay.t) {
    case JT_STR:
        if (x.t != JT_STR)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "'in <string>' requires string as left operand, not %s",
                    jv_typename(x));
        if (!x.u.s.n)
            return 1;
        for (size_t i = 0; i + x.u.s.n <= hay.u.s.n; i++)
            if (!memcmp(hay.u.s.p + i, x.u.s.p, x.u.s.n))
                return 1;
        return 0;
    case JT_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (jv_eq(hay.u.l->v[i], x))
                return 1;
        return 0;
    case JT_DICT:
    case JT_NS:
        return jd_get(hay.u.d, x) != NULL;
    case JT_UNDEF:
        return 0;
    default:
        jz_fail(&c->z, LOOM_E_FORMAT, line, "argument of type '%s' is not iterable", jv_typename(hay));
    }
}

static int compare(struct jctx *c, int op, struct jval a, struct jval b, int line)
{
    switch (op) {
    case B_EQ:
        return jv_eq(a, b);
    case B_NE:
        return !jv_eq(a, b);
    case B_LT:
        return order(c, "<", a, b, line) < 0;
    case B_LE:
        return order(c, "<=", a, b, line) <= 0;
    case B_GT:
        return order(c, ">", a, b, line) > 0;
    case B_GE:
        return order(c, ">=", a, b, line) >= 0;
    case B_IN:
        return contains(c, b, a, line);
    default:
        return !contains(c, b, a, line);
    }
}

/* Python's slice indices for a sequence of n items: start, stop, step (step != 0) -> the picked indices. */
static size_t slice_pick(int64_t n, const struct jval *lo, const struct jval *hi, int64_t step, int64_t *idx)
{
    int64_t a, b;
    if (step > 0) {
        a = lo ? lo->u.i : 0;
        b = hi ? hi->u.i : n;
        a = a < 0 ? (a + n < 0 ? 0 : a + n) : a > n ? n : a;
        b = b < 0 ? (b + n < 0 ? 0 : b + n) : b > n ? n : b;
    } else {
        a = lo ? lo->u.i : n - 1;
        b = hi ? hi->u.i : -1 - n;
        a = a < 0 ? (a + n < 0 ? -1 : a + n) : a >= n ? n - 1 : a;
        b = b < 0 ? (b + n < 0 ? -1 : b + n) : b >= n ? n - 1 : b;
    }
    size_t k = 0;
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
        idx[k++] = i;
    return k;
}

static struct jval eval_slice(struct jctx *c, struct jscope *s, const struct node *n)
{
    struct jval obj = jx_eval(c, s, n->a), parts[3];
    const struct node *pn[3] = {n->b, n->c, n->d};
    for (int k = 0; k < 3; k++) {
        parts[k] = pn[k] ? jx_eval(c, s, pn[k]) : jv_none(JO_LIT);
        if (parts[k].t != JT_NONE && parts[k].t != JT_INT && parts[k].t != JT_BOOL)
            jz_fail(&c->z, LOOM_E_FORMAT, n->line, "slice indices must be integers or None, not %s",
                    jv_typename(parts[k]));
    }
    int64_t step = parts[2].t == JT_NONE ? 1 : parts[2].u.i;
    if (step == 0)
        jz_fail(&c->z, LOOM_E_FORMAT, n->line, "slice step cannot be zero");
    if (obj.t == JT_UNDEF)
        undefined_error(c, obj, n->line);
    if (obj.t != JT_STR && obj.t != JT_LIST)
        jz_fail(&c->z, LOOM_E_FORMAT, n->line, "'%s' object is not subscriptable", jv_typename(obj));
    int64_t len = obj.t == JT_STR ? (int64_t)ju_len(obj.u.s.p, obj.u.s.n) : (int64_t)obj.u.l->n;
    int64_t *idx = jz_alloc(&c->z, (size_t)(len + 1) * sizeof *idx);
    size_t k = slice_pick(len, parts[0].t == JT_NONE ? NULL : &parts[0], parts[1].t == JT_NONE ? NULL : &parts[1],
                          step, idx);
    if (obj.t == JT_LIST) {
        struct jval r = jv_list(&c->z, obj.lit);
        r.tuple = obj.tuple;
        for (size_t i = 0; i < k; i++)
            jl_push(&c->z, r.u.l, obj.u.l->v[idx[i]]);
        return r;
    }
    struct jsb b = {0};
    struct jstr str = obj.u.s;
    size_t *off = jz_alloc(&c->z, (size_t)(len + 1) * sizeof *off);
    for (int64_t i = 0, o = 0; i <= len; i++) { /* byte offset of each code point */
        off[i] = (size_t)o;
        if (i < len)
            for (o++; (size_t)o < str.n && ((unsigned char)str.p[o] & 0xc0) == 0x80; o++)
                ;
    }
    for (size_t i = 0; i < k; i++)
        jsb_str(&c->z, &b, (struct jstr){str.p + off[idx[i]], str.o + off[idx[i]], off[idx[i] + 1] - off[idx[i]]});
    return jv_str(jsb_done(&c->z, &b));
}

/* ---- calls ---- */

struct args {
    struct jval *pos, *kwv;
    const char **kw;
    size_t npos, nkw;
};

static struct args eval_args(struct jctx *c, struct jscope *s, const struct nlist *l)
{
    struct args a = {0};
    a.pos = jz_alloc(&c->z, (l->n + 1) * sizeof *a.pos);
    a.kwv = jz_alloc(&c->z, (l->n + 1) * sizeof *a.kwv);
    a.kw = jz_alloc(&c->z, (l->n + 1) * sizeof *a.kw);
    for (size_t i = 0; i < l->n; i++) {
        struct jval v = jx_eval(c, s, l->v[i]);
        if (l->kw[i]) {
            a.kw[a.nkw] = l->kw[i];
            a.kwv[a.nkw++] = v;
        } else {
            a.pos[a.npos++] = v;
        }
    }
    return a;
}

static struct jval call_macro(struct jctx *c, const struct node *m, struct jval *pos, size_t npos, const char **kw,
                              struct jval *kwv, size_t nkw, int line)
{
    if (c->depth >= MAX_DEPTH)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "macro '%s': more than %d nested calls", m->name, MAX_DEPTH);
    if (npos > m->args.n)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "macro '%s' takes not more than %zu argument(s)", m->name, m->args.n);
    struct jscope *s = scope_new(c, c->root);
    int *set = jz_alloc(&c->z, (m->args.n + 1) * sizeof *set);
    for (size_t i = 0; i < npos; i++) {
        jd_setc(&c->z, &s->vars, m->args.kw[i], pos[i]);
        set[i] = 1;
    }
    for (size_t k = 0; k < nkw; k++) {
        size_t i = 0;
        while (i < m->args.n && strcmp(m->args.kw[i], kw[k]))
            i++;
        if (i == m->args.n)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "macro '%s' takes no keyword argument '%s'", m->name, kw[k]);
        if (set[i])
            jz_fail(&c->z, LOOM_E_FORMAT, line, "macro '%s' got multiple values for argument '%s'", m->name, kw[k]);
        jd_setc(&c->z, &s->vars, kw[k], kwv[k]);
        set[i] = 1;
    }
    for (size_t i = 0; i < m->args.n; i++)
        if (!set[i])
            jd_setc(&c->z, &s->vars, m->args.kw[i],
                    m->args.v[i] ? jx_eval(c, s, m->args.v[i])
                                 : jv_undef(fmt(&c->z, "parameter '%s' was not provided", m->args.kw[i])));
    struct jsb out = {0};
    c->depth++;
    exec_body(c, s, &m->body, &out);
    c->depth--;
    return jv_str(jsb_done(&c->z, &out));
}

static const char *str_arg(struct jctx *c, struct jval v, const char *what, int line)
{
    if (v.t != JT_STR)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "%s: expected a string, found %s", what, jv_typename(v));
    return v.u.s.p;
}

static struct jval call_global(struct jctx *c, int id, struct jval *pos, size_t npos, const char **kw,
                               struct jval *kwv, size_t nkw, int line)
{
    if (id == F_RAISE) {
        const char *msg = npos ? str_arg(c, pos[0], "raise_exception", line) : "";
        jz_fail(&c->z, LOOM_E_ARG, line, "%s", msg);
    }
    if (id == F_STRFTIME) {
        const char *f = npos == 1 ? str_arg(c, pos[0], "strftime_now", line) : NULL;
        if (!f)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "strftime_now: expected one format argument");
        time_t t = c->now >= 0 ? (time_t)c->now : time(NULL);
        struct tm tm;
        char buf[256];
        if (!localtime_r(&t, &tm))
            jz_fail(&c->z, LOOM_E_FORMAT, line, "strftime_now: the time is out of range");
        size_t k = strftime(buf, sizeof buf, f, &tm);
        return jv_str(jstr_make(&c->z, buf, k, JO_LIT));
    }
    if (id == F_NAMESPACE || id == F_DICT) {
        struct jval d = jv_dict(&c->z, JO_LIT);
        d.t = id == F_NAMESPACE ? JT_NS : JT_DICT;
        for (size_t i = 0; i < npos; i++) {
            if (pos[i].t != JT_DICT && pos[i].t != JT_NS)
                jz_fail(&c->z, LOOM_E_FORMAT, line, "%s: expected a mapping argument, found %s",
                        id == F_NAMESPACE ? "namespace" : "dict", jv_typename(pos[i]));
            for (size_t k = 0; k < pos[i].u.d->n; k++)
                jd_set(&c->z, d.u.d, pos[i].u.d->k[k], pos[i].u.d->v[k]);
        }
        for (size_t k = 0; k < nkw; k++)
            jd_setc(&c->z, d.u.d, kw[k], kwv[k]);
        return d;
    }
    /* range */
    int64_t a = 0, b, step = 1;
    for (size_t i = 0; i < npos; i++)
        if (pos[i].t != JT_INT && pos[i].t != JT_BOOL)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "range: expected integers, found %s", jv_typename(pos[i]));
    if (npos == 1)
        b = pos[0].u.i;
    else if (npos == 2 || npos == 3)
        a = pos[0].u.i, b = pos[1].u.i, step = npos == 3 ? pos[2].u.i : 1;
    else
        jz_fail(&c->z, LOOM_E_FORMAT, line, "range: expected 1 to 3 arguments, found %zu", npos);
    if (step == 0)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "range() arg 3 must not be zero");
    struct jval l = jv_list(&c->z, JO_LIT);
    for (int64_t i = a, k = 0; step > 0 ? i < b : i > b; i += step, k++) {
        if (k >= 100000)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "range: more than 100000 items");
        jl_push(&c->z, l.u.l, jv_int(i, JO_LIT));
    }
    return l;
}

struct jval jx_call_value(struct jctx *c, struct jval f, struct jval *pos, size_t npos, const char **kw,
                          struct jval *kwv, size_t nkw, int line)
{
    switch (f.t) {
    case JT_MACRO:
        return call_macro(c, f.u.m, pos, npos, kw, kwv, nkw, line);
    case JT_FUNC:
        return call_global(c, (int)f.u.i, pos, npos, kw, kwv, nkw, line);
    case JT_METHOD:
        return jb_method(c, f.u.mt->self, f.u.mt->name, pos, npos, kw, kwv, nkw, line);
    case JT_UNDEF:
        undefined_error(c, f, line);
    default:
        jz_fail(&c->z, LOOM_E_FORMAT, line, "'%s' object is not callable", jv_typename(f));
    }
}

static struct jval eval_call(struct jctx *c, struct jscope *s, const struct node *n)
{
    struct jval f;
    if (n->a->kind == N_ATTR) { /* obj.method(...) without making a bound method */
        struct jval obj = jx_eval(c, s, n->a->a);
        if (jb_is_method(obj, n->a->name)) {
            struct args a = eval_args(c, s, &n->args);
            return jb_method(c, obj, n->a->name, a.pos, a.npos, a.kw, a.kwv, a.nkw, n->line);
        }
        f = jb_getattr(c, obj, n->a->name, n->line);
    } else {
        f = jx_eval(c, s, n->a);
    }
    struct args a = eval_args(c, s, &n->args);
    return jx_call_value(c, f, a.pos, a.npos, a.kw, a.kwv, a.nkw, n->line);
}

/* ---- expressions ---- */

static struct jval eval_container(struct jctx *c, struct jscope *s, const struct node *n)
{
    if (n->kind == N_DICT) {
        struct jval d = jv_dict(&c->z, JO_LIT);
        for (size_t i = 0; i + 1 < n->args.n; i += 2) {
            struct jval k = jx_eval(c, s, n->args.v[i]);
            jd_set(&c->z, d.u.d, k, jx_eval(c, s, n->args.v[i + 1]));
        }
        return d;
    }
    struct jval l = jv_list(&c->z, JO_LIT);
    l.tuple = n->kind == N_TUPLE;
    for (size_t i = 0; i < n->args.n; i++)
        jl_push(&c->z, l.u.l, jx_eval(c, s, n->args.v[i]));
    return l;
}

struct jval jx_eval(struct jctx *c, struct jscope *s, const struct node *n)
{
    struct jval a, b;
    switch (n->kind) {
    case N_LIT:
        return n->lit;
    case N_NAME:
        return lookup(c, s, n->name);
    case N_ATTR:
        return jb_getattr(c, jx_eval(c, s, n->a), n->name, n->line);
    case N_ITEM:
        a = jx_eval(c, s, n->a);
        return jb_getitem(c, a, jx_eval(c, s, n->b), n->line);
    case N_SLICE:
        return eval_slice(c, s, n);
    case N_CALL:
        return eval_call(c, s, n);
    case N_FILTER: {
        a = jx_eval(c, s, n->a);
        struct args x = eval_args(c, s, &n->args);
        return jb_filter(c, n->name, a, x.pos, x.npos, x.kw, x.kwv, x.nkw, n->line);
    }
    case N_TEST: {
        a = jx_eval(c, s, n->a);
        struct args x = eval_args(c, s, &n->args);
        if (x.nkw)
            jz_fail(&c->z, LOOM_E_FORMAT, n->line, "test '%s': keyword arguments are not supported", n->name);
        return jv_bool(jb_test(c, n->name, a, x.pos, x.npos, n->line) != n->op, JO_LIT);
    }
    case N_NOT:
        return jv_bool(!jv_truthy(jx_eval(c, s, n->a)), JO_LIT);
    case N_NEG:
    case N_POS:
        a = jx_eval(c, s, n->a);
        if (a.t == JT_UNDEF)
            undefined_error(c, a, n->line);
        if (!is_num(a))
            jz_fail(&c->z, LOOM_E_FORMAT, n->line, "bad operand type for unary %c: '%s'",
                    n->kind == N_NEG ? '-' : '+', jv_typename(a));
        if (n->kind == N_POS)
            return a.t == JT_BOOL ? jv_int(a.u.i, a.lit) : a;
        return a.t == JT_FLOAT ? jv_float(-a.u.f, a.lit) : jv_int(-a.u.i, a.lit);
    case N_BIN:
        a = jx_eval(c, s, n->a);
        b = jx_eval(c, s, n->b);
        if (n->op == B_CAT) {
            struct jsb out = {0};
            jv_str_to(&c->z, &out, a, n->line);
            jv_str_to(&c->z, &out, b, n->line);
            return jv_str(jsb_done(&c->z, &out));
        }
        if (n->op >= B_EQ)
            return jv_bool(compare(c, n->op, a, b, n->line), JO_LIT);
        return arith(c, n->op, a, b, n->line);
    case N_AND:
        a = jx_eval(c, s, n->a);
        return jv_truthy(a) ? jx_eval(c, s, n->b) : a;
    case N_OR:
        a = jx_eval(c, s, n->a);
        return jv_truthy(a) ? a : jx_eval(c, s, n->b);
    case N_COND:
        if (jv_truthy(jx_eval(c, s, n->b)))
            return jx_eval(c, s, n->a);
        return n->c ? jx_eval(c, s, n->c) : jv_undef("the inline if-expression evaluated to false and no else "
                                                     "section was defined");
    case N_LIST:
    case N_TUPLE:
    case N_DICT:
        return eval_container(c, s, n);
    default:
        jz_fail(&c->z, LOOM_E_INTERNAL, n->line, "not an expression (node %d)", n->kind);
    }
}

/* ---- statements ---- */

static void assign(struct jctx *c, struct jscope *s, const struct node *target, struct jval v, int line)
{
    if (target->kind == N_NAME) {
        jd_setc(&c->z, &s->vars, target->name, v);
        return;
    }
    if (target->kind == N_ATTR) {
        struct jval ns = lookup(c, s, target->a->name);
        if (ns.t != JT_NS)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "cannot assign attribute on non-namespace object");
        jd_setc(&c->z, ns.u.d, target->name, v);
        c->escapes++;
        return;
    }
    /* a tuple of names */
    size_t want = target->args.n;
    if (v.t == JT_STR) {
        struct jval l = jv_list(&c->z, JO_DATA);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t k = ju_off(v.u.s.p + i, v.u.s.n - i, 1);
            jl_push(&c->z, l.u.l, jv_str(jstr_sub(&c->z, v.u.s, i, k)));
            i += k;
        }
        v = l;
    }
    if (v.t == JT_DICT)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "unpacking a dict is not supported");
    if (v.t != JT_LIST)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "cannot unpack non-iterable %s object", jv_typename(v));
    if (v.u.l->n != want)
        jz_fail(&c->z, LOOM_E_FORMAT, line, v.u.l->n > want ? "too many values to unpack (expected %zu)"
                                                           : "not enough values to unpack (expected %zu)", want);
    for (size_t i = 0; i < want; i++)
        assign(c, s, target->args.v[i], v.u.l->v[i], line);
}

struct jlist *jx_items(struct jctx *c, struct jval v, const char *what, int line)
{
    struct jlist *l = jz_alloc(&c->z, sizeof *l);
    switch (v.t) {
    case JT_LIST:
        return v.u.l;
    case JT_DICT:
        for (size_t i = 0; i < v.u.d->n; i++)
            jl_push(&c->z, l, v.u.d->k[i]);
        return l;
    case JT_STR:
        for (size_t i = 0; i < v.u.s.n;) {
            size_t k = ju_off(v.u.s.p + i, v.u.s.n - i, 1);
            jl_push(&c->z, l, jv_str(jstr_sub(&c->z, v.u.s, i, k)));
            i += k;
        }
        return l;
    case JT_UNDEF:
        return l;
    default:
        if (what)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "%s: '%s' object is not iterable", what, jv_typename(v));
        jz_fail(&c->z, LOOM_E_FORMAT, line, "'%s' object is not iterable", jv_typename(v));
    }
}

/* A template-literal string for a name of at most 15 bytes, without allocating (loop iterations make many). */
static struct jval lit_name(const char *name)
{
    static const unsigned char lit[16] = {JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT,
                                          JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT, JO_LIT};
    return jv_str((struct jstr){name, lit, strlen(name)});
}

static struct jval loop_object(struct jctx *c, const struct jlist *items, size_t i)
{
    struct jval o = jv_dict(&c->z, JO_LIT);
    struct jdict *d = o.u.d;
    d->cap = 12;
    d->k = jz_alloc(&c->z, d->cap * sizeof *d->k);
    d->v = jz_alloc(&c->z, d->cap * sizeof *d->v);
    int64_t n = (int64_t)items->n, k = (int64_t)i;
    jd_set(&c->z, d, lit_name("index"), jv_int(k + 1, JO_LIT));
    jd_set(&c->z, d, lit_name("index0"), jv_int(k, JO_LIT));
    jd_set(&c->z, d, lit_name("revindex"), jv_int(n - k, JO_LIT));
    jd_set(&c->z, d, lit_name("revindex0"), jv_int(n - k - 1, JO_LIT));
    jd_set(&c->z, d, lit_name("first"), jv_bool(k == 0, JO_LIT));
    jd_set(&c->z, d, lit_name("last"), jv_bool(k == n - 1, JO_LIT));
    jd_set(&c->z, d, lit_name("length"), jv_int(n, JO_LIT));
    jd_set(&c->z, d, lit_name("depth"), jv_int(1, JO_LIT));
    jd_set(&c->z, d, lit_name("depth0"), jv_int(0, JO_LIT));
    if (i > 0)
        jd_set(&c->z, d, lit_name("previtem"), items->v[i - 1]);
    if (i + 1 < items->n)
        jd_set(&c->z, d, lit_name("nextitem"), items->v[i + 1]);
    return o;
}

static void count_iteration(struct jctx *c, int line)
{
    if (++c->iterations > LOOM_JINJA_MAX_ITERATIONS)
        jz_fail(&c->z, LOOM_E_RANGE, line, "more than %d loop iterations in one render (loom's limit)",
                LOOM_JINJA_MAX_ITERATIONS);
}

/* Where a loop iteration starts: what it may free at its end. */
struct iter_mark {
    struct jz_block *block;
    uint64_t escapes;
    const char *out;
};

static struct iter_mark iter_begin(struct jctx *c, const struct jsb *out)
{
    return (struct iter_mark){jz_mark(&c->z), c->escapes, out->p};
}

/* Free what the iteration allocated unless something may still reach it: a namespace attribute set since (in this
 * or a nested loop or macro) or an output buffer that moved into a block of the iteration. The iteration's scope,
 * loop object and temporaries are otherwise unreachable once it ends (jinja2's scoping: its sets stay in it). */
static void iter_end(struct jctx *c, struct iter_mark m, const struct jsb *out)
{
    if (c->escapes == m.escapes && out->p == m.out)
        jz_release(&c->z, m.block);
}

static void exec_for(struct jctx *c, struct jscope *s, const struct node *n, struct jsb *out)
{
    struct jlist *all = jx_items(c, jx_eval(c, s, n->b), NULL, n->line), *items = all;
    if (n->c) { /* for x in xs if cond: the loop sees only the items that pass */
        items = jz_alloc(&c->z, sizeof *items);
        for (size_t i = 0; i < all->n; i++) {
            count_iteration(c, n->line);
            struct jscope *t = scope_new(c, s);
            assign(c, t, n->a, all->v[i], n->line);
            if (jv_truthy(jx_eval(c, t, n->c)))
                jl_push(&c->z, items, all->v[i]);
        }
    }
    for (size_t i = 0; i < items->n; i++) {
        count_iteration(c, n->line);
        struct iter_mark m = iter_begin(c, out);
        struct jscope *t = scope_new(c, s);
        jd_set(&c->z, &t->vars, lit_name("loop"), loop_object(c, items, i));
        assign(c, t, n->a, items->v[i], n->line);
        int st = exec_body(c, t, &n->body, out);
        iter_end(c, m, out);
        if (st == ST_BREAK)
            break;
    }
    if (!items->n)
        exec_body(c, s, &n->orelse, out);
}

static int exec_body(struct jctx *c, struct jscope *s, const struct nlist *body, struct jsb *out)
{
    for (size_t i = 0; i < body->n; i++) {
        const struct node *n = body->v[i];
        int st = ST_OK;
        c->z.line = n->line;
        switch (n->kind) {
        case S_TEXT:
            jsb_str(&c->z, out, n->text);
            break;
        case S_OUT:
            jv_str_to(&c->z, out, jx_eval(c, s, n->a), n->line);
            break;
        case S_IF:
            st = exec_body(c, s, jv_truthy(jx_eval(c, s, n->a)) ? &n->body : &n->orelse, out);
            break;
        case S_FOR:
            exec_for(c, s, n, out);
            break;
        case S_SET:
            assign(c, s, n->a, jx_eval(c, s, n->b), n->line);
            break;
        case S_SETBLOCK: {
            struct jsb sub = {0};
            exec_body(c, s, &n->body, &sub);
            assign(c, s, n->a, jv_str(jsb_done(&c->z, &sub)), n->line);
            break;
        }
        case S_MACRO:
            jd_setc(&c->z, &s->vars, n->name, (struct jval){.t = JT_MACRO, .lit = JO_LIT, .u.m = n});
            break;
        case S_BREAK:
            return ST_BREAK;
        case S_CONTINUE:
            return ST_CONTINUE;
        default:
            jz_fail(&c->z, LOOM_E_INTERNAL, n->line, "not a statement (node %d)", n->kind);
        }
        if (st != ST_OK)
            return st;
    }
    return ST_OK;
}

/* ---- entry ---- */

static void bind_json(struct jctx *c, const json_t *vars, int origin)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)vars, key, val)
        jd_setc(&c->z, &c->root->vars, key, jv_from_json(&c->z, val, origin));
}

/* The output's bytes as a loom_chat_render: CONTROL where the template wrote them, DATA where the caller did. */
static int to_render(struct jstr s, struct loom_chat_render *out, loom_error *err)
{
    struct loom_chat_render r = {malloc(s.n + 1), s.n, NULL, 0};
    size_t cap = 0;
    int ok = r.text != NULL;
    if (ok) {
        memcpy(r.text, s.p, s.n);
        r.text[s.n] = '\0';
    }
    for (size_t i = 0; ok && i < s.n;) {
        size_t j = i;
        while (j < s.n && s.o[j] == s.o[i])
            j++;
        struct loom_chat_segment *seg = loom_grow(r.seg, &cap, r.n_seg + 1, sizeof *seg);
        if (!seg) {
            ok = 0;
            break;
        }
        r.seg = seg;
        r.seg[r.n_seg++] = (struct loom_chat_segment){i, j - i, s.o[i] == JO_LIT ? LOOM_CHAT_CONTROL : LOOM_CHAT_DATA};
        i = j;
    }
    if (!ok) {
        loom_chat_render_free(&r);
        return loom_errorf(err, LOOM_E_NOMEM, "jinja: cannot allocate the %zu-byte render", s.n);
    }
    loom_chat_render_free(out);
    *out = r;
    return LOOM_OK;
}

int loom_jinja_render(const struct loom_jinja *t, const json_t *data_vars, const json_t *control_vars,
                      const struct loom_jinja_opts *o, struct loom_chat_render *out, loom_error *err)
{
    struct jctx c = {.now = o ? o->now : -1};
    jmp_buf jb;
    c.z.fail = &jb;
    c.z.err = err;
    c.z.limit = LOOM_JINJA_MAX_BYTES;
    if (setjmp(jb)) {
        int code = c.z.code;
        jz_free_all(&c.z);
        return code;
    }
    c.root = scope_new(&c, NULL);
    if (control_vars)
        bind_json(&c, control_vars, JO_LIT);
    if (data_vars)
        bind_json(&c, data_vars, JO_DATA);
    struct jsb b = {0};
    exec_body(&c, c.root, &t->body, &b);
    int rc = to_render(jsb_done(&c.z, &b), out, err);
    jz_free_all(&c.z);
    return rc;
}
