/* The profiler's first sample in a thread looks up the mapping of the thread's stack
 * (c_core/mf_unwind.c, mf_stack_bounds), with system calls that may fail (on a kernel
 * before 6.11 the PROCMAP_QUERY ioctl does): errno must be what the program left in it.
 * The main thread and three more each set errno to a value of their own before each of
 * their allocation calls and check it after; thread k calls site_thread_k (k + 1) * 100
 * times, 24 bytes each. Exits 1 if errno changed. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define SITE __attribute__((noinline, noclone))

static int errno_changed;

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

#define THREAD_SITE(k)                                                                      \
    SITE void site_thread_##k(void)                                                         \
    {                                                                                       \
        for (int i = 0; i < ((k) + 1) * 100; i++) {                                         \
            errno = 1000 + (k);                                                             \
            void *p = malloc(24);                                                           \
            if (errno != 1000 + (k))                                                        \
                __atomic_store_n(&errno_changed, 1, __ATOMIC_RELAXED);                      \
            release(p);                                                                     \
        }                                                                                   \
    }
THREAD_SITE(0)
THREAD_SITE(1)
THREAD_SITE(2)
THREAD_SITE(3)

static void *thread(void *arg)
{
    ((void (*)(void))arg)();
    return NULL;
}

int main(void)
{
    void (*sites[3])(void) = {site_thread_1, site_thread_2, site_thread_3};
    pthread_t t[3];
    site_thread_0();
    for (int k = 0; k < 3; k++)
        if (pthread_create(&t[k], NULL, thread, (void *)sites[k]) != 0)
            return 2;
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    if (errno_changed) {
        fprintf(stderr, "errno changed by an allocation call\n");
        return 1;
    }
    return 0;
}
