/* The helpers declared in mf_print.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"

void mf_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("mf_print: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void *mf_oom(void *p)
{
    if (!p) {
        fputs("mf_print: out of memory\n", stderr);
        exit(3);
    }
    return p;
}

void *mf_xmalloc(size_t size)
{
    return mf_oom(malloc(size ? size : 1));
}

void *mf_xrealloc(void *p, size_t size)
{
    return mf_oom(realloc(p, size ? size : 1));
}

void *mf_xcalloc(size_t n, size_t size)
{
    return mf_oom(calloc(n ? n : 1, size ? size : 1));
}

char *mf_xstrdup(const char *s)
{
    return mf_oom(strdup(s));
}

uint64_t mf_hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9u;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

uint64_t mf_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325u ^ seed; /* FNV-1a, mixed at the end */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3u;
    return mf_hash_u64(h);
}

uint64_t mf_hash_u64s(const uint64_t *v, size_t n, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325u ^ seed;
    for (size_t i = 0; i < n; i++)
        h = (h ^ v[i]) * 0x9e3779b97f4a7c15u + (h >> 29);
    return mf_hash_u64(h ^ n);
}

static void mf_map_grow(struct mf_map *m)
{
    struct mf_map old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->keys = mf_xmalloc(m->cap * sizeof *m->keys);
    m->vals = mf_xmalloc(m->cap * sizeof *m->vals);
    memset(m->vals, 0xff, m->cap * sizeof *m->vals);
    size_t mask = m->cap - 1;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.vals[i] == MF_MAP_EMPTY)
            continue;
        size_t j = mf_hash_u64(old.keys[i]) & mask;
        while (m->vals[j] != MF_MAP_EMPTY)
            j = (j + 1) & mask;
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
    }
    free(old.keys);
    free(old.vals);
}

static size_t mf_map_find(const struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx)
{
    size_t mask = m->cap - 1, i = mf_hash_u64(key) & mask;
    while (m->vals[i] != MF_MAP_EMPTY && !(m->keys[i] == key && (!eq || eq(ctx, m->vals[i]))))
        i = (i + 1) & mask;
    return i;
}

uint32_t mf_map_get(const struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx)
{
    return m->cap ? m->vals[mf_map_find(m, key, eq, ctx)] : MF_MAP_EMPTY;
}

uint32_t mf_map_put(struct mf_map *m, uint64_t key, mf_map_eq eq, const void *ctx,
                    uint32_t new_val, bool *added)
{
    if ((m->n + 1) * 2 > m->cap)
        mf_map_grow(m);
    size_t i = mf_map_find(m, key, eq, ctx);
    *added = m->vals[i] == MF_MAP_EMPTY;
    if (*added) {
        m->keys[i] = key;
        m->vals[i] = new_val;
        m->n++;
    }
    return m->vals[i];
}

void mf_map_free(struct mf_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static char **mf_strings;
static uint32_t mf_nstrings, mf_strings_cap;
static struct mf_map mf_string_ids;

static bool mf_string_eq(const void *ctx, uint32_t id)
{
    return strcmp(mf_strings[id], ctx) == 0;
}

uint32_t mf_intern(const char *s)
{
    if (!mf_nstrings) { /* id 0 is "" */
        MF_GROW(mf_strings, mf_nstrings, mf_strings_cap);
        mf_strings[mf_nstrings++] = mf_xstrdup("");
    }
    if (!*s)
        return 0;
    bool added;
    uint32_t id = mf_map_put(&mf_string_ids, mf_hash_bytes(s, strlen(s), 0), mf_string_eq, s,
                             mf_nstrings, &added);
    if (added) {
        MF_GROW(mf_strings, mf_nstrings, mf_strings_cap);
        mf_strings[mf_nstrings++] = mf_xstrdup(s);
    }
    return id;
}

const char *mf_str(uint32_t id)
{
    return id < mf_nstrings ? mf_strings[id] : "";
}

const char *mf_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

const char *mf_fmt_count(char *buf, uint64_t n)
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    char *p = buf;
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0)
            *p++ = ',';
        *p++ = digits[i];
    }
    *p = '\0';
    return buf;
}

const char *mf_fmt_bytes(char *buf, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    unsigned u = 0;
    while (bytes >= 1024.0 && u + 1 < sizeof units / sizeof *units) {
        bytes /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, 32, "%.0f B", bytes);
    else
        snprintf(buf, 32, "%.1f %s", bytes, units[u]);
    return buf;
}
