/* malloc_freq: the public C API, exported by libmalloc_freq.so and linked into the Rust crate.
 * A program under LD_PRELOAD can find these with dlsym(RTLD_DEFAULT, "malloc_freq_dir"). */
#ifndef MALLOC_FREQ_H
#define MALLOC_FREQ_H

#ifdef __cplusplus
extern "C" {
#endif

/* The directory this process writes its profile into (malloc_freq.<pid>, absolute path),
 * or NULL if profiling is off in this process (the directory could not be created). */
const char *malloc_freq_dir(void);

/* Leave the calling thread's allocations out of the profile until the matching
 * malloc_freq_resume(). Calls nest. What is left out still counts in the exact totals,
 * as "not profiled". */
void malloc_freq_pause(void);
void malloc_freq_resume(void);

#ifdef __cplusplus
}
#endif
#endif
