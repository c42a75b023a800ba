/* test_abort.h — an abort callback for cancellation tests: it asks to stop from its poll number stop_at on
 * (never when stop_at < 0), counting its polls, so a test can cancel a long operation at each poll in turn. */
#ifndef LOOM_TEST_ABORT_H
#define LOOM_TEST_ABORT_H

struct abort_at {
    int polls, stop_at;
};

static int abort_at(void *ctx)
{
    struct abort_at *a = ctx;
    int poll = a->polls++;
    return a->stop_at >= 0 && poll >= a->stop_at;
}

#endif
