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

/* The raw stacks [lo, hi), made model stacks on a thread of their own: each frame a location
 * id of this half's (its distinct return addresses numbered in order of first appearance),
 * renumbered once both halves' addresses are symbolized in order, half 0's first. That is
 * the order one pass over all the stacks would meet them in: the same ids, the same bytes. */
struct mf_stacks_half {
    const struct mf_profile *p;
    struct mf_model *m;
    uint32_t lo, hi;
    struct mf_loc_cache cache[MF_LOC_CACHE]; /* the same few thousand return addresses make
                                                up millions of stacks */
    struct mf_loc_cache *keys; /* by id of this half (id unused) */
    uint32_t nkeys, keys_cap;
    struct mf_map map;
    bool estimated;
};

struct mf_half_key {
    const struct mf_stacks_half *h;
    struct mf_loc_cache k;
};

static bool mf_half_key_eq(const void *ctx, uint32_t val)
{
    const struct mf_half_key *q = ctx;
    const struct mf_loc_cache *k = &q->h->keys[val];
    return k->pc == q->k.pc && k->process == q->k.process && k->epoch == q->k.epoch;
}

static uint32_t mf_half_loc(struct mf_stacks_half *h, uint64_t pc, uint32_t process, uint32_t epoch)
{
    struct mf_loc_cache *c = &h->cache[mf_hash_u64(pc ^ process) & (MF_LOC_CACHE - 1)];
    if (c->id != UINT32_MAX && c->pc == pc && c->process == process && c->epoch == epoch)
        return c->id;
    struct mf_half_key q = {h, {pc, process, epoch, 0}};
    bool added;
    uint32_t id = mf_map_put(&h->map, mf_hash_u64(pc ^ mf_hash_u64((uint64_t)process << 32 | epoch)),
                             mf_half_key_eq, &q, h->nkeys, &added);
    if (added) {
        MF_GROW(h->keys, h->nkeys, h->keys_cap);
        h->keys[h->nkeys++] = q.k;
    }
    *c = (struct mf_loc_cache){pc, process, epoch, id};
    return id;
}

static void mf_stacks_half_make(void *arg, int half, uint32_t lo, uint32_t hi)
{
    struct mf_stacks_half *h = &((struct mf_stacks_half *)arg)[half];
    const struct mf_profile *p = h->p;
    struct mf_model *m = h->m;
    h->lo = lo;
    h->hi = hi;
    memset(h->cache, 0xff, sizeof h->cache);
    for (uint32_t r = lo; r < hi; r++) {
        const struct mf_raw_stack *rs = &p->stacks[r];
        if (r + 4 < hi) {
            /* The stacks' frames lie in the order the program first met them, read here in
             * another: each stack's first lines were a cache miss, half of this loop. */
            const struct mf_raw_stack *ahead = &p->stacks[r + 4];
            mf_prefetch_range(ahead->frames, ahead->depth * sizeof *ahead->frames);
        }
        struct mf_stack *s = &m->stacks[r];
        uint32_t first = s->first; /* set by mf_model_build */
        memset(s, 0, sizeof *s);
        s->first = first;
        s->depth = rs->depth;
        s->process = rs->process;
        s->flags = rs->flags & MF_ENTRY_TRUNCATED;
        if (m->view == MF_VIEW_LIVE) {
            const struct mf_live_count *l = &p->live[r];
            s->samples = l->samples;
            s->calls = l->calls;
            s->bytes = l->bytes;
            s->var = l->var;
            s->bytes_var = l->bytes_var;
        } else {
            s->samples = rs->samples;
            s->calls = rs->calls;
            s->bytes = rs->bytes;
            s->var = rs->var;
            s->bytes_var = rs->bytes_var;
        }
        s->raw = r;
        s->images = rs->images;
        /* A weight > 1 makes an estimate; so does a process past its exact stretch; not a
         * stack whose every sample was recorded for its size (all such calls are). */
        s->estimated = !(rs->flags & MF_ENTRY_LARGE) && (s->calls != s->samples || rs->sampled);
        h->estimated |= s->estimated;
        uint32_t epoch = rs->flags >> MF_ENTRY_EPOCH_SHIFT;
        for (uint32_t i = 0; i < rs->depth; i++)
            m->stack_locs[first + i] = mf_half_loc(h, rs->frames[i], rs->process, epoch);
    }
}

/* The interval a process's error bars are floored at (mf_calls_se): its fixed interval, or
 * the typical weight of its weighted samples (sum w(w - 1) / sum (w - 1): one outlying
 * weight, as the default mode's interval moves, made every site's error bar that of a
 * sample of it, twice the spread measured over runs); with no weighted sample, the calls
 * that drew none bound what any estimate may be missing. The live view's allocations are
 * at least one sample of the live heap's own interval. */
static uint64_t mf_process_interval(const struct mf_process *pr, enum mf_view view)
{
    if (pr->sample_interval > 1)
        return pr->sample_interval;
    uint64_t n = pr->weighted && pr->weight_excess
                     ? (pr->weight_var + pr->weight_excess - 1) / pr->weight_excess
                 : pr->calls > pr->attributed ? pr->calls - pr->attributed
                                              : 1;
    if (view == MF_VIEW_LIVE && pr->live_interval > n)
        n = pr->live_interval;
    return n;
}

void mf_model_build(struct mf_model *m, const struct mf_profile *p, const struct mf_model_config *c)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    m->trim = c->trim;
    m->view = c->view == MF_VIEW_LIVE && p->live ? MF_VIEW_LIVE : MF_VIEW_CALLS;
    m->xf = c->xf ? *c->xf : (struct mf_transform){.fold = true, .cut = true};
    struct mf_map map = {0};
    struct mf_frames tmp = {0};
    /* Sized up front: one location per raw frame, one stack per raw stack (+ [not profiled]). */
    m->stacks_cap = p->nstacks + 1;
    m->stacks = mf_xmalloc(m->stacks_cap * sizeof *m->stacks);
    size_t nlocs = 0;
    for (uint32_t r = 0; r < p->nstacks; r++) {
        if (nlocs + p->stacks[r].depth >= UINT32_MAX) {
            mf_error("the profile holds more than %u frames in all: too large to report", UINT32_MAX - 1);
            exit(1);
        }
        m->stacks[r].first = (uint32_t)nlocs;
        nlocs += p->stacks[r].depth;
    }
    m->nstack_locs = m->stack_locs_cap = (uint32_t)nlocs;
    m->stack_locs = nlocs ? mf_xmalloc(nlocs * sizeof *m->stack_locs) : NULL;
    m->nstacks = p->nstacks;
    static struct mf_stacks_half halves[2];
    memset(halves, 0, sizeof halves);
    for (int k = 0; k < 2; k++) {
        halves[k].p = p;
        halves[k].m = m;
    }
    mf_in_halves(p->nstacks, mf_stacks_half_make, halves);
    /* Each distinct address symbolized once, in the order of first appearance; the halves'
     * ids renumbered (half 0's stay as they are: the model's first locations). */
    for (int k = 0; k < 2; k++) {
        struct mf_stacks_half *h = &halves[k];
        uint32_t *to = mf_xmalloc(((size_t)h->nkeys + 1) * sizeof *to);
        bool same = true;
        for (uint32_t j = 0; j < h->nkeys; j++) {
            to[j] = mf_location(m, &map, &tmp, h->keys[j].process, h->keys[j].epoch, h->keys[j].pc);
            same &= to[j] == j;
        }
        if (!same && h->hi > h->lo) {
            uint32_t a = m->stacks[h->lo].first;
            uint32_t b = h->hi < p->nstacks ? m->stacks[h->hi].first : (uint32_t)nlocs;
            for (uint32_t i = a; i < b; i++)
                m->stack_locs[i] = to[m->stack_locs[i]];
        }
        m->estimated |= h->estimated;
        free(to);
        free(h->keys);
        mf_map_free(&h->map);
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
        uint64_t n = mf_process_interval(pr, m->view);
        if (n > m->sample_interval)
            m->sample_interval = n;
    }
    if (m->view == MF_VIEW_LIVE) {
        for (uint32_t i = 0; i < p->nstacks; i++) { /* each at most its stack's calls */
            m->view_calls += p->live[i].calls;
            m->view_bytes += p->live[i].bytes;
        }
    } else {
        m->view_calls = mf_profile_total_calls(p);
        m->view_bytes = mf_profile_total_bytes(p);
    }
    /* [not profiled]: calls no stack could be recorded for (the live heap records none). */
    if (m->view == MF_VIEW_CALLS && (p->unprofiled_calls || p->unprofiled_samples)) {
        struct mf_stack *s = mf_new_stack(m);
        s->flags = MF_STACK_NOT_PROFILED;
        s->samples = p->unprofiled_samples;
        s->calls = p->unprofiled_calls;
        s->bytes = p->unprofiled_bytes;
        s->var = p->unprofiled_var;
        s->bytes_var = p->unprofiled_bytes_var;
        s->raw = UINT32_MAX;
        s->images = 1;
        s->estimated = p->unprofiled_calls != p->unprofiled_samples || any_sampled;
        m->estimated |= s->estimated;
    }
    mf_model_transform(m);
}

void mf_model_free(struct mf_model *m)
{
    free(m->locs);
    free(m->frames);
    free(m->stack_locs);
    free(m->stacks);
    memset(m, 0, sizeof *m);
}

uint32_t mf_model_nframes(const struct mf_model *m, const struct mf_stack *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->depth; i++)
        n += m->locs[m->stack_locs[s->first + i]].n;
    return n;
}

bool mf_model_shows(const struct mf_model *m, const struct mf_stack *s, uint32_t k,
                    uint32_t nframes, uint32_t name)
{
    return k >= s->trimmed && k + s->cut < nframes && !mf_name_hidden(m, name);
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
    if (!m->xf.nhide) {
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
                if (mf_model_shows(m, s, k, total, m->frames[l->first + j].name))
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

void mf_model_keep_counted(struct mf_model *m)
{
    struct mf_stack *kept = mf_xcalloc((size_t)m->nstacks + 1, sizeof *kept);
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nstacks; i++)
        if (m->stacks[i].calls || m->stacks[i].samples)
            kept[n++] = m->stacks[i];
    m->stacks = kept;
    m->nstacks = m->stacks_cap = n;
}
