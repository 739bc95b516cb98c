/* 50 threads, one after another, each calling site_thread 20 times (56 bytes), and main
 * calling site_main 10 times (8 bytes): 51 thread files, for test_long_base_directory. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_thread(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(56));
}

SITE void site_main(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(8));
}

static void *worker(void *arg)
{
    (void)arg;
    site_thread(20);
    return NULL;
}

int main(void)
{
    site_main(10);
    for (int i = 0; i < 50; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
            return 2;
    }
    printf("50 threads done\n");
    return 0;
}
