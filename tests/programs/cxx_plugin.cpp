// A C++ plugin loaded by dlopen_host.c (DESIGN §4's regression case): exceptions are thrown
// and caught inside C++ frames, through several levels, rethrown and nested; plugin_site
// allocates a known count so the dlopen'd module's frames must be symbolized.
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#define SITE __attribute__((noinline, noclone))

__attribute__((noipa)) void plugin_keep(void *p) { (void)p; }

SITE void plugin_site(int n) // n x new long: 8 bytes each
{
    for (int i = 0; i < n; i++) {
        long *p = new long(i);
        plugin_keep(p);
        delete p;
    }
}

SITE void plugin_fail(int depth, int value)
{
    std::vector<std::string> held{"unwound", "on", "the", "way", "out"};
    if (depth == 0)
        throw std::runtime_error("value " + std::to_string(value));
    plugin_fail(depth - 1, value + 1);
    plugin_keep(&held);
}

SITE int plugin_rethrow(int value)
{
    try {
        plugin_fail(3, value);
    } catch (const std::runtime_error &) {
        throw; // rethrown to the caller, still inside the plugin
    }
    return -1;
}

extern "C" __attribute__((visibility("default"))) int plugin_run(int rounds)
{
    int score = 0;
    plugin_site(50);
    for (int i = 0; i < rounds; i++) {
        try {
            plugin_rethrow(i);
        } catch (const std::exception &e) {
            score += static_cast<int>(std::string(e.what()).size());
        }
        try {
            try {
                throw i;
            } catch (int v) {
                throw std::logic_error(std::to_string(v)); // thrown from a handler
            }
        } catch (const std::logic_error &e) {
            score += e.what()[0] - '0';
        }
    }
    return score;
}

// Blocks in read() (a cancellation point) inside C++ frames: pthread_cancel's forced unwind
// (glibc's, through libgcc_s) runs the personality routine and destructors here. With
// nongnu libunwind's _Unwind_* in the global scope, this is what broke (DESIGN §4).
struct CancelGuard {
    int *ran;
    ~CancelGuard() { *ran += 1; }
};

extern "C" __attribute__((visibility("default"))) int plugin_block(int fd, int *destructors_ran)
{
    CancelGuard guard{destructors_ran};
    std::string held(64, 'x'); // a destructor that frees
    char c;
    try {
        while (read(fd, &c, 1) > 0)
            held.push_back(c);
    } catch (...) {
        *destructors_ran += 10; // the forced unwind passes through catch (...) and must go on
        throw;
    }
    return static_cast<int>(held.size());
}
