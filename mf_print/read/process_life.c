/* How a process image ended (process_life.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "process_life.h"

/* When process pid started, in ns of CLOCK_REALTIME, and its state letter, from /proc; 0 if
 * unknown. */
static uint64_t mf_proc_start_ns(uint32_t pid, char *state)
{
    char path[64], buf[1024];
    unsigned long long btime = 0, ticks = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    while (fgets(buf, sizeof buf, f))
        if (sscanf(buf, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    if (!(f = fopen(path, "r")))
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *s = strrchr(buf, ')'); /* the command name may hold anything */
    long hz = sysconf(_SC_CLK_TCK);
    /* After the name: the state, 18 more fields, then the start time (field 22). */
    if (!s || hz <= 0 ||
        sscanf(s + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                      "%*d %llu", state, &ticks) != 2 || !btime)
        return 0;
    return btime * 1000000000ull + ticks * (1000000000ull / (unsigned long long)hz);
}

/* A later image of image i's pid has written its files. */
static bool mf_later_image(const struct mf_profile *p, uint32_t i)
{
    const struct mf_process *pr = &p->procs[i];
    for (uint32_t j = 0; j < p->nprocs; j++)
        if (j != i && p->procs[j].pid == pr->pid && p->procs[j].has_file &&
            p->procs[j].start_ns > pr->start_ns)
            return true;
    return false;
}

enum mf_life mf_life(const struct mf_profile *p, uint32_t i)
{
    const struct mf_process *pr = &p->procs[i];
    if (!pr->has_file)
        return MF_LIFE_UNKNOWN;
    if (pr->flags & MF_PROCESS_EXITED)
        return MF_LIFE_EXITED;
    if (mf_later_image(p, i))
        return MF_LIFE_EXECED;
    if (kill((pid_t)pr->pid, 0) != 0 && errno == ESRCH)
        return MF_LIFE_ENDED;
    char state = 0;
    uint64_t started = mf_proc_start_ns(pr->pid, &state);
    if (!started)
        return MF_LIFE_UNKNOWN;
    if (state == 'Z' || state == 'X')
        return MF_LIFE_ENDED; /* a zombie: ended, not yet waited for */
    /* The boot time in /proc/stat is in whole seconds: allow two. */
    if (started > pr->start_ns + 2000000000ull)
        return MF_LIFE_ENDED; /* the pid is another, later process's */
    char path[64], exe[sizeof pr->exe + 16];
    snprintf(path, sizeof path, "/proc/%u/exe", pr->pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n < 0)
        return MF_LIFE_RUNNING; /* not ours to look at: the start time has to do */
    exe[n] = '\0';
    char *deleted = strstr(exe, " (deleted)");
    if (deleted && deleted[10] == '\0')
        *deleted = '\0';
    return strcmp(exe, pr->exe) == 0 ? MF_LIFE_RUNNING : MF_LIFE_EXECED;
}

bool mf_runs(const struct mf_profile *p, uint32_t i, enum mf_life l)
{
    /* exec'd: a later image written answers for itself */
    return l == MF_LIFE_RUNNING || (l == MF_LIFE_EXECED && !mf_later_image(p, i) &&
                                    kill((pid_t)p->procs[i].pid, 0) == 0);
}

bool mf_process_running(const struct mf_profile *p, uint32_t i)
{
    return mf_runs(p, i, mf_life(p, i));
}

bool mf_all_ended(const struct mf_profile *p)
{
    for (uint32_t i = 0; i < p->nprocs; i++)
        if (mf_process_running(p, i))
            return false;
    return true;
}

const char *mf_life_word(enum mf_life l)
{
    return l == MF_LIFE_RUNNING ? "running" : l == MF_LIFE_EXECED ? "exec'd" : "ended";
}
