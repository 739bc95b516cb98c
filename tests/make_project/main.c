#include <stdio.h>
#include <stdlib.h>

#include "wordfreq.h"

int main(void)
{
    static const char text[] = "the quick brown fox jumps over the lazy dog the end";
    char **words;
    size_t n = split_words(text, &words);
    struct table *t = table_new();
    for (size_t i = 0; i < n; i++)
        table_add(t, words[i]);
    printf("%zu words, %zu distinct, 'the' %zu times\n", n, table_size(t),
           table_count(t, "the"));
    for (size_t i = 0; i < n; i++)
        free(words[i]);
    free(words);
    table_free(t);
    return 0;
}
