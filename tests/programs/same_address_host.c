/* dlopens argv[1], calls its site_in_a 400 times, then dlcloses it and dlopens argv[2]
 * and calls its site_in_b 600 times: libb.so is likely mapped where liba.so was. Prints
 * "same address" or "other address". For test_library_loaded_at_a_previous_address. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

static void *call(const char *lib, const char *name, int n, void **base)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    void (*f)(int) = (void (*)(int))dlsym(h, name);
    if (!f)
        return NULL;
    f(n);
    Dl_info info;
    *base = dladdr((void *)f, &info) ? info.dli_fbase : NULL;
    return h;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    void *a_base, *b_base;
    void *a = call(argv[1], "site_in_a", 400, &a_base);
    if (!a)
        return 3;
    dlclose(a);
    void *b = call(argv[2], "site_in_b", 600, &b_base);
    if (!b)
        return 4;
    printf("%s address\n", a_base == b_base ? "same" : "other");
    dlclose(b);
    return 0;
}
