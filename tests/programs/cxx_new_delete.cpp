// Known new/delete/new[] sites and thrown+caught exceptions, for
// test_cxx_new_delete_exceptions. Expected numbers are in tests/core/test_recorder.py (CXX_SITES).
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#define SITE __attribute__((noinline, noclone))

struct Node {
    long value;
    Node *next;
};

struct WithDtor { // non-trivial destructor: new[] asks for an 8-byte count cookie more
    int x;
    ~WithDtor() { x = 0; }
};

__attribute__((noipa)) void keep(void *p) { (void)p; }

SITE long site_new_node(int n) // n x new Node: 16 bytes each
{
    Node *head = nullptr;
    for (int i = 0; i < n; i++) {
        Node *node = new Node{i, head};
        keep(node);
        head = node;
    }
    long sum = 0;
    while (head) {
        Node *next = head->next;
        sum += head->value;
        delete head;
        head = next;
    }
    return sum;
}

SITE double site_new_array(int n) // n x new double[10]: 80 bytes each
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        double *a = new double[10];
        keep(a);
        for (int j = 0; j < 10; j++)
            a[j] = i + j;
        total += a[9];
        delete[] a;
    }
    return total;
}

SITE int site_new_dtor_array(int n) // n x new WithDtor[5]: 5*4 + 8 cookie = 28 bytes each
{
    int total = 0;
    for (int i = 0; i < n; i++) {
        WithDtor *a = new WithDtor[5];
        keep(a);
        a[4].x = i;
        total += a[4].x;
        delete[] a;
    }
    return total;
}

SITE void site_throw(int i) // __cxa_allocate_exception mallocs once per throw
{
    throw i;
}

SITE int catch_all(int n)
{
    int caught = 0;
    for (int i = 0; i < n; i++) {
        try {
            site_throw(i);
        } catch (int v) {
            caught += v == i;
        }
    }
    return caught;
}

int main()
{
    long nodes = site_new_node(1000);
    double arrays = site_new_array(400);
    int dtors = site_new_dtor_array(300);
    int caught = catch_all(100);
    std::printf("nodes %ld arrays %.0f dtors %d caught %d\n", nodes, arrays, dtors, caught);
    try {
        throw std::runtime_error("last words");
    } catch (const std::exception &e) {
        std::printf("caught: %s\n", e.what());
    }
    return 5;
}
