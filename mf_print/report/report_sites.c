/* --by site: one CSV row per call site, for spreadsheets and pivot tables (Skip's heap
 * profiler's CSV). A site is the innermost K frames a report shows of a stack (after
 * trimming, folding wrappers, cutting start-up frames and hiding: the frames of the tree's
 * first K levels) and the wrapper folded into it (via), in columns pc0 (the frame that
 * called the allocator) .. pc{K-1}, '-' where the stack has fewer. Stacks that agree on
 * these are one row, whatever they differ in further out. --by site,size splits each row
 * by size class, from the samples' sizes that each stack entry keeps (format 5). Every
 * estimate carries its standard error, from the same variances and floor as the tree's ±
 * (a row's variance is the sum of its stacks'). Sorted by calls, then by the frames. */
#include <stdlib.h>
#include <string.h>

#include "mf_math.h"
#include "mf_print.h"
#include "report.h"

/* A row's key as the map compares it: part, via, size class, then depth names. */
struct mf_site_key {
    const struct mf_sites *t;
    uint32_t part, via, size_class;
    const uint32_t *names;
};

static bool mf_site_eq(const void *ctx, uint32_t idx)
{
    const struct mf_site_key *k = ctx;
    const struct mf_site_row *r = &k->t->rows[idx];
    return r->part == k->part && r->via == k->via && r->size_class == k->size_class &&
           memcmp(mf_site_names(k->t, r), k->names, k->t->depth * sizeof *k->names) == 0;
}

const uint32_t *mf_site_names(const struct mf_sites *t, const struct mf_site_row *r)
{
    return t->names + (size_t)r->key * t->depth;
}

static void mf_site_add(struct mf_sites *t, uint32_t part, uint32_t via, uint32_t size_class,
                        const uint32_t *names, uint64_t samples, uint64_t calls, uint64_t bytes,
                        uint64_t var, double bytes_var, bool estimated)
{
    uint64_t h = mf_hash_u64(((uint64_t)part << 32 | via) ^ mf_hash_u64(size_class));
    for (uint32_t d = 0; d < t->depth; d++)
        h = mf_hash_u64(h ^ names[d]);
    struct mf_site_key key = {t, part, via, size_class, names};
    bool added;
    uint32_t idx = mf_map_put(&t->map, h, mf_site_eq, &key, t->n, &added);
    if (added) {
        MF_GROW(t->rows, t->n, t->cap);
        struct mf_site_row *r = &t->rows[t->n];
        memset(r, 0, sizeof *r);
        r->part = part;
        r->via = via;
        r->size_class = size_class;
        r->key = t->n++;
        if ((size_t)t->n * t->depth > t->names_cap) {
            t->names_cap = (size_t)t->n * t->depth * 2;
            t->names = mf_xrealloc(t->names, t->names_cap * sizeof *t->names);
        }
        memcpy(t->names + (size_t)r->key * t->depth, names, t->depth * sizeof *names);
    }
    struct mf_site_row *r = &t->rows[idx];
    r->samples += samples;
    r->calls += calls;
    r->bytes += bytes;
    r->var += var;
    r->bytes_var += bytes_var;
    r->estimated |= estimated;
}

void mf_sites_build(struct mf_sites *t, const struct mf_model *const *models, uint32_t n,
                    uint32_t depth, bool by_size)
{
    memset(t, 0, sizeof *t);
    t->depth = depth;
    uint32_t *refs = NULL, *names = mf_xmalloc(depth * sizeof *names);
    size_t cap = 0;
    for (uint32_t part = 0; part < n; part++) {
        const struct mf_model *m = models[part];
        const struct mf_profile *p = m->p;
        for (uint32_t i = 0; i < m->nstacks; i++) {
            const struct mf_stack *s = &m->stacks[i];
            if (!s->calls && !s->samples)
                continue; /* as the tree counts ends */
            size_t nrefs = 0;
            uint32_t k = mf_model_frame_refs(m, s, &refs, &nrefs, &cap);
            for (uint32_t d = 0; d < depth; d++)
                names[d] = d < k ? mf_model_ref_frame(m, refs[d]).name : 0; /* 0: "" */
            if (!by_size) {
                mf_site_add(t, part, s->via, MF_SITE_ALL_SIZES, names, s->samples, s->calls,
                            s->bytes, s->var, s->bytes_var, s->estimated);
                continue;
            }
            /* By class: what the stack's entries kept; the rest (entries without a class,
             * [not profiled]) of unknown size. */
            uint64_t samples = s->samples, calls = s->calls, bytes = s->bytes, var = s->var;
            double bytes_var = s->bytes_var;
            if (s->raw != UINT32_MAX) {
                const struct mf_raw_stack *rs = &p->stacks[s->raw];
                for (uint32_t j = 0; j < rs->nsizes; j++) {
                    const struct mf_stack_size *z = &p->stack_sizes[rs->sizes_first + j];
                    mf_site_add(t, part, s->via, z->size_class, names, z->samples, z->calls,
                                z->bytes, z->var, z->bytes_var, s->estimated);
                    samples -= samples < z->samples ? samples : z->samples;
                    calls -= calls < z->calls ? calls : z->calls;
                    bytes -= bytes < z->bytes ? bytes : z->bytes;
                    var -= var < z->var ? var : z->var;
                    bytes_var -= z->bytes_var;
                }
            }
            if (calls || samples)
                mf_site_add(t, part, s->via, MF_SITE_SIZE_UNKNOWN, names, samples, calls, bytes,
                            var, bytes_var > 0 ? bytes_var : 0, s->estimated);
        }
    }
    free(refs);
    free(names);
    mf_map_free(&t->map);
}

static const struct mf_sites *mf_sort_sites;

/* By calls, then part, then the frames' names from pc0 out, the via, the size class. */
static int mf_site_cmp(const void *a, const void *b)
{
    const struct mf_site_row *x = a, *y = b;
    const struct mf_sites *t = mf_sort_sites;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    if (x->part != y->part)
        return x->part < y->part ? -1 : 1;
    const uint32_t *nx = mf_site_names(t, x), *ny = mf_site_names(t, y);
    for (uint32_t d = 0; d < t->depth; d++) {
        if (nx[d] == ny[d])
            continue;
        int c = strcmp(mf_str(nx[d]), mf_str(ny[d]));
        if (c)
            return c;
    }
    if (x->via != y->via)
        return strcmp(mf_str(x->via), mf_str(y->via));
    return x->size_class < y->size_class ? -1 : x->size_class > y->size_class;
}

void mf_sites_sort(struct mf_sites *t)
{
    mf_sort_sites = t;
    if (t->n > 1)
        qsort(t->rows, t->n, sizeof *t->rows, mf_site_cmp);
}

void mf_sites_free(struct mf_sites *t)
{
    free(t->rows);
    free(t->names);
    memset(t, 0, sizeof *t);
}

/* The largest size of class c (c < MF_SIZE_CLASSES); UINT64_MAX for the last. */
uint64_t mf_size_class_hi(uint32_t c)
{
    if (c + 1 >= MF_SIZE_CLASSES)
        return UINT64_MAX;
    uint64_t lo = mf_size_class_lo(c), next = mf_size_class_lo(c + 1);
    return next > lo ? next - 1 : lo; /* sizes 1, 2 and 3 have a class each */
}

/* pc0..pc{K-1},calls,calls_stderr,bytes,bytes_stderr,mean_size,samples,via[,size_min,size_max]
 * [,program]: one row per site (and size class), sorted by calls. */
bool mf_report_sites(FILE *out, const struct mf_report_input *v, const struct mf_report_options *o)
{
    const struct mf_model *const *models = v->parts;
    const char *const *programs = v->part_names;
    uint32_t n = v->nparts;
    struct mf_sites t;
    mf_sites_build(&t, models, n, o->site_depth, o->by_size);
    mf_sites_sort(&t);
    for (uint32_t d = 0; d < t.depth; d++)
        fprintf(out, "pc%u,", d);
    fputs("calls,calls_stderr,bytes,bytes_stderr,mean_size,samples,via", out);
    fputs(o->by_size ? ",size_min,size_max" : "", out);
    fputs(programs ? ",program\n" : "\n", out);
    for (uint32_t i = 0; i < t.n; i++) {
        const struct mf_site_row *r = &t.rows[i];
        const uint32_t *names = mf_site_names(&t, r);
        for (uint32_t d = 0; d < t.depth; d++) {
            if (names[d])
                mf_csv_name_field(out, names[d]);
            else
                fputc('-', out);
            fputc(',', out);
        }
        uint64_t interval = models[r->part]->sample_interval;
        double cse = r->estimated ? mf_calls_se(r->calls, r->var, interval) : 0;
        double bse = r->estimated ? mf_bytes_se(r->calls, r->bytes, r->bytes_var, interval) : 0;
        fprintf(out, "%llu,%.6g,%llu,%.6g,", (unsigned long long)r->calls, cse,
                (unsigned long long)r->bytes, bse);
        if (r->calls && r->bytes % r->calls == 0)
            fprintf(out, "%llu", (unsigned long long)(r->bytes / r->calls));
        else if (r->calls)
            fprintf(out, "%.2f", (double)r->bytes / (double)r->calls);
        fprintf(out, ",%llu,", (unsigned long long)r->samples);
        mf_csv_name_field(out, r->via);
        if (o->by_size) {
            if (r->size_class < MF_SIZE_CLASSES) {
                fprintf(out, ",%llu,%llu", (unsigned long long)mf_size_class_lo(r->size_class),
                        (unsigned long long)mf_size_class_hi(r->size_class)); /* as --sizes */
            } else {
                fputs(",,", out); /* not known: entries without a class, [not profiled] */
            }
        }
        if (programs) {
            fputc(',', out);
            mf_csv_name_field(out, mf_intern(programs[r->part]));
        }
        fputc('\n', out);
    }
    mf_sites_free(&t);
    return false;
}
