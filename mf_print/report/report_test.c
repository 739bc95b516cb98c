/* A throw-away report, in test builds only (-DMF_TEST_REPORT): added through the registry
 * alone, one line of what its model holds, so that a test sees a new report reach the usage
 * text, the option rules and the dispatch (tests/test_mf_print_registry.py). */
#include "report.h"

#ifdef MF_TEST_REPORT
bool mf_report_test(FILE *out, const struct mf_report_input *in, const struct mf_report_options *o)
{
    const struct mf_model *m = in->model;
    fprintf(out, "test-report: view %s, %u stacks, %llu counted, %llu calls made, width %u\n",
            m->view == MF_VIEW_LIVE ? "live" : "calls", m->nstacks,
            (unsigned long long)m->view_calls, (unsigned long long)mf_profile_total_calls(m->p),
            o->width);
    return false;
}
#endif
