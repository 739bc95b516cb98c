/* The registry of reports (report.h): one line per report. The usage text's --format lines,
 * the option compatibility rules (request.c) and the dispatch (run.c) read it; nothing else
 * lists the formats. A format's first line holds its usage text. */
#include <stdio.h>
#include <string.h>

#include "report.h"

#define MF_CALLS (MF_KIND_PLAIN | MF_KIND_LIVE)

static const struct mf_report mf_reports[] = {
    {"tree", "caller tree with totals (default)", MF_CALLS, MF_INPUT_MODEL, true, false, 1,
     mf_report_tree, false},
    {"tree", NULL, MF_KIND_BY_PROGRAM, MF_INPUT_PARTS, true, false, 1, mf_report_tree_by_program,
     false},
    {"tree", NULL, MF_KIND_SIZES, MF_INPUT_MODEL, false, false, 1, mf_report_sizes_text, false},
    {"tree", NULL, MF_KIND_TUNE, MF_INPUT_MODEL, true, false, 1, mf_report_tune, false},
    {"tree", NULL, MF_KIND_BASE, MF_INPUT_DIFF, true, false, 1, mf_report_diff_tree, false},
    {"tree", NULL, MF_KIND_TIMELINE, MF_INPUT_MODEL, true, false, 1, mf_report_timeline_text,
     false},
    {"csv", "one row per stack, for scripts", MF_KIND_PLAIN | MF_KIND_BY_PROGRAM, MF_INPUT_PARTS,
     false, false, 1, mf_report_csv, false},
    {"csv", NULL, MF_KIND_LIVE, MF_INPUT_MODEL, false, false, 1, mf_report_live_csv, false},
    {"csv", NULL, MF_KIND_SITES, MF_INPUT_PARTS, false, false, 1, mf_report_sites, false},
    {"csv", NULL, MF_KIND_SIZES, MF_INPUT_MODEL, false, false, 1, mf_report_sizes_csv, false},
    {"csv", NULL, MF_KIND_BASE, MF_INPUT_DIFF, false, false, 1, mf_report_diff_csv, false},
    {"csv", NULL, MF_KIND_TIMELINE, MF_INPUT_MODEL, false, false, 1, mf_report_timeline_csv, false},
    {"collapsed", "root;...;site COUNT lines, for flame graphs", MF_CALLS, MF_INPUT_MODEL, false,
     false, 1, mf_report_collapsed, false},
    /* --by program: every sample is labelled with its program already */
    {"pprof", "gzipped profile.proto (go tool pprof, ...)", MF_CALLS | MF_KIND_BY_PROGRAM,
     MF_INPUT_MODEL, false, false, 1, mf_report_pprof, true},
    {"pprof", NULL, MF_KIND_BASE, MF_INPUT_DIFF, false, false, 1, mf_report_diff_pprof, false},
    {"html", "a self-contained interactive flame graph", MF_CALLS, MF_INPUT_MODEL, false, true, 1,
     mf_report_html, true},
    {"json", "the model, for scripts", MF_CALLS, MF_INPUT_MODEL, false, false, 1, mf_report_json,
     true},
    {"json", NULL, MF_KIND_SIZES, MF_INPUT_MODEL, false, false, 1, mf_report_sizes_json, false},
    {"json", NULL, MF_KIND_TIMELINE, MF_INPUT_MODEL, false, false, 1, mf_report_timeline_json,
     false},
    /* --check's verdict: chosen by --check, never by --format (its NULL help hides it) */
    {"check", NULL, MF_KIND_CHECK, MF_INPUT_MODEL, false,
     true, MF_EXIT_BROKEN, mf_report_check, false},
    {"check", NULL, MF_KIND_CHECK_BASE, MF_INPUT_DIFF, false, false, MF_EXIT_BROKEN,
     mf_report_check_diff, false},
#ifdef MF_TEST_REPORT
    /* a test build's throw-away report (tests/test_mf_print_registry.py) */
    {"test-report", "a line of what its model holds (a test build's)",
     MF_CALLS | MF_KIND_SIZES, MF_INPUT_MODEL, true, false, 1, mf_report_test, false},
#endif
};

#define MF_NREPORTS (sizeof mf_reports / sizeof *mf_reports)

const struct mf_report *mf_report_find(const char *format, unsigned kinds)
{
    for (size_t i = 0; i < MF_NREPORTS; i++)
        if ((mf_reports[i].kinds & kinds) && strcmp(mf_reports[i].format, format) == 0)
            return &mf_reports[i];
    return NULL;
}

/* Whether format is one --format offers: its first line has a usage text. */
bool mf_report_listed(const char *format)
{
    for (size_t i = 0; i < MF_NREPORTS; i++)
        if (strcmp(mf_reports[i].format, format) == 0)
            return mf_reports[i].help != NULL;
    return false;
}

/* Whether line i is the first of its format among those serving kind (0: any), of a
 * format --format offers. */
static bool mf_first_of_format(size_t i, unsigned kind)
{
    if (!mf_report_listed(mf_reports[i].format))
        return false;
    if (kind && !(mf_reports[i].kinds & kind))
        return false;
    for (size_t j = 0; j < i; j++)
        if ((!kind || (mf_reports[j].kinds & kind)) &&
            strcmp(mf_reports[j].format, mf_reports[i].format) == 0)
            return false;
    return true;
}

void mf_formats_text(char *buf, size_t size, unsigned kind)
{
    size_t n = 0, k = 0, at = 0;
    for (size_t i = 0; i < MF_NREPORTS; i++)
        n += mf_first_of_format(i, kind);
    buf[0] = '\0';
    for (size_t i = 0; i < MF_NREPORTS && at < size; i++) {
        if (!mf_first_of_format(i, kind))
            continue;
        const char *sep = k == 0 ? "" : k + 1 == n ? " or " : ", ";
        int w = snprintf(buf + at, size - at, "%s%s", sep, mf_reports[i].format);
        at += w > 0 ? (size_t)w : 0;
        k++;
    }
}

void mf_usage_formats(FILE *out)
{
    bool first = true;
    for (size_t i = 0; i < MF_NREPORTS; i++) {
        if (!mf_first_of_format(i, 0))
            continue;
        fprintf(out, "%-25s%-10s %s\n", first ? "  -f, --format FORMAT" : "", mf_reports[i].format,
                mf_reports[i].help);
        first = false;
    }
}
