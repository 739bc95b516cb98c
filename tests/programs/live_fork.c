/* A child that frees the blocks it inherited, for test_live_fork_child_frees_leave_the_parent:
 * site_inherited makes 1,000 x 40 bytes and keeps them; then a child is made by argv[1]:
 * "fork" (fork(), whose atfork handlers run), "_Fork" (glibc's _Fork(), which runs none) or
 * "clone" (the raw system call, likewise); the child frees all 1,000 (its own copies) and
 * _exits; the parent waits for it and exits with the blocks still allocated. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

void *volatile blocks[1000];

SITE void site_inherited(void)
{
    for (int i = 0; i < 1000; i++)
        blocks[i] = malloc(40);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    site_inherited();
    pid_t pid;
    if (strcmp(argv[1], "fork") == 0)
        pid = fork();
    else if (strcmp(argv[1], "_Fork") == 0)
        pid = _Fork();
    else if (strcmp(argv[1], "clone") == 0)
        pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    else
        return 2;
    if (pid < 0)
        return 1;
    if (pid == 0) {
        for (int i = 0; i < 1000; i++)
            free(blocks[i]);
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    return 0;
}
