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

/* The nesting of inlined calls and blocks in one function the symbolizer descends: so also
 * the most frames one return address gives, which bounds a saved profile's location too. */
#define MF_MAX_SCOPES 256

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

/* The entry of the function that holds return address pc in module m, from the module
 * file's unwind table (stripped files keep it), and that file's id (mf_module_debug's):
 * which unnamed frames are one function's. False if the table is missing or has none. */
bool mf_function_entry(struct mf_module *m, uint64_t pc, uint32_t *modfile, uint64_t *entry);

/* Where separate debug files are looked for besides libdw's defaults (--debug-dir, each
 * searched for .build-id/xx/yyyy.debug and <dir>/<the file's directory>/<debuglink>), and
 * the directory that holds a copy of the profiled machine's files (--sysroot: a module
 * /usr/lib/x.so is read from SYSROOT/usr/lib/x.so when that exists, its build id checked
 * as always; SYSROOT/usr/lib/debug is searched for debug files). Call before symbolizing. */
void mf_symbolize_config(const char *const *debug_dirs, int ndebug_dirs, const char *sysroot);

/* What symbolization had to work with for a module file. */
enum mf_debug_state {
    MF_DEBUG_OK,         /* DWARF: functions, inlined calls, file:line */
    MF_DEBUG_NONE,       /* no DWARF: names from its symbol table, no file:line */
    MF_DEBUG_STRIPPED,   /* no DWARF, no .symtab: only exported functions have names */
    MF_DEBUG_UNREADABLE, /* the file could not be read (missing, not ELF) */
    MF_DEBUG_OTHER_FILE, /* the file there now is not the one that ran (build-id differs) */
    MF_DEBUG_NO_FILE,    /* no file to read (the vDSO) */
};

struct mf_module_debug {
    uint32_t id; /* the module file: the same for one library in several processes */
    enum mf_debug_state state;
    bool plumbing;      /* the profiler's own module, always trimmed */
    const char *path;   /* as the process recorded it */
    const char *opened; /* the file read: path, or its --sysroot copy */
};

/* What symbolizing module m found, once a frame of it was symbolized; false before. Valid
 * until mf_symbolize_end. */
bool mf_module_debug(const struct mf_module *m, struct mf_module_debug *out);

/* Releases libdw's state (for leak checkers). */
void mf_symbolize_end(void);

#endif
