/* Signals under the launcher (tests/launcher/test_launcher.py). Allocates a little, then:
 *   signal_wait catch      on SIGINT, SIGTERM, SIGHUP or SIGQUIT prints "caught SIGxxx" and
 *                          exits 64+signal
 *   signal_wait default    waits with the default dispositions: a signal ends it
 *   signal_wait self       raises SIGTERM (dies of it)
 *   signal_wait count      counts SIGINTs: 300 ms after the first, prints "SIGINT N", exits 0;
 *                          it spins meanwhile, so that a signal reaches its handler at once
 *                          and a second one sent a little later counts apart (two signals
 *                          that are pending together count as one); after 10 s without
 *                          one it prints "SIGINT 0"
 *   signal_wait count-alone  the same in a process group of its own, out of the terminal's
 *                          foreground group
 *   signal_wait show       prints the dispositions of SIGINT, SIGTERM, SIGHUP, SIGQUIT and
 *                          SIGPIPE and which of them are blocked, and exits
 * The waiting modes print "ready" first, with write(): the test signals after reading it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void say(const char *s)
{
    if (write(1, s, strlen(s)) < 0)
        _exit(99);
}

static void caught(int sig)
{
    char line[64];
    snprintf(line, sizeof line, "caught SIG%s\n", sigabbrev_np(sig));
    say(line);
    _exit(64 + sig);
}

static volatile sig_atomic_t sigints;

static void count(int sig)
{
    (void)sig;
    sigints++;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (int i = 0; i < 100; i++)
        free(malloc(16 + (size_t)i));
    if (strcmp(mode, "show") == 0) {
        sigset_t blocked;
        sigprocmask(SIG_BLOCK, NULL, &blocked);
        for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
            struct sigaction sa;
            sigaction(sigs[i], NULL, &sa);
            printf("SIG%s %s%s\n", sigabbrev_np(sigs[i]),
                   sa.sa_handler == SIG_IGN ? "ignored" : sa.sa_handler == SIG_DFL ? "default"
                                                                                   : "handled",
                   sigismember(&blocked, sigs[i]) ? " blocked" : "");
        }
        return 0;
    }
    if (strcmp(mode, "self") == 0) {
        raise(SIGTERM);
        return 1;
    }
    if (strcmp(mode, "catch") == 0) {
        for (int i = 0; i < 4; i++)
            signal(sigs[i], caught);
    } else if (strcmp(mode, "count") == 0 || strcmp(mode, "count-alone") == 0) {
        if (strcmp(mode, "count-alone") == 0 && setpgid(0, 0) != 0)
            return 3;
        struct sigaction sa = {.sa_handler = count};
        sigaction(SIGINT, &sa, NULL);
    } else if (strcmp(mode, "default") != 0) {
        say("usage: signal_wait catch|default|self|count|count-alone|show\n");
        return 2;
    }
    say("ready\n");
    if (strncmp(mode, "count", 5) == 0) {
        time_t end = time(NULL) + 10;
        while (!sigints && time(NULL) < end)
            ;
    } else {
        while (!sigints)
            pause();
    }
    struct timespec t = {0, 300 * 1000 * 1000};
    while (nanosleep(&t, &t) != 0)
        ;
    char line[32];
    snprintf(line, sizeof line, "SIGINT %d\n", (int)sigints);
    say(line);
    return 0;
}
