/* The sampling draw (c_core/mf_math.h): mf_geometric(u, n) = floor(log u / log(1 - 1/n)) + 1,
 * the calls up to and including the next sampled one, from u uniform in (0, 1]; and the
 * logarithms it is made of, without libm. Expected values from Python's math.log/log1p, none
 * within 0.003 of an integer where the draw rounds down. */
#include "mf_math.h"
#include "unit.h"

static int close_to(double got, double want)
{
    double err = got > want ? got - want : want - got;
    return err <= 1e-15 * (want < 0 ? -want : want);
}

int main(void)
{
    CHECK(mf_log(1.0) == 0.0);
    CHECK(mf_log(0.5) == -0.6931471805599453);
    CHECK(close_to(mf_log(2.0), 0.6931471805599453));
    CHECK(close_to(mf_log(10.0), 2.302585092994046));
    CHECK(close_to(mf_log(0x1p-1074), -744.4400719213812)); /* the smallest subnormal */
    CHECK(close_to(mf_log1p(1e-10), 9.999999999500001e-11)); /* 1 + x would lose it */
    CHECK(close_to(mf_log1p(-0.001), -0.0010005003335835335));

    CHECK_EQ(mf_geometric(1.0, 2), 1); /* u = 1: the next call is sampled */
    CHECK_EQ(mf_geometric(1.0, 1000000), 1);
    CHECK_EQ(mf_geometric(0.5, 2), 2); /* log 0.5 / log 0.5: exactly 1 */
    CHECK_EQ(mf_geometric(0.25, 2), 3);
    CHECK_EQ(mf_geometric(0.5, 4), 3);   /* 2.409 */
    CHECK_EQ(mf_geometric(0.1, 4), 9);   /* 8.0039 */
    CHECK_EQ(mf_geometric(0.3, 3), 3);   /* 2.969 */
    CHECK_EQ(mf_geometric(0.01, 100), 459);
    CHECK_EQ(mf_geometric(0.5, 4096), 2839);
    CHECK_EQ(mf_geometric(0.5, 1000000), 693147);
    CHECK_EQ(mf_geometric(0.999999, 100000), 1);
    /* The smallest u the core draws ((0 + 1) * 2^-53): the longest gaps. */
    CHECK_EQ(mf_geometric(0x1p-53, 100000), 3673662);
    CHECK_EQ(mf_geometric(0x1p-53, 1000000000), 36736800552ull);
    /* mf_geometric_by with the log_q the core keeps gives the same draw. */
    CHECK_EQ(mf_geometric_by(0.01, mf_log1p(-1.0 / 100)), 459);
    return mf_unit_done("unit_geometric_draw");
}
