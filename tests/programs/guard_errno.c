/* Makes each guarded call (the calls the preload library makes the profile before: setuid
 * and the rest, pthread_create, prctl) so that it succeeds, with errno set to 42 before it,
 * and prints its result and errno after it: glibc leaves errno alone on success, and so
 * must the profiler (test_guarded_calls_leave_errno_alone). Usage: guard_errno CALL: that
 * call first, before any allocation (the guard makes the profile then), then each of them. As root; "late" allocates first (the profile is made
 * at the first call then, and the guards only add to it), then calls setuid(65534) and
 * allocates at new stacks: the modules loaded by then are in the profile, and no warning
 * line may say otherwise (test_setuid_after_start_up_warns_only_of_what_is_lost). */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_before(void)
{
    for (int i = 0; i < 100; i++)
        release(malloc(16));
}

SITE void site_after(void)
{
    for (int i = 0; i < 200; i++)
        release(malloc(48));
}

static void *nothing(void *arg)
{
    return arg;
}

static pthread_t thread;
static struct rlimit core;

static int call(const char *name)
{
    if (strcmp(name, "pthread_create") == 0) {
        int rc = pthread_create(&thread, NULL, nothing, NULL);
        int err = errno;
        pthread_join(thread, NULL);
        errno = err;
        return rc;
    }
    if (strcmp(name, "setrlimit") == 0)
        return setrlimit(RLIMIT_CORE, &core);
    if (strcmp(name, "prlimit") == 0)
        return prlimit(0, RLIMIT_CORE, &core, NULL);
    if (strcmp(name, "setgroups") == 0)
        return setgroups(0, NULL);
    if (strcmp(name, "setgid") == 0)
        return setgid(0);
    if (strcmp(name, "setegid") == 0)
        return setegid(0);
    if (strcmp(name, "setresgid") == 0)
        return setresgid(-1, -1, -1);
    if (strcmp(name, "seteuid") == 0)
        return seteuid(0);
    if (strcmp(name, "setreuid") == 0)
        return setreuid(-1, -1);
    if (strcmp(name, "setresuid") == 0)
        return setresuid(-1, -1, -1);
    if (strcmp(name, "setuid") == 0)
        return setuid(0);
    if (strcmp(name, "chroot") == 0)
        return chroot("/");
    if (strcmp(name, "prctl") == 0)
        return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    return -2;
}

static const char *const names[] = {"pthread_create", "setrlimit", "prlimit", "setgroups",
                                    "setgid", "setegid", "setresgid", "seteuid", "setreuid",
                                    "setresuid", "setuid", "chroot", "prctl"};

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    if (strcmp(argv[1], "late") == 0) {
        site_before();
        if (setuid(65534) != 0)
            return 2;
        site_after();
        printf("late done\n");
        return 0;
    }
    getrlimit(RLIMIT_CORE, &core);
    /* argv[1] first, before any allocation; then all of them, in order (printf allocates) */
    char out[4096];
    size_t used = 0;
    for (int i = -1; i < (int)(sizeof names / sizeof names[0]); i++) {
        const char *name = i < 0 ? argv[1] : names[i];
        errno = 42;
        int rc = call(name);
        int err = errno;
        used += (size_t)snprintf(out + used, sizeof out - used, "%s %d %d\n", name, rc, err);
    }
    site_after();
    fputs(out, stdout);
    return 0;
}
