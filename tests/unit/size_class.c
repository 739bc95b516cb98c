/* The size histogram's classes (c_core/mf_format.h: mf_size_class, mf_size_class_lo;
 * mf_print's mf_size_class_hi): four classes per doubling, sizes 1, 2 and 3 a class each,
 * every size from 2^48 in the last class. */
#include "mf_format.h"
#include "report.h"
#include "unit.h"

int main(void)
{
    /* Exact classes of sizes the comment in mf_format.h spells out. */
    CHECK_EQ(mf_size_class(0), 0);
    CHECK_EQ(mf_size_class(1), 1);
    CHECK_EQ(mf_size_class(2), 5);
    CHECK_EQ(mf_size_class(3), 7);
    CHECK_EQ(mf_size_class(4), 9);
    CHECK_EQ(mf_size_class(5), 10);
    CHECK_EQ(mf_size_class(7), 12);
    CHECK_EQ(mf_size_class(8), 13);
    CHECK_EQ(mf_size_class(24), 19);
    CHECK_EQ(mf_size_class(32), 21);
    CHECK_EQ(mf_size_class(4096), 49);
    CHECK_EQ(mf_size_class(65535), 64);
    CHECK_EQ(mf_size_class(65536), 65);
    CHECK_EQ(mf_size_class((1ull << 48) - 1), 192);
    CHECK_EQ(mf_size_class(1ull << 48), 193);
    CHECK_EQ(mf_size_class(UINT64_MAX), 193);
    CHECK_EQ(MF_SIZE_CLASSES, 194);

    /* lo and hi: the first and last size of a class. */
    CHECK_EQ(mf_size_class_lo(0), 0);
    CHECK_EQ(mf_size_class_hi(0), 0);
    CHECK_EQ(mf_size_class_lo(1), 1);
    CHECK_EQ(mf_size_class_hi(1), 1);
    CHECK_EQ(mf_size_class_lo(21), 32);
    CHECK_EQ(mf_size_class_hi(21), 39);
    CHECK_EQ(mf_size_class_lo(49), 4096);
    CHECK_EQ(mf_size_class_hi(49), 5119);
    CHECK_EQ(mf_size_class_lo(192), (1ull << 47) + 3 * (1ull << 45));
    CHECK_EQ(mf_size_class_hi(192), (1ull << 48) - 1);
    CHECK_EQ(mf_size_class_lo(193), 1ull << 48);
    CHECK_EQ(mf_size_class_hi(193), UINT64_MAX);

    /* Every class that holds sizes: its lo and hi are in it, the sizes next to them are not,
     * and the classes tile the sizes with no gap. The empty ones are 2, 3, 4, 6 and 8. */
    uint64_t next = 0;
    unsigned empty = 0;
    for (uint32_t c = 0; c < MF_SIZE_CLASSES; c++) {
        uint64_t lo = mf_size_class_lo(c), hi = mf_size_class_hi(c);
        if (mf_size_class(lo) != c) {
            CHECK(c == 2 || c == 3 || c == 4 || c == 6 || c == 8);
            empty++;
            continue;
        }
        CHECK_EQ(lo, next);
        CHECK_EQ(mf_size_class(hi), c);
        if (hi != UINT64_MAX)
            CHECK(mf_size_class(hi + 1) > c);
        next = hi + 1;
    }
    CHECK_EQ(empty, 5);
    CHECK_EQ(next, 0); /* the last class ends at UINT64_MAX */
    return mf_unit_done("unit_size_classes");
}
