/* Thread churn for `make bench`: THREADS short-lived threads, 4 alive at a time, each making
 * CALLS malloc/free pairs (24 bytes) and exiting. Usage: churn THREADS CALLS. What a thread
 * pool that is torn down and rebuilt, or a server with a thread per request, costs. */
#include <pthread.h>
#include <stdlib.h>

#define MICRO_USE(p) __asm__ volatile("" : : "r"(p) : "memory")

static long calls;

static __attribute__((noinline)) void *churn_site(void *arg)
{
    (void)arg;
    for (long i = 0; i < calls; i++) {
        char *p = malloc(24);
        MICRO_USE(p);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = argc > 1 ? atol(argv[1]) : 10000;
    calls = argc > 2 ? atol(argv[2]) : 10;
    for (long i = 0; i < threads; i += 4) {
        pthread_t t[4];
        int n = 0;
        for (; n < 4 && i + n < threads; n++)
            if (pthread_create(&t[n], NULL, churn_site, NULL) != 0)
                return 2;
        for (int k = 0; k < n; k++)
            pthread_join(t[k], NULL);
    }
    return 0;
}
