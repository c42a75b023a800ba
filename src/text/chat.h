/* chat.h — inside loom: chat rendering with provenance (the public entry is loom_chat_template in
 * include/loom.h): a conversation becomes one byte string plus a gap-free list of segments, each DATA (text the
 * caller supplied) or CONTROL (text the template authored), and the segments become token ids so that only
 * template-authored markers can turn into special tokens. */
#ifndef LOOM_TEXT_CHAT_H
#define LOOM_TEXT_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "loom.h"

enum loom_chat_seg_kind { LOOM_CHAT_DATA = 0, LOOM_CHAT_CONTROL = 1 };

struct loom_chat_segment {
    size_t off, len; /* bytes [off, off + len) of the rendered text; segments tile it without gaps */
    enum loom_chat_seg_kind kind;
};

struct loom_chat_render {
    char *text; /* NUL-terminated; len bytes before the NUL */
    size_t len;
    struct loom_chat_segment *seg; /* n_seg segments, adjacent ones always of different kinds */
    size_t n_seg;
};

/* Render msgs[n] in the Qwen3.5 chat format exactly as templates/Qwen3.5-4B.jinja does under Hugging Face's
 * Jinja settings (trim_blocks, lstrip_blocks, tojson = json.dumps(ensure_ascii=False)). Content is plain text
 * (images and videos are not supported). Where the template raises, returns LOOM_E_ARG with the template's
 * message ("No messages provided.", "No user query found in messages.", "System message must be at the
 * beginning.", "Unexpected message role.") or a message naming the malformed field (tool-call name or
 * arguments, tools JSON). On success *out is replaced (the caller frees it with loom_chat_render_free); on
 * any failure *out is left untouched. */
int loom_chat_render_qwen35(const struct loom_chat_message *msgs, size_t n, const struct loom_chat_params *p,
                            struct loom_chat_render *out, loom_error *err);
void loom_chat_render_free(struct loom_chat_render *r);

/* Token ids of a render. Special tokens come only from CONTROL bytes: a template-authored marker ("<...>"
 * spelling that encodes to one id with parse_special = 1) becomes its id; everything between two markers, DATA
 * and CONTROL bytes together, is encoded as one run with parse_special = 0, so a caller's "<|im_end|>" stays
 * text and the ids equal those of the whole render tokenized with parse_special = 1 whenever DATA spells no
 * special token. The runs match only the vocabulary's plain-text USER_DEFINED tokens (tokenizer.h: data
 * mode), as the reference does; USER_DEFINED tokens spelled as a tag (<think>, <tool_call>) come only from the
 * template. *ids is a fresh array (caller frees), *n its length. On failure *ids and *n are untouched and a
 * negative code comes back. */
int loom_chat_tokenize(const struct loom_tokenizer *tok, const struct loom_chat_render *r, int32_t **ids, int *n,
                       loom_error *err);

/* Python-compatible JSON text used by the renderer (exposed for tests). Write json.dumps(v, ensure_ascii=False)
 * (str(v) when as_str and v is a scalar: True, None, 1.5, raw strings) of the JSON value in json[len] to a
 * fresh NUL-terminated string *out (caller frees). Returns LOOM_OK, LOOM_E_ARG for malformed JSON (message
 * names `what`), LOOM_E_NOMEM. */
int loom_chat_json_python(const char *json, size_t len, int as_str, const char *what, char **out, loom_error *err);

#endif
