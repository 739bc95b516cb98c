/* wordfreq: counts the words of a generated corpus with four threads, then merges the
 * counts and prints the most frequent ones. This is the program `make demo` profiles.
 *
 * Its allocation profile is typical of text processing: one small strndup() per token,
 * a token array grown by doubling, a calloc'd record per line, hash tables that grow, and
 * one naive string builder that reallocs on every append (the profile makes that one stand
 * out: about as many calls as the tokens themselves). About two million calls in all. */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define LINES_PER_THREAD 20000
#define WORDS_PER_LINE 10
#define VOCABULARY 3000

/* ---- a tiny deterministic random source ------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        perror("wordfreq");
        exit(1);
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) {
        perror("wordfreq");
        exit(1);
    }
    return p;
}

/* ---- string building ------------------------------------------------------------------ */

struct strbuf {
    char *data;
    size_t len, cap;
};

/* Grows by doubling: a handful of reallocs however long the text gets. */
static void sb_reserve(struct strbuf *sb, size_t extra)
{
    if (sb->len + extra + 1 <= sb->cap)
        return;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    sb->data = xrealloc(sb->data, cap);
    sb->cap = cap;
}

static void sb_add(struct strbuf *sb, const char *s, size_t n)
{
    sb_reserve(sb, n);
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

/* Grows to exactly the size needed: one realloc per append. Looks harmless. */
static void sb_append_exact(struct strbuf *sb, const char *s)
{
    size_t n = strlen(s);
    sb->data = xrealloc(sb->data, sb->len + n + 1);
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}

/* ---- the word table ------------------------------------------------------------------ */

struct word_count {
    char *word;
    long count;
    struct word_count *next;
};

struct word_table {
    struct word_count **buckets;
    size_t nbuckets, size;
};

static uint64_t hash_word(const char *s)
{
    uint64_t h = 1469598103934665603u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211u;
    return h;
}

static void table_init(struct word_table *t)
{
    t->nbuckets = 64;
    t->size = 0;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
}

static void table_grow(struct word_table *t)
{
    size_t n = t->nbuckets * 2;
    struct word_count **b = calloc(n, sizeof *b);
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct word_count *e = t->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            size_t j = hash_word(e->word) & (n - 1);
            e->next = b[j];
            b[j] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

/* Counts `word`, taking ownership of it (freed if the table already has it). */
static void table_add(struct word_table *t, char *word, long count)
{
    size_t i = hash_word(word) & (t->nbuckets - 1);
    for (struct word_count *e = t->buckets[i]; e; e = e->next) {
        if (strcmp(e->word, word) == 0) {
            e->count += count;
            free(word);
            return;
        }
    }
    struct word_count *e = xmalloc(sizeof *e);
    e->word = word;
    e->count = count;
    e->next = t->buckets[i];
    t->buckets[i] = e;
    if (++t->size > t->nbuckets * 3 / 4)
        table_grow(t);
}

static void table_free(struct word_table *t)
{
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct word_count *e = t->buckets[i], *next;
        for (; e; e = next) {
            next = e->next;
            free(e->word);
            free(e);
        }
    }
    free(t->buckets);
}

/* ---- the corpus ------------------------------------------------------------------------ */

static const char *const syllables[] = {"the", "an", "or", "ka", "lo", "mi", "ser", "ta",
                                        "ven", "ul", "dra", "po", "ne", "si", "qua", "ri"};
static char *vocabulary[VOCABULARY];

static void make_vocabulary(void)
{
    uint64_t s = 0x5eed;
    for (int i = 0; i < VOCABULARY; i++) {
        char word[32] = "";
        int parts = 1 + (int)(rng_next(&s) % 3);
        for (int p = 0; p < parts; p++)
            strcat(word, syllables[rng_next(&s) % 16]);
        if (i % 7 == 0) /* some words are capitalized; counting is case-blind */
            word[0] = (char)toupper((unsigned char)word[0]);
        vocabulary[i] = strdup(word);
    }
}

/* Lines of WORDS_PER_LINE words, a few frequent ones and a long tail (roughly Zipf). */
static char *make_text(uint64_t seed, int lines)
{
    struct strbuf text = {0};
    for (int l = 0; l < lines; l++) {
        for (int w = 0; w < WORDS_PER_LINE; w++) {
            double u = (double)(rng_next(&seed) >> 11) / 9007199254740992.0;
            const char *word = vocabulary[(int)(VOCABULARY * u * u * u)];
            sb_add(&text, word, strlen(word));
            sb_add(&text, w + 1 < WORDS_PER_LINE ? " " : ".\n", w + 1 < WORDS_PER_LINE ? 1 : 2);
        }
    }
    return text.data;
}

/* ---- counting ---------------------------------------------------------------------------- */

struct line_stats {
    int words;
    int letters;
    uint64_t fingerprint;
};

/* Splits a line into lowercase words, each a new string, in a growing array. */
static char **split_words(const char *line, int *count)
{
    int n = 0, cap = 4;
    char **words = xmalloc((size_t)cap * sizeof *words);
    for (const char *p = line; *p;) {
        while (*p && !isalpha((unsigned char)*p))
            p++;
        const char *start = p;
        while (isalpha((unsigned char)*p))
            p++;
        if (p == start)
            break;
        if (n == cap) {
            cap *= 2;
            words = xrealloc(words, (size_t)cap * sizeof *words);
        }
        char *w = strndup(start, (size_t)(p - start));
        for (char *c = w; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        words[n++] = w;
    }
    *count = n;
    return words;
}

static struct line_stats *analyze_line(const char *line, struct word_table *table)
{
    struct line_stats *stats = calloc(1, sizeof *stats);
    struct strbuf normalized = {0};
    int n;
    char **words = split_words(line, &n);
    for (int i = 0; i < n; i++) {
        sb_append_exact(&normalized, words[i]);
        stats->letters += (int)strlen(words[i]);
        table_add(table, words[i], 1);
    }
    stats->words = n;
    stats->fingerprint = normalized.data ? hash_word(normalized.data) : 0;
    free(normalized.data);
    free(words);
    return stats;
}

struct worker {
    pthread_t thread;
    uint64_t seed;
    struct word_table table;
    long words, letters;
    uint64_t fingerprint;
};

static void *count_words(void *arg)
{
    struct worker *w = arg;
    char *text = make_text(w->seed, LINES_PER_THREAD);
    table_init(&w->table);
    for (char *line = text, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        *end = '\0';
        struct line_stats *stats = analyze_line(line, &w->table);
        w->words += stats->words;
        w->letters += stats->letters;
        w->fingerprint ^= stats->fingerprint;
        free(stats);
    }
    free(text);
    return NULL;
}

static int by_count_desc(const void *a, const void *b)
{
    const struct word_count *x = *(struct word_count *const *)a;
    const struct word_count *y = *(struct word_count *const *)b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->word, y->word);
}

int main(void)
{
    make_vocabulary();
    struct worker workers[THREADS] = {0};
    for (int i = 0; i < THREADS; i++) {
        workers[i].seed = 0x9e3779b97f4a7c15u * (uint64_t)(i + 1);
        pthread_create(&workers[i].thread, NULL, count_words, &workers[i]);
    }

    struct word_table all;
    table_init(&all);
    long words = 0, letters = 0;
    uint64_t fingerprint = 0;
    for (int i = 0; i < THREADS; i++) {
        struct worker *w = &workers[i];
        pthread_join(w->thread, NULL);
        words += w->words;
        letters += w->letters;
        fingerprint ^= w->fingerprint;
        for (size_t b = 0; b < w->table.nbuckets; b++)
            for (struct word_count *e = w->table.buckets[b]; e; e = e->next)
                table_add(&all, strdup(e->word), e->count);
        table_free(&w->table);
    }

    struct word_count **sorted = xmalloc(all.size * sizeof *sorted);
    size_t n = 0;
    for (size_t b = 0; b < all.nbuckets; b++)
        for (struct word_count *e = all.buckets[b]; e; e = e->next)
            sorted[n++] = e;
    qsort(sorted, n, sizeof *sorted, by_count_desc);

    printf("wordfreq: %ld words (%ld letters) in %d lines, %zu distinct, %d threads\n", words,
           letters, THREADS * LINES_PER_THREAD, n, THREADS);
    printf("most frequent:");
    for (size_t i = 0; i < 5 && i < n; i++)
        printf(" %s %ld%s", sorted[i]->word, sorted[i]->count, i + 1 < 5 ? "," : "\n");
    printf("line fingerprint %016llx\n", (unsigned long long)fingerprint);

    free(sorted);
    table_free(&all);
    for (int i = 0; i < VOCABULARY; i++)
        free(vocabulary[i]);
    return 0;
}
