/* The geometric draw's logarithms without libm: linking libm cost every profiled process a
 * library load (~130 us of a /bin/true's ~900 us here). Exact to ~1e-15 relative, far below
 * what could bias the draw (tests/core/test_trust_core.py, test_geometric_draw_unbiased). */
#ifndef MF_MATH_H
#define MF_MATH_H

#include <stdint.h>
#include <string.h>

/* Newton's method: neither the library nor mf_print links libm. */
static inline double mf_sqrt(double x)
{
    double r = x > 1 ? x / 2 : 1;
    for (int i = 0; i < 64 && x > 0; i++)
        r = (r + x / r) / 2;
    return x > 0 ? r : 0;
}

/* 2 atanh(s) = log((1 + s) / (1 - s)) = 2 s (1 + s^2/3 + s^4/5 + ...), for |s| <= 0.1716:
 * the series' first 11 terms (the 12th is below 1e-17 of the sum), all positive, evaluated
 * by Estrin's scheme. A loop until the terms vanished, a division each, took a draw ~67 ns
 * of latency, and half the profiler's time at MALLOC_FREQ_SAMPLE=100 (docs/design.md). */
static inline double mf_2atanh(double s)
{
    double z = s * s, z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
    double a0 = 1.0 + z * (1.0 / 3), a1 = 1.0 / 5 + z * (1.0 / 7), a2 = 1.0 / 9 + z * (1.0 / 11);
    double a3 = 1.0 / 13 + z * (1.0 / 15), a4 = 1.0 / 17 + z * (1.0 / 19);
    double b0 = a0 + z2 * a1, b1 = a2 + z2 * a3, b2 = a4 + z2 * (1.0 / 21);
    return 2.0 * s * (b0 + z4 * b1 + z8 * b2);
}

/* log(x) for a finite x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
 * log(m) = 2 atanh((m - 1) / (m + 1)), |s| <= 0.1716. */
static inline double mf_log(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)((b >> 52) & 0x7ff);
    if (e == 0) { /* subnormal: scale into the normal range first */
        x *= 0x1p54;
        memcpy(&b, &x, sizeof b);
        e = (int)((b >> 52) & 0x7ff) - 54;
    }
    e -= 1023;
    b = (b & ~(0x7ffull << 52)) | (1023ull << 52); /* m in [1, 2) */
    double m;
    memcpy(&m, &b, sizeof m);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    return (double)e * 0.6931471805599453 + mf_2atanh((m - 1.0) / (m + 1.0));
}

/* log(1 + x) for -0.5 <= x <= 0.5, exact also for tiny x (log(1 + x) would lose it): for
 * |x| < 0.25, 2 atanh(x / (2 + x)), |s| < 0.143; beyond, log(1 + x), whose rounding of
 * 1 + x is then at most 5e-16 of the result. */
static inline double mf_log1p(double x)
{
    return x > -0.25 && x < 0.25 ? mf_2atanh(x / (2.0 + x)) : mf_log(1.0 + x);
}

/* floor(x) for 0 <= x < 2^62 (larger: x itself, which the caller caps). */
static inline double mf_floor_pos(double x)
{
    return x < 0x1p62 ? (double)(int64_t)x : x;
}

/* The calls up to and including the next sampled one, geometric with p = 1/n, from u
 * uniform in (0, 1] (inversion), given log_q = mf_log1p(-1.0 / n), which mf_sample.c keeps
 * while n stays the same. */
static inline double mf_geometric_by(double u, double log_q)
{
    return mf_floor_pos(mf_log(u) / log_q) + 1.0;
}

/* The same for p = 1/n, log_q made here (the test's draw; mf_sample.c keeps log_q). */
static inline double mf_geometric(double u, uint64_t n)
{
    return mf_geometric_by(u, mf_log1p(-1.0 / (double)n));
}

#endif
