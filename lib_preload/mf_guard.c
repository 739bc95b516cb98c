/* The calls that take away what making the profile's files needs: the right to write the
 * directory (setuid and the rest of the family), the directory itself (chroot, unshare,
 * setns), descriptors or file size (setrlimit, prlimit). The profile of a process starts at
 * its first allocation call (mf_lazy_start), so that one that never allocates makes no
 * file; one that gives these up before its first allocation has its files made here first,
 * at a safe point outside malloc (docs/guarantees.md:
 * files are made while they can be). Then the call goes on to the next definition, glibc's.
 * libunwind, loaded only when a stack needs it, is loaded here too if it is still to be:
 * its module records could not be added to the process file afterwards. pthread_create is
 * the other safe point: libunwind is loaded before a second thread runs.
 *
 * No system header declares these here: their prototypes in <unistd.h> and
 * <sys/resource.h> differ by feature macros (enum __rlimit_resource), and the ABI is ints
 * and pointers either way. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/prctl.h>

#include "mf_core.h"

#define MF_NO_UID UINT64_MAX /* the call sets no effective uid */
#define MF_UID(u) ((u) == ~0u ? MF_NO_UID : (uint64_t)(u)) /* -1: left as it is */

/* The next definition, looked up at the first call (not in malloc: the loader's lock is
 * free to take). Threads racing it store the same answer. */
static void *mf_guard_next(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* uid: the effective uid the call sets, if it does (the directory is given to that user
 * first: c_core/mf_process.c, mf_core_before_loss). A call that succeeds leaves errno alone,
 * as glibc's does. */
#define MF_GUARD(name, params, args, uid)                                                   \
    __attribute__((visibility("default"))) int name params                                 \
    {                                                                                       \
        static void *next;                                                                  \
        bool handed = mf_core_before_loss(uid);                                             \
        int(*f) params = (int(*) params)mf_guard_next(&next, #name);                        \
        if (!f) {                                                                           \
            mf_core_after_loss(handed, true, uid);                                          \
            errno = ENOSYS;                                                                 \
            return -1;                                                                      \
        }                                                                                   \
        int rc = f args;                                                                    \
        mf_core_after_loss(handed, rc != 0, uid);                                           \
        return rc;                                                                          \
    }

MF_GUARD(setuid, (unsigned u), (u), MF_UID(u))
MF_GUARD(setgid, (unsigned g), (g), MF_NO_UID)
MF_GUARD(seteuid, (unsigned u), (u), MF_UID(u))
MF_GUARD(setegid, (unsigned g), (g), MF_NO_UID)
MF_GUARD(setreuid, (unsigned r, unsigned e), (r, e), MF_UID(e))
MF_GUARD(setregid, (unsigned r, unsigned e), (r, e), MF_NO_UID)
MF_GUARD(setresuid, (unsigned r, unsigned e, unsigned s), (r, e, s), MF_UID(e))
MF_GUARD(setresgid, (unsigned r, unsigned e, unsigned s), (r, e, s), MF_NO_UID)
MF_GUARD(setfsuid, (unsigned u), (u), MF_NO_UID) /* returns the previous fsuid: -1 only if not found */
MF_GUARD(setfsgid, (unsigned g), (g), MF_NO_UID)
MF_GUARD(setgroups, (size_t n, const unsigned *list), (n, list), MF_NO_UID)
MF_GUARD(chroot, (const char *path), (path), MF_NO_UID)
MF_GUARD(unshare, (int flags), (flags), MF_NO_UID)
MF_GUARD(setns, (int fd, int type), (fd, type), MF_NO_UID)
MF_GUARD(setrlimit, (int resource, const void *rl), (resource, rl), MF_NO_UID)
MF_GUARD(setrlimit64, (int resource, const void *rl), (resource, rl), MF_NO_UID)
MF_GUARD(prlimit, (int pid, int resource, const void *rl, void *old), (pid, resource, rl, old), MF_NO_UID)
MF_GUARD(prlimit64, (int pid, int resource, const void *rl, void *old), (pid, resource, rl, old), MF_NO_UID)

/* The last moment the process may have one thread: libunwind is loaded now if it is still
 * to be (c_core/mf_unwind.c, mf_unwind_load_if_safe), or a program that starts its threads
 * before its first allocation would have its stacks walked by frame pointers only. */
__attribute__((visibility("default"))) int pthread_create(void *thread, const void *attr,
                                                          void *(*start)(void *), void *arg)
{
    static void *next;
    mf_core_before_threads();
    int (*f)(void *, const void *, void *(*)(void *), void *) =
        (int (*)(void *, const void *, void *(*)(void *), void *))mf_guard_next(&next, "pthread_create");
    if (!f)
        return ENOSYS;
    return f(thread, attr, start, arg);
}

/* A seccomp filter is coming: no_new_privs (which an unprivileged filter needs first) or the
 * filter itself. From then on a new thread's stack mapping is read from /proc/self/maps,
 * never asked for with an ioctl the filter may kill the process for (c_core/mf_unwind.c);
 * the profile is made first, like before a setuid, and once a filter is installed nothing
 * more is opened: a refused open may kill the process too (c_core/mf_files.c).
 * glibc's prctl reads four more arguments whatever the option: so does this one. */
__attribute__((visibility("default"))) int prctl(int option, ...)
{
    static void *next;
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
    unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_SECCOMP || (option == PR_SET_NO_NEW_PRIVS && a2)) {
        mf_procmap_query_off();
        mf_core_before_loss(MF_NO_UID); /* the files, while opening them is sure to be allowed */
    }
    if (option == PR_SET_SECCOMP)
        mf_filter_seen(); /* from now on nothing is opened (c_core/mf_files.c) */
    int (*f)(int, ...) = (int (*)(int, ...))mf_guard_next(&next, "prctl");
    if (!f) {
        errno = ENOSYS;
        return -1;
    }
    return f(option, a2, a3, a4, a5);
}
