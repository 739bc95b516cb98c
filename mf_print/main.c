/* mf_print: reads the profile a malloc_freq run wrote and reports where the program calls
 * the allocator: read+validate, merge, symbolize, transform (model.c), then one report
 * (report_*.c). Exit status: 0 reported, 1 nothing readable or the output failed, 2 bad
 * usage or directory. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_tree.h"
#include "mf_print.h"
#include "model.h"
#include "profile_read.h"
#include "report.h"
#include "symbolize.h"

#define MF_THRESHOLD_DEFAULT 1.0

static void mf_usage(FILE *out)
{
    fputs("usage: mf_print [options] DIR [DIR ...]\n"
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

int main(int argc, char **argv)
{
    const char **dirs = mf_xcalloc((size_t)argc + 1, sizeof *dirs);
    int ndirs = 0;
    struct mf_report_options o = {.threshold = MF_THRESHOLD_DEFAULT, .trim = true};
    enum mf_format format = MF_FORMAT_TREE;
    enum { MF_OPT_NO_TRIM = 256 };
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"weight", required_argument, NULL, 'w'},
        {"threshold", required_argument, NULL, 't'},
        {"no-trim", no_argument, NULL, MF_OPT_NO_TRIM},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own one-line messages */
    int c;
    while ((c = getopt_long(argc, argv, ":d:f:o:w:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (!*optarg)
                mf_usage_error("%s", "--dir needs a directory");
            dirs[ndirs++] = optarg;
            break;
        case 'f':
            format = mf_parse_format(optarg);
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
    if (ndirs == 0)
        mf_usage_error("%s", "no profile given: mf_print malloc_freq.<pid>");
    o.dirs = dirs;
    o.ndirs = ndirs;

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

    FILE *out = stdout;
    if (o.output && !(out = fopen(o.output, "w"))) {
        mf_error("cannot write %s: %s", o.output, strerror(errno));
        return 1;
    }
    struct mf_model model;
    mf_model_build(&model, &profile, o.trim);
    bool failed = false;
    if (format == MF_FORMAT_TREE || format == MF_FORMAT_CSV) {
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
    if (fflush(out) != 0 || ferror(out) || (out != stdout && fclose(out) != 0)) {
        mf_error("cannot write the report%s%s: %s", o.output ? " to " : "",
                 o.output ? o.output : "", strerror(errno));
        return 1;
    }
    return failed;
}
