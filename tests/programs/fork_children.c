/* A parent and three children with known counts at different sites, for
 * test_fork_children_exact (fork) and test_raw_fork_children_exact (_Fork, which skips the
 * atfork handlers). Child k (0..2) calls site_child (k+1)*100 times, 32 bytes each; the
 * parent calls site_parent 500 times before forking and 500 after, 64 bytes each.
 * Prints "child K PID" per child, with write(): no stdio buffer to duplicate.
 * Usage: fork_children fork|_Fork */
#define _GNU_SOURCE
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

SITE void site_parent(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(64));
}

SITE void site_child(int n)
{
    for (int i = 0; i < n; i++)
        release(malloc(32));
}

static void say(const char *line)
{
    if (write(1, line, strlen(line)) < 0)
        _exit(3);
}

int main(int argc, char **argv)
{
    int raw = argc > 1 && strcmp(argv[1], "_Fork") == 0;
    site_parent(500);
    pid_t pids[3];
    for (int k = 0; k < 3; k++) {
        pid_t pid = raw ? _Fork() : fork();
        if (pid < 0)
            return 2;
        if (pid == 0) {
            site_child((k + 1) * 100);
            _exit(0);
        }
        pids[k] = pid;
    }
    site_parent(500);
    int failed = 0;
    for (int k = 0; k < 3; k++) {
        int status;
        if (waitpid(pids[k], &status, 0) != pids[k] || !WIFEXITED(status) || WEXITSTATUS(status))
            failed = 1;
        char line[64];
        snprintf(line, sizeof line, "child %d %d\n", k, (int)pids[k]);
        say(line);
    }
    return failed;
}
