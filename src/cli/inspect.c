/* inspect.c — `loom inspect [--check-tensors] FILE`: opens and admits a qwen35 GGUF (with the flag, also
 * validates every tensor's data), then prints the architecture, the hyper-parameters, the layer execution
 * plan (which state each layer owns), the tensor table with file offsets, totals by type and the memory the
 * model needs. A bad file exits 1 with "loom inspect: FILE: reason". */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "kernels/types.h"
#include "model/model.h"

#define INSPECT_CTX 4096 /* the context length the memory total is given for */

static void print_bytes(const char *label, uint64_t bytes)
{
    printf("  %-34s %14" PRIu64 " B  (%.2f MiB)\n", label, bytes, (double)bytes / (1024.0 * 1024.0));
}

static void print_hparams(const struct loom_hparams *hp, uint64_t n_tokens)
{
    const uint32_t *s = hp->rope_sections;
    printf("hyper-parameters:\n");
    printf("  n_vocab (token_embd rows)          %u (tokenizer: %" PRIu64 " tokens)\n", hp->n_vocab, n_tokens);
    printf("  context_length                     %u\n", hp->n_ctx_train);
    printf("  embedding_length                   %u\n", hp->n_embd);
    printf("  block_count (layers run)           %u\n", hp->n_layer);
    printf("  feed_forward_length                %u\n", hp->n_ff);
    printf("  attention.head_count / _kv         %u / %u\n", hp->n_head, hp->n_head_kv);
    printf("  attention.key_length / value_len   %u / %u\n", hp->head_dim_k, hp->head_dim_v);
    printf("  attention.layer_norm_rms_epsilon   %g\n", (double)hp->rms_eps);
    printf("  rope.dimension_count               %u\n", hp->n_rot);
    printf("  rope.dimension_sections            [%u, %u, %u, %u]\n", s[0], s[1], s[2], s[3]);
    printf("  rope.freq_base                     %g\n", (double)hp->rope_freq_base);
    printf("  full_attention_interval            %u\n", hp->full_attn_interval);
    printf("  ssm.conv_kernel                    %u\n", hp->ssm_conv_kernel);
    printf("  ssm.inner_size                     %u\n", hp->ssm_inner);
    printf("  ssm.state_size (head dim)          %u\n", hp->ssm_head_dim);
    printf("  ssm.time_step_rank (value heads)   %u\n", hp->ssm_n_v_heads);
    printf("  ssm.group_count (key heads)        %u\n", hp->ssm_n_k_heads);
    printf("  output head                        %s\n", hp->tied_output ? "tied to token_embd" : "output.weight");
}

static void print_layer_plan(const struct loom_hparams *hp, const struct loom_geometry *geo)
{
    uint64_t d = hp->ssm_head_dim, chan = geo->conv_channels;
    uint64_t conv = geo->owner[LOOM_OWNER_CONV].bytes, mat = geo->owner[LOOM_OWNER_RECURRENT].bytes;
    uint64_t kv = geo->owner[LOOM_OWNER_K].bytes + geo->owner[LOOM_OWNER_V].bytes;
    uint32_t n_attn = 0;
    for (uint32_t il = 0; il < hp->n_layer; il++)
        n_attn += (il + 1) % hp->full_attn_interval == 0;
    printf("\nlayer plan: %u layers (%u Gated DeltaNet recurrent, %u gated full attention)\n", hp->n_layer,
           hp->n_layer - n_attn, n_attn);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if ((il + 1) % hp->full_attn_interval == 0)
            printf("  %3u attention  KV rows F16: K [%u][%u] + V [%u][%u] per position = %" PRIu64
                   " B/token; writes KV\n",
                   il, hp->n_head_kv, hp->head_dim_k, hp->n_head_kv, hp->head_dim_v, kv);
        else
            printf("  %3u recurrent  conv state [%" PRIu64 "][%u] F32 = %" PRIu64 " B + recurrent state [%u][%" PRIu64
                   "][%" PRIu64 "] F32 = %" PRIu64 " B; writes no KV\n",
                   il, chan, hp->ssm_conv_kernel - 1, conv, hp->ssm_n_v_heads, d, d, mat);
    }
}

static void format_shape(const struct loom_gguf_tensor *t, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "[%" PRIu64, t->ne[0]);
    for (uint32_t i = 1; i < t->n_dims && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, ", %" PRIu64, t->ne[i]);
    if (n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "]");
}

/* The tensor table and totals by type; returns the total weight bytes. */
static uint64_t print_tensors(const struct loom_gguf *g)
{
    uint64_t count[LOOM_TYPE_COUNT] = {0}, bytes[LOOM_TYPE_COUNT] = {0}, total = 0;
    char shape[96];
    printf("\ntensors: %" PRIu64 "\n  %-40s %-6s %-22s %14s %14s\n", g->n_tensors, "name", "type", "shape", "bytes",
           "file offset");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct loom_gguf_tensor *t = &g->tensors[i];
        format_shape(t, shape, sizeof shape);
        printf("  %-40.*s %-6s %-22s %14" PRIu64 " %14td\n", (int)(t->name.len < 96 ? t->name.len : 96), t->name.ptr,
               loom_type_traits(t->type)->name, shape, t->nbytes, (const uint8_t *)t->data - g->map);
        count[t->type]++;
        bytes[t->type] += t->nbytes;
        total += t->nbytes;
    }
    printf("\ntotals by type:\n");
    for (uint32_t ty = 0; ty < LOOM_TYPE_COUNT; ty++)
        if (count[ty])
            printf("  %-6s %5" PRIu64 " tensors %14" PRIu64 " B  (%.2f MiB)\n", loom_type_traits(ty)->name, count[ty],
                   bytes[ty], (double)bytes[ty] / (1024.0 * 1024.0));
    return total;
}

static void print_memory(const struct loom_geometry *geo, uint64_t weights)
{
    uint64_t kv = geo->kv_bytes_per_token, rec = geo->recurrent_state_bytes;
    char label[64];
    printf("\nmemory:\n");
    print_bytes("weights (mapped)", weights);
    print_bytes("KV cache per token", kv);
    print_bytes("recurrent state per sequence", rec);
    snprintf(label, sizeof label, "total for a %d-token context", INSPECT_CTX);
    print_bytes(label, weights + (uint64_t)INSPECT_CTX * kv + rec);
}

static void print_model(const char *path, const struct loom_gguf *g, const struct loom_hparams *hp,
                        const struct loom_geometry *geo)
{
    const struct loom_gguf_kv *tokens = loom_gguf_find_kv(g, "tokenizer.ggml.tokens");
    uint32_t n_nextn = 0;
    loom_gguf_get_u32(g, "qwen35.nextn_predict_layers", 1, &n_nextn, NULL);
    printf("file: %s (%zu bytes, GGUF v%u, %" PRIu64 " keys, %" PRIu64 " tensors, alignment %" PRIu64 ")\n", path,
           g->size, g->version, g->n_kv, g->n_tensors, g->alignment);
    printf("architecture: %s\n", hp->arch);
    if (n_nextn)
        printf("nextn (multi-token prediction) layers: %u, present in the file and not run by loom\n", n_nextn);
    print_hparams(hp, tokens ? tokens->arr_n : 0);
    print_layer_plan(hp, geo);
    uint64_t weights = print_tensors(g);
    print_memory(geo, weights);
}

static const char INSPECT_USAGE[] =
    "usage: loom inspect [--check-tensors] FILE\n"
    "  --check-tensors  also validate every tensor's data (finite values and block scales, as llama.cpp's\n"
    "                   --check-tensors; reads the whole file)\n";

int loom_cli_inspect(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(INSPECT_USAGE, stdout);
        return 0;
    }
    int check = argc == 3 && !strcmp(argv[1], "--check-tensors");
    if (argc != 2 + check) {
        fputs(INSPECT_USAGE, stderr);
        return 2;
    }
    const char *path = argv[1 + check];
    struct loom_gguf *g = NULL;
    const struct loom_arch *arch;
    struct loom_hparams hp;
    struct loom_geometry geo;
    loom_error err = {0};
    int rc = loom_gguf_open(path, &g, &err);
    if (!rc) {
        loom_cli_gguf_warnings("inspect", path, g);
        rc = loom_arch_admit(g, &arch, &hp, &geo, &err);
    }
    if (!rc && check)
        rc = loom_model_check_tensors(g, &err);
    if (rc) {
        fprintf(stderr, "loom inspect: %s: %s\n", path, err.msg);
        loom_gguf_close(g);
        return 1;
    }
    print_model(path, g, &hp, &geo);
    loom_gguf_close(g);
    return fflush(stdout) ? 1 : 0;
}
