/* The slow path's own stack. A sample needs kilobytes (libunwind's cursor and context alone
 * take ~2 KiB, its first use in a thread ~10 KiB); the program's stack may have a few hundred
 * bytes to spare (a 16 KiB thread, a signal handler on an 8 KiB alternate stack), so the
 * slow path switches to the stack below its thread's slot (mf_thread.c) and back.
 *
 * The switch is a frame-pointer frame with CFI: an unwinder running on the new stack (the
 * sample's) steps through it to the caller's frames on the program's stack, with
 * libunwind's fast trace too (CFA = rbp + 16 is a frame it caches). The frame-pointer
 * unwinder starts from the caller's frame instead (mf_unwind_fp). */
#include "mf_internal.h"

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* void mf_call_on_stack(void *top, void (*fn)(void *), void *arg): rdi, rsi, rdx. `top` is
 * 16-byte aligned, so fn is entered with the alignment the ABI asks for. */
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl mf_call_on_stack\n"
        ".hidden mf_call_on_stack\n"
        ".type mf_call_on_stack, @function\n"
        "mf_call_on_stack:\n"
        ".cfi_startproc\n"
        "    pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "    movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "    movq %rdi, %rsp\n"
        "    movq %rdx, %rdi\n"
        "    callq *%rsi\n"
        "    movq %rbp, %rsp\n"
        "    popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size mf_call_on_stack, .-mf_call_on_stack\n"
        ".popsection\n");

/* int mf_backtrace_on_stack(void *top, int (*bt)(void **, int), void **pcs, int max):
 * rdi, rsi, rdx, ecx; bt's result comes back in eax. The same frame. */
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl mf_backtrace_on_stack\n"
        ".hidden mf_backtrace_on_stack\n"
        ".type mf_backtrace_on_stack, @function\n"
        "mf_backtrace_on_stack:\n"
        ".cfi_startproc\n"
        "    pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "    movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "    movq %rdi, %rsp\n"
        "    movq %rsi, %rax\n"
        "    movq %rdx, %rdi\n"
        "    movl %ecx, %esi\n"
        "    callq *%rax\n"
        "    movq %rbp, %rsp\n"
        "    popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size mf_backtrace_on_stack, .-mf_backtrace_on_stack\n"
        ".popsection\n");
#else
/* Elsewhere, and under ASan and TSan (which track the stack they run on), on the caller's. */
void mf_call_on_stack(void *top, void (*fn)(void *), void *arg)
{
    (void)top;
    fn(arg);
}

int mf_backtrace_on_stack(void *top, int (*bt)(void **, int), void **pcs, int max)
{
    (void)top;
    return bt(pcs, max);
}
#endif
