/* Linked into exact_sites to give the executable thread-local storage of its own,
 * EXE_TLS_BYTES of it. The program's TLS comes first, right below the thread pointer, and
 * moves the preload library's block: small, it still fits in the page that the entry points
 * address directly; large, it pushes the block further down and the entry points load its
 * offset from the GOT instead (c_core/mf_core.h, MF_TLS_ALIGN). For
 * test_hot_path_with_the_programs_own_tls. */
__thread volatile char exe_tls[EXE_TLS_BYTES];

__attribute__((constructor)) static void touch_exe_tls(void)
{
    exe_tls[0] = 1;
}
