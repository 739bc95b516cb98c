/* Builds the caller tree from the model's stacks, as the report shows their frames, by
 * grouping the stacks in place (call_tree.h): time and memory linear in the frames, and
 * nodes only where the report prints. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_tree.h"
#include "mf_print.h"

/* ---- the stacks as paths ---------------------------------------------------------------- */

/* What filling a half of the stacks' rooms needs. */
struct mf_paths_fill {
    struct mf_paths *ps;
    bool outer;
    const struct mf_map *vias;
    uint32_t via_ft;
};

/* Stacks [lo, hi) of ps, their frames put in their rooms (ps->first). */
static void mf_paths_fill(void *arg, int half, uint32_t lo, uint32_t hi)
{
    const struct mf_paths_fill *f = arg;
    struct mf_paths *ps = f->ps;
    const struct mf_model *m = ps->m;
    (void)half;
    for (uint32_t i = lo; i < hi; i++) {
        size_t at = ps->first[i], cap = ps->refs_cap;
        uint32_t *refs = ps->refs; /* the room is there: never grown */
        ps->len[i] = mf_model_frame_refs(m, &m->stacks[i], &refs, &at, &cap);
        uint32_t *r = ps->refs + ps->first[i];
        for (uint32_t k = 0; k < ps->len[i]; k++)
            if (r[k] >= MF_REF_PSEUDO)
                r[k] = m->nframes + (r[k] - MF_REF_PSEUDO);
        for (uint32_t k = 0; f->outer && k < ps->len[i] / 2; k++) {
            uint32_t x = r[k];
            r[k] = r[ps->len[i] - 1 - k];
            r[ps->len[i] - 1 - k] = x;
        }
        if (f->outer && m->stacks[i].via)
            r[ps->len[i]++] = f->via_ft + mf_map_get(f->vias, m->stacks[i].via, NULL, NULL);
        ps->order[i] = i;
    }
}

void mf_paths_build(struct mf_paths *ps, const struct mf_model *m, bool outer)
{
    memset(ps, 0, sizeof *ps);
    ps->m = m;
    ps->n = m->nstacks;
    /* outer: a frame for each wrapper folded into some site, after the pseudo-frames */
    struct mf_map vias = {0};
    uint32_t nvias = 0, *via_ids = NULL;
    for (uint32_t i = 0; outer && i < m->nstacks; i++) {
        bool added;
        if (!m->stacks[i].via)
            continue;
        mf_map_put(&vias, m->stacks[i].via, NULL, NULL, nvias, &added);
        if (added) {
            via_ids = mf_xrealloc(via_ids, (nvias + 1) * sizeof *via_ids);
            via_ids[nvias++] = m->stacks[i].via;
        }
    }
    uint32_t via_ft = m->nframes + MF_REF_NPSEUDO;
    ps->ft = mf_xmalloc(((size_t)via_ft + nvias) * sizeof *ps->ft);
    if (m->nframes)
        memcpy(ps->ft, m->frames, m->nframes * sizeof *ps->ft);
    for (uint32_t k = 0; k < MF_REF_NPSEUDO; k++)
        ps->ft[m->nframes + k] = mf_model_ref_frame(m, MF_REF_PSEUDO + k);
    for (uint32_t k = 0; k < nvias; k++) {
        char buf[4096];
        snprintf(buf, sizeof buf, "[via %s]", mf_str(via_ids[k]));
        ps->ft[via_ft + k] = (struct mf_frame){mf_intern(buf), 0, 0, false};
    }
    free(via_ids);
    ps->first = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->first);
    size_t total = 0;
    for (uint32_t i = 0; i < m->nstacks; i++) { /* each stack's room: every frame, +1, +via */
        const struct mf_stack *s = &m->stacks[i];
        ps->first[i] = total;
        total += 1 + (outer && s->via);
        for (uint32_t k = 0; k < s->depth; k++)
            total += m->locs[m->stack_locs[s->first + k]].n;
    }
    ps->refs_cap = total + 1;
    ps->nrefs = total;
    ps->refs = mf_xmalloc(ps->refs_cap * sizeof *ps->refs);
    ps->len = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->len);
    ps->order = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->order);
    ps->tmp = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->tmp);
    ps->names = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->names);
    ps->cur = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->cur);
    ps->cur_tmp = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->cur_tmp);
    ps->calls = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->calls);
    for (uint32_t i = 0; i < ps->n; i++)
        ps->calls[i] = m->stacks[i].calls;
    /* Each stack's frames fill its own room, so the two halves of the stacks are filled at
     * once (half of ~0.5 s at 10^6 stacks). --hide's classes of the frames' names, made
     * lazily, were all made by the model's transform (mf_model_transform): only read here. */
    struct mf_paths_fill fill = {ps, outer, &vias, via_ft};
    mf_in_halves(ps->n, mf_paths_fill, &fill);
    mf_map_free(&vias);
    for (uint32_t k = 0; k < via_ft + nvias; k++)
        if (ps->ft[k].name >= ps->nnames)
            ps->nnames = ps->ft[k].name + 1;
    /* Sites with a wrapper folded into them get ids of their own past the names', one per
     * (name, via): "f via xmalloc" and "f via xrealloc" are two sites. */
    struct mf_map keys = {0};
    for (uint32_t i = 0; !outer && i < ps->n; i++) {
        uint32_t via = m->stacks[i].via;
        if (!via || !ps->len[i])
            continue;
        if (!ps->site_key) {
            ps->site_key = mf_xmalloc(((size_t)ps->n + 1) * sizeof *ps->site_key);
            for (uint32_t k = 0; k < ps->n; k++)
                ps->site_key[k] = ps->len[k] ? mf_paths_name(ps, k, 0) : UINT32_MAX;
        }
        bool added;
        uint64_t key = (uint64_t)via << 32 | mf_paths_name(ps, i, 0);
        ps->site_key[i] = mf_map_put(&keys, key, NULL, NULL, ps->nnames + (uint32_t)keys.n, &added);
    }
    ps->nnames += (uint32_t)keys.n;
    mf_map_free(&keys);
    ps->stamp = mf_xcalloc(ps->nnames, sizeof *ps->stamp);
    ps->slot = mf_xmalloc(ps->nnames * sizeof *ps->slot);
}

void mf_paths_free(struct mf_paths *ps)
{
    free(ps->ft);
    free(ps->refs);
    free(ps->first);
    free(ps->len);
    free(ps->order);
    free(ps->tmp);
    free(ps->names);
    free(ps->cur);
    free(ps->cur_tmp);
    free(ps->calls);
    free(ps->site_key);
    free(ps->stamp);
    free(ps->slot);
    free(ps->groups);
    free(ps->seen);
    memset(ps, 0, sizeof *ps);
}

void mf_paths_walker(struct mf_paths *w, const struct mf_paths *ps)
{
    *w = *ps;
    w->stamp = mf_xcalloc(ps->nnames, sizeof *w->stamp);
    w->slot = mf_xmalloc(ps->nnames * sizeof *w->slot);
    w->gen = 0;
    w->groups = NULL;
    w->ngroups = w->groups_cap = 0;
    w->seen = NULL;
    w->seen_cap = 0;
}

void mf_paths_walker_free(struct mf_paths *w)
{
    free(w->stamp);
    free(w->slot);
    free(w->groups);
    free(w->seen);
    memset(w, 0, sizeof *w);
}

static void mf_push_group(struct mf_paths *ps, uint32_t name, uint32_t lo, uint32_t hi)
{
    MF_GROW(ps->groups, ps->ngroups, ps->groups_cap);
    ps->groups[ps->ngroups++] = (struct mf_group){name, lo, hi, 0};
}

/* Sites grouped by their keys get their name and via back (from their first stack). */
static void mf_name_sites(struct mf_paths *ps, size_t g0, uint32_t d)
{
    if (d != 0 || !ps->site_key)
        return;
    for (size_t g = g0; g < ps->ngroups; g++) {
        uint32_t s = ps->order[ps->groups[g].lo];
        ps->groups[g].name = mf_paths_name(ps, s, 0);
        ps->groups[g].via = ps->m->stacks[s].via;
    }
}

size_t mf_paths_partition(struct mf_paths *ps, uint32_t lo, uint32_t hi, uint32_t d,
                          uint32_t *nends)
{
    size_t g0 = ps->ngroups;
    uint32_t ends = 0, name0 = UINT32_MAX;
    bool uniform = true;
    /* One read of each stack's frame (a cache miss each: the stacks lie apart); the names
     * are kept in ps->names for the passes below. */
    for (uint32_t i = lo; i < hi; i++) {
        uint32_t s = ps->order[i];
        if (i + 32 < hi) { /* started ahead: the stack's place, then its frame */
            __builtin_prefetch(&ps->first[ps->order[i + 32]]);
            __builtin_prefetch(&ps->len[ps->order[i + 32]]);
        }
        if (i + 16 < hi)
            __builtin_prefetch(&ps->refs[ps->first[ps->order[i + 16]] + d]);
        if (ps->len[s] <= d) {
            ends++;
            ps->names[i] = ps->cur[i] = UINT32_MAX;
            continue;
        }
        uint32_t ref = ps->refs[ps->first[s] + d];
        uint32_t name = d == 0 && ps->site_key ? ps->site_key[s] : ps->ft[ref].name;
        ps->cur[i] = ref;
        ps->names[i] = name;
        if (name0 == UINT32_MAX)
            name0 = name;
        else if (name != name0)
            uniform = false;
    }
    *nends = ends;
    if (uniform && ends == 0) { /* one caller: the common case deep in a stack */
        if (hi > lo)
            mf_push_group(ps, name0, lo, hi);
        mf_name_sites(ps, g0, d);
        return g0;
    }
    if (++ps->gen == 0) { /* after 2^32 partitions */
        memset(ps->stamp, 0, ps->nnames * sizeof *ps->stamp);
        ps->gen = 1;
    }
    for (uint32_t i = lo; i < hi; i++) { /* count */
        uint32_t name = ps->names[i];
        if (name == UINT32_MAX)
            continue;
        if (ps->stamp[name] != ps->gen) {
            ps->stamp[name] = ps->gen;
            ps->slot[name] = (uint32_t)ps->ngroups;
            mf_push_group(ps, name, 0, 0);
        }
        ps->groups[ps->slot[name]].hi++;
    }
    uint32_t at = lo + ends;
    for (size_t g = g0; g < ps->ngroups; g++) {
        uint32_t count = ps->groups[g].hi;
        ps->groups[g].lo = ps->groups[g].hi = at;
        at += count;
    }
    uint32_t e = lo;
    for (uint32_t i = lo; i < hi; i++) { /* place, stably */
        uint32_t s = ps->order[i], name = ps->names[i];
        uint32_t at = name == UINT32_MAX ? e++ : ps->groups[ps->slot[name]].hi++;
        ps->tmp[at] = s;
        ps->cur_tmp[at] = ps->cur[i];
    }
    memcpy(ps->order + lo, ps->tmp + lo, (size_t)(hi - lo) * sizeof *ps->order);
    memcpy(ps->cur + lo, ps->cur_tmp + lo, (size_t)(hi - lo) * sizeof *ps->cur);
    mf_name_sites(ps, g0, d);
    return g0;
}

uint32_t mf_paths_loc(struct mf_paths *ps, uint32_t lo, uint32_t hi, uint32_t d)
{
    /* The locations seen, in order of first appearance; a map once there are many. */
    struct mf_loc_count *seen = ps->seen;
    struct mf_map map = {0};
    size_t n = 0;
    bool mapped = false;
    (void)d; /* the frames at depth d are ps->cur[lo, hi) */
    /* One line only (a node of one stack, most nodes deep in a large profile): it wins
     * whatever the calls, which lie in another array, a cache miss a stack. */
    uint32_t one = UINT32_MAX;
    bool uniform = true;
    for (uint32_t i = lo; i < hi && uniform; i++) {
        const struct mf_frame *f = &ps->ft[ps->cur[i]];
        if (!f->file)
            continue;
        if (one == UINT32_MAX)
            one = ps->cur[i];
        else
            uniform = ps->ft[one].file == f->file && ps->ft[one].line == f->line;
    }
    if (uniform)
        return one;
    for (uint32_t i = lo; i < hi; i++) {
        uint32_t ref = ps->cur[i];
        const struct mf_frame *f = &ps->ft[ref];
        if (!f->file)
            continue;
        uint64_t calls = ps->calls[ps->order[i]];
        size_t k = 0;
        if (n && ps->ft[seen[n - 1].ref].file == f->file && ps->ft[seen[n - 1].ref].line == f->line) {
            k = n - 1; /* most stacks of a node have the same line as the one before */
        } else if (!mapped) {
            while (k < n && !(ps->ft[seen[k].ref].file == f->file &&
                              ps->ft[seen[k].ref].line == f->line))
                k++;
            if (k == n && n == 16) { /* many lines: index them */
                mapped = true;
                for (size_t j = 0; j < n; j++) {
                    bool added;
                    const struct mf_frame *g = &ps->ft[seen[j].ref];
                    mf_map_put(&map, (uint64_t)g->file << 32 | g->line, NULL, NULL, (uint32_t)j,
                               &added);
                }
            }
        }
        if (mapped) {
            bool added;
            k = mf_map_put(&map, (uint64_t)f->file << 32 | f->line, NULL, NULL, (uint32_t)n,
                           &added);
        }
        if (k == n) {
            if (n == ps->seen_cap) {
                ps->seen_cap = ps->seen_cap ? ps->seen_cap * 2 : 64;
                ps->seen = seen = mf_xrealloc(seen, ps->seen_cap * sizeof *seen);
            }
            seen[n].ref = ref;
            seen[n++].calls = 0;
        }
        seen[k].calls += calls;
    }
    if (mapped)
        mf_map_free(&map);
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < n; k++)
        if (best == SIZE_MAX || seen[k].calls > seen[best].calls)
            best = k;
    return best == SIZE_MAX ? UINT32_MAX : seen[best].ref;
}

/* ---- the tree report's nodes ------------------------------------------------------------ */

struct mf_build {
    struct mf_tree *t;
    struct mf_paths ps;
    double threshold;
    uint64_t total;
};

static const struct mf_tree *mf_sort_tree;

static int mf_child_cmp(const void *a, const void *b)
{
    const struct mf_node *x = &mf_sort_tree->nodes[*(const uint32_t *)a];
    const struct mf_node *y = &mf_sort_tree->nodes[*(const uint32_t *)b];
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    int c = strcmp(mf_str(x->name), mf_str(y->name));
    return c ? c : strcmp(mf_str(x->via), mf_str(y->via));
}

static bool mf_expands(const struct mf_build *b, uint64_t calls)
{
    return !(b->total && (double)calls * 100.0 / (double)b->total < b->threshold);
}

/* Makes the children of node (the stacks order[lo, hi), frames up to depth d - 1 shared),
 * and theirs where the report prints them. Children's node ids are kept in the node's
 * children as offsets into t->child_ids until the end. */
static void mf_expand(struct mf_build *b, uint32_t node, uint32_t lo, uint32_t hi, uint32_t d)
{
    struct mf_tree *t = b->t;
    struct mf_paths *ps = &b->ps;
    uint32_t nends;
    size_t g0 = mf_paths_partition(ps, lo, hi, d, &nends);
    size_t ng = ps->ngroups - g0;
    uint32_t first_id = t->n;
    for (size_t g = g0; g < ps->ngroups; g++) {
        const struct mf_group *gr = &ps->groups[g];
        MF_GROW(t->nodes, t->n, t->cap);
        struct mf_node *c = &t->nodes[t->n++];
        memset(c, 0, sizeof *c);
        c->name = gr->name;
        c->via = gr->via;
        c->parent = node;
        for (uint32_t i = gr->lo; i < gr->hi; i++) {
            uint32_t si = ps->order[i];
            const struct mf_stack *s = &ps->m->stacks[si];
            c->calls += s->calls;
            c->bytes += s->bytes;
            c->samples += s->samples;
            c->var += s->var;
            c->bytes_var += s->bytes_var;
            c->estimated |= s->estimated;
            if (ps->len[si] == d + 1) {
                c->end_calls += s->calls;
                c->end_bytes += s->bytes;
                c->end_samples += s->samples;
                c->end_estimated |= s->estimated;
            }
        }
        uint32_t ref = mf_paths_loc(ps, gr->lo, gr->hi, d);
        if (ref != UINT32_MAX) {
            c->has_loc = true;
            c->loc = (struct mf_loc){ps->ft[ref].file, ps->ft[ref].line, 0};
        }
    }
    /* The children, sorted, at the end of child_ids; their offset in node's pointer. */
    if (t->nchild_ids + ng > t->child_ids_cap) {
        t->child_ids_cap = (t->nchild_ids + ng) * 2;
        t->child_ids = mf_xrealloc(t->child_ids, t->child_ids_cap * sizeof *t->child_ids);
    }
    size_t off = t->nchild_ids;
    for (size_t k = 0; k < ng; k++)
        t->child_ids[off + k] = first_id + (uint32_t)k;
    t->nchild_ids += ng;
    t->nodes[node].children = (uint32_t *)(uintptr_t)off;
    t->nodes[node].nchildren = (uint32_t)ng;
    /* Deeper where the report prints: in group order, which is the children's id order. */
    for (size_t k = 0; k < ng; k++) {
        const struct mf_group gr = ps->groups[g0 + k];
        if (mf_expands(b, t->nodes[first_id + k].calls))
            mf_expand(b, first_id + (uint32_t)k, gr.lo, gr.hi, d + 1);
    }
    ps->ngroups = g0;
}

/* Distinct stacks by their names: the nodes where some stack ends, [not profiled] aside.
 * Each stack's names are hashed where they lie (one pass over the frames in memory order,
 * not a random read a stack and a depth as grouping them would take); stacks whose hashes
 * agree are compared. */
struct mf_seq_key {
    const struct mf_paths *ps;
    uint32_t s;
};

static uint32_t mf_seq_name(const struct mf_paths *ps, uint32_t s, uint32_t d)
{
    return d == 0 && ps->site_key ? ps->site_key[s] : mf_paths_name(ps, s, d);
}

static bool mf_seq_eq(const void *ctx, uint32_t val)
{
    const struct mf_seq_key *k = ctx;
    const struct mf_paths *ps = k->ps;
    if (ps->len[val] != ps->len[k->s])
        return false;
    for (uint32_t d = 0; d < ps->len[val]; d++)
        if (mf_seq_name(ps, val, d) != mf_seq_name(ps, k->s, d))
            return false;
    return true;
}

uint32_t mf_paths_count_distinct(const struct mf_paths *ps)
{
    struct mf_map map = {0};
    uint32_t merged = 0;
    for (uint32_t s = 0; s < ps->n; s++) {
        if (ps->m->stacks[s].flags & MF_STACK_NOT_PROFILED)
            continue;
        const uint32_t *refs = ps->refs + ps->first[s];
        uint32_t len = ps->len[s];
        uint64_t h = 0x9e3779b97f4a7c15u * (len + 1);
        for (uint32_t d = 0; d < len; d++) {
            uint32_t name = d == 0 && ps->site_key ? ps->site_key[s] : ps->ft[refs[d]].name;
            h = (h ^ name) * 0xff51afd7ed558ccdu + (h >> 31);
        }
        struct mf_seq_key k = {ps, s};
        bool added;
        mf_map_put(&map, mf_hash_u64(h), mf_seq_eq, &k, s, &added);
        merged += added;
    }
    mf_map_free(&map);
    return merged;
}

struct mf_distinct {
    const struct mf_paths *ps;
    uint32_t n;
};

static void *mf_count_distinct_thread(void *arg)
{
    struct mf_distinct *d = arg;
    d->n = mf_paths_count_distinct(d->ps);
    return NULL;
}

void mf_tree_build(struct mf_tree *t, const struct mf_model *m, double threshold,
                   uint64_t total)
{
    memset(t, 0, sizeof *t);
    MF_GROW(t->nodes, t->n, t->cap);
    struct mf_node *root = &t->nodes[t->n++];
    memset(root, 0, sizeof *root);
    struct mf_build b = {.t = t, .threshold = threshold, .total = total};
    mf_paths_build(&b.ps, m, false);
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        root->calls += s->calls;
        root->bytes += s->bytes;
        root->samples += s->samples;
        root->var += s->var;
        root->bytes_var += s->bytes_var;
    }
    /* The distinct stacks are counted on a second thread while this one groups them: the
     * count reads only what grouping leaves alone (refs, first, len, site_key, ft). */
    struct mf_distinct distinct = {&b.ps, 0};
    pthread_t counter;
    bool threaded = pthread_create(&counter, NULL, mf_count_distinct_thread, &distinct) == 0;
    mf_expand(&b, 0, 0, b.ps.n, 0);
    if (threaded)
        pthread_join(counter, NULL);
    else
        mf_count_distinct_thread(&distinct);
    t->merged_stacks = distinct.n;
    for (uint32_t i = 0; i < t->n; i++) {
        struct mf_node *n = &t->nodes[i];
        n->children = n->nchildren ? t->child_ids + (uintptr_t)n->children : NULL;
    }
    mf_sort_tree = t;
    for (uint32_t i = 0; i < t->n; i++)
        if (t->nodes[i].nchildren > 1)
            qsort(t->nodes[i].children, t->nodes[i].nchildren, sizeof(uint32_t), mf_child_cmp);
    t->raw_stacks = mf_profile_image_stacks(m->p);
    t->estimated = m->estimated;
    t->transformed = m->transformed;
    t->sample_interval = m->sample_interval;
    mf_paths_free(&b.ps);
}

const struct mf_loc *mf_node_loc(const struct mf_node *n)
{
    return n->has_loc ? &n->loc : NULL;
}

void mf_tree_free(struct mf_tree *t)
{
    free(t->nodes);
    free(t->child_ids); /* every node's children, one array */
}
