/* The command line as a request (request.h): parsed with getopt_long, then checked against
 * the option compatibility rules below, which are data, and the registry of reports, which
 * says which formats serve which kind of request. */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "debuginfod.h"
#include "mf_print.h"
#include "request.h"
#include "text.h"

#define MF_THRESHOLD_DEFAULT 1.0

static void mf_usage(FILE *out)
{
    fputs("usage: mf_print [options] DIR [DIR ...]\n"
          "       mf_print --base OLD [options] NEW\n"
          "Reports how often a program called the allocator, and from where, as recorded by\n"
          "malloc_freq (LD_PRELOAD=libmalloc_freq.so or the Rust crate). DIR is a\n"
          "malloc_freq.<pid> directory, or one holding them at any depth (the launcher's\n"
          "run directory, a build tree run under LD_PRELOAD); several are merged.\n"
          "\n"
          "  -d, --dir DIR          a profile directory (the same as DIR above); repeatable\n",
          out);
    mf_usage_formats(out);
    fputs("  -o, --output FILE      write the report to FILE (default: standard output)\n"
          "  -w, --weight calls|bytes  what collapsed counts and html first shows (calls;\n"
          "                         --live html opens on live bytes)\n"
          "  -t, --threshold PCT    tree: fold entries under PCT % of all calls (0..100,\n"
          "                         default 1)\n"
          "      --depth N          tree: show N levels (a site and N - 1 of its callers)\n"
          "      --top N            tree: show at least the N largest sites, under the\n"
          "                         threshold too (not expanded)\n"
          "      --uncalibrated     sampled estimates as recorded: by default those of a\n"
          "                         finished thread are adjusted to add up to its exact\n"
          "                         totals (docs/sampling.md)\n"
          "      --no-trim          keep allocator and profiler frames (malloc, operator new)\n"
          "      --no-fold          keep allocation wrappers (xmalloc, g_malloc,\n"
          "                         PyObject_Malloc, std::, Rust's alloc::) as sites;\n"
          "                         by default a site is the wrapper's caller: \"f via\n"
          "                         xmalloc\"\n"
          "      --fold REGEX       fold functions matching REGEX (POSIX extended) into\n"
          "                         their callers too, as wrappers; repeatable\n"
          "      --hide REGEX       leave out frames matching REGEX, anywhere; repeatable\n"
          "      --full-stacks      keep start-up frames (_start, __libc_start_main,\n"
          "                         start_thread, clone3, ...): by default stacks start at\n"
          "                         main or the thread's start routine\n"
          "      --full-names       tree: names as demangled (by default template and\n"
          "                         generic arguments read <…>)\n"
          "      --width N          tree: cut lines to N columns, numbers compact below\n"
          "                         120 (default: COLUMNS if set, else the terminal's\n"
          "                         width on a terminal, else not cut; 0: not cut)\n"
          "      --by program       a report per program (cc1, as, ld, ...): tree sections\n"
          "                         with their own totals, or a CSV program column\n"
          "      --by site          csv: one row per site, the innermost K frames shown\n"
          "                         (columns pc0..pc{K-1}, '-' padded), for pivot tables;\n"
          "                         --by site,size splits each site by size class;\n"
          "                         --by program,site adds the program column\n"
          "      --site-depth K     the frames of a site (1..64, default 4)\n"
          "      --program NAME     only the processes of program NAME (the executable's\n"
          "                         name or path); repeatable\n"
          "      --debug-dir DIR    look for separate debug files in DIR too\n"
          "                         (DIR/.build-id/xx/yyyy.debug); repeatable\n"
          "      --sysroot DIR      modules from a copy of the profiled machine's files:\n"
          "                         /usr/lib/x.so read as DIR/usr/lib/x.so if it is there\n"
          "      --offline          do not ask debuginfod servers (DEBUGINFOD_URLS) for\n"
          "                         missing debug files\n"
          "      --debuginfod-timeout S\n"
          "                         stop downloading debug files once downloads have\n"
          "                         run S seconds in all (default 60)\n"
          "      --save FILE        a pprof snapshot to compare later: --format pprof -o\n"
          "                         FILE, but FILE is replaced only when it is whole\n"
          "  -b, --base OLD         compare OLD with NEW: the change per site and stack,\n"
          "                         largest first, * where beyond the error bars; OLD\n"
          "                         and NEW are profile directories (repeat --base for\n"
          "                         more) or a pprof file mf_print wrote; tree, csv or\n"
          "                         pprof format\n"
          "      --live             the live heap (MALLOC_FREQ_LIVE): allocations alive\n"
          "                         now, or at exit, by stack, with their error; then\n"
          "                         lifetimes per site: freed, temporary %, median life;\n"
          "                         tree, csv, pprof (inuse_*/alloc_*), collapsed, json,\n"
          "                         html; --save/--base compare live snapshots\n"
          "      --sort temporary   --live: sites by temporary share (freed before the\n"
          "                         thread's next allocation), not by live bytes\n"
          "      --sizes            the sizes asked for: calls and bytes by size class,\n"
          "                         estimated from the samples with their error (exact\n"
          "                         at MALLOC_FREQ_SAMPLE=1 and from MALLOC_FREQ_LARGE\n"
          "                         up); tree, csv or json format\n"
          "      --tune             with --sizes: the classes that hold 50/90/99 % of\n"
          "                         calls and bytes, the sites behind each hot class, and\n"
          "                         what a pool or slab for them would save\n"
          "      --tune-header FILE\n"
          "                         with --sizes: also write the measured size classes\n"
          "                         as a C header (#defines and a table) to FILE\n"
          "      --watch            a live view of the processes writing into DIR\n"
          "                         (a run directory or one process directory), per\n"
          "                         site: calls/s and bytes/s over the last interval\n"
          "                         and totals, sorted by calls, bytes or growth (keys\n"
          "                         c, b, g; q quits); plain text blocks when standard\n"
          "                         output is not a terminal (--top N sites, 10)\n"
          "      --interval SECONDS  --watch's refresh, 0.1 to 3600 (default 1)\n"
          "      --timeline         the run's timeline (the launcher records one, or\n"
          "                         --record): calls/s and bytes/s of the top sites over\n"
          "                         time, with a sparkline each (--top N sites, default\n"
          "                         6); tree (text), csv or json format\n"
          "      --record           record DIR's timeline until its processes have ended\n"
          "                         (or SIGINT/SIGTERM): for a run without the launcher\n"
          "  -c, --check RULES      allocation budgets: exit 4 if a rule is broken, and\n"
          "                         say which and by how much; RULES is a file or rules\n"
          "                         such as 'calls <= 1000; bytes(parse_line) <= 64KiB;\n"
          "                         live_bytes <= 1Mi', or with --base 'calls +10%';\n"
          "                         an estimate breaks one only beyond 3 standard errors;\n"
          "                         repeatable (docs/budgets.md)\n"
          "  -h, --help             this text\n",
          out);
}

/* The line names what was given (an option's value, a path, a rule): a control character in
 * it is escaped (mf_put_text), so that a value holding a terminal's escape is not sent to it;
 * a backslash (a pattern's) reads as it was typed. */
void mf_usage_error(const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&line, fmt, ap) < 0)
        line = NULL;
    va_end(ap);
    fputs("mf_print: ", stderr);
    mf_put_text(stderr, line ? line : "bad usage");
    fputs(" (see mf_print --help)\n", stderr);
    free(line);
    exit(2);
}

static double mf_parse_threshold(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* v == v rejects NaN; the range check rejects inf. */
    if (!*s || *end || errno || v != v || v < 0 || v > 100)
        mf_usage_error("--threshold wants a percentage from 0 to 100, not '%s'", s);
    return v;
}

static double mf_parse_interval(const char *s)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= 0.1 && v <= 3600))
        mf_usage_error("--interval wants seconds from 0.1 to 3600, not '%s'", s);
    return v;
}

static unsigned mf_parse_width(const char *s)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || *s == '-' || v > 100000 || (v > 0 && v < 40))
        mf_usage_error("--width wants 0 (not cut) or columns from 40 to 100000, not '%s'", s);
    return (unsigned)v;
}

/* --by: a comma-separated list of program, site and size (size with site). */
static void mf_parse_by(const char *arg, bool *by_program, struct mf_report_options *o)
{
    char buf[64];
    if (strlen(arg) >= sizeof buf)
        mf_usage_error("--by is program, site, site,size or program,site, not '%s'", arg);
    strcpy(buf, arg);
    for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        if (strcmp(w, "program") == 0)
            *by_program = true;
        else if (strcmp(w, "site") == 0)
            o->by_site = true;
        else if (strcmp(w, "size") == 0)
            o->by_size = true;
        else
            mf_usage_error("--by is program, site, site,size or program,site, not '%s'", arg);
    }
    if (o->by_size && !o->by_site)
        mf_usage_error("%s", "--by size splits sites: --by site,size");
}

/* A whole number from lo to hi for option opt, or a usage error naming what it counts. */
static uint32_t mf_parse_count(const char *opt, const char *what, const char *s, uint32_t lo,
                               uint32_t hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || *s == '-' || v < lo || v > hi)
        mf_usage_error("%s wants %s from %u to %u, not '%s'", opt, what, lo, hi, s);
    return (uint32_t)v;
}

static uint32_t mf_parse_site_depth(const char *s)
{
    return mf_parse_count("--site-depth", "frames", s, 1, 64);
}

/* --fold and --hide: a POSIX extended regular expression each, matched anywhere in the name. */
static void mf_add_regex(regex_t **res, uint32_t *n, const char *opt, const char *pattern)
{
    *res = mf_xrealloc(*res, (*n + 1) * sizeof **res);
    int rc = regcomp(&(*res)[*n], pattern, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        char why[200], msg[400];
        regerror(rc, &(*res)[*n], why, sizeof why);
        snprintf(msg, sizeof msg, "%s: '%%s' is not a regular expression (%s)", opt, why);
        mf_usage_error(msg, pattern);
    }
    (*n)++;
}

/* --check: a file of rules if arg names a regular file, else rules. */
static void mf_add_check(struct mf_check *chk, const char *arg)
{
    char err[1024];
    struct stat st;
    if (!*arg)
        mf_usage_error("%s", "--check needs rules or a file of them (--check 'calls <= 1000')");
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {
        const char *why;
        int fd = mf_open_regular(arg, true, 1u << 20, &why);
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        if (!f)
            mf_usage_error("--check %s: %s", arg, fd < 0 ? why : strerror(errno));
        char *text = mf_xmalloc((size_t)st.st_size + 1);
        size_t n = fread(text, 1, (size_t)st.st_size, f);
        text[n] = '\0';
        fclose(f);
        if (strlen(text) != n)
            mf_usage_error("--check %s: not a text file of rules", arg);
        if (!mf_check_parse(chk, text, arg, err, sizeof err))
            mf_usage_error("%s", err);
        free(text);
    } else if (!mf_check_parse(chk, arg, NULL, err, sizeof err)) {
        mf_usage_error("%s", err);
    }
}

int mf_request_parse(struct mf_request *r, int argc, char **argv)
{
    memset(r, 0, sizeof *r);
    r->dirs = mf_xcalloc((size_t)argc + 1, sizeof *r->dirs);
    r->base = mf_xcalloc((size_t)argc + 1, sizeof *r->base);
    r->programs = mf_xcalloc((size_t)argc + 1, sizeof *r->programs);
    r->debug_dirs = mf_xcalloc((size_t)argc + 1, sizeof *r->debug_dirs);
    r->format = "tree";
    r->width = -1;
    r->debuginfod_timeout = MF_DEBUGINFOD_TIMEOUT_DEFAULT;
    r->xf = (struct mf_transform){.fold = true, .cut = true};
    r->o = (struct mf_report_options){.threshold = MF_THRESHOLD_DEFAULT, .trim = true};
    regex_t *fold_re = NULL, *hide_re = NULL;
    enum {
        MF_OPT_NO_TRIM = 256, MF_OPT_SAVE, MF_OPT_NO_FOLD, MF_OPT_FOLD, MF_OPT_HIDE,
        MF_OPT_FULL_STACKS, MF_OPT_FULL_NAMES, MF_OPT_WIDTH, MF_OPT_BY, MF_OPT_PROGRAM,
        MF_OPT_DEBUG_DIR, MF_OPT_SYSROOT, MF_OPT_SIZES, MF_OPT_SITE_DEPTH, MF_OPT_TUNE,
        MF_OPT_TUNE_HEADER, MF_OPT_LIVE, MF_OPT_SORT, MF_OPT_DEPTH, MF_OPT_TOP, MF_OPT_UNCALIBRATED,
        MF_OPT_WATCH, MF_OPT_INTERVAL, MF_OPT_TIMELINE, MF_OPT_RECORD, MF_OPT_OFFLINE,
        MF_OPT_DEBUGINFOD_TIMEOUT
    };
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"weight", required_argument, NULL, 'w'},
        {"threshold", required_argument, NULL, 't'},
        {"no-trim", no_argument, NULL, MF_OPT_NO_TRIM},
        {"no-fold", no_argument, NULL, MF_OPT_NO_FOLD},
        {"fold", required_argument, NULL, MF_OPT_FOLD},
        {"hide", required_argument, NULL, MF_OPT_HIDE},
        {"full-stacks", no_argument, NULL, MF_OPT_FULL_STACKS},
        {"full-names", no_argument, NULL, MF_OPT_FULL_NAMES},
        {"width", required_argument, NULL, MF_OPT_WIDTH},
        {"save", required_argument, NULL, MF_OPT_SAVE},
        {"by", required_argument, NULL, MF_OPT_BY},
        {"program", required_argument, NULL, MF_OPT_PROGRAM},
        {"debug-dir", required_argument, NULL, MF_OPT_DEBUG_DIR},
        {"sysroot", required_argument, NULL, MF_OPT_SYSROOT},
        {"offline", no_argument, NULL, MF_OPT_OFFLINE},
        {"debuginfod-timeout", required_argument, NULL, MF_OPT_DEBUGINFOD_TIMEOUT},
        {"base", required_argument, NULL, 'b'},
        {"sizes", no_argument, NULL, MF_OPT_SIZES},
        {"site-depth", required_argument, NULL, MF_OPT_SITE_DEPTH},
        {"tune", no_argument, NULL, MF_OPT_TUNE},
        {"tune-header", required_argument, NULL, MF_OPT_TUNE_HEADER},
        {"live", no_argument, NULL, MF_OPT_LIVE},
        {"sort", required_argument, NULL, MF_OPT_SORT},
        {"depth", required_argument, NULL, MF_OPT_DEPTH},
        {"top", required_argument, NULL, MF_OPT_TOP},
        {"uncalibrated", no_argument, NULL, MF_OPT_UNCALIBRATED},
        {"watch", no_argument, NULL, MF_OPT_WATCH},
        {"interval", required_argument, NULL, MF_OPT_INTERVAL},
        {"timeline", no_argument, NULL, MF_OPT_TIMELINE},
        {"record", no_argument, NULL, MF_OPT_RECORD},
        {"check", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own one-line messages */
    int c;
    while ((c = getopt_long(argc, argv, ":d:f:o:w:t:b:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (!*optarg)
                mf_usage_error("%s", "--dir needs a directory");
            r->dirs[r->ndirs++] = optarg;
            break;
        case 'f':
            if (!mf_report_listed(optarg)) { /* a format of any kind */
                char list[200];
                mf_formats_text(list, sizeof list, 0);
                mf_usage_error("--format is %s, not '%s'", list, optarg);
            }
            r->format = r->format_asked = optarg;
            break;
        case 'o':
            if (!*optarg)
                mf_usage_error("%s", "--output needs a file name");
            r->o.output = optarg;
            break;
        case 'w':
            if (strcmp(optarg, "calls") == 0)
                r->o.weight_bytes = false;
            else if (strcmp(optarg, "bytes") == 0)
                r->o.weight_bytes = true;
            else
                mf_usage_error("--weight is calls or bytes, not '%s'", optarg);
            break;
        case 't':
            r->o.threshold = mf_parse_threshold(optarg);
            break;
        case MF_OPT_UNCALIBRATED:
            r->uncalibrated = true;
            break;
        case MF_OPT_NO_TRIM:
            r->o.trim = false;
            break;
        case MF_OPT_NO_FOLD:
            r->xf.fold = false;
            break;
        case MF_OPT_FOLD:
            mf_add_regex(&fold_re, &r->xf.nfold, "--fold", optarg);
            break;
        case MF_OPT_HIDE:
            mf_add_regex(&hide_re, &r->xf.nhide, "--hide", optarg);
            break;
        case MF_OPT_FULL_STACKS:
            r->xf.cut = false;
            break;
        case MF_OPT_FULL_NAMES:
            r->o.full_names = true;
            break;
        case MF_OPT_WIDTH:
            r->width = (int)mf_parse_width(optarg);
            break;
        case MF_OPT_SAVE:
            if (!*optarg)
                mf_usage_error("%s", "--save needs a file name");
            r->save = optarg;
            break;
        case MF_OPT_BY:
            mf_parse_by(optarg, &r->by_program, &r->o);
            break;
        case MF_OPT_DEPTH:
            r->o.depth = mf_parse_count("--depth", "levels", optarg, 1, MF_DEPTH_MAX);
            break;
        case MF_OPT_TOP:
            r->o.top = mf_parse_count("--top", "sites", optarg, 0, 1000);
            break;
        case MF_OPT_SITE_DEPTH:
            r->o.site_depth = mf_parse_site_depth(optarg);
            break;
        case MF_OPT_TUNE:
            r->tune = true;
            break;
        case MF_OPT_TUNE_HEADER:
            if (!*optarg)
                mf_usage_error("%s", "--tune-header needs a file name");
            r->o.tune_header = optarg;
            break;
        case MF_OPT_PROGRAM:
            if (!*optarg)
                mf_usage_error("%s", "--program needs a program name (e.g. cc1)");
            r->programs[r->nprograms++] = optarg;
            break;
        case MF_OPT_DEBUG_DIR:
        case MF_OPT_SYSROOT: {
            struct stat st;
            const char *what = c == MF_OPT_SYSROOT ? "--sysroot" : "--debug-dir";
            if (!*optarg)
                mf_usage_error("%s needs a directory", what);
            const char *why = stat(optarg, &st) != 0 ? strerror(errno)
                              : !S_ISDIR(st.st_mode)   ? "not a directory"
                                                       : NULL;
            if (why) {
                mf_error("%s %s: %s", what, mf_esc(optarg), why);
                return 2;
            }
            if (c == MF_OPT_SYSROOT)
                r->sysroot = optarg;
            else
                r->debug_dirs[r->ndebug_dirs++] = optarg;
            break;
        }
        case MF_OPT_OFFLINE:
            r->offline = true;
            break;
        case MF_OPT_DEBUGINFOD_TIMEOUT:
            r->debuginfod_timeout = mf_parse_count("--debuginfod-timeout", "seconds", optarg, 1,
                                                   86400);
            break;
        case 'b':
            if (!*optarg)
                mf_usage_error("%s", "--base needs a profile directory or pprof file");
            r->base[r->nbase++] = optarg;
            break;
        case MF_OPT_SIZES:
            r->sizes = true;
            break;
        case MF_OPT_LIVE:
            r->live = true;
            break;
        case MF_OPT_SORT:
            if (strcmp(optarg, "temporary") == 0)
                r->o.sort_temporary = true;
            else if (strcmp(optarg, "bytes") != 0)
                mf_usage_error("--sort is temporary or bytes, not '%s'", optarg);
            break;
        case MF_OPT_WATCH:
            r->watch = true;
            break;
        case MF_OPT_INTERVAL:
            r->interval = mf_parse_interval(optarg);
            break;
        case MF_OPT_TIMELINE:
            r->timeline = true;
            break;
        case MF_OPT_RECORD:
            r->record = true;
            break;
        case 'c':
            mf_add_check(&r->check, optarg);
            break;
        case 'h':
            mf_usage(stdout);
            return 0;
        case ':':
            mf_usage_error("%s needs a value", argv[optind - 1]);
            break;
        default:
            mf_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    for (int i = optind; i < argc; i++)
        r->dirs[r->ndirs++] = argv[i];
    r->xf.fold_re = fold_re;
    r->xf.hide_re = hide_re;
    r->site_depth_given = r->o.site_depth != 0;
    return -1;
}

/* ---- the option compatibility rules ------------------------------------------------------ */

/* What a request holds, as bits the rules test. */
enum {
    MF_R_SAVE = 1 << 0,
    MF_R_OUTPUT = 1 << 1,
    MF_R_FORMAT = 1 << 2, /* -f given */
    MF_R_SITE_DEPTH = 1 << 3,
    MF_R_BY_SITE = 1 << 4,
    MF_R_BY_PROGRAM = 1 << 5,
    MF_R_SIZES = 1 << 6,
    MF_R_TUNE = 1 << 7,
    MF_R_TUNE_HEADER = 1 << 8,
    MF_R_BASE = 1 << 9,
    MF_R_LIVE = 1 << 10,
    MF_R_PROGRAM = 1 << 11,
    MF_R_SORT_TEMPORARY = 1 << 12,
    MF_R_NO_DIR = 1 << 13,
    MF_R_WATCH = 1 << 14,
    MF_R_INTERVAL = 1 << 15,
    MF_R_TIMELINE = 1 << 16,
    MF_R_RECORD = 1 << 17,
    MF_R_MANY_DIRS = 1 << 18,
    MF_R_CHECK = 1 << 19,
    MF_R_CHECK_GROWTH = 1 << 20, /* a growth rule (calls +10%) */
    MF_R_CHECK_LIVE = 1 << 21,   /* a live heap rule */
};

#define MF_WATCH_ALONE                                                                        \
    "--watch is a view of its own: not with --format, -o, --save, --base, --by, --sizes, "  \
    "--live, --program or --timeline (it shows live bytes when the live heap is recorded; "  \
    "with --record it records the timeline too)"

/* A rule applies to a request with every bit of `when` and none of `unless`. It is broken
 * then, unless `kind` is set and the registry has a report of the request's format for that
 * kind, or `format` is set and the format asked (-f) is it. msg has two %s for a kind or a
 * format rule: the formats that would do (as words) and the format asked. First broken,
 * first said. */
struct mf_rule {
    unsigned when, unless;
    enum mf_kind kind;
    const char *format;
    const char *msg;
};

static const struct mf_rule mf_rules[] = {
    {MF_R_CHECK | MF_R_FORMAT, 0, 0, NULL,
     "--check writes its verdict, not a report: not with --format"},
#define MF_CHECK_ITSELF                                                                     \
    "--check measures calls, bytes and the live heap itself: not with --save, --sizes, --by " \
    "or --live"
    {MF_R_CHECK | MF_R_SAVE, 0, 0, NULL, MF_CHECK_ITSELF},
    {MF_R_CHECK | MF_R_SIZES, 0, 0, NULL, MF_CHECK_ITSELF},
    {MF_R_CHECK | MF_R_BY_SITE, 0, 0, NULL, MF_CHECK_ITSELF},
    {MF_R_CHECK | MF_R_BY_PROGRAM, 0, 0, NULL, MF_CHECK_ITSELF},
    {MF_R_CHECK | MF_R_LIVE, 0, 0, NULL, MF_CHECK_ITSELF},
    {MF_R_CHECK_GROWTH, MF_R_BASE, 0, NULL,
     "--check: a growth rule (calls +10%) compares with --base OLD"},
    {MF_R_CHECK_LIVE | MF_R_BASE, 0, 0, NULL,
     "--check: live_calls and live_bytes are checked in one profile, not compared (--base)"},
    {MF_R_SAVE | MF_R_OUTPUT, 0, 0, NULL, "--save FILE is --format pprof -o FILE: give one of them"},
    {MF_R_SAVE | MF_R_FORMAT, 0, 0, "pprof", "--save writes %s, not %s"},
    {MF_R_SITE_DEPTH, MF_R_BY_SITE, 0, NULL,
     "--site-depth is the depth of --by site's sites: add --by site"},
    {MF_R_BY_SITE, 0, MF_KIND_SITES, NULL, "--by site writes CSV: add --format %s%.0s"},
    {MF_R_BY_SITE | MF_R_SIZES, 0, 0, NULL,
     "--by site is a CSV of sites; --sizes --tune names the sites of each size class"},
    {MF_R_BY_SITE | MF_R_BASE, 0, 0, NULL, "--by site does not apply to --base or --save"},
    {MF_R_BY_SITE | MF_R_SAVE, 0, 0, NULL, "--by site does not apply to --base or --save"},
    {MF_R_TUNE, MF_R_SIZES, 0, NULL,
     "--tune and --tune-header read the size histogram: add --sizes"},
    {MF_R_TUNE_HEADER, MF_R_SIZES, 0, NULL,
     "--tune and --tune-header read the size histogram: add --sizes"},
    {MF_R_TUNE, 0, MF_KIND_TUNE, NULL, "--tune is a text report%.0s, not %s"},
    {MF_R_SIZES | MF_R_BY_PROGRAM, 0, 0, NULL,
     "--sizes is for the whole profile: use --program NAME, not --by"},
    {MF_R_SIZES | MF_R_BASE, 0, 0, NULL, "--sizes does not compare profiles (--base)"},
    {MF_R_SIZES | MF_R_SAVE, 0, 0, NULL, "--sizes does not write pprof (--save)"},
    {MF_R_SIZES, 0, MF_KIND_SIZES, NULL, "--sizes reports in %s format, not %s"},
    {MF_R_LIVE | MF_R_SIZES, 0, 0, NULL,
     "--live reports the whole live heap: not with --sizes, --by or --program"},
    {MF_R_LIVE | MF_R_BY_PROGRAM, 0, 0, NULL,
     "--live reports the whole live heap: not with --sizes, --by or --program"},
    {MF_R_LIVE | MF_R_PROGRAM, 0, 0, NULL,
     "--live reports the whole live heap: not with --sizes, --by or --program"},
    {MF_R_SORT_TEMPORARY, MF_R_LIVE, 0, NULL,
     "--sort temporary sorts the live heap's lifetimes: give --live"},
    {MF_R_INTERVAL, MF_R_WATCH, 0, NULL, "--interval is --watch's refresh: add --watch"},
    {MF_R_WATCH | MF_R_FORMAT, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_OUTPUT, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_SAVE, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_BASE, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_BY_SITE, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_BY_PROGRAM, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_SIZES, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_LIVE, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_PROGRAM, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_WATCH | MF_R_TIMELINE, 0, 0, NULL, MF_WATCH_ALONE},
    {MF_R_NO_DIR | MF_R_BASE, 0, 0, NULL, "--base OLD needs NEW: mf_print --base OLD NEW"},
    {MF_R_NO_DIR, MF_R_BASE, 0, NULL, "no profile given: mf_print malloc_freq.<pid>"},
    {MF_R_BY_PROGRAM, 0, MF_KIND_BY_PROGRAM, NULL,
     "--by program%.0s splits the tree and csv reports (pprof labels every sample with its "
     "program already), not %s"},
    {MF_R_BASE | MF_R_BY_PROGRAM, 0, 0, NULL, "--by program and --program do not apply to --base"},
    {MF_R_BASE | MF_R_PROGRAM, 0, 0, NULL, "--by program and --program do not apply to --base"},
    {MF_R_BASE, MF_R_CHECK, MF_KIND_BASE, NULL, "--base reports in %s format, not %s"},
#define MF_TIMELINE_ALONE "--timeline reports one run's timeline: not with --base, --save, " \
                          "--live, --sizes, --by or --program"
    {MF_R_TIMELINE | MF_R_BASE, 0, 0, NULL, MF_TIMELINE_ALONE},
    {MF_R_TIMELINE | MF_R_SAVE, 0, 0, NULL, MF_TIMELINE_ALONE},
    {MF_R_TIMELINE | MF_R_LIVE, 0, 0, NULL, MF_TIMELINE_ALONE},
    {MF_R_TIMELINE | MF_R_SIZES, 0, 0, NULL, MF_TIMELINE_ALONE},
    {MF_R_TIMELINE | MF_R_BY_SITE, 0, 0, NULL, MF_TIMELINE_ALONE},
    {MF_R_TIMELINE | MF_R_BY_PROGRAM, 0, 0, NULL, MF_TIMELINE_ALONE},
    {MF_R_TIMELINE | MF_R_PROGRAM, 0, 0, NULL, MF_TIMELINE_ALONE},
    {MF_R_TIMELINE | MF_R_MANY_DIRS, 0, 0, NULL, "--timeline reports the timeline of one directory"},
    {MF_R_TIMELINE, 0, MF_KIND_TIMELINE, NULL, "--timeline reports in %s format, not %s"},
#define MF_RECORD_ALONE "--record DIR records DIR's timeline and reports nothing: no other option"
    {MF_R_RECORD | MF_R_MANY_DIRS, 0, 0, NULL, "--record records the timeline of one directory"},
    {MF_R_RECORD | MF_R_TIMELINE, 0, 0, NULL, MF_RECORD_ALONE},
    {MF_R_RECORD | MF_R_FORMAT, 0, 0, NULL, MF_RECORD_ALONE},
    {MF_R_RECORD | MF_R_OUTPUT, 0, 0, NULL, MF_RECORD_ALONE},
    {MF_R_RECORD | MF_R_SAVE, 0, 0, NULL, MF_RECORD_ALONE},
    {MF_R_RECORD | MF_R_BASE, 0, 0, NULL, MF_RECORD_ALONE},
    {MF_R_RECORD | MF_R_LIVE, 0, 0, NULL, MF_RECORD_ALONE},
    {MF_R_RECORD | MF_R_SIZES, 0, 0, NULL, MF_RECORD_ALONE},
#define MF_CHECK_NOT "--check judges a profile: not with --watch, --timeline or --record"
    {MF_R_CHECK | MF_R_WATCH, 0, 0, NULL, MF_CHECK_NOT},
    {MF_R_CHECK | MF_R_TIMELINE, 0, 0, NULL, MF_CHECK_NOT},
    {MF_R_CHECK | MF_R_RECORD, 0, 0, NULL, MF_CHECK_NOT},
};

enum mf_kind mf_request_kind(const struct mf_request *r)
{
    return r->check.n && r->nbase ? MF_KIND_CHECK_BASE
           : r->check.n   ? MF_KIND_CHECK
           : r->nbase     ? MF_KIND_BASE
           : r->timeline  ? MF_KIND_TIMELINE
           : r->o.by_site ? MF_KIND_SITES
           : r->tune      ? MF_KIND_TUNE
           : r->sizes     ? MF_KIND_SIZES
           : r->by_program ? MF_KIND_BY_PROGRAM
           : r->live      ? MF_KIND_LIVE
                          : MF_KIND_PLAIN;
}

void mf_request_check(struct mf_request *r)
{
    unsigned has = (r->save ? MF_R_SAVE : 0) | (r->o.output ? MF_R_OUTPUT : 0) |
                   (r->format_asked ? MF_R_FORMAT : 0) |
                   (r->site_depth_given ? MF_R_SITE_DEPTH : 0) |
                   (r->o.by_site ? MF_R_BY_SITE : 0) | (r->by_program ? MF_R_BY_PROGRAM : 0) |
                   (r->sizes ? MF_R_SIZES : 0) | (r->tune ? MF_R_TUNE : 0) |
                   (r->o.tune_header ? MF_R_TUNE_HEADER : 0) | (r->nbase ? MF_R_BASE : 0) |
                   (r->live ? MF_R_LIVE : 0) | (r->nprograms ? MF_R_PROGRAM : 0) |
                   (r->o.sort_temporary ? MF_R_SORT_TEMPORARY : 0) |
                   (r->ndirs == 0 ? MF_R_NO_DIR : 0) | (r->watch ? MF_R_WATCH : 0) |
                   (r->interval ? MF_R_INTERVAL : 0) | (r->timeline ? MF_R_TIMELINE : 0) |
                   (r->record ? MF_R_RECORD : 0) | (r->ndirs > 1 ? MF_R_MANY_DIRS : 0) |
                   (r->check.n ? MF_R_CHECK : 0) |
                   (mf_check_has(&r->check, true, false) ? MF_R_CHECK_GROWTH : 0) |
                   (mf_check_has(&r->check, false, true) ? MF_R_CHECK_LIVE : 0);
    if (r->save) /* --save FILE is --format pprof -o FILE */
        r->format = "pprof";
    if (r->check.n) /* --check RULES is --format check */
        r->format = "check";
    for (size_t i = 0; i < sizeof mf_rules / sizeof *mf_rules; i++) {
        const struct mf_rule *rule = &mf_rules[i];
        if ((has & rule->when) != rule->when || (has & rule->unless))
            continue;
        if (rule->kind) {
            if (mf_report_find(r->format, rule->kind))
                continue;
            char list[200];
            mf_formats_text(list, sizeof list, rule->kind);
            mf_usage_error(rule->msg, list, r->format);
        }
        if (rule->format) {
            if (strcmp(r->format_asked, rule->format) == 0)
                continue;
            mf_usage_error(rule->msg, rule->format, r->format_asked);
        }
        mf_usage_error("%s", rule->msg);
    }
    if (r->save)
        r->o.output = r->save;
    if (!r->o.site_depth)
        r->o.site_depth = 4;
    if (!r->interval)
        r->interval = 1;
    r->o.live = r->live;
    r->o.dirs = r->dirs;
    r->o.ndirs = r->ndirs;
    r->o.sysroot = r->sysroot;
    r->o.check = &r->check;
    /* Lines are cut on a terminal, to its width: a pipe or a file gets them whole (as ps
     * and git do), for grep, less -S and editors; unless COLUMNS says a width, which then
     * stands for the terminal's (a pager's, a script's), piped or not. */
    struct winsize ws;
    const char *columns = getenv("COLUMNS");
    char *end;
    unsigned long env_width = columns && *columns ? strtoul(columns, &end, 10) : 0;
    if (r->width >= 0)
        r->o.width = (unsigned)r->width;
    else if (env_width && !*end && env_width <= 100000)
        r->o.width = env_width < 40 ? 40 : (unsigned)env_width;
    else if (!r->o.output && isatty(STDOUT_FILENO))
        r->o.width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40 ? ws.ws_col : 80;
}
