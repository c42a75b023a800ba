/* inspect.c — `loom inspect [--check-tensors] [--ctx N] FILE`: opens and admits a qwen35 or qwen35moe GGUF (with
 * the flag, also validates every tensor's data), then prints the architecture, the hyper-parameters, the layer
 * execution plan (which state each layer owns), the expert plan of a MoE model, the parts of a split model, the
 * tensor table with file offsets, totals by type and the memory the model needs at a context length. A bad
 * file exits 1 with "loom inspect: FILE: reason". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define INSPECT_CTX 4096 /* the context length the memory is given for without --ctx (a session's default) */

/* bytes, and in MiB (KiB under one MiB, where 0.01 MiB would say little) */
static void print_bytes(const char *label, uint64_t bytes)
{
    if (bytes < 1024 * 1024)
        printf("  %-34s %14" PRIu64 " B  (%.2f KiB)\n", label, bytes, (double)bytes / 1024.0);
    else
        printf("  %-34s %14" PRIu64 " B  (%.2f MiB)\n", label, bytes, (double)bytes / (1024.0 * 1024.0));
}

/* The layers as the model describes them (KV rows in the default F16); with another K type a line says so. */
static void print_layer_plan(const loom_model_desc *d, enum loom_kv_type k_type)
{
    printf("\nlayer plan: %s\n", d->plan);
    for (uint32_t il = 0; il < d->n_layer; il++) {
        const loom_desc_item *kind = &d->kinds[d->layer_kind[il]];
        printf("  %3u %-10s %s\n", il, kind->name, kind->value);
    }
    if (k_type != LOOM_KV_F16)
        printf("  (KV rows above in F16; with the %s K cache the K rows are %s: the memory below counts them)\n",
               loom_kv_type_name(k_type), loom_kv_type_name(k_type));
}

/* Routed experts per layer, used per token, bytes per expert, the shared expert, and what one token reads of the
 * experts per layer (its used experts and the shared expert). */
static void print_expert_plan(const loom_model_desc *d)
{
    if (!d->n_expert)
        return;
    printf("\nexpert plan: %u routed experts per layer, %u used per token, plus 1 shared expert\n", d->n_expert,
           d->n_expert_used);
    if (d->expert_bytes_min == d->expert_bytes_max)
        print_bytes("one routed expert (gate, up, down)", d->expert_bytes_max);
    else {
        print_bytes("one routed expert, smallest layer", d->expert_bytes_min);
        print_bytes("one routed expert, largest layer", d->expert_bytes_max);
    }
    const char *at = d->expert_bytes_min == d->expert_bytes_max ? "per layer" : "(largest layer)";
    char label[64];
    snprintf(label, sizeof label, "shared expert %s", at);
    print_bytes(label, d->shared_expert_bytes);
    snprintf(label, sizeof label, "one token reads %s", at);
    print_bytes(label, d->n_expert_used * d->expert_bytes_max + d->shared_expert_bytes);
}

static void format_shape(const loom_gguf_tensor_info *t, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "[%" PRIu64, t->ne[0]);
    for (uint32_t i = 1; i < t->n_dims && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, ", %" PRIu64, t->ne[i]);
    if (n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "]");
}

/* The files of a split model: name, size, tensors and their bytes. */
static void print_parts(const loom_gguf *g)
{
    uint32_t n = loom_gguf_n_parts(g);
    if (n < 2)
        return;
    printf("\nsplit model: %u parts\n  %-4s %-56s %14s %8s %14s\n", n, "part", "file", "bytes", "tensors",
           "tensor bytes");
    loom_gguf_part_info p;
    loom_gguf_tensor_info t;
    for (uint32_t i = 0; i < n && loom_gguf_part_at(g, i, &p, NULL) == LOOM_OK; i++) {
        uint64_t data = 0;
        for (uint64_t k = 0; k < p.n_tensors && loom_gguf_tensor_at(g, p.first_tensor + k, &t, NULL) == LOOM_OK; k++)
            data += t.n_bytes;
        printf("  %-4u %-56s %14" PRIu64 " %8" PRIu64 " %14" PRIu64 "\n", i + 1, p.path, p.file_bytes, p.n_tensors,
               data);
    }
}

/* The tensor table (with each tensor's part when split) and totals by type; returns the total weight bytes. */
static uint64_t print_tensors(const loom_gguf *g, uint64_t n_tensors)
{
    uint64_t count[LOOM_GGUF_TYPE_LIMIT] = {0}, bytes[LOOM_GGUF_TYPE_LIMIT] = {0}, total = 0;
    const char *names[LOOM_GGUF_TYPE_LIMIT] = {0};
    char shape[96];
    loom_gguf_tensor_info t;
    int split = loom_gguf_n_parts(g) > 1;
    printf("\ntensors: %" PRIu64 "\n  %-40s %-6s %-22s %14s %14s%s\n", n_tensors, "name", "type", "shape", "bytes",
           "file offset", split ? "  part" : "");
    for (uint64_t i = 0; i < n_tensors && loom_gguf_tensor_at(g, i, &t, NULL) == LOOM_OK; i++) {
        format_shape(&t, shape, sizeof shape);
        printf("  %-40s %-6s %-22s %14" PRIu64 " %14" PRIu64, t.name, t.type_name, shape, t.n_bytes, t.file_offset);
        if (split)
            printf("  %4u", t.part + 1);
        putchar('\n');
        count[t.type]++;
        bytes[t.type] += t.n_bytes;
        names[t.type] = t.type_name;
        total += t.n_bytes;
    }
    printf("\ntotals by type:\n");
    for (uint32_t ty = 0; ty < LOOM_GGUF_TYPE_LIMIT; ty++)
        if (count[ty])
            printf("  %-6s %5" PRIu64 " tensors %14" PRIu64 " B  (%.2f MiB)\n", names[ty], count[ty], bytes[ty],
                   (double)bytes[ty] / (1024.0 * 1024.0));
    return total;
}

/* "a" or "an" before n read aloud in English: an 8, an 11, an 18, an 80, an 8192, an 11000 (eleven thousand), but
 * a 1100 (one thousand ...) and a 110000 (a hundred and ten thousand). */
static const char *article(uint32_t n)
{
    char d[16];
    int len = snprintf(d, sizeof d, "%u", n);
    int eleven_or_eighteen = len % 3 == 2 && d[0] == '1' && (d[1] == '1' || d[1] == '8');
    return d[0] == '8' || eleven_or_eighteen ? "an" : "a";
}

/* The memory of one sequence at an n_ctx-token context with a K cache of k_type, from the description's per-token
 * K/V and per-sequence state sizes (the sizes a session allocates: loom_session_state_bytes =
 * recurrent_state_bytes + n_ctx * the K and V bytes per token). */
static void print_memory(const loom_model_desc *d, uint64_t weights, uint32_t n_ctx, enum loom_kv_type k_type)
{
    char label[80];
    uint32_t n_attn = 0;
    for (uint32_t il = 0; il < d->n_layer; il++)
        n_attn += d->layer_kind[il] == 1;
    uint64_t per_token = d->kv_bytes_per_token - d->k_bytes_per_token[LOOM_KV_F16] + d->k_bytes_per_token[k_type];
    uint64_t kv = (uint64_t)n_ctx * per_token;
    printf("\nmemory at %s %u-token context (one sequence):\n", article(n_ctx), n_ctx);
    print_bytes("weights (mapped)", weights);
    print_bytes(k_type == LOOM_KV_Q8_0 ? "KV cache per token (Q8_0 K, F16 V)" : "KV cache per token (F16 K and V)",
                per_token);
    snprintf(label, sizeof label, "KV cache, %u attention layer%s", n_attn, n_attn == 1 ? "" : "s");
    print_bytes(label, kv);
    snprintf(label, sizeof label, "conv + recurrent state, %u layer%s", d->n_layer - n_attn,
             d->n_layer - n_attn == 1 ? "" : "s");
    print_bytes(label, d->recurrent_state_bytes);
    snprintf(label, sizeof label, "total for %s %u-token context", article(n_ctx), n_ctx);
    print_bytes(label, weights + kv + d->recurrent_state_bytes);
    printf("  (plus a session's compute scratch, which depends on its threads and batch: `loom bench -m FILE`\n"
           "   prints the whole session arena, state and scratch, in its peak RSS line)\n");
}

/* Whether the file carries loom.synth.sparse = true (loom synth --sparse: no tensor data, loom_model_load
 * refuses it). */
static int inspect_sparse(const loom_gguf *g)
{
    loom_gguf_kv_info kv = {0};
    int64_t i = loom_gguf_find_key(g, LOOM_SYNTH_SPARSE_KEY);
    return i >= 0 && loom_gguf_kv_at(g, (uint64_t)i, &kv, NULL) == LOOM_OK && kv.type == LOOM_GGUF_BOOL && kv.u64;
}

static void print_model(const char *path, const loom_gguf *g, const loom_model_desc *d, uint32_t n_ctx,
                        enum loom_kv_type k_type)
{
    loom_gguf_info f;
    loom_gguf_get_info(g, &f);
    printf("file: %s (%" PRIu64 " bytes, GGUF v%u, %" PRIu64 " keys, %" PRIu64 " tensors, alignment %" PRIu64 ")\n",
           path, f.file_bytes, f.version, f.n_kv, f.n_tensors, f.alignment);
    if (loom_gguf_n_parts(g) > 1)
        printf("(the first of %u parts: the bytes and keys are its own, the tensors all parts')\n",
               loom_gguf_n_parts(g));
    printf("architecture: %s\n", d->arch);
    if (inspect_sparse(g))
        printf("sparse synthetic file (loom.synth.sparse): its tensor data is a hole of zeros, for loom inspect "
               "only; loom run and the other commands that load the model refuse it\n");
    if (d->n_nextn)
        printf("nextn (multi-token prediction) layers: %u, present in the file and not run by loom\n", d->n_nextn);
    printf("hyper-parameters:\n");
    for (int i = 0; i < d->n_hparams; i++)
        printf("  %-34s %s\n", d->hparams[i].name, d->hparams[i].value);
    print_layer_plan(d, k_type);
    print_expert_plan(d);
    print_parts(g);
    uint64_t weights = print_tensors(g, f.n_tensors);
    print_memory(d, weights, n_ctx, k_type);
}

static const char INSPECT_USAGE[] =
    "usage: loom inspect [--check-tensors] [--ctx N] [--cache-type-k TYPE] FILE\n"
    "  --check-tensors  also validate every tensor's data (finite values and block scales, as llama.cpp's\n"
    "                   --check-tensors; reads the whole file)\n"
    "  --ctx N          the context length the memory is given for (default 4096; at most the model's\n"
    "                   context_length, as a session takes)\n"
    "  --cache-type-k TYPE  (-ctk) the K cache type the memory is given for: f16 (default) or q8_0\n";

/* The admitted model's <arch>.context_length (admission checked it is a UINT32). */
static uint32_t inspect_ctx_train(const loom_gguf *g, const loom_model_desc *d)
{
    char key[64];
    loom_gguf_kv_info kv = {0};
    snprintf(key, sizeof key, "%s.context_length", d->arch);
    int64_t i = loom_gguf_find_key(g, key);
    return i >= 0 && loom_gguf_kv_at(g, (uint64_t)i, &kv, NULL) == LOOM_OK ? (uint32_t)kv.u64 : 0;
}

/* What inspect takes besides FILE. */
static const struct loom_cli_option INSPECT_OPTIONS[] = {
    {"--check-tensors", LOOM_CLI_FLAG}, {"--ctx", LOOM_CLI_VALUE}, {"--cache-type-k", LOOM_CLI_VALUE},
    {"-ctk", LOOM_CLI_VALUE}, {NULL, LOOM_CLI_VALUE}};

struct inspect_args {
    const char *path;            /* FILE */
    int check;                   /* --check-tensors */
    uint32_t n_ctx, ctx_given;   /* --ctx (ctx_given 0: not given) */
    enum loom_kv_type k_type;    /* --cache-type-k */
};

/* One option with its value v (NULL for a flag, or when the command line ended) into a. 0, or -1 with the message
 * printed. */
static int inspect_option(const char *opt, const char *v, struct inspect_args *a)
{
    long long n;
    loom_error err = {0};
    if (!strcmp(opt, "--check-tensors")) {
        a->check = 1;
    } else if (!strcmp(opt, "--ctx")) {
        if (loom_cli_parse_int(v, 1, LOOM_CLI_CTX_MAX, &n) != 0) {
            fprintf(stderr, "loom inspect: --ctx expects a context length in [1, %d], found %s%s%s\n",
                    LOOM_CLI_CTX_MAX, LOOM_CLI_FOUND(v));
            return -1;
        }
        a->n_ctx = a->ctx_given = (uint32_t)n;
    } else if (strcmp(opt, "--cache-type-k") && strcmp(opt, "-ctk")) {
        return loom_cli_unhandled("inspect", opt);
    } else if (loom_kv_type_parse(v, &a->k_type, &err) != LOOM_OK) {
        fprintf(stderr, "loom inspect: %s expects f16 or q8_0 (the K cache; V stays f16), found %s%s%s\n", opt,
                LOOM_CLI_FOUND(v));
        return -1;
    }
    return 0;
}

/* The options and FILE into a, naming what is wrong: an option inspect does not take, or a second file. 0, 1 when
 * help was asked for, -1 (message printed). */
static int inspect_args(int argc, char **argv, struct inspect_args *a)
{
    for (int i = 1; i < argc; i++) {
        const struct loom_cli_option *opt;
        const char *v;
        if (!strcmp(argv[i], "-m")) {
            loom_cli_unknown("inspect", INSPECT_OPTIONS, argv[i], "the file comes without -m");
            return -1;
        }
        int kind = loom_cli_next_arg("inspect", INSPECT_OPTIONS, argc, argv, &i, &opt, &v);
        if (kind != LOOM_CLI_ARG_OPERAND && kind != LOOM_CLI_ARG_OPTION)
            return kind == LOOM_CLI_ARG_HELP ? 1 : -1;
        if (kind == LOOM_CLI_ARG_OPTION && inspect_option(opt->name, v, a) != 0)
            return -1;
        if (kind == LOOM_CLI_ARG_OPERAND && !*argv[i]) {
            fputs("loom inspect: expected a GGUF file, found ''\n", stderr);
            return -1;
        }
        if (kind == LOOM_CLI_ARG_OPERAND && a->path) {
            char why[256];
            snprintf(why, sizeof why, "FILE is '%.200s' already", a->path);
            loom_cli_unexpected("inspect", INSPECT_OPTIONS, argv[i], why, "one FILE");
            return -1;
        }
        if (kind == LOOM_CLI_ARG_OPERAND)
            a->path = argv[i];
    }
    if (!a->path)
        fputs("loom inspect: expected a GGUF FILE, found none\n", stderr);
    return a->path ? 0 : -1;
}

int loom_cli_inspect(int argc, char **argv)
{
    struct inspect_args a = {.n_ctx = INSPECT_CTX, .k_type = LOOM_KV_F16};
    int bad = inspect_args(argc, argv, &a);
    if (bad) {
        fputs(INSPECT_USAGE, bad > 0 ? stdout : stderr);
        return bad > 0 ? 0 : 2;
    }
    loom_error err = {0};
    loom_gguf *g = NULL;
    loom_model_desc desc = {0};
    int rc = loom_gguf_open_model(a.path, &g, &err);
    if (!rc) {
        loom_cli_gguf_warnings("inspect", a.path, g);
        rc = loom_model_describe(g, &desc, &err);
    }
    if (!rc && a.check)
        rc = loom_gguf_check_tensors(g, &err);
    uint32_t n_train = rc ? 0 : inspect_ctx_train(g, &desc);
    if (!rc && a.ctx_given && a.n_ctx > n_train)
        rc = loom_errorf(&err, LOOM_CLI_E_USAGE, "--ctx: expected at most the model's context_length %u, found %u",
                         n_train, a.n_ctx);
    if (!rc && !desc.k_bytes_per_token[a.k_type])
        rc = loom_errorf(&err, LOOM_CLI_E_USAGE, "--cache-type-k %s: a q8_0 K cache needs a head dimension that is a "
                         "multiple of 32", loom_kv_type_name(a.k_type));
    if (!rc && !a.ctx_given && a.n_ctx > n_train) /* the default, as a session's: at most context_length */
        a.n_ctx = n_train;
    if (rc) {
        fprintf(stderr, "loom inspect: %s: %s\n", a.path, err.msg);
        loom_model_desc_free(&desc);
        loom_gguf_close(g);
        return rc == LOOM_CLI_E_USAGE ? 2 : 1;
    }
    print_model(a.path, g, &desc, a.n_ctx, a.k_type);
    loom_model_desc_free(&desc);
    loom_gguf_close(g);
    return fflush(stdout) ? 1 : 0;
}
