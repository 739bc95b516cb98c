/* Four threads, each allocating at a site of its own: worker k calls site_worker_k
 * (k+1)*100 times, 40 bytes each. Prints "worker K TID" per worker so a test can damage
 * one thread's file and know whose counts must remain (test_mf_print_bad_input). The four
 * live at once (a barrier), so each has a table of its own: a table passes to the next new
 * thread only when its thread has exited. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

#define WORKER_SITE(k)                                                                      \
    SITE void site_worker_##k(int n)                                                        \
    {                                                                                       \
        for (int i = 0; i < n; i++)                                                         \
            release(malloc(40));                                                            \
    }
WORKER_SITE(0)
WORKER_SITE(1)
WORKER_SITE(2)
WORKER_SITE(3)

static void (*const worker_sites[4])(int) = {site_worker_0, site_worker_1, site_worker_2,
                                             site_worker_3};
static pid_t worker_tids[4];
static pthread_barrier_t all_started;

static void *worker(void *arg)
{
    int k = (int)(long)arg;
    worker_tids[k] = gettid();
    worker_sites[k]((k + 1) * 100);
    pthread_barrier_wait(&all_started);
    return NULL;
}

int main(void)
{
    pthread_t t[4];
    pthread_barrier_init(&all_started, NULL, 4);
    for (long k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, worker, (void *)k) != 0)
            return 2;
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < 4; k++) {
        char line[64];
        int n = snprintf(line, sizeof line, "worker %d %d\n", k, (int)worker_tids[k]);
        if (write(1, line, (size_t)n) < 0)
            return 2;
    }
    return 0;
}
