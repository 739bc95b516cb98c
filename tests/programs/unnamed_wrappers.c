/* Wrappers whose names a stripped build loses, for test_unnamed_wrappers.py, and sites that
 * must stay sites. Exact counts at MALLOC_FREQ_SAMPLE=1 (use_X_k calls X k times):
 *   my_alloc       the wrapper: one malloc, called from use_alloc_1..10 (55) and build_list
 *   backend_malloc the allocator behind a function pointer, its one caller pool_get called
 *                  from use_pool_1..9 (45)
 *   make_record    a site with two mallocs, from use_record_1..10 (110 calls)
 *   build_list     a site that mallocs and calls my_alloc, from use_list_1..10 (55 + 55)
 *   small_site     one malloc, from only use_small_1..3 (6)
 * No stdio. */
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

NOINLINE void *my_alloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        abort();
    return p;
}

static NOINLINE void *backend_malloc(size_t n)
{
    void *volatile p = malloc(n);
    return p;
}
static void *(*volatile backend)(size_t) = backend_malloc;

NOINLINE void *pool_get(size_t n)
{
    void *p = backend(n);
    if (!p)
        abort();
    return p;
}

struct record {
    char *text;
    size_t len;
};

NOINLINE struct record *make_record(size_t len)
{
    struct record *r = malloc(sizeof *r);
    if (!r)
        abort();
    r->text = malloc(len);
    r->len = len;
    return r;
}

struct node {
    struct node *next;
    void *payload;
};

NOINLINE struct node *build_list(size_t n)
{
    struct node *head = malloc(sizeof *head);
    if (!head)
        abort();
    head->next = NULL;
    head->payload = my_alloc(n);
    return head;
}

NOINLINE void *small_site(size_t n)
{
    void *volatile p = malloc(n);
    return p;
}

#define CALLER(name, k, body)                          \
    NOINLINE void use_##name##_##k(void)               \
    {                                                  \
        for (int i = 0; i < k; i++) {                  \
            body;                                      \
        }                                              \
    }
#define ALLOC(k) CALLER(alloc, k, free(my_alloc(8 * k)))
#define POOL(k) CALLER(pool, k, free(pool_get(8 * k)))
#define RECORD(k) CALLER(record, k, struct record *r = make_record(k); free(r->text); free(r))
#define LIST(k) CALLER(list, k, struct node *h = build_list(k); free(h->payload); free(h))
#define SMALL(k) CALLER(small, k, free(small_site(k)))
#define NINE(M) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9)
#define TEN(M) NINE(M) M(10)
TEN(ALLOC)
NINE(POOL)
TEN(RECORD)
TEN(LIST)
SMALL(1) SMALL(2) SMALL(3)

#define CALL(name) use_##name();
#define CALL_ALLOC(k) CALL(alloc_##k)
#define CALL_POOL(k) CALL(pool_##k)
#define CALL_RECORD(k) CALL(record_##k)
#define CALL_LIST(k) CALL(list_##k)

int main(void)
{
    TEN(CALL_ALLOC)
    NINE(CALL_POOL)
    TEN(CALL_RECORD)
    TEN(CALL_LIST)
    use_small_1();
    use_small_2();
    use_small_3();
    return 0;
}
