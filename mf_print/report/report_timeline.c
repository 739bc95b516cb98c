/* --timeline: the run's timeline by site (mf_tl_series_build), as text with a sparkline per
 * site, as CSV and as JSON. */
#include <stdlib.h>
#include <string.h>

#include "mf_math.h"
#include "mf_print.h"
#include "report.h"

#define MF_TL_TOP_DEFAULT 6
#define MF_SPARK_COLUMNS 60

struct mf_site_total {
    uint32_t name;
    uint64_t calls;
};

static int mf_site_total_cmp(const void *a, const void *b)
{
    const struct mf_site_total *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls < y->calls ? 1 : -1;
    return strcmp(mf_str(x->name), mf_str(y->name));
}

void mf_tl_series_build(struct mf_tl_series *s, const struct mf_model *m,
                        const struct mf_timeline *t, const uint64_t *ids, uint32_t top)
{
    const struct mf_profile *p = m->p;
    memset(s, 0, sizeof *s);
    if (!top)
        top = MF_TL_TOP_DEFAULT;
    /* A record's stack: its id's raw stack, that raw stack's model stack. */
    struct mf_map by_id = {0};
    bool added;
    for (uint32_t i = 0; i < p->nstacks; i++)
        mf_map_put(&by_id, ids[i], NULL, NULL, i, &added);
    uint32_t *of_raw = mf_xmalloc(((size_t)p->nstacks + 1) * sizeof *of_raw);
    memset(of_raw, 0xff, ((size_t)p->nstacks + 1) * sizeof *of_raw);
    uint32_t not_profiled = UINT32_MAX;
    uint32_t *site = mf_xmalloc(((size_t)m->nstacks + 1) * sizeof *site);
    struct mf_frames fr = {0};
    for (uint32_t k = 0; k < m->nstacks; k++) {
        const struct mf_stack *st = &m->stacks[k];
        if (st->raw != UINT32_MAX)
            of_raw[st->raw] = k;
        if (st->flags & MF_STACK_NOT_PROFILED)
            not_profiled = k;
        mf_model_frames(m, st, &fr);
        site[k] = fr.n ? fr.v[0].name : mf_intern(MF_NAME_NO_STACK);
        s->estimated |= st->estimated;
    }
    free(fr.v);
    s->stack_of = mf_xmalloc(((size_t)t->nrecs + 1) * sizeof *s->stack_of);
    /* Every site's calls over the timeline, by interned name. */
    uint64_t *by_name = NULL;
    uint32_t nby_name = 0;
    for (uint32_t i = 0; i < t->nrecs; i++) {
        uint32_t raw = t->recs[i].id ? mf_map_get(&by_id, t->recs[i].id, NULL, NULL) : UINT32_MAX;
        uint32_t k = !t->recs[i].id ? not_profiled : raw != MF_MAP_EMPTY && raw != UINT32_MAX
                                                         ? of_raw[raw] : UINT32_MAX;
        s->stack_of[i] = k;
        if (k != UINT32_MAX) {
            by_name = mf_grow_zeroed(by_name, &nby_name, site[k], sizeof *by_name);
            by_name[site[k]] += t->recs[i].calls;
        }
    }
    struct mf_site_total *tot = mf_xmalloc(((size_t)nby_name + 1) * sizeof *tot);
    uint32_t ntot = 0;
    for (uint32_t i = 0; i < nby_name; i++)
        if (by_name[i])
            tot[ntot++] = (struct mf_site_total){i, by_name[i]};
    qsort(tot, ntot, sizeof *tot, mf_site_total_cmp);
    uint32_t shown = ntot < top ? ntot : top;
    /* The sites' places: the top ones, then [other sites] (the rest). */
    uint32_t *place = mf_xcalloc((size_t)nby_name + 1, sizeof *place);
    for (uint32_t i = 0; i < shown; i++)
        place[tot[i].name] = i + 1;
    s->npoints = t->npoints;
    s->nsites = shown + 1;
    s->names = mf_xmalloc(s->nsites * sizeof *s->names);
    for (uint32_t i = 0; i < shown; i++)
        s->names[i] = tot[i].name;
    s->names[shown] = mf_intern("[other sites]");
    size_t cells = (size_t)s->nsites * s->npoints + 1;
    s->calls = mf_xcalloc(cells, sizeof *s->calls);
    s->bytes = mf_xcalloc(cells, sizeof *s->bytes);
    s->var = mf_xcalloc(cells, sizeof *s->var);
    bool other = false;
    for (uint32_t j = 0; j < t->npoints; j++) {
        const struct mf_tl_pt *pt = &t->points[j];
        for (uint32_t i = pt->first; i < pt->first + pt->h.nstacks; i++) {
            uint32_t k = s->stack_of[i];
            uint32_t at = k == UINT32_MAX ? shown : place[site[k]] ? place[site[k]] - 1 : shown;
            size_t c = (size_t)at * s->npoints + j;
            s->calls[c] += t->recs[i].calls;
            s->bytes[c] += t->recs[i].bytes;
            s->var[c] += t->recs[i].var;
            other |= at == shown;
        }
        size_t c = (size_t)shown * s->npoints + j;
        s->calls[c] += pt->h.other_calls;
        s->bytes[c] += pt->h.other_bytes;
        other |= pt->h.other_calls || pt->h.other_bytes;
    }
    if (!other)
        s->nsites = shown;
    free(place);
    free(tot);
    free(by_name);
    free(site);
    free(of_raw);
    mf_map_free(&by_id);
}

void mf_tl_series_free(struct mf_tl_series *s)
{
    free(s->names);
    free(s->calls);
    free(s->bytes);
    free(s->var);
    free(s->stack_of);
    memset(s, 0, sizeof *s);
}

/* A point's length in seconds (at least a nanosecond). */
static double mf_pt_seconds(const struct mf_tl_pt *pt)
{
    uint64_t ns = pt->h.end_ns - pt->h.start_ns;
    return (double)(ns ? ns : 1) / 1e9;
}

static double mf_pt_at(const struct mf_timeline *t, uint64_t ns)
{
    return ns >= t->points[0].h.start_ns ? (double)(ns - t->points[0].h.start_ns) / 1e9 : 0;
}

/* A rate for people: "1,234" per second, rounded. */
static const char *mf_fmt_rate(char *buf, double r)
{
    return mf_fmt_count(buf, (uint64_t)(r + 0.5));
}

/* The sparkline of a series (calls per point, or NULL for the exact totals), one column per
 * group of points: each group's rate against the series' highest. */
static void mf_sparkline(FILE *out, const struct mf_timeline *t, const uint64_t *calls,
                         bool utf8, double *peak_out)
{
    static const char *const blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    static const char ascii[] = "._-=+*#@";
    uint32_t n = t->npoints, cols = n < MF_SPARK_COLUMNS ? n : MF_SPARK_COLUMNS;
    double rate[MF_SPARK_COLUMNS], peak = 0;
    for (uint32_t c = 0; c < cols; c++) {
        uint32_t lo = (uint32_t)((uint64_t)c * n / cols), hi = (uint32_t)((uint64_t)(c + 1) * n / cols);
        double sum = 0, secs = 0;
        for (uint32_t j = lo; j < hi; j++) {
            sum += (double)(calls ? calls[j] : t->points[j].h.calls);
            secs += mf_pt_seconds(&t->points[j]);
        }
        rate[c] = sum / secs;
        peak = rate[c] > peak ? rate[c] : peak;
    }
    for (uint32_t c = 0; c < cols; c++) {
        int level = peak > 0 && rate[c] > 0 ? (int)(rate[c] / peak * 8 - 1e-9) : -1;
        level = level > 7 ? 7 : level;
        if (level < 0)
            fputc(' ', out);
        else if (utf8)
            fputs(blocks[level], out);
        else
            fputc(ascii[level], out);
    }
    mf_pad(out, (int)(MF_SPARK_COLUMNS - cols));
    *peak_out = peak;
}

bool mf_report_timeline_text(FILE *out, const struct mf_report_input *v,
                             const struct mf_report_options *o)
{
    const struct mf_timeline *t = v->timeline;
    char a[40], b[40], c[40];
    fprintf(out, "timeline of %s: ", mf_esc(o->dirs[0]));
    if (!t->npoints) {
        fputs("no point recorded yet\n", out);
        return false;
    }
    struct mf_tl_series s;
    mf_tl_series_build(&s, v->model, t, v->stack_ids, o->top);
    uint64_t total = 0, bytes = 0;
    for (uint32_t j = 0; j < t->npoints; j++) {
        total += t->points[j].h.calls;
        bytes += t->points[j].h.bytes;
    }
    const struct mf_tl_pt *last = &t->points[t->npoints - 1];
    fprintf(out, "%u points over %.2f s (snapshots every %.2f s now), %s calls of %s (exact)%s\n",
            t->npoints, mf_pt_at(t, last->h.end_ns), (double)t->interval_ns / 1e9,
            mf_fmt_count(a, total), mf_fmt_bytes(b, (double)bytes),
            t->last ? "" : "; not recorded to its end (still running, or the recorder was stopped)");
    bool utf8 = mf_locale_is_utf8();
    uint32_t cols = t->npoints < MF_SPARK_COLUMNS ? t->npoints : MF_SPARK_COLUMNS;
    fprintf(out, "calls/s over time, a column per %.2f s (%s: none .. the line's peak)%s\n",
            mf_pt_at(t, last->h.end_ns) / cols, utf8 ? "blank, ▁ .. █" : "blank, . .. @",
            s.estimated ? "; ~ marks estimates" : "");
    fprintf(out, "%-*s %12s %12s %12s  site\n", MF_SPARK_COLUMNS, "", "peak calls/s", "calls",
            "bytes");
    double peak;
    mf_sparkline(out, t, NULL, utf8, &peak);
    fprintf(out, " %12s %12s %12s  [all calls]\n", mf_fmt_rate(a, peak), mf_fmt_count(b, total),
            mf_fmt_bytes(c, (double)bytes));
    for (uint32_t i = 0; i < s.nsites; i++) {
        const uint64_t *sc = s.calls + (size_t)i * s.npoints, *sb = s.bytes + (size_t)i * s.npoints;
        uint64_t n = 0, nb = 0;
        for (uint32_t j = 0; j < s.npoints; j++) {
            n += sc[j];
            nb += sb[j];
        }
        mf_sparkline(out, t, sc, utf8, &peak);
        const char *est = s.estimated ? "~" : "";
        char pk[48], cl[48], by[48];
        snprintf(pk, sizeof pk, "%s%s", est, mf_fmt_rate(a, peak));
        snprintf(cl, sizeof cl, "%s%s", est, mf_fmt_count(b, n));
        snprintf(by, sizeof by, "%s%s", est, mf_fmt_bytes(c, (double)nb));
        fprintf(out, " %12s %12s %12s  [%u] %s\n", pk, cl, by, i + 1, mf_esc(mf_str(s.names[i])));
    }
    fputs("\ncalls/s per point (the sites by their numbers above)\n", out);
    fprintf(out, "%8s %8s %12s", "from s", "to s", "all");
    for (uint32_t i = 0; i < s.nsites; i++) {
        char h[16];
        snprintf(h, sizeof h, "[%u]", i + 1);
        fprintf(out, " %12s", h);
    }
    fputc('\n', out);
    for (uint32_t j = 0; j < t->npoints; j++) {
        const struct mf_tl_pt *pt = &t->points[j];
        double secs = mf_pt_seconds(pt);
        fprintf(out, "%8.2f %8.2f %12s", mf_pt_at(t, pt->h.start_ns), mf_pt_at(t, pt->h.end_ns),
                mf_fmt_rate(a, (double)pt->h.calls / secs));
        for (uint32_t i = 0; i < s.nsites; i++)
            fprintf(out, " %12s", mf_fmt_rate(a, (double)s.calls[(size_t)i * s.npoints + j] / secs));
        fputc('\n', out);
    }
    mf_tl_series_free(&s);
    return false;
}

bool mf_report_timeline_csv(FILE *out, const struct mf_report_input *v,
                            const struct mf_report_options *o)
{
    const struct mf_timeline *t = v->timeline;
    struct mf_tl_series s;
    mf_tl_series_build(&s, v->model, t, v->stack_ids, o->top);
    fputs("point,start_s,end_s,site,calls,bytes,calls_per_s,bytes_per_s,calls_se_per_s\n", out);
    uint32_t all = mf_intern("[all calls]");
    for (uint32_t j = 0; j < t->npoints; j++) {
        const struct mf_tl_pt *pt = &t->points[j];
        double secs = mf_pt_seconds(pt);
        for (uint32_t i = 0; i <= s.nsites; i++) {
            size_t k = (size_t)(i ? i - 1 : 0) * s.npoints + j;
            uint64_t calls = i ? s.calls[k] : pt->h.calls, bytes = i ? s.bytes[k] : pt->h.bytes;
            double se = i ? mf_sqrt((double)s.var[k]) : 0;
            fprintf(out, "%u,%.6f,%.6f,", j, mf_pt_at(t, pt->h.start_ns), mf_pt_at(t, pt->h.end_ns));
            mf_csv_name_field(out, i ? s.names[i - 1] : all);
            fprintf(out, ",%llu,%llu,%.3f,%.3f,%.3f\n", (unsigned long long)calls,
                    (unsigned long long)bytes, (double)calls / secs, (double)bytes / secs, se / secs);
        }
    }
    mf_tl_series_free(&s);
    return false;
}

bool mf_report_timeline_json(FILE *out, const struct mf_report_input *v,
                             const struct mf_report_options *o)
{
    const struct mf_timeline *t = v->timeline;
    struct mf_tl_series s;
    mf_tl_series_build(&s, v->model, t, v->stack_ids, o->top);
    fputs("{\"dir\":", out);
    mf_json_str(out, o->dirs[0]);
    fprintf(out, ",\"start_ns\":%llu,\"interval_ns\":%llu,\"ended\":%s,\"estimated\":%s,\n\"points\":[",
            (unsigned long long)(t->npoints ? t->points[0].h.start_ns : t->start_ns),
            (unsigned long long)t->interval_ns, t->last ? "true" : "false",
            s.estimated ? "true" : "false");
    for (uint32_t j = 0; j < t->npoints; j++) {
        const struct mf_tl_pt *pt = &t->points[j];
        fprintf(out, "%s\n{\"start_s\":%.6f,\"end_s\":%.6f,\"calls\":%llu,\"bytes\":%llu,"
                "\"processes\":%u}", j ? "," : "", mf_pt_at(t, pt->h.start_ns),
                mf_pt_at(t, pt->h.end_ns), (unsigned long long)pt->h.calls,
                (unsigned long long)pt->h.bytes, pt->h.processes);
    }
    fputs("],\n\"sites\":[", out);
    for (uint32_t i = 0; i < s.nsites; i++) {
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
        mf_json_str(out, mf_str(s.names[i]));
        static const char *const keys[] = {"calls", "bytes", "calls_var"};
        const uint64_t *arrays[] = {s.calls, s.bytes, s.var};
        for (int a = 0; a < 3; a++) {
            fprintf(out, ",\"%s\":[", keys[a]);
            for (uint32_t j = 0; j < s.npoints; j++)
                fprintf(out, "%s%llu", j ? "," : "",
                        (unsigned long long)arrays[a][(size_t)i * s.npoints + j]);
            fputc(']', out);
        }
        fputc('}', out);
    }
    fputs("]}\n", out);
    mf_tl_series_free(&s);
    return false;
}
