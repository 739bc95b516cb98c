/* --sizes --tune: the size histogram read for an allocator author or a tuning user (in the
 * spirit of IsoAlloc's profiler, which turns its samples into the zones to create).
 *
 *   sizes that hold 50/90/99 % of the calls and of the bytes, counted from the smallest
 *   the hot classes: the fewest classes holding 90 % of the calls, each with the sites
 *       (innermost frame shown and its via) that make most of its calls, from the stack
 *       entries' size classes (format 5)
 *   what it means: the share of calls small enough for a slab or arena, and from how few
 *       sites; the class where most bytes go
 *
 * --tune-header FILE writes the classes with calls as a C header: #defines and a table
 * (docs/reports.md, "Tuning an allocator" documents it; tests/viewer/test_sites.py compiles one). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mf_print.h"
#include "names.h"
#include "report.h"

#define MF_TUNE_HOT_PCT 90
#define MF_TUNE_HOT_MAX 10    /* hot classes listed at most */
#define MF_TUNE_SITES 3       /* sites named per hot class */
#define MF_TUNE_SMALL 1024u   /* a slab or arena serves sizes up to this */

struct mf_tune_class {
    uint32_t c; /* the size class */
    uint64_t lo, hi, calls, bytes, calls_var;
};

struct mf_tune {
    struct mf_tune_class v[MF_SIZE_CLASSES]; /* classes with calls, by size */
    uint32_t n;
    uint64_t calls, bytes;
    uint32_t by_calls[MF_SIZE_CLASSES]; /* indices into v, most calls first */
    uint32_t by_bytes[MF_SIZE_CLASSES]; /* most bytes first */
    /* The hot classes: the fewest holding MF_TUNE_HOT_PCT % of the calls, and those holding
     * as much of the bytes, by calls (indices into v); why: 1 calls, 2 bytes, 3 both. */
    uint32_t hot[MF_SIZE_CLASSES], nhot;
    uint8_t why[MF_SIZE_CLASSES];
};

static const struct mf_tune *mf_cmp_tune;

static int mf_by_bytes_cmp(const void *a, const void *b)
{
    const struct mf_tune_class *x = &mf_cmp_tune->v[*(const uint32_t *)a],
                               *y = &mf_cmp_tune->v[*(const uint32_t *)b];
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->c < y->c ? -1 : 1;
}

static int mf_by_calls_cmp(const void *a, const void *b)
{
    const struct mf_tune_class *x = &mf_cmp_tune->v[*(const uint32_t *)a],
                               *y = &mf_cmp_tune->v[*(const uint32_t *)b];
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return x->c < y->c ? -1 : 1;
}

/* The fewest classes (most first) whose calls, or bytes, reach pct % of the total. */
static uint32_t mf_classes_for(const struct mf_tune *t, bool bytes, unsigned pct)
{
    uint64_t sum = 0, total = bytes ? t->bytes : t->calls;
    for (uint32_t k = 0; k < t->n; k++) {
        const struct mf_tune_class *x = &t->v[bytes ? t->by_bytes[k] : t->by_calls[k]];
        sum += bytes ? x->bytes : x->calls;
        if ((double)sum * 100.0 >= (double)total * pct)
            return k + 1;
    }
    return t->n;
}

static void mf_tune_build(struct mf_tune *t, const struct mf_profile *p)
{
    memset(t, 0, sizeof *t);
    for (uint32_t c = 0; c < MF_SIZE_CLASSES; c++) {
        const struct mf_size_class *k = &p->sizes[c];
        if (!k->calls)
            continue;
        t->v[t->n] = (struct mf_tune_class){c, mf_size_class_lo(c), mf_size_class_hi(c),
                                            k->calls, k->bytes, k->calls_var};
        t->by_calls[t->n] = t->by_bytes[t->n] = t->n;
        t->n++;
        t->calls += k->calls;
        t->bytes += k->bytes;
    }
    mf_cmp_tune = t;
    qsort(t->by_calls, t->n, sizeof *t->by_calls, mf_by_calls_cmp);
    qsort(t->by_bytes, t->n, sizeof *t->by_bytes, mf_by_bytes_cmp);
    uint32_t nc = mf_classes_for(t, false, MF_TUNE_HOT_PCT);
    uint32_t nb = mf_classes_for(t, true, MF_TUNE_HOT_PCT);
    for (uint32_t k = 0; k < nc; k++)
        t->why[t->by_calls[k]] |= 1;
    for (uint32_t k = 0; k < nb; k++)
        t->why[t->by_bytes[k]] |= 2;
    for (uint32_t k = 0; k < t->n; k++)
        if (t->why[t->by_calls[k]])
            t->hot[t->nhot++] = t->by_calls[k];
}

/* The largest size of the smallest classes that hold pct % of the calls (bytes false) or
 * of the bytes. */
static uint64_t mf_size_for(const struct mf_tune *t, unsigned pct, bool bytes)
{
    uint64_t sum = 0, total = bytes ? t->bytes : t->calls;
    for (uint32_t k = 0; k < t->n; k++) {
        sum += bytes ? t->v[k].bytes : t->v[k].calls;
        if ((double)sum * 100.0 >= (double)total * pct)
            return t->v[k].hi;
    }
    return t->n ? t->v[t->n - 1].hi : 0;
}

static const char *mf_fmt_size(char *buf, size_t size, uint64_t lo, uint64_t hi)
{
    char a[40], b[40];
    if (hi == UINT64_MAX)
        snprintf(buf, size, "%s and more", mf_fmt_count(a, lo));
    else if (lo == hi)
        snprintf(buf, size, "%s", mf_fmt_count(a, lo));
    else
        snprintf(buf, size, "%s - %s", mf_fmt_count(a, lo), mf_fmt_count(b, hi));
    return buf;
}

static double mf_pct(uint64_t x, uint64_t of)
{
    return of ? 100.0 * (double)x / (double)of : 0;
}

static bool mf_tune_full_names; /* --full-names */

/* A site as the tree's first level names it: its function, and the wrapper folded into it
 * (generic arguments collapsed as the tree shows them, unless --full-names). */
static void mf_site_text(char *buf, size_t size, const struct mf_sites *s,
                         const struct mf_site_row *r)
{
    uint32_t id = mf_site_names(s, r)[0], via = r->via;
    if (!mf_tune_full_names) {
        id = mf_short_name(id);
        via = via ? mf_short_name(via) : 0;
    }
    if (via)
        snprintf(buf, size, "%s via %s", mf_str(id), mf_str(via));
    else
        snprintf(buf, size, "%s", mf_str(id));
}

/* The rows of s (by calls) of class c, or with c == UINT32_MAX the sum per site over the
 * classes up to `hi` bytes: into out (one per site, most calls first); returns how many. */
static uint32_t mf_class_sites(const struct mf_sites *s, uint32_t c, uint64_t hi,
                               struct mf_site_row *out)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        const struct mf_site_row *r = &s->rows[i];
        if (r->size_class >= MF_SIZE_CLASSES)
            continue;
        if (c != UINT32_MAX ? r->size_class != c : mf_size_class_hi(r->size_class) > hi)
            continue;
        uint32_t k = 0;
        if (c == UINT32_MAX) /* the same site in another class: add */
            while (k < n && !(out[k].via == r->via &&
                              mf_site_names(s, &out[k])[0] == mf_site_names(s, r)[0]))
                k++;
        if (c == UINT32_MAX && k < n) {
            out[k].calls += r->calls;
            out[k].bytes += r->bytes;
        } else {
            out[n++] = *r;
        }
    }
    /* by calls, most first (insertion: the rows came sorted, sums may reorder them) */
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && out[j].calls > out[j - 1].calls; j--) {
            struct mf_site_row x = out[j];
            out[j] = out[j - 1];
            out[j - 1] = x;
        }
    return n;
}

/* --sizes --tune: what the size histogram means for an allocator. */
bool mf_report_tune(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *m = v->model;
    const struct mf_profile *p = m->p;
    static struct mf_tune t;
    mf_tune_build(&t, p);
    struct mf_sites s;
    mf_sites_build(&s, &m, 1, 1, true);
    mf_sites_sort(&s);
    struct mf_site_row *tmp = mf_xcalloc(s.n + 1, sizeof *tmp);
    char a[40], b[40], c[80], d[400];
    mf_tune_full_names = o->full_names;
    const char *est = m->estimated ? "~" : "";

    fprintf(out, "malloc_freq size tuning: %s", mf_esc(o->dirs[0]));
    if (o->ndirs > 1)
        fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
    fprintf(out, "\n  %s%s calls of %s%s in %u size class%s (%s)\n", est,
            mf_fmt_count(a, t.calls), est, mf_fmt_bytes(b, (double)t.bytes), t.n,
            t.n == 1 ? "" : "es",
            m->estimated ? "estimated from the samples" : "exact: every call recorded");
    if (!t.n) {
        fputs("\nNo call was recorded with its size.\n", out);
        free(tmp);
        mf_sites_free(&s);
        return false;
    }

    fputs("\nSizes up to which the calls and the bytes add up to\n", out);
    fprintf(out, "  %6s  %16s  %16s\n", "share", "calls", "bytes");
    static const unsigned pcts[] = {50, 90, 99};
    for (int i = 0; i < 3; i++)
        fprintf(out, "  %5u%%  %16s  %16s\n", pcts[i],
                mf_fmt_count(a, mf_size_for(&t, pcts[i], false)),
                mf_fmt_count(b, mf_size_for(&t, pcts[i], true)));
    fputs("\nThe fewest size classes that hold\n", out);
    fprintf(out, "  %6s  %16s  %16s\n", "share", "calls", "bytes");
    for (int i = 0; i < 3; i++)
        fprintf(out, "  %5u%%  %16u  %16u\n", pcts[i], mf_classes_for(&t, false, pcts[i]),
                mf_classes_for(&t, true, pcts[i]));

    fprintf(out, "\nHot classes: the fewest holding %d %% of the calls, and of the bytes, with the "
                 "sites that make them (share of the class's calls)\n", MF_TUNE_HOT_PCT);
    fprintf(out, "  %16s %12s %7s %10s %7s  %-11s sites\n", "size", "calls", "%", "bytes", "%",
            "hot for");
    static const char *const why[] = {"", "calls", "bytes", "calls+bytes"};
    for (uint32_t k = 0; k < t.nhot && k < MF_TUNE_HOT_MAX; k++) {
        const struct mf_tune_class *x = &t.v[t.hot[k]];
        char calls[48];
        snprintf(calls, sizeof calls, "%s%s", x->calls_var ? "~" : "", mf_fmt_count(a, x->calls));
        fprintf(out, "  %16s %12s %6.2f%% %10s %6.2f%%  %-11s", mf_fmt_size(c, sizeof c, x->lo, x->hi),
                calls, mf_pct(x->calls, t.calls), mf_fmt_bytes(b, (double)x->bytes),
                mf_pct(x->bytes, t.bytes), why[t.why[t.hot[k]]]);
        uint32_t ns = mf_class_sites(&s, x->c, 0, tmp);
        for (uint32_t j = 0; j < ns && j < MF_TUNE_SITES; j++) {
            mf_site_text(d, sizeof d, &s, &tmp[j]);
            fprintf(out, "%s %s %.0f%%", j ? "," : "", mf_esc(d), mf_pct(tmp[j].calls, x->calls));
        }
        if (ns > MF_TUNE_SITES)
            fprintf(out, ", %u more site%s", ns - MF_TUNE_SITES, ns - MF_TUNE_SITES == 1 ? "" : "s");
        if (!ns)
            fputs(" (no stack: calls before start-up or not profiled)", out);
        fputc('\n', out);
    }
    if (t.nhot > MF_TUNE_HOT_MAX)
        fprintf(out, "  ... and %u more classes\n", t.nhot - MF_TUNE_HOT_MAX);

    fputs("\nWhat it means\n", out);
    /* Small: the hot classes a slab or arena can serve, and the sites behind them. */
    uint64_t small_hi = 0;
    for (uint32_t k = 0; k < t.nhot; k++)
        if ((t.why[t.hot[k]] & 1) && t.v[t.hot[k]].hi <= MF_TUNE_SMALL &&
            t.v[t.hot[k]].hi > small_hi)
            small_hi = t.v[t.hot[k]].hi;
    if (small_hi) {
        uint64_t small_calls = 0;
        for (uint32_t k = 0; k < t.n && t.v[k].hi <= small_hi; k++)
            small_calls += t.v[k].calls;
        uint32_t ns = mf_class_sites(&s, UINT32_MAX, small_hi, tmp), most = 0;
        uint64_t site_calls = 0, all = 0;
        for (uint32_t j = 0; j < ns; j++)
            all += tmp[j].calls;
        while (most < ns && (double)site_calls * 100.0 < (double)all * MF_TUNE_HOT_PCT)
            site_calls += tmp[most++].calls;
        fprintf(out, "  %.0f %% of calls are <= %s bytes", mf_pct(small_calls, t.calls),
                mf_fmt_count(a, small_hi));
        if (most == ns)
            fprintf(out, " from %u site%s (", ns, ns == 1 ? "" : "s");
        else if (most)
            fprintf(out, "; %u site%s make %.0f %% of them (", most, most == 1 ? "" : "s",
                    mf_pct(site_calls, all));
        if (most) {
            for (uint32_t j = 0; j < most && j < MF_TUNE_SITES; j++) {
                mf_site_text(d, sizeof d, &s, &tmp[j]);
                fprintf(out, "%s%s", j ? ", " : "", mf_esc(d));
            }
            fprintf(out, "%s): a slab or arena for sizes <= %s serving %s removes %s%s calls to "
                         "malloc\n", most > MF_TUNE_SITES ? ", ..." : "", mf_fmt_count(a, small_hi),
                    most == 1 ? "it" : "them", est, mf_fmt_count(b, site_calls));
        } else {
            fprintf(out, " (from no recorded stack)\n");
        }
    } else {
        fprintf(out, "  no hot class is small enough for a slab (<= %u bytes): the calls are "
                     "spread over larger sizes\n", MF_TUNE_SMALL);
    }
    /* Bytes: the class that holds most of them. */
    uint32_t big = 0;
    for (uint32_t k = 1; k < t.n; k++)
        if (t.v[k].bytes > t.v[big].bytes)
            big = k;
    const struct mf_tune_class *x = &t.v[big];
    uint32_t ns = mf_class_sites(&s, x->c, 0, tmp);
    fprintf(out, "  %.0f %% of bytes are asked in sizes %s by %.1f %% of calls", mf_pct(x->bytes, t.bytes),
            mf_fmt_size(c, sizeof c, x->lo, x->hi), mf_pct(x->calls, t.calls));
    if (ns) {
        mf_site_text(d, sizeof d, &s, &tmp[0]);
        fprintf(out, ", %.0f %% of them from %s", mf_pct(tmp[0].calls, x->calls), mf_esc(d));
    }
    fprintf(out, ": %s\n", x->lo >= (64u << 10) ? "large blocks (mmap-sized): reuse them, or raise "
                                                  "M_MMAP_THRESHOLD to keep them in the heap"
                           : "a size class of its own keeps them from fragmenting the small ones");
    free(tmp);
    mf_sites_free(&s);
    return false;
}

bool mf_write_tune_header(const char *path, const struct mf_model *m,
                          const struct mf_report_options *o)
{
    static struct mf_tune t;
    mf_tune_build(&t, m->p);
    struct mf_replace r;
    int fd = mf_replace_open(&r, path, "--tune-header");
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        if (fd >= 0) {
            mf_error("cannot write %s: %s", mf_esc(path), strerror(errno));
            close(fd);
            mf_replace_end(&r, false);
        }
        return true;
    }
    fputs("/* Generated by mf_print --tune-header: the allocation sizes malloc_freq measured in\n"
          " *  ", f);
    /* The directories as the tree names them (mf_esc), a star as \x2a too: no name can end
     * this comment or start a line of its own. */
    for (int i = 0; i < o->ndirs; i++) {
        for (const char *c = mf_esc(o->dirs[i]); *c; c++) {
            if (*c == '*')
                fputs("\\x2a", f);
            else
                fputc(*c, f);
        }
        fputs(i + 1 < o->ndirs ? " " : "\n", f);
    }
    fputs(" * The classes with calls, by size (four per doubling, as mf_print --sizes shows\n"
          " * them); calls and bytes are exact when MF_TUNE_EXACT is 1, else estimated from\n"
          " * the samples. docs/reports.md (\"Tuning an allocator\") describes every name. */\n"
          "#ifndef MF_TUNE_H\n#define MF_TUNE_H\n\n", f);
    fprintf(f, "#define MF_TUNE_EXACT %d\n", m->estimated ? 0 : 1);
    fprintf(f, "#define MF_TUNE_CALLS %lluULL\n", (unsigned long long)t.calls);
    fprintf(f, "#define MF_TUNE_BYTES %lluULL\n", (unsigned long long)t.bytes);
    fprintf(f, "#define MF_TUNE_NCLASSES %u\n", t.n);
    fputs("\n/* The largest size of the smallest classes holding 50, 90, 99 % of the calls, and of\n"
          " * the bytes. */\n", f);
    static const unsigned pcts[] = {50, 90, 99};
    for (int i = 0; i < 3; i++)
        fprintf(f, "#define MF_TUNE_CALLS_P%u_SIZE %lluULL\n", pcts[i],
                (unsigned long long)mf_size_for(&t, pcts[i], false));
    for (int i = 0; i < 3; i++)
        fprintf(f, "#define MF_TUNE_BYTES_P%u_SIZE %lluULL\n", pcts[i],
                (unsigned long long)mf_size_for(&t, pcts[i], true));
    fputs("\n/* Class i (0 .. MF_TUNE_NCLASSES - 1, by size): sizes MIN to MAX, their calls and\n"
          " * bytes. */\n", f);
    for (uint32_t k = 0; k < t.n; k++) {
        const struct mf_tune_class *x = &t.v[k];
        fprintf(f, "#define MF_TUNE_CLASS%u_MIN %lluULL\n", k, (unsigned long long)x->lo);
        fprintf(f, "#define MF_TUNE_CLASS%u_MAX %lluULL\n", k, (unsigned long long)x->hi);
        fprintf(f, "#define MF_TUNE_CLASS%u_CALLS %lluULL\n", k, (unsigned long long)x->calls);
        fprintf(f, "#define MF_TUNE_CLASS%u_BYTES %lluULL\n", k, (unsigned long long)x->bytes);
    }
    fprintf(f, "\n/* The hot classes: the fewest holding %d %% of the calls and those holding %d %%\n"
               " * of the bytes, most calls first (indices of the classes above). */\n"
               "#define MF_TUNE_NHOT %u\n#define MF_TUNE_HOT {", MF_TUNE_HOT_PCT, MF_TUNE_HOT_PCT,
            t.nhot);
    for (uint32_t k = 0; k < t.nhot; k++)
        fprintf(f, "%s%u", k ? ", " : "", t.hot[k]);
    fputs("}\n", f);
    if (t.n) {
        fputs("\n/* The same classes as a table (define MF_TUNE_NO_TABLE to leave it out). */\n"
              "#ifndef MF_TUNE_NO_TABLE\n"
              "struct mf_tune_class {\n"
              "    unsigned long long size_min, size_max, calls, bytes;\n"
              "};\n"
              "static const struct mf_tune_class mf_tune_classes[MF_TUNE_NCLASSES] = {\n", f);
        for (uint32_t k = 0; k < t.n; k++)
            fprintf(f, "    {%lluULL, %lluULL, %lluULL, %lluULL},\n",
                    (unsigned long long)t.v[k].lo, (unsigned long long)t.v[k].hi,
                    (unsigned long long)t.v[k].calls, (unsigned long long)t.v[k].bytes);
        fputs("};\n#endif\n", f);
    }
    fputs("\n#endif\n", f);
    bool bad = ferror(f) != 0;
    int err = errno;
    if (fclose(f) != 0 && !bad) {
        bad = true;
        err = errno;
    }
    if (bad)
        mf_error("cannot write %s: %s", mf_esc(path), strerror(err));
    return mf_replace_end(&r, !bad) || bad;
}
