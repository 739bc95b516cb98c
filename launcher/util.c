/* What every part of the launcher uses: its messages, memory that is there or a message and
 * exit 2, and text made safe: a command line quoted for a shell, a name escaped for a
 * terminal. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"

/* ---- messages ------------------------------------------------------------------------ */

void mf_vmsg(const char *tail, const char *fmt, va_list ap)
{
    char line[8192]; /* one write: lines of concurrent processes do not interleave */
    vsnprintf(line, sizeof line, fmt, ap);
    fprintf(stderr, "malloc_freq: %s%s\n", line, tail);
}

void mf_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mf_vmsg("", fmt, ap);
    va_end(ap);
}

void mf_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mf_vmsg("", fmt, ap);
    va_end(ap);
    exit(2);
}

/* ---- memory -------------------------------------------------------------------------- */

void *mf_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        mf_die("out of memory");
    return p;
}

void *mf_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        mf_die("out of memory");
    return q;
}

char *mf_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        mf_die("out of memory");
    return p;
}

char *mf_xasprintf(const char *fmt, ...)
{
    char *s;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        mf_die("out of memory");
    return s;
}

/* ---- text ---------------------------------------------------------------------------- */

/* The command line as a shell would take it back: words with anything but [A-Za-z0-9_@%+=:,./-]
 * in single quotes. */
char *mf_shell_quote(char *const *argv)
{
    size_t n = 1;
    for (char *const *a = argv; *a; a++)
        n += 4 * strlen(*a) + 3;
    char *out = mf_xmalloc(n), *p = out;
    for (char *const *a = argv; *a; a++) {
        if (a != argv)
            *p++ = ' ';
        const char *s = *a;
        bool plain = *s != '\0';
        for (const char *c = s; *c; c++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
                        *c))
                plain = false;
        if (plain) {
            p = stpcpy(p, s);
            continue;
        }
        *p++ = '\'';
        for (const char *c = s; *c; c++)
            if (*c == '\'')
                p = stpcpy(p, "'\\''");
            else
                *p++ = *c;
        *p++ = '\'';
    }
    *p = '\0';
    return out;
}

/* The length of the UTF-8 character at s[0..n), 0 if it is not one (a stray or overlong
 * byte, a surrogate, past U+10FFFF); *cp its code point. */
static size_t mf_utf8_char(const unsigned char *s, size_t n, unsigned *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t len = s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    unsigned c = s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    static const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[len] || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
        return 0;
    *cp = c;
    return len;
}

/* As mf_print escapes the names it prints, so that a name reads the same in the summary and
 * in its reports: a byte that is not UTF-8 and a C0 control or DEL as \xHH, C1 controls and
 * U+2028/U+2029 (line breaks to some terminals) as \uXXXX, a backslash doubled. */
void mf_put_name(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned cp = 0;
        size_t len = mf_utf8_char(p, (size_t)(end - p), &cp);
        if (len <= 1 && (len == 0 || cp < 0x20 || cp == 0x7f)) {
            fprintf(f, "\\x%02x", *p++);
            continue;
        }
        if ((cp >= 0x80 && cp < 0xa0) || cp == 0x2028 || cp == 0x2029)
            fprintf(f, "\\u%04x", cp);
        else if (cp == '\\')
            fputs("\\\\", f);
        else
            fwrite(p, 1, len, f);
        p += len;
    }
}
