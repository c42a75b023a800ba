/* cli.h — the table of `loom` subcommands; each lives in its own file in src/cli/. */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include <stdint.h>

#include "loom.h"

struct loom_cli_command {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the subcommand name; returns the exit status */
    int trouble; /* the status of a failure main() cannot see (output not delivered): 1, or 2 where 1 is a result
                  * (xray, certify: as cmp's) */
};

extern const struct loom_cli_command loom_cli_commands[]; /* NULL-terminated, in commands.c */

int loom_cli_run(int argc, char **argv);
int loom_cli_inspect(int argc, char **argv);
int loom_cli_synth(int argc, char **argv);
int loom_cli_tokenize(int argc, char **argv);
int loom_cli_chat(int argc, char **argv);
int loom_cli_quantize(int argc, char **argv);
int loom_cli_bench(int argc, char **argv);
int loom_cli_serve(int argc, char **argv);
int loom_cli_xray(int argc, char **argv);
int loom_cli_certify(int argc, char **argv);

/* Seconds on the monotonic clock (CLOCK_MONOTONIC), for the subcommands' timings. commands.c. */
double loom_cli_now(void);

/* This process's peak resident set size in bytes since it started: VmHWM of /proc/self/status, which starts
 * afresh at exec (getrusage's ru_maxrss keeps the peak of the program that exec'd loom); ru_maxrss where
 * /proc is not mounted. commands.c. */
double loom_cli_peak_rss(void);

/* Warn on stderr (as `loom CMD: ...`) when n_threads exceeds the online CPUs: loom's workers spin briefly at
 * every step, so threads that must share cores slow a run down steeply. commands.c. */
void loom_cli_check_threads(const char *cmd, int n_threads);

/* Print a model file's warnings (what only the GGUF convention forbids) on stderr as `loom CMD: warning: PATH:
 * MSG`, then how many more were counted than kept: from a loaded model, a tokenizer's file, or an open GGUF.
 * commands.c. */
void loom_cli_model_warnings(const char *cmd, const char *path, const loom_model *m);
void loom_cli_tokenizer_warnings(const char *cmd, const char *path, const loom_tokenizer *tok);
void loom_cli_gguf_warnings(const char *cmd, const char *path, const loom_gguf *g);

/* The list's own spelling of name when it is one of the names list(0), list(1), ... (up to the first NULL),
 * such as loom_quantize_recipe or loom_synth_preset, compared ignoring ASCII case; NULL when it is not.
 * commands.c. */
const char *loom_cli_listed(const char *name, const char *(*list)(int i));

/* The model options every model-running subcommand takes: --check-tensors and --stats (flags),
 * --mem-budget SIZE (loom_model_params.mem_budget: 6G, 800M, 123456789), --read-ahead MODE
 * (loom_model_params.read_ahead: none, predicted, history, all) and --cache-type-k TYPE (-ctk: f16, q8_0; the
 * k_type of the sessions the subcommand makes). */
struct loom_cli_model_opts {
    loom_model_params params;
    int stats; /* --stats: print the expert streaming figures at the end (and one JSON line) */
    enum loom_kv_type k_type; /* --cache-type-k / -ctk: the sessions' K cache type (f16 default, q8_0) */
};
/* The model options' help lines: LOOM_CLI_LOAD_USAGE those of loading (every command that loads a model), then
 * LOOM_CLI_MODEL_USAGE adds --stats and --cache-type-k for the commands that report the expert cache and make
 * sessions of their own (xray and certify say their --cache-type-k in their own words). */
#define LOOM_CLI_LOAD_USAGE                                                                                       \
    "  --check-tensors        validate every tensor's data at load (finite values and block scales,\n"            \
    "                         as llama.cpp's --check-tensors; reads the whole file)\n"                            \
    "  --mem-budget SIZE      the model within SIZE bytes of memory (K, M, G, T: powers of 1024): a\n"            \
    "                         mixture-of-experts model's routed experts read from the file into a cache,\n"       \
    "                         a dense model held whole (README)\n"                                                \
    "  --read-ahead MODE      needs --mem-budget: what the cache reads ahead: predicted (default), none,\n"       \
    "                         history or all (README: reads ahead)\n"
#define LOOM_CLI_MODEL_USAGE                                                                                      \
    LOOM_CLI_LOAD_USAGE                                                                                           \
    "  --stats                needs --mem-budget: print the expert cache's figures at the end\n"                  \
    "  --cache-type-k TYPE    (-ctk) K cache type: f16 (default) or q8_0 (V stays f16; bitwise the\n"             \
    "                         reference's -ctk q8_0 with flash attention off)\n"

/* The model of `loom CMD`: *path NULL means the default model (prepared on first use; its path is written to
 * buf[cap] and *path pointed there). First applies the environment's kernel choice (loom_cli_select_kernels),
 * then loads it with mo's parameters, repacking with n_threads threads (the command's -t; 0 = the online CPUs), and
 * prints its warnings. NULL when it fails, with the failure printed
 * (`loom CMD: PATH: MSG`) and *status set to 1, to 2 when the environment's choice is refused, or to
 * loom_cli_stopped_status() when a signal stopped the default model's preparation. commands.c. */
loom_model *loom_cli_load_model(const char *cmd, const char **path, char *buf, size_t cap,
                                const struct loom_cli_model_opts *mo, int n_threads, int *status);
/* The chat template of `loom CMD`: FILE's (--chat-template-file) when given, else the model file's own, else (with
 * a warning: the file's is not one loom renders) the built-in Qwen3.5 format. NULL when FILE cannot be read or is
 * not one loom renders (`loom CMD: --chat-template-file FILE: ...`) or the built-in format cannot be made (out of
 * memory), the message printed. commands.c. */
loom_chat_template *loom_cli_chat_template(const char *cmd, const loom_tokenizer *tok, const char *file);
/* The command line's numbers, one syntax for every option (commands.c). loom_cli_parse_int: the whole string as a
 * decimal integer in [lo, hi], an optional '-' then digits and nothing else (" 2", "+5", "0x10" and "2k" are
 * refused; "010" is ten). loom_cli_parse_u64: digits only, any value below 2^64 (synth's seed;
 * the sampler seeds of run, chat and serve stop at 2^63 - 1, as a JSON integer). loom_cli_parse_real: a
 * finite decimal number in [lo, hi] (strtod's decimal form: "0.5", ".5", "-1", "1e-3"; no blanks, '+', hex, inf
 * or nan; one too small for a double is the 0 or subnormal it rounds to, one too large is out of range). Each
 * returns 0 with *out set, or -1 (s NULL, empty, not such a number, or out of range) with *out untouched; the
 * caller prints the message. */
int loom_cli_parse_int(const char *s, long long lo, long long hi, long long *out);
int loom_cli_parse_u64(const char *s, uint64_t *out);
int loom_cli_parse_real(const char *s, double lo, double hi, double *out);
/* A real value that loom stores as a float (the sampler options of run and chat, serve's request fields), checked
 * as that float at every bound: v (as parsed; written_nonzero: its text, the option's value or the body's whole
 * number, has a digit other than 0 before any exponent) rounds to the float *out, which must lie in [lo, hi], or
 * (lo, hi] when lo_open (bounds a float holds exactly): 1.00000001 is 1. LOOM_CLI_REAL_OK with *out set;
 * LOOM_CLI_REAL_RANGE when the float is out of range (or beyond a float's); LOOM_CLI_REAL_TINY when a number
 * written other than 0 is held by the float only as a subnormal or 0 (1e-39, 1e-400; not 1.1754943e-38, which
 * rounds to the least normal, FLT_MIN): a divisor of inf, a setting off. The caller prints the message, quoting
 * the text. commands.c. */
enum loom_cli_real { LOOM_CLI_REAL_OK, LOOM_CLI_REAL_RANGE, LOOM_CLI_REAL_TINY };
enum loom_cli_real loom_cli_real_as_float(double v, int written_nonzero, double lo, int lo_open, double hi,
                                          float *out);
/* Whether the number written in text[len] has a digit other than 0 before any exponent (0.0e5: no; 1e-400: yes). */
int loom_cli_written_nonzero(const char *text, size_t len);
/* The largest -t every command takes (threads of the one pool), and the largest context (-c, inspect --ctx). */
#define LOOM_CLI_THREADS_MAX LOOM_MAX_THREADS
#define LOOM_CLI_CTX_MAX (1 << 24)
/* The printf arguments of "found %s%s%s" for an option's value v: 'v' quoted, or the end of the command line when
 * the option came last without one (v NULL). */
#define LOOM_CLI_FOUND(v) (v) ? "'" : "", (v) ? (v) : "the end of the command line", (v) ? "'" : ""
/* A model option's file name (-m FILE): 0 when val names one, -1 with `loom CMD: OPT expects a GGUF file, found
 * ...` printed when it is missing (NULL) or empty. commands.c. */
int loom_cli_model_file(const char *cmd, const char *opt, const char *val);
/* --numerics VALUE: canonical or reference (any case) into *out. 0, or -1 with the message printed as
 * `loom CMD: ...`. commands.c. */
int loom_cli_numerics(const char *cmd, const char *val, enum loom_numerics *out);
/* Check a command's output file before any work, as the GGUF writer would refuse it, in its words: not one of its
 * n inputs (inputs[k], NULL for none, named what[k]: "input", "importance matrix"), a regular file or a new path,
 * in a directory that exists and takes new files. 0; else `loom CMD: output 'PATH': ...` printed and the exit
 * status: 2 when it names an input (the command line names one file twice), 1 when the file system refuses it (a
 * missing directory, a directory given as the file: as for an input that does not open). commands.c. */
int loom_cli_check_output(const char *cmd, const char *path, const char *const *inputs, const char *const *what,
                          int n);
/* The same for the files PREFIX + exts[k] (k < n_exts) of an option opt taking a PREFIX (certify -o), first refusing
 * a PREFIX that names no file to add to (empty, ending in '/', or an existing device, FIFO or socket: -o /dev/null),
 * with `loom CMD: OPT 'PREFIX': expected a file name PREFIX (OPT takes a prefix: PREFIX.json and PREFIX.md are
 * written), found ...` (status 2). A longer path than snprintf's PATH_MAX + 64 is cut, then refused as too long.
 * commands.c. */
int loom_cli_check_prefix(const char *cmd, const char *opt, const char *prefix, const char *const *exts, int n_exts,
                          const char *const *inputs, const char *const *what, int n);
/* Model options that only go together: --read-ahead and --stats need --mem-budget. 0, or -1 with the message
 * printed. */
int loom_cli_model_check(const char *cmd, const struct loom_cli_model_opts *mo);
/* A command's options, for its parser and for every message about what it takes: one const table per command,
 * ended by {NULL}. The parser looks each argument up in the table, so the table is what the command takes (its
 * --help lists the same names: test_cli.sh checks both ways). */
enum loom_cli_option_kind {
    LOOM_CLI_VALUE,  /* takes the next argument as its value */
    LOOM_CLI_FLAG,   /* takes no value */
    LOOM_CLI_SECRET, /* takes the next argument as its value, which no message shows (serve --api-key); once, as
                      * LOOM_CLI_ONE_TEXT */
    LOOM_CLI_ONE,    /* takes the next argument as its value, once: a file (-m, -o, --imatrix), of which loom takes
                      * one, so a second naming another file is refused naming both; the same file again is taken,
                      * by any path (-m F -m ./F: compared by st_dev and st_ino; a path not yet written by its
                      * directory's and its name); any other option given twice takes its last value, as most
                      * commands do */
    LOOM_CLI_ONE_TEXT, /* as LOOM_CLI_ONE, for a text (-p, a prompt): the same one is the same text */
};
struct loom_cli_option {
    const char *name; /* "-t", "--temp" */
    enum loom_cli_option_kind kind;
};
/* The model options' entries, for a command's table: LOOM_CLI_LOAD_TABLE those of loading (--check-tensors,
 * --mem-budget, --read-ahead), LOOM_CLI_MODEL_TABLE all of them (adds --stats, --cache-type-k and -ctk). */
#define LOOM_CLI_LOAD_TABLE                                                                                       \
    {"--check-tensors", LOOM_CLI_FLAG}, {"--mem-budget", LOOM_CLI_VALUE}, {"--read-ahead", LOOM_CLI_VALUE}
#define LOOM_CLI_MODEL_TABLE                                                                                      \
    LOOM_CLI_LOAD_TABLE, {"--stats", LOOM_CLI_FLAG}, {"--cache-type-k", LOOM_CLI_VALUE}, {"-ctk", LOOM_CLI_VALUE}
/* table's entry named name exactly, or NULL. commands.c. */
const struct loom_cli_option *loom_cli_option_find(const struct loom_cli_option *table, const char *name);
/* Parse argv[1..argc) by table: a flag takes one slot, any other option two (its value is the next argument,
 * whatever it looks like: `-p --temp=0.5` is a prompt; but not one spelled exactly as an option of the table or -h
 * or --help, refused as loom_cli_next_arg does). The model options go to mo (NULL: the table has none), the
 * others to set(o, opt, val) (val NULL for a flag), which applies one, printing its own message and returning
 * -1 when the value is invalid, or returns LOOM_CLI_UNHANDLED for an option no branch of it applies (the parser
 * then says so as an internal error: loom_cli_unhandled). An argument that is not in the table is named
 * (loom_cli_unknown, loom_cli_unexpected) before anything after it is looked at. Returns 0, 1 when -h or --help
 * was given, -1 on bad arguments (message printed as `loom CMD: ...`). commands.c. */
int loom_cli_parse_options(const char *cmd, int argc, char **argv, const struct loom_cli_option *table,
                           struct loom_cli_model_opts *mo, int (*set)(void *o, const char *opt, const char *val),
                           void *o);
#define LOOM_CLI_UNHANDLED 1
/* For an option in cmd's table that no branch of its parser applies: `loom CMD: internal error: ...` printed; -1.
 * Every command's parser ends in it, so an option added to a table alone fails the first run that gives it
 * (test_cli.sh gives every option of every table). commands.c. */
int loom_cli_unhandled(const char *cmd, const char *opt);
/* One step of a command's own loop over its arguments: argv[*i] by table. LOOM_CLI_ARG_OPTION: *opt is its entry
 * and *val its value (the next argument, *i moved there; NULL for a flag, or when the command line ended); OPERAND:
 * argv[*i] starts with no '-' (or is "-"); HELP: -h or --help; BAD (named): an unknown option (loom_cli_unknown),
 * a value spelled exactly as an option of table or -h or --help (`-p --json`: its value is missing, more likely
 * than meant; a SECRET's not shown), a ONE, ONE_TEXT or SECRET option given before with another value (under either
 * of its names: -m and --model, -o and --output; a ONE's naming another file), or a SECRET option that
 * loom_cli_secret_name does not know (internal). commands.c. */
enum loom_cli_arg { LOOM_CLI_ARG_BAD = -1, LOOM_CLI_ARG_OPERAND, LOOM_CLI_ARG_OPTION, LOOM_CLI_ARG_HELP };
int loom_cli_next_arg(const char *cmd, const struct loom_cli_option *table, int argc, char **argv, int *i,
                      const struct loom_cli_option **opt, const char **val);
/* Print `loom CMD: unknown option 'ARG'` for an argument that starts with '-' and is not in table (-h and --help
 * are in every command's), then in parentheses what to write instead, joined by "; ": loom takes no GNU-style
 * --NAME=VALUE (a value may itself start with "--" and hold '='), so for ARG spelled NAME=VALUE (-X=VALUE too)
 * with NAME in the table `options take their value as the next argument: NAME VALUE`, or for a flag `NAME takes no
 * value`; for a NAME not in the table the nearest option when one is obvious (`did you mean --check-tensors?`, a
 * misspelling by one or two letters, other dashes, or an unambiguous start; -h or --help too: --hlep); then note
 * (NULL: none; right after `did you mean X?` a sentence of its own, its first letter capitalized). VALUE is
 * shown only after a NAME of table's own that takes no secret (`--temp=0.5`, a flag's `--per-token=1`); any other
 * is named `'NAME=VALUE'` (its value is not shown): a misspelt or unknown name's value may be a secret
 * (`--pasword=...`), and a secret is one given to a SECRET option of any command's table or a name like one
 * (loom_cli_secret_name). An ARG that could hold a secret past some point is named only up to there (whatever
 * follows, -ARG=VALUE too): one that starts with an option of table (or -h, --help; the longest; with other dashes
 * too for a name of three letters or more: -temphunter2 is --temp's) and runs on past it, `loom CMD: '-t' with a
 * value glued on (not shown): give it as the next argument, -t VALUE` (a flag's: `'--stats' with text glued on (not
 * shown): --stats takes no value`; then `did you mean X?` only for the same letters as X: -temp); one of a single
 * dash whose letter is a short option of some command (-c -d -m -n -o -p -t) with more after it, `'-p' with text
 * glued on (not shown): loom chat takes no -p`; one whose name holds key, token, passw(ord) or secret (any case)
 * with more after that word, `unknown option '--token...' (the rest is not shown)`; note in parentheses after
 * each. llama.cpp's names (--temperature) are names, not options with text glued on. Every command prints its
 * synopsis or usage after it; cmd NULL: `loom: ...` (before a command). commands.c. */
void loom_cli_unknown(const char *cmd, const struct loom_cli_option *table, const char *arg, const char *note);
/* Print arg on stderr as a message names it: 'ARG', or for one spelled NAME=VALUE 'NAME=VALUE' (its value not
 * shown, as loom_cli_unknown's: an operand such as api_key=... may hold a secret); 1 when the value was left out,
 * for the caller to say `its value is not shown`. commands.c. */
int loom_cli_put_arg(const char *arg);
/* Whether an option named name[n] takes a secret, in whatever command it is given: a SECRET option of some
 * command's table (each is listed in commands.c: the parser refuses one that is not) or a name near one, or any
 * name holding key, token, passw or secret (ASCII case ignored). commands.c. */
int loom_cli_secret_name(const char *name, size_t n);
/* The command nearest to name as loom_cli_unknown finds an option (`srve`: serve; version and help too), or NULL.
 * commands.c. */
const char *loom_cli_nearest_command(const char *name);
/* Print `loom CMD: unexpected argument 'ARG' (WHY; loom CMD takes OPERANDS and the options A, B and C, each with a
 * value, and the flags D and E)`: WHY (NULL: none) says why ARG is not taken; OPERANDS (NULL: "only") what the
 * command takes besides the options of table. An ARG spelled NAME=VALUE is named as loom_cli_put_arg names it,
 * `its value is not shown` first in the parentheses. commands.c. */
void loom_cli_unexpected(const char *cmd, const struct loom_cli_option *table, const char *arg, const char *why,
                         const char *operands);
/* The expert cache's figures after the prompt and after each decoded token (run --stats): at[0] at the start,
 * then one per loom_cli_expert_trace_add. */
struct loom_cli_expert_trace {
    const loom_model *m;
    loom_expert_stats *at; /* [cap] */
    int n, cap;
};
/* Start a trace of up to n_decode tokens when mo asks for --stats and m streams experts (else leaves t empty and
 * adds will do nothing): LOOM_OK or LOOM_E_NOMEM. Add allocates nothing. commands.c. */
int loom_cli_expert_trace_init(struct loom_cli_expert_trace *t, const loom_model *m,
                               const struct loom_cli_model_opts *mo, int n_decode, loom_error *err);
void loom_cli_expert_trace_add(struct loom_cli_expert_trace *t);
/* With --stats (mo) and a model that streams its experts: its figures on stderr, per token over n_tokens
 * evaluated (0: in all), and the same as one JSON line ({"expert_stats": {...}}); trace (may be NULL) adds the
 * prompt's and each decoded token's. commands.c. */
void loom_cli_expert_stats(const char *cmd, const loom_model *m, const struct loom_cli_model_opts *mo, int n_tokens,
                           const struct loom_cli_expert_trace *trace);

/* The error code of an option whose value conflicts with the model loaded (-c beyond its context_length, a prompt
 * longer than -c): a usage error found after the load, so the command exits 2 as for any bad option. */
#define LOOM_CLI_E_USAGE (-100)

/* Report a subcommand's failure rc (LOOM_OK excluded): `loom CMD: interrupted (SIGINT)` for LOOM_E_CANCELLED
 * (returns loom_cli_stopped_status()), else `loom CMD: MSG` with err's message (returns 2 for LOOM_CLI_E_USAGE,
 * else 1). commands.c. */
int loom_cli_fail(const char *cmd, int rc, const loom_error *err);

/* Say on stderr that standard output could not be delivered: `loom CMD: writing standard output (PATH): REASON`,
 * PATH when it is a file, REASON err's text, or when err is 0 the reason found now (ENOSPC for a full disk or
 * /dev/full, EPIPE for a pipe whose reader left), else "write error". commands.c. */
void loom_cli_stdout_failed(const char *cmd, int err);

/* Apply $LOOM_ORDERS (avx512 or haswell: the float-order profile) and $LOOM_KERNELS (auto, scalar, avx2 or
 * avx512) if set and not empty (empty: as unset): the kernel set for every model loaded after. Returns 0, or -1
 * with a message on stderr for an unknown value or one the CPU cannot run. Called where a command is about to run
 * a model (loom_cli_load_model; bench, whose --mem probes the set too), so that help, version and the commands
 * that run none (inspect, synth, tokenize, quantize) work whatever the environment says. commands.c. */
int loom_cli_select_kernels(void);
/* Who chose the float-order profile (loom_orders_name()): "LOOM_ORDERS" when the variable did, "cpu" when it
 * follows the CPU (the library's default), for the reports' JSON; loom_cli_orders_text writes "float orders NAME
 * (LOOM_ORDERS)" or "float orders NAME (the CPU's)" to buf[cap] for their text. commands.c. */
const char *loom_cli_orders_from(void);
const char *loom_cli_orders_text(char *buf, size_t cap);

/* Ctrl+C (SIGINT), SIGTERM and SIGHUP (signals.c). The long-running subcommands (run, chat, bench, quantize,
 * synth) install handlers that only count the signals; their work polls them, stops at the next step, cleans up
 * (no temporary or half-written file stays) and returns loom_cli_stopped_status(). A signal ignored on entry
 * (nohup's SIGHUP, a script's background job's SIGINT) stays ignored. */
void loom_cli_signals_install(void);
/* In a child process that must stop when its parent dies (its parent-death signal is SIGTERM): the handlers of
 * loom_cli_signals_install, whether or not the parent installed them, and SIGTERM counted even when it was ignored
 * on entry. */
void loom_cli_signals_install_child(void);
/* Whether sig is ignored now (SIG_IGN): for a handled signal after loom_cli_signals_install, ignored on entry. */
int loom_cli_signal_ignored(int sig);
/* The signal that stops the work: SIGTERM once one came since the last clear, else SIGHUP once one came, else
 * SIGINT once one came, else 0. */
int loom_cli_signal(void);
/* Signals (SIGINT, SIGTERM and SIGHUP) since the last clear. */
int loom_cli_signal_count(void);
void loom_cli_signals_clear(void);
/* "SIGTERM", "SIGHUP" or "SIGINT" for one of the handled signals, else NULL. */
const char *loom_cli_handled_signal_name(int sig);
/* The name of the signal that stopped the work (loom_cli_stopped_status's), for messages. */
const char *loom_cli_signal_name(void);
/* A loom_abort_fn for the library: nonzero once a signal came. ctx unused. */
int loom_cli_abort(void *ctx);
/* The exit status of a subcommand stopped by a signal: 128 + the signal (130, 143, 129); 130 when only a child
 * process got one. */
int loom_cli_stopped_status(void);
/* Wait until fd is readable (data, end of input, or a pidfd's process ended) or a signal comes, with no window
 * for a signal to slip in unnoticed before the wait. Returns 0 when readable, else the signal (loom_cli_signal's),
 * also when one came before the call. */
int loom_cli_wait_readable(int fd);
/* For main(): when status is 128 + a signal that came, end the process by that signal (default action, after
 * flushing), so a calling shell sees it and stops a script too; otherwise return status. */
int loom_cli_signal_exit(int status);


/* The sampler options `loom run` and `loom chat` share, with one set of names, ranges, messages and defaults:
 * --temp, --seed, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --presence-penalty,
 * --frequency-penalty, and --stop STRING (repeatable: the output ends before the first one, which is not
 * printed; loom_stop). */
#define LOOM_CLI_STOPS_MAX 16     /* --stop given at most this often */
#define LOOM_CLI_STOP_MAX_LEN 256 /* bytes in one stop string */
struct loom_cli_sampler_opts {
    struct loom_sampler_params sp;
    const char *stops[LOOM_CLI_STOPS_MAX]; /* --stop, in the order given */
    int n_stops;
};
/* The defaults: llama.cpp's (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, penalties off, a window of 64),
 * also serve's for a request's absent fields. */
#define LOOM_CLI_SAMPLER_PARAMS                                                                                   \
    {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1, .repeat_last_n = 64}
#define LOOM_CLI_SAMPLER_DEFAULTS {.sp = LOOM_CLI_SAMPLER_PARAMS}
/* Their entries, for a command's table (loom_cli_parse_options). */
#define LOOM_CLI_SAMPLER_TABLE                                                                                    \
    {"--temp", LOOM_CLI_VALUE}, {"--seed", LOOM_CLI_VALUE}, {"--top-k", LOOM_CLI_VALUE},                          \
        {"--top-p", LOOM_CLI_VALUE}, {"--min-p", LOOM_CLI_VALUE}, {"--repeat-penalty", LOOM_CLI_VALUE},           \
        {"--repeat-last-n", LOOM_CLI_VALUE}, {"--presence-penalty", LOOM_CLI_VALUE},                              \
        {"--frequency-penalty", LOOM_CLI_VALUE}, {"--stop", LOOM_CLI_VALUE}
#define LOOM_CLI_SAMPLER_USAGE                                                                                    \
    "  --temp T               temperature, 0 = greedy (default 0.8)\n"                                            \
    "  --seed S               sampler seed (default 0)\n"                                                         \
    "  --top-k K              keep the K most likely tokens, 0 = all (default 40)\n"                              \
    "  --top-p P              keep the smallest set with probability >= P, 1 = all (default 0.95)\n"              \
    "  --min-p P              keep tokens with probability >= P x the top one's, 0 = all (default 0.05)\n"        \
    "  --repeat-penalty R     divide positive / multiply negative logits of recent tokens, 1 = off\n"             \
    "                         (default 1)\n"                                                                      \
    "  --repeat-last-n N      the penalties look at the last N tokens, 0 = off (default 64)\n"                    \
    "  --presence-penalty A   subtract A from the logit of a recent token (default 0)\n"                          \
    "  --frequency-penalty A  subtract A per occurrence among recent tokens (default 0)\n"                        \
    "  --stop STRING          stop before STRING, which is not printed (repeatable, up to 16)\n"
/* Apply one sampler option: 1 when taken, 0 when opt is not a sampler option, -1 on a bad value (message printed
 * as `loom CMD: OPT expects ..., found '...'`). commands.c. */
int loom_cli_sampler_option(const char *cmd, struct loom_cli_sampler_opts *so, const char *opt, const char *val);

#endif
