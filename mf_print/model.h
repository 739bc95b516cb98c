/* The profile model: what every report is a function of, so that no two formats can
 * disagree on a number.
 *
 *   read+validate, merge  (profile_read.c: every file bounded by its size; identical stacks
 *                          of a process image's threads merged)
 *   -> symbolize          (model.c over symbolize.c: each distinct return address once)
 *   -> transform          (model.c: trim allocator and profiler plumbing)
 *   -> report             (report_*.c: tree, CSV, ... each a function of the model)
 *
 * A stack is a list of locations, innermost first; a location is one return address of one
 * process image, symbolized into one or more frames (an address inside inlined code gives
 * the inlined functions first, then the function they were inlined into). */
#ifndef MF_MODEL_H
#define MF_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "profile_read.h"
#include "symbolize.h"

/* Pseudo-frames. */
#define MF_NAME_NOT_PROFILED "[not profiled]"  /* samples no stack could be recorded for */
#define MF_NAME_TRUNCATED "[deeper frames not recorded]" /* stack deeper than max_depth */
#define MF_NAME_NO_STACK "[no stack]"         /* the unwinder returned no frame */

#define MF_NO_MODULE UINT32_MAX

struct mf_location {
    uint32_t process; /* index into profile->procs */
    uint32_t module;  /* index into that process's modules, or MF_NO_MODULE */
    uint64_t pc;      /* the return address as recorded (the leaf's: the call's return) */
    uint32_t first, n; /* its frames: model->frames[first .. first + n), innermost first */
};

#define MF_STACK_NOT_PROFILED 0x10000u /* the [not profiled] pseudo-stack: no locations */

struct mf_stack {
    uint32_t process;
    uint32_t flags;       /* MF_ENTRY_TRUNCATED, MF_STACK_NOT_PROFILED */
    uint32_t first, depth; /* locations: model->stack_locs[first .. first + depth), innermost first */
    uint32_t trimmed;     /* plumbing frames at the innermost end, left out of reports */
    uint64_t samples, calls, bytes;
    uint64_t var;   /* the estimated variance of calls (0 when exact) */
    double bytes_var; /* the estimated variance of bytes (0 when exact) */
    /* calls and bytes are estimates (a weight > 1, or a sampled process), unless every
     * sample of it was recorded for its size (MALLOC_FREQ_LARGE) */
    bool estimated;
    uint32_t raw; /* its profile->stacks index; UINT32_MAX for [not profiled] */
};

struct mf_model {
    const struct mf_profile *p; /* processes, modules, exact totals */
    struct mf_location *locs;
    uint32_t nlocs, locs_cap;
    struct mf_frame *frames;
    uint32_t nframes, frames_cap;
    uint32_t *stack_locs;
    uint32_t nstack_locs, stack_locs_cap;
    struct mf_stack *stacks;
    uint32_t nstacks, stacks_cap;
    bool trim;      /* plumbing frames are left out of the frames reports see */
    bool estimated; /* some count in it is an estimate */
    /* The largest interval of the sampled processes (default mode: their largest weight),
     * 1 if none. */
    uint64_t sample_interval;
};

/* Symbolizes and transforms a read profile. */
void mf_model_build(struct mf_model *m, const struct mf_profile *p, bool trim);

/* The frames a report shows for stack s, innermost first: its locations' frames less the
 * trimmed plumbing (never all of them), then [deeper frames not recorded] if the stack was
 * cut, [no stack] if it had none; [not profiled] for that pseudo-stack. out is cleared. */
void mf_model_frames(const struct mf_model *m, const struct mf_stack *s, struct mf_frames *out);

#endif
