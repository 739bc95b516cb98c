/* Changes directory after start-up, then forks a child or execs another image, for
 * test_chdir_then_fork_child and test_chdir_then_exec_relative_dir: every profile must land
 * in the directory settled at start-up, not one relative to the new working directory.
 * site_before 100 x 16 bytes, then chdir(DIR) (with early-fork and early-exec, chdir(DIR)
 * first, before any allocation, then site_before);
 * fork: the child calls site_child 300 x 32 bytes, the parent site_after 200 x 48 bytes and
 *       prints "child PID";
 * exec: execv(PROG) (exec_second: site_after_exec 900 x 30 bytes).
 * Usage: chdir_children DIR [early-]fork | chdir_children DIR [early-]exec PROG */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[2];
    bool early = strncmp(mode, "early-", 6) == 0;
    if (early && chdir(argv[1]) != 0)
        return 3;
    mode += early ? 6 : 0;
    site_before(100);
    if (!early && chdir(argv[1]) != 0)
        return 3;
    if (strcmp(mode, "exec") == 0) {
        if (argc != 4)
            return 2;
        char *args[] = {argv[3], NULL};
        execv(argv[3], args);
        return 4;
    }
    pid_t pid = fork();
    if (pid < 0)
        return 5;
    if (pid == 0) {
        site_child(300);
        _exit(0);
    }
    site_after(200);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return 6;
    printf("child %d\n", (int)pid);
    return 0;
}
