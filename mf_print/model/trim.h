/* Which frames the transform stage takes out of a stack (trim.c has the tables and what
 * each is for): plumbing trimmed from the innermost end, wrappers folded into their caller,
 * start-up frames cut from the outermost end. */
#ifndef MF_TRIM_H
#define MF_TRIM_H

#include <stdbool.h>

/* A demangled function name: profiler or allocator plumbing. */
bool mf_trim_function(const char *name);
/* An allocation wrapper, or library code that allocates for its caller. */
bool mf_wrapper_function(const char *name);
/* Start-up code outside main or a thread's start routine. */
bool mf_startup_function(const char *name);
/* A module's file name (basename) whose frames are all plumbing. */
bool mf_trim_module(const char *basename);
/* name past a C++ template function's return type ("void std::f<int>()" -> "std::f<int>()"). */
const char *mf_without_return_type(const char *name);

#endif
