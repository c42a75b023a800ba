/* model_info.c — the public model metadata a text client needs (loom.h, "Text: model metadata"): architecture,
 * trained context, logits width, string metadata by key, the model's tokenizer and its per-token queries; and
 * the library's version. Reads the loaded model; changes nothing. */
#include <string.h>

#include "loom.h"
#include "model/model.h"

const char *loom_model_arch(const loom_model *model)
{
    return model->hp.arch;
}

int loom_model_n_ctx_train(const loom_model *model)
{
    return model->hp.n_ctx_train > INT32_MAX ? INT32_MAX : (int)model->hp.n_ctx_train;
}

int loom_model_n_logits(const loom_model *model)
{
    return (int)model->output.n_out;
}

int loom_model_meta_str(const loom_model *model, const char *key, char *buf, size_t cap)
{
    const struct loom_gguf_kv *kv = key ? loom_gguf_find_kv(model->gguf, key) : NULL;
    struct loom_gguf_str s;
    if (!kv || kv->type != LOOM_GGUF_STRING || loom_gguf_get_str(model->gguf, key, 0, &s, NULL) != LOOM_OK ||
        s.len > INT32_MAX)
        return LOOM_E_ARG;
    if (cap > 0) {
        size_t n = s.len < cap - 1 ? s.len : cap - 1;
        memcpy(buf, s.ptr, n);
        buf[n] = '\0';
    }
    return (int)s.len;
}

const loom_tokenizer *loom_model_tokenizer(const loom_model *model)
{
    return model->tok;
}

int loom_model_token_sampleable(const loom_model *model, int32_t tok)
{
    if (tok < 0 || (int64_t)tok >= model->output.n_out)
        return 0;
    return loom_tokenizer_sampleable(model->tok)[tok] != 0;
}

int loom_model_token_is_eog(const loom_model *model, int32_t tok)
{
    return loom_tokenizer_is_eog(model->tok, tok);
}

const char *loom_version(void) { return LOOM_VERSION; }
