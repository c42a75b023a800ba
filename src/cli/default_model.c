/* default_model.c — finding, and preparing once, the default model of `loom run`: synthesize the 0.8b
 * preset in F16, quantize it to Q4_K_M with the reference quantizer (tools/ref_quantize next to the
 * loom executable), and publish it atomically in $LOOM_CACHE/models. */
#include "cli/default_model.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/types.h"
#include "model/synth.h"
#include "util/error.h"

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

int loom_cli_default_vocab(char *path, size_t cap, loom_error *err)
{
    return default_env_path(path, cap, "LOOM_REF", ".cache/loom/ref", "/src/models/ggml-vocab-qwen35.gguf", err);
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
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return loom_errorf(err, LOOM_E_IO, "creating directory '%s': %s", buf, strerror(errno));
        buf[i] = c;
    }
    return LOOM_OK;
}

/* <dir of /proc/self/exe>/tools/ref_quantize */
static int default_quantizer_path(char *path, size_t cap, loom_error *err)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return loom_errorf(err, LOOM_E_IO, "reading /proc/self/exe: %s", strerror(errno));
    exe[n] = '\0';
    int m = snprintf(path, cap, "%s/tools/ref_quantize", dirname(exe));
    if (m < 0 || (size_t)m >= cap)
        return loom_errorf(err, LOOM_E_RANGE, "quantizer path: needs %d bytes, buffer has %zu", m, cap);
    if (access(path, X_OK) != 0)
        return loom_errorf(err, LOOM_E_IO, "reference quantizer '%s': %s (build it with `make ref`)", path,
                           strerror(errno));
    return LOOM_OK;
}

/* Run `quant in out Q4_K_M` with its output sent to log; LOOM_OK when it exits 0. */
static int default_run_quantizer(const char *quant, const char *in, const char *out, const char *log,
                                 loom_error *err)
{
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return loom_errorf(err, LOOM_E_IO, "opening log '%s': %s", log, strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return loom_errorf(err, LOOM_E_IO, "fork for '%s': %s", quant, strerror(errno));
    }
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        execl(quant, quant, in, out, "Q4_K_M", (char *)NULL);
        _exit(127);
    }
    close(fd);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return loom_errorf(err, LOOM_E_IO, "waiting for '%s': %s", quant, strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return loom_errorf(err, LOOM_E_IO, "'%s %s %s Q4_K_M' failed (status %d); its output is in %s", quant, in,
                           out, status, log);
    return LOOM_OK;
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

/* Synthesize to f16, quantize to q4, rename q4 to path. Temporary files are removed on failure. */
static int default_prepare(const char *path, const char *dir, loom_error *err)
{
    char quant[4096], vocab[4096], f16[4200], q4[4200], log[4200];
    int rc = default_quantizer_path(quant, sizeof quant, err);
    if (rc == LOOM_OK)
        rc = loom_cli_default_vocab(vocab, sizeof vocab, err);
    if (rc != LOOM_OK)
        return rc;
    long pid = (long)getpid();
    snprintf(f16, sizeof f16, "%s/.synth-0.8b-F16.%ld.gguf", dir, pid);
    snprintf(q4, sizeof q4, "%s/.synth-0.8b-Q4_K_M.%ld.gguf", dir, pid);
    snprintf(log, sizeof log, "%s/ref_quantize.log", dir);
    fprintf(stderr, "loom: preparing the default model %s (once)\n", path);
    int last = -1;
    struct loom_synth_params par = {
        .preset = loom_synth_find_preset("0.8b"), .wtype = LOOM_TYPE_F16, .seed = LOOM_SYNTH_DEFAULT_SEED,
        .vocab_path = vocab, .progress = default_progress, .progress_ctx = &last,
    };
    rc = loom_synth_write(&par, f16, err);
    if (rc == LOOM_OK) {
        fprintf(stderr, "loom: quantizing to Q4_K_M with %s\n", quant);
        rc = default_run_quantizer(quant, f16, q4, log, err);
    }
    unlink(f16);
    if (rc == LOOM_OK && rename(q4, path) != 0)
        rc = loom_errorf(err, LOOM_E_IO, "renaming '%s' to '%s': %s", q4, path, strerror(errno));
    if (rc != LOOM_OK) {
        unlink(q4);
        return rc;
    }
    unlink(log);
    fprintf(stderr, "loom: default model ready: %s\n", path);
    return LOOM_OK;
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
    rc = default_mkdirs(dir, err);
    return rc == LOOM_OK ? default_prepare(path, dir, err) : rc;
}
