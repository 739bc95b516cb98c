/* Preloaded into mf_print by tests/viewer/test_hostile_names.py: the moment before mf_print's first
 * rename of a file it wrote (rename, renameat or renameat2), MF_RACE_PATH is replaced by
 * MF_RACE_KIND ("fifo" or "symlink", to MF_RACE_TARGET): the race of a file changed between
 * the check of what FILE is and the rename, made certain rather than waited for. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void race(void)
{
    static int done;
    const char *path = getenv("MF_RACE_PATH"), *kind = getenv("MF_RACE_KIND");
    if (done++ || !path || !kind)
        return;
    unlink(path);
    if (strcmp(kind, "fifo") == 0 && mkfifo(path, 0600) != 0)
        abort();
    if (strcmp(kind, "symlink") == 0 && symlink(getenv("MF_RACE_TARGET"), path) != 0)
        abort();
}

int rename(const char *a, const char *b)
{
    race();
    return ((int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename"))(a, b);
}

int renameat(int da, const char *a, int db, const char *b)
{
    race();
    return ((int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat"))(da, a, db, b);
}

int renameat2(int da, const char *a, int db, const char *b, unsigned flags)
{
    race();
    return ((int (*)(int, const char *, int, const char *, unsigned))dlsym(RTLD_NEXT, "renameat2"))(
        da, a, db, b, flags);
}
