/* The two renderings of a caller tree. */
#ifndef MF_REPORT_H
#define MF_REPORT_H

#include <stdio.h>

#include "call_tree.h"
#include "profile_read.h"

struct mf_report_options {
    double threshold; /* percent of all calls below which entries are folded */
    bool trim;
    const char *const *dirs;
    int ndirs;
};

/* Header with exact totals, then the caller tree (report_tree.c). */
void mf_report_tree(FILE *out, const struct mf_profile *p, const struct mf_tree *t,
                    const struct mf_report_options *o);

/* calls,bytes,samples,stack,locations: one row per merged stack (report_csv.c). */
void mf_report_csv(FILE *out, const struct mf_tree *t);

#endif
