/* The profiler's first sample in a thread looks up the mapping of the thread's stack
 * (c_core/mf_unwind.c, mf_stack_bounds), with system calls that may fail: errno must be
 * what the program left in it. The main thread and three more, run one at a time, each
 * set errno to a value of their own before each of their allocation calls and check it
 * after; thread k calls site_thread_k (k + 1) * 100 times, 24 bytes each. Exits 1 if errno
 * changed.
 *
 * Between the main thread's calls and the others', argv[1] may sandbox the process:
 * "nnp" sets no_new_privs with prctl, as a program about to install a seccomp filter must;
 * "filter" installs one with the seccomp system call (root only: no no_new_privs needed)
 * that answers the PROCMAP_QUERY ioctl with ENOTTY, as a kernel before 6.11 does. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif
#define PROCMAP_QUERY_REQUEST _IOWR('f', 17, char[104]) /* struct procmap_query: 104 bytes */

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

static int install_filter(void)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)PROCMAP_QUERY_REQUEST, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOTTY),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int main(int argc, char **argv)
{
    void (*sites[3])(void) = {site_thread_1, site_thread_2, site_thread_3};
    pthread_t t[3];
    site_thread_0();
    if (argc > 1 && strcmp(argv[1], "nnp") == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("prctl");
        return 2;
    }
    if (argc > 1 && strcmp(argv[1], "filter") == 0 && install_filter() != 0) {
        perror("seccomp");
        return 2;
    }
    /* One after another: each thread's first lookup comes after the one before it has
     * finished, so the counts of queries a test expects do not depend on the scheduler
     * (with a filter that refuses the query, two threads racing could both ask it). */
    for (int k = 0; k < 3; k++) {
        if (pthread_create(&t[k], NULL, thread, (void *)sites[k]) != 0)
            return 2;
        pthread_join(t[k], NULL);
    }
    if (errno_changed) {
        fprintf(stderr, "errno changed by an allocation call\n");
        return 1;
    }
    return 0;
}
