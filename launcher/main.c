/* malloc_freq [options] [--] PROGRAM [ARGS...]
 *
 * Runs PROGRAM with libmalloc_freq.so preloaded and MALLOC_FREQ_DIR pointing at one run
 * directory, so that every process of the run (children, exec'd images) writes its
 * malloc_freq.<pid>/ there; forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to it; waits; prints
 * where the profile is and its top sites (mf_print); exits with PROGRAM's status, or dies
 * of the signal that ended it, as time, env and timeout do.
 *
 * This file: the options, and the run from start to end (the files are listed in
 * launcher.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "launcher.h"

/* ---- options ------------------------------------------------------------------------- */

__attribute__((noreturn, format(printf, 1, 2))) static void mf_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mf_vmsg(" (see malloc_freq --help)", fmt, ap);
    va_end(ap);
    exit(2);
}

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
          "      --watch            a live view of the run's allocation sites while it runs\n"
          "                         (mf_print --watch); PROGRAM's standard output and error\n"
          "                         go to the file output in the run directory\n"
          "      --interval SECONDS  --watch's refresh, 0.1..3600 (default 1)\n"
          "      --no-timeline      record no timeline of the run (timeline.mftl, read by\n"
          "                         mf_print --timeline; also MALLOC_FREQ_TIMELINE=0)\n"
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
    enum { OPT_DEPTH = 256, OPT_UNWIND, OPT_WATCH, OPT_INTERVAL, OPT_NO_TIMELINE };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"sample", required_argument, NULL, 's'},
        {"depth", required_argument, NULL, OPT_DEPTH},
        {"unwind", required_argument, NULL, OPT_UNWIND},
        {"quiet", no_argument, NULL, 'q'},
        {"watch", no_argument, NULL, OPT_WATCH},
        {"interval", required_argument, NULL, OPT_INTERVAL},
        {"no-timeline", no_argument, NULL, OPT_NO_TIMELINE},
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
        case OPT_WATCH:
            l->watch = true;
            break;
        case OPT_INTERVAL: {
            /* mf_print checks it again: said here, before the program runs */
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || errno || !(v >= 0.1 && v <= 3600))
                mf_usage_error("--interval wants seconds from 0.1 to 3600, not '%s'", optarg);
            l->interval = optarg;
            break;
        }
        case OPT_NO_TIMELINE:
            l->no_timeline = true;
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
    if (l->interval && !l->watch)
        mf_usage_error("--interval is --watch's refresh: add --watch");
    const char *tl = getenv("MALLOC_FREQ_TIMELINE");
    if (tl && strcmp(tl, "0") == 0)
        l->no_timeline = true;
    if (optind >= argc)
        mf_usage_error("no program given: malloc_freq [options] -- PROGRAM [ARGS...]");
    if (!argv[optind][0])
        mf_usage_error("the program's name is empty");
    l->argv = argv + optind;
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
            /* The cost is PYTHONMALLOC's, not the profiler's: measured on a JSON round trip
             * of 40,000 records with Debian's python3.11 (docs/profiling.md). */
            mf_msg("%s is Python: PYTHONMALLOC=malloc, so that its object allocations reach "
                   "malloc and are counted; that alone makes Python about 1.4x slower (glibc's "
                   "malloc instead of pymalloc's pools)",
                   l.python);
        else
            mf_msg("%s is Python: PYTHONMALLOC=%s kept as you set it (objects served by "
                   "pymalloc's pools are not malloc calls)",
                   l.python, pm);
    }

    struct timespec start;
    clock_gettime(CLOCK_REALTIME, &start);
    int status, not_run = mf_run_program(&l, &start, &status);
    if (not_run >= 0)
        return not_run;
    mf_append_run_end(&l, status);
    if (l.watch && !l.quiet) {
        struct stat st;
        char size[32] = "";
        if (stat(l.output_file, &st) == 0)
            snprintf(size, sizeof size, " (%lld bytes)", (long long)st.st_size);
        mf_msg("%s's output%s is in %s", l.argv[0], size, l.output_file);
    }
    if (!l.quiet)
        mf_summary(&l, status);
    mf_wait_recorder(&l);
    if (WIFSIGNALED(status))
        mf_die_of(WTERMSIG(status));
    return WEXITSTATUS(status);
}
