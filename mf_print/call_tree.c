/* Builds the caller tree from the model's stacks, as the report shows their frames. */
#include <stdlib.h>
#include <string.h>

#include "call_tree.h"
#include "mf_print.h"

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

static void mf_insert(struct mf_tree *t, const struct mf_frame *f, uint32_t n, uint64_t samples,
                      uint64_t calls, uint64_t bytes, uint64_t var, double bytes_var,
                      bool estimated)
{
    uint32_t node = 0;
    t->nodes[0].calls += calls;
    t->nodes[0].bytes += bytes;
    t->nodes[0].samples += samples;
    t->nodes[0].var += var;
    t->nodes[0].bytes_var += bytes_var;
    for (uint32_t i = 0; i < n; i++) {
        node = mf_child(t, node, f[i].name);
        struct mf_node *x = &t->nodes[node];
        x->calls += calls;
        x->bytes += bytes;
        x->samples += samples;
        x->var += var;
        x->bytes_var += bytes_var;
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

void mf_tree_build(struct mf_tree *t, const struct mf_model *m)
{
    memset(t, 0, sizeof *t);
    MF_GROW(t->nodes, t->n, t->cap);
    memset(&t->nodes[t->n++], 0, sizeof *t->nodes);
    struct mf_frames fr = {0};
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        mf_model_frames(m, s, &fr);
        uint32_t merged = t->merged_stacks; /* [not profiled] is not a stack */
        mf_insert(t, fr.v, fr.n, s->samples, s->calls, s->bytes, s->var, s->bytes_var,
                  s->estimated);
        if (s->flags & MF_STACK_NOT_PROFILED)
            t->merged_stacks = merged;
    }
    free(fr.v);
    t->raw_stacks = m->p->nstacks;
    t->estimated = m->estimated;
    t->sample_interval = m->sample_interval;
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
