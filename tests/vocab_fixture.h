/* vocab_fixture.h — the qwen35-markers fixture vocabulary that tokenizer and chat tests share: the reference's
 * qwen35 test vocabulary with Qwen's added tokens (<think>, </think>, <tool_call>, ... typed USER_DEFINED, as in
 * real Qwen GGUFs) at their ids, written by the test itself. */
#ifndef LOOM_TEST_VOCAB_FIXTURE_H
#define LOOM_TEST_VOCAB_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/error.h"

/* Qwen's added tokens as real Qwen3 and Qwen3.5 GGUFs type them (convert_hf_to_gguf.py: CONTROL when
 * special or "<|...|>"-shaped, else USER_DEFINED), at their Qwen3 ids; the reference's qwen35 test
 * vocabulary has [PAD] rows there instead. */
static const struct {
    int32_t id;
    const char *text;
    int32_t type;
} k_qwen_added[] = {
    {151646, "<|object_ref_start|>", 3}, {151647, "<|object_ref_end|>", 3}, {151648, "<|box_start|>", 3},
    {151649, "<|box_end|>", 3}, {151650, "<|quad_start|>", 3}, {151651, "<|quad_end|>", 3},
    {151652, "<|vision_start|>", 3}, {151653, "<|vision_end|>", 3}, {151654, "<|vision_pad|>", 3},
    {151655, "<|image_pad|>", 3}, {151656, "<|video_pad|>", 3}, {151657, "<tool_call>", 4},
    {151658, "</tool_call>", 4}, {151659, "<|fim_prefix|>", 3}, {151660, "<|fim_middle|>", 3},
    {151661, "<|fim_suffix|>", 3}, {151662, "<|fim_pad|>", 3}, {151663, "<|repo_name|>", 3},
    {151664, "<|file_sep|>", 3}, {151665, "<tool_response>", 4}, {151666, "</tool_response>", 4},
    {151667, "<think>", 4}, {151668, "</think>", 4},
};

/* Write to path the fixture vocabulary qwen35-markers: src (the reference's ggml-vocab-qwen35.gguf, every key
 * copied) with k_qwen_added written over its rows. Returns 0 on success. */
static inline int write_qwen_markers_vocab(const char *src, const char *path)
{
    loom_error err = {0};
    struct loom_gguf *g = NULL;
    const struct loom_gguf_kv *toks, *types;
    if (loom_gguf_open(src, &g, &err) != LOOM_OK ||
        loom_gguf_get_arr(g, "tokenizer.ggml.tokens", LOOM_GGUF_STRING, 0, &toks, &err) != LOOM_OK ||
        loom_gguf_get_arr(g, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, 0, &types, &err) != LOOM_OK) {
        loom_gguf_close(g);
        return -1;
    }
    uint64_t n = toks->arr_n;
    struct loom_gguf_str *str = calloc(n, sizeof *str);
    int32_t *ty = malloc(n * sizeof *ty);
    struct loom_gguf_writer *w = loom_gguf_writer_new();
    int rc = !str || !ty || !w || types->arr_n != n || loom_gguf_kv_strings(toks, str, n, &err) != LOOM_OK;
    if (!rc) {
        memcpy(ty, types->data, n * sizeof *ty);
        for (size_t i = 0; i < sizeof k_qwen_added / sizeof *k_qwen_added; i++) {
            str[k_qwen_added[i].id] = (struct loom_gguf_str){strlen(k_qwen_added[i].text), k_qwen_added[i].text};
            ty[k_qwen_added[i].id] = k_qwen_added[i].type;
        }
    }
    for (uint64_t i = 0; !rc && i < g->n_kv; i++) {
        const struct loom_gguf_kv *kv = &g->kv[i];
        if (loom_gguf_str_eq(kv->key, "tokenizer.ggml.tokens"))
            rc = loom_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", str, n);
        else if (loom_gguf_str_eq(kv->key, "tokenizer.ggml.token_type"))
            rc = loom_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", LOOM_GGUF_INT32, ty, n);
        else
            rc = loom_gguf_writer_copy_kv(w, kv);
    }
    rc = rc || loom_gguf_writer_write(w, path, NULL, NULL, &err);
    loom_gguf_writer_free(w);
    free(str);
    free(ty);
    loom_gguf_close(g);
    return rc ? -1 : 0;
}

#endif
