/* A deferred pthread_cancel pending while a thread holds a mutex and allocates, for
 * tests/core/test_trust_unwind.py. malloc is no cancellation point: the thread must make every
 * call, unlock, and only then be cancelled, at its pthread_testcancel(). Under the profiler
 * each call is a sample whose unwind goes through frames libunwind checks memory for (and
 * new stacks, and the thread's first unwind); a system call libunwind makes there must not
 * act on the cancel. argv[1]: "fresh" (the thread's very first allocation call is made with
 * the cancel pending) or "warm" (one call first, with stacks paused when profiled: the
 * thread's file exists, its first unwind is still to come). Prints what happened. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "unwind_frames.h"

#define DEPTHS 12
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ready, go, made;
static int warm;

/* A new stack for each depth. */
__attribute__((noinline)) static int descend(int depth)
{
    if (depth == 0) {
        unwind_release(malloc(16));
        return 1;
    }
    int n = descend(depth - 1);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
    return n;
}

static void *worker(void *arg)
{
    (void)arg;
    if (warm) {
        void (*pause)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "malloc_freq_pause");
        void (*resume)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "malloc_freq_resume");
        if (pause && resume)
            pause();
        unwind_release(malloc(8));
        if (pause && resume)
            resume();
    }
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) /* no cancellation point in here */
        ;
    pthread_mutex_lock(&lock);
    unwind_frames_prime();
    __atomic_store_n(&made, 1, __ATOMIC_RELAXED);
    for (int round = 0; round < 3; round++) {
        for (int d = 0; d < DEPTHS; d++)
            __atomic_add_fetch(&made, descend(d), __ATOMIC_RELAXED);
        __atomic_add_fetch(&made, unwind_frames_churn(100), __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lock);
    pthread_testcancel();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || unwind_frames_setup() != 0)
        return 2;
    warm = strcmp(argv[1], "warm") == 0;
    pthread_t t;
    void *ret;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 3;
    while (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) /* the warm-up call is made */
        ;
    if (pthread_cancel(t) != 0)
        return 3;
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    if (pthread_join(t, &ret) != 0)
        return 4;
    int unlocked = pthread_mutex_trylock(&lock) == 0;
    printf("%s: %d allocation calls made, %s, mutex %s\n", argv[1], made,
           ret == PTHREAD_CANCELED ? "cancelled" : "not cancelled",
           unlocked ? "released" : "still held");
    return 0;
}
