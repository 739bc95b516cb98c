/* The caller tree: a prefix tree over the symbolized, trimmed stacks read innermost first.
 * Level 1 holds the allocation sites, each node's children its callers. Nodes are keyed by
 * function name (a site also by the wrapper folded into it: "f via xmalloc" and "f via
 * xrealloc" are two sites), so one site (or one caller under a given path) is never split
 * across branches, whatever addresses, lines, processes or runs its calls came from.
 *
 * The tree is never built whole: a profile of 10^6 distinct stacks 80 frames deep has tens
 * of millions of nodes. The stacks' frames are kept as references into the model (struct
 * mf_paths, 4 bytes a frame) and grouped in place: a node is a range of stacks that share
 * their first frames' names, its children the sub-ranges that share one more. The tree
 * report makes nodes only where it prints (and their children, which it sums or folds);
 * CSV walks every node without keeping one. */
#ifndef MF_CALL_TREE_H
#define MF_CALL_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct mf_loc {
    uint32_t file, line;
    uint64_t calls;
};

struct mf_node {
    uint32_t name;
    uint32_t via; /* a site: the wrapper folded into it (interned), 0 if none */
    uint32_t parent;
    uint32_t *children; /* sorted by calls, descending; only for nodes the report prints */
    uint32_t nchildren;
    uint64_t calls, bytes, samples;             /* every stack through this node */
    uint64_t var;                               /* the variance of calls, estimated */
    double bytes_var;                           /* the variance of bytes, estimated */
    uint64_t end_calls, end_bytes, end_samples; /* stacks with no frame further out */
    bool estimated;     /* some stack through it is an estimate */
    bool end_estimated; /* some stack ending at it is */
    bool has_loc;
    struct mf_loc loc; /* where this function made most of those calls */
};

struct mf_tree {
    struct mf_node *nodes; /* nodes[0] is the root; its children are the sites */
    uint32_t n, cap;
    uint32_t *child_ids; /* every node's children, one array */
    size_t nchild_ids, child_ids_cap;
    uint64_t raw_stacks; /* distinct stacks read, per process image (mf_profile_image_stacks) */
    uint32_t merged_stacks; /* distinct stacks after symbolizing, trimming and merging */
    bool estimated; /* some count in it is an estimate */
    struct mf_transform_counts transformed; /* the model's */
    /* The largest interval of the sampled processes (default mode: their largest weight),
     * 1 if none */
    uint64_t sample_interval;
};

/* The nodes the tree report prints: the root's children, and the children of every node
 * with at least threshold percent of total calls (all of them if total is 0). */
void mf_tree_build(struct mf_tree *t, const struct mf_model *m, double threshold,
                   uint64_t total);

void mf_tree_free(struct mf_tree *t);
/* The location with the most calls, or NULL if none is known. */
const struct mf_loc *mf_node_loc(const struct mf_node *n);

/* ---- the stacks as grouped paths (call_tree.c; CSV uses them directly) ---------------- */

struct mf_group {
    uint32_t name, lo, hi; /* order[lo, hi) share the name at the depth partitioned */
    uint32_t via;          /* at depth 0 (sites), the wrapper folded into them too */
};

struct mf_paths {
    const struct mf_model *m;
    struct mf_frame *ft; /* the model's frames, the pseudo-frames, the "[via W]" frames
                            (outer): refs index it */
    uint32_t *refs;      /* every stack's frames, innermost first */
    size_t nrefs, refs_cap;
    size_t *first;  /* per stack: its frames are refs[first, first + len) */
    uint32_t *len;
    uint32_t *order, *tmp; /* stack indices, grouped in place */
    /* Per stack, what depth 0 is grouped by: its site's name and via as one id (NULL when
     * no stack has a via: the name) */
    uint32_t *site_key;
    uint32_t *names;       /* per position of order: the name being grouped by */
    /* Per position of order: the frame (index into ft) at the depth last partitioned, moved
     * with its stack, so that a group's locations are read in a row (mf_paths_loc) */
    uint32_t *cur, *cur_tmp;
    uint64_t *calls; /* per stack: its calls (the model's, packed) */
    uint32_t n;
    uint32_t *stamp, *slot, nnames, gen; /* partition scratch, by name id */
    struct mf_group *groups;             /* a stack of groups, one run per partition */
    size_t ngroups, groups_cap;
    struct mf_loc_count {
        uint32_t ref;
        uint64_t calls;
    } *seen; /* mf_paths_loc's scratch */
    size_t seen_cap;
};

/* The caller tree's paths: each stack's frames innermost first, a site grouped with the
 * wrapper folded into it (site_key). outer: the flame graph's, outermost first, with a
 * frame "[via W]" after the site of a stack wrapper W was folded into. */
void mf_paths_build(struct mf_paths *ps, const struct mf_model *m, bool outer);
/* Distinct stacks by their names (the site's via too): the tree's nodes where some stack
 * ends, [not profiled] aside. */
uint32_t mf_paths_count_distinct(const struct mf_paths *ps);
void mf_paths_free(struct mf_paths *ps);
/* A second walker of ps's stacks, for another thread: it shares ps's arrays, and has scratch
 * of its own to partition and find locations with, so that two walkers may group disjoint
 * ranges of order at once (nothing else of ps may change meanwhile). */
void mf_paths_walker(struct mf_paths *w, const struct mf_paths *ps);
void mf_paths_walker_free(struct mf_paths *w);

static inline uint32_t mf_paths_name(const struct mf_paths *ps, uint32_t s, uint32_t d)
{
    return ps->ft[ps->refs[ps->first[s] + d]].name;
}

/* Groups order[lo, hi) (stacks sharing their names up to depth d - 1) by the name at
 * depth d (at depth 0 by the name and the via): the stacks that end before it first (*nends of them), then one group a name,
 * pushed on ps->groups from the index returned, in order of first appearance. Stable: each
 * group keeps its stacks in the order they had (the model's, from mf_paths_build). */
size_t mf_paths_partition(struct mf_paths *ps, uint32_t lo, uint32_t hi, uint32_t d,
                          uint32_t *nends);

/* The frame (an index into ps->ft) whose file:line, at depth d of the stacks of order[lo,
 * hi), has the most calls (the first seen on a tie), or UINT32_MAX if none has a file.
 * order[lo, hi) is a group the last mf_paths_partition (at depth d) made. */
uint32_t mf_paths_loc(struct mf_paths *ps, uint32_t lo, uint32_t hi, uint32_t d);

#endif
