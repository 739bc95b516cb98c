/* The CFI rules (c_core/mf_cfi.c) of every 4th byte of a library's code, printed one a line
 * as offsets from its base: `cfi_reload LIB` loads LIB alone; `cfi_reload OTHER LIB` first
 * loads OTHER, reads the rules of all its code (which fills mf_cfi.c's cache of objects),
 * closes it and then loads LIB, which the loader maps where OTHER was when both take as
 * much room (first line: "same address" or "other address"). A cache that outlived the
 * close would read LIB's rules from OTHER's tables. For
 * test_cfi_cache_forgets_a_closed_library; built with -D_GNU_SOURCE, as the core is. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "mf_internal.h"

/* mf_cfi.c asks the loader through the core's mf_dl_iterate (c_core/mf_modules.c, which
 * marks the thread's state); linked alone here, it asks the loader directly. */
int mf_dl_iterate(int (*visit)(struct dl_phdr_info *, size_t, void *), void *arg)
{
    return dl_iterate_phdr(visit, arg);
}

struct text {
    const char *name;
    uintptr_t base, lo, hi;
};

static int find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct text *t = arg;
    if (!strstr(info->dlpi_name, t->name))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            t->base = info->dlpi_addr;
            t->lo = info->dlpi_addr + ph->p_vaddr;
            t->hi = t->lo + ph->p_memsz;
        }
    }
    return 1;
}

static struct text text_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    struct text t = {slash ? slash + 1 : path, 0, 0, 0};
    dl_iterate_phdr(find_text, &t);
    return t;
}

static void rules(const struct text *t, int print)
{
    for (uintptr_t pc = t->lo + 1; pc < t->hi; pc += 4) {
        struct mf_cfi_rule r;
        bool found = mf_cfi_rule_at(pc, &r);
        if (print)
            printf("%lx %d %d %u %u\n", (unsigned long)(pc - t->base), found, r.kind, r.k, r.off);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    uintptr_t other_base = 0;
    if (argc > 2) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return 3;
        struct text t = text_of(argv[1]);
        other_base = t.base;
        rules(&t, 0);
        dlclose(h);
    }
    const char *lib = argv[argc - 1];
    if (!dlopen(lib, RTLD_NOW | RTLD_LOCAL))
        return 4;
    struct text t = text_of(lib);
    if (argc > 2)
        printf("%s\n", t.base == other_base ? "same address" : "other address");
    rules(&t, 1);
    return 0;
}
