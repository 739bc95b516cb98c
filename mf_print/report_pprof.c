/* --format pprof: not written yet (issue 12). */
#include "mf_print.h"
#include "report.h"

bool mf_report_pprof(FILE *out, const struct mf_model *m, const struct mf_report_options *o)
{
    (void)out, (void)m, (void)o;
    mf_error("--format pprof is not available yet");
    return true;
}
