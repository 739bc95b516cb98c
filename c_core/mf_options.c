/* Settings from the environment. A bad value gets one warning line and the default: the
 * program runs on either way. */
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "mf_internal.h"

/* Default mode: record every call for the first MF_EXACT_CALLS calls of the process, then
 * at the interval each thread's cost budget allows (mf_adapt): a run of up to 100,000 calls
 * is exact, one a little longer within a few per cent (README "Short runs"). */
#define MF_EXACT_CALLS 100000u
/* Above this a "sample interval" is a typo, not a setting: it would leave no samples. */
#define MF_SAMPLE_MAX 1000000000u
/* Calls of this many bytes and more are recorded every time, with weight 1 (README
 * "Sampling"). Chosen from `make bench`: see README. */
#define MF_LARGE_DEFAULT (64u << 10)

struct mf_options mf_opt = {
    .sample_interval = 0,
    .exact_calls = MF_EXACT_CALLS,
    .max_depth = MF_DEPTH_DEFAULT,
    .large = MF_LARGE_DEFAULT,
    .unwinder = MF_UNWIND_LIBUNWIND,
    .unwind_rules = true,
    .libunwind = "libunwind.so.8",
};

static bool mf_env_u64(const char *name, uint64_t lo, uint64_t hi, const char *dflt, uint64_t *out)
{
    const char *s = getenv(name);
    uint64_t v;
    if (!s || !*s) /* set but empty: as if unset */
        return false;
    if (mf_parse_u64(s, &v) && v >= lo && v <= hi) {
        *out = v;
        return true;
    }
    char tail[192], *end = tail + sizeof tail, *p = mf_append(tail, end, " is not a number in ");
    p = mf_append_u64(p, end, lo);
    p = mf_append(p, end, "..");
    p = mf_append_u64(p, end, hi);
    p = mf_append(p, end, "; using the default (");
    p = mf_append(p, end, dflt);
    mf_append(p, end, ")");
    mf_warn(name, "=", s, tail);
    return false;
}

void mf_options_read(void)
{
    uint64_t v;
    /* Secure execution (set-user-ID or set-group-ID, file capabilities): the environment
     * belongs to the user who started the program, not to the identity it runs as. Read
     * none of it (MALLOC_FREQ_LIBUNWIND would be loaded with the program's privileges,
     * MALLOC_FREQ_DIR written to), load nothing, print nothing: mf_files_start() then
     * fails silently and the program runs unprofiled, its output unchanged. */
    if (getauxval(AT_SECURE)) {
        mf_opt.secure = true;
        mf_opt.unwinder = MF_UNWIND_FP; /* no dlopen */
        return;
    }
    if (mf_env_u64("MALLOC_FREQ_SAMPLE", 1, MF_SAMPLE_MAX, "exact start, then adaptive", &v)) {
        mf_opt.sample_interval = v;
        mf_opt.exact_calls = 0;
    }
    if (!mf_opt.sample_interval && mf_env_u64("MALLOC_FREQ_EXACT", 0, MF_SAMPLE_MAX, "100000", &v))
        mf_opt.exact_calls = v;
    if (mf_env_u64("MALLOC_FREQ_SEED", 0, UINT64_MAX, "random", &v)) {
        mf_opt.seed = v;
        mf_opt.seed_set = true;
    }
    if (mf_env_u64("MALLOC_FREQ_LARGE", 0, UINT64_MAX, "65536", &v))
        mf_opt.large = v;
    if (mf_env_u64("MALLOC_FREQ_DEPTH", 1, MF_DEPTH_MAX, "64", &v))
        mf_opt.max_depth = (uint32_t)v;
    const char *u = getenv("MALLOC_FREQ_UNWIND");
    if (u) {
        if (strcmp(u, "fp") == 0)
            mf_opt.unwinder = MF_UNWIND_FP;
        else if (strcmp(u, "libunwind-only") == 0)
            mf_opt.unwind_rules = false;
        else if (strcmp(u, "libunwind") != 0)
            mf_warn("MALLOC_FREQ_UNWIND=", u, " is not libunwind, libunwind-only or fp; using the default (",
                    "libunwind)");
    }
    const char *l = getenv("MALLOC_FREQ_LIBUNWIND");
    if (l && *l)
        mf_opt.libunwind = l;
    const char *py = getenv("PYTHONMALLOC");
    mf_opt.pythonmalloc = py && (strcmp(py, "malloc") == 0 || strcmp(py, "malloc_debug") == 0);
    const char *live = getenv("MALLOC_FREQ_LIVE");
    if (live && *live) {
        if (strcmp(live, "sampled") == 0) {
            mf_opt.live = MF_LIVE_SAMPLED;
        } else if (strcmp(live, "all") == 0) { /* every call a sample of weight 1 */
            mf_opt.live = MF_LIVE_ALL;
            mf_opt.sample_interval = 1;
            mf_opt.exact_calls = 0;
        } else if (strcmp(live, "off") != 0) {
            mf_warn("MALLOC_FREQ_LIVE=", live, " is not off, sampled or all; using the default (",
                    "off)");
        }
    }
    const char *d = getenv("MALLOC_FREQ_DIR");
    mf_opt.base_dir = (d && *d) ? d : NULL;
}
