/* The geometric draw's logarithms without libm: linking libm cost every profiled process a
 * library load (~130 us of a /bin/true's ~900 us here). Exact to ~1e-15 relative, far below
 * what could bias the draw (tests/test_trust_core.py, test_geometric_draw_unbiased). */
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

/* 2 atanh(s) = log((1 + s) / (1 - s)), for |s| <= 1/3: the series until its terms vanish. */
static inline double mf_2atanh(double s)
{
    double s2 = s * s, term = s, sum = 0.0;
    for (int k = 1; k < 80; k += 2) {
        double add = term / k;
        sum += add;
        if (add == 0.0 || (add < 0 ? -add : add) < 1e-18 * (sum < 0 ? -sum : sum))
            break;
        term *= s2;
    }
    return 2.0 * sum;
}

/* log(x) for a finite x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), then
 * log(m) = 2 atanh((m - 1) / (m + 1)), |s| <= 0.172. */
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

/* log(1 + x) for -0.5 <= x <= 0.5, exact also for tiny x (log(1 + x) would lose it). */
static inline double mf_log1p(double x)
{
    return mf_2atanh(x / (2.0 + x));
}

/* floor(x) for 0 <= x < 2^62 (larger: x itself, which the caller caps). */
static inline double mf_floor_pos(double x)
{
    return x < 0x1p62 ? (double)(int64_t)x : x;
}

/* The calls up to and including the next sampled one, geometric with p = 1/n, from u
 * uniform in (0, 1] (inversion). mf_core.c's draw; the test's too. */
static inline double mf_geometric(double u, uint64_t n)
{
    return mf_floor_pos(mf_log(u) / mf_log1p(-1.0 / (double)n)) + 1.0;
}

#endif
