/* The summary printed when the program has ended: where the profile is and whether its files
 * hold the program's count (scan.c), then mf_print's own report cut to the top allocation
 * sites (--depth 1 --top: its header with the totals, the sites in its tree's columns, its
 * notes on what it could not symbolize), and the command for the whole report. One run of
 * mf_print, its text passed through as mf_print wrote it: the launcher formats no number of
 * it, and its own lines show names as mf_print does (mf_vmsg). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../c_core/mf_format.h"
#include "launcher.h"

/* Every site of at least this share of the calls is shown, and never fewer than the largest
 * MF_SUMMARY_SITES: a compiler spreads its calls over thousands of sites, none of which
 * reaches 5 %. */
#define MF_SUMMARY_THRESHOLD "5"
#define MF_SUMMARY_SITES "5"

/* ---- running mf_print ---------------------------------------------------------------- */

struct mf_text {
    char *s;
    size_t len;
};

/* All of it, in memory: the default report without its tree is a screen or two. */
static bool mf_read_text(FILE *in, void *ctx)
{
    struct mf_text *t = ctx;
    FILE *f = open_memstream(&t->s, &t->len);
    if (!f)
        mf_die("out of memory");
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, f);
    if (fclose(f))
        mf_die("out of memory");
    return true;
}

/* Runs mf_print with args, its output read by `read`; false if either failed (said why).
 * Its messages go to stderr, unless `quiet` names what it was run for: a second run on the
 * same directory would repeat them. */
static bool mf_print_run(const char *path, char *const args[], const char *quiet,
                         bool (*read)(FILE *in, void *ctx), void *ctx)
{
    FILE *in;
    pid_t pid = mf_start_reader(path, args, quiet != NULL, &in);
    if (pid < 0)
        return false;
    bool ok = read(in, ctx);
    fclose(in);
    int st = mf_wait_child(pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return ok;
    if (WIFSIGNALED(st))
        mf_msg("%s %s", path, mf_signal_name(WTERMSIG(st)));
    else if (quiet)
        mf_msg("%s failed (exit status %d) to write %s", path, WEXITSTATUS(st), quiet);
    else
        mf_msg("%s failed (above)", path);
    return false;
}

/* `mf_print` if that is the one $PATH finds, else its path. */
static const char *mf_print_command(const char *path)
{
    char *found = NULL;
    const char *env = getenv("PATH");
    for (const char *p = env ? env : ""; *p;) {
        const char *colon = strchrnul(p, ':');
        char *cand = mf_xasprintf("%.*s/%s", (int)(colon - p), p, MF_PRINT_NAME);
        if (colon > p && access(cand, X_OK) == 0) {
            found = cand;
            break;
        }
        free(cand);
        p = *colon ? colon + 1 : colon;
    }
    bool same = false;
    if (found) {
        struct stat a, b;
        same = stat(found, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
               a.st_ino == b.st_ino;
        free(found);
    }
    return same ? MF_PRINT_NAME : path;
}

/* ---- the summary --------------------------------------------------------------------- */

/* mf_print's report of the run cut to its sites (--depth 1): its header with the totals
 * (left out when they are not the program's), the sites, and what could not be
 * symbolized. */
static void mf_report(const char *mf_print, const char *run_dir, bool header)
{
    /* mf_print writes into a pipe: the width is that of the summary's terminal (stderr), or
     * COLUMNS, as mf_print's own would be; else lines stay whole. */
    char width[16];
    struct winsize ws;
    const char *columns = getenv("COLUMNS");
    char *end;
    unsigned long cols = columns && *columns ? strtoul(columns, &end, 10) : 0;
    if (!cols || *end || cols > 100000)
        cols = isatty(STDERR_FILENO) && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
    snprintf(width, sizeof width, "%lu", cols && cols < 40 ? 40 : cols);
    char *args[] = {(char *)MF_PRINT_NAME, (char *)"--depth", (char *)"1", (char *)"--top",
                    (char *)MF_SUMMARY_SITES, (char *)"--threshold", (char *)MF_SUMMARY_THRESHOLD,
                    (char *)"--width", width, (char *)"--", (char *)run_dir, NULL};
    struct mf_text report = {0};
    if (mf_print_run(mf_print, args, NULL, mf_read_text, &report)) {
        const char *tree = header ? NULL : memmem(report.s, report.len, "\n\n", 2);
        const char *from = tree ? tree + 2 : report.s;
        fwrite(from, 1, report.len - (size_t)(from - report.s), stderr);
    }
    free(report.s);
}

void mf_summary(struct mf_launch *l, int status)
{
    if (WIFSIGNALED(status))
        mf_msg("%s was killed by %s%s", l->argv[0], mf_signal_name(WTERMSIG(status)),
               WCOREDUMP(status) ? " (core dumped)" : "");
    struct mf_scan s;
    mf_scan_run(l->run_dir, &s);
    size_t n = s.dirs;
    char *room = s.room == EFBIG ? mf_xasprintf(": RLIMIT_FSIZE is below a profile file's size "
                                                "(%s)", strerror(s.room))
                 : s.room ? mf_xasprintf(": its file system has no room for another profile "
                                         "file (%s)", strerror(s.room))
                          : "";
    if (n == 0) {
        if (s.room)
            mf_msg("no process wrote a profile into %s%s", l->run_dir, room);
        else
            mf_msg("no process wrote a profile into %s (a statically linked or set-user-ID "
                   "program cannot be profiled by preloading)",
                   l->run_dir);
        return;
    }
    if (!s.images) {
        mf_msg("no data in %s (none from %s)%s; the program's count is not known", l->run_dir,
               s.missing, room);
        return;
    }
    /* mf_print's header would give the totals of what was written as the program's: left
     * out when they are not, and the first line says why. */
    bool partial = s.nmissing || s.room || s.nunflushed;
    char *unflushed =
        s.nunflushed
            ? mf_xasprintf("; %zu process image%s did not run %s exit (ended by a signal, exec "
                           "or _exit, or still running) while sampling: up to %u calls of each "
                           "of the %zu thread%s then running can be missing from %s totals (%s)",
                           s.nunflushed, s.nunflushed == 1 ? "" : "s",
                           s.nunflushed == 1 ? "its" : "their", MF_FLUSH_CALLS - 1, s.running,
                           s.running == 1 ? "" : "s", s.nunflushed == 1 ? "its" : "their",
                           s.unflushed)
            : "";
    char *missing = s.nmissing ? mf_xasprintf(", incomplete (no data from %s)", s.missing)
                               : s.room ? ", perhaps incomplete" : "";
    mf_msg("profile of %zu process%s in %s%s%s%s%s", n, n == 1 ? "" : "es", l->run_dir, missing,
           room, unflushed,
           partial ? "; the program's own count is not known, the sites below are those of the "
                     "data written"
                   : "");
    char *mf_print = mf_xasprintf("%s/%s", l->self_dir, MF_PRINT_NAME);
    if (access(mf_print, X_OK) != 0) {
        mf_msg("no %s beside the launcher (%s) to summarize it", MF_PRINT_NAME, mf_print);
        return;
    }
    /* One call on the run directory: mf_print reads every process directory in it. */
    mf_report(mf_print, l->run_dir, !partial);
    fflush(stderr);
    char *const command[] = {(char *)mf_print_command(mf_print), l->run_dir, NULL};
    mf_msg_command("the sites' callers: ", command,
                   n > 1 ? " (a report per program: add --by program)" : "");
}
