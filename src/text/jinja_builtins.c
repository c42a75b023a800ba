/* jinja_builtins.c — what templates call on values: jinja2's filters (length, trim, tojson as Hugging Face defines
 * it, string, lower, upper, replace, join, map, select/reject(attr), default, items, indent, ...), its tests
 * (defined, none, string, mapping, sequence, number, iterable, equalto, ...), Python's str and dict methods
 * (split, strip, startswith, replace, get, items, ...), and attribute/item access with jinja2's fallbacks. Every
 * string result keeps the origin of the bytes it was made from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/jinja_internal.h"
#include "util/error.h"

struct fargs {
    struct jval *pos, *kwv;
    const char **kw;
    size_t npos, nkw;
};

/* Argument i (positional) or `name` (keyword), else def. */
static struct jval arg(const struct fargs *a, size_t i, const char *name, struct jval def)
{
    if (i < a->npos)
        return a->pos[i];
    for (size_t k = 0; name && k < a->nkw; k++)
        if (!strcmp(a->kw[k], name))
            return a->kwv[k];
    return def;
}

static const char *who(struct jval v)
{
    switch (v.t) {
    case JT_DICT:
        return "'dict object'";
    case JT_LIST:
        return v.tuple ? "'tuple object'" : "'list object'";
    case JT_STR:
        return "'str object'";
    case JT_NS:
        return "'jinja2.utils.Namespace object'";
    case JT_NONE:
        return "'None'";
    case JT_INT:
        return "'int object'";
    case JT_FLOAT:
        return "'float object'";
    case JT_BOOL:
        return "'bool object'";
    default:
        return "'object'";
    }
}

static struct jval no_attr(struct jctx *c, struct jval obj, const char *name)
{
    size_t n = strlen(name) + 64;
    char *s = jz_alloc(&c->z, n);
    snprintf(s, n, "%s has no attribute '%s'", who(obj), name);
    return jv_undef(s);
}

_Noreturn static void undefined_error(struct jctx *c, struct jval v, int line)
{
    jz_fail(&c->z, LOOM_E_FORMAT, line, "%s", v.u.why ? v.u.why : "undefined value");
}

static int str_origin_any(struct jstr s) /* DATA when any byte is */
{
    for (size_t i = 0; i < s.n; i++)
        if (s.o[i] == JO_DATA)
            return JO_DATA;
    return JO_LIT;
}

static struct jstr need_str(struct jctx *c, struct jval v, const char *what, int line)
{
    if (v.t != JT_STR)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "%s: expected a string, found %s", what, jv_typename(v));
    return v.u.s;
}

/* ---- string helpers (origins follow the bytes) ---- */

static long find_at(struct jstr s, struct jstr pat, size_t from)
{
    for (size_t i = from; i + pat.n <= s.n; i++)
        if (!memcmp(s.p + i, pat.p, pat.n))
            return (long)i;
    return -1;
}

/* Is the code point at s[0..n) in the set chars? (k: its byte length) */
static int in_set(struct jstr chars, const char *s, size_t k)
{
    for (size_t i = 0; i < chars.n;) {
        size_t m = ju_off(chars.p + i, chars.n - i, 1);
        if (m == k && !memcmp(chars.p + i, s, k))
            return 1;
        i += m;
    }
    return 0;
}

/* Python's strip/lstrip/rstrip: whitespace (chars NULL) or the code points of *chars; which: 1 left, 2 right. */
static struct jstr strip(struct jctx *c, struct jstr s, const struct jstr *chars, int which)
{
    size_t a = 0, b = s.n, w;
    while ((which & 1) && a < b) {
        w = chars ? ju_off(s.p + a, b - a, 1) : ju_space_at(s.p + a, b - a);
        if (!w || (chars && !in_set(*chars, s.p + a, w)))
            break;
        a += w;
    }
    while ((which & 2) && b > a) {
        if (chars) {
            size_t k = b - 1;
            while (k > a && ((unsigned char)s.p[k] & 0xc0) == 0x80)
                k--;
            if (!in_set(*chars, s.p + k, b - k))
                break;
            b = k;
        } else {
            if (!(w = ju_space_before(s.p + a, b - a)))
                break;
            b -= w;
        }
    }
    return a == 0 && b == s.n ? s : jstr_sub(&c->z, s, a, b - a);
}

static struct jval split(struct jctx *c, struct jstr s, struct jval sep, int64_t maxsplit, int right, int line)
{
    struct jval l = jv_list(&c->z, JO_DATA);
    if (sep.t == JT_NONE || sep.t == JT_UNDEF) { /* runs of whitespace, no empty items */
        size_t i = 0, w;
        size_t *cuts = jz_alloc(&c->z, (s.n + 1) * 2 * sizeof *cuts);
        size_t nc = 0;
        while (i < s.n) {
            while (i < s.n && (w = ju_space_at(s.p + i, s.n - i)))
                i += w;
            if (i >= s.n)
                break;
            size_t a = i;
            while (i < s.n && !ju_space_at(s.p + i, s.n - i))
                i += ju_off(s.p + i, s.n - i, 1);
            cuts[nc++] = a;
            cuts[nc++] = i;
        }
        size_t words = nc / 2, keep = maxsplit < 0 || (size_t)maxsplit >= words ? words : (size_t)maxsplit + 1;
        for (size_t k = 0; k < keep; k++) {
            size_t wi = right ? words - keep + k : k;
            size_t a = cuts[2 * wi], b = cuts[2 * wi + 1];
            int rest = maxsplit >= 0 && (size_t)maxsplit < words; /* the last piece is the unsplit rest */
            if (!right && k == keep - 1 && rest)
                b = s.n;
            if (right && k == 0 && rest)
                a = 0;
            jl_push(&c->z, l.u.l, jv_str(jstr_sub(&c->z, s, a, b - a)));
        }
        return l;
    }
    struct jstr p = need_str(c, sep, "split", line);
    if (!p.n)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "split: empty separator");
    /* all cut points, then keep the first (or last) maxsplit */
    size_t *at = jz_alloc(&c->z, (s.n / p.n + 2) * sizeof *at), n = 0;
    for (long i = find_at(s, p, 0); i >= 0; i = find_at(s, p, (size_t)i + p.n))
        at[n++] = (size_t)i;
    size_t use = maxsplit < 0 || (size_t)maxsplit >= n ? n : (size_t)maxsplit, first = right ? n - use : 0;
    size_t start = 0;
    for (size_t k = first; k < first + use; k++) {
        jl_push(&c->z, l.u.l, jv_str(jstr_sub(&c->z, s, start, at[k] - start)));
        start = at[k] + p.n;
    }
    jl_push(&c->z, l.u.l, jv_str(jstr_sub(&c->z, s, start, s.n - start)));
    return l;
}

static struct jstr replace(struct jctx *c, struct jstr s, struct jstr old, struct jstr new, int64_t count)
{
    struct jsb b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (!old.n) { /* between every character and at both ends */
        for (; i <= s.n && (count < 0 || done < count); done++) {
            jsb_str(&c->z, &b, new);
            if (i == s.n) {
                i++;
                break;
            }
            size_t k = ju_off(s.p + i, s.n - i, 1);
            jsb_str(&c->z, &b, (struct jstr){s.p + i, s.o + i, k});
            i += k;
        }
        if (i <= s.n)
            jsb_str(&c->z, &b, (struct jstr){s.p + i, s.o + i, s.n - i});
        return jsb_done(&c->z, &b);
    }
    for (long at; (count < 0 || done < count) && (at = find_at(s, old, i)) >= 0; done++) {
        jsb_str(&c->z, &b, (struct jstr){s.p + i, s.o + i, (size_t)at - i});
        jsb_str(&c->z, &b, new);
        i = (size_t)at + old.n;
    }
    jsb_str(&c->z, &b, (struct jstr){s.p + i, s.o + i, s.n - i});
    return jsb_done(&c->z, &b);
}

/* Case mapping per code point (utf8proc's simple mappings); mode: 'u' upper, 'l' lower, 't' title. */
static void put_case(struct jctx *c, struct jsb *b, struct jstr s, size_t i, size_t k, int mode)
{
    utf8proc_int32_t cp;
    if (utf8proc_iterate((const utf8proc_uint8_t *)s.p + i, (utf8proc_ssize_t)k, &cp) <= 0) {
        jsb_str(&c->z, b, (struct jstr){s.p + i, s.o + i, k});
        return;
    }
    cp = mode == 'u' ? utf8proc_toupper(cp) : mode == 'l' ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
    utf8proc_uint8_t u[4];
    utf8proc_ssize_t m = utf8proc_encode_char(cp, u);
    jsb_put(&c->z, b, (const char *)u, (size_t)m, s.o[i]);
}

static struct jstr recase(struct jctx *c, struct jstr s, int mode)
{
    struct jsb b = {0};
    for (size_t i = 0; i < s.n;) {
        size_t k = ju_off(s.p + i, s.n - i, 1);
        int m = mode;
        if (mode == 'c') /* capitalize: first upper (title), the rest lower */
            m = i == 0 ? 't' : 'l';
        put_case(c, &b, s, i, k, m);
        i += k;
    }
    return jsb_done(&c->z, &b);
}

/* jinja2's title filter: split before runs of '-', whitespace, '(', '{', '[', '<'; each piece's first character
 * upper, the rest lower. */
static struct jstr title(struct jctx *c, struct jstr s)
{
    struct jsb b = {0};
    int start = 1;
    for (size_t i = 0; i < s.n;) {
        size_t k = ju_off(s.p + i, s.n - i, 1);
        int delim = ju_space_at(s.p + i, s.n - i) || strchr("-({[<", s.p[i]) != NULL;
        if (delim && !start) { /* a delimiter run starts a new piece */
            start = 1;
        }
        put_case(c, &b, s, i, k, start ? 'u' : 'l');
        if (!delim)
            start = 0;
        else
            start = 1;
        i += k;
    }
    return jsb_done(&c->z, &b);
}

static int starts(struct jstr s, struct jstr p, int end)
{
    return p.n <= s.n && !memcmp(end ? s.p + s.n - p.n : s.p, p.p, p.n);
}

static int starts_any(struct jctx *c, struct jstr s, struct jval p, int end, int line)
{
    if (p.t == JT_LIST && p.tuple) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (starts(s, need_str(c, p.u.l->v[i], end ? "endswith" : "startswith", line), end))
                return 1;
        return 0;
    }
    return starts(s, need_str(c, p, end ? "endswith" : "startswith", line), end);
}

/* ---- methods ---- */

static const char *const k_str_methods[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip",
                                            "rstrip", "replace", "upper", "lower", "title", "capitalize", "find",
                                            "count", "join", "removeprefix", "removesuffix", "isdigit",
                                            "isspace", "splitlines", NULL};
static const char *const k_dict_methods[] = {"get", "items", "keys", "values", NULL};

static int listed(const char *const *names, const char *name)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

int jb_is_method(struct jval self, const char *name)
{
    return (self.t == JT_STR && listed(k_str_methods, name)) || (self.t == JT_DICT && listed(k_dict_methods, name));
}

static int64_t int_arg(struct jctx *c, struct jval v, int64_t def, const char *what, int line)
{
    if (v.t == JT_UNDEF || v.t == JT_NONE)
        return def;
    if (v.t != JT_INT && v.t != JT_BOOL)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "%s: expected an integer, found %s", what, jv_typename(v));
    return v.u.i;
}

static struct jval dict_method(struct jctx *c, struct jval self, const char *name, const struct fargs *a, int line)
{
    const struct jdict *d = self.u.d;
    if (!strcmp(name, "get")) {
        if (a->npos < 1)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "get expected at least 1 argument, got 0");
        struct jval *v = jd_get(d, a->pos[0]);
        return v ? *v : arg(a, 1, NULL, jv_none(JO_LIT));
    }
    struct jval l = jv_list(&c->z, self.lit);
    for (size_t i = 0; i < d->n; i++) {
        if (!strcmp(name, "items")) {
            struct jval t = jv_list(&c->z, self.lit);
            t.tuple = 1;
            jl_push(&c->z, t.u.l, d->k[i]);
            jl_push(&c->z, t.u.l, d->v[i]);
            jl_push(&c->z, l.u.l, t);
        } else {
            jl_push(&c->z, l.u.l, name[0] == 'k' ? d->k[i] : d->v[i]);
        }
    }
    (void)line;
    return l;
}

static struct jval join(struct jctx *c, struct jstr sep, struct jval items, int line);

static struct jval str_method(struct jctx *c, struct jstr s, const char *name, const struct fargs *a, int line)
{
    struct jval none = jv_none(JO_LIT);
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith"))
        return jv_bool(starts_any(c, s, arg(a, 0, NULL, none), name[0] == 'e', line), JO_LIT);
    if (!strcmp(name, "split") || !strcmp(name, "rsplit"))
        return split(c, s, arg(a, 0, "sep", none), int_arg(c, arg(a, 1, "maxsplit", none), -1, name, line),
                     name[0] == 'r', line);
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        struct jval ch = arg(a, 0, NULL, none);
        struct jstr set = ch.t == JT_NONE ? (struct jstr){0} : need_str(c, ch, name, line);
        int which = name[0] == 'l' ? 1 : name[0] == 'r' ? 2 : 3;
        return jv_str(strip(c, s, ch.t == JT_NONE ? NULL : &set, which));
    }
    if (!strcmp(name, "replace"))
        return jv_str(replace(c, s, need_str(c, arg(a, 0, NULL, none), name, line),
                              need_str(c, arg(a, 1, NULL, none), name, line),
                              int_arg(c, arg(a, 2, "count", none), -1, name, line)));
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize"))
        return jv_str(recase(c, s, name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : 'c'));
    if (!strcmp(name, "title"))
        jz_fail(&c->z, LOOM_E_FORMAT, line, "method str.title is not supported (the title filter is)");
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        struct jstr p = need_str(c, arg(a, 0, NULL, none), name, line);
        if (name[0] == 'f') {
            long at = find_at(s, p, 0);
            return jv_int(at < 0 ? -1 : (int64_t)ju_len(s.p, (size_t)at), JO_LIT);
        }
        if (!p.n)
            return jv_int((int64_t)ju_len(s.p, s.n) + 1, JO_LIT);
        int64_t k = 0;
        for (long at = find_at(s, p, 0); at >= 0; at = find_at(s, p, (size_t)at + p.n))
            k++;
        return jv_int(k, JO_LIT);
    }
    if (!strcmp(name, "join"))
        return join(c, s, arg(a, 0, NULL, none), line);
    if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
        struct jstr p = need_str(c, arg(a, 0, NULL, none), name, line);
        int end = name[6] == 's';
        if (!p.n || !starts(s, p, end))
            return jv_str(s);
        return jv_str(jstr_sub(&c->z, s, end ? 0 : p.n, s.n - p.n));
    }
    if (!strcmp(name, "isspace")) {
        size_t i = 0, w;
        while (i < s.n && (w = ju_space_at(s.p + i, s.n - i)))
            i += w;
        return jv_bool(s.n && i == s.n, JO_LIT);
    }
    if (!strcmp(name, "isdigit")) {
        size_t i = 0;
        while (i < s.n && s.p[i] >= '0' && s.p[i] <= '9')
            i++;
        return jv_bool(s.n && i == s.n, JO_LIT);
    }
    /* splitlines */
    struct jval l = jv_list(&c->z, JO_DATA);
    for (size_t i = 0, a0 = 0; i <= s.n; i++) {
        int nl = i < s.n && (s.p[i] == '\n' || s.p[i] == '\r');
        if (nl || i == s.n) {
            if (i > a0 || nl)
                jl_push(&c->z, l.u.l, jv_str(jstr_sub(&c->z, s, a0, i - a0)));
            i += nl && s.p[i] == '\r' && i + 1 < s.n && s.p[i + 1] == '\n';
            a0 = i + 1;
        }
    }
    return l;
}

struct jval jb_method(struct jctx *c, struct jval self, const char *name, struct jval *pos, size_t npos,
                      const char **kw, struct jval *kwv, size_t nkw, int line)
{
    struct fargs a = {pos, kwv, kw, npos, nkw};
    if (self.t == JT_STR && listed(k_str_methods, name))
        return str_method(c, self.u.s, name, &a, line);
    if (self.t == JT_DICT && listed(k_dict_methods, name))
        return dict_method(c, self, name, &a, line);
    jz_fail(&c->z, LOOM_E_FORMAT, line, "method %s.%s is not supported", jv_typename(self), name);
}

/* ---- attribute and item access ---- */

static struct jval method_value(struct jctx *c, struct jval self, const char *name)
{
    struct jmethod *m = jz_alloc(&c->z, sizeof *m);
    m->self = self;
    m->name = name;
    return (struct jval){.t = JT_METHOD, .lit = JO_LIT, .u.mt = m};
}

/* Python's read-only methods (and jinja2's loop.cycle/loop.changed) that jinja2 templates may call but loom does not
 * implement: reaching one fails at once, naming it, rather than reading as the template's own missing attribute.
 * Mutating list/dict methods are left out: jinja2's immutable sandbox refuses them itself. */
static const char *const k_str_unsupported[] = {
    "casefold", "center", "encode", "expandtabs", "format", "format_map", "index", "isalnum", "isalpha", "isascii",
    "isdecimal", "isidentifier", "islower", "isnumeric", "isprintable", "istitle", "isupper", "ljust", "maketrans",
    "partition", "rfind", "rindex", "rjust", "rpartition", "swapcase", "translate", "zfill", NULL};
static const char *const k_list_unsupported[] = {"copy", "count", "index", NULL};
static const char *const k_dict_unsupported[] = {"copy", "fromkeys", NULL};
static const char *const k_loop_unsupported[] = {"cycle", "changed", NULL};

static void unsupported_method(struct jctx *c, struct jval obj, const char *name, int line)
{
    const char *type = NULL;
    if (obj.t == JT_STR && listed(k_str_unsupported, name))
        type = "str";
    else if (obj.t == JT_LIST && listed(k_list_unsupported, name))
        type = "list";
    else if (obj.t == JT_DICT && listed(k_dict_unsupported, name))
        type = "dict";
    else if (obj.t == JT_DICT && listed(k_loop_unsupported, name) && jd_getc(obj.u.d, "revindex0") &&
             jd_getc(obj.u.d, "depth0")) /* the loop object (jinja_eval.c's loop_object) */
        type = "loop";
    if (type)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "method '%s' of %s is not supported by loom's interpreter", name, type);
}

struct jval jb_getattr(struct jctx *c, struct jval obj, const char *name, int line)
{
    if (obj.t == JT_UNDEF)
        undefined_error(c, obj, line);
    if (jb_is_method(obj, name))
        return method_value(c, obj, name);
    if (obj.t == JT_DICT || obj.t == JT_NS) {
        struct jval *v = jd_getc(obj.u.d, name);
        if (v)
            return *v;
    }
    unsupported_method(c, obj, name, line);
    return no_attr(c, obj, name);
}

struct jval jb_getitem(struct jctx *c, struct jval obj, struct jval key, int line)
{
    if (obj.t == JT_UNDEF)
        undefined_error(c, obj, line);
    if (obj.t == JT_DICT || obj.t == JT_NS) {
        struct jval *v = jd_get(obj.u.d, key);
        if (v)
            return *v;
    } else if ((obj.t == JT_LIST || obj.t == JT_STR) && (key.t == JT_INT || key.t == JT_BOOL)) {
        int64_t n = obj.t == JT_LIST ? (int64_t)obj.u.l->n : (int64_t)ju_len(obj.u.s.p, obj.u.s.n), i = key.u.i;
        if (i < 0)
            i += n;
        if (i >= 0 && i < n) {
            if (obj.t == JT_LIST)
                return obj.u.l->v[i];
            size_t a = ju_off(obj.u.s.p, obj.u.s.n, (size_t)i), k = ju_off(obj.u.s.p + a, obj.u.s.n - a, 1);
            return jv_str(jstr_sub(&c->z, obj.u.s, a, k));
        }
        char *s = jz_alloc(&c->z, 64);
        snprintf(s, 64, "%s object has no element %lld", obj.t == JT_LIST ? "list" : "str", (long long)key.u.i);
        return jv_undef(s);
    }
    if (key.t == JT_STR)
        return jb_getattr(c, obj, key.u.s.p, line);
    return jv_undef("undefined item");
}

/* jinja2's attribute getter for map/selectattr/join: dotted path, integer parts index. */
static struct jval get_path(struct jctx *c, struct jval v, struct jval attr, int line)
{
    if (attr.t != JT_STR)
        return jb_getitem(c, v, attr, line);
    const char *p = attr.u.s.p;
    while (1) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        char *part = jz_alloc(&c->z, n + 1);
        memcpy(part, p, n);
        int digits = n > 0;
        for (size_t i = 0; i < n; i++)
            digits &= part[i] >= '0' && part[i] <= '9';
        v = digits ? jb_getitem(c, v, jv_int(strtoll(part, NULL, 10), JO_LIT), line)
                   : jb_getitem(c, v, jv_cstr(&c->z, part, JO_LIT), line);
        if (!dot)
            return v;
        if (v.t == JT_UNDEF)
            return v;
        p = dot + 1;
    }
}

/* ---- filters ---- */

static struct jval join(struct jctx *c, struct jstr sep, struct jval items, int line)
{
    struct jlist *l = jx_items(c, items, "join", line);
    struct jsb b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            jsb_str(&c->z, &b, sep);
        jv_str_to(&c->z, &b, l->v[i], line);
    }
    return jv_str(jsb_done(&c->z, &b));
}

static struct jval list_of(struct jctx *c, struct jlist *l, int lit)
{
    struct jval r = jv_list(&c->z, lit);
    for (size_t i = 0; i < l->n; i++)
        jl_push(&c->z, r.u.l, l->v[i]);
    return r;
}

static struct jval f_length(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    switch (v.t) {
    case JT_STR:
        return jv_int((int64_t)ju_len(v.u.s.p, v.u.s.n), JO_LIT);
    case JT_LIST:
        return jv_int((int64_t)v.u.l->n, JO_LIT);
    case JT_DICT:
    case JT_NS:
        return jv_int((int64_t)v.u.d->n, JO_LIT);
    case JT_UNDEF:
        return jv_int(0, JO_LIT);
    default:
        jz_fail(&c->z, LOOM_E_FORMAT, line, "object of type '%s' has no len()", jv_typename(v));
    }
}

static struct jval f_trim(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    struct jval ch = arg(a, 0, "chars", jv_none(JO_LIT));
    struct jstr set = ch.t == JT_NONE ? (struct jstr){0} : need_str(c, ch, "trim", line);
    return jv_str(strip(c, jv_to_str(&c->z, v, line), ch.t == JT_NONE ? NULL : &set, 3));
}

static struct jval f_tojson(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    struct jval ind = arg(a, 99, "indent", jv_none(JO_LIT)), asc = arg(a, 99, "ensure_ascii", jv_bool(0, JO_LIT));
    struct jval sep = arg(a, 99, "separators", jv_none(JO_LIT)), sort = arg(a, 99, "sort_keys", jv_bool(0, JO_LIT));
    if (a->npos)
        ind = a->pos[0];
    if (jv_truthy(asc) || sep.t != JT_NONE)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "tojson: ensure_ascii and separators are not supported");
    struct jsb b = {0};
    jv_json_to(&c->z, &b, v, (int)int_arg(c, ind, -1, "tojson indent", line), jv_truthy(sort), line);
    return jv_str(jsb_done(&c->z, &b));
}

static struct jval f_string(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return jv_str(jv_to_str(&c->z, v, line));
}

static struct jval f_case(struct jctx *c, struct jval v, int mode, int line)
{
    struct jstr s = jv_to_str(&c->z, v, line);
    return jv_str(mode == 'T' ? title(c, s) : recase(c, s, mode));
}

static struct jval f_upper(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return f_case(c, v, 'u', line);
}

static struct jval f_lower(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return f_case(c, v, 'l', line);
}

static struct jval f_capitalize(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return f_case(c, v, 'c', line);
}

static struct jval f_title(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return f_case(c, v, 'T', line);
}

static struct jval f_replace(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    struct jval none = jv_none(JO_LIT);
    return jv_str(replace(c, jv_to_str(&c->z, v, line), jv_to_str(&c->z, arg(a, 0, "old", none), line),
                          jv_to_str(&c->z, arg(a, 1, "new", none), line),
                          int_arg(c, arg(a, 2, "count", none), -1, "replace", line)));
}

static struct jval f_join(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    struct jval sep = arg(a, 0, "d", jv_cstr(&c->z, "", JO_LIT)), attr = arg(a, 1, "attribute", jv_none(JO_LIT));
    if (attr.t != JT_NONE) {
        struct jlist *l = jx_items(c, v, "join", line);
        struct jval m = jv_list(&c->z, v.lit);
        for (size_t i = 0; i < l->n; i++)
            jl_push(&c->z, m.u.l, get_path(c, l->v[i], attr, line));
        v = m;
    }
    return join(c, jv_to_str(&c->z, sep, line), v, line);
}

static struct jval f_first_last(struct jctx *c, struct jval v, int last, int line)
{
    struct jlist *l = jx_items(c, v, last ? "last" : "first", line);
    if (!l->n)
        return jv_undef(last ? "No last item, sequence was empty." : "No first item, sequence was empty.");
    return l->v[last ? l->n - 1 : 0];
}

static struct jval f_first(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return f_first_last(c, v, 0, line);
}

static struct jval f_last(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return f_first_last(c, v, 1, line);
}

static struct jval f_default(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)c, (void)line;
    struct jval def = arg(a, 0, "default_value", jv_cstr(&c->z, "", JO_LIT));
    int boolean = jv_truthy(arg(a, 1, "boolean", jv_bool(0, JO_LIT)));
    return v.t == JT_UNDEF || (boolean && !jv_truthy(v)) ? def : v;
}

static struct jval f_list(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    return list_of(c, jx_items(c, v, "list", line), v.lit);
}

static struct jval f_reverse(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    if (v.t == JT_STR) {
        struct jsb b = {0};
        for (size_t e = v.u.s.n; e > 0;) {
            size_t k = e - 1;
            while (k > 0 && ((unsigned char)v.u.s.p[k] & 0xc0) == 0x80)
                k--;
            jsb_str(&c->z, &b, (struct jstr){v.u.s.p + k, v.u.s.o + k, e - k});
            e = k;
        }
        return jv_str(jsb_done(&c->z, &b));
    }
    struct jlist *l = jx_items(c, v, "reverse", line);
    struct jval r = jv_list(&c->z, v.lit);
    for (size_t i = l->n; i > 0; i--)
        jl_push(&c->z, r.u.l, l->v[i - 1]);
    return r;
}

static struct jval f_items(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    if (v.t == JT_UNDEF)
        return jv_list(&c->z, JO_LIT);
    if (v.t != JT_DICT)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "Can only get item pairs from a mapping.");
    return dict_method(c, v, "items", a, line);
}

/* Python int(): optional sign, digits with single underscores, surrounding whitespace. */
static int parse_int(struct jstr s, int64_t *out)
{
    struct jstr t = {s.p, s.o, s.n};
    size_t a = 0, b = t.n, w;
    while (a < b && (w = ju_space_at(t.p + a, b - a)))
        a += w;
    while (b > a && (w = ju_space_before(t.p + a, b - a)))
        b -= w;
    int neg = a < b && t.p[a] == '-';
    a += a < b && (t.p[a] == '-' || t.p[a] == '+');
    if (a == b)
        return 0;
    int64_t v = 0;
    for (size_t i = a; i < b; i++) {
        if (t.p[i] == '_' && i > a && i + 1 < b && t.p[i - 1] != '_')
            continue;
        if (t.p[i] < '0' || t.p[i] > '9' || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, t.p[i] - '0', &v))
            return 0;
    }
    *out = neg ? -v : v;
    return 1;
}

static struct jval f_int(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    struct jval def = arg(a, 0, "default", jv_int(0, JO_LIT));
    int64_t i;
    (void)line;
    switch (v.t) {
    case JT_INT:
        return v;
    case JT_BOOL:
        return jv_int(v.u.i, v.lit);
    case JT_FLOAT:
        return v.u.f == v.u.f && v.u.f < 9.2e18 && v.u.f > -9.2e18 ? jv_int((int64_t)v.u.f, v.lit) : def;
    case JT_STR: {
        if (parse_int(v.u.s, &i))
            return jv_int(i, str_origin_any(v.u.s));
        char *end;
        double f = strtod(v.u.s.p, &end);
        if (end != v.u.s.p && !*end && f == f && f < 9.2e18 && f > -9.2e18)
            return jv_int((int64_t)f, str_origin_any(v.u.s));
        return def;
    }
    default:
        (void)c;
        return def;
    }
}

static struct jval f_float(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    struct jval def = arg(a, 0, "default", jv_float(0, JO_LIT));
    (void)c, (void)line;
    if (v.t == JT_FLOAT)
        return v;
    if (v.t == JT_INT || v.t == JT_BOOL)
        return jv_float((double)v.u.i, v.lit);
    if (v.t == JT_STR) {
        char *end;
        double f = strtod(v.u.s.p, &end);
        if (end != v.u.s.p && !*end)
            return jv_float(f, str_origin_any(v.u.s));
    }
    return def;
}

static struct jval f_safe(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    struct jval r = v.t == JT_STR ? v : jv_str(jv_to_str(&c->z, v, line));
    r.markup = 1;
    return r;
}

/* jinja2's indent: lines after the first (and the first when `first`) get the prefix; blank lines only when
 * `blank`. The value gets a newline appended before splitting, as jinja2 does. */
static struct jval f_indent(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    struct jval w = arg(a, 0, "width", jv_int(4, JO_LIT));
    int first = jv_truthy(arg(a, 1, "first", jv_bool(0, JO_LIT)));
    int blank = jv_truthy(arg(a, 2, "blank", jv_bool(0, JO_LIT)));
    struct jsb pre = {0};
    if (w.t == JT_STR)
        jsb_str(&c->z, &pre, w.u.s);
    else
        for (int64_t i = 0; i < int_arg(c, w, 4, "indent", line); i++)
            jsb_puts(&c->z, &pre, " ", JO_LIT);
    struct jstr ind = jsb_done(&c->z, &pre);
    struct jsb src = {0};
    jsb_str(&c->z, &src, jv_to_str(&c->z, v, line));
    jsb_puts(&c->z, &src, "\n", JO_LIT);
    struct jval lines = str_method(c, jsb_done(&c->z, &src), "splitlines", a, line);
    struct jsb b = {0};
    for (size_t i = 0; i < lines.u.l->n; i++) {
        struct jstr ln = lines.u.l->v[i].u.s;
        if (i)
            jsb_puts(&c->z, &b, "\n", JO_LIT);
        if ((i || first) && (blank || ln.n))
            jsb_str(&c->z, &b, ind);
        jsb_str(&c->z, &b, ln);
    }
    if (first && !blank && lines.u.l->n && !lines.u.l->v[0].u.s.n)
        jsb_str(&c->z, &b, ind); /* jinja2 prefixes the first line even when blank */
    return jv_str(jsb_done(&c->z, &b));
}

/* map(attribute=...) or map('filter', args...) */
static struct jval f_map(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    if (!jv_truthy(v)) /* jinja2 maps only a truthy value (`if value:`): None, undefined, 0, "" map to nothing */
        return jv_list(&c->z, v.lit);
    struct jlist *l = jx_items(c, v, "map", line);
    struct jval r = jv_list(&c->z, v.lit), attr = arg(a, 99, "attribute", jv_none(JO_LIT));
    struct jval def = arg(a, 99, "default", jv_undef(NULL));
    for (size_t i = 0; i < l->n; i++) {
        struct jval x;
        if (attr.t != JT_NONE) {
            x = get_path(c, l->v[i], attr, line);
            if (x.t == JT_UNDEF && def.t != JT_UNDEF)
                x = def;
        } else {
            if (!a->npos || a->pos[0].t != JT_STR)
                jz_fail(&c->z, LOOM_E_FORMAT, line, "map: expected a filter name or attribute=");
            if (!jb_has_filter(a->pos[0].u.s.p))
                jz_fail(&c->z, LOOM_E_FORMAT, line, "filter '%s' is not supported", a->pos[0].u.s.p);
            x = jb_filter(c, a->pos[0].u.s.p, l->v[i], a->pos + 1, a->npos - 1, a->kw, a->kwv, a->nkw, line);
        }
        jl_push(&c->z, r.u.l, x);
    }
    return r;
}

/* select/reject(test, args...) and selectattr/rejectattr(attr, test, args...) */
static struct jval select_items(struct jctx *c, struct jval v, const struct fargs *a, int attr, int keep, int line)
{
    if (!jv_truthy(v)) /* as jinja2's select_or_reject (`if value:`): a falsy value (None too) selects nothing */
        return jv_list(&c->z, v.lit);
    struct jlist *l = jx_items(c, v, "select", line);
    struct jval r = jv_list(&c->z, v.lit);
    size_t t0 = attr ? 1 : 0;
    if (attr && !a->npos)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "selectattr: expected an attribute name");
    const char *test = a->npos > t0 ? need_str(c, a->pos[t0], "select test", line).p : NULL;
    if (test && !jb_has_test(test))
        jz_fail(&c->z, LOOM_E_FORMAT, line, "test '%s' is not supported", test);
    for (size_t i = 0; i < l->n; i++) {
        struct jval x = attr ? get_path(c, l->v[i], a->pos[0], line) : l->v[i];
        int ok = test ? jb_test(c, test, x, a->pos + t0 + 1, a->npos > t0 ? a->npos - t0 - 1 : 0, line)
                      : jv_truthy(x);
        if (ok == keep)
            jl_push(&c->z, r.u.l, l->v[i]);
    }
    return r;
}

static struct jval f_select(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    return select_items(c, v, a, 0, 1, line);
}

static struct jval f_reject(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    return select_items(c, v, a, 0, 0, line);
}

static struct jval f_selectattr(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    return select_items(c, v, a, 1, 1, line);
}

static struct jval f_rejectattr(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    return select_items(c, v, a, 1, 0, line);
}

static struct jval f_abs(struct jctx *c, struct jval v, const struct fargs *a, int line)
{
    (void)a;
    if (v.t == JT_INT || v.t == JT_BOOL)
        return jv_int(v.u.i < 0 ? -v.u.i : v.u.i, v.lit);
    if (v.t == JT_FLOAT)
        return jv_float(v.u.f < 0 ? -v.u.f : v.u.f, v.lit);
    jz_fail(&c->z, LOOM_E_FORMAT, line, "bad operand type for abs(): '%s'", jv_typename(v));
}

typedef struct jval (*filter_fn)(struct jctx *c, struct jval v, const struct fargs *a, int line);
static const struct {
    const char *name;
    filter_fn fn;
} k_filters[] = {
    {"length", f_length},       {"count", f_length},         {"trim", f_trim},
    {"tojson", f_tojson},       {"string", f_string},        {"upper", f_upper},
    {"lower", f_lower},         {"capitalize", f_capitalize}, {"title", f_title},
    {"replace", f_replace},     {"join", f_join},            {"first", f_first},
    {"last", f_last},           {"default", f_default},      {"d", f_default},
    {"list", f_list},           {"reverse", f_reverse},      {"items", f_items},
    {"int", f_int},             {"float", f_float},          {"safe", f_safe},
    {"indent", f_indent},       {"map", f_map},              {"select", f_select},
    {"reject", f_reject},       {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr},
    {"abs", f_abs},
};

int jb_has_filter(const char *name)
{
    for (size_t i = 0; i < sizeof k_filters / sizeof *k_filters; i++)
        if (!strcmp(k_filters[i].name, name))
            return 1;
    return 0;
}

struct jval jb_filter(struct jctx *c, const char *name, struct jval v, struct jval *pos, size_t npos,
                      const char **kw, struct jval *kwv, size_t nkw, int line)
{
    struct fargs a = {pos, kwv, kw, npos, nkw};
    for (size_t i = 0; i < sizeof k_filters / sizeof *k_filters; i++)
        if (!strcmp(k_filters[i].name, name))
            return k_filters[i].fn(c, v, &a, line);
    jz_fail(&c->z, LOOM_E_FORMAT, line, "filter '%s' is not supported", name);
}

/* ---- tests ---- */

static const char *const k_tests[] = {"defined", "undefined", "none", "string", "mapping", "sequence", "number",
                                      "integer", "float", "boolean", "iterable", "true", "false", "callable",
                                      "eq", "equalto", "==", "ne", "!=", "lt", "<", "lessthan", "le", "<=", "gt",
                                      ">", "greaterthan", "ge", ">=", "in", "odd", "even", "divisibleby",
                                      "lower", "upper", "sameas", "escaped", NULL};

int jb_has_test(const char *name)
{
    return listed(k_tests, name);
}

static int cmp_test(struct jctx *c, const char *name, struct jval v, struct jval o, int line)
{
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "=="))
        return jv_eq(v, o);
    if (!strcmp(name, "ne") || !strcmp(name, "!="))
        return !jv_eq(v, o);
    /* ordering through Python semantics: numbers or strings */
    int k;
    if ((v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL) && (o.t == JT_INT || o.t == JT_FLOAT || o.t == JT_BOOL)) {
        double x = v.t == JT_FLOAT ? v.u.f : (double)v.u.i, y = o.t == JT_FLOAT ? o.u.f : (double)o.u.i;
        k = (x > y) - (x < y);
    } else if (v.t == JT_STR && o.t == JT_STR) {
        size_t n = v.u.s.n < o.u.s.n ? v.u.s.n : o.u.s.n;
        k = memcmp(v.u.s.p, o.u.s.p, n);
        k = k ? k : (v.u.s.n > o.u.s.n) - (v.u.s.n < o.u.s.n);
    } else {
        jz_fail(&c->z, LOOM_E_FORMAT, line, "test '%s': cannot order '%s' and '%s'", name, jv_typename(v),
                jv_typename(o));
    }
    if (name[0] == 'l' || name[0] == '<')
        return name[1] == 'e' || name[1] == '=' ? k <= 0 : k < 0;
    return name[1] == 'e' || name[1] == '=' ? k >= 0 : k > 0;
}

static int case_test(struct jstr s, int upper)
{
    int cased = 0;
    for (size_t i = 0; i < s.n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s.p + i, (utf8proc_ssize_t)(s.n - i), &cp);
        if (k <= 0)
            return 0;
        utf8proc_category_t cat = utf8proc_category(cp);
        if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LT)
            cased |= 2;
        if (cat == UTF8PROC_CATEGORY_LL)
            cased |= 1;
        i += (size_t)k;
    }
    return upper ? cased == 2 : cased == 1;
}

int jb_test(struct jctx *c, const char *name, struct jval v, struct jval *args, size_t nargs, int line)
{
    struct jval o = nargs ? args[0] : jv_undef(NULL);
    if (!strcmp(name, "defined"))
        return v.t != JT_UNDEF;
    if (!strcmp(name, "undefined"))
        return v.t == JT_UNDEF;
    if (!strcmp(name, "none"))
        return v.t == JT_NONE;
    if (!strcmp(name, "string"))
        return v.t == JT_STR;
    if (!strcmp(name, "mapping"))
        return v.t == JT_DICT;
    if (!strcmp(name, "sequence")) /* len() and __getitem__: Undefined has both */
        return v.t == JT_STR || v.t == JT_LIST || v.t == JT_DICT || v.t == JT_UNDEF;
    if (!strcmp(name, "number"))
        return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL;
    if (!strcmp(name, "integer"))
        return v.t == JT_INT;
    if (!strcmp(name, "float"))
        return v.t == JT_FLOAT;
    if (!strcmp(name, "boolean"))
        return v.t == JT_BOOL;
    if (!strcmp(name, "iterable"))
        return v.t == JT_STR || v.t == JT_LIST || v.t == JT_DICT || v.t == JT_UNDEF;
    if (!strcmp(name, "true") || !strcmp(name, "false"))
        return v.t == JT_BOOL && v.u.i == (name[0] == 't');
    if (!strcmp(name, "callable"))
        return v.t == JT_MACRO || v.t == JT_FUNC || v.t == JT_METHOD;
    if (!strcmp(name, "escaped"))
        return 0;
    if (!strcmp(name, "lower") || !strcmp(name, "upper"))
        return v.t == JT_STR && case_test(v.u.s, name[0] == 'u');
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (v.t != JT_INT && v.t != JT_BOOL)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "test '%s': expected an integer, found %s", name, jv_typename(v));
        int64_t d = name[0] == 'd' ? (o.t == JT_INT ? o.u.i : 0) : 2;
        if (!d)
            jz_fail(&c->z, LOOM_E_FORMAT, line, "test 'divisibleby': expected a nonzero integer argument");
        int64_t m = v.u.i % d;
        return name[0] == 'o' ? m != 0 : m == 0;
    }
    if (!strcmp(name, "sameas")) /* identity: None, True, False, or the same container */
        return v.t == o.t && (v.t == JT_NONE || ((v.t == JT_BOOL || v.t == JT_INT) && v.u.i == o.u.i) ||
                              ((v.t == JT_LIST || v.t == JT_DICT) && v.u.l == o.u.l));
    if (!nargs)
        jz_fail(&c->z, LOOM_E_FORMAT, line, "test '%s': expected an argument", name);
    if (!strcmp(name, "in")) {
        if (o.t == JT_STR)
            return v.t == JT_STR && find_at(o.u.s, v.u.s, 0) >= 0;
        struct jlist *l = jx_items(c, o, "in", line);
        for (size_t i = 0; i < l->n; i++)
            if (jv_eq(l->v[i], v))
                return 1;
        return 0;
    }
    return cmp_test(c, name, v, o, line);
}
