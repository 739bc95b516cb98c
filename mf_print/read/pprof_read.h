/* Reading back a pprof file mf_print wrote (report_pprof.c), as one side of a comparison:
 * gunzipped with zlib, the fields we write decoded and checked (every index and id in range,
 * no negative count), then made into a model whose stacks are the file's samples, with the
 * processes their labels name. */
#ifndef MF_PPROF_READ_H
#define MF_PPROF_READ_H

#include <stdbool.h>

#include "diff.h"

/* Fills s (its profile, model, totals and sampling) from the pprof file at path. Returns 0,
 * or after one line on stderr the exit status: 1 for a file that is not such a profile
 * (truncated, damaged, another tool's, a comparison), 2 for one written with the other trim
 * setting than c->trim. */
int mf_pprof_read(struct mf_side *s, const char *path, const struct mf_model_config *c);

#endif
