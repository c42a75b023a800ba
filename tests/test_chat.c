/* test_chat.c — the native Qwen3.5 chat renderer against tests/fixtures/chat/qwen35.json (conversations rendered
 * by the official template under Hugging Face's Jinja settings, regenerated with tools/render_chat.py): byte-exact
 * text, template errors, segment provenance, untouched output on failure, Python-style JSON, and (when the
 * reference's qwen35 vocabulary is present, alone and with Qwen's USER_DEFINED markers) that only
 * template-authored markers become special token ids, through the public loom_chat_template too; and the public
 * model metadata on the prepared tiny model. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_fixture.h"
#include "test.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "vocab_fixture.h"

#define FIXTURE "tests/fixtures/chat/qwen35.json"

/* Every caller content that holds a control spelling keeps it inside DATA (except an assistant's </think>
 * split, which the template consumes when no reasoning_content is given). */
static int literal_controls_are_data(const struct loom_chat_render *r, const struct conv *c)
{
    static const char *spell[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "</think>", "<tool_call>"};
    size_t nd;
    char *d = kind_text(r, LOOM_CHAT_DATA, &nd);
    int ok = d != NULL;
    for (size_t i = 0; ok && i < c->n; i++) {
        const struct loom_chat_message *m = &c->msgs[i];
        if (m->content && !m->reasoning_content && strstr(m->content, "</think>") && !strcmp(m->role, "assistant"))
            continue;
        for (size_t k = 0; k < sizeof spell / sizeof *spell; k++)
            if (c->msgs[i].content && strstr(c->msgs[i].content, spell[k]) && !strstr(d, spell[k]))
                ok = 0;
    }
    free(d);
    return ok;
}

static struct loom_tokenizer *g_tok; /* the reference's qwen35 vocabulary, when present */
static struct loom_tokenizer *g_tok_markers; /* the same with Qwen's USER_DEFINED markers (vocab_fixture.h) */
static int g_n_token_cases;

/* Special ids: <|endoftext|>, <|im_start|>, <|im_end|>, and with markers Qwen's added tokens up to </think>. */
static int count_special(const int32_t *ids, int n, int markers)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += ids[i] >= 151643 && ids[i] <= (markers ? 151668 : 151645);
    return k;
}

/* Occurrences of the vocabulary's control spellings (with markers, Qwen's USER_DEFINED ones too) in the
 * CONTROL (control = 1) or DATA bytes of r. */
static int count_spellings(const struct loom_chat_render *r, int control, int markers)
{
    static const char *spell[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                                  "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"};
    int k = 0, n_spell = markers ? 9 : 3;
    for (size_t i = 0; i < r->n_seg; i++) {
        if ((r->seg[i].kind == LOOM_CHAT_CONTROL) != control)
            continue;
        for (size_t j = 0; j < r->seg[i].len; j++)
            for (int t = 0; t < n_spell; t++)
                k += r->seg[i].len - j >= strlen(spell[t]) &&
                     !memcmp(r->text + r->seg[i].off + j, spell[t], strlen(spell[t]));
    }
    return k;
}

/* Special ids come exactly from the template's markers; without special spellings in DATA, the ids equal the
 * whole render tokenized with parse_special = 1 (how the reference tokenizes a rendered prompt). markers: tok
 * is g_tok_markers, where <think>, <tool_call> and the like are USER_DEFINED tokens. */
static void check_tokens(const struct loom_tokenizer *tok, int markers, const struct loom_chat_render *r,
                         const char *name)
{
    int32_t *ids = NULL;
    int n = 0;
    loom_error err = {0};
    if (loom_chat_tokenize(tok, r, &ids, &n, &err) != LOOM_OK) {
        CHECK(0, "%s: tokenize: %s", name, err.msg);
        return;
    }
    CHECK(count_special(ids, n, markers) == count_spellings(r, 1, markers), "%s%s: %d special ids, %d template "
          "markers", name, markers ? " (markers)" : "", count_special(ids, n, markers), count_spellings(r, 1, markers));
    int32_t *whole = malloc(((size_t)n + r->len + 16) * sizeof *whole);
    int m = whole ? loom_tokenizer_encode(tok, r->text, r->len, 1, whole, n + (int)r->len + 16, &err) : -1;
    int equal = m == n && !memcmp(ids, whole, (size_t)n * sizeof *ids);
    if (count_spellings(r, 0, markers) == 0) {
        CHECK(equal, "%s%s: ids differ from the whole render's (%d vs %d ids)", name, markers ? " (markers)" : "",
              n, m);
        g_n_token_cases += equal;
    } else {
        CHECK(!equal && m > 0 && count_special(whole, m, markers) > count_special(ids, n, markers),
              "%s%s: DATA spelling controls must not give special ids", name, markers ? " (markers)" : "");
    }
    free(whole);
    free(ids);
}

static void run_case(const json_t *fx, int *n_exact, int *n_errors, int *counts)
{
    const char *name = json_string_value(json_object_get(fx, "name"));
    const char *expected = str_or_null(json_object_get(fx, "expected"));
    const char *error = str_or_null(json_object_get(fx, "error"));
    int origin_template = !strcmp(json_string_value(json_object_get(fx, "origin")), "template");
    counts[origin_template]++;
    struct conv c;
    if (conv_load(&c, json_object_get(fx, "input")) != 0) {
        CHECK(0, "%s: fixture exceeds the test's limits", name);
        conv_free(&c);
        return;
    }
    struct loom_chat_render r = {0};
    loom_error err = {0};
    int rc = loom_chat_render_qwen35(c.msgs, c.n, &c.p, &r, &err);
    if (expected) {
        int exact = rc == LOOM_OK && r.len == strlen(expected) && !memcmp(r.text, expected, r.len);
        CHECK(exact, "%s: render differs from the template (rc %d: %s)\n--- loom:\n%s\n--- template:\n%s", name, rc,
              err.msg, r.text ? r.text : "", expected);
        *n_exact += exact;
        if (rc == LOOM_OK) {
            CHECK(segments_ok(&r), "%s: segments do not tile the text", name);
            CHECK(literal_controls_are_data(&r, &c), "%s: a caller's control spelling is not DATA", name);
            if (g_tok)
                check_tokens(g_tok, 0, &r, name);
            if (g_tok_markers)
                check_tokens(g_tok_markers, 1, &r, name);
        }
    } else {
        int same = rc == LOOM_E_ARG &&
                   (strcmp(json_string_value(json_object_get(fx, "error_kind")), "raise_exception") ||
                    !strcmp(err.msg, error));
        CHECK(same, "%s: expected the template's error '%s', found rc %d '%s'", name, error, rc, err.msg);
        *n_errors += same;
    }
    loom_chat_render_free(&r);
    conv_free(&c);
}

static void test_fixture_cases(const json_t *doc)
{
    const json_t *cases = json_object_get(doc, "cases");
    int n_exact = 0, n_errors = 0, counts[2] = {0};
    for (size_t i = 0; i < json_array_size(cases); i++)
        run_case(json_array_get(cases, i), &n_exact, &n_errors, counts);
    CHECK(json_array_size(cases) >= 40, "at least 40 conversations (found %zu)", json_array_size(cases));
    printf("chat fixtures: %d byte-exact renders, %d template errors matched, of %zu conversations "
           "(%d rendered by the template, %d contract controls)\n",
           n_exact, n_errors, json_array_size(cases), counts[1], counts[0]);
}

static void test_json_python(const json_t *doc)
{
    const json_t *cases = json_object_get(doc, "json_python");
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *cs = json_array_get(cases, i);
        const char *in = json_string_value(json_object_get(cs, "json"));
        for (int as_str = 0; as_str < 2; as_str++) {
            const char *want = json_string_value(json_object_get(cs, as_str ? "str" : "dumps"));
            char *got = NULL;
            loom_error err = {0};
            int rc = loom_chat_json_python(in, strlen(in), as_str, "sample", &got, &err);
            CHECK(rc == LOOM_OK && !strcmp(got, want), "%s of %s: expected '%s', found '%s' (%s)",
                  as_str ? "str" : "json.dumps", in, want, got ? got : "", err.msg);
            free(got);
        }
    }
    char *got = (char *)"untouched";
    loom_error err = {0};
    CHECK(loom_chat_json_python("{\"a\":", 5, 0, "sample", &got, &err) == LOOM_E_ARG && !strcmp(got, "untouched") &&
              strstr(err.msg, "sample"),
          "malformed JSON is an error naming the field: %s", err.msg);
}

static void test_failure_leaves_output(void)
{
    struct loom_chat_message ok[] = {{.role = "user", .content = "hi"}};
    struct loom_chat_message bad[] = {{.role = "user", .content = "hi"}, {.role = "system", .content = "late"}};
    struct loom_chat_tool_call call = {.name = "f", .arguments = "[1, 2]"};
    struct loom_chat_message bad_args[] = {{.role = "user", .content = "q"},
                                           {.role = "assistant", .tool_calls = &call, .n_tool_calls = 1}};
    struct loom_chat_params p = {.add_generation_prompt = 1};
    struct loom_chat_render r = {0};
    loom_error err = {0};
    CHECK(loom_chat_render_qwen35(ok, 1, &p, &r, &err) == LOOM_OK, "render: %s", err.msg);
    struct loom_chat_render before = r;
    CHECK(loom_chat_render_qwen35(bad, 2, &p, &r, &err) == LOOM_E_ARG &&
              !strcmp(err.msg, "System message must be at the beginning."),
          "late system message: %s", err.msg);
    CHECK(loom_chat_render_qwen35(bad_args, 2, &p, &r, &err) == LOOM_E_ARG && strstr(err.msg, "arguments"),
          "array arguments: %s", err.msg);
    p.tools = "{\"not\": \"an array\"}";
    CHECK(loom_chat_render_qwen35(ok, 1, &p, &r, &err) == LOOM_E_ARG && strstr(err.msg, "tools"),
          "tools not an array: %s", err.msg);
    CHECK(!memcmp(&before, &r, sizeof r) && !strcmp(r.text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
                                                            "<think>\n"),
          "a failed render leaves the previous output untouched");
    loom_chat_render_free(&r);
}

/* Write to path[cap] $ENV/FILE, or ~/.cache/loom/DIR/FILE when ENV is unset (LOOM_REF: the reference's folder,
 * DIR "ref"; LOOM_CACHE: the cache, DIR ""). Returns 1 when it is readable; else says which tests are skipped. */
static int cached_file(char *path, size_t cap, const char *env, const char *dir, const char *file, const char *what)
{
    const char *root = getenv(env), *home = getenv("HOME");
    if (root && *root)
        snprintf(path, cap, "%s/%s", root, file);
    else
        snprintf(path, cap, "%s/.cache/loom/%s%s%s", home ? home : ".", dir, *dir ? "/" : "", file);
    if (access(path, R_OK) == 0)
        return 1;
    printf("skip: %s not found (%s tests not run)\n", path, what);
    return 0;
}

/* Load the reference's qwen35 vocabulary into g_tok, and the qwen35-markers fixture made from it into
 * g_tok_markers (*gm; skipped when the reference is absent). */
static struct loom_gguf *load_vocab(struct loom_gguf **gm)
{
    char path[600], fixture[64];
    *gm = NULL;
    if (!cached_file(path, sizeof path, "LOOM_REF", "ref", "src/models/ggml-vocab-qwen35.gguf", "token provenance"))
        return NULL;
    loom_error err = {0};
    struct loom_gguf *g = NULL;
    CHECK(loom_gguf_open(path, &g, &err) == LOOM_OK && loom_tokenizer_load(g, 151936, &g_tok, &err) == LOOM_OK,
          "load %s: %s", path, err.msg);
    snprintf(fixture, sizeof fixture, "/tmp/loom-chat-markers-%d.gguf", (int)getpid());
    CHECK(write_qwen_markers_vocab(path, fixture) == 0 && loom_gguf_open(fixture, gm, &err) == LOOM_OK &&
              loom_tokenizer_load(*gm, 151936, &g_tok_markers, &err) == LOOM_OK,
          "write and load the qwen35-markers fixture: %s", err.msg);
    unlink(fixture);
    return g;
}

/* With Qwen's markers as USER_DEFINED tokens (as in real Qwen GGUFs): the template's <think> and </think>
 * become their ids, a user's spellings of </think>, <tool_call> and </tool_call> stay text. */
static void test_marker_tokens(void)
{
    loom_error err = {0};
    loom_chat_message msgs[] = {{.role = "user", .content = "a</think>b<tool_call>{}</tool_call>c"}};
    loom_chat_params p = {.add_generation_prompt = 1, .think = LOOM_CHAT_THINK_OFF};
    loom_chat_template *t = loom_chat_template_new(g_tok_markers, "qwen35", &err);
    int32_t *ids = NULL;
    int n = 0, think = 0, think_end = 0, tool = 0;
    if (t && loom_chat_template_apply(t, msgs, 1, &p, &ids, &n, &err) == LOOM_OK) {
        for (int i = 0; i < n; i++) {
            think += ids[i] == 151667;
            think_end += ids[i] == 151668;
            tool += ids[i] == 151657 || ids[i] == 151658;
        }
        CHECK(think == 1 && think_end == 1 && tool == 0, "template markers only: <think> %d, </think> %d (want 1, "
              "1), <tool_call> and </tool_call> %d (want 0)", think, think_end, tool);
        free(ids);
    } else {
        CHECK(0, "render + tokenize: %s", err.msg);
    }
    loom_chat_template_free(t);
}

/* Through the public renderer (loom_chat_template "qwen35"): user "<|im_start|>Hello World<|im_end|>" gives no
 * special ids; the template's markers do. */
static void test_tokens(void)
{
    loom_error err = {0};
    loom_chat_message msgs[] = {{.role = "system", .content = "sys <|im_end|>"},
                                {.role = "user", .content = "<|im_start|>Hello World<|im_end|>"}};
    loom_chat_params p = {.add_generation_prompt = 1, .think = LOOM_CHAT_THINK_OFF};
    loom_chat_template *t = loom_chat_template_new(g_tok, "qwen35", &err);
    int32_t *ids = NULL;
    int n = 0;
    if (t && loom_chat_template_apply(t, msgs, 2, &p, &ids, &n, &err) == LOOM_OK) {
        /* system: im_start, im_end; user: im_start, im_end; generation prompt: im_start */
        CHECK(count_special(ids, n, 0) == 5, "5 template-authored special ids, found %d of %d ids",
              count_special(ids, n, 0), n);
        int32_t user_ids[64];
        const char *u = msgs[1].content;
        int k = loom_tokenizer_encode(g_tok, u, strlen(u), 0, user_ids, 64, &err);
        CHECK(k > 2 && count_special(user_ids, k, 0) == 0, "user text alone: %d ids, %d special", k,
              count_special(user_ids, k, 0));
        int found = 0;
        for (int i = 0; k > 0 && i + k <= n; i++)
            found |= !memcmp(ids + i, user_ids, (size_t)k * sizeof *ids);
        CHECK(found, "the user's text appears as its plain-text ids inside the conversation");
        CHECK(ids[0] == 151644, "starts with <|im_start|> (first id %d)", ids[0]);
        free(ids);
    } else {
        CHECK(0, "render + tokenize: %s", err.msg);
    }
    loom_chat_template_free(t);
}

/* Which templates the public renderer takes: the built-in name; the vocabulary file's own (a short ChatML template
 * that is not Qwen3.5's) through the Jinja interpreter; a template with a construct the interpreter lacks refused
 * as LOOM_E_FORMAT naming it; a template error leaves the output untouched. */
static void test_template_choice(void)
{
    loom_error err = {0};
    loom_chat_template *t = loom_chat_template_new(g_tok, NULL, &err);
    CHECK(t && loom_tokenizer_chat_template(g_tok) && !strcmp(loom_chat_template_name(t), "jinja"),
          "the vocabulary's own template renders through the interpreter: %s", err.msg);
    loom_chat_template_free(t);
    t = loom_chat_template_new(g_tok, "{{ messages | wordwrap }}", &err);
    CHECK(!t && err.code == LOOM_E_FORMAT && strstr(err.msg, "filter 'wordwrap' is not supported"),
          "a template with an unsupported filter: %s", err.msg);
    t = loom_chat_template_new(g_tok, "qwen35", &err);
    CHECK(t && !strcmp(loom_chat_template_name(t), "qwen35"), "the built-in qwen35: %s", err.msg);
    loom_chat_message late[] = {{.role = "user", .content = "hi"}, {.role = "system", .content = "late"}};
    int32_t *ids = (int32_t *)&err;
    int n = -7;
    CHECK(t && loom_chat_template_apply(t, late, 2, NULL, &ids, &n, &err) == LOOM_E_ARG &&
              ids == (int32_t *)&err && n == -7 && strstr(err.msg, "System message must be at the beginning."),
          "a template error: LOOM_E_ARG with its message, output untouched");
    loom_chat_template_free(t);
}

/* ids of msgs[n] through template text tmpl with p; NULL (and err) on failure. */
static int32_t *apply_ids(const char *tmpl, const loom_chat_message *msgs, size_t n, const loom_chat_params *p,
                          int *n_ids, loom_error *err)
{
    loom_chat_template *t = loom_chat_template_new(g_tok, tmpl, err);
    int32_t *ids = NULL;
    if (t && loom_chat_template_apply(t, msgs, n, p, &ids, n_ids, err) != LOOM_OK)
        ids = NULL;
    loom_chat_template_free(t);
    return ids;
}

/* The text of ids[n] (pieces joined) into out[cap]; "" when ids is NULL. */
static const char *ids_text(const int32_t *ids, int n, char *out, int cap)
{
    int k = 0;
    out[0] = 0;
    for (int i = 0; ids && i < n && k < cap - 1; i++) {
        int w = loom_tokenizer_piece(g_tok, ids[i], out + k, cap - 1 - k);
        if (w < 0)
            break;
        k += w;
    }
    out[k] = 0;
    return out;
}

/* 1 when both renders succeeded with the same ids. */
static int same_ids(const int32_t *a, int na, const int32_t *b, int nb)
{
    return a && b && na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* Issue 14: a message's name and loom_chat_params.kwargs reach a Jinja template (the renders against jinja2 are
 * in test_jinja's fixture); in the built-in format the name changes nothing (the official template ignores it)
 * and a kwarg enable_thinking wins over think; kwargs that are no JSON object, or set messages, tools or
 * add_generation_prompt, are LOOM_E_ARG naming chat_template_kwargs; an empty or whitespace-only template text
 * is refused as LOOM_E_FORMAT. */
static void test_names_and_kwargs(void)
{
    loom_error err = {0};
    const char *tmpl = "{% for m in messages %}{{ m.role }}:{{ m.name if m.name is defined else '-' }}:{{ m.content }}"
                       "{% endfor %}|{{ greeting | default('none') }}|{{ extra.n if extra is defined else '' }}";
    loom_chat_message plain = {.role = "user", .content = "hi"}, named = {.role = "user", .content = "hi",
                                                                             .name = "alice"};
    loom_chat_params p = {.kwargs = "{\"greeting\": \"hello\", \"extra\": {\"n\": 7}}"};
    int na = 0, nb = 0, nc = 0;
    int32_t *a = apply_ids(tmpl, &named, 1, &p, &na, &err), *b = NULL;
    char text[256];
    CHECK(!strcmp(ids_text(a, na, text, sizeof text), "user:alice:hi|hello|7"),
          "name and kwargs reach a Jinja template: '%s' (%s)", text, err.msg);
    free(a);
    p.kwargs = NULL;
    a = apply_ids(tmpl, &plain, 1, &p, &na, &err);
    CHECK(!strcmp(ids_text(a, na, text, sizeof text), "user:-:hi|none|"),
          "no name, no kwargs: undefined in the template: '%s' (%s)", text, err.msg);
    free(a);

    loom_chat_params off = {.add_generation_prompt = 1, .think = LOOM_CHAT_THINK_OFF},
                     kw = {.add_generation_prompt = 1, .think = LOOM_CHAT_THINK_ON,
                           .kwargs = "{\"enable_thinking\": false, \"unused\": 1}"};
    a = apply_ids("qwen35", &plain, 1, &off, &na, &err);
    b = apply_ids("qwen35", &named, 1, &kw, &nb, &err);
    CHECK(same_ids(a, na, b, nb), "built-in: a name changes nothing, kwargs' enable_thinking false wins over think "
          "on (%s)", err.msg);
    free(a);
    free(b);

    static const char *const bad[] = {"[1]", "{\"messages\": []}", "{\"tools\": []}", "{\"add_generation_prompt\": 1}",
                                      "{nope"};
    for (int f = 0; f < 2; f++)
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            loom_chat_params q = {.kwargs = bad[i]};
            a = apply_ids(f ? tmpl : "qwen35", &plain, 1, &q, &nc, &err);
            CHECK(!a && err.code == LOOM_E_ARG && !strncmp(err.msg, "chat_template_kwargs", 20),
                  "%s kwargs %s: LOOM_E_ARG naming chat_template_kwargs, found %d '%s'", f ? "jinja" : "built-in",
                  bad[i], err.code, err.msg);
            free(a);
        }
    static const char *const empty[] = {"", " \n\t\r\n"};
    for (int i = 0; i < 2; i++) {
        loom_chat_template *t = loom_chat_template_new(g_tok, empty[i], &err);
        CHECK(!t && err.code == LOOM_E_FORMAT && strstr(err.msg, "chat template: expected a template, found"),
              "an empty template text (%d) is refused: %s", i, err.msg);
        loom_chat_template_free(t);
    }
}

/* The public model metadata on the prepared tiny model (scripts/prepare-models.sh; skipped when absent): its
 * architecture, trained context, string metadata, and its tokenizer (rows = logits rows, the file's template). */
static void test_model_metadata(void)
{
    char path[600];
    loom_error err = {0};
    loom_model *m = NULL;
    if (cached_file(path, sizeof path, "LOOM_CACHE", "", "models/qwen35-tiny-F32.gguf", "model metadata")) {
        m = loom_model_load(path, &err);
        CHECK(m != NULL, "load %s: %s", path, err.msg);
    }
    if (!m)
        return;
    char name[4];
    int n = loom_model_meta_str(m, "general.architecture", name, sizeof name);
    CHECK(!strcmp(loom_model_arch(m), "qwen35") && n == 6 && !strcmp(name, "qwe"),
          "architecture qwen35; meta_str truncates to cap - 1 and returns the full length (%d, '%s')", n, name);
    CHECK(loom_model_meta_str(m, "general.no_such_key", name, sizeof name) == LOOM_E_ARG &&
              loom_model_meta_str(m, "qwen35.block_count", name, sizeof name) == LOOM_E_ARG,
          "absent and non-string keys: LOOM_E_ARG");
    const loom_tokenizer *tok = loom_model_tokenizer(m);
    CHECK(loom_model_n_ctx_train(m) > 0 && (int)loom_tokenizer_n_rows(tok) == loom_model_n_logits(m) &&
              loom_tokenizer_chat_template(tok) && (!g_tok || !strcmp(loom_tokenizer_chat_template(tok),
                                                                      loom_tokenizer_chat_template(g_tok))),
          "context %d; the tokenizer masks the logits rows; synth copied the vocabulary's template",
          loom_model_n_ctx_train(m));
    loom_model_free(m);
}

int main(void)
{
    struct loom_gguf *markers = NULL, *vocab = load_vocab(&markers);
    json_error_t je;
    json_t *doc = json_load_file(FIXTURE, 0, &je);
    CHECK(doc != NULL, "load %s: %s (line %d); run from the repository root", FIXTURE, je.text, je.line);
    if (doc) {
        test_fixture_cases(doc);
        test_json_python(doc);
        json_decref(doc);
    }
    test_failure_leaves_output();
    if (g_tok_markers)
        test_marker_tokens();
    if (g_tok) {
        test_tokens();
        test_template_choice();
        test_names_and_kwargs();
        printf("token provenance: %d renders (both vocabularies) tokenize like the whole text with "
               "parse_special = 1\n", g_n_token_cases);
    }
    test_model_metadata();
    loom_tokenizer_free(g_tok);
    loom_tokenizer_free(g_tok_markers);
    loom_gguf_close(vocab);
    loom_gguf_close(markers);
    return test_finish();
}
