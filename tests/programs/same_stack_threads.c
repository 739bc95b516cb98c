/* Four threads alive at once, each allocating at one site through the same calls: every
 * thread file holds the same stack (test_merge_images.py reads one image's files apart). */
#include <pthread.h>
#include <stdlib.h>

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

__attribute__((noinline, noclone)) static void site_shared(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(24));
}

static pthread_barrier_t all_alive;

static void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&all_alive); /* no thread's table goes on to the next (mf_thread.c) */
    site_shared(100);
    pthread_barrier_wait(&all_alive);
    return NULL;
}

int main(void)
{
    pthread_t t[4];
    pthread_barrier_init(&all_alive, NULL, 4);
    for (int k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, worker, NULL) != 0)
            return 2;
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    return 0;
}
