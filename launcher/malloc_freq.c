/* malloc_freq [options] [--] PROGRAM [ARGS...]
 *
 * Runs PROGRAM with libmalloc_freq.so preloaded and MALLOC_FREQ_DIR pointing at one run
 * directory, so that every process of the run (children, exec'd images) writes its
 * malloc_freq.<pid>/ there; forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to it; waits; prints
 * where the profile is and its top sites (mf_print); exits with PROGRAM's status, or dies
 * of the signal that ended it, as time, env and timeout do.
 *
 * The program's process is forked first and held on a pipe until its run directory, named
 * after its pid, exists with run.txt in it: only then is it given the directory and exec'd.
 * What the launcher changes for itself (signal handlers, a blocked mask, SIGPIPE ignored) is
 * put back in the child before exec, so the program starts as it would from the shell. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"

/* ---- messages and memory ------------------------------------------------------------ */

void mf_msg(const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "malloc_freq: %s\n", line);
}

void mf_die(const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "malloc_freq: %s\n", line);
    exit(2);
}

void mf_usage_error(const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "malloc_freq: %s (see malloc_freq --help)\n", line);
    exit(2);
}

void *mf_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        mf_die("out of memory");
    return p;
}

char *mf_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        mf_die("out of memory");
    return p;
}

char *mf_xasprintf(const char *fmt, ...)
{
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        mf_die("out of memory");
    return s;
}

/* The command line as a shell would take it back: words with anything but [A-Za-z0-9_@%+=:,./-]
 * in single quotes. */
char *mf_shell_quote(char *const *argv)
{
    size_t n = 1;
    for (char *const *a = argv; *a; a++)
        n += 4 * strlen(*a) + 3;
    char *out = mf_xmalloc(n), *p = out;
    for (char *const *a = argv; *a; a++) {
        if (a != argv)
            *p++ = ' ';
        const char *s = *a;
        bool plain = *s != '\0';
        for (const char *c = s; *c; c++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
                        *c))
                plain = false;
        if (plain) {
            p = stpcpy(p, s);
            continue;
        }
        *p++ = '\'';
        for (const char *c = s; *c; c++)
            if (*c == '\'')
                p = stpcpy(p, "'\\''");
            else
                *p++ = *c;
        *p++ = '\'';
    }
    *p = '\0';
    return out;
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

/* ---- options ------------------------------------------------------------------------- */

static void mf_usage(FILE *out)
{
    fputs("usage: malloc_freq [options] [--] PROGRAM [ARGS...]\n"
          "Runs PROGRAM with the malloc_freq profiler preloaded (libmalloc_freq.so), every\n"
          "process it starts profiled into one run directory, then prints where the profile\n"
          "is and the top allocation sites (mf_print). Exits with PROGRAM's exit status,\n"
          "or dies of the signal that ended it.\n"
          "\n"
          "  -o, --output DIR       the run directory (default: malloc_freq.<pid> in\n"
          "                         $MALLOC_FREQ_DIR or the working directory, <pid> PROGRAM's)\n"
          "  -s, --sample N         record the stack of 1 call in N, 1..1000000000; 1 records\n"
          "                         every call (MALLOC_FREQ_SAMPLE; default: adaptive)\n"
          "      --depth N          frames kept per stack, 1..512 (MALLOC_FREQ_DEPTH; 64)\n"
          "      --unwind fp|libunwind  how stacks are walked (MALLOC_FREQ_UNWIND; libunwind)\n"
          "  -q, --quiet            print nothing of our own unless something fails\n"
          "  -h, --help             this text\n",
          out);
}

/* A decimal number in [lo, hi], or a one-line error and exit 2. */
static const char *mf_check_number(const char *opt, const char *what, const char *s,
                                   unsigned long long lo, unsigned long long hi)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno || v < lo || v > hi)
        mf_usage_error("%s wants %s from %llu to %llu, not '%s'", opt, what, lo, hi, s);
    return s;
}

static void mf_parse_options(struct mf_launch *l, int argc, char **argv)
{
    enum { OPT_DEPTH = 256, OPT_UNWIND };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"sample", required_argument, NULL, 's'},
        {"depth", required_argument, NULL, OPT_DEPTH},
        {"unwind", required_argument, NULL, OPT_UNWIND},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own one-line messages */
    int c;
    /* '+': options end at PROGRAM, whose own options are its own. */
    while ((c = getopt_long(argc, argv, "+:o:s:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (!*optarg)
                mf_usage_error("-o needs a directory");
            l->output = optarg;
            break;
        case 's':
            l->sample = mf_check_number("-s", "a number of calls", optarg, 1, 1000000000);
            break;
        case OPT_DEPTH:
            l->depth = mf_check_number("--depth", "a number of frames", optarg, 1, 512);
            break;
        case OPT_UNWIND:
            if (strcmp(optarg, "fp") != 0 && strcmp(optarg, "libunwind") != 0)
                mf_usage_error("--unwind is fp or libunwind, not '%s'", optarg);
            l->unwind = optarg;
            break;
        case 'q':
            l->quiet = true;
            break;
        case 'h':
            mf_usage(stdout);
            exit(0);
        case ':':
            mf_usage_error("%s needs a value", argv[optind - 1]);
        default:
            if (optopt && optopt < 256)
                mf_usage_error("unknown option '-%c'", optopt);
            mf_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        mf_usage_error("no program given: malloc_freq [options] -- PROGRAM [ARGS...]");
    if (!argv[optind][0])
        mf_usage_error("the program's name is empty");
    l->argv = argv + optind;
}

/* ---- signals ------------------------------------------------------------------------- */

volatile pid_t mf_current_child;

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

static void mf_unblock_signals(void)
{
    sigprocmask(SIG_SETMASK, &mf_old_mask, NULL);
}

void mf_restore_signals_in_child(void)
{
    for (size_t i = 0; i < MF_NFORWARDED; i++)
        sigaction(mf_forwarded[i], &mf_old_actions[i], NULL);
    sigaction(SIGPIPE, &mf_old_pipe, NULL);
    sigprocmask(SIG_SETMASK, &mf_old_mask, NULL);
}

/* Ends the launcher by the signal that ended the program, as time, env and timeout do: a
 * shell that sees its child interrupted stops too (a `while` loop over `malloc_freq -- prog`
 * ends at ^C, which it would not for an exit status of 130). The core is the program's to
 * dump, not ours. 128+sig if the signal cannot be had (core dumps cannot be turned off). */
static void mf_die_of(int sig)
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

/* ---- the program's process ----------------------------------------------------------- */

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

/* In the child: wait for the run directory's name (EOF without one: the launcher could not
 * make it), put it in the environment, exec. An exec that fails sends errno back. */
static void mf_child(struct mf_launch *l, int go_fd, int err_fd)
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
    l->envp[l->dir_slot] = mf_xasprintf("MALLOC_FREQ_DIR=%s", dir);
    mf_restore_signals_in_child();
    execvpe(l->argv[0], l->argv, l->envp);
    int e = errno;
    mf_write_all(err_fd, &e, sizeof e);
    _exit(127);
}

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

int main(int argc, char **argv)
{
    struct mf_launch l = {0};
    mf_parse_options(&l, argc, argv);
    mf_find_library(&l);
    mf_find_program(&l);
    mf_detect_python(&l);
    mf_build_env(&l);
    mf_prepare_dirs(&l);

    if (l.python && !l.quiet) {
        const char *pm = getenv("PYTHONMALLOC");
        if (l.set_pythonmalloc)
            mf_msg("%s is Python: PYTHONMALLOC=malloc, so that its object allocations reach "
                   "malloc and are counted",
                   l.python);
        else
            mf_msg("%s is Python: PYTHONMALLOC=%s kept as you set it (objects served by "
                   "pymalloc's pools are not malloc calls)",
                   l.python, pm);
    }

    struct timespec start;
    clock_gettime(CLOCK_REALTIME, &start);
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
        mf_child(&l, go[0], err[1]);
    }
    close(go[0]);
    close(err[1]);
    l.pid = pid;
    mf_current_child = pid;
    mf_unblock_signals();

    /* The run directory and run.txt, then the child may go. */
    if (!mf_make_run_dir(&l) || !mf_write_run_file(&l, &start)) {
        close(go[1]);
        mf_wait_child(pid);
        mf_remove_run_dir(&l);
        return 2;
    }
    mf_write_all(go[1], l.run_dir, strlen(l.run_dir));
    close(go[1]);
    int exec_errno;
    ssize_t got;
    while ((got = read(err[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    close(err[0]);
    if (got == (ssize_t)sizeof exec_errno) {
        mf_wait_child(pid);
        mf_remove_run_dir(&l);
        bool found = exec_errno != ENOENT;
        if (!found && !strchr(l.argv[0], '/'))
            mf_msg("%s: command not found", l.argv[0]);
        else
            mf_msg("cannot run %s: %s", l.argv[0], strerror(exec_errno));
        return found ? 126 : 127;
    }

    int status = mf_wait_child(pid);
    mf_append_run_end(&l, status);
    if (!l.quiet)
        mf_summary(&l, status);
    if (WIFSIGNALED(status))
        mf_die_of(WTERMSIG(status));
    return WEXITSTATUS(status);
}
