/* test_tool_call.c — tool calls in generated text (loom_tool_parser): the Qwen3.5 template's own rendering of
 * an assistant's tool_calls parsed back into the same calls (the renderer is the oracle), fed whole, split at
 * every byte and byte by byte; arguments typed by the tools' schemas; values holding newlines, quotes and
 * "</parameter>"; several calls; content around them; malformed and unknown calls, and text that only looks
 * like a call, coming back as content byte for byte; tools refused with a template that renders through the Jinja
 * interpreter, saying what to pass. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom.h"
#include "test.h"
#include "text/chat.h"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\",\"parameters\":"
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"},"
    "\"zip\":{\"type\":\"string\"},\"opts\":{\"type\":\"object\"}},\"required\":[\"city\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"run_code\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"code\":{\"type\":[\"string\",\"null\"]}}}}}]";

struct out {
    char content[8192];
    size_t n;
    char calls[8][2][1024]; /* name, arguments */
    int n_calls;
};

static void on_content(void *ctx, const char *t, size_t n)
{
    struct out *o = ctx;
    if (o->n + n < sizeof o->content)
        memcpy(o->content + o->n, t, n);
    o->n += n;
    o->content[o->n < sizeof o->content ? o->n : 0] = '\0';
}

static void on_call(void *ctx, const char *name, const char *args)
{
    struct out *o = ctx;
    if (o->n_calls < 8) {
        snprintf(o->calls[o->n_calls][0], sizeof o->calls[0][0], "%s", name);
        snprintf(o->calls[o->n_calls][1], sizeof o->calls[0][1], "%s", args);
    }
    o->n_calls++;
}

/* Parse text[n] fed in pieces: cut (0 < cut < n) splits it once, cut = -1 feeds it byte by byte, 0 whole. */
static int parse(const loom_chat_template *t, const char *text, size_t n, long cut, struct out *o)
{
    loom_error err = {0};
    memset(o, 0, sizeof *o);
    loom_tool_parser *p = loom_tool_parser_new(t, TOOLS, &err);
    loom_tool_sink sink = {o, on_content, on_call};
    if (!p)
        return -1;
    if (cut < 0)
        for (size_t i = 0; i < n; i++)
            loom_tool_parser_feed(p, text + i, 1, &sink, &err);
    else {
        size_t c = cut > 0 ? (size_t)cut : n;
        loom_tool_parser_feed(p, text, c, &sink, &err);
        loom_tool_parser_feed(p, text + c, n - c, &sink, &err);
    }
    int k = loom_tool_parser_end(p, &sink, &err);
    loom_tool_parser_free(p);
    return k;
}

/* text parses, however it is split, into want_content and the calls want[n_want][2]. */
static void expect(const loom_chat_template *t, const char *what, const char *text, const char *want_content,
                   const char *const (*want)[2], int n_want)
{
    size_t n = strlen(text);
    for (long cut = -1; cut < (long)n; cut++) {
        struct out o;
        int k = parse(t, text, n, cut, &o);
        int ok = k == n_want && o.n_calls == n_want && o.n == strlen(want_content) &&
                 !memcmp(o.content, want_content, o.n);
        for (int i = 0; ok && i < n_want; i++)
            ok = !strcmp(o.calls[i][0], want[i][0]) && !strcmp(o.calls[i][1], want[i][1]);
        CHECK(ok, "%s (cut %ld): %d calls, content '%s'; first call %s %s", what, cut, k, o.content,
              o.n_calls ? o.calls[0][0] : "-", o.n_calls ? o.calls[0][1] : "-");
        if (!ok)
            return;
    }
}

/* The template renders an assistant's content and calls; that text parses back into them. */
static void round_trip(const loom_chat_template *t, const char *content, const loom_chat_tool_call *calls, int n,
                       const char *const (*want)[2])
{
    loom_chat_message msgs[2] = {{.role = "user", .content = "hi"},
                                 {.role = "assistant", .content = content, .tool_calls = calls,
                                  .n_tool_calls = (size_t)n}};
    loom_chat_params p = {.tools = TOOLS, .think = LOOM_CHAT_THINK_OFF};
    struct loom_chat_render r = {0};
    loom_error err = {0};
    CHECK(loom_chat_render_qwen35(msgs, 2, &p, &r, &err) == LOOM_OK, "render: %s", err.msg);
    if (!r.text)
        return;
    const char *a = strstr(r.text, "<|im_start|>assistant\n"), *end = a ? strstr(a, "<|im_end|>") : NULL;
    CHECK(a && end, "the assistant turn in the render");
    if (a && end) {
        a += strlen("<|im_start|>assistant\n");
        if (!strncmp(a, "<think>\n\n</think>\n\n", 19)) /* the template's empty thinking block */
            a += 19;
        char *text = strndup(a, (size_t)(end - a)), *trimmed = strdup(content ? content : ""), *b = trimmed;
        for (size_t k = strlen(b); k > 0 && strchr(" \n", b[k - 1]); k--) /* the template renders content|trim */
            b[k - 1] = '\0';
        while (*b == ' ' || *b == '\n')
            b++;
        expect(t, "a rendered assistant turn", text, b, want, n);
        free(trimmed);
        free(text);
    }
    loom_chat_render_free(&r);
}

int main(void)
{
    char dir[900], path[1024];
    const char *cache = getenv("LOOM_CACHE"), *home = getenv("HOME");
    if (cache && *cache)
        snprintf(dir, sizeof dir, "%s", cache);
    else
        snprintf(dir, sizeof dir, "%s/.cache/loom", home ? home : "");
    snprintf(path, sizeof path, "%s/models/qwen35-tiny-F16.gguf", dir);
    if (access(path, R_OK) != 0) {
        printf("%s: not present, skipped\n", path);
        return test_finish();
    }
    loom_error err = {0};
    loom_model *m = loom_model_load(path, &err);
    loom_chat_template *t = m ? loom_chat_template_new(loom_model_tokenizer(m), "qwen35", &err) : NULL;
    CHECK(t != NULL, "template: %s", err.msg);
    if (!t)
        return test_finish();

    /* the renderer as the oracle */
    loom_chat_tool_call one[] = {{"get_weather", "{\"city\": \"Paris\", \"days\": 3}"}};
    const char *const one_want[][2] = {{"get_weather", "{\"city\":\"Paris\",\"days\":3}"}};
    round_trip(t, "Let me check.", one, 1, one_want);
    round_trip(t, NULL, one, 1, one_want);
    loom_chat_tool_call two[] = {{"get_weather", "{\"city\": \"Oslo\", \"opts\": {\"units\": \"metric\"}}"},
                                 {"run_code", "{\"code\": \"print(\\\"</parameter>\\\")\\nx = '<tool_call>'\"}"}};
    const char *const two_want[][2] = {{"get_weather", "{\"city\":\"Oslo\",\"opts\":{\"units\":\"metric\"}}"},
                                       {"run_code", "{\"code\":\"print(\\\"</parameter>\\\")\\nx = '<tool_call>'\"}"}};
    round_trip(t, "Two things:\n  first  ", two, 2, two_want);

    /* typing: declared strings stay text even when they look like JSON */
    const char *const zip_want[][2] = {{"get_weather", "{\"city\":\"123\",\"zip\":\"01234\",\"days\":7}"}};
    expect(t, "string-typed values", "<tool_call>\n<function=get_weather>\n<parameter=city>\n123\n</parameter>\n"
           "<parameter=zip>\n01234\n</parameter>\n<parameter=days>\n7\n</parameter>\n</function>\n</tool_call>", "",
           zip_want, 1);
    /* a value that spells "</parameter>" followed by what is not a parameter's end */
    const char *const tag_want[][2] = {{"run_code", "{\"code\":\"a\\n</parameter> b\\n\\\"q\\\"\"}"}};
    expect(t, "a value with </parameter> inside", "<tool_call>\n<function=run_code>\n<parameter=code>\na\n"
           "</parameter> b\n\"q\"\n</parameter>\n</function>\n</tool_call>", "", tag_want, 1);
    /* content after a call, and whitespace kept inside content */
    const char *const after_want[][2] = {{"get_weather", "{\"city\":\"Rome\"}"}};
    expect(t, "content after a call", "Sure.  \n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n"
           "</parameter>\n</function>\n</tool_call>\n\nDone  x", "Sure.Done  x", after_want, 1);

    /* a parameter given twice cannot be two values: the first "</parameter>" is then part of the value */
    const char *const twice_want[][2] = {
        {"get_weather", "{\"city\":\"Paris\\n</parameter>\\n<parameter=city>\\nRome\"}"}};
    expect(t, "a parameter twice", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
           "<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>", "", twice_want, 1);

    /* prose that mentions the tag, then a real call: the mention is content, the call a call */
    const char *const prose_want[][2] = {{"get_weather", "{\"city\":\"Paris\"}"}};
    expect(t, "a mention of <tool_call> before a call", "mention <tool_call> in prose.\n<tool_call>\n"
           "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
           "mention <tool_call> in prose.", prose_want, 1);
    /* and the text after such a mention is passed on at once, not held to the end */
    struct out o = {0};
    loom_tool_parser *pp = loom_tool_parser_new(t, TOOLS, &err);
    loom_tool_sink sink = {&o, on_content, on_call};
    if (pp) {
        static const char early[] = "You write <tool_call> before a call. And then more text";
        loom_tool_parser_feed(pp, early, sizeof early - 1, &sink, &err);
        CHECK(o.n == sizeof early - 1, "a mention's following text is passed on at once: %zu of %zu bytes", o.n,
              sizeof early - 1);
        loom_tool_parser_end(pp, &sink, &err);
        loom_tool_parser_free(pp);
    }

    /* not calls: byte for byte content */
    static const char *const plain[] = {
        "Plain text, with <tags> and a < at the end <",
        "Text that mentions <tool_call> but never closes it.\n",
        "<tool_call>\n<function=unknown_tool>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</tool_call>",
        "  leading and trailing whitespace kept  \n",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n\xff\xfe\n</parameter>\n</function>\n</tool_call>",
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        expect(t, "not a call", plain[i], plain[i], NULL, 0);

    CHECK(!loom_tool_parser_new(t, "{\"not\": \"an array\"}", &err) && err.code == LOOM_E_ARG, "tools not an array");
    CHECK(!loom_tool_parser_new(t, "[{", &err) && err.code == LOOM_E_ARG && strstr(err.msg, "tools"),
          "malformed tools JSON named: %s", err.msg);
    /* a template other than the official one renders through the Jinja interpreter: tools are refused saying so */
    loom_chat_template *j = loom_chat_template_new(loom_model_tokenizer(m),
                                                   "{% for m in messages %}{{ m.content }}{% endfor %}", &err);
    CHECK(j && !strcmp(loom_chat_template_name(j), "jinja"), "jinja template: %s", j ? "" : err.msg);
    CHECK(j && !loom_tool_parser_new(j, TOOLS, &err) && err.code == LOOM_E_ARG &&
              strstr(err.msg, "parsed only in its format") && strstr(err.msg, "Jinja interpreter") &&
              strstr(err.msg, "--chat-template-file with the official Qwen3.5 template"),
          "tools with a Jinja template: %s", err.msg);
    loom_chat_template_free(j);
    loom_chat_template_free(t);
    loom_model_free(m);
    return test_finish();
}
