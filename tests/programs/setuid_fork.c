/* A root daemon's pattern: allocates (the profile starts, as root), drops root with
 * setuid(65534), then forks a child that allocates and another that execs PROG, for
 * test_children_after_setuid_are_profiled.
 * site_before 100 x 16 bytes (as root), then setuid; the fork child calls site_child
 * 300 x 32 bytes; the second child execs PROG (exec_second: site_after_exec 900 x 30 bytes);
 * the parent calls site_after 200 x 48 bytes, waits for both and prints "children PID PID".
 * Usage: setuid_fork PROG */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
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

SITE void site_child(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(32));
}

SITE void site_after(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(48));
}

static int reap(pid_t pid)
{
    int status;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    site_before(100);
    if (setuid(65534) != 0)
        return 3;
    pid_t forked = fork();
    if (forked < 0)
        return 4;
    if (forked == 0) {
        site_child(300);
        _exit(0);
    }
    pid_t execd = fork();
    if (execd < 0)
        return 5;
    if (execd == 0) {
        char *args[] = {argv[1], NULL};
        execv(argv[1], args);
        _exit(6);
    }
    site_after(200);
    if (!reap(forked) || !reap(execd))
        return 7;
    printf("children %d %d\n", (int)forked, (int)execd);
    return 0;
}
