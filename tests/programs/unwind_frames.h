/* Allocation calls that make libunwind check memory before it reads it (its `validate`
 * path), for tests/core/test_trust_unwind.py (x86-64). libunwind checks an address when it
 * unwinds through a frame it has no CFI for: it guesses a frame-pointer frame and reads
 * the frame record at %rbp, asking first whether each page is readable. nocfi_malloc has
 * no CFI and calls malloc with %rbp = `fake`; unwind_frames_churn passes frame records on
 * many different pages (libunwind remembers the last four it found readable), on a
 * PROT_NONE page (mapped, unreadable: a wrong answer crashes the program) and in an
 * unmapped gap. */
#ifndef UNWIND_FRAMES_H
#define UNWIND_FRAMES_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

void *nocfi_malloc(size_t size, uintptr_t fake);
__asm__(".text\n"
        ".globl nocfi_malloc\n"
        ".type nocfi_malloc, @function\n"
        "nocfi_malloc:\n" /* no .cfi_startproc: no unwind information at all */
        "  push %rbp\n"
        "  mov %rsi, %rbp\n"
        "  call malloc@PLT\n"
        "  pop %rbp\n"
        "  ret\n"
        ".size nocfi_malloc, .-nocfi_malloc\n");

#define UNWIND_PAGES 16
static char *unwind_pages;       /* UNWIND_PAGES readable pages */
static char *unwind_unreadable;  /* a PROT_NONE page */
static uintptr_t unwind_gap;     /* an unmapped page */

/* Out of line and opaque, so the compiler cannot drop a malloc/free pair. */
__attribute__((noipa)) static void unwind_release(void *p)
{
    free(p);
}

static int unwind_frames_setup(void)
{
    unwind_pages = mmap(NULL, UNWIND_PAGES * 4096, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unwind_unreadable = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *gap = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (unwind_pages == MAP_FAILED || unwind_unreadable == MAP_FAILED || gap == MAP_FAILED ||
        munmap(gap, 4096) != 0)
        return -1;
    unwind_gap = (uintptr_t)gap + 512;
    return 0;
}

/* The first unwind through nocfi_malloc in a thread, with a plausible frame record just
 * above (a record of zeros: the walk ends there): libunwind's per-thread trace cache then
 * keeps the frame as a guessed frame-pointer frame, whose record it checks on every walk. */
__attribute__((noinline)) static void unwind_frames_prime(void)
{
    volatile uintptr_t record[2] = {0, 0};
    unwind_release(nocfi_malloc(24, (uintptr_t)record));
}

/* n allocation calls through nocfi_malloc with frame records on pages libunwind has to
 * check. A record on a readable page leads back into this function's own frame, so the
 * walk goes on to the callers when the check says "readable", and stops at nocfi_malloc
 * when it says "unreadable" (every 20 calls: once on the PROT_NONE page, once in the gap).
 * Returns the number of calls made. */
__attribute__((noinline)) static int unwind_frames_churn(int n)
{
    static unsigned next;
    for (int i = 0; i < n; i++, next++) {
        uintptr_t fake;
        switch (next % 20) {
        case 18: fake = (uintptr_t)unwind_unreadable + 64; break;
        case 19: fake = unwind_gap; break;
        default: {
            uintptr_t *record = (uintptr_t *)(unwind_pages + (next % UNWIND_PAGES) * 4096 + 64);
            record[0] = (uintptr_t)__builtin_frame_address(0);
            record[1] = (uintptr_t)&&back_here; /* a return address in this function's body */
            fake = (uintptr_t)record;
            break;
        }
        }
        unwind_release(nocfi_malloc(40, fake));
    back_here:
        __asm__ volatile("" ::: "memory");
    }
    return n;
}

#endif
