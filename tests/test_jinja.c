/* test_jinja.c — the Jinja interpreter (src/text/jinja*.c) against tests/fixtures/jinja/renders.json (regenerated
 * with tools/render_jinja.py: the reference's chat templates and small feature templates rendered by Python jinja2
 * under Hugging Face's settings): byte-exact renders and matching errors; provenance (caller text that spells
 * control tokens or template syntax stays DATA and never becomes special ids, also after split/trim/slice); the
 * built-in Qwen3.5 renderer as oracle (every tests/fixtures/chat case gives the same tokens through both); error
 * messages for unsupported constructs; per-render limits (runaway templates refused quickly with bounded memory,
 * loop iterations freeing their scope); the public loom_chat_template on a non-built-in template. Templates are read
 * from the reference's models/templates (skipped when absent). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "chat_fixture.h"
#include "test.h"
#include "text/chat.h"
#include "text/jinja.h"
#include "text/tokenizer.h"
#include "vocab_fixture.h"

#define FIXTURE "tests/fixtures/jinja/renders.json"
#define CHAT_FIXTURE "tests/fixtures/chat/qwen35.json"

static struct loom_tokenizer *g_qwen, *g_qwen_markers, *g_llama;
static int64_t g_now;

/* Write to path[cap] $LOOM_REF/FILE or ~/.cache/loom/ref/FILE; 1 when readable. */
static int ref_file(char *path, size_t cap, const char *file)
{
    const char *root = getenv("LOOM_REF"), *home = getenv("HOME");
    if (root && *root)
        snprintf(path, cap, "%s/%s", root, file);
    else
        snprintf(path, cap, "%s/.cache/loom/ref/%s", home ? home : ".", file);
    return access(path, R_OK) == 0;
}

static char *read_text(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        s = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (s && (fseek(f, 0, SEEK_SET) != 0 || fread(s, 1, (size_t)len, f) != (size_t)len)) {
            free(s);
            s = NULL;
        }
        if (s) {
            s[len] = '\0';
            *n = (size_t)len;
        }
    }
    if (f)
        fclose(f);
    return s;
}

static uint64_t fnv1a64(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

/* ---- provenance checks ---- */

static const char *const k_spell[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "</think>", "<think>",
                                      "<|eot_id|>", "<|start_header_id|>", "<|begin_of_text|>", "{{ messages }}",
                                      "{% if true %}", "<tool_call>", "</tool_response>"};

/* Every control or template-syntax spelling in a caller's text (contents, reasoning, tool arguments) that the
 * render shows is DATA: the DATA bytes hold it. Assistant contents holding </think> are split by the Qwen-family
 * templates, which drop parts of them; they are skipped. */
static int spellings_are_data(const struct loom_chat_render *r, const struct conv *c)
{
    size_t nd;
    char *d = kind_text(r, LOOM_CHAT_DATA, &nd);
    int ok = d != NULL;
    for (size_t i = 0; ok && i < c->n; i++) {
        const struct loom_chat_message *m = &c->msgs[i];
        const char *fields[2 + MAX_CALLS] = {m->content, m->reasoning_content};
        for (size_t k = 0; k < m->n_tool_calls; k++)
            fields[2 + k] = m->tool_calls[k].arguments;
        if (m->content && strstr(m->content, "</think>") && !strcmp(m->role, "assistant"))
            fields[0] = NULL;
        for (size_t f = 0; f < 2 + m->n_tool_calls; f++)
            for (size_t k = 0; fields[f] && k < sizeof k_spell / sizeof *k_spell; k++)
                if (strstr(fields[f], k_spell[k]) && strstr(r->text, k_spell[k]) && !strstr(d, k_spell[k]))
                    ok = 0;
    }
    free(d);
    return ok;
}

static int count_control_ids(const struct loom_tokenizer *tok, const int32_t *ids, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += (loom_tokenizer_token_attr(tok, ids[i]) & LOOM_TOKEN_CONTROL) != 0;
    return k;
}

static int encode_count(const struct loom_tokenizer *tok, const char *s, size_t n, int32_t **ids)
{
    int cap = (int)n + 16;
    *ids = malloc((size_t)cap * sizeof **ids);
    return *ids ? loom_tokenizer_encode(tok, s, n, 1, *ids, cap, NULL) : -1;
}

/* The render's special (CONTROL) ids are those of its CONTROL bytes alone: DATA spellings give none. When DATA
 * spells a special token, the whole text tokenized with parse_special = 1 has more of them. */
static void check_ids(const struct loom_tokenizer *tok, const struct loom_chat_render *r, const char *what)
{
    int32_t *ids = NULL, *ctl_ids = NULL, *all_ids = NULL;
    int n = 0;
    loom_error err = {0};
    if (loom_chat_tokenize(tok, r, &ids, &n, &err) != LOOM_OK) {
        CHECK(0, "%s: tokenize: %s", what, err.msg);
        return;
    }
    size_t nc, nd;
    char *ctl = kind_text(r, LOOM_CHAT_CONTROL, &nc), *data = kind_text(r, LOOM_CHAT_DATA, &nd);
    int m = encode_count(tok, ctl, nc, &ctl_ids), w = encode_count(tok, r->text, r->len, &all_ids);
    int k = count_control_ids(tok, ids, n), kc = count_control_ids(tok, ctl_ids, m);
    CHECK(m >= 0 && k == kc, "%s: %d special ids, %d in the CONTROL bytes alone", what, k, kc);
    int32_t *data_ids = NULL;
    int dn = data ? encode_count(tok, data, nd, &data_ids) : -1;
    if (dn > 0 && count_control_ids(tok, data_ids, dn) > 0)
        CHECK(w > 0 && count_control_ids(tok, all_ids, w) > k, "%s: DATA spelling special tokens gave special ids",
              what);
    else if (w >= 0)
        CHECK(w == n && !memcmp(ids, all_ids, (size_t)n * sizeof *ids),
              "%s: without special spellings in DATA the ids are the whole render's (%d vs %d)", what, n, w);
    free(data_ids);
    free(ids);
    free(ctl_ids);
    free(all_ids);
    free(ctl);
    free(data);
}

/* ---- the reference's templates ---- */

static int run_template_case(const struct loom_jinja *t, const json_t *control, const json_t *fx,
                             const struct loom_tokenizer *tok, const char *file)
{
    const char *name = json_string_value(json_object_get(fx, "name"));
    const char *expected = str_or_null(json_object_get(fx, "expected"));
    const char *error = str_or_null(json_object_get(fx, "error"));
    char what[200];
    snprintf(what, sizeof what, "%s / %s", file, name);
    struct conv c;
    if (conv_load(&c, json_object_get(fx, "input")) != 0) {
        CHECK(0, "%s: fixture exceeds the test's limits", what);
        conv_free(&c);
        return 0;
    }
    struct loom_chat_render r = {0};
    loom_error err = {0};
    int rc = loom_chat_render_jinja(t, c.msgs, c.n, &c.p, control, g_now, &r, &err), good = 0;
    if (expected) {
        good = rc == LOOM_OK && r.len == strlen(expected) && !memcmp(r.text, expected, r.len);
        CHECK(good, "%s: render differs from jinja2 (rc %d: %s)\n--- loom:\n%s\n--- jinja2:\n%s", what, rc, err.msg,
              r.text ? r.text : "", expected);
        if (rc == LOOM_OK) {
            CHECK(segments_ok(&r), "%s: segments do not tile the text", what);
            CHECK(spellings_are_data(&r, &c), "%s: a caller's control spelling is not DATA", what);
            if (tok)
                check_ids(tok, &r, what);
        }
    } else {
        int raised = !strcmp(json_string_value(json_object_get(fx, "error_kind")), "raise_exception");
        good = rc != LOOM_OK && (raised ? rc == LOOM_E_ARG && !strcmp(err.msg, error)
                                        : rc == LOOM_E_FORMAT && !strncmp(err.msg, "jinja: line ", 12));
        CHECK(good, "%s: expected the error '%s', found rc %d '%s'", what, error, rc, err.msg);
    }
    loom_chat_render_free(&r);
    conv_free(&c);
    return good;
}

static void test_templates(const json_t *doc)
{
    const json_t *templates = json_object_get(doc, "templates");
    int n_good = 0, n_cases = 0, n_templates = 0;
    for (size_t i = 0; i < json_array_size(templates); i++) {
        const json_t *tj = json_array_get(templates, i);
        const char *file = json_string_value(json_object_get(tj, "file"));
        char rel[300], path[700];
        snprintf(rel, sizeof rel, "src/models/templates/%s", file);
        size_t n = 0;
        char *text = ref_file(path, sizeof path, rel) ? read_text(path, &n) : NULL;
        if (!text) {
            printf("skip: %s not found (its renders not checked)\n", path);
            continue;
        }
        char hash[17];
        snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a64(text, n));
        CHECK(n == (size_t)json_integer_value(json_object_get(tj, "bytes")) &&
                  !strcmp(hash, json_string_value(json_object_get(tj, "fnv1a64"))),
              "%s: the template text is the one the fixture was rendered from", file);
        struct loom_jinja *t = NULL;
        loom_error err = {0};
        int rc = loom_jinja_parse(text, n, &t, &err);
        CHECK(rc == LOOM_OK, "%s: parse: %s", file, err.msg);
        free(text);
        if (rc != LOOM_OK)
            continue;
        n_templates++;
        const struct loom_tokenizer *tok = strstr(file, "llama") || strstr(file, "Llama") ? g_llama : g_qwen;
        const json_t *cases = json_object_get(tj, "cases");
        for (size_t k = 0; k < json_array_size(cases); k++, n_cases++)
            n_good += run_template_case(t, json_object_get(tj, "control"), json_array_get(cases, k), tok, file);
        loom_jinja_free(t);
    }
    printf("reference templates: %d of %d renders and errors match jinja2 (%d templates)\n", n_good, n_cases,
           n_templates);
}

/* ---- feature snippets ---- */

static void test_snippets(const json_t *doc)
{
    const json_t *snips = json_object_get(doc, "snippets"), *vars = json_object_get(doc, "vars");
    int good_n = 0;
    for (size_t i = 0; i < json_array_size(snips); i++) {
        const json_t *s = json_array_get(snips, i);
        const char *name = json_string_value(json_object_get(s, "name"));
        const char *text = json_string_value(json_object_get(s, "template"));
        const char *expected = str_or_null(json_object_get(s, "expected"));
        const char *error = str_or_null(json_object_get(s, "error"));
        struct loom_jinja *t = NULL;
        struct loom_chat_render r = {0};
        loom_error err = {0};
        struct loom_jinja_opts o = {g_now};
        int rc = loom_jinja_parse(text, strlen(text), &t, &err);
        if (rc == LOOM_OK)
            rc = loom_jinja_render(t, vars, NULL, &o, &r, &err);
        int good;
        if (expected) {
            good = rc == LOOM_OK && r.len == strlen(expected) && !memcmp(r.text, expected, r.len);
            CHECK(good, "snippet %s: (rc %d: %s)\n--- loom:\n%s\n--- jinja2:\n%s", name, rc, err.msg,
                  r.text ? r.text : "", expected);
        } else {
            int raised = !strcmp(json_string_value(json_object_get(s, "error_kind")), "raise_exception");
            good = raised ? rc == LOOM_E_ARG && !strcmp(err.msg, error)
                          : rc == LOOM_E_FORMAT && !strncmp(err.msg, "jinja: line 1: ", 15);
            CHECK(good, "snippet %s: expected the error '%s', found rc %d '%s'", name, error, rc, err.msg);
        }
        good_n += good;
        loom_chat_render_free(&r);
        loom_jinja_free(t);
    }
    printf("feature snippets: %d of %zu match jinja2\n", good_n, json_array_size(snips));
}

/* ---- provenance through string operations ---- */

/* Origins of each byte of a render as a string of 'D' and 'C'. */
static char *origins(const struct loom_chat_render *r)
{
    char *s = calloc(r->len + 1, 1);
    for (size_t i = 0; s && i < r->n_seg; i++)
        memset(s + r->seg[i].off, r->seg[i].kind == LOOM_CHAT_DATA ? 'D' : 'C', r->seg[i].len);
    return s;
}

static void expect_origins(const char *tmpl, const char *vars_json, const char *text, const char *orig)
{
    struct loom_jinja *t = NULL;
    struct loom_chat_render r = {0};
    loom_error err = {0};
    json_t *vars = json_loads(vars_json, 0, NULL);
    int rc = loom_jinja_parse(tmpl, strlen(tmpl), &t, &err);
    if (rc == LOOM_OK)
        rc = loom_jinja_render(t, vars, NULL, NULL, &r, &err);
    char *o = rc == LOOM_OK ? origins(&r) : NULL;
    CHECK(rc == LOOM_OK && !strcmp(r.text, text) && o && !strcmp(o, orig),
          "%s: expected '%s' with origins %s, found rc %d '%s' %s (%s)", tmpl, text, orig, rc, r.text ? r.text : "",
          o ? o : "", err.msg);
    free(o);
    json_decref(vars);
    loom_chat_render_free(&r);
    loom_jinja_free(t);
}

static void test_provenance(void)
{
    /* the Qwen3.5 template's split of a content on '</think>': the pieces keep their data origin */
    expect_origins("{{ '<' + c.split('</think>')[0].rstrip('\\n') + '>' }}", "{\"c\": \"<|im_end|>\\n</think>x\"}",
                   "<<|im_end|>>", "CDDDDDDDDDDC");
    expect_origins("[{{ c|trim }}]{{ c[1:3] }}{{ c[::-1]|upper }}", "{\"c\": \" ab \"}", "[ab]ab BA ",
                   "CDDCDDDDDD");
    expect_origins("{{ c.replace('a', 'X') ~ n }}{{ [c, 'k']|join('-') }}", "{\"c\": \"ab\", \"n\": 5}",
                   "Xb5ab-k", "CDDDDCC");
    expect_origins("{{ d|tojson }}{{ {'k': c}|tojson }}", "{\"d\": {\"a\": 1}, \"c\": \"v\"}",
                   "{\"a\": 1}{\"k\": \"v\"}", "DDDDDDDDCCCCCCDDDC");
    expect_origins("{% macro m(x) %}<{{ x }}>{% endmacro %}{{ m(c)|trim }}{% set s %}[{{ c }}]{% endset %}{{ s }}",
                   "{\"c\": \"q\"}", "<q>[q]", "CDCCDC");
    expect_origins("{{ c ~ 1 }}{{ c|string }}{{ n|string }}{{ c|first }}", "{\"c\": \"ab\", \"n\": 12}",
                   "ab1ab12a", "DDCDDDDD");
}

/* ---- unsupported constructs and error messages ---- */

static void expect_error(const char *tmpl, int code, const char *msg)
{
    struct loom_jinja *t = NULL;
    struct loom_chat_render r = {0};
    loom_error err = {0};
    json_t *vars = json_loads("{\"x\": 1}", 0, NULL);
    int rc = loom_jinja_parse(tmpl, strlen(tmpl), &t, &err);
    if (rc == LOOM_OK)
        rc = loom_jinja_render(t, vars, NULL, NULL, &r, &err);
    CHECK(rc == code && strstr(err.msg, msg) && !r.text, "%s: expected %d '%s', found %d '%s'", tmpl, code, msg, rc,
          err.msg);
    json_decref(vars);
    loom_chat_render_free(&r);
    loom_jinja_free(t);
}

static void test_errors(void)
{
    expect_error("a\n{{ x|wordwrap }}", LOOM_E_FORMAT, "jinja: line 2: filter 'wordwrap' is not supported");
    expect_error("{% include 'x' %}", LOOM_E_FORMAT, "jinja: line 1: tag 'include' is not supported");
    expect_error("\n\n{% if x is prime %}{% endif %}", LOOM_E_FORMAT, "jinja: line 3: test 'prime' is not supported");
    expect_error("{% if x %}", LOOM_E_FORMAT, "'if' block not closed");
    expect_error("{% endfor %}", LOOM_E_FORMAT, "unexpected tag 'endfor'");
    expect_error("{{ x + }}", LOOM_E_FORMAT, "jinja: line 1: expected an expression");
    expect_error("{{ 'a }}", LOOM_E_FORMAT, "unterminated string");
    expect_error("{{ raise_exception('Bad role: ' ~ x) }}", LOOM_E_ARG, "Bad role: 1");
    expect_error("\n{{ y.attr }}", LOOM_E_FORMAT, "jinja: line 2: 'y' is undefined");
    expect_error("{{ x.attr.more }}", LOOM_E_FORMAT, "'int object' has no attribute 'attr'");
    expect_error("{{ 'abc'.zfill(5) }}", LOOM_E_FORMAT,
                 "jinja: line 1: method 'zfill' of str is not supported by loom's interpreter");
    expect_error("\n{{ '{}'.format(x) }}", LOOM_E_FORMAT,
                 "jinja: line 2: method 'format' of str is not supported by loom's interpreter");
    expect_error("{% for a in [1] %}{{ loop.cycle('a', 'b') }}{% endfor %}", LOOM_E_FORMAT,
                 "jinja: line 1: method 'cycle' of loop is not supported by loom's interpreter");
    expect_error("{{ [1].index(1) }}", LOOM_E_FORMAT, "method 'index' of list is not supported by loom's interpreter");
    expect_error("{{ {'a': 1}.b.c }}", LOOM_E_FORMAT, "'dict object' has no attribute 'b'"); /* not a method */
    expect_error("{{ 'a' % 1 }}", LOOM_E_FORMAT, "string formatting with % is not supported");
    expect_error("{% macro m(a) %}{{ m(a) }}{% endmacro %}{{ m(1) }}", LOOM_E_FORMAT, "nested calls");
    expect_error("{% for a in x recursive %}{% endfor %}", LOOM_E_FORMAT, "recursive for loops are not supported");
}

/* ---- per-render limits (jinja.h) ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long max_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* Render tmpl with no variables: its rc, with the text in *r. */
static int render_plain(const char *tmpl, struct loom_chat_render *r, loom_error *err)
{
    struct loom_jinja *t = NULL;
    int rc = loom_jinja_parse(tmpl, strlen(tmpl), &t, err);
    if (rc == LOOM_OK)
        rc = loom_jinja_render(t, NULL, NULL, NULL, r, err);
    loom_jinja_free(t);
    return rc;
}

/* A 4001-message conversation (user/assistant in turn, 200-byte contents) through Qwen3's template renders. */
static void test_long_conversation(void)
{
    char path[700];
    size_t n = 0;
    char *text = ref_file(path, sizeof path, "src/models/templates/Qwen-Qwen3-0.6B.jinja") ? read_text(path, &n)
                                                                                            : NULL;
    struct loom_jinja *t = NULL;
    loom_error err = {0};
    if (!text || loom_jinja_parse(text, n, &t, &err) != LOOM_OK) {
        printf("skip: Qwen3 template absent (long-conversation render not checked) %s\n", err.msg);
        free(text);
        return;
    }
    enum { N = 4001 };
    static loom_chat_message msgs[N];
    static char content[N][201];
    for (int i = 0; i < N; i++) {
        memset(content[i], 'a' + i % 26, 200);
        msgs[i] = (loom_chat_message){.role = i % 2 ? "assistant" : "user", .content = content[i]};
    }
    loom_chat_params p = {.add_generation_prompt = 1};
    struct loom_chat_render r = {0};
    double t0 = now_s();
    int rc = loom_chat_render_jinja(t, msgs, N, &p, NULL, g_now, &r, &err);
    CHECK(rc == LOOM_OK && r.len > (size_t)N * 200, "Qwen3 template, %d messages: rc %d %s", N, rc, err.msg);
    printf("limits: a %d-message Qwen3 render: %zu bytes in %.2f s\n", N, r.len, now_s() - t0);
    loom_chat_render_free(&r);
    loom_jinja_free(t);
    free(text);
}

static void test_limits(void)
{
    static const struct {
        const char *tmpl, *msg;
    } runaway[] = {
        {"{% set ns = namespace(s=\"x\") %}\n{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
         "{{ ns.s|length }}",
         "jinja: line 2: the render exceeds 256 MiB of strings/values (loom's limit)"},
        {"{% for i in range(3000) %}\n{% for j in range(3000) %}{% endfor %}{% endfor %}",
         "jinja: line 2: more than 1000000 loop iterations in one render (loom's limit)"},
        {"{% for i in range(2000) if i is odd %}{% for j in range(2000) %}{% endfor %}{% endfor %}",
         "more than 1000000 loop iterations in one render (loom's limit)"},
        {"{{ ('x' * 100000) * 3000 }}", "jinja: line 1: the render exceeds 256 MiB of strings/values"},
    };
    for (size_t i = 0; i < sizeof runaway / sizeof *runaway; i++) {
        struct loom_chat_render r = {0};
        loom_error err = {0};
        double t0 = now_s();
        int rc = render_plain(runaway[i].tmpl, &r, &err);
        double dt = now_s() - t0;
        /* the limits count iterations and bytes, so they stop a render whatever the machine's speed: the time is
         * printed, not asserted (a loaded machine under ASan took 45 s where a quiet one takes a few) */
        CHECK(rc == LOOM_E_RANGE && strstr(err.msg, runaway[i].msg) && !r.text,
              "runaway template %zu refused: expected '%s', found rc %d '%s' after %.2f s", i, runaway[i].msg, rc,
              err.msg, dt);
        printf("limits: runaway template %zu refused in %.2f s (peak RSS so far %ld MB)\n", i, dt, max_rss_mb());
        loom_chat_render_free(&r);
    }
    /* Loop iterations free their scope: 899100 iterations that keep nothing stay within the byte limit (the old
     * interpreter held ~4 KB per iteration: 3.6 GB), and the output still accumulates across iterations (range()
     * itself stops at 100000 items). */
    struct loom_chat_render r = {0};
    loom_error err = {0};
    int rc = render_plain("{% for i in range(900) %}{% set o = loop %}{% for j in range(999) %}"
                          "{% set x = 'abc' ~ i ~ '-' ~ j %}{% if o.last and loop.last %}{{ x }}{% endif %}"
                          "{% endfor %}{% endfor %}|{% for i in range(3) %}{{ i }}{% set y = [i, i] %}{% endfor %}",
                          &r, &err);
    CHECK(rc == LOOM_OK && r.text && !strcmp(r.text, "abc899-998|012"), "899100 iterations: rc %d '%s' %s", rc,
          r.text ? r.text : "", err.msg);
    loom_chat_render_free(&r);
    long rss = max_rss_mb();
    CHECK(rss < 1536, "peak RSS after the runaway templates: %ld MB (expected < 1536; ASan's quarantine adds some)",
          rss);
    printf("limits: peak RSS %ld MB\n", rss);
    test_long_conversation();
}

/* ---- the built-in Qwen3.5 renderer as oracle ---- */

static int same_ids(const struct loom_tokenizer *tok, const struct loom_chat_render *a,
                    const struct loom_chat_render *b)
{
    int32_t *x = NULL, *y = NULL;
    int nx = 0, ny = 0;
    int ok = loom_chat_tokenize(tok, a, &x, &nx, NULL) == LOOM_OK && loom_chat_tokenize(tok, b, &y, &ny, NULL) == LOOM_OK &&
             nx == ny && !memcmp(x, y, (size_t)nx * sizeof *x);
    free(x);
    free(y);
    return ok;
}

static void test_oracle(void)
{
    char path[700];
    size_t n = 0;
    char *text = ref_file(path, sizeof path, "src/models/templates/Qwen3.5-4B.jinja") ? read_text(path, &n) : NULL;
    json_t *doc = json_load_file(CHAT_FIXTURE, 0, NULL);
    if (!text || !doc) {
        printf("skip: %s or %s not found (oracle not run)\n", path, CHAT_FIXTURE);
        free(text);
        json_decref(doc);
        return;
    }
    struct loom_jinja *t = NULL;
    loom_error err = {0};
    CHECK(loom_jinja_parse(text, n, &t, &err) == LOOM_OK, "Qwen3.5-4B.jinja: %s", err.msg);
    const json_t *cases = json_object_get(doc, "cases");
    int same = 0, same_segs = 0, same_tok = 0, n_tok = 0;
    for (size_t i = 0; t && i < json_array_size(cases); i++) {
        const json_t *fx = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(fx, "name"));
        struct conv c;
        if (conv_load(&c, json_object_get(fx, "input")) != 0) {
            conv_free(&c);
            continue;
        }
        struct loom_chat_render a = {0}, b = {0};
        loom_error ea = {0}, eb = {0};
        int ra = loom_chat_render_qwen35(c.msgs, c.n, &c.p, &a, &ea);
        int rb = loom_chat_render_jinja(t, c.msgs, c.n, &c.p, NULL, g_now, &b, &eb);
        int ok = ra == rb && (ra != LOOM_OK ? !strcmp(ea.msg, eb.msg) || ra == LOOM_E_ARG
                                            : a.len == b.len && !memcmp(a.text, b.text, a.len));
        CHECK(ok, "oracle %s: built-in rc %d '%s' / interpreter rc %d '%s'\n--- built-in:\n%s\n--- jinja:\n%s", name,
              ra, ea.msg, rb, eb.msg, a.text ? a.text : "", b.text ? b.text : "");
        same += ok;
        if (ok && ra == LOOM_OK) {
            int segs = a.n_seg == b.n_seg && !memcmp(a.seg, b.seg, a.n_seg * sizeof *a.seg);
            if (!segs && getenv("JINJA_DEBUG"))
                for (size_t k = 0; k < a.n_seg || k < b.n_seg; k++)
                    printf("%s seg %zu: built-in %zu+%zu %d | jinja %zu+%zu %d\n", name, k, k < a.n_seg ? a.seg[k].off : 0,
                           k < a.n_seg ? a.seg[k].len : 0, k < a.n_seg ? (int)a.seg[k].kind : -1,
                           k < b.n_seg ? b.seg[k].off : 0, k < b.n_seg ? b.seg[k].len : 0,
                           k < b.n_seg ? (int)b.seg[k].kind : -1);
            same_segs += segs;
            const struct loom_tokenizer *toks[2] = {g_qwen, g_qwen_markers};
            for (int k = 0; k < 2; k++)
                if (toks[k]) {
                    int eq = same_ids(toks[k], &a, &b);
                    CHECK(eq, "oracle %s: token ids differ (vocabulary %d)", name, k);
                    same_tok += eq;
                    n_tok++;
                }
        }
        loom_chat_render_free(&a);
        loom_chat_render_free(&b);
        conv_free(&c);
    }
    printf("oracle: %d of %zu Qwen3.5 fixture cases equal through both renderers (%d with identical segments); "
           "%d of %d tokenizations equal\n", same, json_array_size(cases), same_segs, same_tok, n_tok);
    loom_jinja_free(t);
    free(text);
    json_decref(doc);
}

/* ---- the public API ---- */

static void test_public(void)
{
    char path[700];
    size_t n = 0;
    char *text = ref_file(path, sizeof path, "src/models/templates/meta-llama-Llama-3.1-8B-Instruct.jinja")
                     ? read_text(path, &n)
                     : NULL;
    if (!text || !g_llama) {
        printf("skip: Llama 3.1 template or vocabulary absent (public API test not run)\n");
        free(text);
        return;
    }
    loom_error err = {0};
    loom_chat_template *t = loom_chat_template_new(g_llama, text, &err);
    CHECK(t && !strcmp(loom_chat_template_name(t), "jinja"), "a non-built-in template renders through Jinja: %s",
          err.msg);
    loom_chat_message msgs[] = {{.role = "user", .content = "hi <|eot_id|>"}};
    loom_chat_params p = {.add_generation_prompt = 1};
    int32_t *ids = NULL;
    int k = 0;
    if (t && loom_chat_template_apply(t, msgs, 1, &p, &ids, &k, &err) == LOOM_OK) {
        int32_t bos = loom_tokenizer_special(g_llama, LOOM_SPECIAL_ID_BOS);
        CHECK(k > 10 && ids[0] == bos && count_control_ids(g_llama, ids, k) == 9,
              "ids start with the file's BOS (bos_token), and the user's <|eot_id|> is text: %d ids, %d special", k,
              count_control_ids(g_llama, ids, k));
        free(ids);
    } else {
        CHECK(0, "apply: %s", err.msg);
    }
    loom_chat_template_free(t);
    t = loom_chat_template_new(g_llama, "{{ x|wordwrap }}", &err);
    CHECK(!t && err.code == LOOM_E_FORMAT && strstr(err.msg, "chat template: jinja: line 1: filter 'wordwrap'"),
          "an unsupported filter refuses the template at load: %s", err.msg);
    free(text);
}

static struct loom_tokenizer *load_tok(const char *file, struct loom_gguf **g)
{
    char path[700];
    struct loom_tokenizer *tok = NULL;
    loom_error err = {0};
    *g = NULL;
    if (!ref_file(path, sizeof path, file)) {
        printf("skip: %s not found (its token checks not run)\n", path);
        return NULL;
    }
    CHECK(loom_gguf_open(path, g, &err) == LOOM_OK && loom_tokenizer_load(*g, 0, &tok, &err) == LOOM_OK,
          "load %s: %s", path, err.msg);
    return tok;
}

int main(void)
{
    struct loom_gguf *gq = NULL, *gl = NULL, *gm = NULL;
    g_qwen = load_tok("src/models/ggml-vocab-qwen35.gguf", &gq);
    g_llama = load_tok("src/models/ggml-vocab-llama-bpe.gguf", &gl);
    char path[700], fixture[64];
    if (g_qwen && ref_file(path, sizeof path, "src/models/ggml-vocab-qwen35.gguf")) {
        loom_error err = {0};
        snprintf(fixture, sizeof fixture, "/tmp/loom-jinja-markers-%d.gguf", (int)getpid());
        CHECK(write_qwen_markers_vocab(path, fixture) == 0 && loom_gguf_open(fixture, &gm, &err) == LOOM_OK &&
                  loom_tokenizer_load(gm, 0, &g_qwen_markers, &err) == LOOM_OK,
              "qwen35-markers vocabulary: %s", err.msg);
        unlink(fixture);
    }
    setenv("TZ", "UTC", 1);
    json_error_t je;
    json_t *doc = json_load_file(FIXTURE, 0, &je);
    CHECK(doc != NULL, "load %s: %s (line %d); run from the repository root", FIXTURE, je.text, je.line);
    if (doc) {
        g_now = json_integer_value(json_object_get(doc, "now"));
        test_snippets(doc);
        test_templates(doc);
        json_decref(doc);
    }
    test_provenance();
    test_errors();
    test_limits();
    test_oracle();
    test_public();
    loom_tokenizer_free(g_qwen);
    loom_tokenizer_free(g_qwen_markers);
    loom_tokenizer_free(g_llama);
    loom_gguf_close(gq);
    loom_gguf_close(gl);
    loom_gguf_close(gm);
    return test_finish();
}
