/* libunwind's system calls, redirected (mf_unwind_imports.c). */
#ifndef MF_UNWIND_IMPORTS_H
#define MF_UNWIND_IMPORTS_H

#include <stdbool.h>

/* Points libunwind's own imports of pipe, pipe2, read, write, close, open, msync, syscall
 * (and their variants) at functions that keep no descriptor and are no cancellation point.
 * `lib` is libunwind's dlopen handle; call before libunwind's first function. Returns true
 * on error (a slot that could not be written may be left redirected or not: do not use the
 * library then). */
bool mf_unwind_redirect_imports(void *lib);

#endif
