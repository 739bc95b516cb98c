/* Builds the caller tree: symbolize each distinct raw stack, trim its plumbing, insert it. */
#include <stdlib.h>
#include <string.h>

#include "call_tree.h"
#include "mf_print.h"
#include "symbolize.h"
#include "trim.h"

static struct mf_map mf_child_ids; /* (parent, name) -> node */

static uint32_t mf_child(struct mf_tree *t, uint32_t parent, uint32_t name)
{
    bool added;
    uint64_t key = (uint64_t)parent << 32 | name;
    uint32_t id = mf_map_put(&mf_child_ids, key, NULL, NULL, t->n, &added);
    if (added) {
        MF_GROW(t->nodes, t->n, t->cap);
        struct mf_node *c = &t->nodes[t->n++];
        memset(c, 0, sizeof *c);
        c->name = name;
        c->parent = parent;
        struct mf_node *p = &t->nodes[parent];
        MF_GROW(p->children, p->nchildren, p->children_cap);
        p->children[p->nchildren++] = id;
    }
    return id;
}

static void mf_add_loc(struct mf_node *n, uint32_t file, uint32_t line, uint64_t calls)
{
    if (!file)
        return;
    for (uint32_t i = 0; i < n->nlocs; i++) {
        if (n->locs[i].file == file && n->locs[i].line == line) {
            n->locs[i].calls += calls;
            return;
        }
    }
    MF_GROW(n->locs, n->nlocs, n->locs_cap);
    n->locs[n->nlocs++] = (struct mf_loc){file, line, calls};
}

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

static void mf_insert(struct mf_tree *t, const struct mf_frame *f, uint32_t n, uint64_t samples,
                      uint64_t calls, uint64_t bytes, uint64_t var, bool estimated)
{
    uint32_t node = 0;
    t->nodes[0].calls += calls;
    t->nodes[0].bytes += bytes;
    t->nodes[0].samples += samples;
    t->nodes[0].var += var;
    for (uint32_t i = 0; i < n; i++) {
        node = mf_child(t, node, f[i].name);
        struct mf_node *x = &t->nodes[node];
        x->calls += calls;
        x->bytes += bytes;
        x->samples += samples;
        x->var += var;
        x->estimated |= estimated;
        mf_add_loc(x, f[i].file, f[i].line, calls);
    }
    struct mf_node *x = &t->nodes[node];
    if (x->end_calls == 0 && x->end_samples == 0)
        t->merged_stacks++;
    x->end_calls += calls;
    x->end_bytes += bytes;
    x->end_samples += samples;
    x->end_estimated |= estimated;
    t->estimated |= estimated;
}

static const struct mf_tree *mf_sort_tree;

static int mf_child_cmp(const void *a, const void *b)
{
    const struct mf_node *x = &mf_sort_tree->nodes[*(const uint32_t *)a];
    const struct mf_node *y = &mf_sort_tree->nodes[*(const uint32_t *)b];
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return strcmp(mf_str(x->name), mf_str(y->name));
}

void mf_tree_build(struct mf_tree *t, struct mf_profile *p, bool trim)
{
    memset(t, 0, sizeof *t);
    MF_GROW(t->nodes, t->n, t->cap);
    memset(&t->nodes[t->n++], 0, sizeof *t->nodes);
    struct mf_frames fr = {0};
    for (uint32_t s = 0; s < p->nstacks; s++) {
        const struct mf_raw_stack *rs = &p->stacks[s];
        fr.n = 0;
        for (uint32_t i = 0; i < rs->depth; i++)
            mf_symbolize(&p->procs[rs->process], rs->frames[i],
                         rs->flags >> MF_ENTRY_EPOCH_SHIFT, &fr);
        uint32_t first = 0;
        if (trim) /* never to nothing: the outermost frame stays */
            while (first + 1 < fr.n && mf_is_plumbing(&fr.v[first]))
                first++;
        if (fr.n == 0 || (rs->flags & MF_ENTRY_TRUNCATED)) {
            uint32_t name = mf_intern(fr.n ? MF_NAME_TRUNCATED : MF_NAME_NO_STACK);
            MF_GROW(fr.v, fr.n, fr.cap);
            fr.v[fr.n++] = (struct mf_frame){name, 0, 0, false};
        }
        /* A weight > 1 makes an estimate; so does a process past its exact stretch. */
        bool est = rs->calls != rs->samples || p->procs[rs->process].sampled;
        mf_insert(t, fr.v + first, fr.n - first, rs->samples, rs->calls, rs->bytes, rs->var, est);
    }
    free(fr.v);
    t->raw_stacks = p->nstacks;
    t->sample_interval = 1;
    bool any_sampled = false;
    for (uint32_t i = 0; i < p->nprocs; i++) {
        if (!p->procs[i].sampled)
            continue;
        any_sampled = true;
        const struct mf_process *pr = &p->procs[i];
        /* With no weighted sample the interval is unknown; the calls that drew none bound
         * what any estimate may be missing. */
        uint64_t n = pr->sample_interval > 1 ? pr->sample_interval
                     : pr->weighted          ? pr->max_weight
                     : pr->calls > pr->attributed ? pr->calls - pr->attributed : 1;
        if (n > t->sample_interval)
            t->sample_interval = n;
    }
    if (p->unprofiled_calls || p->unprofiled_samples) {
        struct mf_frame f = {mf_intern(MF_NAME_NOT_PROFILED), 0, 0, false};
        uint32_t merged = t->merged_stacks; /* not a stack */
        mf_insert(t, &f, 1, p->unprofiled_samples, p->unprofiled_calls, p->unprofiled_bytes,
                  p->unprofiled_var, p->unprofiled_calls != p->unprofiled_samples || any_sampled);
        t->merged_stacks = merged;
    }
    mf_sort_tree = t;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->nodes[i].nchildren > 1)
            qsort(t->nodes[i].children, t->nodes[i].nchildren, sizeof(uint32_t), mf_child_cmp);
    mf_map_free(&mf_child_ids);
}

const struct mf_loc *mf_node_loc(const struct mf_node *n)
{
    const struct mf_loc *best = NULL;
    for (uint32_t i = 0; i < n->nlocs; i++)
        if (!best || n->locs[i].calls > best->calls)
            best = &n->locs[i];
    return best;
}
