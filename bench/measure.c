/* Runs one benchmark command and writes what it cost: "user_s sys_s wall_s maxrss_kib status".
 * Usage: measure RESULT_FILE PROG [ARG]...
 * Why not from Python directly: a child forked from the Python driver starts with the
 * driver's ~16 MiB resident, and Linux keeps that in the child's peak RSS across exec. This
 * small launcher forks the program from a ~1 MiB process instead. MEASURE_LD_PRELOAD, if set,
 * becomes the program's LD_PRELOAD, so the launcher itself is never profiled. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double measure_seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: measure RESULT_FILE PROG [ARG]...\n");
        return 2;
    }
    const char *preload = getenv("MEASURE_LD_PRELOAD");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("measure: fork");
        return 1;
    }
    if (pid == 0) {
        if (preload && setenv("LD_PRELOAD", preload, 1) != 0)
            _exit(127);
        unsetenv("MEASURE_LD_PRELOAD");
        execvp(argv[2], argv + 2);
        fprintf(stderr, "measure: cannot run %s: %s\n", argv[2], strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("measure: wait4");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    /* The shell's convention: 128 + signal number for a program killed by a signal. */
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *out = fopen(argv[1], "w");
    if (!out || fprintf(out, "%.6f %.6f %.6f %ld %d\n", measure_seconds(ru.ru_utime),
                        measure_seconds(ru.ru_stime), wall, ru.ru_maxrss, code) < 0 ||
        fclose(out) != 0) {
        perror("measure: cannot write the result");
        return 1;
    }
    return 0;
}
