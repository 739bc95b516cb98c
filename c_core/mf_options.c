/* Settings from the environment. A bad value gets one warning line and the default: the
 * program runs on either way. */
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "mf_internal.h"

extern char **environ;

/* Default mode: record every call for the first MF_EXACT_CALLS calls of the process, then
 * at the interval each thread's cost budget allows (mf_adapt): a run of up to 100,000 calls
 * is exact, one a little longer within a few per cent (docs/sampling.md). */
#define MF_EXACT_CALLS 100000u
/* Above this a "sample interval" is a typo, not a setting: it would leave no samples. */
#define MF_SAMPLE_MAX 1000000000u
/* Calls of this many bytes and more are recorded every time, with weight 1. Chosen from
 * `make bench`: see docs/sampling.md. */
#define MF_LARGE_DEFAULT (64u << 10)

struct mf_options mf_opt = {
    .sample_interval = 0,
    .exact_calls = MF_EXACT_CALLS,
    .max_depth = MF_DEPTH_DEFAULT,
    .large = MF_LARGE_DEFAULT,
    .unwinder = MF_UNWIND_LIBUNWIND,
    .unwind_rules = true,
    .rule_cache = true,
    .libunwind = "libunwind.so.8",
};

/* The variables read, found in one pass over the environment: every process pays for this,
 * also one that never allocates; ten getenv calls took 3,300 instructions. */
#define MF_ENV_PREFIX "MALLOC_FREQ_"
#define MF_ENV_VARS(X)                                                                      \
    X(SAMPLE) X(EXACT) X(SEED) X(LARGE) X(DEPTH) X(UNWIND) X(LIBUNWIND) X(LIVE) X(DIR)     \
    X(RULE_CACHE)
#define MF_ENV_ID(id) MF_ENV_##id,
enum { MF_ENV_VARS(MF_ENV_ID) MF_ENV_PYTHONMALLOC, MF_ENV_COUNT };
#undef MF_ENV_ID
#define MF_ENV_NAME(id) MF_ENV_PREFIX #id,
static const char *const mf_env_names[MF_ENV_COUNT] = {MF_ENV_VARS(MF_ENV_NAME) "PYTHONMALLOC"};
#undef MF_ENV_NAME

/* `s` is NAME=value for this name: its value, or NULL. */
static const char *mf_env_match(const char *s, const char *name)
{
    size_t n = strlen(name);
    return strncmp(s, name, n) == 0 && s[n] == '=' ? s + n + 1 : NULL;
}

/* Each variable's value, or NULL; the first definition wins, as with getenv. */
static void mf_env_collect(const char *value[MF_ENV_COUNT])
{
    const size_t prefix = sizeof MF_ENV_PREFIX - 1;
    for (int i = 0; i < MF_ENV_COUNT; i++)
        value[i] = NULL;
    for (char **e = environ; e && *e; e++) {
        const char *s = *e, *v = NULL;
        int i = MF_ENV_PYTHONMALLOC;
        if (s[0] == 'M' && strncmp(s, MF_ENV_PREFIX, prefix) == 0) {
            for (i = 0; i < MF_ENV_PYTHONMALLOC; i++)
                if ((v = mf_env_match(s + prefix, mf_env_names[i] + prefix)))
                    break;
        } else if (s[0] == 'P') {
            v = mf_env_match(s, mf_env_names[i]);
        }
        if (v && !value[i])
            value[i] = v;
    }
}

static bool mf_env_u64(const char *const env[MF_ENV_COUNT], int id, uint64_t lo, uint64_t hi,
                       const char *dflt, uint64_t *out)
{
    const char *name = mf_env_names[id], *s = env[id];
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
    const char *env[MF_ENV_COUNT];
    mf_env_collect(env);
    if (mf_env_u64(env, MF_ENV_SAMPLE, 1, MF_SAMPLE_MAX, "exact start, then adaptive", &v)) {
        mf_opt.sample_interval = v;
        mf_opt.exact_calls = 0;
    }
    if (!mf_opt.sample_interval && mf_env_u64(env, MF_ENV_EXACT, 0, MF_SAMPLE_MAX, "100000", &v))
        mf_opt.exact_calls = v;
    if (mf_env_u64(env, MF_ENV_SEED, 0, UINT64_MAX, "random", &v)) {
        mf_opt.seed = v;
        mf_opt.seed_set = true;
    }
    if (mf_env_u64(env, MF_ENV_LARGE, 0, UINT64_MAX, "65536", &v))
        mf_opt.large = v;
    if (mf_env_u64(env, MF_ENV_DEPTH, 1, MF_DEPTH_MAX, "64", &v))
        mf_opt.max_depth = (uint32_t)v;
    const char *u = env[MF_ENV_UNWIND];
    if (u) {
        if (strcmp(u, "fp") == 0)
            mf_opt.unwinder = MF_UNWIND_FP;
        else if (strcmp(u, "libunwind-only") == 0)
            mf_opt.unwind_rules = false;
        else if (strcmp(u, "libunwind") != 0)
            mf_warn("MALLOC_FREQ_UNWIND=", u, " is not libunwind, libunwind-only or fp; using the default (",
                    "libunwind)");
    }
    const char *l = env[MF_ENV_LIBUNWIND];
    if (l && *l)
        mf_opt.libunwind = l;
    const char *py = env[MF_ENV_PYTHONMALLOC];
    mf_opt.pythonmalloc = py && (strcmp(py, "malloc") == 0 || strcmp(py, "malloc_debug") == 0);
    const char *live = env[MF_ENV_LIVE];
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
    if (mf_env_u64(env, MF_ENV_RULE_CACHE, 0, 1, "1", &v))
        mf_opt.rule_cache = v == 1;
    const char *d = env[MF_ENV_DIR];
    mf_opt.base_dir = (d && *d) ? d : NULL;
}
