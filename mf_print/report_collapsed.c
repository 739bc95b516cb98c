/* --format collapsed: not written yet (issue 12). */
#include "mf_print.h"
#include "report.h"

bool mf_report_collapsed(FILE *out, const struct mf_model *m, const struct mf_report_options *o)
{
    (void)out, (void)m, (void)o;
    mf_error("--format collapsed is not available yet");
    return true;
}
