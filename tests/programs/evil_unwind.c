/* An "unwinder" library planted by an attacker (test_setuid_program_is_not_profiled): if a
 * set-user-ID program loads it through MALLOC_FREQ_LIBUNWIND, its constructor leaves a file
 * at MF_EVIL_MARKER (a path compiled in). */
#include <fcntl.h>
#include <unistd.h>

__attribute__((constructor)) static void evil(void)
{
    int fd = open(MF_EVIL_MARKER, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0)
        close(fd);
}

int unw_backtrace(void **buf, int n)
{
    (void)buf, (void)n;
    return 0;
}
