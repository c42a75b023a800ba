/* tokenize.c — `loom tokenize [-m FILE] [--ids|--pieces] [--special] [--bos] [--decode]`: text on stdin to
 * token ids (one line, space separated) or pieces (one per line), or with --decode ids on stdin back to text.
 * Only the GGUF's tokenizer is loaded (loom_tokenizer_open), so vocabulary-only files (no tensors) work too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "cli/cli.h"
#include "cli/default_model.h"
#include "loom.h"

struct tokenize_opts {
    const char *model;
    int pieces, special, bos, decode;
};

static void usage(FILE *f)
{
    fputs("usage: loom tokenize [-m FILE] [--ids|--pieces] [--special] [--bos] [--decode] < input\n"
          "  Reads text on stdin and prints its token ids on one line (--ids, the default) or one\n"
          "  'id<TAB>piece' line per token (--pieces; bytes that are not whole UTF-8 are escaped as \\xNN).\n"
          "  --special  spellings of control tokens in the text become those tokens (trusted text only)\n"
          "  --bos      prepend the vocabulary's beginning-of-sequence token when it adds one\n"
          "  --decode   read ids on stdin (separated by whitespace or commas) and print their text instead\n"
          "             (byte for byte; a newline added only on a terminal)\n"
          "  -m FILE    any GGUF with tokenizer.ggml.* metadata (default: the qwen35 test vocabulary; --model\n"
          "             FILE too)\n",
          f);
}

/* What tokenize takes (its text comes on stdin). */
static const struct loom_cli_option TOKENIZE_OPTIONS[] = {
    {"-m", LOOM_CLI_ONE}, {"--model", LOOM_CLI_ONE}, {"--ids", LOOM_CLI_FLAG}, {"--pieces", LOOM_CLI_FLAG},
    {"--special", LOOM_CLI_FLAG}, {"--bos", LOOM_CLI_FLAG}, {"--decode", LOOM_CLI_FLAG}, {NULL, LOOM_CLI_VALUE}};

/* Returns 0, 1 when help was asked for, -1 on bad arguments (message printed). */
static int parse_args(int argc, char **argv, struct tokenize_opts *o)
{
    memset(o, 0, sizeof *o);
    int ids = 0;
    for (int i = 1; i < argc; i++) {
        const struct loom_cli_option *opt;
        const char *v;
        int kind = loom_cli_next_arg("tokenize", TOKENIZE_OPTIONS, argc, argv, &i, &opt, &v);
        if (kind == LOOM_CLI_ARG_OPERAND)
            loom_cli_unexpected("tokenize", TOKENIZE_OPTIONS, argv[i], "the text comes on stdin", NULL);
        if (kind != LOOM_CLI_ARG_OPTION)
            return kind == LOOM_CLI_ARG_HELP ? 1 : -1;
        if (opt->kind == LOOM_CLI_ONE && loom_cli_model_file("tokenize", opt->name, v)) /* -m, --model */
            return -1;
        int *flag = !strcmp(opt->name, "--ids") ? &ids : !strcmp(opt->name, "--pieces") ? &o->pieces
                  : !strcmp(opt->name, "--special") ? &o->special : !strcmp(opt->name, "--bos") ? &o->bos
                  : !strcmp(opt->name, "--decode") ? &o->decode : NULL;
        if (flag)
            *flag = 1;
        else if (!strcmp(opt->name, "-m") || !strcmp(opt->name, "--model"))
            o->model = v;
        else
            return loom_cli_unhandled("tokenize", opt->name);
    }
    if (ids && o->pieces) {
        fprintf(stderr, "loom tokenize: --ids and --pieces choose the output form; give one of them\n");
        return -1;
    }
    if (o->decode && (o->pieces || o->special || o->bos)) {
        fprintf(stderr, "loom tokenize: --decode prints text; --pieces, --special and --bos apply to encoding only\n");
        return -1;
    }
    return 0;
}

/* All of stdin in a malloc'd buffer (*len bytes, NUL-terminated); NULL when out of memory or on a read error. */
static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 == cap) {
            char *p = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                return NULL;
            }
            buf = p;
            cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - 1 - n, stdin);
        n += k;
        if (k == 0)
            break;
    }
    if (buf && ferror(stdin)) {
        free(buf);
        return NULL;
    }
    if (buf) {
        buf[n] = 0;
        *len = n;
    }
    return buf;
}

/* One piece on a line: valid UTF-8 as is, except \\, tabs, newlines and other C0 controls escaped; a
 * piece that is not whole UTF-8 (part of a character) has its bytes >= 0x80 escaped too. */
static void print_piece(const char *p, int n)
{
    int valid = 1;
    for (int i = 0; i < n && valid;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)p + i, n - i, &cp);
        valid = k > 0;
        i += valid ? (int)k : 0;
    }
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\')
            fputs("\\\\", stdout);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !valid))
            printf("\\x%02X", c);
        else
            putchar(c);
    }
}

static int run_encode(const loom_tokenizer *tok, const struct tokenize_opts *o, const char *text, size_t len)
{
    loom_error err = {0};
    int mode = o->special ? LOOM_SPECIAL_ALL : LOOM_SPECIAL_DATA;
    int need = loom_tokenizer_encode(tok, text, len, mode, NULL, 0, &err);
    if (need < 0) {
        fprintf(stderr, "loom tokenize: %s\n", err.msg);
        return 1;
    }
    int32_t bos = o->bos ? loom_tokenizer_bos(tok) : -1;
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (!ids) {
        fprintf(stderr, "loom tokenize: cannot allocate %d ids\n", need + 1);
        return 1;
    }
    int n = 0;
    if (bos >= 0)
        ids[n++] = bos;
    n += loom_tokenizer_encode(tok, text, len, mode, ids + n, need, &err);
    char piece[1024];
    for (int i = 0; i < n; i++) {
        if (!o->pieces) {
            printf(i ? " %d" : "%d", ids[i]);
            continue;
        }
        int k = loom_tokenizer_piece(tok, ids[i], piece, sizeof piece);
        printf("%d\t", ids[i]);
        print_piece(piece, k < (int)sizeof piece ? k : (int)sizeof piece);
        putchar('\n');
    }
    if (!o->pieces)
        putchar('\n');
    free(ids);
    return 0;
}

static int run_decode(const loom_tokenizer *tok, const char *text)
{
    size_t n = 0, cap = 256;
    int32_t *ids = malloc(cap * sizeof *ids);
    const char *p = text;
    int rc = ids ? 0 : 1;
    while (rc == 0) {
        int comma = p != text && *p == ','; /* a field must follow the comma after an id */
        p += comma;
        p += strspn(p, " \t\r\n");
        if (!*p && !comma)
            break;
        int len = (int)strcspn(p, " \t\r\n,");
        char field[24];
        long long v;
        snprintf(field, sizeof field, "%.*s", len < (int)sizeof field ? len : 0, p);
        if (loom_cli_parse_int(field, 0, (long long)loom_tokenizer_n_vocab(tok) - 1, &v)) {
            if (len)
                fprintf(stderr, "loom tokenize --decode: expected a token id (an integer in [0, %u)), found '%.*s'\n",
                        loom_tokenizer_n_vocab(tok), len < 40 ? len : 40, p);
            else
                fprintf(stderr, "loom tokenize --decode: expected a token id (an integer in [0, %u)), found an empty "
                                "field (commas separate ids)\n", loom_tokenizer_n_vocab(tok));
            rc = 1;
            break;
        }
        if (n == cap) {
            int32_t *q = realloc(ids, 2 * cap * sizeof *ids);
            if (!q) {
                rc = 1;
                break;
            }
            ids = q;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        p += len;
        p += strspn(p, " \t\r\n");
    }
    int len = rc == 0 ? loom_tokenizer_detokenize(tok, ids, n, NULL, 0) : -1;
    char *out = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (out) {
        loom_tokenizer_detokenize(tok, ids, n, out, (size_t)len);
        fwrite(out, 1, (size_t)len, stdout);
        if (isatty(STDOUT_FILENO) && (len == 0 || out[len - 1] != '\n'))
            putchar('\n'); /* for the prompt's sake; a pipe or file gets the text byte for byte */
    } else if (rc == 0) {
        fprintf(stderr, "loom tokenize --decode: cannot decode %zu ids\n", n);
        rc = 1;
    }
    free(out);
    free(ids);
    return rc;
}

int loom_cli_tokenize(int argc, char **argv)
{
    struct tokenize_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr != 0) {
        usage(pr > 0 ? stdout : stderr);
        return pr > 0 ? 0 : 2;
    }
    loom_error err = {0};
    char vocab[1024];
    if (!o.model) {
        if (loom_cli_default_vocab(vocab, sizeof vocab, &err) != LOOM_OK) {
            fprintf(stderr, "loom tokenize: %s\n", err.msg);
            return 1;
        }
        o.model = vocab;
    }
    loom_tokenizer *tok = loom_tokenizer_open(o.model, &err);
    if (!tok) {
        fprintf(stderr, "loom tokenize: %s: %s\n", o.model, err.msg);
        return 1;
    }
    loom_cli_tokenizer_warnings("tokenize", o.model, tok);
    size_t len = 0;
    char *text = read_stdin(&len);
    int rc = 1;
    if (!text)
        fprintf(stderr, "loom tokenize: cannot read stdin\n");
    else
        rc = o.decode ? run_decode(tok, text) : run_encode(tok, &o, text, len);
    free(text);
    loom_tokenizer_free(tok);
    return rc;
}
