/* signals.c — Ctrl+C (SIGINT), SIGTERM and SIGHUP (a closed terminal, a dropped ssh connection) in the
 * long-running subcommands: the handlers only count the signals; the work polls them (the library through
 * loom_cli_abort), stops at its next step, cleans up and returns loom_cli_stopped_status(), and main() then ends
 * the process by that signal (loom_cli_signal_exit). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cli/cli.h"

/* The signals handled, in the order loom_cli_signal ranks them: the first that came stops the work. */
static const struct {
    int sig;
    const char *name;
} handled[] = {{SIGTERM, "SIGTERM"}, {SIGHUP, "SIGHUP"}, {SIGINT, "SIGINT"}};
#define N_HANDLED (sizeof handled / sizeof handled[0])

/* Each one's count since the last loom_cli_signals_clear. Lock-free atomics: safe in a handler (C11 7.14.1.1)
 * and between threads, as a handler may run on any thread that does not block the signals (loom's workers block
 * them; the reference engine's threads need not). */
static atomic_int n_caught[N_HANDLED];

static void on_signal(int sig)
{
    for (size_t i = 0; i < N_HANDLED; i++)
        if (handled[i].sig == sig)
            atomic_fetch_add(&n_caught[i], 1);
}

int loom_cli_signal_ignored(int sig)
{
    struct sigaction old;
    return sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
}

void loom_cli_signals_install(void)
{
    for (size_t i = 0; i < N_HANDLED; i++) {
        if (loom_cli_signal_ignored(handled[i].sig))
            continue; /* ignored on entry (a script's background job, nohup): stays ignored */
        struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: a blocking call returns EINTR */
        sigemptyset(&sa.sa_mask);
        sigaction(handled[i].sig, &sa, NULL);
    }
}

void loom_cli_signals_install_child(void)
{
    loom_cli_signals_install();
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL); /* also when ignored on entry: the parent's death must still stop the child */
}

int loom_cli_signal(void)
{
    for (size_t i = 0; i < N_HANDLED; i++)
        if (atomic_load(&n_caught[i]))
            return handled[i].sig;
    return 0;
}

int loom_cli_signal_count(void)
{
    int n = 0;
    for (size_t i = 0; i < N_HANDLED; i++)
        n += atomic_load(&n_caught[i]);
    return n;
}

void loom_cli_signals_clear(void)
{
    for (size_t i = 0; i < N_HANDLED; i++)
        atomic_store(&n_caught[i], 0);
}

int loom_cli_abort(void *ctx)
{
    (void)ctx;
    return loom_cli_signal() != 0;
}

const char *loom_cli_handled_signal_name(int sig)
{
    for (size_t i = 0; i < N_HANDLED; i++)
        if (handled[i].sig == sig)
            return handled[i].name;
    return NULL;
}

const char *loom_cli_signal_name(void) { return loom_cli_handled_signal_name(loom_cli_stopped_status() - 128); }

int loom_cli_stopped_status(void) { return 128 + (loom_cli_signal() ? loom_cli_signal() : SIGINT); }

int loom_cli_wait_readable(int fd)
{
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < N_HANDLED; i++)
        sigaddset(&block, handled[i].sig);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int sig = loom_cli_signal();
    while (!sig) {
        int r = ppoll(&p, 1, NULL, &old); /* unblocks the signals only while it waits */
        sig = loom_cli_signal();
        if (r > 0 || (r < 0 && errno != EINTR))
            break; /* readable, or an error that the read itself will report */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return sig;
}

int loom_cli_signal_exit(int status)
{
    int sig = loom_cli_signal();
    if (!sig || status != 128 + sig)
        return status;
    fflush(NULL);
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
    return status; /* not reached: the default action ends the process */
}
