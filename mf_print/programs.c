/* A profile by program (the basename of each process image's executable): --program NAME
 * keeps some, --by program reports each on its own (the tree: a section per program with
 * its own totals; CSV: a program column). A build run under LD_PRELOAD leaves cc1, as, ld,
 * make, sh... in one profile, and their sites mean nothing added together. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

struct mf_program {
    const char *name;
    uint64_t calls, bytes; /* exact, from the thread headers */
    uint32_t nprocs;      /* process images */
};

static int mf_program_cmp(const void *a, const void *b)
{
    const struct mf_program *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The programs of p, by calls, most first. */
static uint32_t mf_programs(const struct mf_profile *p, struct mf_program **out)
{
    struct mf_program *v = NULL;
    uint32_t n = 0, cap = 0;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const struct mf_process *pr = &p->procs[i];
        const char *name = mf_process_program(pr);
        uint32_t k = 0;
        while (k < n && strcmp(v[k].name, name) != 0)
            k++;
        if (k == n) {
            MF_GROW(v, n, cap);
            v[n++] = (struct mf_program){name, 0, 0, 0};
        }
        v[k].nprocs++;
        for (int f = 0; f < MF_FN_COUNT; f++) {
            v[k].calls += pr->totals.calls[f];
            v[k].bytes += pr->totals.bytes[f];
        }
    }
    if (n > 1)
        qsort(v, n, sizeof *v, mf_program_cmp);
    *out = v;
    return n;
}

struct mf_names {
    const char *const *v;
    int n;
};

/* NAME is the executable's basename, or its whole path. */
static bool mf_program_named(const struct mf_process *pr, void *ctx)
{
    const struct mf_names *names = ctx;
    for (int i = 0; i < names->n; i++)
        if (strcmp(names->v[i], mf_process_program(pr)) == 0 ||
            (pr->has_file && strcmp(names->v[i], pr->exe) == 0))
            return true;
    return false;
}

bool mf_programs_keep(struct mf_profile *p, const char *const *names, int n)
{
    struct mf_names ns = {names, n};
    for (int i = 0; i < n; i++) {
        struct mf_names one = {&names[i], 1};
        bool found = false;
        for (uint32_t k = 0; k < p->nprocs && !found; k++)
            found = mf_program_named(&p->procs[k], &one);
        if (found)
            continue;
        struct mf_program *v;
        uint32_t np = mf_programs(p, &v);
        char list[1024] = "";
        size_t at = 0;
        for (uint32_t k = 0; k < np && at < sizeof list; k++) {
            int w = snprintf(list + at, sizeof list - at, "%s%s", k ? ", " : "", v[k].name);
            at += w > 0 ? (size_t)w : 0;
        }
        if (at >= sizeof list)
            strcpy(list + sizeof list - sizeof ", …", ", …");
        mf_error("no program '%s' in the profile; its programs: %s", names[i], list);
        free(v);
        return true;
    }
    struct mf_profile kept;
    mf_profile_subset(&kept, p, mf_program_named, &ns);
    *p = kept; /* the stacks' frames stay p's: nothing is freed */
    return false;
}

static bool mf_program_is(const struct mf_process *pr, void *ctx)
{
    return strcmp(mf_process_program(pr), ctx) == 0;
}

bool mf_report_by_program(FILE *out, const struct mf_profile *p, enum mf_format format,
                          const struct mf_report_options *o)
{
    struct mf_program *v;
    uint32_t n = mf_programs(p, &v);
    const struct mf_model **models = mf_xcalloc(n, sizeof *models);
    const char **names = mf_xcalloc(n, sizeof *names);
    uint64_t total = mf_profile_total_calls(p);
    if (format == MF_FORMAT_TREE) {
        char a[40], b[40];
        fprintf(out, "malloc_freq report by program: %s", mf_esc(o->dirs[0]));
        if (o->ndirs > 1)
            fprintf(out, " and %d more director%s", o->ndirs - 1, o->ndirs > 2 ? "ies" : "y");
        fprintf(out, " (%u process director%s)\n", p->ndirs_read, p->ndirs_read == 1 ? "y" : "ies");
        fprintf(out, "  calls      %s (exact) in %u program%s, %u process image%s; each section's "
                "%% is of its program's calls\n\n", mf_fmt_count(a, total), n, n == 1 ? "" : "s",
                p->nprocs, p->nprocs == 1 ? "" : "s");
        int width = (int)strlen(mf_fmt_count(a, total));
        width = width < 5 ? 5 : width;
        fprintf(out, "%*s %8s %10s %9s  program\n", width, "calls", "%", "bytes", "processes");
        for (uint32_t i = 0; i < n; i++)
            fprintf(out, "%*s %7.2f%% %10s %9u  %s\n", width, mf_fmt_count(a, v[i].calls),
                    total ? (double)v[i].calls * 100.0 / (double)total : 0.0,
                    mf_fmt_bytes(b, (double)v[i].bytes), v[i].nprocs, mf_esc(v[i].name));
    }
    for (uint32_t i = 0; i < n; i++) {
        struct mf_profile *sub = mf_xcalloc(1, sizeof *sub);
        mf_profile_subset(sub, p, mf_program_is, (void *)v[i].name);
        struct mf_model *model = mf_xcalloc(1, sizeof *model);
        mf_model_build(model, sub, o->trim);
        models[i] = model;
        names[i] = v[i].name;
        if (format == MF_FORMAT_TREE) {
            struct mf_report_options so = *o;
            so.program = v[i].name;
            struct mf_tree tree;
            mf_tree_build(&tree, model, o->threshold, mf_profile_total_calls(sub));
            fputs("\n\n", out);
            mf_report_tree(out, sub, &tree, &so);
            mf_unresolved_add(model);
        }
    }
    if (format == MF_FORMAT_TREE)
        mf_report_unresolved(out);
    else if (o->by_site)
        mf_report_sites(out, models, names, n, o);
    else
        mf_report_csv_by_program(out, models, names, n);
    free(models);
    free(names);
    free(v);
    return false;
}
