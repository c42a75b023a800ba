/* default_model.c — finding, and preparing once, the default model of `loom run`: synthesize the 0.8b
 * preset in F16, quantize it to Q4_K_M with loom's quantizer (as `loom quantize`), and publish it
 * atomically in $LOOM_CACHE/models, in a child process, which a signal or its parent's death stops with its
 * temporary files removed; one loom process at a time prepares it (a lock on the directory), the others wait.
 * A models directory removed meanwhile stops the preparation, named; a waiting process then starts over once. */
#include "cli/default_model.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define DEFAULT_MODEL_NAME "qwen35-0.8b-synth-Q4_K_M.gguf"

/* path[cap] = $VAR, or $HOME/home_rel when VAR is unset or empty, followed by suffix. */
static int default_env_path(char *path, size_t cap, const char *var, const char *home_rel, const char *suffix,
                            loom_error *err)
{
    const char *v = getenv(var), *home = getenv("HOME");
    int n = v && *v ? snprintf(path, cap, "%s%s", v, suffix)
                    : snprintf(path, cap, "%s/%s%s", home ? home : ".", home_rel, suffix);
    if (n < 0 || (size_t)n >= cap)
        return loom_errorf(err, LOOM_E_RANGE, "path for $%s%s: needs %d bytes, buffer has %zu", var, suffix, n, cap);
    return LOOM_OK;
}

/* The reference's Qwen3.5 vocabulary: under $LOOM_REF, else $LOOM_CACHE/ref, else ~/.cache/loom/ref (where
 * scripts/setup.sh puts the reference). */
#define VOCAB_IN_REF "/src/models/ggml-vocab-qwen35.gguf"
int loom_cli_default_vocab(char *path, size_t cap, loom_error *err)
{
    const char *ref = getenv("LOOM_REF");
    if (ref && *ref)
        return default_env_path(path, cap, "LOOM_REF", "", VOCAB_IN_REF, err);
    return default_env_path(path, cap, "LOOM_CACHE", ".cache/loom", "/ref" VOCAB_IN_REF, err);
}

/* mkdir -p for dir (modifies nothing outside it). */
static int default_mkdirs(const char *dir, loom_error *err)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n >= sizeof buf)
        return loom_errorf(err, LOOM_E_RANGE, "directory '%s': longer than %zu bytes", dir, sizeof buf - 1);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        struct stat st;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return loom_errorf(err, LOOM_E_IO, "creating directory '%s': %s", buf, strerror(errno));
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
            return loom_errorf(err, LOOM_E_IO, "'%s' exists and is not a directory", buf);
        buf[i] = c;
    }
    return LOOM_OK;
}

/* The models directory as it was when a preparation (or a wait) began: its removal, or its replacement by
 * another directory, is noticed. */
struct default_dir {
    const char *path;
    dev_t dev;
    ino_t ino;
};

/* Whether d's path no longer names the directory it named. */
static int default_dir_gone(const struct default_dir *d)
{
    struct stat st;
    return stat(d->path, &st) != 0 || st.st_dev != d->dev || st.st_ino != d->ino;
}

/* The preparation's loom_abort_fn: a signal came (loom_cli_abort), or its directory (ctx) is gone. */
static int default_abort(void *ctx)
{
    return loom_cli_abort(NULL) || default_dir_gone(ctx);
}

/* Quantize the F16 model at in to Q4_K_M at out with loom's quantizer (`loom quantize`), one thread per
 * online CPU; stopped as default_abort says (d). */
static int default_quantize(const char *in, const char *out, struct default_dir *d, loom_error *err)
{
    loom_gguf *g = NULL;
    int rc = loom_gguf_open(in, &g, err);
    if (rc != LOOM_OK)
        return rc;
    rc = loom_quantize(g, "Q4_K_M", out, &(loom_quantize_options){.abort = default_abort, .abort_ctx = d}, err);
    loom_gguf_close(g);
    return rc;
}

static void default_progress(void *ctx, uint64_t index, uint64_t n_tensors, uint64_t done, uint64_t total,
                             const char *name)
{
    int *last = ctx, decile = total ? (int)(10 * done / total) : 10;
    (void)name;
    if (decile != *last || index == n_tensors)
        fprintf(stderr, "loom: synthesizing default model: %d%%\n", decile * 10);
    *last = decile;
}

/* Remove the temporary files (".synth-0.8b-<type>.<pid>.gguf", and the writer's "...gguf.tmp") that a
 * preparation left in dir when it was killed: those whose process no longer exists. Best effort. */
static void default_remove_stale(const char *dir)
{
    static const char *const prefixes[] = {".synth-0.8b-F16.", ".synth-0.8b-Q4_K_M."};
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
            size_t n = strlen(prefixes[i]);
            char *end;
            if (strncmp(e->d_name, prefixes[i], n) != 0)
                continue;
            long pid = strtol(e->d_name + n, &end, 10);
            if (end == e->d_name + n || pid <= 0 || strncmp(end, ".gguf", 5) != 0 ||
                (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
                continue;
            char path[4400];
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path && unlink(path) == 0)
                fprintf(stderr, "loom: removed %s, left by an interrupted preparation\n", path);
        }
    }
    closedir(d);
}

/* The failure of a preparation in d (code rc, message in err) when d was removed meanwhile (rather than stopped by a
 * signal): said as such, naming the directory. Else rc as it was. */
static int default_dir_failure(const struct default_dir *d, int rc, loom_error *err)
{
    if (rc == LOOM_OK || loom_cli_signal() || !default_dir_gone(d))
        return rc;
    return loom_errorf(err, LOOM_E_IO, "the models directory %s was removed while the default model was being "
                       "prepared in it (run loom again to prepare it anew)", d->path);
}

/* Synthesize to f16, quantize to q4, rename q4 to path. Temporary files are removed on failure, and, when this
 * process holds the directory's lock (locked), those of earlier interrupted preparations first: unlocked, a file
 * whose pid is not alive here may be a live preparation's on another machine sharing the directory. The removal
 * of the directory stops it (default_abort) with an error naming the directory. */
static int default_prepare(const char *path, const char *dir, int locked, loom_error *err)
{
    char vocab[4096], f16[4200], q4[4200];
    int rc = loom_cli_default_vocab(vocab, sizeof vocab, err);
    if (rc != LOOM_OK)
        return rc;
    struct default_dir d = {.path = dir};
    struct stat st;
    if (stat(dir, &st) != 0)
        return loom_errorf(err, LOOM_E_IO, "the models directory %s: %s", dir, strerror(errno));
    d.dev = st.st_dev, d.ino = st.st_ino;
    if (locked)
        default_remove_stale(dir);
    long pid = (long)getpid();
    snprintf(f16, sizeof f16, "%s/.synth-0.8b-F16.%ld.gguf", dir, pid);
    snprintf(q4, sizeof q4, "%s/.synth-0.8b-Q4_K_M.%ld.gguf", dir, pid);
    fprintf(stderr, "loom: preparing the default model %s (once)\n", path);
    int last = -1;
    loom_synth_options par = {
        .preset = "0.8b", .type = "F16", .seed = LOOM_SYNTH_DEFAULT_SEED, .vocab_path = vocab,
        .progress = default_progress, .progress_ctx = &last, .abort = default_abort, .abort_ctx = &d,
    };
    rc = loom_synthesize(&par, f16, err);
    if (rc == LOOM_OK) {
        fprintf(stderr, "loom: quantizing to Q4_K_M\n");
        rc = default_quantize(f16, q4, &d, err);
    }
    unlink(f16);
    if (rc == LOOM_OK && rename(q4, path) != 0)
        rc = loom_errorf(err, LOOM_E_IO, "renaming '%s' to '%s': %s", q4, path, strerror(errno));
    if (rc != LOOM_OK) {
        unlink(q4);
        return default_dir_failure(&d, rc, err);
    }
    fprintf(stderr, "loom: default model ready: %s\n", path);
    return LOOM_OK;
}

/* Wait for the child pid; a signal to this process (SIGTERM or SIGHUP need not reach the child as Ctrl+C does) is
 * passed on to it, which then stops and removes its temporary files. */
static int default_wait(pid_t pid, int *status, loom_error *err)
{
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd >= 0) {
        int sig = loom_cli_wait_readable(pidfd); /* readable once the child has ended */
        if (sig)
            kill(pid, sig);
        close(pidfd);
    } else if (loom_cli_signal()) {
        kill(pid, loom_cli_signal());
    }
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR)
            return loom_errorf(err, LOOM_E_IO, "preparing the default model: waiting for its process: %s",
                               strerror(errno));
    return LOOM_OK;
}

/* The forked child's preparation: its exit status (0, 1 with its error printed, 128 + the signal that stopped it).
 * It stops as on SIGTERM when the parent (pid parent) dies in any way, SIGKILL included: SIGTERM is its
 * parent-death signal, sent when the thread that forked exits (loom forks from the main thread, whose exit is the
 * process's), and a parent already gone before that was set shows as a new getppid(). With the parent's stderr
 * possibly a pipe nobody reads any more, SIGPIPE stays ignored (main's setting, which fork keeps): a progress line
 * must not end it before its cleanup. */
static int default_child(pid_t parent, const char *path, const char *dir, int locked)
{
    loom_cli_signals_install_child();
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* fails only for a bad signal number */
    if (getppid() != parent)
        raise(SIGTERM); /* counted by the handler: the preparation is cancelled before it starts */
    loom_error e = {0};
    int rc = default_prepare(path, dir, locked, &e);
    if (rc != LOOM_OK && rc != LOOM_E_CANCELLED)
        fprintf(stderr, "loom: %s\n", e.msg);
    return rc == LOOM_OK ? 0 : rc == LOOM_E_CANCELLED ? loom_cli_stopped_status() : 1;
}

/* default_prepare in a child process, so that its memory (the F16 model of ~1.5 GB paged through, the
 * quantizer's buffers) is not part of the caller's peak RSS; the child prints its own error and exits with
 * status 128 + the signal when one stopped it. In this process if fork fails. The child shares the directory's
 * lock (flock belongs to the open file, which fork shares; O_CLOEXEC acts only at exec): if this process is
 * SIGKILLed, the child holds it until it exits, which its parent-death signal makes prompt, so that the next
 * loom process finds its temporary files already removed rather than a live preparation's. */
static int default_prepare_forked(const char *path, const char *dir, int locked, loom_error *err)
{
    struct default_dir d = {.path = dir};
    struct stat st;
    if (stat(dir, &st) == 0)
        d.dev = st.st_dev, d.ino = st.st_ino;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return default_prepare(path, dir, locked, err);
    if (pid == 0)
        _exit(default_child(parent, path, dir, locked));
    int status, rc = default_wait(pid, &status, err);
    if (rc != LOOM_OK)
        return rc;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return LOOM_OK;
    const char *stopped_by = WIFEXITED(status) ? loom_cli_handled_signal_name(WEXITSTATUS(status) - 128) : NULL;
    if (stopped_by)
        return loom_errorf(err, LOOM_E_CANCELLED, "preparing %s was interrupted (%s); its temporary files were removed",
                           path, stopped_by);
    if (WIFSIGNALED(status))
        return loom_errorf(err, LOOM_E_IO, "preparing %s: its process ended by signal %d (%s); its temporary files "
                           "stay until the next preparation removes them", path, WTERMSIG(status),
                           strsignal(WTERMSIG(status)));
    if (default_dir_gone(&d))
        return loom_errorf(err, LOOM_E_IO, "preparing %s failed: the models directory %s was removed meanwhile", path,
                           dir);
    return loom_errorf(err, LOOM_E_IO, "preparing %s failed (the reason is printed above)", path);
}

/* default_lock's way out when the directory cannot be locked (errno says why): warned, *fd closed and -1. */
static int default_unlocked(const char *dir, int *fd)
{
    fprintf(stderr, "loom: warning: cannot lock %s (%s): preparing the default model without waiting for other "
            "loom processes\n", dir, strerror(errno));
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
    return LOOM_OK;
}

/* Open the models directory dir into *fd holding an exclusive flock on it, so that one loom process at a time
 * prepares the default model (the directory itself: no lock file, and an interrupted preparation leaves it empty).
 * While another holds it, say so once and poll, so that a signal stops the wait at once: LOOM_E_CANCELLED, *fd -1.
 * A directory removed (or replaced) while waiting, or by the time the lock is taken, ends the wait with *gone set
 * and *fd -1: that lock is no longer the directory's. A file system that does not lock (NFS refuses LOCK_EX on a
 * descriptor not open for writing) is warned about and *fd is -1: the preparation goes on unlocked. */
static int default_lock(const char *dir, int *fd, int *gone, loom_error *err)
{
    struct stat st;
    *gone = 0;
    if ((*fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fstat(*fd, &st) != 0)
        return default_unlocked(dir, fd);
    struct default_dir d = {dir, st.st_dev, st.st_ino};
    for (int said = 0; !default_dir_gone(&d); said = 1) {
        if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
            break;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return default_unlocked(dir, fd);
        if (!said)
            fprintf(stderr, "loom: waiting for another loom process preparing the default model in %s\n", dir);
        if (loom_cli_signal()) {
            close(*fd);
            *fd = -1;
            return loom_errorf(err, LOOM_E_CANCELLED,
                               "interrupted (%s) while waiting for another loom process preparing the default "
                               "model in %s", loom_cli_signal_name(), dir);
        }
        nanosleep(&(struct timespec){.tv_nsec = 150 * 1000 * 1000}, NULL); /* a signal ends it early (EINTR) */
    }
    if ((*gone = default_dir_gone(&d)) != 0) {
        close(*fd);
        *fd = -1;
    }
    return LOOM_OK;
}

/* Make the models directory dir and lock it (default_lock) into *fd; when it is removed while this process waits,
 * start over once (make it anew, lock it), as the preparation it waited for fails. */
static int default_lock_dir(const char *dir, int *fd, loom_error *err)
{
    for (int tries = 0;; tries++) {
        int gone, rc = default_mkdirs(dir, err);
        if (rc != LOOM_OK || (rc = default_lock(dir, fd, &gone, err)) != LOOM_OK || !gone)
            return rc;
        if (tries)
            return loom_errorf(err, LOOM_E_IO, "the models directory %s was removed twice while waiting for other "
                               "loom processes preparing the default model", dir);
        fprintf(stderr, "loom: the models directory %s was removed while waiting; preparing the default model from "
                "the start\n", dir);
    }
}

int loom_cli_default_model(char *path, size_t cap, loom_error *err)
{
    char dir[4096];
    int rc = default_env_path(dir, sizeof dir, "LOOM_CACHE", ".cache/loom", "/models", err);
    if (rc != LOOM_OK)
        return rc;
    int n = snprintf(path, cap, "%s/%s", dir, DEFAULT_MODEL_NAME);
    if (n < 0 || (size_t)n >= cap)
        return loom_errorf(err, LOOM_E_RANGE, "default model path: needs %d bytes, buffer has %zu", n, cap);
    if (access(path, R_OK) == 0)
        return LOOM_OK;
    char vocab[4096];
    if ((rc = loom_cli_default_vocab(vocab, sizeof vocab, err)) != LOOM_OK)
        return rc;
    if (access(vocab, R_OK) != 0) /* before any directory is made or locked */
        return loom_errorf(err, LOOM_E_IO, "it is made with the reference's vocabulary '%s' (%s), "
                           "which `bash scripts/setup.sh` fetches (or set LOOM_REF to the reference's folder)",
                           vocab, strerror(errno));
    int fd;
    if ((rc = default_lock_dir(dir, &fd, err)) != LOOM_OK)
        return rc;
    if (access(path, R_OK) != 0) /* else another loom process prepared it while this one waited */
        rc = default_prepare_forked(path, dir, fd >= 0, err);
    if (fd >= 0)
        close(fd); /* releases the lock */
    return rc;
}
