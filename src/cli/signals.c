/* signals.c — Ctrl+C (SIGINT) and SIGTERM in the long-running subcommands: the handlers only count the
 * signals; the work polls them (the library through loom_cli_abort), stops at its next step, cleans up and
 * returns loom_cli_stopped_status(), and main() then ends the process by that signal (loom_cli_signal_exit). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cli/cli.h"

/* Lock-free atomics: safe in a handler (C11 7.14.1.1) and between threads, as a handler may run on any thread
 * that does not block the signals (loom's workers block them; the reference engine's threads need not). */
static atomic_int n_sigint;  /* SIGINTs since the last loom_cli_signals_clear */
static atomic_int n_sigterm; /* SIGTERMs since then */

static void on_signal(int sig)
{
    atomic_fetch_add(sig == SIGTERM ? &n_sigterm : &n_sigint, 1);
}

void loom_cli_signals_install(void)
{
    static const int sigs[] = {SIGINT, SIGTERM};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa = {.sa_handler = on_signal}; /* no SA_RESTART: a blocking call returns EINTR */
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue; /* ignored on entry (a script's background job, nohup): stays ignored */
        sigaction(sigs[i], &sa, NULL);
    }
}

int loom_cli_signal(void)
{
    return atomic_load(&n_sigterm) ? SIGTERM : atomic_load(&n_sigint) ? SIGINT : 0;
}

int loom_cli_signal_count(void) { return atomic_load(&n_sigint) + atomic_load(&n_sigterm); }

void loom_cli_signals_clear(void)
{
    atomic_store(&n_sigint, 0);
    atomic_store(&n_sigterm, 0);
}

int loom_cli_abort(void *ctx)
{
    (void)ctx;
    return loom_cli_signal() != 0;
}

const char *loom_cli_signal_name(void) { return loom_cli_signal() == SIGTERM ? "SIGTERM" : "SIGINT"; }

int loom_cli_stopped_status(void) { return 128 + (loom_cli_signal() ? loom_cli_signal() : SIGINT); }

int loom_cli_wait_readable(int fd)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
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
