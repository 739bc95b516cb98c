/* A comparison (--base) as a table or as CSV (report.h). Both list the allocation sites by the
 * size of the change in calls, each followed by its stacks (merged by function names, as the
 * CSV's rows are) sorted the same way. The table folds rows whose change is under the
 * threshold (percent of the larger side's calls); the CSV keeps every row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

/* ---- the table --------------------------------------------------------------------------- */

enum { MF_COL_CHANGE, MF_COL_ERROR, MF_COL_OLD, MF_COL_NEW, MF_COL_PCT, MF_COL_BYTES, MF_NCOLS };

struct mf_dline {
    bool mark; /* a significant change */
    char cell[MF_NCOLS][48];
    char *text;
};

struct mf_dtable {
    struct mf_dline *v;
    uint32_t n, cap;
};

static void mf_fmt_side(char *buf, size_t size, const struct mf_diff_vals *v)
{
    char num[40];
    snprintf(buf, size, "%s%s", v->estimated && (v->calls || v->samples) ? "~" : "",
             mf_fmt_count(num, v->calls));
}

static void mf_fmt_signed_bytes(char *buf, int64_t v)
{
    char b[40];
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    mf_fmt_bytes(b, (double)mag);
    snprintf(buf, 48, "%s%s", v > 0 ? "+" : v < 0 ? "-" : "", b);
}

static struct mf_dline *mf_dline(struct mf_dtable *t, const struct mf_diff_row *r,
                                 const struct mf_diff_vals *v)
{
    MF_GROW(t->v, t->n, t->cap);
    struct mf_dline *l = &t->v[t->n++];
    memset(l, 0, sizeof *l);
    l->mark = r->significant;
    mf_fmt_signed(l->cell[MF_COL_CHANGE], r->dcalls);
    if (r->error > 0) {
        char num[40];
        snprintf(l->cell[MF_COL_ERROR], sizeof l->cell[0], "±%s",
                 mf_fmt_count(num, (uint64_t)(r->error + 0.5)));
    }
    mf_fmt_side(l->cell[MF_COL_OLD], sizeof l->cell[0], &v[0]);
    mf_fmt_side(l->cell[MF_COL_NEW], sizeof l->cell[0], &v[1]);
    if (v[0].calls)
        snprintf(l->cell[MF_COL_PCT], sizeof l->cell[0], "%+.1f%%",
                 100.0 * (double)r->dcalls / (double)v[0].calls);
    else
        snprintf(l->cell[MF_COL_PCT], sizeof l->cell[0], v[1].calls ? "new" : "");
    mf_fmt_signed_bytes(l->cell[MF_COL_BYTES], r->dbytes);
    return l;
}

/* The texts below are for a terminal: every name escaped (mf_esc), none cut. */
static char *mf_frame_text(const struct mf_frame *f)
{
    char *s;
    int n = f->file ? asprintf(&s, "%s (%s:%u)", mf_esc(mf_str(f->name)),
                               mf_esc(mf_basename(mf_str(f->file))), f->line)
                    : asprintf(&s, "%s", mf_esc(mf_str(f->name)));
    if (n < 0)
        mf_out_of_memory();
    return s;
}

/* "← caller ← its caller ...": the stack past its site. */
static char *mf_callers_text(const struct mf_diff_row *r)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    if (!f)
        mf_out_of_memory();
    fputs("  ", f);
    if (r->nframes < 2)
        fputs("(no caller recorded)", f);
    for (uint32_t i = 1; i < r->nframes; i++)
        fprintf(f, "%s← %s", i > 1 ? " " : "", mf_esc(mf_str(r->frames[i].name)));
    if (fclose(f) != 0 || !s)
        mf_out_of_memory();
    return s;
}

static int64_t mf_change(uint64_t old, uint64_t new_)
{
    uint64_t d = new_ >= old ? new_ - old : old - new_;
    int64_t m = d > INT64_MAX ? INT64_MAX : (int64_t)d;
    return new_ >= old ? m : -m;
}

static bool mf_shown(const struct mf_diff_row *r, double threshold, uint64_t base)
{
    double mag = r->dcalls < 0 ? -(double)r->dcalls : (double)r->dcalls;
    return mag * 100.0 >= threshold * (double)base;
}

/* A fold line: the rows it stands for summed; their significant ones counted. */
static void mf_fold_line(struct mf_dtable *t, const struct mf_diff_row *rows, const bool *folded,
                         uint32_t n, const char *what, bool nested, double threshold)
{
    struct mf_diff_row sum;
    memset(&sum, 0, sizeof sum);
    uint32_t count = 0, sig = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!folded[i])
            continue;
        count++;
        sig += rows[i].significant;
        for (int k = 0; k < 2; k++) {
            sum.v[k].calls += rows[i].v[k].calls;
            sum.v[k].bytes += rows[i].v[k].bytes;
            sum.v[k].var += rows[i].v[k].var;
            sum.v[k].estimated |= rows[i].v[k].estimated;
        }
    }
    if (!count)
        return;
    sum.dcalls = mf_change(sum.v[0].calls, sum.v[1].calls);
    sum.dbytes = mf_change(sum.v[0].bytes, sum.v[1].bytes);
    struct mf_dline *l = mf_dline(t, &sum, sum.v);
    l->mark = false;
    l->cell[MF_COL_ERROR][0] = '\0';
    char text[256];
    snprintf(text, sizeof text, "%s… %u more %s%s changed by under %g%% of calls (%u of them "
             "significantly)", nested ? "  " : "", count, what, count == 1 ? "" : "s", threshold,
             sig);
    l->text = mf_xstrdup(text);
}

static void mf_side_header(FILE *out, const char *label, const struct mf_side *s, bool live)
{
    char programs[600], a[40], b[40];
    mf_side_programs(&s->profile, programs, sizeof programs);
    fprintf(out, "  %-10s %s%s%s: %s\n", label, mf_esc(s->paths[0]),
            s->npaths > 1 ? " and more" : "", s->pprof ? " (pprof)" : "", programs);
    if (live) /* estimates when sampled, as the tree's live header says */
        fprintf(out, "             %s allocations alive, %s; sampling: %s\n",
                mf_fmt_count(a, s->calls), mf_fmt_bytes(b, (double)s->bytes), mf_esc(s->sampling));
    else
        fprintf(out, "             %s calls (exact), %s requested; sampling: %s\n",
                mf_fmt_count(a, s->calls), mf_fmt_bytes(b, (double)s->bytes), mf_esc(s->sampling));
}

bool mf_report_diff_tree(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_diff *d = v->diff;
    const struct mf_side *old = d->side[0], *new_ = d->side[1];
    bool live = mf_diff_live(d);
    fprintf(out, "malloc_freq comparison: new against old%s\n", live ? ", of the live heap" : "");
    mf_side_header(out, "old", old, live);
    mf_side_header(out, "new", new_, live);
    char a[48], b[48];
    int64_t dc = mf_change(old->calls, new_->calls), db = mf_change(old->bytes, new_->bytes);
    mf_fmt_signed_bytes(b, db);
    fprintf(out, "  change     %s %s", mf_fmt_signed(a, dc), live ? "allocations alive" : "calls");
    if (old->calls)
        fprintf(out, " (%+.1f%%)", 100.0 * (double)dc / (double)old->calls);
    fprintf(out, ", %s\n", b);
    fprintf(out, "  verdict    %u of %u site%s and %u of %u stack%s changed (*): exact counts "
            "that differ,\n             or estimates that moved by more than %d standard errors "
            "(±) of the change\n",
            d->sig_sites, d->nsites, d->nsites == 1 ? "" : "s", d->sig_stacks, d->nstacks,
            d->nstacks == 1 ? "" : "s", MF_DIFF_SIGMAS);
    fputc('\n', out);
    if (d->nsites == 0) {
        fputs("no stacks on either side\n", out);
        return false;
    }

    uint64_t base = old->calls > new_->calls ? old->calls : new_->calls;
    struct mf_dtable t = {0};
    bool *sfold = mf_xcalloc(d->nsites, sizeof *sfold);
    bool *kfold = mf_xcalloc(d->nstacks, sizeof *kfold);
    for (uint32_t i = 0; i < d->nsites; i++) {
        const struct mf_diff_row *site = &d->sites[i];
        if (!mf_shown(site, o->threshold, base)) {
            sfold[i] = true;
            continue;
        }
        mf_dline(&t, site, site->v)->text = mf_frame_text(&site->frames[0]);
        bool any = false;
        for (uint32_t k = site->first; k < site->first + site->n; k++) {
            const struct mf_diff_row *r = &d->stacks[k];
            kfold[k] = !mf_shown(r, o->threshold, base);
            any |= kfold[k];
            if (!kfold[k])
                mf_dline(&t, r, r->v)->text = mf_callers_text(r);
        }
        if (any)
            mf_fold_line(&t, d->stacks + site->first, kfold + site->first, site->n, "stack", true,
                         o->threshold);
    }
    mf_fold_line(&t, d->sites, sfold, d->nsites, "site", false, o->threshold);

    static const char *const heads[MF_NCOLS] = {"change", "±error", "old", "new", "%", "bytes"};
    int w[MF_NCOLS];
    bool err_col = false;
    for (int c = 0; c < MF_NCOLS; c++)
        w[c] = mf_text_width(heads[c]);
    for (uint32_t i = 0; i < t.n; i++)
        for (int c = 0; c < MF_NCOLS; c++) {
            int x = mf_text_width(t.v[i].cell[c]);
            w[c] = x > w[c] ? x : w[c];
            err_col |= c == MF_COL_ERROR && x > 0;
        }
    fputs("  ", out);
    for (int c = 0; c < MF_NCOLS; c++) {
        if (c == MF_COL_ERROR && !err_col)
            continue;
        mf_pad(out, w[c] - mf_text_width(heads[c]) + (c ? 1 : 0));
        fputs(heads[c], out);
    }
    fputs("  allocation site, then its stacks (callers)\n", out);
    for (uint32_t i = 0; i < t.n; i++) {
        const struct mf_dline *l = &t.v[i];
        fputs(l->mark ? "* " : "  ", out);
        for (int c = 0; c < MF_NCOLS; c++) {
            if (c == MF_COL_ERROR && !err_col)
                continue;
            mf_pad(out, w[c] - mf_text_width(l->cell[c]) + (c ? 1 : 0));
            fputs(l->cell[c], out);
        }
        fprintf(out, "  %s\n", l->text);
        free(l->text);
    }
    free(t.v);
    free(sfold);
    free(kfold);
    return false;
}

/* ---- CSV ------------------------------------------------------------------------------------ */

static void mf_csv_row(FILE *out, const char *level, const struct mf_diff_row *r)
{
    fprintf(out, "%s,%s,%lld,%llu,%lld,%llu,%llu,%llu,%llu,%llu,%llu,", level,
            r->significant ? "yes" : "no", (long long)r->dcalls,
            (unsigned long long)(r->error + 0.5), (long long)r->dbytes,
            (unsigned long long)r->v[0].calls, (unsigned long long)r->v[1].calls,
            (unsigned long long)r->v[0].bytes, (unsigned long long)r->v[1].bytes,
            (unsigned long long)r->v[0].samples, (unsigned long long)r->v[1].samples);
    mf_csv_frames_field(out, r->frames, r->nframes, false);
    fputc(',', out);
    mf_csv_frames_field(out, r->frames, r->nframes, true);
    fputc('\n', out);
}

bool mf_report_diff_csv(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_diff *d = v->diff;
    (void)o;
    if (mf_diff_live(d)) /* the live heap: allocations alive and their bytes */
        fputs("level,significant,alive_change,alive_error,live_bytes_change,old_alive,new_alive,"
              "old_live_bytes,new_live_bytes,old_samples,new_samples,stack,locations\n", out);
    else
        fputs("level,significant,calls_change,calls_error,bytes_change,old_calls,new_calls,"
              "old_bytes,new_bytes,old_samples,new_samples,stack,locations\n", out);
    for (uint32_t i = 0; i < d->nsites; i++) {
        const struct mf_diff_row *site = &d->sites[i];
        mf_csv_row(out, "site", site);
        for (uint32_t k = site->first; k < site->first + site->n; k++)
            mf_csv_row(out, "stack", &d->stacks[k]);
    }
    return false;
}
