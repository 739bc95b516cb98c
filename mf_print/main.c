/* mf_print: reads the profile a malloc_freq run wrote and reports where the program calls
 * the allocator: read+validate, merge, symbolize, transform (model.c), then one report
 * (report_*.c). Exit status: 0 reported, 1 nothing readable or the output failed, 2 bad
 * usage or directory. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <regex.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "call_tree.h"
#include "diff.h"
#include "mf_print.h"
#include "model.h"
#include "names.h"
#include "profile_read.h"
#include "report.h"
#include "symbolize.h"
#include "transform.h"

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
          "  -d, --dir DIR          a profile directory (the same as DIR above); repeatable\n"
          "  -f, --format FORMAT    tree       caller tree with totals (default)\n"
          "                         csv        one row per stack, for scripts\n"
          "                         collapsed  root;...;site COUNT lines, for flame graphs\n"
          "                         pprof      gzipped profile.proto (go tool pprof, ...)\n"
          "                         html       a self-contained interactive flame graph\n"
          "                         json       the model, for scripts\n"
          "  -o, --output FILE      write the report to FILE (default: standard output)\n"
          "  -w, --weight calls|bytes  what collapsed counts and html first shows (calls;\n"
          "                         --live html opens on live bytes)\n"
          "  -t, --threshold PCT    tree: fold entries under PCT % of all calls (0..100,\n"
          "                         default 1)\n"
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
          "      --width N          tree: cut lines to N columns (default: the terminal's\n"
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
          "  -h, --help             this text\n",
          out);
}

static void mf_usage_error(const char *fmt, const char *arg)
{
    fputs("mf_print: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (see mf_print --help)\n", stderr);
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

static uint32_t mf_parse_site_depth(const char *s)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || *s == '-' || v < 1 || v > 64)
        mf_usage_error("--site-depth wants frames from 1 to 64, not '%s'", s);
    return (uint32_t)v;
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

/* Writes a tree report: through a buffer that cuts its lines when o->width is set. */
struct mf_cut {
    FILE *out, *mem;
    char *text;
    size_t len;
};

static FILE *mf_cut_begin(struct mf_cut *c, FILE *out, unsigned width)
{
    memset(c, 0, sizeof c[0]);
    c->out = out;
    if (width && (c->mem = open_memstream(&c->text, &c->len)))
        return c->mem;
    return out;
}

static void mf_cut_end(struct mf_cut *c, unsigned width)
{
    if (!c->mem)
        return;
    fclose(c->mem);
    mf_cut_lines(c->out, c->text, c->len, width);
    free(c->text);
}

static const char *const mf_formats[] = {
    [MF_FORMAT_TREE] = "tree",           [MF_FORMAT_CSV] = "csv",
    [MF_FORMAT_COLLAPSED] = "collapsed", [MF_FORMAT_PPROF] = "pprof",
    [MF_FORMAT_HTML] = "html",           [MF_FORMAT_JSON] = "json",
};

static enum mf_format mf_parse_format(const char *s)
{
    for (size_t i = 0; i < sizeof mf_formats / sizeof *mf_formats; i++)
        if (strcmp(s, mf_formats[i]) == 0)
            return (enum mf_format)i;
    mf_usage_error("--format is tree, csv, collapsed, pprof, html or json, not '%s'", s);
    return MF_FORMAT_TREE;
}

static bool mf_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A regular file is written through a stream of ours: past its first 64 MiB, with
 * RWF_DONTCACHE (Linux 6.14), so that each page leaves the page cache once it is on disk.
 * The first bytes stay cached for the script that reads the report next; a report of
 * gigabytes (4 GB of CSV at 10^6 stacks) then does not push the page cache out, and on this
 * virtual machine writes in a fifth of the time: 3.9 GB took 11-14 s of kernel time into
 * the page cache, 2.8-3.5 s uncached (memory that writeback frees is reused at once, not
 * taken anew from a host that reclaims what the guest freed). A kernel or file system
 * without it answers EOPNOTSUPP and the rest is written as usual; a pipe or a terminal is
 * written by stdio as it always was. */
#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#define MF_CACHED_OUT ((uint64_t)64 << 20)

struct mf_file_out {
    int fd;
    bool uncached; /* to be tried past MF_CACHED_OUT */
    uint64_t written;
    int err; /* the errno of the first write that failed, whichever thread wrote */
};

static ssize_t mf_file_write(void *cookie, const char *buf, size_t size)
{
    struct mf_file_out *c = cookie;
    size_t done = 0;
    while (done < size) {
        ssize_t n;
        if (c->uncached && c->written >= MF_CACHED_OUT) {
            struct iovec v = {(void *)(buf + done), size - done};
            n = pwritev2(c->fd, &v, 1, -1, RWF_DONTCACHE);
            if (n < 0 && errno == EOPNOTSUPP) {
                c->uncached = false;
                continue;
            }
        } else {
            n = write(c->fd, buf + done, size - done);
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { /* a short count is stdio's error */
            if (!c->err)
                c->err = n < 0 ? errno : EIO;
            break;
        }
        done += (size_t)n;
        c->written += (uint64_t)n;
    }
    return (ssize_t)done;
}

/* The report's destination: standard output, FILE, or for --save a temporary file beside
 * FILE that replaces it once the report is whole (a failed snapshot leaves the last one). */
struct mf_output {
    FILE *f;
    const char *path;
    struct mf_replace replace; /* --save: FILE is replaced once the report is whole */
    bool replacing;
    FILE *under;              /* f is our stream over this one's file (mf_file_write) */
    struct mf_file_out file;
    char *buf;                /* f's: an uncached write of 8 KiB (stdio's own size) cost 46 us */
};

/* f writes a regular file: through mf_file_write from now on. */
static void mf_output_uncached(struct mf_output *o)
{
    struct stat st;
    int fd = fileno(o->f);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || fflush(o->f) != 0)
        return;
    o->file = (struct mf_file_out){fd, true, 0, 0};
    FILE *f = fopencookie(&o->file, "w", (cookie_io_functions_t){.write = mf_file_write});
    if (!f)
        return;
    o->buf = mf_xmalloc((size_t)1 << 20);
    setvbuf(f, o->buf, _IOFBF, (size_t)1 << 20); /* glibc takes a size only with a buffer */
    o->under = o->f;
    o->f = f;
}

static bool mf_output_open(struct mf_output *o, const char *path, bool replace)
{
    memset(o, 0, sizeof *o);
    o->f = stdout;
    o->path = path;
    if (!path) {
        mf_output_uncached(o);
        return false;
    }
    if (replace) {
        int fd = mf_replace_open(&o->replace, path, "--save");
        if (fd < 0)
            return true;
        if (!(o->f = fdopen(fd, "w"))) {
            mf_error("cannot write %s: %s", mf_esc(path), strerror(errno));
            close(fd);
            mf_replace_end(&o->replace, false);
            return true;
        }
        o->replacing = true;
        mf_output_uncached(o);
        return false;
    }
    if (!(o->f = fopen(path, "w"))) {
        mf_error("cannot write %s: %s", mf_esc(path), strerror(errno));
        return true;
    }
    mf_output_uncached(o);
    return false;
}

/* Returns true if the report could not be written whole (after saying why). */
static bool mf_output_close(struct mf_output *o, bool failed)
{
    bool bad = fflush(o->f) != 0 || ferror(o->f);
    int err = o->under && o->file.err ? o->file.err : errno;
    if (o->under) {
        fclose(o->f); /* flushed: what failed is known */
        free(o->buf);
        o->f = o->under;
    }
    if (o->f != stdout && fclose(o->f) != 0 && !bad) {
        bad = true;
        err = errno;
    }
    if (bad)
        mf_error("cannot write the report%s%s: %s", o->path ? " to " : "", o->path ? mf_esc(o->path) : "",
                 strerror(err));
    if (o->replacing && mf_replace_end(&o->replace, !bad && !failed))
        bad = true;
    return bad;
}

static void mf_saved(const char *path, const struct mf_profile *p, const struct mf_model *m)
{
    char programs[600], calls[40], size[40];
    struct stat st;
    mf_side_programs(p, programs, sizeof programs);
    mf_fmt_bytes(size, stat(path, &st) == 0 ? (double)st.st_size : 0);
    printf("saved %s (%s): %s calls of %s in %u stacks\n", mf_esc(path), size,
           mf_fmt_count(calls, mf_profile_total_calls(p)), programs, m->nstacks);
}

/* --base: both sides read, the diff built, one report of it. */
static int mf_compare(const char *const *base, int nbase, enum mf_format format,
                      const struct mf_report_options *o, bool save)
{
    if (format != MF_FORMAT_TREE && format != MF_FORMAT_CSV && format != MF_FORMAT_PPROF)
        mf_usage_error("--base reports in tree, csv or pprof format, not %s", mf_formats[format]);
    for (int i = 0; i < nbase; i++)
        for (int j = 0; j < o->ndirs; j++) {
            struct stat a, b;
            if (stat(base[i], &a) == 0 && stat(o->dirs[j], &b) == 0 && a.st_dev == b.st_dev &&
                a.st_ino == b.st_ino)
                mf_usage_error("%s is both OLD and NEW (to compare a profile with itself later, "
                               "keep a snapshot of it now with --save)", o->dirs[j]);
        }
    static struct mf_side old, new_;
    int rc = mf_side_read(&old, base, nbase, o->trim);
    if (!rc)
        rc = mf_side_read(&new_, o->dirs, o->ndirs, o->trim);
    if (rc)
        return rc;
    struct mf_diff d;
    mf_diff_build(&d, &old, &new_);
    struct mf_output output;
    if (mf_output_open(&output, o->output, save))
        return 1;
    bool failed = false;
    if (format == MF_FORMAT_TREE) {
        struct mf_cut cut;
        mf_report_diff_tree(mf_cut_begin(&cut, output.f, o->width), &d, o);
        mf_cut_end(&cut, o->width);
    } else if (format == MF_FORMAT_CSV) {
        mf_report_diff_csv(output.f, &d);
    } else {
        failed = mf_report_diff_pprof(output.f, &d, o);
    }
    mf_symbolize_end();
    if (mf_output_close(&output, failed))
        return 1;
    if (save)
        printf("saved %s: the comparison of %s with %s\n", mf_esc(o->output), mf_esc(o->dirs[0]),
               mf_esc(base[0]));
    return failed;
}

int main(int argc, char **argv)
{
    const char **dirs = mf_xcalloc((size_t)argc + 1, sizeof *dirs);
    int ndirs = 0;
    struct mf_report_options o = {.threshold = MF_THRESHOLD_DEFAULT, .trim = true};
    enum mf_format format = MF_FORMAT_TREE;
    enum {
        MF_OPT_NO_TRIM = 256, MF_OPT_SAVE, MF_OPT_NO_FOLD, MF_OPT_FOLD, MF_OPT_HIDE,
        MF_OPT_FULL_STACKS, MF_OPT_FULL_NAMES, MF_OPT_WIDTH, MF_OPT_BY, MF_OPT_PROGRAM,
        MF_OPT_DEBUG_DIR, MF_OPT_SYSROOT, MF_OPT_SIZES, MF_OPT_SITE_DEPTH, MF_OPT_TUNE,
        MF_OPT_TUNE_HEADER, MF_OPT_LIVE, MF_OPT_SORT
    };
    bool live = false, sort_temporary = false;
    struct mf_transform xf = *mf_transform_get();
    regex_t *fold_re = NULL, *hide_re = NULL;
    int width = -1; /* not given */
    const char **programs = mf_xcalloc((size_t)argc + 1, sizeof *programs);
    const char **debug_dirs = mf_xcalloc((size_t)argc + 1, sizeof *debug_dirs);
    int nprograms = 0, ndebug_dirs = 0;
    const char *sysroot = NULL;
    bool by_program = false;
    bool sizes = false, tune = false;
    const char **base = mf_xcalloc((size_t)argc + 1, sizeof *base);
    int nbase = 0;
    const char *save = NULL;
    bool format_given = false;
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
        {"base", required_argument, NULL, 'b'},
        {"sizes", no_argument, NULL, MF_OPT_SIZES},
        {"site-depth", required_argument, NULL, MF_OPT_SITE_DEPTH},
        {"tune", no_argument, NULL, MF_OPT_TUNE},
        {"tune-header", required_argument, NULL, MF_OPT_TUNE_HEADER},
        {"live", no_argument, NULL, MF_OPT_LIVE},
        {"sort", required_argument, NULL, MF_OPT_SORT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own one-line messages */
    int c;
    while ((c = getopt_long(argc, argv, ":d:f:o:w:t:b:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (!*optarg)
                mf_usage_error("%s", "--dir needs a directory");
            dirs[ndirs++] = optarg;
            break;
        case 'f':
            format = mf_parse_format(optarg);
            format_given = true;
            break;
        case 'o':
            if (!*optarg)
                mf_usage_error("%s", "--output needs a file name");
            o.output = optarg;
            break;
        case 'w':
            if (strcmp(optarg, "calls") == 0)
                o.weight_bytes = false;
            else if (strcmp(optarg, "bytes") == 0)
                o.weight_bytes = true;
            else
                mf_usage_error("--weight is calls or bytes, not '%s'", optarg);
            break;
        case 't':
            o.threshold = mf_parse_threshold(optarg);
            break;
        case MF_OPT_NO_TRIM:
            o.trim = false;
            break;
        case MF_OPT_NO_FOLD:
            xf.fold = false;
            break;
        case MF_OPT_FOLD:
            mf_add_regex(&fold_re, &xf.nfold, "--fold", optarg);
            break;
        case MF_OPT_HIDE:
            mf_add_regex(&hide_re, &xf.nhide, "--hide", optarg);
            break;
        case MF_OPT_FULL_STACKS:
            xf.cut = false;
            break;
        case MF_OPT_FULL_NAMES:
            o.full_names = true;
            break;
        case MF_OPT_WIDTH:
            width = (int)mf_parse_width(optarg);
            break;
        case MF_OPT_SAVE:
            if (!*optarg)
                mf_usage_error("%s", "--save needs a file name");
            save = optarg;
            break;
        case MF_OPT_BY:
            mf_parse_by(optarg, &by_program, &o);
            break;
        case MF_OPT_SITE_DEPTH:
            o.site_depth = mf_parse_site_depth(optarg);
            break;
        case MF_OPT_TUNE:
            tune = true;
            break;
        case MF_OPT_TUNE_HEADER:
            if (!*optarg)
                mf_usage_error("%s", "--tune-header needs a file name");
            o.tune_header = optarg;
            break;
        case MF_OPT_PROGRAM:
            if (!*optarg)
                mf_usage_error("%s", "--program needs a program name (e.g. cc1)");
            programs[nprograms++] = optarg;
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
                mf_error("%s %s: %s", what, optarg, why);
                return 2;
            }
            if (c == MF_OPT_SYSROOT)
                sysroot = optarg;
            else
                debug_dirs[ndebug_dirs++] = optarg;
            break;
        }
        case 'b':
            if (!*optarg)
                mf_usage_error("%s", "--base needs a profile directory or pprof file");
            base[nbase++] = optarg;
            break;
        case MF_OPT_SIZES:
            sizes = true;
            break;
        case MF_OPT_LIVE:
            live = true;
            break;
        case MF_OPT_SORT:
            if (strcmp(optarg, "temporary") == 0)
                sort_temporary = true;
            else if (strcmp(optarg, "bytes") != 0)
                mf_usage_error("--sort is temporary or bytes, not '%s'", optarg);
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
        dirs[ndirs++] = argv[i];
    if (save) {
        if (o.output)
            mf_usage_error("%s", "--save FILE is --format pprof -o FILE: give one of them");
        if (format_given && format != MF_FORMAT_PPROF)
            mf_usage_error("--save writes pprof, not %s", mf_formats[format]);
        format = MF_FORMAT_PPROF;
        o.output = save;
    }
    if (o.site_depth && !o.by_site)
        mf_usage_error("%s", "--site-depth is the depth of --by site's sites: add --by site");
    if (!o.site_depth)
        o.site_depth = 4;
    if (o.by_site && (format != MF_FORMAT_CSV || sizes || nbase || save))
        mf_usage_error("%s", format != MF_FORMAT_CSV ? "--by site writes CSV: add --format csv"
                             : sizes ? "--by site is a CSV of sites; --sizes --tune names the "
                                       "sites of each size class"
                                     : "--by site does not apply to --base or --save");
    if ((tune || o.tune_header) && !sizes)
        mf_usage_error("%s", "--tune and --tune-header read the size histogram: add --sizes");
    if (tune && format != MF_FORMAT_TREE)
        mf_usage_error("--tune is a text report, not %s", mf_formats[format]);
    if (sizes && by_program)
        mf_usage_error("%s", "--sizes is for the whole profile: use --program NAME, not --by");
    if (sizes && (nbase || save))
        mf_usage_error("%s", nbase ? "--sizes does not compare profiles (--base)"
                                   : "--sizes does not write pprof (--save)");
    if (sizes && format != MF_FORMAT_TREE && format != MF_FORMAT_CSV && format != MF_FORMAT_JSON)
        mf_usage_error("--sizes reports in tree, csv or json format, not %s", mf_formats[format]);
    if (live && (sizes || by_program || nprograms))
        mf_usage_error("%s", "--live reports the whole live heap: not with --sizes, --by or --program");
    if (sort_temporary && !live)
        mf_usage_error("%s", "--sort temporary sorts the live heap's lifetimes: give --live");
    mf_live_wanted = live;
    if (ndirs == 0)
        mf_usage_error("%s", nbase ? "--base OLD needs NEW: mf_print --base OLD NEW"
                                   : "no profile given: mf_print malloc_freq.<pid>");
    o.dirs = dirs;
    o.ndirs = ndirs;
    if (by_program && format != MF_FORMAT_TREE && format != MF_FORMAT_CSV &&
        format != MF_FORMAT_PPROF)
        mf_usage_error("--by program splits the tree and csv reports (pprof labels every sample "
                       "with its program already), not %s", mf_formats[format]);
    if (nbase && (by_program || nprograms))
        mf_usage_error("%s", "--by program and --program do not apply to --base");
    mf_symbolize_config(debug_dirs, ndebug_dirs, sysroot);
    mf_unresolved_sysroot(sysroot);
    xf.fold_re = fold_re;
    xf.hide_re = hide_re;
    mf_transform_set(&xf);
    /* Lines are cut on a terminal, to its width: a pipe or a file gets them whole (as ps
     * and git do), for grep, less -S and editors. */
    struct winsize ws;
    if (width >= 0)
        o.width = (unsigned)width;
    else if (!o.output && isatty(STDOUT_FILENO))
        o.width = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40 ? ws.ws_col : 80;
    if (nbase)
        return mf_compare(base, nbase, format, &o, save != NULL);
    for (int i = 0; i < ndirs; i++)
        if (mf_is_file(dirs[i])) {
            mf_error("%s is a file, not a profile directory; a pprof file is read by --base "
                     "(mf_print --base %s DIR) and by go tool pprof", mf_esc(dirs[i]),
                     mf_esc(dirs[i]));
            return 2;
        }

    struct mf_profile profile = {0};
    for (int i = 0; i < ndirs; i++)
        if (mf_profile_read_dir(&profile, dirs[i]))
            return 2;
    mf_profile_finish(&profile);
    if (profile.nfiles_read == 0) {
        mf_error("no readable profile file in %s%s", mf_esc(dirs[0]),
                 ndirs > 1 ? " and the other directories" : "");
        return 1;
    }
    if (nprograms && mf_programs_keep(&profile, programs, nprograms))
        return 2;
    /* The flame graph keeps the counts as read and adds the live heap's as weights of their
     * own (report_html.c): --live only makes it start on live bytes. */
    if (format == MF_FORMAT_HTML) {
        if (mf_live_attach(&profile, live) && live)
            return 1;
    } else if (live && mf_live_read(&profile)) {
        return 1;
    }

    struct mf_output output;
    if (mf_output_open(&output, o.output, save != NULL))
        return 1;
    FILE *out = output.f;
    if (by_program && format != MF_FORMAT_PPROF) {
        struct mf_cut cut;
        FILE *by_out = format == MF_FORMAT_TREE ? mf_cut_begin(&cut, out, o.width) : out;
        bool failed = mf_report_by_program(by_out, &profile, format, &o);
        if (format == MF_FORMAT_TREE)
            mf_cut_end(&cut, o.width);
        mf_symbolize_end();
        return mf_output_close(&output, failed) || failed;
    }
    struct mf_model model;
    mf_model_build(&model, &profile, o.trim);
    mf_profile_drop_frames(&profile); /* the model has its locations */
    bool failed = false;
    if (sizes) {
        if (tune) { /* a text report: cut to the terminal's width, as the tree */
            struct mf_cut cut;
            failed = mf_report_tune(mf_cut_begin(&cut, out, o.width), &model, &o);
            mf_cut_end(&cut, o.width);
        } else {
            failed = mf_report_sizes(out, &model, format, &o);
        }
        if (!failed && o.tune_header)
            failed = mf_write_tune_header(o.tune_header, &model, &o);
    } else if (o.by_site) {
        const struct mf_model *one = &model;
        mf_report_sites(out, &one, NULL, 1, &o);
    } else if (format == MF_FORMAT_TREE) {
        struct mf_tree tree;
        struct mf_model tree_model = model;
        if (live) /* the tree shows what is alive; the lifetimes table what was freed too */
            mf_model_keep_counted(&tree_model);
        mf_tree_build(&tree, &tree_model, o.threshold, mf_profile_total_calls(&profile));
        struct mf_cut cut;
        FILE *tree_out = mf_cut_begin(&cut, out, o.width);
        mf_report_tree(tree_out, &profile, &tree, &o);
        if (live)
            mf_report_lifetimes(tree_out, &model, sort_temporary);
        mf_unresolved_add(&model);
        mf_report_unresolved(tree_out);
        mf_cut_end(&cut, o.width);
    } else if (format == MF_FORMAT_CSV && live) {
        mf_report_live_csv(out, &model, sort_temporary);
    } else if (format == MF_FORMAT_CSV) {
        mf_report_csv(out, &model);
    } else if (format == MF_FORMAT_COLLAPSED) {
        failed = mf_report_collapsed(out, &model, &o);
    } else if (format == MF_FORMAT_PPROF) {
        failed = mf_report_pprof(out, &model, &o);
    } else if (format == MF_FORMAT_HTML) {
        failed = mf_report_html(out, &model, &o);
    } else {
        failed = mf_report_json(out, &model, &o);
    }
    mf_symbolize_end();
    if (mf_output_close(&output, failed))
        return 1;
    if (save)
        mf_saved(save, &profile, &model);
    return failed;
}
