/* Builds the profile model (model.h): each distinct return address of each process image
 * symbolized once, every stack a list of those locations, then transformed (transform.c). */
#include <stdlib.h>
#include <string.h>

#include "mf_math.h"
#include "mf_print.h"
#include "model.h"
#include "transform.h"

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

#define MF_LOC_CACHE 4096
struct mf_loc_cache {
    uint64_t pc;
    uint32_t process, epoch, id;
};

/* ---- stacks --------------------------------------------------------------------------- */

static struct mf_stack *mf_new_stack(struct mf_model *m)
{
    MF_GROW(m->stacks, m->nstacks, m->stacks_cap);
    struct mf_stack *s = &m->stacks[m->nstacks++];
    memset(s, 0, sizeof *s);
    s->first = m->nstack_locs;
    return s;
}

void mf_model_build(struct mf_model *m, const struct mf_profile *p, bool trim)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    m->trim = trim;
    struct mf_map map = {0};
    struct mf_frames tmp = {0};
    static struct mf_loc_cache cache[MF_LOC_CACHE];
    memset(cache, 0xff, sizeof cache);
    /* Sized up front: one location per raw frame, one stack per raw stack (+ [not profiled]). */
    size_t nlocs = 0;
    for (uint32_t r = 0; r < p->nstacks; r++)
        nlocs += p->stacks[r].depth;
    if (nlocs && nlocs < UINT32_MAX) {
        m->stack_locs_cap = (uint32_t)nlocs;
        m->stack_locs = mf_xmalloc(nlocs * sizeof *m->stack_locs);
    }
    m->stacks_cap = p->nstacks + 1;
    m->stacks = mf_xmalloc(m->stacks_cap * sizeof *m->stacks);
    for (uint32_t r = 0; r < p->nstacks; r++) {
        const struct mf_raw_stack *rs = &p->stacks[r];
        if (r + 4 < p->nstacks) {
            /* The stacks' frames lie in the order the program first met them, read here in
             * another: each stack's first lines were a cache miss, half of this loop. */
            const struct mf_raw_stack *ahead = &p->stacks[r + 4];
            mf_prefetch_range(ahead->frames, ahead->depth * sizeof *ahead->frames);
        }
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
        s->estimated = !(rs->flags & MF_ENTRY_LARGE) &&
                       (rs->calls != rs->samples || p->procs[rs->process].sampled);
        m->estimated |= s->estimated;
        uint32_t epoch = rs->flags >> MF_ENTRY_EPOCH_SHIFT;
        for (uint32_t i = 0; i < rs->depth; i++) {
            /* A direct-mapped cache in front of the map: the same few thousand return
             * addresses make up millions of stacks. */
            uint64_t pc = rs->frames[i];
            struct mf_loc_cache *c = &cache[mf_hash_u64(pc ^ rs->process) & (MF_LOC_CACHE - 1)];
            uint32_t loc;
            if (c->id != UINT32_MAX && c->pc == pc && c->process == rs->process &&
                c->epoch == epoch) {
                loc = c->id;
            } else {
                loc = mf_location(m, &map, &tmp, rs->process, epoch, pc);
                *c = (struct mf_loc_cache){pc, rs->process, epoch, loc};
            }
            MF_GROW(m->stack_locs, m->nstack_locs, m->stack_locs_cap);
            m->stack_locs[m->nstack_locs++] = loc;
        }
        s = &m->stacks[m->nstacks - 1];
        s->depth = rs->depth;
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
    mf_model_transform(m);
}

uint32_t mf_model_nframes(const struct mf_model *m, const struct mf_stack *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->depth; i++)
        n += m->locs[m->stack_locs[s->first + i]].n;
    return n;
}

bool mf_model_shows(const struct mf_stack *s, uint32_t k, uint32_t nframes, uint32_t name)
{
    return k >= s->trimmed && k + s->cut < nframes && !mf_name_hidden(name);
}

uint32_t mf_model_pseudo(const struct mf_stack *s, uint32_t shown)
{
    if (shown == 0)
        return mf_intern(s->flags & MF_STACK_ALL_HIDDEN ? MF_NAME_ALL_HIDDEN : MF_NAME_NO_STACK);
    return s->flags & MF_ENTRY_TRUNCATED ? mf_intern(MF_NAME_TRUNCATED) : 0;
}

/* The pseudo-frames' interned names, by MF_REF_* - MF_REF_PSEUDO. */
static uint32_t mf_pseudo_names[MF_REF_NPSEUDO];

struct mf_frame mf_model_ref_frame(const struct mf_model *m, uint32_t ref)
{
    if (ref < MF_REF_PSEUDO)
        return m->frames[ref];
    uint32_t k = ref - MF_REF_PSEUDO;
    if (!mf_pseudo_names[k]) {
        static const char *const names[MF_REF_NPSEUDO] = {
            MF_NAME_NOT_PROFILED, MF_NAME_TRUNCATED, MF_NAME_NO_STACK, MF_NAME_ALL_HIDDEN};
        mf_pseudo_names[k] = mf_intern(names[k]);
    }
    return (struct mf_frame){mf_pseudo_names[k], 0, 0, false};
}

uint32_t mf_model_frame_refs(const struct mf_model *m, const struct mf_stack *s, uint32_t **v,
                             size_t *n, size_t *cap)
{
    size_t start = *n, room = 1;
    const uint32_t *sl = s->depth ? m->stack_locs + s->first : NULL; /* none: no stack_locs */
    for (uint32_t i = 0; i < s->depth; i++)
        room += m->locs[sl[i]].n;
    if (*n + room > *cap) {
        *cap = (*n + room) * 2;
        *v = mf_xrealloc(*v, *cap * sizeof **v);
    }
    uint32_t *out = *v;
    if (s->flags & MF_STACK_NOT_PROFILED) {
        out[(*n)++] = MF_REF_NOT_PROFILED;
        return 1;
    }
    uint32_t total = (uint32_t)(room - 1), k = 0;
    if (!mf_transform_get()->nhide) {
        /* Nothing hidden: the frames shown are [trimmed, total - cut), in a row. */
        uint32_t lo = s->trimmed, hi = s->cut < total ? total - s->cut : 0;
        for (uint32_t i = 0; i < s->depth && k < hi; i++) {
            const struct mf_location *l = &m->locs[sl[i]];
            uint32_t a = k < lo ? lo - k : 0, b = hi - k < l->n ? hi - k : l->n;
            for (uint32_t j = a; j < b; j++)
                out[(*n)++] = l->first + j;
            k += l->n;
        }
    } else {
        for (uint32_t i = 0; i < s->depth; i++) {
            const struct mf_location *l = &m->locs[sl[i]];
            for (uint32_t j = 0; j < l->n; j++, k++)
                if (mf_model_shows(s, k, total, m->frames[l->first + j].name))
                    out[(*n)++] = l->first + j;
        }
    }
    /* The pseudo-frame mf_model_pseudo names, as a reference. */
    if (*n == start)
        out[(*n)++] = s->flags & MF_STACK_ALL_HIDDEN ? MF_REF_ALL_HIDDEN : MF_REF_NO_STACK;
    else if (s->flags & MF_ENTRY_TRUNCATED)
        out[(*n)++] = MF_REF_TRUNCATED;
    return (uint32_t)(*n - start);
}

void mf_model_frames(const struct mf_model *m, const struct mf_stack *s, struct mf_frames *out)
{
    static uint32_t *refs;
    static size_t cap;
    size_t n = 0;
    mf_model_frame_refs(m, s, &refs, &n, &cap);
    out->n = 0;
    if (n > out->cap) {
        out->cap = (uint32_t)n;
        out->v = mf_xrealloc(out->v, n * sizeof *out->v);
    }
    for (size_t i = 0; i < n; i++)
        out->v[out->n++] = mf_model_ref_frame(m, refs[i]);
}

double mf_calls_se(uint64_t calls, uint64_t var, uint64_t interval)
{
    double v = (double)var, n = (double)interval;
    if (!calls)
        return 0;
    if (interval > 1 && v < n * (n - 1))
        v = n * (n - 1);
    return mf_sqrt(v);
}

double mf_bytes_se(uint64_t calls, uint64_t bytes, double var, uint64_t interval)
{
    double n = (double)interval, mean = calls ? (double)bytes / (double)calls : 0;
    if (!bytes)
        return 0;
    if (interval > 1 && var < n * (n - 1) * mean * mean)
        var = n * (n - 1) * mean * mean;
    return mf_sqrt(var);
}
