/* Builds the profile model (model.h): each distinct return address of each process image
 * symbolized once, every stack a list of those locations, plumbing marked for trimming. */
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "model.h"
#include "trim.h"

/* Per interned name: 0 not yet decided, 1 keep, 2 plumbing. */
static uint8_t *mf_plumbing_names;
static uint32_t mf_plumbing_cap;

static bool mf_is_plumbing(const struct mf_frame *f)
{
    if (f->plumbing_module)
        return true;
    if (f->name >= mf_plumbing_cap) {
        uint32_t cap = mf_plumbing_cap ? mf_plumbing_cap : 1024;
        while (cap <= f->name)
            cap *= 2;
        mf_plumbing_names = mf_xrealloc(mf_plumbing_names, cap);
        memset(mf_plumbing_names + mf_plumbing_cap, 0, cap - mf_plumbing_cap);
        mf_plumbing_cap = cap;
    }
    if (!mf_plumbing_names[f->name])
        mf_plumbing_names[f->name] = mf_trim_function(mf_str(f->name)) ? 2 : 1;
    return mf_plumbing_names[f->name] == 2;
}

/* ---- locations ------------------------------------------------------------------------ */

struct mf_loc_key {
    const struct mf_model *m;
    uint32_t process, epoch;
    uint64_t pc;
};

static uint32_t *mf_loc_epochs; /* the module epoch each location was symbolized for */

static bool mf_loc_eq(const void *ctx, uint32_t val)
{
    const struct mf_loc_key *k = ctx;
    const struct mf_location *l = &k->m->locs[val];
    return l->pc == k->pc && l->process == k->process && mf_loc_epochs[val] == k->epoch;
}

static uint32_t mf_location(struct mf_model *m, struct mf_map *map, struct mf_frames *tmp,
                            uint32_t process, uint32_t epoch, uint64_t pc)
{
    struct mf_loc_key k = {m, process, epoch, pc};
    uint64_t h = mf_hash_u64(pc ^ mf_hash_u64((uint64_t)process << 32 | epoch));
    bool added;
    uint32_t id = mf_map_put(map, h, mf_loc_eq, &k, m->nlocs, &added);
    if (!added)
        return id;
    const struct mf_process *pr = &m->p->procs[process];
    tmp->n = 0;
    mf_symbolize((struct mf_process *)pr, pc, epoch, tmp);
    uint32_t cap = m->locs_cap;
    MF_GROW(m->locs, m->nlocs, m->locs_cap);
    if (m->locs_cap != cap)
        mf_loc_epochs = mf_xrealloc(mf_loc_epochs, m->locs_cap * sizeof *mf_loc_epochs);
    mf_loc_epochs[m->nlocs] = epoch;
    struct mf_location *l = &m->locs[m->nlocs++];
    l->process = process;
    l->module = mf_module_index(pr, pc, epoch);
    l->pc = pc;
    l->first = m->nframes;
    l->n = tmp->n;
    for (uint32_t i = 0; i < tmp->n; i++) {
        MF_GROW(m->frames, m->nframes, m->frames_cap);
        m->frames[m->nframes++] = tmp->v[i];
    }
    return id;
}

/* ---- stacks --------------------------------------------------------------------------- */

static struct mf_stack *mf_new_stack(struct mf_model *m)
{
    MF_GROW(m->stacks, m->nstacks, m->stacks_cap);
    struct mf_stack *s = &m->stacks[m->nstacks++];
    memset(s, 0, sizeof *s);
    s->first = m->nstack_locs;
    return s;
}

/* Plumbing frames at the innermost end: never all of them, the outermost frame stays. */
static uint32_t mf_trimmed(const struct mf_model *m, const struct mf_stack *s)
{
    uint32_t total = 0, trimmed = 0;
    bool done = false;
    for (uint32_t i = 0; i < s->depth; i++) {
        const struct mf_location *l = &m->locs[m->stack_locs[s->first + i]];
        for (uint32_t j = 0; j < l->n; j++, total++)
            if (!done && mf_is_plumbing(&m->frames[l->first + j]))
                trimmed++;
            else
                done = true;
    }
    return trimmed < total ? trimmed : total ? total - 1 : 0;
}

void mf_model_build(struct mf_model *m, const struct mf_profile *p, bool trim)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    m->trim = trim;
    struct mf_map map = {0};
    struct mf_frames tmp = {0};
    for (uint32_t r = 0; r < p->nstacks; r++) {
        const struct mf_raw_stack *rs = &p->stacks[r];
        struct mf_stack *s = mf_new_stack(m);
        s->process = rs->process;
        s->flags = rs->flags & MF_ENTRY_TRUNCATED;
        s->samples = rs->samples;
        s->calls = rs->calls;
        s->bytes = rs->bytes;
        s->var = rs->var;
        s->bytes_var = rs->bytes_var;
        s->raw = r;
        /* A weight > 1 makes an estimate; so does a process past its exact stretch; not a
         * stack whose every sample was recorded for its size (all such calls are). */
        s->estimated = rs->large != rs->samples &&
                       (rs->calls != rs->samples || p->procs[rs->process].sampled);
        m->estimated |= s->estimated;
        uint32_t epoch = rs->flags >> MF_ENTRY_EPOCH_SHIFT;
        for (uint32_t i = 0; i < rs->depth; i++) {
            uint32_t loc = mf_location(m, &map, &tmp, rs->process, epoch, rs->frames[i]);
            MF_GROW(m->stack_locs, m->nstack_locs, m->stack_locs_cap);
            m->stack_locs[m->nstack_locs++] = loc;
        }
        s = &m->stacks[m->nstacks - 1];
        s->depth = rs->depth;
        s->trimmed = trim ? mf_trimmed(m, s) : 0;
    }
    mf_map_free(&map);
    free(tmp.v);
    free(mf_loc_epochs);
    mf_loc_epochs = NULL;

    m->sample_interval = 1;
    bool any_sampled = false;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        const struct mf_process *pr = &p->procs[i];
        if (!pr->sampled)
            continue;
        any_sampled = true;
        /* With no weighted sample the interval is unknown; the calls that drew none bound
         * what any estimate may be missing. */
        uint64_t n = pr->sample_interval > 1 ? pr->sample_interval
                     : pr->weighted          ? pr->max_weight
                     : pr->calls > pr->attributed ? pr->calls - pr->attributed : 1;
        if (n > m->sample_interval)
            m->sample_interval = n;
    }
    if (p->unprofiled_calls || p->unprofiled_samples) {
        struct mf_stack *s = mf_new_stack(m);
        s->flags = MF_STACK_NOT_PROFILED;
        s->samples = p->unprofiled_samples;
        s->calls = p->unprofiled_calls;
        s->bytes = p->unprofiled_bytes;
        s->var = p->unprofiled_var;
        s->bytes_var = p->unprofiled_bytes_var;
        s->raw = UINT32_MAX;
        s->estimated = p->unprofiled_calls != p->unprofiled_samples || any_sampled;
        m->estimated |= s->estimated;
    }
}

void mf_model_frames(const struct mf_model *m, const struct mf_stack *s, struct mf_frames *out)
{
    out->n = 0;
    if (s->flags & MF_STACK_NOT_PROFILED) {
        MF_GROW(out->v, out->n, out->cap);
        out->v[out->n++] = (struct mf_frame){mf_intern(MF_NAME_NOT_PROFILED), 0, 0, false};
        return;
    }
    uint32_t skip = s->trimmed;
    for (uint32_t i = 0; i < s->depth; i++) {
        const struct mf_location *l = &m->locs[m->stack_locs[s->first + i]];
        for (uint32_t j = 0; j < l->n; j++) {
            if (skip) {
                skip--;
                continue;
            }
            MF_GROW(out->v, out->n, out->cap);
            out->v[out->n++] = m->frames[l->first + j];
        }
    }
    if (out->n == 0 || (s->flags & MF_ENTRY_TRUNCATED)) {
        uint32_t name = mf_intern(out->n ? MF_NAME_TRUNCATED : MF_NAME_NO_STACK);
        MF_GROW(out->v, out->n, out->cap);
        out->v[out->n++] = (struct mf_frame){name, 0, 0, false};
    }
}
