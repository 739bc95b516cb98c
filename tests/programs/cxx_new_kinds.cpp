// Every form of the global operator new, a known number of times each, for
// tests/preload/test_trust_preload.py (NEW_SITES there has the numbers).
//   cxx_new_kinds SCALE   runs each site SCALE times its count (0: none, to see what the
//                         C++ runtime allocates by itself); prints how many pointers
//                         were not aligned as asked (0)
//   cxx_new_kinds oom [SCALE]  first asks for more than any allocator has, through each
//                         form, with a new_handler that gives up on its third call, and
//                         prints what happened (exit status 3); then runs the sites if asked
// The output must be the same with and without the profiler, whatever allocator follows it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#define SITE __attribute__((noinline, noclone))

struct Small { // 24 bytes
    long a, b, c;
};

struct alignas(64) Wide { // 128 bytes, 64-aligned: the align_val_t forms
    char bytes[128];
};

static long misaligned;

// Escapes the pointer, so that the compiler cannot drop a new/delete pair.
__attribute__((noipa)) void keep(const void *p)
{
    misaligned += p == nullptr || (uintptr_t)p % alignof(std::max_align_t) != 0;
}

__attribute__((noipa)) void keep(const Wide *p)
{
    misaligned += p == nullptr || (uintptr_t)p % alignof(Wide) != 0;
}

SITE void site_new(int n) // new Small: operator new(24)
{
    for (int i = 0; i < n; i++) {
        Small *p = new Small{i, 0, 0};
        keep(p);
        delete p;
    }
}

SITE void site_new_array(int n) // new Small[4]: operator new[](96)
{
    for (int i = 0; i < n; i++) {
        Small *p = new Small[4];
        keep(p);
        delete[] p;
    }
}

SITE void site_new_nothrow(int n) // new (nothrow) Small: operator new(24, nothrow)
{
    for (int i = 0; i < n; i++) {
        Small *p = new (std::nothrow) Small{i, 1, 2};
        keep(p);
        delete p;
    }
}

SITE void site_new_array_nothrow(int n) // operator new[](48, nothrow)
{
    for (int i = 0; i < n; i++) {
        Small *p = new (std::nothrow) Small[2];
        keep(p);
        delete[] p;
    }
}

SITE void site_new_aligned(int n) // new Wide: operator new(128, align_val_t(64))
{
    for (int i = 0; i < n; i++) {
        Wide *p = new Wide;
        keep(p);
        delete p;
    }
}

SITE void site_new_array_aligned(int n) // new Wide[3]: operator new[](384, align_val_t(64))
{
    for (int i = 0; i < n; i++) {
        Wide *p = new Wide[3];
        keep(p);
        delete[] p;
    }
}

SITE void site_new_aligned_nothrow(int n) // operator new(128, align_val_t(64), nothrow)
{
    for (int i = 0; i < n; i++) {
        Wide *p = new (std::nothrow) Wide;
        keep(p);
        delete p;
    }
}

SITE void site_new_array_aligned_nothrow(int n) // operator new[](256, align_val_t(64), nothrow)
{
    for (int i = 0; i < n; i++) {
        Wide *p = new (std::nothrow) Wide[2];
        keep(p);
        delete[] p;
    }
}

static int handler_calls;

static void give_up_third_time()
{
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}

static volatile std::size_t huge = SIZE_MAX / 4; // no allocator has this much

template <typename F> static void oom(const char *form, F allocate)
{
    handler_calls = 0;
    std::set_new_handler(give_up_third_time);
    try {
        void *p = allocate(huge);
        std::printf("%s: %s after %d handler calls\n", form, p ? "memory" : "null", handler_calls);
    } catch (const std::bad_alloc &e) {
        std::printf("%s: bad_alloc after %d handler calls\n", form, handler_calls);
    }
}

int main(int argc, char **argv)
{
    int arg = 1, status = 0;
    if (arg < argc && std::strcmp(argv[arg], "oom") == 0) {
        arg++;
        status = 3;
        const auto al = std::align_val_t(64);
        oom("new", [](std::size_t n) { return ::operator new(n); });
        oom("new[]", [](std::size_t n) { return ::operator new[](n); });
        oom("new nothrow", [](std::size_t n) { return ::operator new(n, std::nothrow); });
        oom("new[] nothrow", [](std::size_t n) { return ::operator new[](n, std::nothrow); });
        oom("new aligned", [al](std::size_t n) { return ::operator new(n, al); });
        oom("new[] aligned", [al](std::size_t n) { return ::operator new[](n, al); });
        oom("new aligned nothrow",
            [al](std::size_t n) { return ::operator new(n, al, std::nothrow); });
        oom("new[] aligned nothrow",
            [al](std::size_t n) { return ::operator new[](n, al, std::nothrow); });
        if (arg == argc)
            return status;
    }
    int scale = arg < argc ? std::atoi(argv[arg]) : 1;
    site_new(3000 * scale);
    site_new_array(2000 * scale);
    site_new_nothrow(1000 * scale);
    site_new_array_nothrow(1000 * scale);
    site_new_aligned(1000 * scale);
    site_new_array_aligned(800 * scale);
    site_new_aligned_nothrow(700 * scale);
    site_new_array_aligned_nothrow(500 * scale);
    std::printf("cxx_new_kinds %d: %ld misaligned\n", scale, misaligned);
    return status;
}
