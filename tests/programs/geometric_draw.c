/* The sampling draw without libm (c_core/mf_math.h): its logarithms against libm's, and the
 * mean interval of 4 million draws at several n against n (test_geometric_draw_unbiased).
 * Prints "log_err <worst relative error>" and, per n, "n <n> mean <mean> z <standard errors
 * away from n>". */
#include <math.h>
#include <stdio.h>

#include "mf_math.h"

static uint64_t rng = 0x9e3779b97f4a7c15u;

static double uniform(void) /* (0, 1], as mf_sample.c makes it */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((double)(rng >> 11) + 1.0) * 0x1.0p-53;
}

int main(void)
{
    double worst = 0;
    for (int i = 0; i < 2000000; i++) {
        double u = uniform(), x = 1.0 / (2.0 + (double)(rng % 4000000000u));
        double a = fabs(mf_log(u) - log(u)) / (u == 1.0 ? 1.0 : fabs(log(u)));
        double b = fabs(mf_log1p(-x) - log1p(-x)) / fabs(log1p(-x));
        worst = a > worst ? a : worst;
        worst = b > worst ? b : worst;
    }
    /* Where the logarithms change method or range: mf_log's halving at sqrt(2), mf_log1p's
     * switch at |x| = 0.25, the ends of the draw's domains, subnormal and tiny inputs. */
    static const double xs[] = {-0.5, -1.0 / 3, -0.2500000000000001, -0.25, -0.2499999999999999,
                                -1e-3, -1e-17, 1e-300, 0.2499999999999999, 0.25, 0.5};
    for (unsigned k = 0; k < sizeof xs / sizeof xs[0]; k++) {
        double b = fabs(mf_log1p(xs[k]) - log1p(xs[k])) / fabs(log1p(xs[k]));
        worst = b > worst ? b : worst;
    }
    static const double us[] = {0x1p-1074, 0x1p-1022, 0x1p-53, 0.5, 0.7071067811865475,
                                0.7071067811865476, 1.4142135623730951, 1.4142135623730954,
                                0.9999999999999999, 1.0000000000000002, 1e300};
    for (unsigned k = 0; k < sizeof us / sizeof us[0]; k++) {
        double a = fabs(mf_log(us[k]) - log(us[k])) / fabs(log(us[k]));
        worst = a > worst ? a : worst;
    }
    printf("log_err %.3g\n", worst);
    static const uint64_t ns[] = {2, 3, 10, 100, 4096, 1000000, 1000000000};
    const int draws = 4000000;
    for (unsigned k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        double sum = 0;
        for (int i = 0; i < draws; i++)
            sum += mf_geometric(uniform(), ns[k]);
        double n = (double)ns[k], mean = sum / draws;
        double se = sqrt(n * (n - 1.0) / draws); /* a geometric's variance is (1 - p) / p^2 */
        printf("n %llu mean %.6g z %.2f\n", (unsigned long long)ns[k], mean, (mean - n) / se);
    }
    return 0;
}
