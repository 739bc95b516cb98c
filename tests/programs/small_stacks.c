/* Small stacks: a thread of PTHREAD_STACK_MIN (16 KiB) that allocates at three sites, and a
 * signal handler on an 8 KiB alternate stack that allocates 200 times. Then it measures how
 * much of a thread's stack the profiler takes: the static TLS block (the start routine's
 * stack left, in a 64 KiB thread) and the slow path (the deepest byte written below the
 * caller's frame by a malloc that takes a sample of a new stack, found by painting the
 * stack below it). Prints "ok", then "tls_left N" and "slow_path_bytes N".
 * For test_small_stacks_run (tests/core/test_trust_core.py). */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_small_a(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(16));
}

SITE void site_small_b(int n)
{
    for (int i = 0; i < n; i++)
        release(calloc(2, 8));
}

SITE void site_small_c(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(100));
}

static void *small_thread(void *arg)
{
    (void)arg;
    site_small_a(100);
    site_small_b(200);
    site_small_c(300);
    return NULL;
}

SITE void site_in_handler(void)
{
    release(malloc(32));
}

static void on_signal(int sig)
{
    (void)sig;
    site_in_handler();
}

/* ---- how much stack the profiler takes ---- */

#define PAINT 0x5a
#define PAINT_BYTES (24 * 1024)

static size_t tls_left; /* stack between the start routine's frame and the stack's end */
static size_t slow_path_bytes;

/* A new call site per call: each malloc below is a new stack, so it is sampled and stored
 * (at MALLOC_FREQ_SAMPLE=1), the slow path's longest way. */
SITE void *site_measured(void)
{
    return malloc(24);
}

#define MARGIN 128 /* this function's own frame */

SITE size_t paint_and_measure(void)
{
    volatile char *below = (volatile char *)__builtin_frame_address(0) - MARGIN - PAINT_BYTES;
    for (size_t i = 0; i < PAINT_BYTES; i++)
        below[i] = PAINT;
    release(site_measured());
    size_t i = 0;
    while (i < PAINT_BYTES && below[i] == PAINT)
        i++;
    return MARGIN + PAINT_BYTES - i; /* the deepest byte written below this frame */
}

static void *measuring_thread(void *arg)
{
    (void)arg;
    pthread_attr_t attr;
    void *lo;
    size_t size;
    pthread_getattr_np(pthread_self(), &attr);
    pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
    tls_left = (size_t)((char *)__builtin_frame_address(0) - (char *)lo);
    release(malloc(8));   /* the thread's first call: its set-up */
    paint_and_measure(); /* warm: libunwind's first use in this thread */
    slow_path_bytes = paint_and_measure();
    return NULL;
}

static int run_thread(size_t stack, void *(*fn)(void *))
{
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, stack) != 0)
        return 1;
    if (pthread_create(&t, &attr, fn, NULL) != 0)
        return 1;
    pthread_attr_destroy(&attr);
    return pthread_join(t, NULL) != 0;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (run_thread(PTHREAD_STACK_MIN, small_thread))
        return 2;

    static char altstack[8192];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0)
        return 3;
    for (int i = 0; i < 200; i++)
        raise(SIGUSR1);
    printf("ok\n");

    if (argc > 1 && run_thread(64 * 1024, measuring_thread) == 0)
        printf("tls_left %zu\nslow_path_bytes %zu\n", tls_left, slow_path_bytes);
    return 0;
}
