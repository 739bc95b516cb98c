/* mf_print: reads the profile a malloc_freq run wrote and prints where the program calls
 * the allocator, as a caller tree (default) or CSV.
 *   mf_print --dir DIR [--dir DIR ...] [--threshold PCT] [--format tree|csv] [--no-trim]
 * Exit status: 0 printed, 1 nothing readable, 2 bad usage or directory. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_tree.h"
#include "mf_print.h"
#include "profile_read.h"
#include "report.h"
#include "symbolize.h"

#define MF_THRESHOLD_DEFAULT 1.0

static void mf_usage(FILE *out)
{
    fputs("usage: mf_print --dir DIR [--dir DIR ...] [options]\n"
          "Prints how often a program called the allocator, and from where, as recorded by\n"
          "malloc_freq (LD_PRELOAD=libmalloc_freq.so or the Rust crate).\n"
          "\n"
          "  --dir DIR          a malloc_freq.<pid> directory; repeat to merge runs/processes\n"
          "  --threshold PCT    fold tree entries under PCT % of all calls (0..100, default 1)\n"
          "  --format tree|csv  caller tree with totals (default), or CSV: one row per stack\n"
          "  --no-trim          keep allocator/profiler frames (malloc, operator new, ...)\n"
          "  --help             this text\n",
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

int main(int argc, char **argv)
{
    const char **dirs = mf_xcalloc((size_t)argc, sizeof *dirs);
    int ndirs = 0;
    double threshold = MF_THRESHOLD_DEFAULT;
    bool csv = false, trim = true;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (arg[0] == '-' && arg[1] != '\0' && strcmp(arg, "-h") != 0)
                mf_usage_error("unknown option '%s'", arg);
            if (strcmp(arg, "-h") == 0) {
                mf_usage(stdout);
                return 0;
            }
            dirs[ndirs++] = arg; /* a bare directory */
            continue;
        }
        /* --name=value or --name value */
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        const char *value = eq ? eq + 1 : NULL;
#define MF_IS(opt) (len == strlen(opt) && strncmp(arg, opt, len) == 0)
        bool takes_value = MF_IS("--dir") || MF_IS("--threshold") || MF_IS("--format");
        if (takes_value && !value) {
            if (i + 1 >= argc)
                mf_usage_error("%s needs a value", arg);
            value = argv[++i];
        } else if (!takes_value && value) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(len < 63 ? len : 63), arg);
            mf_usage_error("%s takes no value", name);
        }
        if (MF_IS("--help")) {
            mf_usage(stdout);
            return 0;
        } else if (MF_IS("--dir")) {
            if (!*value)
                mf_usage_error("%s", "--dir needs a directory");
            dirs[ndirs++] = value;
        } else if (MF_IS("--threshold")) {
            threshold = mf_parse_threshold(value);
        } else if (MF_IS("--format")) {
            if (strcmp(value, "tree") == 0)
                csv = false;
            else if (strcmp(value, "csv") == 0)
                csv = true;
            else
                mf_usage_error("--format is tree or csv, not '%s'", value);
        } else if (MF_IS("--no-trim")) {
            trim = false;
        } else {
            mf_usage_error("unknown option '%s'", arg);
        }
#undef MF_IS
    }
    if (ndirs == 0)
        mf_usage_error("%s", "no profile given: use --dir malloc_freq.<pid>");

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

    struct mf_model model;
    mf_model_build(&model, &profile, trim);
    struct mf_tree tree;
    mf_tree_build(&tree, &model);
    struct mf_report_options o = {threshold, trim, dirs, ndirs};
    if (csv)
        mf_report_csv(stdout, &tree);
    else
        mf_report_tree(stdout, &profile, &tree, &o);
    mf_symbolize_end();
    if (fflush(stdout) != 0 || ferror(stdout)) {
        mf_error("cannot write the report: %s", strerror(errno));
        return 1;
    }
    return 0;
}
