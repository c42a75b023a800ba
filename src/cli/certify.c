/* certify.c — `loom certify`: teacher-forced logits of loom against the reference engine over a prompt set, in both
 * numerics, written as a certificate (Markdown and JSON): the model's digest, both engines' versions and settings,
 * per prompt the bitwise rows, max difference, top-1 agreement and KL divergence, and for a row that is not bitwise
 * in reference numerics the X-ray of its first divergent edge (xray.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

static int certify_set(void *opts, const char *opt, const char *val)
{
    struct certify_opts *o = opts;
    const char **str = !strcmp(opt, "-m") ? &o->model : !strcmp(opt, "--prompts") ? &o->prompts_file
                     : !strcmp(opt, "-o") ? &o->out : NULL;
    if (str) {
        *str = val;
        return 0;
    }
    int *dst = !strcmp(opt, "-n") ? &o->n_gen : !strcmp(opt, "-t") ? &o->n_threads : NULL;
    if (!dst) {
        fprintf(stderr, "loom certify: unknown option %s (loom certify --help)\n", opt);
        return -1;
    }
    char *end;
    long v = strtol(val, &end, 10);
    if (*end || end == val || v < (dst == &o->n_threads) || v > 4096) {
        fprintf(stderr, "loom certify: %s expects an integer in [%d, 4096], found '%s'\n", opt,
                dst == &o->n_threads, val);
        return -1;
    }
    *dst = (int)v;
    return 0;
}

static void certify_usage(FILE *f)
{
    fprintf(f, "usage: loom certify [-m FILE] [--prompts FILE] [-n N] [-t N] [-o PREFIX]\n"
               "Teacher-forced logits of loom against the reference engine (llama.cpp, loaded at run time: flash\n"
               "attention off, F16 K/V) in both numerics: each prompt as one batch, then N tokens of the\n"
               "reference's greedy continuation one by one, every row compared. Writes PREFIX.md and PREFIX.json\n"
               "(the Markdown also to stdout). Exit status (as cmp's): 0 when every row is bitwise equal in\n"
               "reference numerics, 1 when one is not, 2 on trouble.\n"
               "  -m FILE        the GGUF model (default: the default model)\n"
               "  --prompts FILE one prompt per non-empty line (default: five built-in prompts)\n"
               "  -n N           continuation tokens per prompt (default 256)\n"
               "  -t N           threads for both engines (default 2)\n"
               "  -o PREFIX      certificate files (default loom-certificate)\n");
}

/* The prompts: FILE's non-empty lines (into buf, kept), or the built-in set. Count, or -1 (message printed). */
static int load_prompts(const char *file, char **buf, const char **out)
{
    if (!file) {
        for (size_t i = 0; i < sizeof DEFAULT_PROMPTS / sizeof DEFAULT_PROMPTS[0]; i++)
            out[i] = DEFAULT_PROMPTS[i];
        return (int)(sizeof DEFAULT_PROMPTS / sizeof DEFAULT_PROMPTS[0]);
    }
    FILE *f = fopen(file, "rb");
    size_t cap = 1 << 20, len = 0;
    *buf = f ? malloc(cap + 1) : NULL;
    if (*buf)
        len = fread(*buf, 1, cap, f);
    if (f)
        fclose(f);
    if (!*buf) {
        fprintf(stderr, "loom certify: --prompts %s: cannot read the file\n", file);
        return -1;
    }
    (*buf)[len] = 0;
    int n = 0;
    for (char *save = NULL, *line = strtok_r(*buf, "\n", &save); line && n < MAX_PROMPTS;
         line = strtok_r(NULL, "\n", &save))
        if (line[strspn(line, " \t\r")])
            out[n++] = line;
    if (n == 0)
        fprintf(stderr, "loom certify: --prompts %s: expected at least one non-empty line, found none\n", file);
    return n ? n : -1;
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
                             .layer_hi = 1 << 30};
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
                                                           NULL, NULL, err);
    if (!rctx)
        return err->code;
    loom_session_params sp = {.n_ctx = n_ctx, .n_threads = c->o->n_threads, .numerics = numerics,
                              .n_ubatch = (int)c->r->n_ubatch(rctx)};
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
    char sys[1024];
    snprintf(sys, sizeof sys, "%s", c->r->print_system_info());
    sys[strcspn(sys, "\n")] = 0;
    return json_pack("{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:i}, s:s, s:{s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:i}}",
                     "date", date, "model", "path", c->o->model, "xxh3_128", digest, "arch", loom_model_arch(c->m),
                     "loom", "version", loom_version(), "kernels", loom_kernels_name(), "threads", c->o->n_threads,
                     "cpu", cpu, "reference", "engine", "llama.cpp v0.5.0 (node-llama-cpp 3.22.1, libllama.v0.5.0.so)",
                     "cpu_build", c->r->cpu[0] ? c->r->cpu : "the best for this CPU", "system_info", sys,
                     "repack", c->r->repack != 0, "flash_attention", "off", "kv_type", "F16", "n_ubatch",
                     "the prompt's tokens, at most 512",
                     "threads", c->o->n_threads);
}

static json_t *prompt_json(const char *text, const struct prompt_result *p)
{
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f}", "prompt", text, "prompt_tokens", p->n_prompt,
                          "rows", p->rows, "bitwise_rows", p->bitwise, "top1_agree", p->top1, "max_abs_diff",
                          p->max_abs, "kl_mean", p->kl_mean, "kl_max", p->kl_max);
    if (p->first_row >= 0)
        json_object_set_new(j, "first_non_bitwise_pos", json_integer(p->first_row));
    if (p->divergence[0])
        json_object_set_new(j, "xray_first_divergent", json_string(p->divergence));
    return j;
}

/* The Markdown certificate from its JSON. */
static void write_markdown(FILE *f, json_t *cert)
{
    json_t *id = json_object_get(cert, "identity"), *mo = json_object_get(id, "model");
    json_t *lo = json_object_get(id, "loom"), *re = json_object_get(id, "reference");
    fprintf(f, "# loom parity certificate\n\n%s\n\n", json_string_value(json_object_get(cert, "verdict")));
    fprintf(f, "- Model: `%s` (%s), XXH3-128 `%s`\n", json_string_value(json_object_get(mo, "path")),
            json_string_value(json_object_get(mo, "arch")), json_string_value(json_object_get(mo, "xxh3_128")));
    fprintf(f, "- loom %s, kernel set %s, %d threads; CPU: %s\n", json_string_value(json_object_get(lo, "version")),
            json_string_value(json_object_get(lo, "kernels")), (int)json_integer_value(json_object_get(lo, "threads")),
            json_string_value(json_object_get(id, "cpu")));
    fprintf(f, "- Reference: %s, CPU build: %s, weight repacking %s; flash attention off, K/V F16, n_ubatch %s, "
               "%d threads\n- Reference system info: `%s`\n- Date: %s\n",
            json_string_value(json_object_get(re, "engine")), json_string_value(json_object_get(re, "cpu_build")),
            json_is_true(json_object_get(re, "repack")) ? "on" : "off",
            json_string_value(json_object_get(re, "n_ubatch")),
            (int)json_integer_value(json_object_get(re, "threads")),
            json_string_value(json_object_get(re, "system_info")), json_string_value(json_object_get(id, "date")));
    fprintf(f, "- Method: each prompt evaluated as one batch with every row's logits, then %d tokens of the "
               "reference's greedy continuation fed to both engines one by one; KL(reference || loom) over the "
               "sampleable tokens.\n",
            (int)json_integer_value(json_object_get(cert, "continuation_tokens")));
    for (int k = 0; k < 2; k++) {
        json_t *rows = json_object_get(cert, numerics_name(k));
        fprintf(f, "\n## %s numerics\n\n| prompt | tokens | rows | bitwise | top-1 agree | max abs diff | mean KL | "
                   "max KL |\n|---|---|---|---|---|---|---|---|\n", numerics_name(k));
        size_t i;
        json_t *p;
        json_array_foreach(rows, i, p) {
            fprintf(f, "| %zu | %d | %d | %d | %d | %.3g | %.3g | %.3g |\n", i + 1,
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

/* Tokenize prompt i into c->ids (sized for the longest prompt plus the continuation). Count, or an error. */
static int tokenize_prompt(struct certify_run *c, const char *text, int cap, loom_error *err)
{
    int n = loom_tokenizer_encode(loom_model_tokenizer(c->m), text, strlen(text), LOOM_SPECIAL_DATA, c->ids, cap, err);
    if (n > cap)
        return loom_errorf(err, LOOM_E_RANGE, "prompt '%.40s...': %d tokens, more than the %d loom certify takes", text,
                           n, cap);
    if (n == 0)
        return loom_errorf(err, LOOM_E_ARG, "prompt '%s': expected at least one token, found none", text);
    return n;
}

#define MAX_PROMPT_TOKENS 2048

/* Every prompt in both numerics into cert's "reference" and "canonical" arrays; *all_bitwise: every reference row. */
static int certify_all(struct certify_run *c, const char **prompts, int n_prompts, json_t *cert, int *all_bitwise,
                       loom_error *err)
{
    *all_bitwise = 1;
    for (int k = 0; k < 2; k++) {
        json_t *arr = json_array();
        json_object_set_new(cert, numerics_name(k), arr);
        for (int i = 0; i < n_prompts; i++) {
            int n = tokenize_prompt(c, prompts[i], MAX_PROMPT_TOKENS, err);
            if (n < 0)
                return n;
            struct prompt_result p;
            int rc = certify_prompt(c, n, k == 0 ? LOOM_NUMERICS_REFERENCE_BATCH : LOOM_NUMERICS_CANONICAL, &p, err);
            if (rc != LOOM_OK)
                return rc;
            *all_bitwise &= k != 0 || p.bitwise == p.rows;
            json_array_append_new(arr, prompt_json(prompts[i], &p));
            fprintf(stderr, "loom certify: %s numerics, prompt %d of %d: %d of %d rows bitwise\n", numerics_name(k),
                    i + 1, n_prompts, p.bitwise, p.rows);
        }
    }
    return LOOM_OK;
}

/* PREFIX.json and PREFIX.md; the Markdown to stdout too. */
static int write_certificate(const char *prefix, json_t *cert, loom_error *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.json", prefix);
    if (json_dump_file(cert, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0)
        return loom_errorf(err, LOOM_E_IO, "-o: cannot write %s", path);
    snprintf(path, sizeof path, "%s.md", prefix);
    FILE *f = fopen(path, "w");
    if (!f)
        return loom_errorf(err, LOOM_E_IO, "-o: cannot write %s", path);
    write_markdown(f, cert);
    int bad = ferror(f) | fclose(f);
    if (bad)
        return loom_errorf(err, LOOM_E_IO, "-o: writing %s failed", path);
    write_markdown(stdout, cert);
    return LOOM_OK;
}

static int certify_model(const loom_model *m, const struct certify_opts *o, const char **prompts, int n_prompts,
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
        c.loom_rows = malloc((size_t)MAX_PROMPT_TOKENS * (size_t)nl * sizeof(float));
        c.ids = malloc((size_t)(MAX_PROMPT_TOKENS + o->n_gen) * sizeof *c.ids);
        if (!c.loom_rows || !c.ids)
            rc = loom_errorf(err, LOOM_E_NOMEM, "certify: logits rows for %d tokens", MAX_PROMPT_TOKENS);
    }
    json_t *cert = json_object();
    if (rc == LOOM_OK) {
        json_object_set_new(cert, "identity", identity(&c));
        json_object_set_new(cert, "continuation_tokens", json_integer(o->n_gen));
        rc = certify_all(&c, prompts, n_prompts, cert, all_bitwise, err);
    }
    if (rc == LOOM_OK) {
        json_object_set_new(cert, "verdict", json_string(*all_bitwise ? "**Bitwise equal** in reference numerics: "
                                                                        "every row of every prompt."
                                                                      : "**Not bitwise** in reference numerics: see "
                                                                        "the rows and X-ray below."));
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
    struct certify_opts o = {.n_gen = 256, .n_threads = 2, .out = "loom-certificate"};
    int rc = loom_cli_parse_pairs("certify", argc, argv, &o.mo, certify_set, &o);
    if (rc)
        return rc > 0 ? (certify_usage(stdout), 0) : (certify_usage(stderr), 2);
    if (loom_cli_select_kernels() != 0)
        return 2;
    char *buf = NULL;
    const char *prompts[MAX_PROMPTS];
    int n_prompts = load_prompts(o.prompts_file, &buf, prompts);
    if (n_prompts < 0)
        return 2;
    char path[4096];
    int status;
    loom_model *m = loom_cli_load_model("certify", &o.model, path, sizeof path, &o.mo, &status);
    if (!m) {
        free(buf);
        return status == 1 ? 2 : status;
    }
    loom_error err = {0};
    int all_bitwise = 0;
    rc = certify_model(m, &o, prompts, n_prompts, &all_bitwise, &err);
    loom_model_free(m);
    free(buf);
    if (rc != LOOM_OK) /* trouble is 2, as cmp's: 1 means not bitwise */
        return (rc = loom_cli_fail("certify", rc, &err)) == 1 ? 2 : rc;
    return all_bitwise ? 0 : 1;
}
