/* C++ function names that every mf_print format must carry intact: a class template whose
 * arguments hold ',', ' ' and '<>', an operator(), a lambda, a literal operator (its name
 * holds '"' and a space) and an overloaded comma operator. Each is an allocation site with a
 * known number of calls of a known size; tests/viewer/test_mf_print_formats.py (CXX_NAMES) repeats
 * the names as the demangler writes them and the numbers. */
#include <cstddef>
#include <cstdlib>
#include <utility>

#define SITE __attribute__((noinline))

/* Out of line and opaque, so the compiler cannot drop a malloc/free pair. */
extern "C" __attribute__((noipa)) void release(void *p)
{
    std::free(p);
}

template <typename K, typename V> struct Table {
    SITE static void put(int n) /* n x 24 bytes */
    {
        for (int i = 0; i < n; i++)
            release(std::malloc(24));
    }
};

struct Adder {
    std::size_t size;
    SITE void operator()(int n) const /* n x size bytes */
    {
        for (int i = 0; i < n; i++)
            release(std::malloc(size));
    }
};

struct Blob {
    void *p;
};

SITE Blob operator""_blob(unsigned long long size) /* one call of `size` bytes */
{
    return Blob{std::malloc(size)};
}

struct Chain {
    int links;
};

SITE Chain &operator,(Chain &c, std::size_t size) /* one call of `size` bytes */
{
    release(std::malloc(size));
    c.links++;
    return c;
}

int main()
{
    Table<int, std::pair<char, long> >::put(101);
    Adder{32}(202);
    auto lambda = [](int n) __attribute__((noinline)) { /* n x 40 bytes */
        for (int i = 0; i < n; i++)
            release(std::malloc(40));
    };
    lambda(303);
    for (int i = 0; i < 404; i++)
        release((48_blob).p);
    Chain chain{0};
    for (int i = 0; i < 505; i++)
        (void)(chain, std::size_t{56});
    return chain.links == 505 ? 0 : 1;
}
