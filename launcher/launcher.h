/* malloc_freq, the launcher: runs a program with the preload library, every process of the
 * run profiled into one run directory, and prints where the profile is and its top sites.
 *
 *   main.c     the options, and the run from start to end
 *   child.c    the program's process and mf_print's: fork, exec, signals, wait
 *   setup.c    what the program is given: the library, its environment, Python's note
 *   run_dir.c  the run directory and run.txt
 *   scan.c     what the run's files hold and what they lack, read from their headers
 *   summary.c  the summary: where the profile is, mf_print's header, the top sites
 *   util.c     messages, memory, quoting for a shell, escaping for a terminal */
#ifndef MF_LAUNCHER_H
#define MF_LAUNCHER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#define MF_LIB_NAME "libmalloc_freq.so"
#define MF_PRINT_NAME "mf_print"

struct mf_launch {
    /* The command line. */
    const char *output;  /* -o DIR, or NULL */
    const char *sample;  /* -s N: MALLOC_FREQ_SAMPLE, or NULL */
    const char *depth;   /* --depth N: MALLOC_FREQ_DEPTH, or NULL */
    const char *unwind;  /* --unwind fp|libunwind: MALLOC_FREQ_UNWIND, or NULL */
    bool quiet;          /* -q */
    bool watch;          /* --watch: mf_print's live view while the program runs */
    const char *interval; /* --interval SECONDS, passed to it, or NULL */
    bool no_timeline;    /* --no-timeline, or MALLOC_FREQ_TIMELINE=0 */
    char *const *argv;   /* PROGRAM ARGS... */

    /* Found before the program starts. */
    char *self_dir;      /* the directory of /proc/self/exe */
    char *library;       /* absolute path of libmalloc_freq.so */
    char *program;       /* PROGRAM as execvp would find it, or NULL if it is nowhere */
    char *python;        /* why PROGRAM is Python ("python3", "#!/usr/bin/env python3"), or NULL */
    bool set_pythonmalloc; /* Python, and the user had no PYTHONMALLOC */
    char **envp;         /* the program's environment; its MALLOC_FREQ_DIR is filled in last */
    size_t first_set;    /* envp[first_set..] are what the launcher set, the rest the user's */
    size_t dir_slot;     /* index of MALLOC_FREQ_DIR=... in envp */

    /* The run. */
    char *base_dir;      /* absolute: where malloc_freq.<pid> is made, without -o */
    char *run_dir;       /* absolute */
    bool run_dir_made;   /* created by us (removed again if the program cannot be run) */
    pid_t pid;           /* the program's */
    char *output_file;   /* --watch: where the program's stdout and stderr go */
    pid_t recorder;      /* mf_print --record's, or 0 */
};

/* --watch: the program's standard output and error, in the run directory. */
#define MF_OUTPUT_NAME "output"

/* child.c */
/* Forks the program, makes the run directory and run.txt (run_dir.c), then lets it exec
 * and waits for it: -1 and its wait status in *status, or the launcher's exit status
 * when it could not be run (2, 126, 127), the reason said. */
int mf_run_program(struct mf_launch *l, const struct timespec *start, int *status);
/* Runs path with argv, its standard output read from *out (its standard error discarded if
 * quiet), unprofiled, signals forwarded to it until mf_wait_child; its pid, or -1 (said
 * why). */
/* The timeline's recorder: mf_print --record on the run directory, for the program's
 * lifetime, in a process group of its own (the terminal's ^C is the program's), its output
 * discarded; l->recorder is its pid, or 0 if it could not be started (said why). */
void mf_start_recorder(struct mf_launch *l);
/* The program ended: the recorder takes its last snapshot and ends (stop), while the
 * summary is made; then it is waited for (wait), at most MF_RECORDER_WAIT_MS, so that the
 * timeline is whole when the launcher exits (its last snapshot reads the run once, as the
 * summary does). */
#define MF_RECORDER_WAIT_MS 2000
void mf_stop_recorder(struct mf_launch *l);
void mf_wait_recorder(struct mf_launch *l);
pid_t mf_start_reader(const char *path, char *const argv[], bool quiet, FILE **out);
int mf_wait_child(pid_t pid);
/* --watch: mf_print --watch on the run directory, on the launcher's terminal, until the
 * program ends (then it is sent SIGTERM) or the user quits it (said, once the view is
 * gone); returns the program's wait status as mf_wait_child does. */
int mf_wait_watched(struct mf_launch *l, pid_t pid);
const char *mf_signal_name(int sig);
__attribute__((noreturn)) void mf_die_of(int sig);

/* setup.c */
void mf_find_library(struct mf_launch *l);
void mf_find_program(struct mf_launch *l);
void mf_detect_python(struct mf_launch *l);
void mf_build_env(struct mf_launch *l);
char *mf_other_preloads(const char *preload);

/* run_dir.c */
void mf_prepare_dirs(struct mf_launch *l);
bool mf_make_run_dir(struct mf_launch *l);
bool mf_write_run_file(struct mf_launch *l, const struct timespec *start);
void mf_append_run_end(struct mf_launch *l, int status);
void mf_remove_run_dir(struct mf_launch *l);
bool mf_is_process_dir_name(const char *name);

/* scan.c: what the summary must say before it shows totals. mf_print adds up the files there
 * are and calls them exact; a process whose files could not be made (a full disk, a quota,
 * RLIMIT_FSIZE) is not in them, and an image that ended without running its exit while
 * sampling left its last calls out of its totals. */
struct mf_scan {
    size_t dirs;       /* process directories, malloc_freq.<pid> */
    size_t images;     /* process images with a process file and a thread file */
    uint64_t calls;    /* the exact total of their thread files' headers */
    size_t nmissing;   /* process directories or images without data */
    size_t nunflushed; /* images whose totals may lack calls */
    size_t running;    /* their threads still running when they ended */
    char *missing, *unflushed; /* "process 12 (/bin/x), ..." */
    int room; /* ENOSPC, EDQUOT or EFBIG: no room for one more profile file now; 0 */
};
void mf_scan_run(const char *run_dir, struct mf_scan *s);

/* summary.c */
void mf_summary(struct mf_launch *l, int status);

/* util.c */
/* "malloc_freq: <fmt's text><tail>" on stderr. */
__attribute__((format(printf, 2, 0))) void mf_vmsg(const char *tail, const char *fmt, va_list ap);
/* The line offering the command argv: lead, argv quoted for a shell (mf_shell_quote), tail. */
void mf_msg_command(const char *lead, char *const *argv, const char *tail);
__attribute__((format(printf, 1, 2))) void mf_msg(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) void mf_die(const char *fmt, ...);
void *mf_xmalloc(size_t n);
void *mf_xrealloc(void *p, size_t n);
char *mf_xstrdup(const char *s);
__attribute__((format(printf, 1, 2))) char *mf_xasprintf(const char *fmt, ...);
char *mf_shell_quote(char *const *argv);

#endif
