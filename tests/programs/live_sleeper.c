/* Allocates known counts, says "ready" on stdout and sleeps until killed, for
 * test_killed_process_loses_nothing: site_live_main 1234 x 8 bytes (main thread),
 * site_live_thread 567 x 16 bytes (a second thread, also still alive when killed). */
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_live_main(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(8));
}

SITE void site_live_thread(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(16));
}

static sem_t thread_done;

static void *sleeper(void *arg)
{
    (void)arg;
    site_live_thread(567);
    sem_post(&thread_done);
    for (;;)
        pause();
    return NULL;
}

int main(void)
{
    sem_init(&thread_done, 0, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0)
        return 2;
    site_live_main(1234);
    while (sem_wait(&thread_done) != 0)
        ;
    static const char ready[] = "ready\n";
    if (write(1, ready, sizeof ready - 1) < 0)
        return 2;
    for (;;)
        pause();
}
