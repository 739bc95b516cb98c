#include <stdlib.h>
#include <string.h>

#include "wordfreq.h"

struct entry {
    char *word;
    size_t count;
    struct entry *next;
};

struct table {
    struct entry *head;
    size_t size;
};

struct table *table_new(void)
{
    return calloc(1, sizeof(struct table));
}

void table_add(struct table *t, const char *word)
{
    for (struct entry *e = t->head; e; e = e->next)
        if (strcmp(e->word, word) == 0) {
            e->count++;
            return;
        }
    struct entry *e = malloc(sizeof *e);
    e->word = strdup(word);
    e->count = 1;
    e->next = t->head;
    t->head = e;
    t->size++;
}

size_t table_count(const struct table *t, const char *word)
{
    for (const struct entry *e = t->head; e; e = e->next)
        if (strcmp(e->word, word) == 0)
            return e->count;
    return 0;
}

size_t table_size(const struct table *t)
{
    return t->size;
}

void table_free(struct table *t)
{
    while (t->head) {
        struct entry *e = t->head;
        t->head = e->next;
        free(e->word);
        free(e);
    }
    free(t);
}
