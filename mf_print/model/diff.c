/* Comparing two profiles (diff.h): each side read into a model, then the two models' stacks
 * matched as the reports show them and judged against their error bars. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "diff.h"
#include "mf_math.h"
#include "mf_print.h"
#include "pprof_read.h"

/* ---- reading a side ----------------------------------------------------------------------- */

int mf_side_read(struct mf_side *s, const char *const *paths, int npaths,
                 const struct mf_model_config *c)
{
    memset(s, 0, sizeof *s);
    s->paths = paths;
    s->npaths = npaths;
    int file = -1;
    for (int i = 0; i < npaths && file < 0; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0 && S_ISREG(st.st_mode))
            file = i;
    }
    if (file >= 0) {
        if (npaths > 1) {
            mf_error("%s is a file: a side of a comparison is one pprof file, or profile "
                     "directories", mf_esc(paths[file]));
            return 2;
        }
        s->pprof = true;
        return mf_pprof_read(s, paths[0], c);
    }
    for (int i = 0; i < npaths; i++)
        if (mf_profile_read_dir(&s->profile, paths[i]))
            return 2;
    mf_profile_finish(&s->profile);
    if (c->view == MF_VIEW_LIVE && s->profile.nfiles_read && mf_live_attach(&s->profile, true))
        return 1;
    if (s->profile.nfiles_read == 0) {
        mf_error("no readable profile file in %s%s", mf_esc(paths[0]),
                 npaths > 1 ? " and the other directories" : "");
        return 1;
    }
    mf_model_build(&s->model, &s->profile, c);
    /* The model has its locations: the raw frames (decoded from each thread file) go before
     * the other side is read, as main's one profile's do. */
    mf_profile_drop_frames(&s->profile);
    s->calls = s->model.view_calls;
    s->bytes = s->model.view_bytes;
    mf_sampling_text(&s->profile, s->sampling, sizeof s->sampling);
    return 0;
}

/* Appends to buf (of size) at *at; false once it is full. */
static bool mf_put(char *buf, size_t size, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool mf_put(char *buf, size_t size, size_t *at, const char *fmt, ...)
{
    if (*at >= size)
        return false;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *at, size - *at, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= size - *at) {
        *at = size;
        return false;
    }
    *at += (size_t)w;
    return true;
}

/* How the default mode's exact stretch went in one process image, from what its file
 * says at exit (exact_recorded). */
enum mf_stretch { MF_STRETCH_DONE, MF_STRETCH_CAPPED, MF_STRETCH_WHOLE_RUN, MF_STRETCH_UNKNOWN };

static enum mf_stretch mf_stretch_of(const struct mf_process *pr)
{
    if (!(pr->flags & MF_PROCESS_EXITED))
        return MF_STRETCH_UNKNOWN; /* still running, or killed: written at exit */
    if (pr->exact_recorded >= pr->exact_calls)
        return MF_STRETCH_DONE;
    /* Fewer than the setting: either the 5 ms cap ended the stretch (older cores) or threads
     * still running at exit held part of it, and calls followed it,
     * or the process ended inside it and every call it made was recorded exactly. The count
     * is taken in the profiler's exit handler, so calls after it (later exit handlers) are
     * not in it: tell the two apart by the calls instead. Sampled calls, or more calls than
     * the stretch allows, came after the stretch. */
    if (pr->flags & MF_PROCESS_EXACT_BY_CALLS) /* calls outside the stretch (before start-up, */
        return pr->sampled ? MF_STRETCH_CAPPED : MF_STRETCH_WHOLE_RUN; /* at exit) are exact */
    return pr->sampled || pr->calls > pr->exact_calls ? MF_STRETCH_CAPPED : MF_STRETCH_WHOLE_RUN;
}

void mf_sampling_text(const struct mf_profile *p, char *buf, size_t size)
{
    char a[40], b[40];
    size_t at = 0;
    buf[0] = '\0';
    bool any = false, exact = false;
    /* Fixed intervals (MALLOC_FREQ_SAMPLE=N), each once. */
    uint64_t fixed[8];
    int nfixed = 0;
    /* Default mode: processes per outcome of the exact stretch, the range of the calls it
     * recorded when capped, the setting and the cost share. */
    uint32_t count[4] = {0}, ndefault = 0;
    uint64_t capped_lo = UINT64_MAX, capped_hi = 0, setting = 0, ppm = 0, ramp = 0;
    bool timed = false; /* a process whose stretch had the time cap (an older core) */
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const struct mf_process *pr = &p->procs[i];
        if (!pr->has_file)
            continue;
        any = true;
        if (pr->sample_interval == 1) {
            exact = true;
        } else if (pr->sample_interval > 1) {
            int k = 0;
            while (k < nfixed && fixed[k] != pr->sample_interval)
                k++;
            if (k == nfixed && nfixed < 8)
                fixed[nfixed++] = pr->sample_interval;
        } else {
            enum mf_stretch st = mf_stretch_of(pr);
            count[st]++;
            ndefault++;
            if (st == MF_STRETCH_CAPPED) {
                capped_lo = pr->exact_recorded < capped_lo ? pr->exact_recorded : capped_lo;
                capped_hi = pr->exact_recorded > capped_hi ? pr->exact_recorded : capped_hi;
            }
            setting = pr->exact_calls > setting ? pr->exact_calls : setting;
            ppm = pr->cost_share_ppm > ppm ? pr->cost_share_ppm : ppm;
            ramp = pr->ramp_samples > ramp ? pr->ramp_samples : ramp;
            if (!(pr->flags & MF_PROCESS_EXACT_BY_CALLS))
                timed = true;
        }
    }
    if (!any) {
        snprintf(buf, size, "unknown (no process file)");
        return;
    }
    const char *sep = "";
    if (exact) {
        mf_put(buf, size, &at, "exact: every call recorded");
        sep = "; ";
    }
    for (int k = 0; k < nfixed; k++, sep = "; ")
        mf_put(buf, size, &at, "%s1 in %s calls sampled", sep, mf_fmt_count(b, fixed[k]));
    if (!ndefault)
        return;
    double cap_ms = MF_EXACT_NS_MAX / 1e6, share = (double)ppm / 1e4;
    char most[40] = "";
    if (timed)
        snprintf(most, sizeof most, ", %g ms at most", cap_ms);
    mf_fmt_count(b, setting);
    /* The budget, after the interval's ramp past the stretch where the files had one. */
    char budget[120];
    snprintf(budget, sizeof budget, "%s%s%ssamples take <= %g%% of time", ramp ? "a ramp of " : "",
             ramp ? mf_fmt_count(a, ramp) : "", ramp ? " samples, then " : "", share);
    mf_put(buf, size, &at, "%s", sep);
    if (count[MF_STRETCH_WHOLE_RUN] == ndefault) {
        mf_put(buf, size, &at, "every call exact: %s within %s exact stretch (the first %s "
               "calls%s)", ndefault == 1 ? "the process ended" : "each process ended",
               "its", b, most);
        return;
    }
    const char *each = ndefault == 1 ? "" : " of each process";
    if (count[MF_STRETCH_DONE] == ndefault) {
        mf_put(buf, size, &at, "first %s calls%s exact, then adaptive", b, each);
    } else if (count[MF_STRETCH_CAPPED] == ndefault) {
        char range[90], hi[40];
        mf_fmt_count(a, capped_lo);
        snprintf(range, sizeof range, "%s%s%s", a, capped_hi != capped_lo ? " to " : "",
                 capped_hi != capped_lo ? mf_fmt_count(hi, capped_hi) : "");
        if (timed)
            mf_put(buf, size, &at, "first %s calls%s exact (the %g ms cap on the exact stretch "
                   "came before %s), then adaptive", range, each, cap_ms, b);
        else
            mf_put(buf, size, &at, "first %s calls%s exact (threads still running at exit held "
                   "the rest of the %s), then adaptive", range, each, b);
    } else if (count[MF_STRETCH_UNKNOWN] == ndefault) {
        mf_put(buf, size, &at, "first %s calls%s exact or fewer (%s%sits length is written at "
               "exit, and %s not exited: still running, exec'd or killed), then adaptive", b,
               each, timed ? "the stretch stops at 5 ms" : "", timed ? ": " : "",
               ndefault == 1 ? "the process has" : "no process has");
    } else {
        /* A mix: say how many processes each outcome had. */
        mf_put(buf, size, &at, "first %s calls of each process exact%s%s%s, then adaptive "
               "(%s); the exact stretch ", b, timed ? " (" : "", timed ? most + 2 : "",
               timed ? ")" : "", budget);
        const char *sep2 = "";
        if (count[MF_STRETCH_DONE])
            mf_put(buf, size, &at, "%scompleted in %u", sep2, count[MF_STRETCH_DONE]), sep2 = ", ";
        if (count[MF_STRETCH_CAPPED]) {
            mf_put(buf, size, &at, "%scut short %s in %u (%s", sep2,
                   timed ? "by its time cap" : "(threads still running held the rest)",
                   count[MF_STRETCH_CAPPED], mf_fmt_count(a, capped_lo));
            if (capped_hi != capped_lo)
                mf_put(buf, size, &at, " to %s", mf_fmt_count(a, capped_hi));
            mf_put(buf, size, &at, " calls exact)");
            sep2 = ", ";
        }
        if (count[MF_STRETCH_WHOLE_RUN])
            mf_put(buf, size, &at, "%swas the whole run in %u (every call exact)", sep2,
                   count[MF_STRETCH_WHOLE_RUN]), sep2 = ", ";
        if (count[MF_STRETCH_UNKNOWN])
            mf_put(buf, size, &at, "%sis not known in %u (not exited: still running, exec'd "
                   "or killed)", sep2, count[MF_STRETCH_UNKNOWN]);
        return;
    }
    mf_put(buf, size, &at, " (%s)", budget);
}

static const char *mf_program(const struct mf_process *pr)
{
    return pr->has_file && pr->exe[0] ? mf_basename(pr->exe) : "?";
}

void mf_side_programs(const struct mf_profile *p, char *buf, size_t size)
{
    size_t at = 0;
    int shown = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const char *exe = mf_program(&p->procs[i]);
        bool dup = false;
        for (uint32_t j = 0; j < i && !dup; j++)
            dup = strcmp(exe, mf_program(&p->procs[j])) == 0;
        if (dup)
            continue;
        int w = snprintf(buf + at, size - at, "%s%s", shown ? ", " : "", shown == 3 ? "..." : mf_esc(exe));
        if (w < 0 || (size_t)w >= size - at)
            return;
        at += (size_t)w;
        if (++shown == 4)
            break;
    }
    if (p->nprocs == 1)
        snprintf(buf + at, size - at, " (pid %u)", p->procs[0].pid);
    else
        snprintf(buf + at, size - at, "%s(%u process images)", at ? " " : "", p->nprocs);
}

const char *mf_fmt_signed(char *buf, int64_t v)
{
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    buf[0] = v > 0 ? '+' : v < 0 ? '-' : '\0';
    mf_fmt_count(buf + (v != 0), mag);
    return buf;
}

/* ---- matching the stacks --------------------------------------------------------------- */

struct mf_row_key {
    const struct mf_diff_row *rows;
    const struct mf_frame *f;
    uint32_t n;
};

static bool mf_row_eq(const void *ctx, uint32_t val)
{
    const struct mf_row_key *k = ctx;
    const struct mf_diff_row *r = &k->rows[val];
    if (r->nframes != k->n)
        return false;
    for (uint32_t i = 0; i < k->n; i++)
        if (r->frames[i].name != k->f[i].name)
            return false;
    return true;
}

static uint64_t mf_names_hash(const struct mf_frame *f, uint32_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15u ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = mf_hash_u64(h ^ f[i].name);
    return h;
}

static void mf_vals_add(struct mf_diff_vals *v, const struct mf_diff_vals *x)
{
    v->calls += x->calls;
    v->bytes += x->bytes;
    v->samples += x->samples;
    v->var += x->var;
    v->estimated |= x->estimated;
}

static int64_t mf_sub(uint64_t a, uint64_t b)
{
    uint64_t d = a >= b ? a - b : b - a;
    int64_t m = d > INT64_MAX ? INT64_MAX : (int64_t)d;
    return a >= b ? m : -m;
}

/* The change and whether it counts. An estimate whose stack no weighted sample hit is given
 * the error of one sample at its side's interval, as the tree's error bars are. */
static void mf_judge(struct mf_diff_row *r, const uint64_t interval[2])
{
    r->dcalls = mf_sub(r->v[1].calls, r->v[0].calls);
    r->dbytes = mf_sub(r->v[1].bytes, r->v[0].bytes);
    double var = 0;
    bool estimated = false;
    for (int k = 0; k < 2; k++) {
        if (!r->v[k].estimated)
            continue;
        estimated = true;
        double v = (double)r->v[k].var, n = (double)interval[k];
        var += n > 1 && v < n * (n - 1) ? n * (n - 1) : v;
    }
    r->error = mf_sqrt(var);
    double mag = r->dcalls < 0 ? -(double)r->dcalls : (double)r->dcalls;
    r->significant = r->dcalls != 0 && (!estimated || mag > MF_DIFF_SIGMAS * r->error);
}

static const uint32_t *mf_name_rank; /* mf_str_ranks(): names compared as strcmp would */

static int mf_frames_cmp(const struct mf_diff_row *x, const struct mf_diff_row *y)
{
    for (uint32_t i = 0; i < x->nframes && i < y->nframes; i++) {
        uint32_t a = mf_name_rank[x->frames[i].name], b = mf_name_rank[y->frames[i].name];
        if (a != b)
            return a < b ? -1 : 1;
    }
    return x->nframes < y->nframes ? -1 : x->nframes > y->nframes;
}

static uint64_t mf_mag(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* By the size of the change in calls, then in bytes, then by name. */
static int mf_row_cmp(const struct mf_diff_row *x, const struct mf_diff_row *y)
{
    if (mf_mag(x->dcalls) != mf_mag(y->dcalls))
        return mf_mag(x->dcalls) > mf_mag(y->dcalls) ? -1 : 1;
    if (mf_mag(x->dbytes) != mf_mag(y->dbytes))
        return mf_mag(x->dbytes) > mf_mag(y->dbytes) ? -1 : 1;
    return mf_frames_cmp(x, y);
}

static int mf_site_qcmp(const void *a, const void *b)
{
    return mf_row_cmp(a, b);
}

static const uint32_t *mf_site_rank; /* stack row sorting: its site's place */
static const struct mf_diff_row *mf_sort_rows;

static int mf_stack_qcmp(const void *a, const void *b)
{
    const struct mf_diff_row *x = &mf_sort_rows[*(const uint32_t *)a];
    const struct mf_diff_row *y = &mf_sort_rows[*(const uint32_t *)b];
    uint32_t sx = mf_site_rank[x->first], sy = mf_site_rank[y->first];
    if (sx != sy)
        return sx < sy ? -1 : 1;
    return mf_row_cmp(x, y);
}

void mf_diff_build(struct mf_diff *d, const struct mf_side *old, const struct mf_side *new_)
{
    memset(d, 0, sizeof *d);
    d->side[0] = old;
    d->side[1] = new_;
    struct mf_diff_row *rows = NULL;
    uint32_t nrows = 0, cap = 0;
    struct mf_map map = {0};
    struct mf_frames fr = {0};
    for (int k = 0; k < 2; k++) {
        const struct mf_model *m = &d->side[k]->model;
        d->interval[k] = m->sample_interval ? m->sample_interval : 1;
        d->row_of[k] = mf_xcalloc(m->nstacks, sizeof *d->row_of[k]);
        for (uint32_t i = 0; i < m->nstacks; i++) {
            const struct mf_stack *s = &m->stacks[i];
            mf_model_frames(m, s, &fr);
            struct mf_row_key key = {rows, fr.v, fr.n};
            bool added;
            uint32_t r = mf_map_put(&map, mf_names_hash(fr.v, fr.n), mf_row_eq, &key, nrows,
                                    &added);
            if (added) {
                MF_GROW(rows, nrows, cap);
                memset(&rows[nrows], 0, sizeof *rows);
                rows[nrows].site = fr.v[0].name;
                rows[nrows].nframes = fr.n;
                rows[nrows].frames = mf_xmalloc(fr.n * sizeof *fr.v);
                memcpy(rows[nrows].frames, fr.v, fr.n * sizeof *fr.v);
                nrows++;
            }
            struct mf_diff_row *row = &rows[r];
            /* file:line as the stack with the most calls has them */
            if (s->calls > row->best_calls) {
                memcpy(row->frames, fr.v, fr.n * sizeof *fr.v);
                row->best_calls = s->calls;
            }
            struct mf_diff_vals x = {s->calls, s->bytes, s->samples, s->var, s->estimated};
            mf_vals_add(&row->v[k], &x);
            d->row_of[k][i] = r;
        }
    }
    free(fr.v);
    mf_map_free(&map);
    /* A stack one side does not have is exactly 0 there only if that side counted every call. */
    for (uint32_t r = 0; r < nrows; r++)
        for (int k = 0; k < 2; k++)
            if (!rows[r].v[k].calls && !rows[r].v[k].samples && d->side[k]->model.estimated)
                rows[r].v[k].estimated = true;

    /* Sites: the stack rows summed by their first frame. */
    struct mf_map sites = {0};
    struct mf_diff_row *srows = NULL;
    uint32_t nsites = 0, scap = 0;
    for (uint32_t r = 0; r < nrows; r++) {
        struct mf_diff_row *row = &rows[r];
        bool added;
        uint32_t s = mf_map_put(&sites, row->site, NULL, NULL, nsites, &added);
        if (added) {
            MF_GROW(srows, nsites, scap);
            memset(&srows[nsites], 0, sizeof *srows);
            srows[nsites].site = row->site;
            srows[nsites].nframes = 1;
            srows[nsites].frames = mf_xmalloc(sizeof *srows->frames);
            nsites++;
        }
        struct mf_diff_row *site = &srows[s];
        uint64_t calls = row->v[0].calls + row->v[1].calls;
        if (site->n == 0 || calls > site->best_calls) { /* its busiest stack's file:line */
            site->frames[0] = row->frames[0];
            site->best_calls = calls;
        }
        for (int k = 0; k < 2; k++)
            mf_vals_add(&site->v[k], &row->v[k]);
        site->n++;
        row->first = s; /* for now: the site's index */
        mf_judge(row, d->interval);
    }
    mf_map_free(&sites);
    for (uint32_t s = 0; s < nsites; s++)
        mf_judge(&srows[s], d->interval);

    /* Sort the sites; then the stacks by their site's place, and point the sites at them. */
    uint32_t *order = mf_xmalloc((nsites ? nsites : 1) * sizeof *order);
    struct mf_diff_row *sorted = mf_xmalloc((nsites ? nsites : 1) * sizeof *sorted);
    if (nsites)
        memcpy(sorted, srows, nsites * sizeof *srows);
    uint32_t *name_rank = mf_str_ranks(); /* no name is interned from here on */
    mf_name_rank = name_rank;
    if (nsites > 1)
        qsort(sorted, nsites, sizeof *sorted, mf_site_qcmp);
    /* The site index each old site index went to: find it by the site name. */
    struct mf_map placed = {0};
    for (uint32_t s = 0; s < nsites; s++) {
        bool added;
        mf_map_put(&placed, sorted[s].site, NULL, NULL, s, &added);
    }
    for (uint32_t s = 0; s < nsites; s++)
        order[s] = mf_map_get(&placed, srows[s].site, NULL, NULL);
    mf_map_free(&placed);
    free(srows);
    uint32_t *perm = mf_xmalloc((nrows ? nrows : 1) * sizeof *perm);
    for (uint32_t r = 0; r < nrows; r++)
        perm[r] = r;
    mf_site_rank = order;
    mf_sort_rows = rows;
    if (nrows > 1)
        qsort(perm, nrows, sizeof *perm, mf_stack_qcmp);
    free(name_rank);
    d->stacks = mf_xmalloc((nrows ? nrows : 1) * sizeof *d->stacks);
    uint32_t *where = mf_xmalloc((nrows ? nrows : 1) * sizeof *where);
    for (uint32_t i = 0; i < nrows; i++) {
        d->stacks[i] = rows[perm[i]];
        where[perm[i]] = i;
    }
    for (uint32_t i = 0; i < nrows; i++) {
        struct mf_diff_row *site = &sorted[order[d->stacks[i].first]];
        if (i == 0 || d->stacks[i - 1].first != d->stacks[i].first)
            site->first = i;
        d->sig_stacks += d->stacks[i].significant;
    }
    for (uint32_t i = 0; i < nrows; i++)
        d->stacks[i].first = d->stacks[i].n = 0;
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < d->side[k]->model.nstacks; i++)
            d->row_of[k][i] = where[d->row_of[k][i]];
    for (uint32_t s = 0; s < nsites; s++)
        d->sig_sites += sorted[s].significant;
    d->sites = sorted;
    d->nsites = nsites;
    d->nstacks = nrows;
    free(rows);
    free(perm);
    free(where);
    free(order);
}

bool mf_diff_live(const struct mf_diff *d)
{
    return d->side[0]->model.view == MF_VIEW_LIVE || d->side[1]->model.view == MF_VIEW_LIVE;
}
