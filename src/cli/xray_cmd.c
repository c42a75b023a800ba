/* xray_cmd.c — `loom xray`: list a model's circuit edges, or evaluate a prompt in loom and in the reference engine
 * and report, per edge and position, how loom's values differ, naming the first divergent edge (xray.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/xray.h"

struct xray_opts {
    const char *model, *prompt, *layers, *perturb;
    const char *evaluating; /* the last option given that only an evaluation uses (-p, -n, -t, --numerics, ...) */
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
            "  -t N                 threads for both engines (default: the online CPUs)\n"
            "  --numerics MODE      loom's numerics: reference (default; llama.cpp's float order) or canonical\n"
            "  --cache-type-k TYPE  (-ctk) both engines' K cache: f16 (default) or q8_0 (V stays f16)\n"
            "  --per-token          evaluate the prompt one token per step instead of as one batch (state\n"
            "                       compared at every position)\n"
            "  --layers A-B         compare only layers A..B (and the edges outside the layers); or one layer A\n"
            "  --edges PATTERN      compare only edges whose name matches PATTERN (shell glob: 'blk.3.gdn.*')\n"
            "  --perturb EDGE[@POS] plant a fault: loom's first value of EDGE at position POS (default: its first\n"
            "                       row) goes up by one ULP; xray must name that edge first\n"
            "  --json               one JSON object with every compared row instead of the text report\n"
            "  --list               print the model's edges (name, shape per token or per step) and exit\n"
            LOOM_CLI_LOAD_USAGE);
}

/* What xray takes: xray_set's options, then the model options it uses (its sessions and the reference's take
 * --cache-type-k; it reports no expert cache figures: no --stats). */
static const struct loom_cli_option XRAY_OPTIONS[] = {
    {"-m", LOOM_CLI_ONE}, {"-p", LOOM_CLI_ONE_TEXT}, {"-n", LOOM_CLI_VALUE}, {"-t", LOOM_CLI_VALUE},
    {"--numerics", LOOM_CLI_VALUE}, {"--per-token", LOOM_CLI_FLAG}, {"--layers", LOOM_CLI_VALUE},
    {"--edges", LOOM_CLI_VALUE}, {"--perturb", LOOM_CLI_VALUE}, {"--json", LOOM_CLI_FLAG}, {"--list", LOOM_CLI_FLAG},
    LOOM_CLI_LOAD_TABLE, {"--cache-type-k", LOOM_CLI_VALUE}, {"-ctk", LOOM_CLI_VALUE}, {NULL, LOOM_CLI_VALUE}};

/* Apply one of xray's own options (val NULL for a flag): 0, -1 with the message printed, or LOOM_CLI_UNHANDLED. */
static int xray_set(void *opts, const char *opt, const char *val)
{
    struct xray_opts *o = opts;
    if (!strcmp(opt, "--list")) {
        o->list = 1;
        return 0;
    }
    if (strcmp(opt, "-m") && strcmp(opt, "--layers") && strcmp(opt, "--edges"))
        o->evaluating = opt;
    int *flag = !strcmp(opt, "--json") ? &o->json : !strcmp(opt, "--per-token") ? &o->req.per_token : NULL;
    const char **str = !strcmp(opt, "-m") ? &o->model : !strcmp(opt, "-p") ? &o->prompt
                     : !strcmp(opt, "--layers") ? &o->layers : !strcmp(opt, "--edges") ? &o->req.pattern
                     : !strcmp(opt, "--perturb") ? &o->perturb : NULL;
    if (flag)
        *flag = 1;
    else if (str)
        *str = val;
    if (flag || str)
        return 0;
    if (!strcmp(opt, "--numerics"))
        return loom_cli_numerics("xray", val, &o->req.numerics);
    int is_t = !strcmp(opt, "-t"), hi = is_t ? LOOM_CLI_THREADS_MAX : 4096; /* -t or -n */
    long long v;
    if (!is_t && strcmp(opt, "-n"))
        return LOOM_CLI_UNHANDLED;
    if (loom_cli_parse_int(val, is_t, hi, &v)) {
        fprintf(stderr, "loom xray: %s expects an integer in [%d, %d], found '%s'\n", opt, is_t, hi, val);
        return -1;
    }
    *(is_t ? &o->req.n_threads : &o->req.n_decode) = (int)v;
    return 0;
}

/* "A-B" or "A" into [lo, hi]; 0 or -1 with the message printed. */
static int parse_layers(const char *s, int *lo, int *hi)
{
    char first[24]; /* A, the text before the '-' */
    const char *dash = strchr(s, '-');
    size_t n = dash ? (size_t)(dash - s) : strlen(s);
    long long a, b;
    snprintf(first, sizeof first, "%.*s", n < sizeof first ? (int)n : 0, s);
    if (loom_cli_parse_int(first, 0, 100000, &a) || loom_cli_parse_int(dash ? dash + 1 : first, a, 100000, &b)) {
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
    char *at = strchr(buf, '@');
    long long p = 0;
    if (at)
        *at = 0;
    if (!*buf || (at && loom_cli_parse_int(at + 1, 0, LOOM_CLI_CTX_MAX - 1, &p))) {
        fprintf(stderr, "loom xray: --perturb expects EDGE or EDGE@POS (an edge name, a position in [0, %d]), "
                        "found '%s'\n", LOOM_CLI_CTX_MAX - 1, s);
        return -1;
    }
    q->perturb_pos = at ? (int)p : -1; /* -1: the edge's first row */
    return 0;
}

/* The options into o (the --perturb edge kept in perturb[cap]), then what goes together checked. 0, 1 (help), -1. */
static int xray_parse(int argc, char **argv, struct xray_opts *o, char *perturb, size_t cap)
{
    int rc = loom_cli_parse_options("xray", argc, argv, XRAY_OPTIONS, &o->mo, xray_set, o);
    o->req.k_type = o->mo.k_type;
    if (rc == 0 && o->layers)
        rc = parse_layers(o->layers, &o->req.layer_lo, &o->req.layer_hi);
    if (rc == 0 && o->perturb)
        rc = parse_perturb(o->perturb, perturb, cap, &o->req);
    if (rc == 0 && o->list && o->evaluating) {
        fprintf(stderr, "loom xray: --list prints the model's edges only: %s does not apply (-m, --layers, --edges "
                        "and the model options do)\n", o->evaluating);
        rc = -1;
    }
    if (rc == 0 && !o->list && !o->prompt) {
        fprintf(stderr, "loom xray: -p TEXT is required (or --list)\n");
        rc = -1;
    }
    return rc;
}

/* The model's edges (those --layers and --edges select): name, one row's shape, per token or per step. */
static int list_edges(const loom_model *m, const struct xray_opts *o, loom_error *err)
{
    int n = loom_model_edges(m, NULL, 0);
    loom_edge *e = malloc((size_t)n * sizeof *e);
    char *selected = malloc((size_t)n);
    struct xray_request q = o->req;
    q.perturb = NULL;
    int rc = e && selected ? LOOM_OK : loom_errorf(err, LOOM_E_NOMEM, "out of memory listing %d edges", n);
    if (rc == LOOM_OK) {
        loom_model_edges(m, e, n);
        rc = xray_select(&q, e, n, selected, err);
    }
    int shown = 0;
    for (int i = 0; rc == LOOM_OK && i < n; i++)
        shown += selected[i];
    if (rc == LOOM_OK)
        printf("%s: %d edges (%s)%s\n", o->model, shown, loom_model_arch(m), shown < n ? ", selected" : "");
    for (int i = 0; rc == LOOM_OK && i < n; i++) {
        if (!selected[i])
            continue;
        char shape[96] = "";
        for (int d = 0; d < e[i].n_dims; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "[%lld]", (long long)e[i].shape[d]);
        printf("%-28s %-20s %s%s\n", e[i].name, shape, e[i].per_step ? "per step (state)" : "per token",
               e[i].is_int ? ", int32" : "");
    }
    free(e);
    free(selected);
    return rc;
}

static int tokenize(const loom_model *m, const char *text, int32_t **ids, loom_error *err)
{
    size_t len = strlen(text);
    int cap = (int)(len < (1u << 20) ? len : 1u << 20) + 16;
    *ids = malloc((size_t)cap * sizeof **ids);
    if (!*ids)
        return loom_errorf(err, LOOM_E_NOMEM, "prompt: out of memory for %d token ids", cap);
    int n = loom_tokenizer_encode(loom_model_tokenizer(m), text, len, LOOM_SPECIAL_DATA, *ids, cap, err);
    if (n > cap)
        return loom_errorf(err, LOOM_E_RANGE, "prompt: more than %d tokens", cap);
    if (n == 0)
        return loom_errorf(err, LOOM_E_ARG, "-p: expected text of at least one token, found none");
    return n;
}

static const char *numerics_name(const struct xray_opts *o)
{
    return o->req.numerics == LOOM_NUMERICS_CANONICAL ? "canonical" : "reference";
}

/* What was compared, before the text report. */
static void print_header(const struct xray_opts *o, int n_prompt, const struct loom_ref *ref)
{
    char steps[64], build[96], orders[64];
    if (o->req.per_token)
        snprintf(steps, sizeof steps, "one per step");
    else if (n_prompt > 512)
        snprintf(steps, sizeof steps, "one batch, micro-batches of 512");
    else
        snprintf(steps, sizeof steps, "one batch");
    printf("%s: %d prompt token%s (%s), then %d decoded; loom: %s numerics, kernels %s, %s; reference: llama.cpp "
           "v0.5.0 (CPU build %s), flash attention off, %s\n", o->model, n_prompt, n_prompt == 1 ? "" : "s", steps,
           o->req.n_decode, numerics_name(o), loom_kernels_name(), loom_cli_orders_text(orders, sizeof orders),
           loom_ref_cpu_build(ref, build, sizeof build),
           o->req.k_type == LOOM_KV_Q8_0 ? "K cache Q8_0, V cache F16" : "F16 K/V");
    char note[512];
    if (loom_ref_orders_note(ref, loom_orders_name(), note, sizeof note))
        printf("note: %s\n", note);
}

/* x as a JSON number, null when it is not finite (JSON has no infinity). */
static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* {"edge": NAME, "pos": P, "text": xray_describe's line} of row i, or null when i < 0. */
static json_t *json_row(const struct xray_result *r, int i)
{
    if (i < 0)
        return json_null();
    char line[512];
    xray_describe(r, i, line, sizeof line);
    return json_pack("{s:s, s:i, s:s}", "edge", r->edges[r->rows[i].edge].name, "pos", r->rows[i].pos, "text", line);
}

/* The whole comparison as one JSON object on stdout: what was compared, every row, the verdict's rows. */
static int print_json(const struct xray_result *r, const struct xray_opts *o, const struct loom_ref *ref,
                      loom_error *err)
{
    json_t *rows = json_array();
    for (int i = 0; rows && i < r->n_rows; i++) {
        const struct xray_row *w = &r->rows[i];
        json_array_append_new(rows, json_pack("{s:s, s:i, s:b, s:I, s:o, s:o, s:I}", "edge", r->edges[w->edge].name,
                                              "pos", w->pos, "shape_ok", w->shape_ok, "differ", (json_int_t)w->n_diff,
                                              "max_abs", jnum(w->max_abs), "rmse", jnum(w->rmse), "max_ulp",
                                              (json_int_t)w->max_ulp));
    }
    char note_buf[512]; /* the text report's note (print_header), null when it has none */
    const char *note = loom_ref_orders_note(ref, loom_orders_name(), note_buf, sizeof note_buf);
    json_t *doc = json_pack("{s:s%, s:i, s:i, s:b, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:o, s:o, s:o, s:o, s:i}",
                            "model", o->model, strlen(o->model), "prompt_tokens", o->req.n_prompt, "decoded",
                            o->req.n_decode,
                            "per_token", o->req.per_token, "numerics", numerics_name(o), "kernels",
                            loom_kernels_name(), "orders", loom_orders_name(), "orders_from", loom_cli_orders_from(),
                            "reference_cpu_build", ref->cpu[0] ? ref->cpu : ref->best,
                            "reference_cpu_build_forced", ref->cpu[0] != 0, "reference_avx512",
                            loom_ref_avx512(ref) != 0, "note", note ? json_string(note) : json_null(), "rows", rows,
                            "last_exact", json_row(r, r->last_exact), "first_divergent", json_row(r, r->first_div),
                            "not_in_reference", r->n_missing);
    /* a write that fails (a full disk) is main's to report, standard output named (its error flag stays set) */
    int rc = doc ? LOOM_OK : loom_errorf(err, LOOM_E_NOMEM, "out of memory building the JSON report");
    if (doc && json_dumpf(doc, stdout, JSON_PRESERVE_ORDER) == 0)
        printf("\n");
    json_decref(doc);
    return rc;
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
        int exact = 0;
        for (int i = 0; i < r->n_rows; i++)
            exact += r->rows[i].shape_ok && !r->rows[i].n_diff;
        printf("%d compared rows, %d bitwise equal\n", r->n_rows, exact);
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
    o->req.tokens = ids;
    o->req.n_prompt = n;
    if (rc == LOOM_OK && o->req.perturb && o->req.perturb_pos >= n + o->req.n_decode)
        rc = loom_errorf(err, LOOM_E_ARG, "--perturb %s@%d: expected a position below %d (%d prompt token%s + -n %d)",
                         o->req.perturb, o->req.perturb_pos, n + o->req.n_decode, n, n == 1 ? "" : "s",
                         o->req.n_decode);
    if (rc == LOOM_OK && !(rm = loom_ref_model_load(&ref, o->model, err)))
        rc = err->code;
    struct xray_result res = {0};
    if (rc == LOOM_OK)
        rc = xray_compare(m, &ref, rm, &o->req, &res, err);
    if (rc == LOOM_OK) {
        if (o->json) {
            rc = print_json(&res, o, &ref, err);
        } else {
            print_header(o, n, &ref);
            print_text(&res);
        }
        rc = rc != LOOM_OK ? rc : res.first_div >= 0 || res.n_rows == 0 ? 1 : 0;
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
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct xray_opts o = {.req = {.numerics = LOOM_NUMERICS_REFERENCE_BATCH, .n_threads = cpus > 0 ? (int)cpus : 1,
                                  .layer_hi = XRAY_ALL_LAYERS}};
    char perturb[128];
    int rc = xray_parse(argc, argv, &o, perturb, sizeof perturb);
    if (rc)
        return rc > 0 ? (xray_usage(stdout), 0) : (xray_usage(stderr), 2);
    loom_cli_check_threads("xray", o.req.n_threads);
    char path[4096];
    int status;
    loom_model *m = loom_cli_load_model("xray", &o.model, path, sizeof path, &o.mo, o.req.n_threads, &status);
    if (!m)
        return status == 1 ? 2 : status;
    loom_error err = {0};
    if (o.list)
        rc = list_edges(m, &o, &err);
    else
        rc = xray_run(m, &o, &err);
    loom_model_free(m);
    if (rc < 0) /* trouble is 2, as cmp's: 1 means divergent */
        return (rc = loom_cli_fail("xray", rc, &err)) == 1 ? 2 : rc;
    return rc;
}
