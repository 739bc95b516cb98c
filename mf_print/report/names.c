/* Shorter names for the tree (names.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mf_print.h"
#include "names.h"
#include "trim.h"

static uint32_t *mf_short; /* per interned name: its short form + 1, 0 not yet made */
static uint32_t mf_short_cap;

static bool mf_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '$' || (unsigned char)c >= 0x80;
}

/* Whether the '<' or '>' at p is part of an operator's name or an arrow, not a bracket. */
static bool mf_operator_char(const char *s, const char *p)
{
    const char *q = p;
    while (q > s && (q[-1] == '<' || q[-1] == '>' || q[-1] == '-' || q[-1] == '='))
        q--;
    if (q - s >= 8 && strncmp(q - 8, "operator", 8) == 0 && (q - s == 8 || !mf_ident(q[-9])))
        return true;
    return *p == '>' && p > s && p[-1] == '-'; /* Rust's fn(..) -> T, C++'s operator-> */
}

static bool mf_rust_hash(const char *s, size_t n)
{
    if (n < 19 || strncmp(s + n - 19, "::h", 3) != 0)
        return false;
    for (size_t i = n - 16; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static char *mf_shorten(const char *s)
{
    size_t n = strlen(s);
    if (mf_rust_hash(s, n))
        n -= 19;
    char *out = mf_xmalloc(2 * n + 8); /* "<>" becomes "<…>": never more than twice */
    size_t o = 0;
    int collapsed = 0; /* levels inside the generic being dropped */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '<' && !mf_operator_char(s, s + i)) {
            bool generic = i > 0 && (mf_ident(s[i - 1]) || s[i - 1] == '>');
            if (collapsed) {
                collapsed++;
                continue;
            }
            if (generic) {
                memcpy(out + o, "<\xe2\x80\xa6", 4); /* "<…" */
                o += 4;
                collapsed = 1;
                continue;
            }
            out[o++] = c; /* a qualified path's "<T as Trait>": kept */
            continue;
        }
        if (c == '>' && !mf_operator_char(s, s + i)) {
            if (collapsed) {
                if (--collapsed == 0)
                    out[o++] = '>';
                continue;
            }
            out[o++] = c;
            continue;
        }
        if (collapsed)
            continue;
        out[o++] = c;
    }
    if (collapsed) /* unbalanced: keep the name as it was */
        o = 0;
    if (o == 0) {
        free(out);
        out = mf_xmalloc(n + 1);
        memcpy(out, s, n);
        out[n] = '\0';
        return out;
    }
    out[o] = '\0';
    return out;
}

uint32_t mf_short_name(uint32_t name)
{
    if (name >= mf_short_cap) {
        uint32_t cap = mf_short_cap ? mf_short_cap : 1024;
        while (cap <= name)
            cap *= 2;
        mf_short = mf_xrealloc(mf_short, cap * sizeof *mf_short);
        memset(mf_short + mf_short_cap, 0, (cap - mf_short_cap) * sizeof *mf_short);
        mf_short_cap = cap;
    }
    if (!mf_short[name]) {
        const char *s = mf_str(name);
        uint32_t id = name;
        if (*s != '[' && (strchr(s, '<') || strstr(s, "::h"))) {
            char *t = mf_shorten(mf_without_return_type(s));
            id = mf_intern(t);
            free(t);
        }
        /* mf_intern may have grown the table of names, not this one: name is still in it. */
        mf_short[name] = id + 1;
    }
    return mf_short[name] - 1;
}
