/* Takes away, before its first allocation, what a profiler needs to make files: with
 * "setuid" it becomes uid 65534 (it starts as root), with "chroot" it chroots into argv[2],
 * with "nofile" it lowers RLIMIT_NOFILE to the three descriptors it has. Then three threads
 * call site_worker 5,000 times each and main calls site_main 1,000 times: 16,000 calls.
 * With no argument it takes nothing away. For test_files_made_at_start_up_serve_later_threads
 * and test_full_disk_leaves_no_debris_and_counts_every_call (argument "threads N": N threads
 * of 1,000 calls each, alive at once). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_worker(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(40));
}

SITE void site_main(void)
{
    for (int i = 0; i < 1000; i++)
        release(malloc(8));
}

static int calls_per_thread = 5000;
static pthread_barrier_t all_started;

static void *worker(void *arg)
{
    (void)arg;
    site_worker(calls_per_thread);
    pthread_barrier_wait(&all_started); /* all alive at once: each needs a table */
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 3;
    const char *what = argc > 1 ? argv[1] : "";
    if (strcmp(what, "setuid") == 0 && setuid(65534) != 0)
        return 2;
    if (strcmp(what, "chroot") == 0 && (argc < 3 || chroot(argv[2]) != 0 || chdir("/") != 0))
        return 3;
    if (strcmp(what, "nofile") == 0 && setrlimit(RLIMIT_NOFILE, &(struct rlimit){3, 3}) != 0)
        return 4;
    if (strcmp(what, "threads") == 0 && argc > 2) {
        threads = atoi(argv[2]);
        calls_per_thread = 1000;
    }
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    pthread_barrier_init(&all_started, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, worker, NULL) != 0)
            return 5;
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    site_main();
    free(t);
    printf("done\n");
    return 0;
}
