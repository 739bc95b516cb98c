/* The transform stage (model.h's pipeline): what every report sees of a stack.
 *
 *   trim   profiler and allocator plumbing at the innermost end, silently (--no-trim keeps)
 *   cut    start-up frames at the outermost end: stacks start at main or at the thread's
 *          start routine (--full-stacks keeps them)
 *   fold   allocation wrappers at the innermost end, after the plumbing: the site is the
 *          wrapper's caller and the stack remembers the wrapper (mf_stack.via) so that each
 *          report can say so (--no-fold keeps them; --fold REGEX adds the user's own)
 *   hide   frames matching --hide REGEX, anywhere (counted for the report's header)
 *
 * Trim, fold and cut take frames from an end of the stack, so the frames a report shows are
 * one stretch of the symbolized frames less the hidden ones. trim.c has the built-in tables. */
#ifndef MF_TRANSFORM_H
#define MF_TRANSFORM_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

struct mf_model;
struct mf_stack;

/* A model's transforms (struct mf_model_config; trim is the config's own). */
struct mf_transform {
    bool fold;           /* fold the built-in wrappers and fold_re (not --no-fold) */
    bool cut;            /* cut start-up frames (not --full-stacks) */
    const regex_t *fold_re; /* --fold REGEX, each */
    uint32_t nfold;
    const regex_t *hide_re; /* --hide REGEX, each */
    uint32_t nhide;
};

/* Sets trimmed, cut, via and hidden of each stack of m, and m's hidden totals. */
void mf_model_transform(struct mf_model *m);

/* Whether a frame of this name is hidden (--hide) in m. */
bool mf_name_hidden(const struct mf_model *m, uint32_t name);

#endif
