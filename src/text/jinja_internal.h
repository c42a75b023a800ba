/* jinja_internal.h — shared between the Jinja interpreter's files (jinja_parse.c: lexer and parser; jinja_value.c:
 * arena, strings with per-byte origin, Python str/repr/json.dumps; jinja_eval.c: evaluator; jinja_builtins.c:
 * filters, tests and methods). Values live in an arena freed at once (a loop iteration frees what it made when
 * nothing kept it; a render's arena has a byte limit); errors unwind with longjmp to the entry point
 * (loom_jinja_parse or loom_jinja_render), which owns every allocation, so nothing leaks. */
#ifndef LOOM_TEXT_JINJA_INTERNAL_H
#define LOOM_TEXT_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "loom.h"

/* ---- arena and failure ---- */
struct jz_block;
struct jz {
    struct jz_block *head;
    jmp_buf *fail;  /* where jz_fail unwinds to */
    loom_error *err;
    int code;       /* the failure's code once failed */
    int line;       /* the statement being run, for errors raised without one (the limit below) */
    size_t used;    /* bytes held by the arena's blocks */
    size_t limit;   /* jz_alloc fails with LOOM_E_RANGE past this many bytes; 0: no limit */
};
void *jz_alloc(struct jz *z, size_t n);    /* zeroed; unwinds with LOOM_E_NOMEM on failure */
/* A grown array: a fresh zeroed block of cap elements of elem bytes holding the n first ones of old. */
void *jz_grow(struct jz *z, const void *old, size_t n, size_t cap, size_t elem);
void jz_free_all(struct jz *z);
/* jz_mark names the arena's state; jz_release frees every block allocated since (the caller guarantees nothing
 * still reachable lives in them). */
struct jz_block *jz_mark(const struct jz *z);
void jz_release(struct jz *z, struct jz_block *mark);
_Noreturn void jz_fail(struct jz *z, int code, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- strings: bytes plus one origin byte per byte (JO_DATA or JO_LIT) ---- */
enum { JO_DATA = 0, JO_LIT = 1 };
struct jstr {
    const char *p;          /* NUL-terminated */
    const unsigned char *o; /* origin of each byte */
    size_t n;
};
struct jsb { /* a growing string with origins */
    char *p;
    unsigned char *o;
    size_t n, cap;
};
void jsb_put(struct jz *z, struct jsb *b, const char *s, size_t n, int origin);
void jsb_puts(struct jz *z, struct jsb *b, const char *s, int origin);
void jsb_str(struct jz *z, struct jsb *b, struct jstr s);
struct jstr jsb_done(struct jz *z, struct jsb *b); /* the string; b is reset */
struct jstr jstr_make(struct jz *z, const char *s, size_t n, int origin);
struct jstr jstr_sub(struct jz *z, struct jstr s, size_t off, size_t n);

/* ---- values ---- */
enum jt { JT_UNDEF, JT_NONE, JT_BOOL, JT_INT, JT_FLOAT, JT_STR, JT_LIST, JT_DICT, JT_NS, JT_MACRO, JT_FUNC, JT_METHOD };
struct jlist;
struct jdict;
struct node;
struct jval {
    uint8_t t;
    uint8_t lit;   /* non-strings: JO_LIT when the template made it, JO_DATA when it came from the caller */
    uint8_t tuple; /* a list written or made as a tuple (repr uses parentheses) */
    uint8_t markup; /* JT_STR made by |safe (jinja2's Markup): `+` with a plain str HTML-escapes the plain one */
    union {
        int64_t i;          /* JT_BOOL, JT_INT; JT_FUNC: which global */
        double f;
        struct jstr s;      /* JT_STR */
        struct jlist *l;    /* JT_LIST */
        struct jdict *d;    /* JT_DICT, JT_NS */
        const struct node *m; /* JT_MACRO */
        const char *why;    /* JT_UNDEF: jinja2's hint ("'x' is undefined"), or NULL */
        struct jmethod *mt; /* JT_METHOD */
    } u;
};
struct jlist {
    size_t n, cap;
    struct jval *v;
};
struct jdict {
    size_t n, cap;
    struct jval *k, *v;
};
struct jmethod {
    struct jval self;
    const char *name;
};

struct jval jv_undef(const char *why);
struct jval jv_none(int lit);
struct jval jv_bool(int b, int lit);
struct jval jv_int(int64_t i, int lit);
struct jval jv_float(double f, int lit);
struct jval jv_str(struct jstr s);
struct jval jv_cstr(struct jz *z, const char *s, int origin);
struct jval jv_list(struct jz *z, int lit);
struct jval jv_dict(struct jz *z, int lit);
void jl_push(struct jz *z, struct jlist *l, struct jval v);
struct jval *jd_get(const struct jdict *d, struct jval key); /* NULL when absent */
struct jval *jd_getc(const struct jdict *d, const char *key);
void jd_set(struct jz *z, struct jdict *d, struct jval key, struct jval v);
void jd_setc(struct jz *z, struct jdict *d, const char *key, struct jval v);

int jv_truthy(struct jval v);
int jv_eq(struct jval a, struct jval b);
const char *jv_typename(struct jval v); /* Python's type name: 'str', 'int', 'dict', ... */
int jv_is_seq(struct jval v);           /* list or str: Sequence */
/* Python str(v) appended to b (strings keep their origins; what repr writes takes v's origin). */
void jv_str_to(struct jz *z, struct jsb *b, struct jval v, int line);
struct jstr jv_to_str(struct jz *z, struct jval v, int line);
/* json.dumps(v, ensure_ascii=False, indent, sort_keys) appended to b; indent < 0: none. */
void jv_json_to(struct jz *z, struct jsb *b, struct jval v, int indent, int sort_keys, int line);
struct jval jv_from_json(struct jz *z, const void *json, int origin); /* a jansson json_t */

/* UTF-8 helpers: code points of s, byte offset of code point k, whitespace character length at s[0..n). */
size_t ju_len(const char *s, size_t n);
size_t ju_off(const char *s, size_t n, size_t k);
size_t ju_space_at(const char *s, size_t n);
size_t ju_space_before(const char *s, size_t n);

/* ---- AST ---- */
enum nkind {
    /* expressions */
    N_LIT, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_NOT, N_NEG, N_POS, N_BIN, N_AND, N_OR,
    N_COND, N_LIST, N_TUPLE, N_DICT,
    /* statements */
    S_TEXT, S_OUT, S_IF, S_FOR, S_SET, S_SETBLOCK, S_MACRO, S_BREAK, S_CONTINUE,
};
enum binop { B_ADD, B_SUB, B_MUL, B_DIV, B_FDIV, B_MOD, B_POW, B_CAT, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE, B_IN, B_NOTIN };

struct nlist {
    struct node **v;
    const char **kw; /* call arguments: keyword name or NULL for positional; NULL array when none */
    size_t n, cap;
};
struct node {
    int kind, line, op; /* op: binop; N_TEST: negated; S_FOR: recursive (unsupported) */
    const char *name;   /* N_NAME, N_ATTR, N_FILTER, N_TEST, S_MACRO, S_SET attr target */
    struct node *a, *b, *c, *d;
    struct nlist args;  /* call/filter/test arguments; N_LIST/N_TUPLE items; N_DICT keys and values in turn */
    struct nlist body, orelse; /* statements */
    struct jval lit;    /* N_LIT */
    struct jstr text;   /* S_TEXT */
};

struct loom_jinja {
    struct jz z;
    struct nlist body;
};

/* ---- evaluation ---- */
struct jscope {
    struct jscope *parent;
    struct jdict vars;
};
struct jctx {
    struct jz z;
    struct jscope *root;
    int64_t now;
    int depth;
    int64_t iterations; /* loop iterations run so far (LOOM_JINJA_MAX_ITERATIONS) */
    uint64_t escapes;   /* namespace attribute assignments so far: values that may outlive a loop iteration */
};
struct jval jx_eval(struct jctx *c, struct jscope *s, const struct node *n);
/* The items iterating v walks, as Python does: a list's items, a dict's keys, a string's characters (UTF-8 code
 * points); undefined: none. Else fails "WHAT: 'TYPE' object is not iterable" (no "WHAT: " when what is NULL). */
struct jlist *jx_items(struct jctx *c, struct jval v, const char *what, int line);
/* Call a macro or a global function with evaluated arguments. */
struct jval jx_call_value(struct jctx *c, struct jval f, struct jval *pos, size_t npos, const char **kw,
                          struct jval *kwv, size_t nkw, int line);

/* builtins (jinja_builtins.c): filters and tests by name; methods of str and dict. */
int jb_has_filter(const char *name);
int jb_has_test(const char *name);
struct jval jb_filter(struct jctx *c, const char *name, struct jval v, struct jval *pos, size_t npos,
                      const char **kw, struct jval *kwv, size_t nkw, int line);
int jb_test(struct jctx *c, const char *name, struct jval v, struct jval *args, size_t nargs, int line);
struct jval jb_method(struct jctx *c, struct jval self, const char *name, struct jval *pos, size_t npos,
                      const char **kw, struct jval *kwv, size_t nkw, int line);
int jb_is_method(struct jval self, const char *name);
/* Python-style getattr-then-getitem (obj.name) and getitem-then-getattr (obj[key]). */
struct jval jb_getattr(struct jctx *c, struct jval obj, const char *name, int line);
struct jval jb_getitem(struct jctx *c, struct jval obj, struct jval key, int line);

#endif
