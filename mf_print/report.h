/* The reports: each a function of the model (model.h), or of the caller tree built from it. */
#ifndef MF_REPORT_H
#define MF_REPORT_H

#include <stdio.h>

#include "call_tree.h"
#include "diff.h"
#include "model.h"
#include "profile_read.h"

enum mf_format {
    MF_FORMAT_TREE,
    MF_FORMAT_CSV,
    MF_FORMAT_COLLAPSED,
    MF_FORMAT_PPROF,
    MF_FORMAT_HTML,
    MF_FORMAT_JSON,
};

struct mf_report_options {
    double threshold; /* percent of all calls below which entries are folded */
    bool trim;
    bool weight_bytes; /* --weight bytes: collapsed counts bytes, html shows bytes first */
    const char *output; /* -o FILE, or NULL for standard output */
    const char *const *dirs;
    int ndirs;
};

/* Header with exact totals, then the caller tree (report_tree.c). */
void mf_report_tree(FILE *out, const struct mf_profile *p, const struct mf_tree *t,
                    const struct mf_report_options *o);

/* calls,bytes,samples,stack,locations: one row per merged stack (report_csv.c); frames
 * joined by ';', each percent-encoded where it holds '%', ';', a control character, a line
 * separator or a byte that is not UTF-8. */
void mf_report_csv(FILE *out, const struct mf_tree *t);

/* The others return true if they failed (after saying why on stderr). */
/* root;...;site COUNT, one line per stack (report_collapsed.c). */
bool mf_report_collapsed(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* gzip-compressed profile.proto (report_pprof.c). */
bool mf_report_pprof(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* A comparison (--base, diff.h): the sites and their stacks by the size of the change, as a
 * table (report_diff.c), as CSV rows (report_diff.c), or as one pprof profile holding NEW and
 * OLD negated, as go tool pprof -diff_base sees them (report_pprof.c). */
void mf_report_diff_tree(FILE *out, const struct mf_diff *d, const struct mf_report_options *o);
void mf_report_diff_csv(FILE *out, const struct mf_diff *d);
bool mf_report_diff_pprof(FILE *out, const struct mf_diff *d, const struct mf_report_options *o);
/* One self-contained HTML file with an interactive flame graph (report_html.c). */
bool mf_report_html(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* The model as JSON (report_json.c). */
bool mf_report_json(FILE *out, const struct mf_model *m, const struct mf_report_options *o);
/* --sizes (report_sizes.c): the exact size histogram, or with a site (--site NAME) the sizes
 * of that allocation site's calls, estimated from its samples; text (the tree format), csv
 * or json. */
bool mf_report_sizes(FILE *out, const struct mf_model *m, enum mf_format format,
                     const char *site, const struct mf_report_options *o);

/* The length (1..4) of the valid UTF-8 character s starts with, 1 for the terminating NUL,
 * or 0 if the bytes there are not one: a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF or cut short. *control tells whether it is a control character
 * (C0 but NUL, DEL, C1) or U+2028/U+2029, which some readers take for a line break.
 * (report_csv.c: names are bytes, the text formats UTF-8.) */
size_t mf_utf8_char(const char *s, bool *control);

#endif
