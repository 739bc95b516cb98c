/* The C++ standard library allocating for the program's functions: a vector that grows, a
 * string built by appending, an unordered_map that inserts, a shared_ptr made, and a
 * std::thread whose function fills a map. mf_print folds the library's frames into the
 * functions below, which are the sites ("fill_vector via std::vector<…>::push_back"), and
 * cuts the thread's start (libstdc++'s execute_native_thread_routine, std::thread's
 * invoker). tests/viewer/test_fold.py (CXX_CONTAINER_SITES) repeats the function names. */
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#define SITE __attribute__((noinline))

template <typename T> SITE void sink(const T &x)
{
    asm volatile("" : : "r"(&x) : "memory");
}

namespace app {

template <typename Key, typename Value> struct Index {
    std::unordered_map<Key, std::vector<Value>> buckets;
    SITE void add_all(int n)
    {
        for (int i = 0; i < n; i++)
            buckets[Key(i % 97)].push_back(Value(i));
    }
};

SITE void fill_vector(int n)
{
    std::vector<std::pair<long, std::string>> v;
    for (int i = 0; i < n; i++)
        v.emplace_back(i, "");
    sink(v);
}

SITE void build_string(int n)
{
    std::string s;
    for (int i = 0; i < n; i++)
        s += "a long piece of text that does not fit a small string";
    sink(s);
}

SITE void make_shared_objects(int n)
{
    for (int i = 0; i < n; i++)
        sink(std::make_shared<std::vector<int>>(16, i));
}

SITE void thread_fill_map(int n)
{
    std::map<int, std::string> m;
    for (int i = 0; i < n; i++)
        m.emplace(i, "twenty-four bytes or more, to allocate");
    sink(m);
}

} // namespace app

int main()
{
    app::fill_vector(3000);
    app::build_string(2000);
    app::Index<long, double> index;
    index.add_all(4000);
    app::make_shared_objects(500);
    std::thread t(app::thread_fill_map, 1500);
    t.join();
    sink(index);
    return 0;
}
