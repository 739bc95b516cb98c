/* A request: the command line as data (request.c), checked against the option
 * compatibility rules and the registry of reports, then run (run.c). */
#ifndef MF_REQUEST_H
#define MF_REQUEST_H

#include <regex.h>
#include <stdbool.h>

#include "report.h"
#include "transform.h"

struct mf_request {
    const char **dirs, **base, **programs, **debug_dirs;
    int ndirs, nbase, nprograms, ndebug_dirs;
    const char *sysroot;
    const char *format;       /* the report's format ("tree" unless given) */
    const char *format_asked; /* -f's value, NULL if not given */
    const char *save;         /* --save FILE */
    bool live, sizes, tune, by_program, site_depth_given;
    bool uncalibrated; /* --uncalibrated: estimates as recorded */
    bool watch;               /* --watch: the view of running programs (watch.c) */
    double interval;          /* --interval: its refresh, in seconds (1) */
    bool timeline, record; /* --timeline, --record */
    int width;                /* --width, -1 if not given */
    bool offline;             /* --offline: no debuginfod */
    unsigned debuginfod_timeout; /* --debuginfod-timeout, seconds */
    struct mf_transform xf;   /* --no-fold, --fold, --hide, --full-stacks */
    struct mf_check check;    /* --check's rules */
    struct mf_report_options o;
};

/* Parses argv into r. Returns -1 to go on, or the exit status (--help: 0; a --debug-dir or
 * --sysroot that is not a directory: 2). A malformed option exits with status 2 after one
 * line on stderr. */
int mf_request_parse(struct mf_request *r, int argc, char **argv);
/* Applies the option compatibility rules (exit status 2 and one line on stderr for the first
 * broken) and completes r: --save's format, the width of a terminal. */
void mf_request_check(struct mf_request *r);
/* The kind of report r asks for, which the registry serves (report.h). */
enum mf_kind mf_request_kind(const struct mf_request *r);
/* Reads, models and reports as r asks; returns the exit status. */
int mf_run(const struct mf_request *r);

/* One line on stderr, "mf_print: " fmt " (see mf_print --help)", and exit 2. */
void mf_usage_error(const char *fmt, ...) __attribute__((noreturn));

#endif
