/* certify.c — `loom certify`: teacher-forced logits of loom against the reference engine over a prompt set, in both
 * numerics, written as a certificate (Markdown and JSON): the model's digest, both engines' versions and settings,
 * per prompt the bitwise rows, max difference, top-1 agreement and KL divergence, and for a row that is not bitwise
 * in reference numerics the X-ray of its first divergent edge (xray.c). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>
#include <xxhash.h>

#include "cli/cli.h"
#include "cli/xray.h"

/* Used when --prompts is not given: prose, code, a list, numbers, another language. */
static const char *const DEFAULT_PROMPTS[] = {
    "The history of the printing press begins in the fifteenth century, when",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Shopping list:\n1. eggs\n2.",
    "In 1969, 384400 km away, the Apollo 11 crew",
    "Le petit prince demanda au renard pourquoi",
};

#define MAX_PROMPTS 64
#define MAX_PROMPT_TOKENS 2048
#define PROMPTS_MAX_BYTES (1 << 20)

/* The prompts and their token ids. */
struct prompt_set {
    int n;
    const char *text[MAX_PROMPTS];
    int line[MAX_PROMPTS]; /* in the --prompts file; 0 for a built-in prompt */
    int32_t *ids[MAX_PROMPTS];
    int n_ids[MAX_PROMPTS], max_ids;
    char *buf; /* the file's bytes */
};

struct certify_opts {
    const char *model, *prompts_file, *out;
    int n_gen, n_threads;
    struct loom_cli_model_opts mo;
};

/* One prompt in one numerics: the comparison of every teacher-forced row. */
struct prompt_result {
    int n_prompt, rows, bitwise, top1;
    double max_abs, kl_mean, kl_max;
    int first_row;        /* position of the first row that is not bitwise, -1 none */
    char divergence[512]; /* X-ray's first divergent edge there (reference numerics) */
};

struct certify_run {
    const loom_model *m;
    const struct loom_ref *r;
    struct loom_ref_model *rm;
    const struct certify_opts *o;
    int width;          /* logits compared per row: loom's rows that the reference's vocabulary has */
    float *loom_rows;   /* [max prompt][n_logits] */
    int32_t *ids;       /* [n_prompt + n_gen] */
};

/* What certify takes: certify_set's options, then the model options it uses (its sessions and the reference's
 * take --cache-type-k; it reports no expert cache figures: no --stats). */
static const struct loom_cli_option CERTIFY_OPTIONS[] = {
    {"-m", LOOM_CLI_ONE}, {"--prompts", LOOM_CLI_ONE}, {"-o", LOOM_CLI_ONE}, {"-n", LOOM_CLI_VALUE},
    {"-t", LOOM_CLI_VALUE}, LOOM_CLI_LOAD_TABLE, {"--cache-type-k", LOOM_CLI_VALUE}, {"-ctk", LOOM_CLI_VALUE},
    {NULL, LOOM_CLI_VALUE}};

static int certify_set(void *opts, const char *opt, const char *val)
{
    struct certify_opts *o = opts;
    const char **str = !strcmp(opt, "-m") ? &o->model : !strcmp(opt, "--prompts") ? &o->prompts_file
                     : !strcmp(opt, "-o") ? &o->out : NULL;
    if (str) {
        *str = val;
        return 0;
    }
    int is_t = !strcmp(opt, "-t"), hi = is_t ? LOOM_CLI_THREADS_MAX : 4096; /* -t or -n */
    long long v;
    if (!is_t && strcmp(opt, "-n"))
        return LOOM_CLI_UNHANDLED;
    if (loom_cli_parse_int(val, is_t, hi, &v)) {
        fprintf(stderr, "loom certify: %s expects an integer in [%d, %d], found '%s'\n", opt, is_t, hi, val);
        return -1;
    }
    *(is_t ? &o->n_threads : &o->n_gen) = (int)v;
    return 0;
}

static void certify_usage(FILE *f)
{
    fprintf(f, "usage: loom certify [-m FILE] [--prompts FILE] [-n N] [-t N] [-o PREFIX] [--cache-type-k TYPE]\n"
               "                    [--check-tensors] [--mem-budget SIZE [--read-ahead MODE]]\n"
               "Teacher-forced logits of loom against the reference engine (llama.cpp, loaded at run time: flash\n"
               "attention off, F16 K/V) in both numerics: each prompt as one batch, then N tokens of the\n"
               "reference's greedy continuation one by one, every row compared. Writes PREFIX.md and PREFIX.json\n"
               "(the Markdown also to stdout). Exit status (as cmp's): 0 when every row is bitwise equal in\n"
               "reference numerics, 1 when one is not, 2 on trouble.\n"
               "  -m FILE        the GGUF model (default: the default model)\n"
               "  --prompts FILE one prompt per non-empty line, at most 64 of up to 2048 tokens (default: five\n"
               "                 built-in prompts)\n"
               "  -n N           continuation tokens per prompt (default 256)\n"
               "  -t N           threads for both engines (default: the online CPUs)\n"
               "  -o PREFIX      certificate files (default loom-certificate)\n"
               "  --cache-type-k TYPE  (-ctk) both engines' K cache: f16 (default) or q8_0 (V stays f16)\n"
               LOOM_CLI_LOAD_USAGE);
}

/* The prompts: FILE's lines (a final CR dropped, blank lines skipped; kept in set->buf), or the built-in set.
 * 0, or -1 with the message printed naming the file, the line and what is wrong. */
static int load_prompts(const char *file, struct prompt_set *set)
{
    if (!file) {
        for (size_t i = 0; i < sizeof DEFAULT_PROMPTS / sizeof DEFAULT_PROMPTS[0]; i++)
            set->text[set->n++] = DEFAULT_PROMPTS[i];
        return 0;
    }
    FILE *f = fopen(file, "rb");
    struct stat st;
    const char *why = !f ? strerror(errno) : fstat(fileno(f), &st) ? strerror(errno)
                    : S_ISDIR(st.st_mode) ? "it is a directory"
                    : st.st_size > PROMPTS_MAX_BYTES ? "expected at most 1 MiB of prompts" : NULL;
    size_t len = why ? 0 : (size_t)st.st_size;
    set->buf = why ? NULL : malloc(len + 1);
    if (!why && (!set->buf || fread(set->buf, 1, len, f) != len))
        why = set->buf ? "reading it failed" : "out of memory";
    if (f)
        fclose(f);
    if (why) {
        fprintf(stderr, "loom certify: --prompts %s: %s\n", file, why);
        return -1;
    }
    set->buf[len] = 0;
    char *line = set->buf;
    for (int no = 1; line <= set->buf + len; no++) {
        char *end = memchr(line, '\n', (size_t)(set->buf + len - line));
        end = end ? end : set->buf + len;
        if (memchr(line, 0, (size_t)(end - line))) {
            fprintf(stderr, "loom certify: --prompts %s: line %d holds a NUL byte\n", file, no);
            return -1;
        }
        *end = 0;
        if (end > line && end[-1] == '\r')
            end[-1] = 0;
        if (line[strspn(line, " \t\r")]) {
            if (set->n == MAX_PROMPTS) {
                fprintf(stderr, "loom certify: --prompts %s: expected at most %d prompts, found more (line %d)\n",
                        file, MAX_PROMPTS, no);
                return -1;
            }
            set->line[set->n] = no;
            set->text[set->n++] = line;
        }
        line = end + 1;
    }
    if (set->n == 0)
        fprintf(stderr, "loom certify: --prompts %s: expected at least one non-empty line, found none\n", file);
    return set->n ? 0 : -1;
}

/* Each prompt's token ids (text as data), before anything runs: one too long or of no token is named. */
static int tokenize_prompts(const loom_model *m, struct prompt_set *set, loom_error *err)
{
    for (int i = 0; i < set->n; i++) {
        char where[32];
        snprintf(where, sizeof where, set->line[i] ? "--prompts line %d" : "built-in prompt %d",
                 set->line[i] ? set->line[i] : i + 1);
        set->ids[i] = malloc((MAX_PROMPT_TOKENS + 1) * sizeof(int32_t));
        if (!set->ids[i])
            return loom_errorf(err, LOOM_E_NOMEM, "%s: out of memory for %d token ids", where, MAX_PROMPT_TOKENS);
        const char *t = set->text[i];
        int n = loom_tokenizer_encode(loom_model_tokenizer(m), t, strlen(t), LOOM_SPECIAL_DATA, set->ids[i],
                                      MAX_PROMPT_TOKENS + 1, err);
        if (n < 0)
            return n;
        if (n == 0 || n > MAX_PROMPT_TOKENS)
            return loom_errorf(err, LOOM_E_ARG, "%s: expected 1 to %d tokens, found %s%d", where, MAX_PROMPT_TOKENS,
                               n > MAX_PROMPT_TOKENS ? "more than " : "", n > MAX_PROMPT_TOKENS ? MAX_PROMPT_TOKENS : 0);
        set->n_ids[i] = n;
        set->max_ids = n > set->max_ids ? n : set->max_ids;
    }
    return LOOM_OK;
}

/* The argmax of row over the sampleable tokens (ties: the lower id). */
static int top1(const loom_model *m, const float *row, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (loom_model_token_sampleable(m, i) && (best < 0 || row[i] > row[best]))
            best = i;
    return best;
}

/* KL(p_ref || p_loom) in nats over the sampleable tokens, softmax in double. */
static double kl_div(const loom_model *m, const float *ref, const float *got, int n)
{
    double mr = -INFINITY, mg = -INFINITY, zr = 0, zg = 0, kl = 0;
    for (int i = 0; i < n; i++)
        if (loom_model_token_sampleable(m, i))
            mr = fmax(mr, ref[i]), mg = fmax(mg, got[i]);
    for (int i = 0; i < n; i++)
        if (loom_model_token_sampleable(m, i))
            zr += exp(ref[i] - mr), zg += exp(got[i] - mg);
    for (int i = 0; i < n; i++)
        if (loom_model_token_sampleable(m, i)) {
            double lr = ref[i] - mr - log(zr), lg = got[i] - mg - log(zg);
            kl += exp(lr) * (lr - lg);
        }
    return kl > 0 ? kl : 0;
}

static void compare_row(const struct certify_run *c, const float *ref, const float *got, int pos,
                        struct prompt_result *p)
{
    int n = c->width;
    double d = 0;
    for (int i = 0; i < n; i++)
        d = fmax(d, fabs((double)ref[i] - (double)got[i]));
    double kl = kl_div(c->m, ref, got, n);
    int same = memcmp(ref, got, (size_t)n * sizeof *ref) == 0;
    p->rows++;
    p->bitwise += same;
    p->top1 += top1(c->m, ref, n) == top1(c->m, got, n);
    p->max_abs = fmax(p->max_abs, d);
    p->kl_mean += kl;
    p->kl_max = fmax(p->kl_max, kl);
    if (!same && p->first_row < 0)
        p->first_row = pos;
}

/* The X-ray of the first row that is not bitwise: the ids up to it, the prompt as one batch. */
static void explain(const struct certify_run *c, int n_prompt, struct prompt_result *p, loom_error *err)
{
    struct xray_request q = {.tokens = c->ids, .n_prompt = n_prompt, .decode_given = 1,
                             .n_decode = p->first_row >= n_prompt ? p->first_row - n_prompt + 1 : 0,
                             .numerics = LOOM_NUMERICS_REFERENCE_BATCH, .n_threads = c->o->n_threads,
                             .layer_hi = XRAY_ALL_LAYERS, .k_type = c->o->mo.k_type};
    struct xray_result res;
    if (xray_compare(c->m, c->r, c->rm, &q, &res, err) != LOOM_OK) {
        snprintf(p->divergence, sizeof p->divergence, "X-ray failed: %.400s", err->msg);
        return;
    }
    if (res.first_div >= 0)
        xray_describe(&res, res.first_div, p->divergence, sizeof p->divergence);
    else
        snprintf(p->divergence, sizeof p->divergence, "X-ray found every compared edge bitwise (%d rows)", res.n_rows);
    xray_result_free(&res);
}

/* One prompt (ids[0..n_prompt)) in one numerics: the prompt as one batch with every row's logits, then n_gen
 * tokens of the reference's greedy continuation (written to ids) one by one. */
static int certify_prompt(struct certify_run *c, int n_prompt, enum loom_numerics numerics, struct prompt_result *p,
                          loom_error *err)
{
    int n_gen = c->o->n_gen, n_ctx = n_prompt + n_gen;
    memset(p, 0, sizeof *p);
    p->n_prompt = n_prompt;
    p->first_row = -1;
    int ubatch = n_prompt < 512 ? n_prompt : 512;
    struct loom_ref_context *rctx = loom_ref_context_exact(c->r, c->rm, n_ctx, n_prompt, ubatch, c->o->n_threads,
                                                           c->o->mo.k_type, NULL, NULL, err);
    if (!rctx)
        return err->code;
    loom_session_params sp = {.n_ctx = n_ctx, .n_threads = c->o->n_threads, .numerics = numerics,
                              .n_ubatch = (int)c->r->n_ubatch(rctx), .k_type = c->o->mo.k_type};
    loom_session *s = loom_session_new(c->m, &sp, err);
    int rc = s ? loom_ref_eval_all(c->r, rctx, c->ids, n_prompt, 0, err) : err->code;
    if (rc == LOOM_OK)
        rc = loom_session_eval(s, c->ids, n_prompt, c->loom_rows, LOOM_LOGITS_ALL, err);
    int nl = loom_model_n_logits(c->m);
    for (int i = 0; rc == LOOM_OK && i < n_prompt; i++)
        compare_row(c, c->r->get_logits_ith(rctx, i), c->loom_rows + (size_t)i * (size_t)nl, i, p);
    for (int k = 0; rc == LOOM_OK && k < n_gen; k++) {
        int pos = n_prompt + k;
        c->ids[pos] = top1(c->m, c->r->get_logits_ith(rctx, -1), c->width);
        rc = loom_ref_eval_all(c->r, rctx, c->ids + pos, 1, pos, err);
        if (rc == LOOM_OK)
            rc = loom_session_eval(s, c->ids + pos, 1, NULL, LOOM_LOGITS_LAST, err);
        if (rc == LOOM_OK)
            compare_row(c, c->r->get_logits_ith(rctx, 0), loom_session_last_logits(s), pos, p);
    }
    loom_session_free(s);
    c->r->free(rctx);
    p->kl_mean = p->rows ? p->kl_mean / p->rows : 0;
    if (rc == LOOM_OK && numerics == LOOM_NUMERICS_REFERENCE_BATCH && p->first_row >= 0)
        explain(c, n_prompt, p, err);
    return rc;
}

/* XXH3-128 of the file's bytes as 32 hex digits into hex[33]; "unreadable" when it cannot be read. */
static void file_digest(const char *path, char hex[33])
{
    FILE *f = fopen(path, "rb");
    XXH3_state_t *st = XXH3_createState();
    char *buf = malloc(1 << 23);
    int ok = f && st && buf && XXH3_128bits_reset(st) == XXH_OK;
    for (size_t n; ok && (n = fread(buf, 1, 1 << 23, f)) > 0;)
        ok = XXH3_128bits_update(st, buf, n) == XXH_OK;
    if (ok && f && !ferror(f)) {
        XXH128_hash_t h = XXH3_128bits_digest(st);
        snprintf(hex, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
    } else {
        snprintf(hex, 33, "unreadable");
    }
    free(buf);
    XXH3_freeState(st);
    if (f)
        fclose(f);
}

/* The CPU's model name (/proc/cpuinfo) into buf[cap]. */
static void cpu_name(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(buf, cap, "%s", strchr(line, ':') + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
}

static const char *numerics_name(int k) { return k == 0 ? "reference" : "canonical"; }

/* The certificate's identity half: model, engines, settings. */
static json_t *identity(const struct certify_run *c)
{
    char digest[33], cpu[256], date[32];
    file_digest(c->o->model, digest);
    cpu_name(cpu, sizeof cpu);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    char sys[1024], note[512];
    snprintf(sys, sizeof sys, "%s", c->r->print_system_info());
    const char *why = loom_ref_orders_note(c->r, loom_orders_name(), note, sizeof note);
    sys[strcspn(sys, "\n")] = 0;
    return json_pack("{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:o, s:i}, s:s,"
                     " s:{s:s, s:s, s:b, s:b, s:s, s:b, s:s, s:s, s:s, s:i}}",
                     "date", date, "model", "path", c->o->model, "xxh3_128", digest, "arch", loom_model_arch(c->m),
                     "loom", "version", loom_version(), "kernels", loom_kernels_name(), "orders", loom_orders_name(),
                     "orders_from", loom_cli_orders_from(), "orders_note", why ? json_string(why) : json_null(), "threads", c->o->n_threads,
                     "cpu", cpu, "reference", "engine", "llama.cpp v0.5.0 (node-llama-cpp 3.22.1, libllama.v0.5.0.so)",
                     "cpu_build", c->r->cpu[0] ? c->r->cpu : c->r->best, "cpu_build_forced", c->r->cpu[0] != 0,
                     "avx512", loom_ref_avx512(c->r) != 0,
                     "system_info", sys,
                     "repack", c->r->repack != 0, "flash_attention", "off", "kv_type",
                     c->o->mo.k_type == LOOM_KV_Q8_0 ? "K cache Q8_0, V cache F16" : "F16", "n_ubatch",
                     "the prompt's tokens, at most 512",
                     "threads", c->o->n_threads);
}

/* text with each byte that does not start a valid UTF-8 sequence replaced by U+FFFD (JSON strings are UTF-8);
 * NULL when memory runs out. */
static char *valid_utf8(const char *text)
{
    size_t n = strlen(text), o = 0;
    char *out = malloc(3 * n + 1);
    for (size_t i = 0; out && i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k > 0) {
            memcpy(out + o, text + i, (size_t)k);
            o += (size_t)k, i += (size_t)k;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3, i++;
        }
    }
    if (out)
        out[o] = 0;
    return out;
}

static json_t *prompt_json(const char *text, const struct prompt_result *p)
{
    char *utf8 = valid_utf8(text);
    json_t *j = !utf8 ? NULL : json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f}", "prompt", utf8, "prompt_tokens", p->n_prompt,
                          "rows", p->rows, "bitwise_rows", p->bitwise, "top1_agree", p->top1, "max_abs_diff",
                          p->max_abs, "kl_mean", p->kl_mean, "kl_max", p->kl_max);
    free(utf8);
    if (j && p->first_row >= 0)
        json_object_set_new(j, "first_non_bitwise_pos", json_integer(p->first_row));
    if (j && p->divergence[0])
        json_object_set_new(j, "xray_first_divergent", json_string(p->divergence));
    return j;
}

/* The first 40 characters of a prompt as a Markdown table cell into cell[cap]: '|' escaped, control characters
 * as spaces, "..." when cut (at a character boundary; cap >= 256 holds it all). */
static void table_cell(const char *text, char *cell, size_t cap)
{
    size_t o = 0;
    int chars = 0;
    for (const unsigned char *s = (const unsigned char *)text; *s && o + 8 < cap; s++) {
        if ((*s & 0xc0) != 0x80 && chars++ == 40) {
            memcpy(cell + o, "...", 3);
            o += 3;
            break;
        }
        if (*s == '|')
            cell[o++] = '\\';
        cell[o++] = *s < 0x20 ? ' ' : (char)*s;
    }
    cell[o] = 0;
}

/* The Markdown certificate from its JSON. */
static void write_markdown(FILE *f, json_t *cert)
{
    json_t *id = json_object_get(cert, "identity"), *mo = json_object_get(id, "model");
    json_t *lo = json_object_get(id, "loom"), *re = json_object_get(id, "reference");
    fprintf(f, "# loom parity certificate\n\n**%s**\n\n", json_string_value(json_object_get(cert, "verdict")));
    const char *why = json_string_value(json_object_get(lo, "orders_note")); /* NULL: the orders are the build's */
    if (!json_is_true(json_object_get(cert, "bitwise")) && why)
        fprintf(f, "Expected to differ: %s.\n\n", why);
    fprintf(f, "- Model: `%s` (%s), XXH3-128 `%s`\n", json_string_value(json_object_get(mo, "path")),
            json_string_value(json_object_get(mo, "arch")), json_string_value(json_object_get(mo, "xxh3_128")));
    const char *from = json_string_value(json_object_get(lo, "orders_from"));
    fprintf(f, "- loom %s, kernel set %s, float orders %s (%s), threads: %d; CPU: %s\n",
            json_string_value(json_object_get(lo, "version")), json_string_value(json_object_get(lo, "kernels")),
            json_string_value(json_object_get(lo, "orders")), strcmp(from, "cpu") ? from : "the CPU's",
            (int)json_integer_value(json_object_get(lo, "threads")),
            json_string_value(json_object_get(id, "cpu")));
    const char *kv = json_string_value(json_object_get(re, "kv_type")); /* "F16" when both are */
    fprintf(f, "- Reference: %s, CPU build: %s (%s), weight repacking %s; flash attention off, %s%s, n_ubatch %s, "
               "threads: %d\n- Reference system info: `%s`\n- Date: %s\n",
            json_string_value(json_object_get(re, "engine")), json_string_value(json_object_get(re, "cpu_build")),
            json_is_true(json_object_get(re, "cpu_build_forced")) ? "forced by LOOM_REF_CPU" : "the best for this CPU",
            json_is_true(json_object_get(re, "repack")) ? "on" : "off", kv, strcmp(kv, "F16") ? "" : " K/V",
            json_string_value(json_object_get(re, "n_ubatch")),
            (int)json_integer_value(json_object_get(re, "threads")),
            json_string_value(json_object_get(re, "system_info")), json_string_value(json_object_get(id, "date")));
    int n_cont = (int)json_integer_value(json_object_get(cert, "continuation_tokens"));
    fprintf(f, "- Method: each prompt evaluated as one batch with every row's logits, then %d token%s of the "
               "reference's greedy continuation fed to both engines one by one; KL(reference || loom) over the "
               "sampleable tokens.\n", n_cont, n_cont == 1 ? "" : "s");
    for (int k = 0; k < 2; k++) {
        json_t *rows = json_object_get(cert, numerics_name(k));
        fprintf(f, "\n## %s numerics\n\n| # | prompt | tokens | rows | bitwise | top-1 agree | max abs diff | "
                   "mean KL | max KL |\n|---|---|---|---|---|---|---|---|---|\n", numerics_name(k));
        size_t i;
        json_t *p;
        json_array_foreach(rows, i, p) {
            char cell[256];
            table_cell(json_string_value(json_object_get(p, "prompt")), cell, sizeof cell);
            fprintf(f, "| %zu | %s | %d | %d | %d | %d | %.3g | %.3g | %.3g |\n", i + 1, cell,
                    (int)json_integer_value(json_object_get(p, "prompt_tokens")),
                    (int)json_integer_value(json_object_get(p, "rows")),
                    (int)json_integer_value(json_object_get(p, "bitwise_rows")),
                    (int)json_integer_value(json_object_get(p, "top1_agree")),
                    json_real_value(json_object_get(p, "max_abs_diff")),
                    json_real_value(json_object_get(p, "kl_mean")), json_real_value(json_object_get(p, "kl_max")));
        }
        json_array_foreach(rows, i, p) if (json_object_get(p, "xray_first_divergent"))
            fprintf(f, "\nPrompt %zu, first row not bitwise at position %d; X-ray: %s\n", i + 1,
                    (int)json_integer_value(json_object_get(p, "first_non_bitwise_pos")),
                    json_string_value(json_object_get(p, "xray_first_divergent")));
    }
}

/* Every prompt in both numerics into cert's "reference" and "canonical" arrays; *all_bitwise: every reference row. */
static int certify_all(struct certify_run *c, const struct prompt_set *set, json_t *cert, int *all_bitwise,
                       loom_error *err)
{
    *all_bitwise = 1;
    for (int k = 0; k < 2; k++) {
        json_t *arr = json_array();
        if (!arr || json_object_set_new(cert, numerics_name(k), arr))
            return loom_errorf(err, LOOM_E_NOMEM, "out of memory building the certificate's JSON");
        for (int i = 0; i < set->n; i++) {
            fprintf(stderr, "loom certify: %s numerics, prompt %d of %d (%d token%s, then %d generated)...\n",
                    numerics_name(k), i + 1, set->n, set->n_ids[i], set->n_ids[i] == 1 ? "" : "s", c->o->n_gen);
            memcpy(c->ids, set->ids[i], (size_t)set->n_ids[i] * sizeof *c->ids);
            struct prompt_result p;
            enum loom_numerics nu = k == 0 ? LOOM_NUMERICS_REFERENCE_BATCH : LOOM_NUMERICS_CANONICAL;
            int rc = certify_prompt(c, set->n_ids[i], nu, &p, err);
            if (rc != LOOM_OK)
                return rc;
            *all_bitwise &= k != 0 || p.bitwise == p.rows;
            if (json_array_append_new(arr, prompt_json(set->text[i], &p)))
                return loom_errorf(err, LOOM_E_NOMEM, "out of memory building the certificate's JSON");
            fprintf(stderr, "loom certify: %s numerics, prompt %d of %d: %d of %d rows bitwise\n", numerics_name(k),
                    i + 1, set->n, p.bitwise, p.rows);
        }
    }
    return LOOM_OK;
}

/* -o PREFIX before anything runs (loom_cli_check_prefix: PREFIX.json and PREFIX.md not the model or the prompts, in
 * a folder that exists). 0, or -1 with the message printed. */
static int check_out_prefix(const struct certify_opts *o)
{
    static const char *const exts[2] = {".json", ".md"};
    const char *const inputs[2] = {o->model, o->prompts_file}, *const what[2] = {"model", "prompts file"};
    return loom_cli_check_prefix("certify", "-o", o->out, exts, 2, inputs, what, 2) ? -1 : 0;
}

/* PREFIX.json and PREFIX.md; the Markdown to stdout too. */
static int write_certificate(const char *prefix, json_t *cert, loom_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.json", prefix);
    if (json_dump_file(cert, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0)
        return loom_errorf(err, LOOM_E_IO, "-o: cannot write %s (%s)", path, strerror(errno));
    snprintf(path, sizeof path, "%s.md", prefix);
    FILE *f = fopen(path, "w");
    if (!f)
        return loom_errorf(err, LOOM_E_IO, "-o: cannot write %s (%s)", path, strerror(errno));
    write_markdown(f, cert);
    int bad = ferror(f) | fclose(f);
    if (bad)
        return loom_errorf(err, LOOM_E_IO, "-o: writing %s failed", path);
    write_markdown(stdout, cert);
    return LOOM_OK;
}

static int certify_model(const loom_model *m, const struct certify_opts *o, const struct prompt_set *set,
                         int *all_bitwise, loom_error *err)
{
    struct loom_ref ref = {0};
    struct certify_run c = {.m = m, .r = &ref, .o = o};
    int rc = loom_ref_open(&ref, err);
    if (rc == LOOM_OK && !(c.rm = loom_ref_model_load(&ref, o->model, err)))
        rc = err->code;
    int nl = loom_model_n_logits(m);
    if (rc == LOOM_OK) {
        int n_vocab = ref.vocab_n_tokens(ref.model_get_vocab(c.rm));
        c.width = nl < n_vocab ? nl : n_vocab;
        c.loom_rows = malloc((size_t)set->max_ids * (size_t)nl * sizeof(float));
        c.ids = malloc((size_t)(set->max_ids + o->n_gen) * sizeof *c.ids);
        if (!c.loom_rows || !c.ids)
            rc = loom_errorf(err, LOOM_E_NOMEM, "out of memory for logits rows for %d tokens", set->max_ids);
    }
    json_t *cert = json_object();
    if (rc == LOOM_OK) {
        json_object_set_new(cert, "identity", identity(&c));
        json_object_set_new(cert, "continuation_tokens", json_integer(o->n_gen));
        rc = certify_all(&c, set, cert, all_bitwise, err);
    }
    if (rc == LOOM_OK) {
        json_object_set_new(cert, "bitwise", json_boolean(*all_bitwise));
        json_object_set_new(cert, "verdict", json_string(*all_bitwise ? "Bitwise equal in reference numerics: every "
                                                                        "row of every prompt."
                                                                      : "Not bitwise in reference numerics: see the "
                                                                        "rows and the X-ray of each first divergence."));
        rc = write_certificate(o->out, cert, err);
    }
    json_decref(cert);
    free(c.loom_rows), free(c.ids);
    if (c.rm)
        ref.model_free(c.rm);
    loom_ref_close(&ref);
    return rc;
}

int loom_cli_certify(int argc, char **argv)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct certify_opts o = {.n_gen = 256, .n_threads = cpus > 0 ? (int)cpus : 1, .out = "loom-certificate"};
    int rc = loom_cli_parse_options("certify", argc, argv, CERTIFY_OPTIONS, &o.mo, certify_set, &o);
    if (rc)
        return rc > 0 ? (certify_usage(stdout), 0) : (certify_usage(stderr), 2);
    loom_cli_check_threads("certify", o.n_threads);
    static struct prompt_set set;
    if (check_out_prefix(&o) != 0 || load_prompts(o.prompts_file, &set) != 0) {
        free(set.buf);
        return 2;
    }
    char path[4096];
    int status;
    loom_model *m = loom_cli_load_model("certify", &o.model, path, sizeof path, &o.mo, o.n_threads, &status);
    loom_error err = {0};
    int all_bitwise = 0;
    rc = !m ? -1 : tokenize_prompts(m, &set, &err);
    if (rc == LOOM_OK)
        rc = certify_model(m, &o, &set, &all_bitwise, &err);
    loom_model_free(m);
    free(set.buf);
    for (int i = 0; i < set.n; i++)
        free(set.ids[i]);
    if (!m)
        return status == 1 ? 2 : status;
    if (rc != LOOM_OK) /* trouble is 2, as cmp's: 1 means not bitwise */
        return (rc = loom_cli_fail("certify", rc, &err)) == 1 ? 2 : rc;
    return all_bitwise ? 0 : 1;
}
