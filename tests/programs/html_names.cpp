// Frame names and file names full of what HTML and JavaScript treat specially, for
// test_html_hostile_names: templates (<, >, &), operator< and a literal operator (quotes),
// and script_breaker, whose symbol is "</script><script>...": html_names_c.c is built
// without debug information, so mf_print names it by that symbol. The test builds this file
// in a directory whose path holds "</script>", quotes and a byte that is not UTF-8.
// Known counts: Box<Pair<int, char&> >::make 7 x 16 bytes, Key::operator< 5 x 24,
// operator"" _kib 3 x 40, script_breaker 11 x 8.
#include <cstdio>
#include <cstdlib>

extern "C" __attribute__((noipa)) void release(void *p)
{
    std::free(p);
}

#define BREAKER "\"</script><script>window.mfPwned=1</script><!--&'x\""
extern "C" void script_breaker(int n) __asm__(BREAKER);

template <typename A, typename B> struct Pair {
    A a;
    B b;
};

template <typename T> struct Box {
    __attribute__((noinline)) static void make(int n)
    {
        for (int i = 0; i < n; i++)
            release(std::malloc(16));
    }
};

struct Key {
    int v;
    __attribute__((noinline)) bool operator<(const Key &o) const
    {
        release(std::malloc(24));
        return v < o.v;
    }
};

__attribute__((noinline)) unsigned long long operator""_kib(unsigned long long v)
{
    release(std::malloc(40));
    return v * 1024;
}

static volatile int sink;

int main()
{
    Box<Pair<int, char &> >::make(7);
    Key a{1}, b{2};
    for (int i = 0; i < 5; i++)
        sink += a < b;
    sink += (int)(1_kib + 2_kib + 3_kib);
    script_breaker(11);
    std::puts("html_names done");
    return 0;
}
