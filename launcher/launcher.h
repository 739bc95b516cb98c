/* malloc_freq, the launcher: runs a program with the preload library, every process of the
 * run profiled into one run directory, and prints where the profile is and its top sites.
 *
 *   malloc_freq.c  options, the program's process: fork, exec, signals, wait, exit status
 *   setup.c        what the program is given: the library, its environment, Python's note
 *   run_dir.c      the run directory, run.txt (its format is in README.md), the summary */
#ifndef MF_LAUNCHER_H
#define MF_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MF_LIB_NAME "libmalloc_freq.so"
#define MF_PRINT_NAME "mf_print"

struct mf_launch {
    /* The command line. */
    const char *output;  /* -o DIR, or NULL */
    const char *sample;  /* -s N: MALLOC_FREQ_SAMPLE, or NULL */
    const char *depth;   /* --depth N: MALLOC_FREQ_DEPTH, or NULL */
    const char *unwind;  /* --unwind fp|libunwind: MALLOC_FREQ_UNWIND, or NULL */
    bool quiet;          /* -q */
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
};

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
void mf_summary(struct mf_launch *l, int status);

/* malloc_freq.c */
extern volatile pid_t mf_current_child; /* signals are forwarded to it; 0: none */
__attribute__((format(printf, 1, 2))) void mf_msg(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) void mf_die(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) void mf_usage_error(const char *fmt, ...);
void *mf_xmalloc(size_t n);
char *mf_xstrdup(const char *s);
__attribute__((format(printf, 1, 2))) char *mf_xasprintf(const char *fmt, ...);
void mf_restore_signals_in_child(void);
int mf_wait_child(pid_t pid);
const char *mf_signal_name(int sig);
char *mf_shell_quote(char *const *argv);

#endif
