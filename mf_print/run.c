/* Running a request (request.h): read the profile, build the models the report reads, each
 * weighed as the request's view says, and run the one report the registry names for the
 * request's format and kind, into the output. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "call_tree.h"
#include "debuginfod.h"
#include "diff.h"
#include "mf_print.h"
#include "model.h"
#include "output.h"
#include "profile_read.h"
#include "report.h"
#include "request.h"
#include "symbolize.h"
#include "timeline.h"

static bool mf_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void mf_saved(const char *path, const struct mf_profile *p, const struct mf_model *m)
{
    char programs[600], calls[40], size[40];
    struct stat st;
    mf_side_programs(p, programs, sizeof programs);
    mf_fmt_bytes(size, stat(path, &st) == 0 ? (double)st.st_size : 0);
    printf("saved %s (%s): %s calls of %s in %u stacks\n", mf_esc(path), size,
           mf_fmt_count(calls, mf_profile_total_calls(p)), programs, m->nstacks);
}

/* The report into the output, its lines cut if it is text for people; then --tune-header. */
static int mf_write(const struct mf_request *r, const struct mf_report *rep,
                    const struct mf_report_input *v)
{
    const struct mf_report_options *o = &r->o;
    struct mf_output output;
    if (mf_output_open(&output, o->output, r->save != NULL))
        return 1;
    struct mf_cut cut;
    FILE *out = rep->cut ? mf_cut_begin(&cut, output.f, o->width) : output.f;
    bool failed = rep->fn(out, v, o);
    if (rep->cut)
        mf_cut_end(&cut, o->width);
    if (!failed && o->tune_header)
        failed = mf_write_tune_header(o->tune_header, v->model, o);
    mf_symbolize_end();
    if (mf_output_close(&output, failed))
        return 1;
    return failed ? rep->fail_status : 0;
}

/* --base: both sides read, the diff built, one report of it. */
static int mf_compare(const struct mf_request *r, const struct mf_report *rep,
                      const struct mf_model_config *c)
{
    const struct mf_report_options *o = &r->o;
    for (int i = 0; i < r->nbase; i++)
        for (int j = 0; j < o->ndirs; j++) {
            struct stat a, b;
            if (stat(r->base[i], &a) == 0 && stat(o->dirs[j], &b) == 0 && a.st_dev == b.st_dev &&
                a.st_ino == b.st_ino)
                mf_usage_error("%s is both OLD and NEW (to compare a profile with itself later, "
                               "keep a snapshot of it now with --save)", o->dirs[j]);
        }
    static struct mf_side old, new_;
    int rc = mf_side_read(&old, r->base, r->nbase, c);
    if (!rc)
        rc = mf_side_read(&new_, o->dirs, o->ndirs, c);
    if (rc)
        return rc;
    struct mf_diff d;
    mf_diff_build(&d, &old, &new_);
    struct mf_report_input v = {.diff = &d};
    rc = mf_write(r, rep, &v);
    if (!rc && r->save)
        printf("saved %s: the comparison of %s with %s\n", mf_esc(o->output), mf_esc(o->dirs[0]),
               mf_esc(r->base[0]));
    return rc;
}

int mf_run(const struct mf_request *r)
{
    if (r->record)
        return mf_record(r->dirs[0]);
    const struct mf_report *rep = mf_report_find(r->format, mf_request_kind(r));
    if (!rep) /* mf_request_check's rules leave none without a report */
        abort();
    mf_debuginfod_config(r->offline, r->debuginfod_timeout);
    mf_symbolize_config(r->debug_dirs, r->ndebug_dirs, r->sysroot);
    /* The flame graph keeps the calls and adds the live heap's weights of its own: --live
     * only makes it open on live bytes. */
    struct mf_model_config config = {r->o.trim, r->live && !rep->attach_live ? MF_VIEW_LIVE
                                                                             : MF_VIEW_CALLS,
                                     &r->xf};
    if (rep->input == MF_INPUT_DIFF)
        return mf_compare(r, rep, &config);
    for (int i = 0; i < r->ndirs; i++)
        if (mf_is_file(r->dirs[i])) {
            mf_error("%s is a file, not a profile directory; a pprof file is read by --base "
                     "(mf_print --base %s DIR) and by go tool pprof", mf_esc(r->dirs[i]),
                     mf_esc(r->dirs[i]));
            return 2;
        }

    /* Only sites by size (--by site,size, --tune) read the stacks' counts by class: keeping
     * them was a tenth of reading a build's run directory. The images of a program are
     * merged unless the report or the live heap, the timeline's ids or --save tell a
     * stack's processes apart. The live heap is read for --live and beside the calls for a
     * report that shows both: the flame graph, and --check when a rule weighs it. */
    bool page = rep->fn == mf_report_html && r->ndirs == 1;
    bool live = r->live ||
                (rep->attach_live && (!r->check.n || mf_check_has(&r->check, false, true)));
    struct mf_profile profile = {.uncalibrated = r->uncalibrated,
                                 .no_sizes = !r->o.by_size && !r->tune,
                                 .merge_images = !rep->by_process && !live && !r->timeline &&
                                                 !page && !r->save};
    for (int i = 0; i < r->ndirs; i++)
        if (mf_profile_read_dir(&profile, r->dirs[i]))
            return 2;
    mf_profile_finish(&profile);
    if (profile.nfiles_read == 0) {
        mf_error("no readable profile file in %s%s", mf_esc(r->dirs[0]),
                 r->ndirs > 1 ? " and the other directories" : "");
        return 1;
    }
    if (r->nprograms && mf_programs_keep(&profile, r->programs, r->nprograms))
        return 2;
    if (live && mf_live_attach(&profile, r->live) && r->live)
        return 1;

    struct mf_report_input v = {.p = &profile};
    /* The timeline, read for its report and for the HTML page's chart; a page without one
     * is the page as it was (a damaged file said so in one line). */
    static struct mf_timeline timeline;
    if (r->timeline || page) {
        int got = mf_timeline_read(&timeline, r->dirs[0]);
        if (got == 1 && r->timeline)
            mf_error("no timeline in %s (the launcher records one for every run; mf_print "
                     "--record DIR records one for a run without it)", mf_esc(r->dirs[0]));
        if (got && r->timeline)
            return 1;
        if (!got) {
            v.timeline = &timeline;
            v.stack_ids = mf_stack_ids(&profile, timeline.version);
        }
    }
    struct mf_model model;
    if (rep->input == MF_INPUT_PARTS && r->by_program) {
        const struct mf_model **models;
        const char **names;
        v.nparts = mf_programs_models(&profile, &config, &models, &names);
        v.parts = models;
        v.part_names = names;
    } else {
        mf_model_build(&model, &profile, &config);
        mf_profile_drop_frames(&profile); /* the model has its locations */
        v.model = &model;
        v.parts = &v.model;
        v.nparts = 1;
    }
    int rc = mf_write(r, rep, &v);
    if (!rc && r->save)
        mf_saved(r->save, &profile, &model);
    return rc;
}
