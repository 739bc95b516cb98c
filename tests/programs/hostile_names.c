/* Allocation sites whose names a person may share in a profile: the test
 * (tests/viewer/test_hostile_names.py, HOSTILE_NAMES) builds this without debug information, so
 * that mf_print takes function names from the symbol table, and renames hostile_1 ...
 * hostile_16 with objcopy to names holding terminal escapes (ESC[2J, OSC 52, OSC 8), BEL,
 * CR, LF, U+2028/9, bytes that are not UTF-8, a leading = + - @ TAB or CR, quotes, commas
 * and semicolons, </script>, and one of 5,000 bytes; and wrap to a hostile wrapper (folded
 * with --fold). Site hostile_K makes 2*K calls of 8*K bytes and frees K of them: K are
 * alive at exit. The wrapped site makes 30 calls of 40 bytes through wrap, all freed. No
 * stdio. */
#include <stdlib.h>

#define SITE __attribute__((noinline, noclone))

/* Out of line and opaque, so the compiler cannot drop a malloc/free pair. */
__attribute__((noipa)) void release(void *p)
{
    free(p);
}

/* Not static: stores the compiler could see unread would let it drop their malloc. */
void *kept[512];
int nkept;

#define HOSTILE(k)                                                                         \
    SITE void hostile_##k(void)                                                            \
    {                                                                                      \
        for (int i = 0; i < 2 * (k); i++) {                                                \
            void *p = malloc(8 * (k));                                                     \
            if (i % 2)                                                                     \
                release(p);                                                                \
            else                                                                           \
                kept[nkept++] = p;                                                         \
        }                                                                                  \
    }
HOSTILE(1)
HOSTILE(2)
HOSTILE(3)
HOSTILE(4)
HOSTILE(5)
HOSTILE(6)
HOSTILE(7)
HOSTILE(8)
HOSTILE(9)
HOSTILE(10)
HOSTILE(11)
HOSTILE(12)
HOSTILE(13)
HOSTILE(14)
HOSTILE(15)
HOSTILE(16)

__attribute__((noipa)) void *wrap(size_t n)
{
    return malloc(n);
}

SITE void wrapped(void)
{
    for (int i = 0; i < 30; i++)
        release(wrap(40));
}

int main(void)
{
    hostile_1();
    hostile_2();
    hostile_3();
    hostile_4();
    hostile_5();
    hostile_6();
    hostile_7();
    hostile_8();
    hostile_9();
    hostile_10();
    hostile_11();
    hostile_12();
    hostile_13();
    hostile_14();
    hostile_15();
    hostile_16();
    wrapped();
    return nkept == 136 ? 0 : 1;
}
