/* Offline symbolization with libdw: return address -> function, file:line, with inlined
 * calls expanded into frames of their own. */
#ifndef MF_SYMBOLIZE_H
#define MF_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "profile_read.h"

struct mf_frame {
    uint32_t name; /* interned: demangled function, or "[module+0xOFF]", "[0xADDR]" */
    uint32_t file; /* interned source path, 0 if unknown */
    uint32_t line; /* 0 if unknown */
    bool plumbing_module; /* lies in a module whose frames are always trimmed */
};

struct mf_frames {
    struct mf_frame *v;
    uint32_t n, cap;
};

/* Appends the frames for return address pc of process pr to out, innermost first (an
 * address inside inlined code gives several). Results are cached per module file and
 * address, so the same library in many processes is symbolized once. */
void mf_symbolize(struct mf_process *pr, uint64_t pc, uint32_t epoch, struct mf_frames *out);

/* The index in pr->modules of the module that holds pc for a stack of the given module
 * epoch, or UINT32_MAX. */
uint32_t mf_module_index(const struct mf_process *pr, uint64_t pc, uint32_t epoch);

/* Releases libdw's state (for leak checkers). */
void mf_symbolize_end(void);

#endif
