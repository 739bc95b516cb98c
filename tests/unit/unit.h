/* The unit tests' checks: each failed one prints where and what, and the program exits 1. */
#ifndef MF_UNIT_H
#define MF_UNIT_H

#include <inttypes.h>
#include <stdio.h>

static int mf_unit_failed;

#define CHECK_EQ(got, want)                                                                  \
    do {                                                                                     \
        uint64_t g_ = (uint64_t)(got), w_ = (uint64_t)(want);                                \
        if (g_ != w_) {                                                                      \
            fprintf(stderr, "%s:%d: %s is %" PRIu64 ", expected %" PRIu64 "\n", __FILE__,    \
                    __LINE__, #got, g_, w_);                                                 \
            mf_unit_failed = 1;                                                              \
        }                                                                                    \
    } while (0)

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: not so: %s\n", __FILE__, __LINE__, #cond);              \
            mf_unit_failed = 1;                                                              \
        }                                                                                    \
    } while (0)

/* main's return: prints PASS or FAIL with the test's name, as tests/run_tests.py does. */
static inline int mf_unit_done(const char *name)
{
    printf("%s %s\n", mf_unit_failed ? "FAIL" : "PASS", name);
    return mf_unit_failed;
}

#endif
