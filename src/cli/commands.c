/* commands.c — the subcommand table, and what the subcommands share: their clock, the thread-count check, parsing
 * by each command's option table and the messages about what it takes, loading the model (default model,
 * --check-tensors, the file's warnings), reporting a failure, the sampler options of run and chat, and the kernel
 * choice from the environment. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/default_model.h"
#include "loom.h"

const struct loom_cli_command loom_cli_commands[] = {
    {"run", loom_cli_run, 1},
    {"inspect", loom_cli_inspect, 1},
    {"synth", loom_cli_synth, 1},
    {"tokenize", loom_cli_tokenize, 1},
    {"chat", loom_cli_chat, 1},
    {"quantize", loom_cli_quantize, 1},
    {"bench", loom_cli_bench, 1},
    {"serve", loom_cli_serve, 1},
    {"xray", loom_cli_xray, 2},
    {"certify", loom_cli_certify, 2},
    {NULL, NULL, 0},
};

static const char *const NUMERICS[] = {"canonical", "reference"};

static const char *numerics_name(int i)
{
    return i >= 0 && i < (int)(sizeof NUMERICS / sizeof NUMERICS[0]) ? NUMERICS[i] : NULL;
}

/* --numerics VALUE (run, chat, bench, xray, certify): canonical or reference (any case) into *out. 0, or -1 with the message
 * printed as `loom CMD: ...`. */
int loom_cli_numerics(const char *cmd, const char *val, enum loom_numerics *out)
{
    const char *name = val ? loom_cli_listed(val, numerics_name) : NULL;
    if (!name) {
        fprintf(stderr, "loom %s: --numerics expects reference or canonical, found %s%s%s\n", cmd,
                LOOM_CLI_FOUND(val));
        return -1;
    }
    *out = name == NUMERICS[1] ? LOOM_NUMERICS_REFERENCE_BATCH : LOOM_NUMERICS_CANONICAL;
    return 0;
}

double loom_cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double loom_cli_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kib = -1;
    while (f && kib < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kib) != 1)
            kib = -1;
    if (f)
        fclose(f);
    struct rusage ru;
    if (kib < 0)
        kib = getrusage(RUSAGE_SELF, &ru) == 0 ? (long long)ru.ru_maxrss : 0; /* KiB on Linux */
    return 1024.0 * (double)kib;
}

void loom_cli_check_threads(const char *cmd, int n_threads)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 0 && n_threads > cpus)
        fprintf(stderr,
                "loom %s: warning: -t %d is more than the %ld online CPUs; threads that share cores make every step "
                "wait for each other (expect a much slower run)\n",
                cmd, n_threads, cpus);
}

void loom_cli_gguf_warnings(const char *cmd, const char *path, const loom_gguf *g)
{
    loom_gguf_info info;
    loom_gguf_get_info(g, &info);
    for (uint64_t i = 0; i < info.n_warnings && i < LOOM_GGUF_WARNINGS_KEPT; i++)
        fprintf(stderr, "loom %s: warning: %s: %s\n", cmd, path, loom_gguf_warning(g, i));
    if (info.n_warnings > LOOM_GGUF_WARNINGS_KEPT)
        fprintf(stderr, "loom %s: warning: %s: %llu more warnings like these\n", cmd, path,
                (unsigned long long)(info.n_warnings - LOOM_GGUF_WARNINGS_KEPT));
}

void loom_cli_model_warnings(const char *cmd, const char *path, const loom_model *m)
{
    loom_cli_gguf_warnings(cmd, path, loom_model_gguf(m));
}

void loom_cli_tokenizer_warnings(const char *cmd, const char *path, const loom_tokenizer *tok)
{
    int n = loom_tokenizer_n_warnings(tok);
    for (int i = 0; i < n && i < LOOM_GGUF_WARNINGS_KEPT; i++)
        fprintf(stderr, "loom %s: warning: %s: %s\n", cmd, path, loom_tokenizer_warning(tok, i));
    if (n > LOOM_GGUF_WARNINGS_KEPT)
        fprintf(stderr, "loom %s: warning: %s: %d more warnings like these\n", cmd, path, n - LOOM_GGUF_WARNINGS_KEPT);
}

loom_model *loom_cli_load_model(const char *cmd, const char **path, char *buf, size_t cap,
                                const struct loom_cli_model_opts *mo, int n_threads, int *status)
{
    loom_error err = {0};
    *status = 2;
    if (loom_cli_select_kernels())
        return NULL;
    *status = 1;
    if (!*path) {
        int rc = loom_cli_default_model(buf, cap, &err);
        if (rc != LOOM_OK) {
            fprintf(stderr, "loom %s: default model: %s\n", cmd, err.msg);
            *status = rc == LOOM_E_CANCELLED ? loom_cli_stopped_status() : 1;
            return NULL;
        }
        *path = buf;
    }
    loom_model_params params = mo->params;
    params.n_threads = n_threads;
    loom_model *m = loom_model_load_ex(*path, &params, &err);
    if (!m) {
        fprintf(stderr, "loom %s: %s: %s\n", cmd, *path, err.msg);
        return NULL;
    }
    loom_cli_model_warnings(cmd, *path, m);
    return m;
}

int loom_cli_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!s || (s[*s == '-'] < '0' || s[*s == '-'] > '9'))
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int loom_cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int loom_cli_parse_real(const char *s, double lo, double hi, double *out)
{
    if (!s)
        return -1;
    const char *d = s + (*s == '-');
    if (!((*d >= '0' && *d <= '9') || *d == '.') || (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end); /* an underflow (ERANGE, 0 or a subnormal) is a number; an overflow is not */
    if ((errno && !(errno == ERANGE && fabs(v) <= DBL_MIN)) || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

int loom_cli_written_nonzero(const char *text, size_t len)
{
    for (size_t i = 0; i < len && text[i] != 'e' && text[i] != 'E'; i++)
        if (text[i] >= '1' && text[i] <= '9')
            return 1;
    return 0;
}

enum loom_cli_real loom_cli_real_as_float(double v, int written_nonzero, double lo, int lo_open, double hi,
                                          float *out)
{
    if (!(fabs(v) <= FLT_MAX)) /* no float: converting it would be undefined */
        return LOOM_CLI_REAL_RANGE;
    float f = (float)v;
    if ((v != 0 || written_nonzero) && !(fabsf(f) >= FLT_MIN))
        return LOOM_CLI_REAL_TINY;
    if (!(f >= lo && f <= hi) || (lo_open && f == lo))
        return LOOM_CLI_REAL_RANGE;
    *out = f;
    return LOOM_CLI_REAL_OK;
}

/* Parse a byte count: digits with an optional suffix K, M, G or T (powers of 1024; KiB/KB and B spellings
 * too). Returns 0 on success, -2 for a count written right but beyond 64 bits of bytes, else -1. */
static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    case 'T': case 't': shift = 40; break;
    default: break;
    }
    end += shift != 0;
    if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
        end += strlen(end);
    else if (!shift && !strcmp(end, "B"))
        end++;
    if (*end || v == 0)
        return -1;
    if (errno || v > (UINT64_MAX >> shift))
        return -2;
    *out = (uint64_t)v << shift;
    return 0;
}

/* Apply one model option: a flag (val NULL) or an option with a value. 1 when taken, 0 when opt is not a model
 * option, -1 on a bad value (message printed). */
static int model_option(const char *cmd, struct loom_cli_model_opts *mo, const char *opt, const char *val)
{
    if (!strcmp(opt, "--check-tensors") || !strcmp(opt, "--stats")) {
        *(opt[2] == 'c' ? &mo->params.check_tensors : &mo->stats) = 1;
        return 1;
    }
    if (!strcmp(opt, "--read-ahead")) {
        static const char *const modes[] = {"default", "none", "predicted", "history", "all"};
        for (int i = 1; val && i <= LOOM_READ_AHEAD_ALL; i++)
            if (!strcasecmp(val, modes[i])) { /* any case, as --numerics and --cache-type-k */
                mo->params.read_ahead = (enum loom_read_ahead)i;
                return 1;
            }
        fprintf(stderr, "loom %s: --read-ahead expects none, predicted, history or all, found %s%s%s\n", cmd,
                LOOM_CLI_FOUND(val));
        return -1;
    }
    if (!strcmp(opt, "--cache-type-k") || !strcmp(opt, "-ctk")) {
        loom_error err = {0};
        if (loom_kv_type_parse(val, &mo->k_type, &err) == LOOM_OK)
            return 1;
        fprintf(stderr, "loom %s: %s expects f16 or q8_0 (the K cache; V stays f16), found %s%s%s\n", cmd, opt,
                LOOM_CLI_FOUND(val));
        return -1;
    }
    if (strcmp(opt, "--mem-budget"))
        return 0;
    int rc = val ? parse_bytes(val, &mo->params.mem_budget) : -1;
    if (rc == 0)
        return 1;
    char why[96] = "";
    if (rc == -2) /* one bound, exact in both spellings (the largest taken: 16777215T, 18446744073709551615) */
        snprintf(why, sizeof why, " (it must be below 16777216T: 2^64 bytes, 18446744073709551616)");
    else if (val && *val && (val[0] == '-' || strspn(val, "0") == strlen(val)))
        snprintf(why, sizeof why, " (it must be above 0)");
    fprintf(stderr, "loom %s: --mem-budget expects a whole byte count above 0 such as 6G, 800M or 123456789 (K, M, "
            "G, T: powers of 1024), found %s%s%s%s\n", cmd, LOOM_CLI_FOUND(val), why);
    return -1;
}

int loom_cli_model_file(const char *cmd, const char *opt, const char *val)
{
    if (val && *val)
        return 0;
    fprintf(stderr, "loom %s: %s expects a GGUF file, found %s%s%s\n", cmd, opt, LOOM_CLI_FOUND(val));
    return -1;
}

/* ---- option tables ---- */

static const struct loom_cli_option HELP_OPTIONS[] = {{"-h", LOOM_CLI_FLAG}, {"--help", LOOM_CLI_FLAG},
                                                      {NULL, LOOM_CLI_FLAG}};

const struct loom_cli_option *loom_cli_option_find(const struct loom_cli_option *table, const char *name)
{
    for (; table->name; table++)
        if (!strcmp(table->name, name))
            return table;
    return NULL;
}

/* s as one shell word: bare when it holds only characters no shell reads specially, else in single quotes (a quote
 * inside as '\''). */
static void put_shell_word(FILE *f, const char *s)
{
    if (*s && !s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.,:/@%+=-")]) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++)
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    fputc('\'', f);
}

enum { NAME_MAX_CMP = 48 }; /* longer names are compared for equality and starts only */

/* The optimal string alignment distance between a[na] and b[nb] (edits: insert, delete, replace, swap two
 * neighbours), both at most NAME_MAX_CMP bytes, ASCII case ignored. */
static int edit_distance(const char *a, int na, const char *b, int nb)
{
    int d[NAME_MAX_CMP + 1][NAME_MAX_CMP + 1];
    for (int i = 0; i <= na; i++)
        for (int j = 0; j <= nb; j++) {
            if (!i || !j) {
                d[i][j] = i + j;
                continue;
            }
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            int v = d[i - 1][j - 1] + !same;
            v = d[i - 1][j] + 1 < v ? d[i - 1][j] + 1 : v;
            v = d[i][j - 1] + 1 < v ? d[i][j - 1] + 1 : v;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[na][nb];
}

/* How near name[n] (an argument's option part) is to option opt, the dashes aside: 0 the same letters (other
 * dashes or case), 1 or 2 letters apart (at most a third of opt's), 3 the start of a long option or a long option
 * and more; -1 not near. */
static int nearness(const char *name, size_t n, const char *opt)
{
    size_t dn = strspn(name, "-"), dopt = strspn(opt, "-");
    const char *a = name + dn, *b = opt + dopt;
    size_t na = n - dn, nb = strlen(b);
    if (!na)
        return -1;
    if (na == nb && !strncasecmp(a, b, na))
        return 0;
    if (na <= NAME_MAX_CMP && nb <= NAME_MAX_CMP) {
        int d = edit_distance(a, (int)na, b, (int)nb);
        if (d <= 2 && 3 * (size_t)d <= nb)
            return d;
    }
    if ((na >= 3 && na < nb && !strncmp(a, b, na)) || (nb >= 4 && nb < na && !strncmp(a, b, nb)))
        return 3;
    return -1;
}

/* llama.cpp's names of options loom spells otherwise (--model: -m, --temperature: --temp), or NULL for a name[n]
 * that is none of them. */
static const char *llama_name(const char *name, size_t n)
{
    static const char *const names[][2] = {{"--model", "-m"},    {"--prompt", "-p"},    {"--threads", "-t"},
                                           {"--ctx-size", "-c"}, {"--n-predict", "-n"}, {"--output", "-o"},
                                           {"--temperature", "--temp"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (n == strlen(names[k][0]) && !strncmp(name, names[k][0], n))
            return names[k][1];
    return NULL;
}

/* The one option of table nearest to name[n] (loom_cli_unknown's "did you mean"), or NULL when none is near or two
 * are equally near. llama.cpp's names of loom's options (llama_name) name those. */
static const struct loom_cli_option *nearest_option(const struct loom_cli_option *table, const char *name, size_t n)
{
    const char *loom_name = llama_name(name, n);
    if (loom_name && loom_cli_option_find(table, loom_name))
        return loom_cli_option_find(table, loom_name);
    const struct loom_cli_option *best = NULL;
    int best_d = -1, tie = 0;
    for (; table->name; table++) {
        int d = nearness(name, n, table->name);
        if (d < 0 || (best && d > best_d))
            continue;
        tie = best && d == best_d;
        if (!tie)
            best = table, best_d = d;
    }
    return tie ? NULL : best;
}

/* The options that some command's table holds as LOOM_CLI_SECRET (serve's --api-key): a value given to one of them,
 * or to a name near one, is a secret whichever command it was given to. */
static const struct loom_cli_option SECRET_OPTIONS[] = {{"--api-key", LOOM_CLI_SECRET}, {NULL, LOOM_CLI_SECRET}};

int loom_cli_secret_name(const char *name, size_t n)
{
    static const char *const words[] = {"key", "token", "passw", "secret"};
    for (size_t i = 0; i < n; i++)
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
            if (n - i >= strlen(words[w]) && !strncasecmp(name + i, words[w], strlen(words[w])))
                return 1;
    return nearest_option(SECRET_OPTIONS, name, n) != NULL;
}

const char *loom_cli_nearest_command(const char *name)
{
    struct loom_cli_option table[sizeof loom_cli_commands / sizeof loom_cli_commands[0] + 2];
    size_t n = 0;
    for (; loom_cli_commands[n].name; n++)
        table[n] = (struct loom_cli_option){loom_cli_commands[n].name, LOOM_CLI_FLAG};
    table[n++] = (struct loom_cli_option){"version", LOOM_CLI_FLAG}; /* main.c's own commands */
    table[n++] = (struct loom_cli_option){"help", LOOM_CLI_FLAG};
    table[n] = (struct loom_cli_option){NULL, LOOM_CLI_FLAG};
    const struct loom_cli_option *near = nearest_option(table, name, strlen(name));
    return near ? near->name : NULL;
}

/* In "(A; B)" form: the opening before the first part, "; " before the others. */
static void open_part(int *parts)
{
    fputs((*parts)++ ? "; " : " (", stderr);
}

/* How many characters at arg's start spell option name: the name itself, or for one of three letters or more
 * (-ctk, --temp) the name with other dashes (-temp is --temp's); 0 when arg does not start with it. */
static size_t spelled_at_start(const char *arg, const char *name)
{
    size_t n = strlen(name), da = strspn(arg, "-"), dn = strspn(name, "-");
    if (!strncmp(arg, name, n))
        return n;
    return n - dn >= 3 && da && !strncmp(arg + da, name + dn, n - dn) ? da + n - dn : 0;
}

/* The option of table that arg starts with and runs on past (-tSECRET, --api-keyVALUE; the longest: -ctkq8_0 is
 * -ctk's, -temphunter2 --temp's), its spelling's length in *len; NULL when none. */
static const struct loom_cli_option *glued_option(const struct loom_cli_option *table, const char *arg, size_t *len)
{
    const struct loom_cli_option *best = NULL;
    for (; table->name; table++) {
        size_t k = spelled_at_start(arg, table->name);
        if (k && arg[k] && k > *len)
            best = table, *len = k;
    }
    return best;
}

/* Where a word of a secret's name (key, token, passw, secret; any case) first ends in name[n] with more after it,
 * or 0: up to there an argument may be shown (--tokenSECRET as '--token...'). */
static size_t secret_word_end(const char *name, size_t n)
{
    static const char *const words[] = {"password", "passwd", "passw", "key", "token", "secret"};
    for (size_t i = 0; i < n; i++)
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
            size_t len = strlen(words[w]);
            if (n - i >= len && !strncasecmp(name + i, words[w], len))
                return i + len < n ? i + len : 0;
        }
    return 0;
}

/* arg glued onto an option (spelled in its first len characters; NULL: a short option of some other command's,
 * -pX in chat), named without the rest: `'-t' with a value glued on (not shown): ...`, the line not ended. */
static void put_glued(const char *cmd, const struct loom_cli_option *glued, const char *arg, size_t len)
{
    fprintf(stderr, "loom%s%s: '%.*s' with %s glued on (not shown): ", cmd ? " " : "", cmd ? cmd : "", (int)len, arg,
            glued && glued->kind != LOOM_CLI_FLAG ? "a value" : "text");
    if (!glued)
        fprintf(stderr, "loom%s%s takes no %.2s%s", cmd ? " " : "", cmd ? cmd : "", arg,
                cmd ? "" : " before a command");
    else if (glued->kind == LOOM_CLI_FLAG)
        fprintf(stderr, "%s takes no value", glued->name);
    else
        fprintf(stderr, "give it as the next argument, %s VALUE", glued->name);
}

/* arg[n] (the name part of an argument not in table) named only up to a safe point when more of it could be a
 * secret (loom_cli_unknown's rules: glued onto an option, a short option of another command's, a secret's name
 * with more after it); 1 when so named, 0 when arg is safe to show whole. */
static int refuse_unsafe(const char *cmd, const struct loom_cli_option *table, const char *arg, size_t n,
                         const char *note)
{
    if (llama_name(arg, n)) /* --temperature: a name, not --temp with a value glued on */
        return 0;
    size_t len = 0, end = secret_word_end(arg, n);
    const struct loom_cli_option *glued = glued_option(table, arg, &len), *help = glued_option(HELP_OPTIONS, arg, &len);
    const struct loom_cli_option *near = nearest_option(table, arg, strlen(arg));
    int parts = 0, other_short = arg[1] && strchr("cdmnoprt", arg[1]) && arg[2] && strcmp(arg, "-ctk");
    glued = help ? help : glued;
    if (glued || other_short)
        put_glued(cmd, glued, arg, glued ? len : 2);
    else if (end)
        fprintf(stderr, "loom%s%s: unknown option '%.*s...' (the rest is not shown", cmd ? " " : "", cmd ? cmd : "",
                (int)end, arg), parts = 1;
    else
        return 0;
    if (glued && near && near != glued && nearness(arg, strlen(arg), near->name) == 0)
        open_part(&parts), fprintf(stderr, "did you mean %s?", near->name);
    if (note)
        open_part(&parts), fputs(note, stderr);
    fputs(parts ? ")\n" : "\n", stderr);
    return 1;
}

int loom_cli_put_arg(const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (eq)
        fprintf(stderr, "'%.*s=VALUE'", (int)(eq - arg), arg);
    else
        fprintf(stderr, "'%s'", arg);
    return eq != NULL;
}

void loom_cli_unknown(const char *cmd, const struct loom_cli_option *table, const char *arg, const char *note)
{
    const char *eq = arg[0] == '-' ? strchr(arg, '=') : NULL; /* NAME=VALUE, NAME perhaps only dashes (--=VALUE) */
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    const struct loom_cli_option *known = NULL, *near = NULL;
    if (eq) {
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : 0), arg);
        known = loom_cli_option_find(table, name);
        known = known ? known : loom_cli_option_find(HELP_OPTIONS, name);
    }
    if (!known && refuse_unsafe(cmd, table, arg, n, note))
        return;
    if (!known)
        near = nearest_option(table, arg, n);
    near = known || near ? near : nearest_option(HELP_OPTIONS, arg, n); /* --hlep in every command */
    const struct loom_cli_option *opt = known ? known : near;
    /* a value is shown only beside an option of this command's that takes no secret: a misspelt name's value may
     * be anything (--pasword=...); a flag of this command's takes none */
    int shown = known && known->kind != LOOM_CLI_SECRET &&
                (known->kind == LOOM_CLI_FLAG || !loom_cli_secret_name(arg, n)), hidden = eq && !shown, parts = 0;
    fprintf(stderr, "loom%s%s: unknown option ", cmd ? " " : "", cmd ? cmd : "");
    if (hidden)
        loom_cli_put_arg(arg); /* 'NAME=VALUE' */
    else
        fprintf(stderr, "'%s'", arg);
    if (hidden)
        open_part(&parts), fputs("its value is not shown", stderr);
    if (near)
        open_part(&parts), fprintf(stderr, "did you mean %s?%s", near->name, eq ? " " : "");
    if (opt && eq && opt->kind == LOOM_CLI_FLAG) {
        if (!near)
            open_part(&parts);
        fprintf(stderr, "%s takes no value", near ? "It" : opt->name);
    } else if (opt && eq) {
        if (!near)
            open_part(&parts);
        fprintf(stderr, "%sptions take their value as the next argument: %s ", near ? "O" : "o", opt->name);
        hidden ? (void)fputs("VALUE", stderr) : put_shell_word(stderr, eq + 1);
    }
    if (note && near && !eq) /* after "did you mean X?": a sentence of its own */
        fprintf(stderr, " %c%s", toupper((unsigned char)note[0]), note + 1);
    else if (note)
        open_part(&parts), fputs(note, stderr);
    fputs(parts ? ")\n" : "\n", stderr);
}

/* How many of table's options are flags (flags 1) or take a value (flags 0). */
static int count_kind(const struct loom_cli_option *table, int flags)
{
    int n = 0;
    for (; table->name; table++)
        n += (table->kind == LOOM_CLI_FLAG) == flags;
    return n;
}

/* The names of table's options of one kind, as "A, B and C". */
static void put_names(const struct loom_cli_option *table, int flags)
{
    int n = count_kind(table, flags), k = 0;
    for (; table->name; table++)
        if ((table->kind == LOOM_CLI_FLAG) == flags)
            fprintf(stderr, "%s%s", k++ == 0 ? "" : k == n ? " and " : ", ", table->name);
}

void loom_cli_unexpected(const char *cmd, const struct loom_cli_option *table, const char *arg, const char *why,
                         const char *operands)
{
    int values = count_kind(table, 0), flags = count_kind(table, 1);
    fprintf(stderr, "loom %s: unexpected argument ", cmd);
    int hidden = loom_cli_put_arg(arg);
    fprintf(stderr, " (%s%s%sloom %s takes %s%s", hidden ? "its value is not shown; " : "", why ? why : "",
            why ? "; " : "", cmd, operands ? operands : "only", operands ? " and" : "");
    if (values)
        fputs(values == 1 ? " the option " : " the options ", stderr), put_names(table, 0);
    fputs(values > 1 ? ", each with a value" : values ? ", with a value" : "", stderr);
    if (flags)
        fputs(values ? ", and" : "", stderr), fputs(flags == 1 ? " the flag " : " the flags ", stderr);
    if (flags)
        put_names(table, 1);
    fputs(")\n", stderr);
}

/* argv[i], where an option should stand, is none: why, from the option that came last (argv[last_opt], 0 none). */
static void unexpected_in_options(const char *cmd, const struct loom_cli_option *table, char **argv, int i,
                                  int last_opt)
{
    const struct loom_cli_option *opt = last_opt ? loom_cli_option_find(table, argv[last_opt]) : NULL;
    if (opt && opt->kind == LOOM_CLI_SECRET && i == last_opt + 2) /* maybe the rest of a key with a space in it */
        fprintf(stderr, "loom %s: unexpected argument right after %s's value (not shown: it may be the rest of a "
                        "value written with a space; quote it)\n", cmd, opt->name);
    else if (opt && opt->kind == LOOM_CLI_FLAG) {
        char why[128];
        snprintf(why, sizeof why, "%s takes no value", opt->name);
        loom_cli_unexpected(cmd, table, argv[i], why, NULL);
    } else
        loom_cli_unexpected(cmd, table, argv[i], NULL, NULL);
}

/* Whether a and b name one option: the same name, or two names of one (tokenize's -m and --model, synth's -o and
 * --output). */
static int same_option(const char *a, const char *b)
{
    static const char *const pairs[][2] = {{"-m", "--model"}, {"-o", "--output"}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++)
        if ((!strcmp(a, pairs[k][0]) && !strcmp(b, pairs[k][1])) ||
            (!strcmp(a, pairs[k][1]) && !strcmp(b, pairs[k][0])))
            return 1;
    return !strcmp(a, b);
}

/* The directory holding path into dir[cap], as the GGUF writer names it: "." for a bare name, "/" for a name at the
 * root; "." too when it does not fit. */
static void parent_dir(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == path ? 1 : slash ? (size_t)(slash - path) : 0;
    if (n && n < cap)
        snprintf(dir, cap, "%.*s", (int)n, path);
    else
        snprintf(dir, cap, ".");
}

/* 1 when paths a and b name one existing file. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Whether paths a and b name one file: the same file when both exist; when neither does, the same name in one
 * existing directory (an output not yet written: -o out.gguf and -o ./out.gguf); else the same string. */
static int same_path(const char *a, const char *b)
{
    struct stat st;
    int a_is = stat(a, &st) == 0, b_is = stat(b, &st) == 0;
    if (a_is || b_is)
        return a_is && b_is && same_file(a, b);
    const char *na = strrchr(a, '/'), *nb = strrchr(b, '/');
    char da[4096], db[4096];
    parent_dir(a, da, sizeof da);
    parent_dir(b, db, sizeof db);
    return !strcmp(na ? na + 1 : a, nb ? nb + 1 : b) && same_file(da, db) ? 1 : !strcmp(a, b);
}

/* opt (a ONE, ONE_TEXT or SECRET option of table, argv[at]) with value val, given before in argv[1..at) with
 * another value (a ONE's: naming another file): named (a secret's values not shown); -1. Else 0. Before argv[at],
 * an argument spelled as an option of table is one (a value spelled so was refused), so the next one is its
 * value. */
static int given_twice(const char *cmd, const struct loom_cli_option *table, const struct loom_cli_option *opt,
                       char **argv, int at, const char *val)
{
    for (int j = 1; j + 1 < at; j++) {
        if (!same_option(argv[j], opt->name) || !loom_cli_option_find(table, argv[j]) ||
            (opt->kind == LOOM_CLI_ONE ? same_path(argv[j + 1], val) : !strcmp(argv[j + 1], val)))
            continue;
        if (opt->kind == LOOM_CLI_SECRET)
            fprintf(stderr, "loom %s: %s expects one value, found two different ones (not shown; loom %s takes one)\n",
                    cmd, opt->name, cmd);
        else
            fprintf(stderr, "loom %s: %s expects one value, found '%s' and then '%s' (given twice; loom %s takes "
                    "one)\n", cmd, opt->name, argv[j + 1], val, cmd);
        return -1;
    }
    return 0;
}

int loom_cli_next_arg(const char *cmd, const struct loom_cli_option *table, int argc, char **argv, int *i,
                      const struct loom_cli_option **opt, const char **val)
{
    const char *a = argv[*i];
    *opt = NULL;
    *val = NULL;
    if (loom_cli_option_find(HELP_OPTIONS, a))
        return LOOM_CLI_ARG_HELP;
    if (a[0] != '-' || !a[1])
        return LOOM_CLI_ARG_OPERAND;
    if (!(*opt = loom_cli_option_find(table, a))) {
        loom_cli_unknown(cmd, table, a, NULL);
        return LOOM_CLI_ARG_BAD;
    }
    if ((*opt)->kind == LOOM_CLI_SECRET && !loom_cli_secret_name((*opt)->name, strlen((*opt)->name))) {
        fprintf(stderr, "loom %s: internal error: %s is a secret of loom %s's table that commands.c does not list "
                "(SECRET_OPTIONS: other commands would show its value)\n", cmd, (*opt)->name, cmd);
        return LOOM_CLI_ARG_BAD;
    }
    if ((*opt)->kind == LOOM_CLI_FLAG || *i + 1 >= argc)
        return LOOM_CLI_ARG_OPTION;
    *val = argv[++*i];
    if (!loom_cli_option_find(table, *val) && !loom_cli_option_find(HELP_OPTIONS, *val))
        return (*opt)->kind != LOOM_CLI_VALUE && given_twice(cmd, table, *opt, argv, *i - 1, *val)
                   ? LOOM_CLI_ARG_BAD
                   : LOOM_CLI_ARG_OPTION;
    /* a value spelled exactly as one of the command's options: the value is missing, more likely than meant */
    int secret = (*opt)->kind == LOOM_CLI_SECRET;
    fprintf(stderr, "loom %s: %s expects a value, found %s%s%s (give %s's value right after it; loom %s takes no "
            "value spelled exactly as one of its options)\n", cmd, (*opt)->name, secret ? "an option (not shown)"
            : "the option '", secret ? "" : *val, secret ? "" : "'", (*opt)->name, cmd);
    return LOOM_CLI_ARG_BAD;
}

int loom_cli_unhandled(const char *cmd, const char *opt)
{
    fprintf(stderr, "loom %s: internal error: %s is in loom %s's table of options but nothing applies it (a bug: "
            "please report it)\n", cmd, opt, cmd);
    return -1;
}

int loom_cli_parse_options(const char *cmd, int argc, char **argv, const struct loom_cli_option *table,
                           struct loom_cli_model_opts *mo, int (*set)(void *o, const char *opt, const char *val),
                           void *o)
{
    for (int i = 1, last_opt = 0; i < argc; i++) {
        const struct loom_cli_option *opt;
        const char *val;
        int at = i, kind = loom_cli_next_arg(cmd, table, argc, argv, &i, &opt, &val);
        if (kind == LOOM_CLI_ARG_OPERAND)
            unexpected_in_options(cmd, table, argv, i, last_opt);
        if (kind != LOOM_CLI_ARG_OPTION)
            return kind == LOOM_CLI_ARG_HELP ? 1 : -1;
        last_opt = at;
        if (opt->kind != LOOM_CLI_FLAG && !strcmp(opt->name, "-m") && loom_cli_model_file(cmd, opt->name, val))
            return -1;
        if (opt->kind != LOOM_CLI_FLAG && !val) {
            fprintf(stderr, "loom %s: option '%s' expects a value, found the end of the command line\n", cmd,
                    opt->name);
            return -1;
        }
        int taken = mo ? model_option(cmd, mo, opt->name, val) : 0, rc = taken ? 0 : set(o, opt->name, val);
        if (rc == LOOM_CLI_UNHANDLED)
            loom_cli_unhandled(cmd, opt->name);
        if (taken < 0 || rc)
            return -1;
    }
    return mo ? loom_cli_model_check(cmd, mo) : 0;
}

int loom_cli_model_check(const char *cmd, const struct loom_cli_model_opts *mo)
{
    if ((mo->params.read_ahead || mo->stats) && !mo->params.mem_budget) {
        fprintf(stderr, "loom %s: %s: it needs --mem-budget\n", cmd,
                mo->params.read_ahead ? "--read-ahead chooses what the expert cache reads ahead"
                                      : "--stats reports what the expert cache did");
        return -1;
    }
    return 0;
}

loom_chat_template *loom_cli_chat_template(const char *cmd, const loom_tokenizer *tok, const char *file)
{
    loom_error err = {0};
    if (!file) {
        loom_chat_template *t = loom_chat_template_new(tok, NULL, &err); /* the file's own template */
        if (t)
            return t;
        fprintf(stderr, "loom %s: warning: %s; rendering chats in the built-in Qwen3.5 format\n", cmd, err.msg);
        if (!(t = loom_chat_template_new(tok, "qwen35", &err)))
            fprintf(stderr, "loom %s: the built-in Qwen3.5 format: %s\n", cmd, err.msg);
        return t;
    }
    enum { MAX_TEMPLATE = 1 << 20 };
    FILE *f = fopen(file, "rb");
    int open_errno = errno;
    char *text = f ? malloc(MAX_TEMPLATE + 1) : NULL;
    errno = 0;
    size_t n = text ? fread(text, 1, MAX_TEMPLATE + 1, f) : 0;
    int bad = !f ? open_errno : !text ? ENOMEM : ferror(f) ? (errno ? errno : EIO) : 0; /* a directory: EISDIR */
    if (f)
        fclose(f);
    loom_chat_template *t = NULL;
    if (bad)
        fprintf(stderr, "loom %s: --chat-template-file %s: %s\n", cmd, file, strerror(bad));
    else if (n > MAX_TEMPLATE)
        fprintf(stderr, "loom %s: --chat-template-file %s: expected at most %d bytes, found more\n", cmd,
                file, MAX_TEMPLATE);
    else if (text[n] = '\0', memchr(text, '\0', n))
        fprintf(stderr, "loom %s: --chat-template-file %s: expected text, found a NUL byte\n", cmd, file);
    else if (!(t = loom_chat_template_new(tok, text, &err)))
        fprintf(stderr, "loom %s: --chat-template-file %s: %s\n", cmd, file, err.msg);
    free(text);
    return t;
}

int loom_cli_check_output(const char *cmd, const char *path, const char *const *inputs, const char *const *what,
                          int n)
{
    for (int k = 0; k < n; k++)
        if (inputs[k] && same_file(inputs[k], path)) {
            fprintf(stderr, "loom %s: output '%s': expected a file other than the %s, found the %s itself\n", cmd, path,
                    what[k], what[k]);
            return 2;
        }
    char dir[4096];
    struct stat st, ds;
    parent_dir(path, dir, sizeof dir);
    int dir_errno = stat(dir, &ds) ? errno : !S_ISDIR(ds.st_mode) ? ENOTDIR : access(dir, W_OK | X_OK) ? errno : 0;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    long name_max = dir_errno ? -1 : pathconf(dir, _PC_NAME_MAX); /* the file system's limits, as the writer's */
    name_max = name_max > 0 ? name_max : NAME_MAX;
    if (strlen(path) >= PATH_MAX)
        fprintf(stderr, "loom %s: output '%.200s...': path of %zu bytes, expected under %d (PATH_MAX)\n", cmd, path,
                strlen(path), PATH_MAX);
    else if (strlen(base) > (size_t)name_max)
        fprintf(stderr, "loom %s: output '%s': file name of %zu bytes, expected at most %ld (NAME_MAX)\n", cmd, path,
                strlen(base), name_max);
    else if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* what the writer's rename must not replace */
        fprintf(stderr, "loom %s: output '%s': expected a regular file or a new path, found %s\n", cmd, path,
                S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory"
                                                                             : "a device, FIFO or socket");
    else if (dir_errno == ENOENT)
        fprintf(stderr, "loom %s: output '%s': directory '%s' does not exist\n", cmd, path, dir);
    else if (dir_errno)
        fprintf(stderr, "loom %s: output '%s': cannot create a file in directory '%s': %s\n", cmd, path, dir,
                strerror(dir_errno));
    else
        return 0;
    return 1;
}

int loom_cli_check_prefix(const char *cmd, const char *opt, const char *prefix, const char *const *exts, int n_exts,
                          const char *const *inputs, const char *const *what, int n)
{
    struct stat st;
    size_t len = strlen(prefix);
    const char *why = !len ? "an empty one" : prefix[len - 1] == '/' ? "a folder's name (ending in '/')"
                    : stat(prefix, &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) ? "a device, FIFO or "
                    "socket" : NULL;
    if (why) {
        fprintf(stderr, "loom %s: %s '%s': expected a file name PREFIX (%s takes a prefix: PREFIX", cmd, opt, prefix,
                opt);
        for (int k = 0; k < n_exts; k++)
            fprintf(stderr, "%s%s", k == 0 ? "" : k + 1 == n_exts ? " and PREFIX" : ", PREFIX", exts[k]);
        fprintf(stderr, " are written), found %s\n", why);
        return 2;
    }
    char path[PATH_MAX + 64];
    for (int k = 0; k < n_exts; k++) {
        snprintf(path, sizeof path, "%s%s", prefix, exts[k]);
        int rc = loom_cli_check_output(cmd, path, inputs, what, n);
        if (rc)
            return rc;
    }
    return 0;
}

int loom_cli_fail(const char *cmd, int rc, const loom_error *err)
{
    if (rc == LOOM_E_CANCELLED) {
        fprintf(stderr, "loom %s: interrupted (%s)\n", cmd, loom_cli_signal_name());
        return loom_cli_stopped_status();
    }
    fprintf(stderr, "loom %s: %s\n", cmd, err->msg);
    return rc == LOOM_CLI_E_USAGE ? 2 : 1;
}

/* Why standard output failed when errno no longer says (a write that failed before): a pipe whose reader closed
 * it (POLLERR) is EPIPE's; a device that refuses every write (/dev/full) says so again to an empty write; a file on
 * a file system with no block left is ENOSPC's. 0 when none of these. */
static int stdout_errno(void)
{
    struct pollfd out = {.fd = STDOUT_FILENO, .events = POLLOUT};
    struct stat st;
    struct statvfs fs;
    if (poll(&out, 1, 0) == 1 && (out.revents & POLLERR))
        return EPIPE;
    errno = 0;
    if (write(STDOUT_FILENO, "", 0) < 0)
        return errno;
    return fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) && fstatvfs(STDOUT_FILENO, &fs) == 0 &&
                   fs.f_bavail == 0 ? ENOSPC : 0;
}

void loom_cli_stdout_failed(const char *cmd, int err)
{
    char path[256];
    ssize_t n = readlink("/proc/self/fd/1", path, sizeof path - 1);
    int e = err ? err : stdout_errno(), fl = fcntl(STDOUT_FILENO, F_GETFL);
    /* a file's path; a pipe's or socket's name is no path, nor is the read-only /dev/null main holds in place of a
     * closed standard output */
    path[n > 0 && path[0] == '/' && fl >= 0 && (fl & O_ACCMODE) != O_RDONLY ? n : 0] = 0;
    fprintf(stderr, "loom %s: writing standard output%s%s%s: %s\n", cmd, path[0] ? " (" : "", path,
            path[0] ? ")" : "", e ? strerror(e) : "write error");
}

const char *loom_cli_listed(const char *name, const char *(*list)(int i))
{
    for (int i = 0; list(i); i++)
        if (!strcasecmp(name, list(i)))
            return list(i);
    return NULL;
}

static int orders_chosen; /* 1: $LOOM_ORDERS chose the float-order profile; 0: it follows the CPU */

const char *loom_cli_orders_from(void) { return orders_chosen ? "LOOM_ORDERS" : "cpu"; }

const char *loom_cli_orders_text(char *buf, size_t cap)
{
    snprintf(buf, cap, "float orders %s (%s)", loom_orders_name(), orders_chosen ? "LOOM_ORDERS" : "the CPU's");
    return buf;
}

/* $LOOM_ORDERS (avx512 or haswell) if set: the float-order profile. 0, or -1 with a message. */
static int select_orders(void)
{
    const char *v = getenv("LOOM_ORDERS");
    if (!v || !*v)
        return 0;
    if (!strcasecmp(v, "avx512") || !strcasecmp(v, "haswell")) {
        orders_chosen = 1;
        return loom_orders_select(strcasecmp(v, "haswell") ? LOOM_ORDERS_AVX512 : LOOM_ORDERS_HASWELL,
                                  &(loom_error){0});
    }
    fprintf(stderr, "loom: LOOM_ORDERS: expected avx512 or haswell, found '%s'\n", v);
    return -1;
}

int loom_cli_select_kernels(void)
{
    if (select_orders())
        return -1;
    static const struct {
        const char *name;
        enum loom_kernel_mode mode;
    } modes[] = {{"auto", LOOM_KERNELS_AUTO}, {"scalar", LOOM_KERNELS_SCALAR}, {"avx2", LOOM_KERNELS_AVX2},
                 {"avx512", LOOM_KERNELS_AVX512}};
    const char *v = getenv("LOOM_KERNELS");
    if (!v || !*v)
        return 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcasecmp(v, modes[i].name))
            continue;
        loom_error err = {0};
        if (loom_kernels_select(modes[i].mode, &err) == LOOM_OK)
            return 0;
        const char *runs[3] = {"", "", ""}; /* the sets this CPU runs (scalar always), as "A, B and C" */
        int n = 0;
        for (size_t k = 1; k < sizeof modes / sizeof modes[0]; k++)
            if (loom_kernels_runs(modes[k].mode))
                runs[n++] = modes[k].name;
        fprintf(stderr, "loom: LOOM_KERNELS=%s: %s; this CPU runs %s%s%s%s%s (auto: the widest)\n", v, err.msg,
                runs[0], n > 2 ? ", " : n > 1 ? " and " : "", runs[1], n > 2 ? " and " : "", runs[2]);
        return -1;
    }
    fprintf(stderr, "loom: LOOM_KERNELS: expected auto, scalar, avx2 or avx512, found '%s'\n", v);
    return -1;
}

/* The float-valued sampler options, their fields and ranges: [lo, hi], or (lo, hi] when lo_open. */
static const struct sampler_float_opt {
    const char *name;
    size_t off; /* in struct loom_sampler_params */
    double lo;
    int lo_open; /* lo itself excluded */
    double hi;
} SAMPLER_FLOAT_OPTS[] = {
    {"--temp", offsetof(struct loom_sampler_params, temp), 0, 0, 100},
    {"--top-p", offsetof(struct loom_sampler_params, top_p), 0, 0, 1},
    {"--min-p", offsetof(struct loom_sampler_params, min_p), 0, 0, 1},
    {"--repeat-penalty", offsetof(struct loom_sampler_params, repeat_penalty), 0, 1, 100}, /* a divisor */
    {"--presence-penalty", offsetof(struct loom_sampler_params, presence_penalty), -100, 0, 100},
    {"--frequency-penalty", offsetof(struct loom_sampler_params, frequency_penalty), -100, 0, 100},
};

/* --stop STRING: one more stop string. 1, or -1 with the message printed. */
static int sampler_stop(const char *cmd, struct loom_cli_sampler_opts *so, const char *val)
{
    if (so->n_stops == LOOM_CLI_STOPS_MAX) {
        fprintf(stderr, "loom %s: --stop expects at most %d strings, found another: '%s'\n", cmd, LOOM_CLI_STOPS_MAX,
                val);
        return -1;
    }
    if (!val[0] || strlen(val) > LOOM_CLI_STOP_MAX_LEN) {
        fprintf(stderr, "loom %s: --stop expects a string of 1 to %d bytes, found %zu bytes\n", cmd,
                LOOM_CLI_STOP_MAX_LEN, strlen(val));
        return -1;
    }
    so->stops[so->n_stops++] = val;
    return 1;
}

/* --seed, --top-k, --repeat-last-n: 1, 0 when opt is none of them, -1 with the message printed. */
static int sampler_int(const char *cmd, struct loom_cli_sampler_opts *so, const char *opt, const char *val)
{
    int is_seed = !strcmp(opt, "--seed");
    int *dst = !strcmp(opt, "--top-k") ? &so->sp.top_k : !strcmp(opt, "--repeat-last-n") ? &so->sp.repeat_last_n
                                                                                          : NULL;
    if (!dst && !is_seed)
        return 0;
    long long hi = is_seed ? INT64_MAX : dst == &so->sp.top_k ? 1 << 24 : 1 << 20, v;
    if (loom_cli_parse_int(val, 0, hi, &v) != 0) {
        fprintf(stderr, "loom %s: %s expects an integer in [0, %lld], found '%s'\n", cmd, opt, hi, val);
        return -1;
    }
    if (is_seed)
        so->sp.seed = (uint64_t)v;
    else
        *dst = (int)v;
    return 1;
}

int loom_cli_sampler_option(const char *cmd, struct loom_cli_sampler_opts *so, const char *opt, const char *val)
{
    if (!strcmp(opt, "--stop"))
        return sampler_stop(cmd, so, val);
    for (size_t i = 0; i < sizeof SAMPLER_FLOAT_OPTS / sizeof SAMPLER_FLOAT_OPTS[0]; i++) {
        const struct sampler_float_opt *f = &SAMPLER_FLOAT_OPTS[i];
        double v;
        if (strcmp(opt, f->name))
            continue;
        int nonzero = loom_cli_written_nonzero(val, strlen(val));
        enum loom_cli_real r = loom_cli_parse_real(val, -DBL_MAX, DBL_MAX, &v) ? LOOM_CLI_REAL_RANGE
                               : loom_cli_real_as_float(v, nonzero, f->lo, f->lo_open, f->hi,
                                                        (float *)((char *)&so->sp + f->off));
        if (r == LOOM_CLI_REAL_OK)
            return 1;
        char tiny[96] = "";
        if (r == LOOM_CLI_REAL_TINY)
            snprintf(tiny, sizeof tiny, ", which a float holds only as a subnormal or 0 (its least normal number is "
                     "%.9g)", (double)FLT_MIN);
        fprintf(stderr, "loom %s: %s expects a number in %c%g, %g], found '%s'%s\n", cmd, opt,
                f->lo_open ? '(' : '[', f->lo, f->hi, val, tiny);
        return -1;
    }
    return sampler_int(cmd, so, opt, val);
}
