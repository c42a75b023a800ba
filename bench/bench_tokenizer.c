/* bench_tokenizer.c — tokenizer throughput: a deterministic 4 MiB mixed-language text (English, code, digits,
 * German, Russian, Chinese, Japanese, Korean, Hindi, Arabic, Thai, emoji, white space runs) tokenized in
 * 64 KiB documents by loom and by the reference (llama_tokenize on a vocab-only load of the same file),
 * best of 3, MB/s side by side per vocabulary; the id streams must agree.
 * usage: bench_tokenizer [VOCAB_NAME...]   (default: qwen35 llama-bpe gpt-2 llama-spm deepseek-coder) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tests/parity/parity.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

#define TEXT_BYTES (4u << 20)
#define DOC_BYTES (64u << 10)
#define REPS 3

static const char *const k_pieces[] = {
    "The quick brown fox jumps over the lazy dog. ", "It's a truth universally acknowledged, ",
    "for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n", "def f(x):\n\treturn x ** 2  # square\n",
    "Revenue grew 12.5% to $1,234,567 in Q3 2024. ", "Über die Brücke gingen 37 Fußgänger. ",
    "Привет, как дела? Всё хорошо. ", "我们今天去公园散步，天气很好。", "東京は日本の首都です。ひらがなとカタカナ。",
    "안녕하세요, 만나서 반갑습니다. ", "हिन्दी भारत की राजभाषा है। ", "العربية لغة جميلة. ", "ภาษาไทยเป็นภาษาที่สวยงาม ",
    "Emoji: 👍🏽 👩‍💻 🇺🇸 ❤️ ", "\n\n", "    ", "\r\n", "e\xCC\x81t\xC3\xA9 ", "3.14159265358979 ", "\"quoted\" (parens) [x] ",
};

/* The text: pieces drawn by a fixed xorshift generator until TEXT_BYTES. */
static char *make_text(size_t *len)
{
    char *t = malloc(TEXT_BYTES + 256);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    size_t n = 0;
    while (t && n < TEXT_BYTES) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        const char *p = k_pieces[s % (sizeof k_pieces / sizeof *k_pieces)];
        size_t k = strlen(p);
        memcpy(t + n, p, k);
        n += k;
    }
    *len = n;
    return t;
}

/* Document boundaries: every DOC_BYTES, moved forward to the next space so no character is cut. */
static size_t doc_end(const char *t, size_t len, size_t start)
{
    size_t e = start + DOC_BYTES < len ? start + DOC_BYTES : len;
    while (e < len && t[e] != ' ')
        e++;
    return e;
}

static int32_t g_ids[DOC_BYTES * 4];

/* Tokenize all documents with loom (which = 0) or the reference (1); returns seconds, total ids in *n_ids. */
static double run(int which, const struct loom_tokenizer *tok, const struct llama_vocab *vocab, const char *t,
                  size_t len, long *n_ids, uint64_t *hash)
{
    double t0 = parity_now();
    long total = 0;
    uint64_t h = 1469598103934665603ull;
    for (size_t start = 0; start < len;) {
        size_t end = doc_end(t, len, start);
        int n = which == 0 ? loom_tokenizer_encode(tok, t + start, end - start, 0, g_ids, (int)(sizeof g_ids / 4), NULL)
                           : llama_tokenize(vocab, t + start, (int32_t)(end - start), g_ids,
                                            (int32_t)(sizeof g_ids / 4), false, false);
        for (int i = 0; i < n; i++)
            h = (h ^ (uint32_t)g_ids[i]) * 1099511628211ull;
        total += n;
        start = end;
    }
    *n_ids = total;
    *hash = h;
    return parity_now() - t0;
}

static void bench_vocab(const char *dir, const char *name, const char *text, size_t len)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/src/models/ggml-vocab-%s.gguf", dir, name);
    if (access(path, R_OK) != 0) {
        printf("%-16s skipped: %s not found\n", name, path);
        return;
    }
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    struct loom_gguf *g = NULL;
    struct loom_tokenizer *tok = NULL;
    loom_error err = {0};
    if (!model || loom_gguf_open(path, &g, &err) != LOOM_OK || loom_tokenizer_load(g, 0, &tok, &err) != LOOM_OK) {
        printf("%-16s load failed (%s)\n", name, model ? err.msg : "reference");
        goto done;
    }
    double best[2] = {1e30, 1e30};
    long n_ids[2];
    uint64_t hash[2];
    for (int r = 0; r < REPS; r++) {
        for (int w = 0; w < 2; w++) {
            double s = run(w, tok, llama_model_get_vocab(model), text, len, &n_ids[w], &hash[w]);
            best[w] = s < best[w] ? s : best[w];
        }
    }
    double mb = (double)len / 1e6;
    printf("%-16s %10ld %9.2f %9.2f %7.2fx  %s\n", name, n_ids[0], mb / best[0], mb / best[1], best[1] / best[0],
           n_ids[0] == n_ids[1] && hash[0] == hash[1] ? "ids equal" : "IDS DIFFER");
done:
    loom_tokenizer_free(tok);
    loom_gguf_close(g);
    if (model)
        llama_model_free(model);
}

int main(int argc, char **argv)
{
    static const char *const defaults[] = {"qwen35", "llama-bpe", "gpt-2", "llama-spm", "deepseek-coder"};
    char dir[1100];
    parity_ref_dir(dir, sizeof dir);
    if (parity_ref_init() != 0)
        return 1;
    size_t len;
    char *text = make_text(&len);
    if (!text)
        return 1;
    printf("tokenizer throughput on %.2f MB of mixed-language text in %u KiB documents, single thread, best of %d\n",
           (double)len / 1e6, DOC_BYTES >> 10, REPS);
    printf("%-16s %10s %9s %9s %8s\n", "vocab", "ids", "loom MB/s", "ref MB/s", "speedup");
    if (argc > 1)
        for (int i = 1; i < argc; i++)
            bench_vocab(dir, argv[i], text, len);
    else
        for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++)
            bench_vocab(dir, defaults[i], text, len);
    free(text);
    llama_backend_free();
    return 0;
}
