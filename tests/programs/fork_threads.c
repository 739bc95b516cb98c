/* Forks children while other threads keep the loader busy: with argument "iterate" they
 * call dl_iterate_phdr in a loop, with "dlopen" they dlopen and dlclose a library. glibc
 * does not reset, in the child, the loader lock those take, so a child that asks the
 * loader anything while a thread of the parent held it waits for ever. Each child calls
 * site_child 100 times (malloc, 24 bytes) and _exits; the parent gives each child 10 s.
 * Prints "children N hung H". For test_fork_children_of_a_threaded_program_never_hang. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SITE __attribute__((noinline, noclone))
#define CHILDREN 40

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

SITE void site_child(void)
{
    for (int i = 0; i < 100; i++)
        release(malloc(24));
}

static volatile int stop;
static int use_dlopen;

static int count_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info, (void)size;
    ++*(int *)arg;
    return 0;
}

static void *busy_loader(void *arg)
{
    (void)arg;
    while (!stop) {
        if (use_dlopen) {
            void *h = dlopen("libanl.so.1", RTLD_NOW | RTLD_LOCAL);
            if (h)
                dlclose(h);
        } else {
            int n = 0;
            dl_iterate_phdr(count_module, &n);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    use_dlopen = argc > 1 && strcmp(argv[1], "dlopen") == 0;
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, busy_loader, NULL) != 0)
            return 2;
    int hung = 0;
    for (int c = 0; c < CHILDREN; c++) {
        pid_t pid = fork();
        if (pid < 0)
            return 3;
        if (pid == 0) {
            site_child();
            _exit(0);
        }
        int status = 0, waited = 0;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (++waited > 1000) { /* 10 s */
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                hung++;
                break;
            }
            nanosleep(&(struct timespec){0, 10000000}, NULL);
        }
    }
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("children %d hung %d\n", CHILDREN, hung);
    return 0;
}
