/* Allocation calls made where a frame-pointer walk meets garbage, for
 * test_hostile_frame_pointers (x86-64): malloc called with %rbp holding values that are no
 * frame pointer (one that wraps the address space when a frame record is added to it, a
 * misaligned one, a low one, and an address in an unmapped gap), from a signal handler on an
 * alternate stack, and from a coroutine on a stack in the heap. The profiled program must
 * count each call exactly and never crash. Expected counts are in tests/lib/harness.py
 * (HOSTILE_SITES). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

/* malloc(size) with %rbp = fake for the duration of the call: the walk from malloc's frame
 * reads the saved %rbp, which is `fake`. CFI keeps libunwind's walk correct all the same. */
void *malloc_with_fp(size_t size, uintptr_t fake);
__asm__(".text\n"
        ".globl malloc_with_fp\n"
        ".type malloc_with_fp, @function\n"
        "malloc_with_fp:\n"
        ".cfi_startproc\n"
        "  push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "  mov %rsi, %rbp\n"
        "  call malloc@PLT\n"
        "  pop %rbp\n"
        ".cfi_def_cfa_offset 8\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size malloc_with_fp, .-malloc_with_fp\n");

/* Out of line and opaque, so the compiler cannot drop a malloc/free pair. */
__attribute__((noipa)) static void release(void *p)
{
    free(p);
}

static uintptr_t unmapped_gap; /* a page in the mmap area, unmapped again */

static void garbage_fps(int n)
{
    const uintptr_t fakes[] = {UINTPTR_MAX - 15, UINTPTR_MAX - 7, 8, 0x1001, unmapped_gap};
    for (size_t k = 0; k < sizeof fakes / sizeof *fakes; k++)
        for (int i = 0; i < n; i++)
            release(malloc_with_fp(40, fakes[k]));
}

__attribute__((noinline)) static void on_signal_stack(int sig)
{
    (void)sig;
    for (int i = 0; i < 50; i++) /* raise() is synchronous: malloc cannot be interrupted */
        release(malloc(24));
}

static ucontext_t main_ctx, co_ctx;

__attribute__((noinline)) static void on_coroutine(void)
{
    for (int i = 0; i < 70; i++)
        release(malloc(56));
    garbage_fps(10); /* the gap lies between this heap stack and the thread's own */
}

int main(void)
{
    void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED || munmap(page, 4096) != 0)
        return 1;
    unmapped_gap = (uintptr_t)page + 2048;
    garbage_fps(100);

    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
    struct sigaction sa = {.sa_handler = on_signal_stack, .sa_flags = SA_ONSTACK};
    if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0 ||
        raise(SIGUSR1) != 0)
        return 1;

    size_t co_size = 1 << 16;
    void *co_stack = malloc(co_size);
    if (!co_stack || getcontext(&co_ctx) != 0)
        return 1;
    co_ctx.uc_stack.ss_sp = co_stack;
    co_ctx.uc_stack.ss_size = co_size;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, on_coroutine, 0);
    if (swapcontext(&main_ctx, &co_ctx) != 0)
        return 1;
    puts("hostile_frames done");
    return 0;
}
