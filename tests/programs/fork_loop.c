/* A shell's pattern, for test_fork_leaves_the_parents_pages_alone: the parent allocates at
 * site_parent (6 calls of 48 bytes a round) and forks, ROUNDS times; a child of an odd round
 * allocates at site_child (10 calls of 24 bytes) and exits, one of an even round exits at
 * once. Prints the parent's own minor page faults over the rounds (getrusage, children not
 * included): what each fork costs it. Usage: fork_loop ROUNDS */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_parent(void)
{
    for (int i = 0; i < 6; i++)
        release(malloc(48));
}

SITE void site_child(void)
{
    for (int i = 0; i < 10; i++)
        release(malloc(24));
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

int main(int argc, char **argv)
{
    int rounds = argc == 2 ? atoi(argv[1]) : 0;
    if (rounds < 1)
        return 2;
    site_parent(); /* the profile and the first stacks, before the rounds are counted */
    long before = minor_faults();
    for (int r = 0; r < rounds; r++) {
        site_parent();
        pid_t pid = fork();
        if (pid < 0)
            return 2;
        if (pid == 0) {
            if (r % 2)
                site_child();
            _exit(0);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
            return 1;
    }
    printf("%ld\n", minor_faults() - before);
    return 0;
}
