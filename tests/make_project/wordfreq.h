/* wordfreq: counts the words of a fixed text (tests/make_project, built by test_launcher.py). */
#ifndef WORDFREQ_H
#define WORDFREQ_H

#include <stddef.h>

struct table;

size_t split_words(const char *text, char ***words);
struct table *table_new(void);
void table_add(struct table *t, const char *word);
size_t table_count(const struct table *t, const char *word);
size_t table_size(const struct table *t);
void table_free(struct table *t);

#endif
