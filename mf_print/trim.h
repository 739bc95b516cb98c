/* Which frames are profiler or allocator plumbing: trimmed from the innermost end of every
 * stack so that the first frame shown is the allocation site in the user's code. */
#ifndef MF_TRIM_H
#define MF_TRIM_H

#include <stdbool.h>

/* A demangled function name. */
bool mf_trim_function(const char *name);
/* A module's file name (basename). */
bool mf_trim_module(const char *basename);

#endif
