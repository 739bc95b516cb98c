/* The caller tree: a prefix tree over the symbolized, trimmed stacks read innermost first.
 * Level 1 holds the allocation sites, each node's children its callers. Nodes are keyed by
 * function name, so one site (or one caller under a given path) is never split across
 * branches, whatever addresses, lines, processes or runs its calls came from. */
#ifndef MF_CALL_TREE_H
#define MF_CALL_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

struct mf_loc {
    uint32_t file, line;
    uint64_t calls;
};

struct mf_node {
    uint32_t name;
    uint32_t parent;
    uint32_t *children; /* sorted by calls, descending, once built */
    uint32_t nchildren, children_cap;
    uint64_t calls, bytes, samples;             /* every stack through this node */
    uint64_t var;                               /* the variance of calls, estimated */
    double bytes_var;                           /* the variance of bytes, estimated */
    uint64_t end_calls, end_bytes, end_samples; /* stacks with no frame further out */
    bool estimated;     /* some stack through it is an estimate */
    bool end_estimated; /* some stack ending at it is */
    struct mf_loc *locs; /* where this function was when it made those calls */
    uint32_t nlocs, locs_cap;
};

struct mf_tree {
    struct mf_node *nodes; /* nodes[0] is the root; its children are the sites */
    uint32_t n, cap;
    uint32_t raw_stacks; /* distinct stacks read (per process image) */
    uint32_t merged_stacks; /* distinct stacks after symbolizing, trimming and merging */
    bool estimated; /* some count in it is an estimate */
    /* The largest interval of the sampled processes (default mode: their largest weight),
     * 1 if none */
    uint64_t sample_interval;
};

void mf_tree_build(struct mf_tree *t, const struct mf_model *m);

/* The location with the most calls, or NULL if none is known. */
const struct mf_loc *mf_node_loc(const struct mf_node *n);

#endif
