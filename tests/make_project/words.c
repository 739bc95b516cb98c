#include <stdlib.h>
#include <string.h>

#include "wordfreq.h"

/* The words of text, split at spaces, each a new string. */
size_t split_words(const char *text, char ***words)
{
    size_t n = 0, cap = 4;
    char **v = malloc(cap * sizeof *v);
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, " ");
        if (len > 0) {
            if (n == cap)
                v = realloc(v, (cap *= 2) * sizeof *v);
            v[n++] = strndup(p, len);
        }
        p += len;
        p += strspn(p, " ");
    }
    *words = v;
    return n;
}
