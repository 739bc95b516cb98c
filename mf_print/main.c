/* mf_print: reads the profile a malloc_freq run wrote and reports where the program calls
 * the allocator: read+validate, merge, symbolize, transform (model.c), then one report
 * (report_*.c). Exit status: 0 reported, 1 nothing readable or the output failed, 2 bad
 * usage or directory. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "call_tree.h"
#include "diff.h"
#include "mf_print.h"
#include "model.h"
#include "profile_read.h"
#include "report.h"
#include "symbolize.h"

#define MF_THRESHOLD_DEFAULT 1.0

static void mf_usage(FILE *out)
{
    fputs("usage: mf_print [options] DIR [DIR ...]\n"
          "       mf_print --base OLD [options] NEW\n"
          "Reports how often a program called the allocator, and from where, as recorded by\n"
          "malloc_freq (LD_PRELOAD=libmalloc_freq.so or the Rust crate). DIR is a\n"
          "malloc_freq.<pid> directory; several are merged.\n"
          "\n"
          "  -d, --dir DIR          a profile directory (the same as DIR above); repeatable\n"
          "  -f, --format FORMAT    tree       caller tree with totals (default)\n"
          "                         csv        one row per stack, for scripts\n"
          "                         collapsed  root;...;site COUNT lines, for flame graphs\n"
          "                         pprof      gzipped profile.proto (go tool pprof, ...)\n"
          "                         html       a self-contained interactive flame graph\n"
          "                         json       the model, for scripts\n"
          "  -o, --output FILE      write the report to FILE (default: standard output)\n"
          "  -w, --weight calls|bytes  what collapsed counts and html first shows (calls)\n"
          "  -t, --threshold PCT    tree: fold entries under PCT % of all calls (0..100,\n"
          "                         default 1)\n"
          "      --no-trim          keep allocator and profiler frames (malloc, operator new)\n"
          "      --save FILE        a pprof snapshot to compare later: --format pprof -o\n"
          "                         FILE, but FILE is replaced only when it is whole\n"
          "  -b, --base OLD         compare OLD with NEW: the change per site and stack,\n"
          "                         largest first, * where beyond the error bars; OLD\n"
          "                         and NEW are profile directories (repeat --base for\n"
          "                         more) or a pprof file mf_print wrote; tree, csv or\n"
          "                         pprof format\n"
          "      --sizes            the sizes asked for: every call by size class, exact\n"
          "                         (tree, csv or json format)\n"
          "      --site NAME        with --sizes: the sizes of allocation site NAME's\n"
          "                         calls, estimated from its samples\n"
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

/* The report's destination: standard output, FILE, or for --save a temporary file beside
 * FILE that replaces it once the report is whole (a failed snapshot leaves the last one). */
struct mf_output {
    FILE *f;
    const char *path;
    char *tmp;
};

static bool mf_output_open(struct mf_output *o, const char *path, bool replace)
{
    memset(o, 0, sizeof *o);
    o->f = stdout;
    o->path = path;
    if (!path)
        return false;
    if (replace) {
        size_t n = strlen(path) + 8;
        o->tmp = mf_xmalloc(n);
        snprintf(o->tmp, n, "%s.XXXXXX", path);
        int fd = mkstemp(o->tmp);
        /* The mode fopen would leave: the old file's, or 0666 less the umask (not 0600). */
        struct stat st;
        mode_t mask = umask(0);
        umask(mask);
        mode_t mode = stat(path, &st) == 0 ? st.st_mode & 07777 : 0666 & ~mask;
        if (fd >= 0 && fchmod(fd, mode) == 0 && (o->f = fdopen(fd, "w")))
            return false;
        mf_error("cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        return true;
    }
    if (!(o->f = fopen(path, "w"))) {
        mf_error("cannot write %s: %s", path, strerror(errno));
        return true;
    }
    return false;
}

/* Returns true if the report could not be written whole (after saying why). */
static bool mf_output_close(struct mf_output *o, bool failed)
{
    bool bad = fflush(o->f) != 0 || ferror(o->f);
    int err = errno;
    if (o->f != stdout && fclose(o->f) != 0 && !bad) {
        bad = true;
        err = errno;
    }
    if (bad)
        mf_error("cannot write the report%s%s: %s", o->path ? " to " : "", o->path ? o->path : "",
                 strerror(err));
    if (o->tmp) {
        if (bad || failed) {
            unlink(o->tmp);
        } else if (rename(o->tmp, o->path) != 0) {
            mf_error("cannot replace %s: %s", o->path, strerror(errno));
            unlink(o->tmp);
            bad = true;
        }
        free(o->tmp);
    }
    return bad;
}

static void mf_saved(const char *path, const struct mf_profile *p, const struct mf_model *m)
{
    char programs[600], calls[40], size[40];
    struct stat st;
    mf_side_programs(p, programs, sizeof programs);
    mf_fmt_bytes(size, stat(path, &st) == 0 ? (double)st.st_size : 0);
    printf("saved %s (%s): %s calls of %s in %u stacks\n", path, size,
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
    if (format == MF_FORMAT_TREE)
        mf_report_diff_tree(output.f, &d, o);
    else if (format == MF_FORMAT_CSV)
        mf_report_diff_csv(output.f, &d);
    else
        failed = mf_report_diff_pprof(output.f, &d, o);
    mf_symbolize_end();
    if (mf_output_close(&output, failed))
        return 1;
    if (save)
        printf("saved %s: the comparison of %s with %s\n", o->output, o->dirs[0], base[0]);
    return failed;
}

int main(int argc, char **argv)
{
    const char **dirs = mf_xcalloc((size_t)argc + 1, sizeof *dirs);
    int ndirs = 0;
    struct mf_report_options o = {.threshold = MF_THRESHOLD_DEFAULT, .trim = true};
    enum mf_format format = MF_FORMAT_TREE;
    enum { MF_OPT_NO_TRIM = 256, MF_OPT_SAVE, MF_OPT_SIZES, MF_OPT_SITE };
    bool sizes = false;
    const char *site = NULL;
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
        {"save", required_argument, NULL, MF_OPT_SAVE},
        {"base", required_argument, NULL, 'b'},
        {"sizes", no_argument, NULL, MF_OPT_SIZES},
        {"site", required_argument, NULL, MF_OPT_SITE},
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
        case MF_OPT_SAVE:
            if (!*optarg)
                mf_usage_error("%s", "--save needs a file name");
            save = optarg;
            break;
        case 'b':
            if (!*optarg)
                mf_usage_error("%s", "--base needs a profile directory or pprof file");
            base[nbase++] = optarg;
            break;
        case MF_OPT_SIZES:
            sizes = true;
            break;
        case MF_OPT_SITE:
            if (!*optarg)
                mf_usage_error("%s", "--site needs a function name");
            site = optarg;
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
    if (site && !sizes)
        mf_usage_error("%s", "--site NAME goes with --sizes: mf_print --sizes --site NAME DIR");
    if (sizes && (nbase || save))
        mf_usage_error("%s", nbase ? "--sizes does not compare profiles (--base)"
                                   : "--sizes does not write pprof (--save)");
    if (sizes && format != MF_FORMAT_TREE && format != MF_FORMAT_CSV && format != MF_FORMAT_JSON)
        mf_usage_error("--sizes reports in tree, csv or json format, not %s", mf_formats[format]);
    if (ndirs == 0)
        mf_usage_error("%s", nbase ? "--base OLD needs NEW: mf_print --base OLD NEW"
                                   : "no profile given: mf_print malloc_freq.<pid>");
    o.dirs = dirs;
    o.ndirs = ndirs;
    if (nbase)
        return mf_compare(base, nbase, format, &o, save != NULL);
    for (int i = 0; i < ndirs; i++)
        if (mf_is_file(dirs[i])) {
            mf_error("%s is a file, not a profile directory; a pprof file is read by --base "
                     "(mf_print --base %s DIR) and by go tool pprof", dirs[i], dirs[i]);
            return 2;
        }

    struct mf_profile profile = {0};
    for (int i = 0; i < ndirs; i++)
        if (mf_profile_read_dir(&profile, dirs[i]))
            return 2;
    mf_profile_finish(&profile);
    if (profile.nfiles_read == 0) {
        mf_error("no readable profile file in %s%s", dirs[0],
                 ndirs > 1 ? " and the other directories" : "");
        return 1;
    }

    struct mf_output output;
    if (mf_output_open(&output, o.output, save != NULL))
        return 1;
    FILE *out = output.f;
    struct mf_model model;
    mf_model_build(&model, &profile, o.trim);
    bool failed = false;
    if (sizes) {
        failed = mf_report_sizes(out, &model, format, site, &o);
    } else if (format == MF_FORMAT_TREE || format == MF_FORMAT_CSV) {
        struct mf_tree tree;
        mf_tree_build(&tree, &model);
        if (format == MF_FORMAT_CSV)
            mf_report_csv(out, &tree);
        else
            mf_report_tree(out, &profile, &tree, &o);
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
