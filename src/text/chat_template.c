/* chat_template.c — the public chat renderer (loom.h, "Text: chat rendering"): which format a template names or
 * is, and messages to token ids through that format's render with provenance (chat.h). Today the one format is
 * the built-in Qwen3.5 one; a template text is recognised by its digest. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "text/chat.h"
#include "util/error.h"

/* A built-in format: its name, the XXH3-64 digest of the template text it renders exactly, and its renderer. */
struct chat_format {
    const char *name;
    uint64_t digest;
    int (*render)(const struct loom_chat_message *msgs, size_t n, const struct loom_chat_params *p,
                  struct loom_chat_render *out, loom_error *err);
};

static const struct chat_format k_formats[] = {
    /* Qwen3.5: the official template, llama.cpp v0.5.0 models/templates/Qwen3.5-4B.jinja (7756 bytes) */
    {"qwen35", 0x0ed0a1d8b9d7e0beull, loom_chat_render_qwen35},
};

struct loom_chat_template {
    const struct loom_tokenizer *tok;
    const struct chat_format *format;
};

/* The format tmpl names or is (its digest), or NULL. */
static const struct chat_format *find_format(const char *tmpl)
{
    uint64_t d = XXH3_64bits(tmpl, strlen(tmpl));
    for (size_t i = 0; i < sizeof k_formats / sizeof *k_formats; i++) {
        const struct chat_format *f = &k_formats[i];
        if (!strcmp(tmpl, f->name) || d == f->digest)
            return f;
    }
    return NULL;
}

loom_chat_template *loom_chat_template_new(const loom_tokenizer *tok, const char *tmpl, loom_error *err)
{
    if (!tok) {
        loom_errorf(err, LOOM_E_ARG, "chat template: expected a tokenizer, found NULL");
        return NULL;
    }
    const char *text = tmpl ? tmpl : loom_tokenizer_chat_template(tok);
    if (!text) {
        loom_errorf(err, LOOM_E_FORMAT, "tokenizer.chat_template: expected a chat template, found none (name a "
                                        "built-in format: qwen35)");
        return NULL;
    }
    const struct chat_format *f = find_format(text);
    if (!f) {
        size_t len = strlen(text);
        loom_errorf(err, LOOM_E_FORMAT,
                    "%s: expected a built-in format (qwen35) or its template, found a %zu-byte template "
                    "\"%.40s%s\" (XXH3-64 %016llx) that loom cannot render (no Jinja engine)",
                    tmpl ? "chat template" : "tokenizer.chat_template", len, text, len > 40 ? "..." : "",
                    (unsigned long long)XXH3_64bits(text, len));
        return NULL;
    }
    loom_chat_template *t = malloc(sizeof *t);
    if (!t) {
        loom_errorf(err, LOOM_E_NOMEM, "chat template: cannot allocate");
        return NULL;
    }
    *t = (loom_chat_template){tok, f};
    return t;
}

void loom_chat_template_free(loom_chat_template *t)
{
    free(t);
}

const char *loom_chat_template_name(const loom_chat_template *t)
{
    return t->format->name;
}

int loom_chat_template_apply(const loom_chat_template *t, const loom_chat_message *msgs, size_t n,
                             const loom_chat_params *p, int32_t **ids, int *n_ids, loom_error *err)
{
    struct loom_chat_render r = {0};
    int rc = t->format->render(msgs, n, p, &r, err);
    if (rc == LOOM_OK)
        rc = loom_chat_tokenize(t->tok, &r, ids, n_ids, err);
    loom_chat_render_free(&r);
    return rc;
}
