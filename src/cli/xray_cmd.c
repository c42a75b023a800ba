/* xray_cmd.c — `loom xray`: list a model's circuit edges, or evaluate a prompt in loom and in the reference engine
 * and report, per edge and position, how loom's values differ, naming the first divergent edge (xray.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/xray.h"

struct xray_opts {
    const char *model, *prompt, *layers, *perturb;
    struct xray_request req;
    int list, json;
    struct loom_cli_model_opts mo;
};

static void xray_usage(FILE *f)
{
    fprintf(f,
            "usage: loom xray [-m FILE] -p TEXT [-n N] [options]\n"
            "       loom xray --list [-m FILE]\n"
            "Evaluates the prompt's token ids in loom and in the reference engine (llama.cpp, loaded at run time:\n"
            "flash attention off, F16 K/V) and compares every circuit edge at every position both engines\n"
            "represent: shape, differing elements, max |difference|, RMSE, max ULP; names the last exact and the\n"
            "first divergent edge (order: position, layer, place in the circuit). Exit status (as cmp's): 0 when\n"
            "everything compared is bitwise equal, 1 when something differs, 2 on trouble.\n"
            "  -m FILE              the GGUF model (default: the default model)\n"
            "  -p TEXT              the prompt (tokenized as data; evaluated as one batch)\n"
            "  -n N                 then N greedy tokens (loom's choice), one per step (default 0)\n"
            "  -t N                 threads for both engines (default 2)\n"
            "  --numerics MODE      loom's numerics: reference (default; llama.cpp's float order) or canonical\n"
            "  --per-token          evaluate the prompt one token per step too (state compared at every token)\n"
            "  --layers A-B         compare only layers A..B (and the edges outside the layers); or one layer A\n"
            "  --edges PATTERN      compare only edges whose name matches PATTERN (shell glob: 'blk.3.gdn.*')\n"
            "  --perturb EDGE[@POS] plant a fault: loom's first value of EDGE at position POS (default: its first\n"
            "                       row) goes up by one ULP; xray must name that edge first\n"
            "  --json               one JSON object with every compared row instead of the text report\n"
            "  --list               print the model's edges (name, shape per token or per step) and exit\n");
}

static int xray_set(void *opts, const char *opt, const char *val)
{
    struct xray_opts *o = opts;
    const char **str = !strcmp(opt, "-m") ? &o->model : !strcmp(opt, "-p") ? &o->prompt
                     : !strcmp(opt, "--layers") ? &o->layers : !strcmp(opt, "--edges") ? &o->req.pattern
                     : !strcmp(opt, "--perturb") ? &o->perturb : NULL;
    if (str) {
        *str = val;
        return 0;
    }
    if (!strcmp(opt, "--numerics"))
        return loom_cli_numerics("xray", val, &o->req.numerics);
    int *dst = !strcmp(opt, "-n") ? &o->req.n_decode : !strcmp(opt, "-t") ? &o->req.n_threads : NULL;
    char *end;
    long v = dst ? strtol(val, &end, 10) : 0;
    if (!dst) {
        fprintf(stderr, "loom xray: unknown option %s (loom xray --help)\n", opt);
        return -1;
    }
    if (*end || end == val || v < (dst == &o->req.n_threads) || v > 4096) {
        fprintf(stderr, "loom xray: %s expects an integer in [%d, 4096], found '%s'\n", opt,
                dst == &o->req.n_threads, val);
        return -1;
    }
    *dst = (int)v;
    return 0;
}

/* "A-B" or "A" into [lo, hi]; 0 or -1 with the message printed. */
static int parse_layers(const char *s, int *lo, int *hi)
{
    char *end;
    long a = strtol(s, &end, 10), b = a;
    if (*end == '-')
        b = strtol(end + 1, &end, 10);
    if (*end || end == s || a < 0 || b < a || b > 100000) {
        fprintf(stderr, "loom xray: --layers expects A-B or A (layer numbers, A <= B), found '%s'\n", s);
        return -1;
    }
    *lo = (int)a, *hi = (int)b;
    return 0;
}

/* "EDGE@POS" into the request's perturb (edge name kept in buf[cap]) and position. */
static int parse_perturb(const char *s, char *buf, size_t cap, struct xray_request *q)
{
    snprintf(buf, cap, "%s", s);
    q->perturb = buf;
    q->perturb_pos = -1;
    char *at = strchr(buf, '@'), *end;
    if (!at)
        return 0;
    *at = 0;
    long p = strtol(at + 1, &end, 10);
    if (*end || end == at + 1 || p < 0 || p > (1 << 24)) {
        fprintf(stderr, "loom xray: --perturb expects EDGE or EDGE@POS (a position >= 0), found '%s'\n", s);
        return -1;
    }
    q->perturb_pos = (int)p;
    return 0;
}

/* Take the flags (--list, --json, --per-token) out of argv, then the -X VALUE pairs. 0, 1 (help), -1. */
static int xray_parse(int argc, char **argv, struct xray_opts *o, char *perturb, size_t cap)
{
    int n = 1;
    for (int i = 1; i < argc; i++) {
        int *flag = !strcmp(argv[i], "--list") ? &o->list : !strcmp(argv[i], "--json") ? &o->json
                  : !strcmp(argv[i], "--per-token") ? &o->req.per_token : NULL;
        if (flag)
            *flag = 1;
        else
            argv[n++] = argv[i];
    }
    int rc = loom_cli_parse_pairs("xray", n, argv, &o->mo, xray_set, o);
    if (rc == 0 && o->layers)
        rc = parse_layers(o->layers, &o->req.layer_lo, &o->req.layer_hi);
    if (rc == 0 && o->perturb)
        rc = parse_perturb(o->perturb, perturb, cap, &o->req);
    if (rc == 0 && !o->list && !o->prompt) {
        fprintf(stderr, "loom xray: -p TEXT is required (or --list)\n");
        rc = -1;
    }
    return rc;
}

static int list_edges(const loom_model *m, const char *path)
{
    int n = loom_model_edges(m, NULL, 0);
    loom_edge *e = malloc((size_t)n * sizeof *e);
    if (!e) {
        fprintf(stderr, "loom xray: out of memory listing %d edges\n", n);
        return 1;
    }
    loom_model_edges(m, e, n);
    printf("%s: %d edges (%s)\n", path, n, loom_model_arch(m));
    for (int i = 0; i < n; i++) {
        char shape[96] = "";
        for (int d = 0; d < e[i].n_dims; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "[%lld]", (long long)e[i].shape[d]);
        printf("%-28s %-20s %s%s\n", e[i].name, shape, e[i].per_step ? "per step (state)" : "per token",
               e[i].is_int ? ", int32" : "");
    }
    free(e);
    return 0;
}

static int tokenize(const loom_model *m, const char *text, int32_t **ids, loom_error *err)
{
    size_t len = strlen(text);
    int cap = (int)(len < (1u << 20) ? len : 1u << 20) + 16;
    *ids = malloc((size_t)cap * sizeof **ids);
    if (!*ids)
        return loom_errorf(err, LOOM_E_NOMEM, "prompt: %d token ids", cap);
    int n = loom_tokenizer_encode(loom_model_tokenizer(m), text, len, LOOM_SPECIAL_DATA, *ids, cap, err);
    if (n > cap)
        return loom_errorf(err, LOOM_E_RANGE, "prompt: more than %d tokens", cap);
    if (n == 0)
        return loom_errorf(err, LOOM_E_ARG, "-p: expected text of at least one token, found none");
    return n;
}

/* {"edge": NAME, "pos": P} of row i, or null when i < 0. */
static void print_json_row(const struct xray_result *r, int i)
{
    if (i < 0)
        printf("null");
    else
        printf("{\"edge\": \"%s\", \"pos\": %d}", r->edges[r->rows[i].edge].name, r->rows[i].pos);
}

static void print_json(const struct xray_result *r, const struct xray_opts *o)
{
    const char *numerics = o->req.numerics == LOOM_NUMERICS_CANONICAL ? "canonical" : "reference";
    printf("{\"numerics\": \"%s\", \"rows\": [", numerics);
    for (int i = 0; i < r->n_rows; i++) {
        const struct xray_row *w = &r->rows[i];
        printf("%s\n  {\"edge\": \"%s\", \"pos\": %d, \"shape_ok\": %s, \"differ\": %lld, \"max_abs\": %.9g, "
               "\"rmse\": %.9g, \"max_ulp\": %u}", i ? "," : "", r->edges[w->edge].name, w->pos,
               w->shape_ok ? "true" : "false", (long long)w->n_diff, w->max_abs, w->rmse, w->max_ulp);
    }
    printf("],\n \"last_exact\": ");
    print_json_row(r, r->last_exact);
    printf(",\n \"first_divergent\": ");
    print_json_row(r, r->first_div);
    printf(",\n \"not_in_reference\": %d}\n", r->n_missing);
}

/* The text report: per position the count of bitwise edges and each divergent one (at most 12 a position). */
static void print_text(const struct xray_result *r)
{
    char line[512];
    for (int i = 0; i < r->n_rows;) {
        int pos = r->rows[i].pos, exact = 0, shown = 0, j = i;
        for (; j < r->n_rows && r->rows[j].pos == pos; j++)
            exact += r->rows[j].shape_ok && !r->rows[j].n_diff;
        printf("pos %d: %d edges compared, %d bitwise\n", pos, j - i, exact);
        for (int k = i; k < j; k++) {
            if (r->rows[k].shape_ok && !r->rows[k].n_diff)
                continue;
            if (shown++ == 12) {
                printf("  ... %d more divergent edges (--json lists all)\n", j - i - exact - 12);
                break;
            }
            xray_describe(r, k, line, sizeof line);
            printf("  %s\n", line);
        }
        i = j;
    }
    if (r->n_missing) {
        printf("not in the reference (not compared): %d edges:", r->n_missing);
        for (int i = 0; i < r->n_missing && i < (int)(sizeof r->missing / sizeof r->missing[0]); i++)
            printf(" %s", r->missing[i]);
        printf("%s\n", r->n_missing > (int)(sizeof r->missing / sizeof r->missing[0]) ? " ..." : "");
    }
    if (r->last_exact >= 0) {
        xray_describe(r, r->last_exact, line, sizeof line);
        printf("last exact: %s\n", line);
    }
    if (r->first_div >= 0) {
        xray_describe(r, r->first_div, line, sizeof line);
        printf("first divergent: %s\n", line);
    } else {
        printf("all %d compared rows bitwise equal\n", r->n_rows);
    }
}

static int xray_run(const loom_model *m, struct xray_opts *o, loom_error *err)
{
    int32_t *ids = NULL;
    int n = tokenize(m, o->prompt, &ids, err);
    struct loom_ref ref = {0};
    struct loom_ref_model *rm = NULL;
    int rc = n < 0 ? n : loom_ref_open(&ref, err);
    if (rc == LOOM_OK && !(rm = loom_ref_model_load(&ref, o->model, err)))
        rc = err->code;
    struct xray_result res = {0};
    if (rc == LOOM_OK) {
        o->req.tokens = ids;
        o->req.n_prompt = n;
        rc = xray_compare(m, &ref, rm, &o->req, &res, err);
    }
    if (rc == LOOM_OK) {
        if (o->json) {
            print_json(&res, o);
        } else {
            printf("%s: %d prompt tokens (%s), then %d decoded; loom: %s numerics, kernels %s; reference: llama.cpp "
                   "v0.5.0, flash attention off, F16 K/V\n", o->model, n, o->req.per_token ? "one per step" : "one batch",
                   o->req.n_decode, o->req.numerics == LOOM_NUMERICS_CANONICAL ? "canonical" : "reference",
                   loom_kernels_name());
            print_text(&res);
        }
        rc = res.first_div >= 0 || res.n_rows == 0 ? 1 : 0;
    }
    xray_result_free(&res);
    if (rm)
        ref.model_free(rm);
    loom_ref_close(&ref);
    free(ids);
    return rc;
}

int loom_cli_xray(int argc, char **argv)
{
    struct xray_opts o = {.req = {.numerics = LOOM_NUMERICS_REFERENCE_BATCH, .n_threads = 2, .layer_hi = 1 << 30}};
    char perturb[128];
    int rc = xray_parse(argc, argv, &o, perturb, sizeof perturb);
    if (rc)
        return rc > 0 ? (xray_usage(stdout), 0) : (xray_usage(stderr), 2);
    if (loom_cli_select_kernels() != 0)
        return 2;
    char path[4096];
    int status;
    loom_model *m = loom_cli_load_model("xray", &o.model, path, sizeof path, &o.mo, &status);
    if (!m)
        return status == 1 ? 2 : status;
    loom_error err = {0};
    if (o.list)
        rc = list_edges(m, o.model);
    else
        rc = xray_run(m, &o, &err);
    loom_model_free(m);
    if (rc < 0) /* trouble is 2, as cmp's: 1 means divergent */
        return (rc = loom_cli_fail("xray", rc, &err)) == 1 ? 2 : rc;
    return rc;
}
