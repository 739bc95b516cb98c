/* A profile by program (the basename of each process image's executable): --program NAME
 * keeps some, --by program makes a model of each, which the reports show on its own (the
 * tree: a section per program with its own totals; CSV: a program column). A build run under LD_PRELOAD leaves cc1, as, ld,
 * make, sh... in one profile, and their sites mean nothing added together. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "report.h"

static int mf_program_cmp(const void *a, const void *b)
{
    const struct mf_program *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return strcmp(x->name, y->name);
}

uint32_t mf_programs(const struct mf_profile *p, struct mf_program **out)
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
            int w = snprintf(list + at, sizeof list - at, "%s%s", k ? ", " : "",
                             mf_esc(v[k].name));
            at += w > 0 ? (size_t)w : 0;
        }
        if (at >= sizeof list)
            strcpy(list + sizeof list - sizeof ", …", ", …");
        mf_error("no program '%s' in the profile; its programs: %s", mf_esc(names[i]), list);
        free(v);
        return true;
    }
    struct mf_profile kept;
    mf_profile_subset(&kept, p, mf_program_named, &ns);
    kept.frame_chunks = p->frame_chunks; /* the stacks' frames stay p's: nothing is freed */
    *p = kept;
    return false;
}

static bool mf_program_is(const struct mf_process *pr, void *ctx)
{
    return strcmp(mf_process_program(pr), ctx) == 0;
}

uint32_t mf_programs_models(const struct mf_profile *p, const struct mf_model_config *c,
                            const struct mf_model ***models, const char ***names)
{
    struct mf_program *v;
    uint32_t n = mf_programs(p, &v);
    *models = mf_xcalloc(n + 1, sizeof **models);
    *names = mf_xcalloc(n + 1, sizeof **names);
    for (uint32_t i = 0; i < n; i++) {
        struct mf_profile *sub = mf_xcalloc(1, sizeof *sub);
        mf_profile_subset(sub, p, mf_program_is, (void *)v[i].name);
        struct mf_model *model = mf_xcalloc(1, sizeof *model);
        mf_model_build(model, sub, c);
        (*models)[i] = model;
        (*names)[i] = v[i].name;
    }
    free(v);
    return n;
}
