/* The launcher's child processes: the program (forked first, held on a pipe until its run
 * directory and run.txt exist, then exec'd) and mf_print for the summary; the signals
 * forwarded to whichever runs, waiting for it, and the launcher's own end by the signal that
 * ended the program. What the launcher changes for itself (signal handlers, a blocked mask,
 * SIGPIPE ignored) is put back in a child before exec, so that the program starts as it
 * would from the shell. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher.h"

/* ---- signals ------------------------------------------------------------------------- */

static volatile pid_t mf_current_child; /* signals are forwarded to it; 0: none */

static const int mf_forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define MF_NFORWARDED (sizeof mf_forwarded / sizeof *mf_forwarded)
static struct sigaction mf_old_actions[MF_NFORWARDED], mf_old_pipe;
static sigset_t mf_old_mask;

static void mf_forward(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    int saved = errno;
    pid_t pid = mf_current_child;
    /* A signal the kernel sent (the terminal's ^C, ^\, hang-up) went to the whole
     * foreground process group, the child included when it is still in ours: sending it
     * again would deliver it twice. Signals a process sent (kill) are the launcher's own. */
    if (pid > 0 && !(si && si->si_code == SI_KERNEL && getpgid(pid) == getpgrp()))
        kill(pid, sig);
    errno = saved;
}

/* Handlers for the forwarded signals (those the launcher was not started ignoring: their
 * children ignore them too), SIGPIPE ignored, so that a closed stderr cannot take the
 * program's exit status away; all of them blocked until a child is there to forward to. */
static void mf_setup_signals(void)
{
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < MF_NFORWARDED; i++)
        sigaddset(&block, mf_forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &mf_old_mask);
    struct sigaction sa = {.sa_sigaction = mf_forward, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < MF_NFORWARDED; i++) {
        sigaction(mf_forwarded[i], NULL, &mf_old_actions[i]);
        if (mf_old_actions[i].sa_handler != SIG_IGN)
            sigaction(mf_forwarded[i], &sa, NULL);
    }
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, &mf_old_pipe);
}

static void mf_restore_signals_in_child(void)
{
    for (size_t i = 0; i < MF_NFORWARDED; i++)
        sigaction(mf_forwarded[i], &mf_old_actions[i], NULL);
    sigaction(SIGPIPE, &mf_old_pipe, NULL);
    sigprocmask(SIG_SETMASK, &mf_old_mask, NULL);
}

const char *mf_signal_name(int sig)
{
    static char name[32];
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(name, sizeof name, "SIG%s", abbrev);
    else
        snprintf(name, sizeof name, "signal %d", sig);
    return name;
}

/* Ends the launcher by the signal that ended the program, as time, env and timeout do: a
 * shell that sees its child interrupted stops too (a `while` loop over `malloc_freq -- prog`
 * ends at ^C, which it would not for an exit status of 130). The core is the program's to
 * dump, not ours. 128+sig if the signal cannot be had (core dumps cannot be turned off). */
void mf_die_of(int sig)
{
    fflush(NULL);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    if (prctl(PR_SET_DUMPABLE, 0) == 0) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigaction(sig, &dfl, NULL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
    }
    exit(128 + sig);
}

/* ---- waiting ------------------------------------------------------------------------- */

/* Waits for the child without reaping it, so that no signal is forwarded to its pid once
 * another process may have it; then reaps it. Returns the wait status. */
int mf_wait_child(pid_t pid)
{
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) != 0)
        if (errno != EINTR)
            mf_die("cannot wait for process %d: %s", (int)pid, strerror(errno));
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    mf_current_child = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            mf_die("cannot wait for process %d: %s", (int)pid, strerror(errno));
    return status;
}

/* ---- the program --------------------------------------------------------------------- */

static void mf_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* --watch: the program's output file, made empty (0600) before it starts. */
static bool mf_make_output_file(struct mf_launch *l)
{
    if (!l->watch)
        return true;
    l->output_file = mf_xasprintf("%s/%s", l->run_dir, MF_OUTPUT_NAME);
    int fd = open(l->output_file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        mf_msg("cannot make %s: %s", l->output_file, strerror(errno));
        return false;
    }
    close(fd);
    return true;
}

/* In the child: wait for the run directory's name (EOF without one: the launcher could not
 * make it), put it in the environment, exec. An exec that fails sends errno back. */
static void mf_program_child(struct mf_launch *l, int go_fd, int err_fd)
{
    char dir[8192];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(go_fd, dir + n, sizeof dir - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (n == 0)
        _exit(127);
    dir[n] = '\0';
    close(go_fd);
    if (l->watch) {
        /* The view has the terminal: the program writes to the run directory's output
         * file (made by the launcher), and reads no keys meant for the view. */
        char *path = mf_xasprintf("%s/%s", dir, MF_OUTPUT_NAME);
        int out = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
        if (out < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) {
            int e = errno;
            mf_write_all(err_fd, &e, sizeof e);
            _exit(127);
        }
        int null = isatty(0) ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
        if (null >= 0)
            dup2(null, 0);
    }
    l->envp[l->dir_slot] = mf_xasprintf("MALLOC_FREQ_DIR=%s", dir);
    mf_restore_signals_in_child();
    execvpe(l->argv[0], l->argv, l->envp);
    int e = errno;
    mf_write_all(err_fd, &e, sizeof e);
    _exit(127);
}

int mf_run_program(struct mf_launch *l, const struct timespec *start, int *status)
{
    mf_setup_signals();
    int go[2], err[2];
    if (pipe2(go, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
        mf_die("cannot make a pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        mf_die("cannot fork: %s", strerror(errno));
    if (pid == 0) {
        close(go[1]);
        close(err[0]);
        mf_program_child(l, go[0], err[1]);
    }
    close(go[0]);
    close(err[1]);
    l->pid = pid;
    mf_current_child = pid;
    sigprocmask(SIG_SETMASK, &mf_old_mask, NULL); /* a child to forward to: signals may come */

    /* The run directory and run.txt, then the child may go. */
    if (!mf_make_run_dir(l) || !mf_write_run_file(l, start) || !mf_make_output_file(l)) {
        close(go[1]);
        mf_wait_child(pid);
        mf_remove_run_dir(l);
        return 2;
    }
    mf_write_all(go[1], l->run_dir, strlen(l->run_dir));
    close(go[1]);
    int exec_errno;
    ssize_t got;
    while ((got = read(err[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    close(err[0]);
    if (got == (ssize_t)sizeof exec_errno) {
        mf_wait_child(pid);
        mf_remove_run_dir(l);
        bool found = exec_errno != ENOENT;
        if (!found && !strchr(l->argv[0], '/'))
            mf_msg("%s: command not found", l->argv[0]);
        else
            mf_msg("cannot run %s: %s", l->argv[0], strerror(exec_errno));
        return found ? 126 : 127;
    }
    /* The program runs (its exec succeeded): its timeline from now; what it did before
     * the recorder's first snapshot is that snapshot's first point. */
    if (!l->no_timeline)
        mf_start_recorder(l);
    *status = l->watch ? mf_wait_watched(l, pid) : mf_wait_child(pid);
    mf_stop_recorder(l); /* its last snapshot, while the summary is made */
    return -1;
}

/* ---- the timeline's recorder --------------------------------------------------------- */

void mf_start_recorder(struct mf_launch *l)
{
    char *path = mf_xasprintf("%s/%s", l->self_dir, MF_PRINT_NAME);
    if (access(path, X_OK) != 0) {
        if (!l->quiet)
            mf_msg("no %s beside the launcher (%s): no timeline recorded", MF_PRINT_NAME, path);
        free(path);
        return;
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        mf_msg("cannot fork to record the timeline: %s", strerror(errno));
    } else if (pid == 0) {
        /* If the launcher dies first, the recorder takes its last snapshot then. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(0);
        setpgid(0, 0);
        char *others = mf_other_preloads(getenv("LD_PRELOAD"));
        if (*others)
            setenv("LD_PRELOAD", others, 1);
        else
            unsetenv("LD_PRELOAD");
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        mf_restore_signals_in_child();
        /* Held until mf_print's handlers are there: a stop asked at once is its last
         * snapshot, not its death. */
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGHUP);
        sigprocmask(SIG_BLOCK, &stop, NULL);
        char *argv[] = {path, "--record", l->run_dir, NULL};
        execv(path, argv);
        _exit(127);
    } else {
        l->recorder = pid;
    }
    free(path);
}

void mf_stop_recorder(struct mf_launch *l)
{
    if (l->recorder)
        kill(l->recorder, SIGTERM);
}

void mf_wait_recorder(struct mf_launch *l)
{
    if (!l->recorder)
        return;
    for (int ms = 0; ms < MF_RECORDER_WAIT_MS; ms += 5) {
        pid_t w = waitpid(l->recorder, NULL, WNOHANG);
        if (w == l->recorder || (w < 0 && errno != EINTR))
            break;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    l->recorder = 0;
}

/* ---- a helper's output --------------------------------------------------------------- */

/* In a child: runs path unprofiled, even if the user's LD_PRELOAD names the library, with
 * the signals the program would start with. */
static void mf_exec_unprofiled(const char *path, char *const argv[])
{
    char *others = mf_other_preloads(getenv("LD_PRELOAD"));
    if (*others)
        setenv("LD_PRELOAD", others, 1);
    else
        unsetenv("LD_PRELOAD");
    mf_restore_signals_in_child();
    execv(path, argv);
    mf_msg("cannot run %s: %s", path, strerror(errno));
    _exit(127);
}

int mf_wait_watched(struct mf_launch *l, pid_t pid)
{
    char *path = mf_xasprintf("%s/%s", l->self_dir, MF_PRINT_NAME);
    char *argv[] = {(char *)MF_PRINT_NAME, (char *)"--watch", (char *)"--interval",
                    (char *)(l->interval ? l->interval : "1"), (char *)"--", l->run_dir, NULL};
    fflush(NULL);
    pid_t view = fork();
    if (view < 0)
        mf_msg("cannot fork to run %s: %s", path, strerror(errno));
    if (view == 0)
        mf_exec_unprofiled(path, argv);
    free(path);
    /* The first of the two to end: the view (the user quit it) or the program. Signals go
     * to the program as before (mf_current_child); the terminal's reach both. */
    while (view > 0) {
        siginfo_t si;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) != 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (si.si_pid == pid)
            break;
        if (si.si_pid != view)
            continue;
        int st;
        while (waitpid(view, &st, 0) < 0 && errno == EINTR)
            ;
        view = -1;
        if (!l->quiet)
            mf_msg("the view has ended; %s runs on (pid %d), writing to %s", l->argv[0],
                   (int)pid, l->output_file);
    }
    int status = mf_wait_child(pid);
    if (view > 0) {
        kill(view, SIGTERM);
        int st;
        while (waitpid(view, &st, 0) < 0 && errno == EINTR)
            ;
    }
    return status;
}

pid_t mf_start_reader(const char *path, char *const argv[], bool quiet, FILE **out)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        mf_msg("cannot make a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        mf_msg("cannot fork to run %s: %s", path, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        int null = quiet ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
        if (null >= 0)
            dup2(null, 2);
        mf_exec_unprofiled(path, argv);
    }
    mf_current_child = pid;
    close(fds[1]);
    *out = fdopen(fds[0], "r");
    if (!*out) {
        int e = errno;
        close(fds[0]);
        mf_wait_child(pid);
        mf_msg("cannot read what %s writes: %s", path, strerror(e));
        return -1;
    }
    return pid;
}
