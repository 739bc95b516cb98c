/* malloc_freq_thread_counts() found with dlsym, as a program under LD_PRELOAD finds it
 * (tests/preload/test_budgets.py): windows of known calls, nested, while another thread
 * allocates, in a thread that reuses an exited thread's slot, and the versioned struct.
 * Prints one line per measurement; without the library, "no profiler loaded". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../c_core/malloc_freq.h"

static malloc_freq_thread_counts_fn *counts_fn;

__attribute__((noipa)) static void release(void *p)
{
    free(p);
}

static struct malloc_freq_counts now(void)
{
    struct malloc_freq_counts c = {.size = sizeof c};
    if (counts_fn(&c) != 0)
        abort();
    return c;
}

static uint64_t d_calls(const struct malloc_freq_counts *a, const struct malloc_freq_counts *b)
{
    return b->calls - a->calls;
}

static sem_t go, done;

static void *other(void *arg) /* 10,000 calls while main measures: not main's */
{
    (void)arg;
    sem_wait(&go);
    struct malloc_freq_counts a = now();
    for (int i = 0; i < 10000; i++)
        release(malloc(16));
    struct malloc_freq_counts b = now();
    *(uint64_t *)arg = d_calls(&a, &b);
    sem_post(&done);
    return NULL;
}

static void *fresh(void *arg) /* a new thread, maybe on an exited thread's slot */
{
    uint64_t *out = arg;
    struct malloc_freq_counts a = now();
    for (int i = 0; i < 100; i++)
        release(malloc(8));
    struct malloc_freq_counts b = now();
    out[0] = a.calls;
    out[1] = b.fn_calls[MALLOC_FREQ_FN_MALLOC];
    out[2] = b.fn_bytes[MALLOC_FREQ_FN_MALLOC];
    return NULL;
}

int main(void)
{
    counts_fn = malloc_freq_counts_fn();
    if (!counts_fn) {
        puts("no profiler loaded");
        return 0;
    }
    setvbuf(stdout, NULL, _IOFBF, 1 << 16); /* printf's buffer: not in any window */
    sem_init(&go, 0, 0);
    sem_init(&done, 0, 0);
    uint64_t other_calls = 0;
    pthread_t th;
    pthread_create(&th, NULL, other, &other_calls);

    /* outer: 37 malloc(24) + inner (5 calloc(4, 10)) + 3 realloc growing to 30, 60, 90;
     * the other thread's 10,000 calls run inside it */
    struct malloc_freq_counts o0 = now();
    for (int i = 0; i < 37; i++)
        release(malloc(24));
    sem_post(&go);
    struct malloc_freq_counts i0 = now();
    for (int i = 0; i < 5; i++)
        release(calloc(4, 10));
    struct malloc_freq_counts i1 = now();
    sem_wait(&done);
    void *p = NULL;
    for (int i = 1; i <= 3; i++)
        p = realloc(p, 30 * (size_t)i);
    release(p);
    struct malloc_freq_counts o1 = now();

    /* a long window: past the hot path's flushes (every 4,096 calls) and samples */
    struct malloc_freq_counts l0 = now();
    for (int i = 0; i < 50000; i++)
        release(malloc(100));
    struct malloc_freq_counts l1 = now();
    pthread_join(th, NULL);

    uint64_t fr[3];
    pthread_create(&th, NULL, fresh, fr);
    pthread_join(th, NULL);

    /* an older caller's struct: calls and bytes only */
    struct malloc_freq_counts small = {.size = 3 * sizeof(uint64_t)};
    small.fn_calls[0] = 12345;
    int small_rc = counts_fn(&small);
    struct malloc_freq_counts tiny = {.size = 8};
    errno = 0;
    int tiny_rc = counts_fn(&tiny);
    int tiny_errno = errno;

    printf("outer calls %llu bytes %llu malloc %llu calloc %llu realloc %llu bytes %llu\n",
           (unsigned long long)d_calls(&o0, &o1), (unsigned long long)(o1.bytes - o0.bytes),
           (unsigned long long)(o1.fn_calls[MALLOC_FREQ_FN_MALLOC] - o0.fn_calls[MALLOC_FREQ_FN_MALLOC]),
           (unsigned long long)(o1.fn_calls[MALLOC_FREQ_FN_CALLOC] - o0.fn_calls[MALLOC_FREQ_FN_CALLOC]),
           (unsigned long long)(o1.fn_calls[MALLOC_FREQ_FN_REALLOC] - o0.fn_calls[MALLOC_FREQ_FN_REALLOC]),
           (unsigned long long)(o1.fn_bytes[MALLOC_FREQ_FN_REALLOC] - o0.fn_bytes[MALLOC_FREQ_FN_REALLOC]));
    printf("inner calls %llu bytes %llu\n", (unsigned long long)d_calls(&i0, &i1),
           (unsigned long long)(i1.bytes - i0.bytes));
    printf("other thread calls %llu\n", (unsigned long long)other_calls);
    printf("long calls %llu bytes %llu\n", (unsigned long long)d_calls(&l0, &l1),
           (unsigned long long)(l1.bytes - l0.bytes));
    printf("fresh thread before %llu malloc %llu bytes %llu\n", (unsigned long long)fr[0],
           (unsigned long long)fr[1], (unsigned long long)fr[2]);
    printf("small rc %d size %llu untouched %llu\n", small_rc, (unsigned long long)small.size,
           (unsigned long long)small.fn_calls[0]);
    printf("tiny rc %d einval %d\n", tiny_rc, tiny_errno == EINVAL);
    return 0;
}
