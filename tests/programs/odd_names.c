/* Allocation sites whose names no compiler writes but a symbol table can hold: the test
 * (tests/viewer/test_mf_print_formats.py, ODD_NAMES) builds this without debug information, so
 * that mf_print takes function names from the symbol table, and renames odd_1 ... odd_8
 * with objcopy to names holding ';', a newline, a tab and an escape, '"' and ',', '%',
 * bytes that are not UTF-8, a trailing " 12", a backslash and a non-ASCII letter. Site
 * odd_K makes 11*K calls of 8*K bytes. Then 99 calls of 8 bytes inside malloc_freq_pause():
 * in the exact totals, on no stack ([not profiled]). No stdio. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#define SITE __attribute__((noinline, noclone))

/* Out of line and opaque, so the compiler cannot drop a malloc/free pair. */
__attribute__((noipa)) void release(void *p)
{
    free(p);
}

#define ODD(k)                                                                             \
    SITE void odd_##k(void)                                                                \
    {                                                                                      \
        for (int i = 0; i < 11 * (k); i++)                                                 \
            release(malloc(8 * (k)));                                                      \
    }
ODD(1)
ODD(2)
ODD(3)
ODD(4)
ODD(5)
ODD(6)
ODD(7)
ODD(8)

int main(void)
{
    odd_1();
    odd_2();
    odd_3();
    odd_4();
    odd_5();
    odd_6();
    odd_7();
    odd_8();
    void (*pause_stacks)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "malloc_freq_pause");
    void (*resume_stacks)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "malloc_freq_resume");
    if (!pause_stacks || !resume_stacks)
        return 3;
    pause_stacks();
    for (int i = 0; i < 99; i++)
        release(malloc(8));
    resume_stacks();
    return 0;
}
