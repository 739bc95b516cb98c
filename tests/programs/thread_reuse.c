/* 2000 short-lived threads, one after another, each calling site_short_thread 5 times
 * (24 bytes): exactly 10000 calls, for test_thread_ids_reused. glibc reuses the stack (and
 * so the pthread_t) of a joined thread: the original malloc_freq named its files by
 * pthread_self() and kept 1 thread's calls in 8. Prints how many distinct pthread_t it saw. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))
#define THREADS 2000
#define CALLS_PER_THREAD 5

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_short_thread(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(24));
}

static pthread_t seen[THREADS];

static void *short_lived(void *arg)
{
    site_short_thread(CALLS_PER_THREAD);
    *(pthread_t *)arg = pthread_self();
    return NULL;
}

int main(void)
{
    for (int i = 0; i < THREADS; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, &seen[i]) != 0)
            return 2;
        pthread_join(t, NULL);
    }
    int distinct = 0;
    for (int i = 0; i < THREADS; i++) {
        int j = 0;
        while (j < i && !pthread_equal(seen[j], seen[i]))
            j++;
        distinct += j == i;
    }
    char line[64];
    int n = snprintf(line, sizeof line, "%d threads, %d distinct pthread_t\n", THREADS, distinct);
    return write(1, line, (size_t)n) < 0;
}
