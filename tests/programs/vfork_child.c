/* A vfork child that allocates before it execs or exits, as dash does for every command
 * (and so system(), popen() and every shell script): the child runs in the parent's memory
 * until then. The parent calls site_parent_before 300 times, then 5 times vforks a child
 * that calls site_vfork_child 3 times and then execs argv[1] (if given) or _exits, then
 * calls site_parent_after 700 times. For test_vfork_child_leaves_the_parent_whole. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_parent_before(void)
{
    for (int i = 0; i < 300; i++)
        release(malloc(16));
}

SITE void site_vfork_child(void)
{
    for (int i = 0; i < 3; i++)
        release(malloc(64));
}

SITE void site_parent_after(void)
{
    for (int i = 0; i < 700; i++)
        release(malloc(32));
}

int main(int argc, char **argv)
{
    site_parent_before();
    for (int c = 0; c < 5; c++) {
        pid_t pid = vfork();
        if (pid < 0)
            return 2;
        if (pid == 0) {
            site_vfork_child();
            if (argc > 1)
                execv(argv[1], argv + 1);
            _exit(0);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 3;
    }
    site_parent_after();
    printf("done\n");
    return 0;
}
