/* A thread that starts late: `late_thread GATE` makes one call from main (its process file
 * and its first thread file), waits until the file GATE exists, then runs a thread that
 * makes 500 calls at site_late (a second thread file, made only then) and ends. For the
 * timeline recorder's listing of a directory whose process ends before it is read
 * (tests/viewer/test_timeline.py). No stdio. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int sink;

__attribute__((noinline)) void site_first(void)
{
    char *p = malloc(16);
    sink += p != NULL;
    free(p);
}

__attribute__((noinline)) void site_late(void)
{
    char *p = malloc(48);
    sink += p != NULL;
    free(p);
}

static void *late(void *arg)
{
    (void)arg;
    for (int i = 0; i < 500; i++)
        site_late();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    site_first();
    struct timespec tick = {0, 10000000};
    while (access(argv[1], F_OK) != 0)
        nanosleep(&tick, NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, late, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    return 0;
}
