/* Installs a seccomp filter that kills the process for open and openat, after its first
 * allocations, then starts threads that allocate, for test_seccomp_filter_is_not_a_death:
 * with "prctl" through prctl(PR_SET_SECCOMP), which the preload library sees; with
 * "syscall" through raw system calls (no_new_privs and seccomp(2)), which it does not.
 * site_before 100 x 16 bytes; then the filter; then 3 threads call site_worker 1,000 x 40
 * bytes each, one after another, and main calls site_after 200 x 48 bytes; prints "done". */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_before(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(16));
}

SITE void site_worker(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(40));
}

SITE void site_after(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(48));
}

static void *worker(void *arg)
{
    (void)arg;
    site_worker(1000);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    site_before(100);
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_open, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (strcmp(argv[1], "prctl") == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
            return 3;
    } else if (strcmp(argv[1], "syscall") == 0) {
        if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
            return 3;
    } else {
        return 2;
    }
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
            return 4;
    }
    site_after(200);
    printf("done\n");
    return 0;
}
