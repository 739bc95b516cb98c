/* The tree report's footer: the modules symbolization could not read in full (no debug
 * information, stripped, missing, rebuilt since), each with the calls whose stacks pass
 * through it, and what would fix it: the distribution's debuginfod server, the Debian
 * package of its debug information, a rebuild with -g, --debug-dir, --sysroot. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfod.h"
#include "mf_print.h"
#include "report.h"

struct mf_unresolved {
    uint32_t id; /* module file (mf_module_debug) */
    enum mf_debug_state state;
    char *path, *opened;
    uint64_t calls;
    bool estimated;
};

static struct mf_unresolved *mf_unresolved_of(struct mf_unresolved_list *list,
                                              const struct mf_module_debug *d)
{
    for (uint32_t i = 0; i < list->n; i++)
        if (list->v[i].id == d->id)
            return &list->v[i];
    MF_GROW(list->v, list->n, list->cap);
    struct mf_unresolved *u = &list->v[list->n++];
    *u = (struct mf_unresolved){d->id, d->state, mf_xstrdup(d->path), mf_xstrdup(d->opened), 0,
                                false};
    return u;
}

void mf_unresolved_add(struct mf_unresolved_list *list, const struct mf_model *m)
{
    /* Each location asked once (10^6 stacks are 4x10^7 frames over a few thousand
     * locations): the entry it counts for, UINT32_MAX if its module read in full. */
    uint32_t *unres_of = mf_xmalloc(((size_t)m->nlocs + 1) * sizeof *unres_of);
    bool any = false;
    for (uint32_t i = 0; i < m->nlocs; i++) {
        const struct mf_location *l = &m->locs[i];
        struct mf_module_debug d;
        unres_of[i] = UINT32_MAX;
        if (l->module == MF_NO_MODULE ||
            !mf_module_debug(&m->p->procs[l->process].modules[l->module], &d) ||
            d.state == MF_DEBUG_OK || d.state == MF_DEBUG_NO_FILE || d.plumbing)
            continue;
        unres_of[i] = (uint32_t)(mf_unresolved_of(list, &d) - list->v);
        any = true;
    }
    uint32_t *seen = NULL, nseen, cap = 0;
    for (uint32_t i = 0; i < m->nstacks; i++) {
        const struct mf_stack *s = &m->stacks[i];
        list->total += s->calls;
        nseen = 0;
        for (uint32_t k = 0; any && k < s->depth; k++) {
            uint32_t u = unres_of[m->stack_locs[s->first + k]];
            if (u == UINT32_MAX)
                continue;
            uint32_t j = 0;
            while (j < nseen && seen[j] != u)
                j++;
            if (j < nseen)
                continue; /* a stack through a module twice counts once */
            MF_GROW(seen, nseen, cap);
            seen[nseen++] = u;
            list->v[u].calls += s->calls;
            list->v[u].estimated |= s->estimated;
        }
    }
    free(seen);
    free(unres_of);
}

/* The Debian package of each of paths[0 .. n) whose file list (/var/lib/dpkg/info/
 * <pkg>.list, under --sysroot first) names it, also as /usr/lib <-> /lib (merged /usr):
 * owner[i], or NULL if none. One pass over the lists for all of them: a pass a module, as
 * dpkg -S makes, read a build's 18 unresolved modules' 10 MB of lists 18 times, a tenth of
 * its summary. */
static void mf_dpkg_owners(char *const *paths, uint32_t n, const char *sysroot, char **owner)
{
    char **alt = mf_xcalloc(n + 1, sizeof *alt);
    for (uint32_t i = 0; i < n; i++) {
        owner[i] = NULL;
        size_t len = strlen(paths[i]) + 5;
        alt[i] = mf_xmalloc(len);
        if (strncmp(paths[i], "/usr/", 5) == 0)
            snprintf(alt[i], len, "%s", paths[i] + 4);
        else
            snprintf(alt[i], len, "/usr%s", paths[i]);
    }
    uint32_t left = n;
    const char *roots[2] = {sysroot, ""};
    for (int r = 0; r < 2 && left; r++) {
        if (r == 0 && !roots[0])
            continue;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/var/lib/dpkg/info", roots[r]);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *de;
        char *line = NULL;
        size_t cap = 0;
        while (left && (de = readdir(d))) {
            size_t len = strlen(de->d_name);
            if (len < 6 || strcmp(de->d_name + len - 5, ".list") != 0)
                continue;
            char file[4600];
            snprintf(file, sizeof file, "%s/%s", dir, de->d_name);
            FILE *f = fopen(file, "r");
            if (!f)
                continue;
            ssize_t got;
            while (left && (got = getline(&line, &cap, f)) > 0) {
                if (line[got - 1] == '\n')
                    line[--got] = '\0';
                for (uint32_t i = 0; i < n; i++) {
                    if (owner[i] || (strcmp(line, paths[i]) != 0 && strcmp(line, alt[i]) != 0))
                        continue;
                    owner[i] = mf_xstrdup(de->d_name);
                    owner[i][strcspn(owner[i], ":")] = '\0'; /* zlib1g:amd64.list */
                    char *dot = strstr(owner[i], ".list");
                    if (dot)
                        *dot = '\0';
                    left--;
                }
            }
            fclose(f);
        }
        free(line);
        closedir(d);
    }
    for (uint32_t i = 0; i < n; i++)
        free(alt[i]);
    free(alt);
}

/* The distribution's debuginfod server, from os-release's ID (under --sysroot first); NULL
 * for one without. */
static const char *mf_distro_debuginfod(const char *sysroot)
{
    static const char *const servers[][2] = {
        {"debian", "https://debuginfod.debian.net"},
        {"ubuntu", "https://debuginfod.ubuntu.com"},
    };
    char path[4200], *line = NULL;
    size_t cap = 0;
    const char *found = NULL;
    snprintf(path, sizeof path, "%s/etc/os-release", sysroot ? sysroot : "");
    FILE *f = fopen(path, "r");
    while (f && !found && getline(&line, &cap, f) > 0) {
        if (strncmp(line, "ID=", 3) != 0)
            continue;
        char *id = line + 3 + (line[3] == '"'); /* ID=debian or ID="debian" */
        id[strcspn(id, "\"\n")] = '\0';
        for (size_t i = 0; i < sizeof servers / sizeof *servers && !found; i++)
            if (strcmp(id, servers[i][0]) == 0)
                found = servers[i][1];
    }
    free(line);
    if (f)
        fclose(f);
    return found;
}

/* What would give the module's frames names and lines; true if that is its package's debug
 * information (which a debuginfod server has too). */
static bool mf_fix(char *buf, size_t size, const struct mf_unresolved *u, const char *pkg)
{
    if (u->state == MF_DEBUG_UNREADABLE || u->state == MF_DEBUG_OTHER_FILE) {
        snprintf(buf, size, "%s: a profile taken on another machine is read with --sysroot "
                 "DIR, DIR holding a copy of that machine's files",
                 u->state == MF_DEBUG_UNREADABLE ? "cannot be read"
                                                 : "not the file that ran (build-id differs)");
        return false;
    }
    const char *what = u->state == MF_DEBUG_STRIPPED ? "stripped, no debug information"
                                                     : "no debug information";
    if (!pkg) {
        snprintf(buf, size, "%s: rebuild it with -g, or give --debug-dir DIR holding its "
                 "separate debug file (DIR/.build-id/xx/yyyy.debug)", what);
        return false;
    }
    char dbg[300];
    size_t n = strlen(pkg);
    if (strcmp(pkg, "libc6") == 0)
        snprintf(dbg, sizeof dbg, "install libc6-dbg");
    else if (strncmp(pkg, "python3.", 8) == 0 && n > 8 && strcmp(pkg + n - 8, "-minimal") == 0)
        snprintf(dbg, sizeof dbg, "install %.*s-dbg", (int)(n - 8), pkg);
    else
        snprintf(dbg, sizeof dbg, "install %s-dbgsym (from the debian-debug archive)", pkg);
    snprintf(buf, size, "%s: %s", what, dbg);
    return true;
}

static int mf_unres_cmp(const void *a, const void *b)
{
    const struct mf_unresolved *x = a, *y = b;
    if (x->calls != y->calls)
        return x->calls > y->calls ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Text at column indent, its words wrapped to width columns (0: one line). */
static void mf_put_wrapped(FILE *out, const char *text, int indent, unsigned width)
{
    int col = indent;
    fprintf(out, "%*s", indent, "");
    for (const char *w = text; *w;) {
        size_t len = strcspn(w, " ");
        char word[600];
        snprintf(word, sizeof word, "%.*s", (int)len, w);
        int ww = mf_text_width(word);
        if (width && col > indent && col + 1 + ww > (int)width - 1) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fputs(word, out);
        col += ww;
        w += len;
        w += strspn(w, " ");
    }
    fputc('\n', out);
}

void mf_report_unresolved(FILE *out, struct mf_unresolved_list *list,
                          const struct mf_report_options *o)
{
    const char *sysroot = o->sysroot;
    /* Of the calls the stacks hold: with estimates, the exact total is not what they add to. */
    uint64_t total = list->total;
    struct mf_unresolved *rows = list->v;
    uint32_t n = 0;
    for (uint32_t i = 0; i < list->n; i++) {
        if (rows[i].calls) {
            rows[n++] = rows[i];
        } else {
            free(rows[i].path);
            free(rows[i].opened);
        }
    }
    list->n = n;
    if (n == 0) {
        free(list->v);
        *list = (struct mf_unresolved_list){0};
        return;
    }
    qsort(rows, n, sizeof *rows, mf_unres_cmp);
    fprintf(out, "\nnot symbolized in full: %u module%s without debug information or not found, "
            "with the calls whose stacks pass through %s:\n", n, n == 1 ? "" : "s",
            n == 1 ? "it" : "each");
    int width = 5;
    char num[48];
    for (uint32_t i = 0; i < n; i++) {
        int w = (int)strlen(mf_fmt_count(num, rows[i].calls)) + rows[i].estimated;
        width = w > width ? w : width;
    }
    bool any_packaged = false;
    char **paths = mf_xcalloc(n, sizeof *paths), **pkgs = mf_xcalloc(n, sizeof *pkgs);
    uint32_t npaths = 0;
    for (uint32_t i = 0; i < n; i++) /* those a package may hold */
        if (rows[i].state != MF_DEBUG_UNREADABLE && rows[i].state != MF_DEBUG_OTHER_FILE)
            paths[npaths++] = rows[i].path;
    mf_dpkg_owners(paths, npaths, sysroot, pkgs);
    for (uint32_t i = 0, k = 0; i < n; i++) {
        const struct mf_unresolved *u = &rows[i];
        char calls[48], fix[600];
        snprintf(calls, sizeof calls, "%s%s", u->estimated ? "~" : "", mf_fmt_count(num, u->calls));
        bool packaged = k < npaths && paths[k] == u->path;
        any_packaged |= mf_fix(fix, sizeof fix, u, packaged ? pkgs[k] : NULL);
        k += packaged;
        fprintf(out, "%*s %7.2f%%  %s", width, calls,
                total ? (double)u->calls * 100.0 / (double)total : 0.0, mf_esc(u->opened));
        fputc('\n', out);
        /* On a narrow terminal the fix wraps: cut, it would lose what to do. */
        mf_put_wrapped(out, mf_esc(fix), width + 12, mf_narrow(o) ? o->width : 0);
    }
    /* The distribution's server has its packages' debug information: no install needed. */
    const char *server = any_packaged && mf_debuginfod_use() == MF_DEBUGINFOD_UNSET
                             ? mf_distro_debuginfod(sysroot)
                             : NULL;
    if (server) {
        char fetch[300];
        snprintf(fetch, sizeof fetch, "instead of installing them: export DEBUGINFOD_URLS=%s, and "
                 "mf_print fetches the packages' debug information from that server", server);
        mf_put_wrapped(out, fetch, 0, mf_narrow(o) ? o->width : 0);
    }
    for (uint32_t i = 0; i < npaths; i++)
        free(pkgs[i]);
    free(pkgs);
    free(paths);
    for (uint32_t i = 0; i < n; i++) {
        free(rows[i].path);
        free(rows[i].opened);
    }
    free(list->v);
    *list = (struct mf_unresolved_list){0};
}
