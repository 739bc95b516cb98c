/* Forks from a signal handler, for test_fork_from_a_signal_handler_mid_sample: an interval
 * timer interrupts a loop of allocation calls every millisecond, often inside the
 * profiler's slow path (at MALLOC_FREQ_SAMPLE=1 most of the loop's time is there), and the
 * handler forks; the child returns from the handler into whatever it interrupted, makes
 * 100 more calls of the loop and exits. Prints "forks N, children failed M"; exits 0 when
 * every child exited 0. Usage: fork_in_handler FORKS */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t forks, in_child, wanted;

static void on_alarm(int sig)
{
    (void)sig;
    if (in_child || forks >= wanted)
        return;
    pid_t pid = fork();
    if (pid == 0)
        in_child = 1;
    else if (pid > 0)
        forks++;
}

__attribute__((noipa)) void release(void *p)
{
    free(p);
}

__attribute__((noinline)) void site_loop(void)
{
    release(malloc(40));
}

int main(int argc, char **argv)
{
    wanted = argc == 2 ? atoi(argv[1]) : 0;
    if (wanted < 1)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (long left = -1; left != 0;) {
        site_loop();
        if (in_child && left < 0)
            left = 100;
        if (left > 0)
            left--;
        if (!in_child && forks >= wanted)
            break;
    }
    if (in_child)
        _exit(0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    int failed = 0, status;
    pid_t pid;
    while ((pid = wait(&status)) > 0)
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            failed++;
    printf("forks %d, children failed %d\n", (int)forks, failed);
    return failed ? 1 : 0;
}
