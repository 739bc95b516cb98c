/* Runs a program as on a kernel older than Linux 6.11 (Debian 12's is 6.1): a seccomp filter
 * answers the PROCMAP_QUERY ioctl with ENOTTY, as such a kernel does, so the profiler finds a
 * stack's mapping by reading /proc/self/maps (c_core/mf_unwind.c, mf_stack_bounds). The
 * filter stays across exec. Usage: old_kernel /absolute/path/to/program [args...] */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

#define PROCMAP_QUERY_REQUEST _IOWR('f', 17, char[104]) /* struct procmap_query: 104 bytes */

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: old_kernel /path/to/program [args...]\n");
        return 2;
    }
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
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("old_kernel: seccomp");
        return 2;
    }
    execv(argv[1], argv + 1);
    perror("old_kernel: execv");
    return 2;
}
