/* What every part of the launcher uses: its messages, memory that is there or a message and
 * exit 2, and text made safe: a command line quoted for a shell, a name escaped for a
 * terminal. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c_core/mf_utf8.h"
#include "launcher.h"

/* ---- messages ------------------------------------------------------------------------ */

/* One line on stderr, in one write (lines of concurrent processes do not interleave). What
 * it names (a path, the program, a directory under the working one) may hold any byte: the
 * line is shown as mf_print shows names, so that none sends the terminal a control character
 * and each reads as in mf_print's reports. */
void mf_vmsg(const char *tail, const char *fmt, va_list ap)
{
    char line[8192], shown[sizeof line * 4 + 64]; /* the text is cut at 8 KiB, then shown */
    vsnprintf(line, sizeof line, fmt, ap);
    char *o = mf_esc_to(stpcpy(shown, "malloc_freq: "), line);
    snprintf(o, sizeof shown - (size_t)(o - shown), "%s\n", tail);
    fputs(shown, stderr);
}

void mf_msg_command(const char *lead, char *const *argv, const char *tail)
{
    char *command = mf_shell_quote(argv);
    size_t n = strlen(command) + 4 * (strlen(lead) + strlen(tail)) + 16;
    char *shown = mf_xmalloc(n);
    char *o = mf_esc_to(stpcpy(shown, "malloc_freq: "), lead);
    o = stpcpy(o, command); /* its backslashes are the shell's; it holds no control character */
    o = mf_esc_to(o, tail);
    strcpy(o, "\n");
    fputs(shown, stderr);
    free(shown);
    free(command);
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

/* Whether s holds a character a terminal acts on (mf_is_control) or a byte that is not
 * UTF-8. */
static bool mf_has_control(const char *s)
{
    while (*s) {
        uint32_t cp;
        size_t len = mf_utf8_decode(s, &cp);
        if (len == 0 || mf_is_control(cp))
            return true;
        s += len;
    }
    return false;
}

/* The command line as a shell would take it back: words with anything but [A-Za-z0-9_@%+=:,./-]
 * in single quotes; a word with a control character or a byte that is not UTF-8 in $'...',
 * each such byte as \xNN (bash, zsh, ksh and POSIX.1-2024 sh read it back), so that the line
 * shown on a terminal is the command and sends it nothing. */
char *mf_shell_quote(char *const *argv)
{
    size_t n = 1;
    for (char *const *a = argv; *a; a++)
        n += 4 * strlen(*a) + 4;
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
        if (mf_has_control(s)) {
            static const char hex[] = "0123456789abcdef";
            p = stpcpy(p, "$'");
            for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
                if (*c == '\'' || *c == '\\') {
                    *p++ = '\\';
                    *p++ = (char)*c;
                } else if (*c < 0x20 || *c >= 0x7f) { /* every byte of a non-ASCII one too */
                    *p++ = '\\';
                    *p++ = 'x';
                    *p++ = hex[*c >> 4];
                    *p++ = hex[*c & 15];
                } else {
                    *p++ = (char)*c;
                }
            }
            *p++ = '\'';
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
