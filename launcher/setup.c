/* What the program is given: the preload library (found beside the launcher's own
 * executable: build/ or $(PREFIX)/lib), its environment, and for Python PYTHONMALLOC=malloc. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher.h"

extern char **environ;

/* ---- the library --------------------------------------------------------------------- */

/* build/malloc_freq finds build/libmalloc_freq.so; $(PREFIX)/bin/malloc_freq finds
 * $(PREFIX)/lib/libmalloc_freq.so, or the multiarch $(PREFIX)/lib/<triplet>/ where Debian's
 * package puts it (so that the loader finds it by its bare name). All by the launcher's own
 * path (/proc/self/exe), so a copy in a DESTDIR or a moved tree finds its own library, never
 * another one. */
void mf_find_library(struct mf_launch *l)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        mf_die("cannot read /proc/self/exe to find %s: %s", MF_LIB_NAME,
               n < 0 ? strerror(errno) : "empty");
    self[n] = '\0';
    l->self_dir = mf_xstrdup(dirname(self));
    const char *candidates[] = {
        "%s/" MF_LIB_NAME,
        "%s/../lib/" MF_LIB_NAME,
#ifdef MF_MULTIARCH
        "%s/../lib/" MF_MULTIARCH "/" MF_LIB_NAME,
#endif
    };
    enum { NCAND = sizeof candidates / sizeof *candidates };
    char *tried[NCAND];
    for (size_t i = 0; i < NCAND; i++) {
        tried[i] = mf_xasprintf(candidates[i], l->self_dir);
        char *abs = realpath(tried[i], NULL);
        if (abs && access(abs, R_OK) == 0) {
            /* LD_PRELOAD separates its entries with spaces and colons. */
            if (strpbrk(abs, " :\t\n"))
                mf_die("%s: LD_PRELOAD cannot name a path with a space or colon", abs);
            l->library = abs;
            return;
        }
        free(abs);
    }
    mf_die("cannot find %s beside the launcher: not at %s nor at %s%s%s", MF_LIB_NAME, tried[0],
           tried[1], NCAND > 2 ? " nor at " : "", NCAND > 2 ? tried[NCAND - 1] : "");
}

/* ---- the program --------------------------------------------------------------------- */

static bool mf_is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* PROGRAM as execvp will find it: a name with a slash as it is, otherwise the first
 * executable file of that name in $PATH. NULL when there is none (exec will say so). */
void mf_find_program(struct mf_launch *l)
{
    const char *name = l->argv[0];
    if (strchr(name, '/')) {
        l->program = mf_xstrdup(name);
        return;
    }
    const char *path = getenv("PATH");
    char defpath[256];
    if (!path) {
        size_t n = confstr(_CS_PATH, defpath, sizeof defpath);
        path = n > 0 && n <= sizeof defpath ? defpath : "/bin:/usr/bin";
    }
    for (const char *p = path;; p++) {
        const char *colon = strchrnul(p, ':');
        int len = (int)(colon - p);
        char *cand = len ? mf_xasprintf("%.*s/%s", len, p, name) : mf_xasprintf("%s", name);
        if (mf_is_executable_file(cand)) {
            l->program = cand;
            return;
        }
        free(cand);
        if (!*colon)
            return;
        p = colon;
    }
}

/* ---- Python -------------------------------------------------------------------------- */

static bool mf_is_python(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "python", 6) == 0;
}

static bool mf_is_named(const char *path, const char *name)
{
    const char *base = strrchr(path, '/');
    return strcmp(base ? base + 1 : path, name) == 0;
}

/* A path is Python if its name is python*, or the file it links to is. */
static bool mf_path_is_python(const char *path)
{
    if (mf_is_python(path))
        return true;
    char *real = realpath(path, NULL);
    bool py = real && mf_is_python(real);
    free(real);
    return py;
}

/* The program `env` runs: its first word that is not an option or NAME=VALUE (-u NAME and
 * -C DIR take one more word; -S's string is split into the words that follow). */
static const char *mf_env_target(char *const *words)
{
    for (; *words; words++) {
        const char *w = *words;
        if (!strcmp(w, "-u") || !strcmp(w, "-C") || !strcmp(w, "--unset") ||
            !strcmp(w, "--chdir")) {
            if (!*++words)
                return NULL;
            continue;
        }
        if (w[0] == '-' || strchr(w, '='))
            continue;
        return w;
    }
    return NULL;
}

/* The interpreter a #! line names, and what env would run from it; NULL if not Python. */
static char *mf_shebang_python(const char *program)
{
    FILE *f = fopen(program, "re");
    if (!f)
        return NULL;
    char line[512];
    bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got || strncmp(line, "#!", 2) != 0)
        return NULL;
    line[strcspn(line, "\n")] = '\0';
    /* The interpreter, then its words (the kernel passes them as one argument; env -S
     * splits them, and a plain `env python3` has one). */
    char *words[64];
    size_t n = 0;
    char *save;
    for (char *w = strtok_r(line + 2, " \t", &save); w && n < 63;
         w = strtok_r(NULL, " \t", &save))
        words[n++] = w;
    words[n] = NULL;
    if (n == 0)
        return NULL;
    if (mf_path_is_python(words[0]))
        return mf_xasprintf("%s (its #! line runs %s)", program, words[0]);
    if (mf_is_named(words[0], "env")) {
        const char *t = mf_env_target(words + 1);
        if (t && mf_is_python(t))
            return mf_xasprintf("%s (its #! line runs %s)", program, t);
    }
    return NULL;
}

/* Python (the program or the interpreter it is exec'd by) keeps small objects in its own
 * pools, which take memory from mmap and never call malloc: PYTHONMALLOC=malloc makes each
 * allocation a malloc call. The user's PYTHONMALLOC wins (an empty one is unset for
 * Python, and for us). */
void mf_detect_python(struct mf_launch *l)
{
    const char *name = l->argv[0];
    if (mf_is_python(name) || (l->program && mf_path_is_python(l->program)))
        l->python = mf_xstrdup(name);
    else if (l->program && (l->python = mf_shebang_python(l->program)))
        ;
    else if (mf_is_named(name, "env") || (l->program && mf_is_named(l->program, "env"))) {
        const char *t = mf_env_target(l->argv + 1);
        if (t && mf_is_python(t))
            l->python = mf_xstrdup(t);
    }
    const char *pm = getenv("PYTHONMALLOC");
    l->set_pythonmalloc = l->python && !(pm && *pm);
}

/* ---- the environment ----------------------------------------------------------------- */

static bool mf_has_key(const char *entry, const char *key)
{
    size_t n = strlen(key);
    return strncmp(entry, key, n) == 0 && entry[n] == '=';
}

/* The user's LD_PRELOAD without any libmalloc_freq.so (two copies would count every call
 * twice), words joined by spaces; "" if nothing is left. */
char *mf_other_preloads(const char *preload)
{
    char *copy = mf_xstrdup(preload ? preload : "");
    char *out = mf_xmalloc(strlen(copy) + 1), *p = out;
    char *save;
    for (char *w = strtok_r(copy, " :\t\n", &save); w; w = strtok_r(NULL, " :\t\n", &save)) {
        if (mf_is_named(w, MF_LIB_NAME))
            continue;
        if (p != out)
            *p++ = ' ';
        p = stpcpy(p, w);
    }
    *p = '\0';
    free(copy);
    return out;
}

/* The user's environment with ours: LD_PRELOAD (the library first, the user's after it),
 * MALLOC_FREQ_DIR (filled in when the run directory exists), the sampling options given,
 * PYTHONMALLOC=malloc for Python. Entries of those names are replaced, all others kept in
 * their order. */
void mf_build_env(struct mf_launch *l)
{
    size_t n = 0;
    while (environ[n])
        n++;
    l->envp = mf_xmalloc((n + 8) * sizeof *l->envp);
    const char *replaced[] = {
        "LD_PRELOAD", "MALLOC_FREQ_DIR",
        l->sample ? "MALLOC_FREQ_SAMPLE" : NULL,
        l->depth ? "MALLOC_FREQ_DEPTH" : NULL,
        l->unwind ? "MALLOC_FREQ_UNWIND" : NULL,
        l->set_pythonmalloc ? "PYTHONMALLOC" : NULL,
    };
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool drop = false;
        for (size_t j = 0; j < sizeof replaced / sizeof *replaced; j++)
            if (replaced[j] && mf_has_key(environ[i], replaced[j]))
                drop = true;
        if (!drop)
            l->envp[k++] = environ[i];
    }
    l->first_set = k;
    char *others = mf_other_preloads(getenv("LD_PRELOAD"));
    l->envp[k++] = *others ? mf_xasprintf("LD_PRELOAD=%s %s", l->library, others)
                           : mf_xasprintf("LD_PRELOAD=%s", l->library);
    free(others);
    l->dir_slot = k;
    l->envp[k++] = mf_xstrdup("MALLOC_FREQ_DIR=");
    if (l->sample)
        l->envp[k++] = mf_xasprintf("MALLOC_FREQ_SAMPLE=%s", l->sample);
    if (l->depth)
        l->envp[k++] = mf_xasprintf("MALLOC_FREQ_DEPTH=%s", l->depth);
    if (l->unwind)
        l->envp[k++] = mf_xasprintf("MALLOC_FREQ_UNWIND=%s", l->unwind);
    if (l->set_pythonmalloc)
        l->envp[k++] = mf_xstrdup("PYTHONMALLOC=malloc");
    l->envp[k] = NULL;
}
