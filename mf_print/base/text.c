/* The text helpers declared in text.h. */
#include <langinfo.h>
#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "mf_print.h"
#include "text.h"

/* ---- display width ----------------------------------------------------------------------- */

/* wcwidth's answer depends on the locale: C.UTF-8's, used by this thread for the call only,
 * whatever the user's is (mf_print never calls setlocale). */
static locale_t mf_utf8_locale;
static pthread_once_t mf_utf8_locale_once = PTHREAD_ONCE_INIT;

static void mf_utf8_locale_open(void)
{
    mf_utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/* Recent answers, cp << 8 | width, by cp's low byte: a tree's lines repeat the same few
 * glyphs, and switching locales twice a character took 50 ns. Threads that race for an
 * entry each store a whole answer. */
static uint64_t mf_width_cache[256];

int mf_char_width(uint32_t cp)
{
    if (mf_is_control(cp))
        return 0;
    if (cp < 0x80)
        return 1;
    uint64_t *slot = &mf_width_cache[cp & 255];
    uint64_t e = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (e >> 8 == cp)
        return (int)(e & 255);
    pthread_once(&mf_utf8_locale_once, mf_utf8_locale_open);
    int w = 1; /* unassigned, or no C.UTF-8: terminals show one box */
    if (mf_utf8_locale) {
        locale_t old = uselocale(mf_utf8_locale);
        int cw = wcwidth((wchar_t)cp);
        uselocale(old);
        w = cw < 0 ? 1 : cw;
    }
    __atomic_store_n(slot, (uint64_t)cp << 8 | (unsigned)w, __ATOMIC_RELAXED);
    return w;
}

int mf_text_width(const char *s)
{
    int w = 0;
    while (*s) {
        uint32_t cp;
        size_t n = mf_utf8_decode(s, &cp);
        w += n ? mf_char_width(cp) : 1;
        s += n ? n : 1;
    }
    return w;
}

void mf_pad(FILE *out, int n)
{
    while (n-- > 0)
        fputc(' ', out);
}

void mf_cut_lines(FILE *out, const char *text, size_t len, unsigned width)
{
    if (!width) {
        fwrite(text, 1, len, out);
        return;
    }
    const char *end = text + len;
    while (text < end) {
        const char *nl = memchr(text, '\n', (size_t)(end - text));
        const char *stop = nl ? nl : end;
        unsigned cols = 0;
        const char *p = text, *keep = text; /* keep: the end of what fits in width - 1 columns */
        bool full = false;
        while (p < stop) {
            unsigned char c = (unsigned char)*p;
            unsigned w = 1;
            if (c < 0x20 || c >= 0x7f) { /* else printable ASCII, the common case */
                uint32_t cp;
                size_t n = mf_utf8_decode(p, &cp);
                w = n ? (unsigned)mf_char_width(cp) : 1;
                p += n ? n : 1;
            } else {
                p++;
            }
            full = full || cols + w > width - 1;
            if (!full)
                keep = p; /* a zero-width mark stays with the character before it */
            cols += w;
            if (cols > width)
                break; /* cut: the rest is not shown */
        }
        if (cols > width) {
            fwrite(text, 1, (size_t)(keep - text), out);
            fputs("\xe2\x80\xa6", out); /* … */
        } else {
            fwrite(text, 1, (size_t)(stop - text), out);
        }
        if (nl)
            fputc('\n', out);
        text = nl ? nl + 1 : end;
    }
}

/* ---- a terminal -------------------------------------------------------------------------- */

#define MF_ESC_SLOTS 8
static char *mf_esc_buf[MF_ESC_SLOTS];
static size_t mf_esc_cap[MF_ESC_SLOTS];
static unsigned mf_esc_next;

const char *mf_esc(const char *s)
{
    size_t need = strlen(s) * 4 + 1; /* each byte at most \xNN; a control char of 2..4
                                        bytes at most \uXXXX (6 < 8) */
    unsigned k = mf_esc_next++ % MF_ESC_SLOTS;
    if (mf_esc_cap[k] < need) {
        mf_esc_cap[k] = need;
        mf_esc_buf[k] = mf_xrealloc(mf_esc_buf[k], need);
    }
    *mf_esc_to(mf_esc_buf[k], s) = '\0';
    return mf_esc_buf[k];
}

void mf_put_text(FILE *out, const char *s)
{
    while (*s) {
        char esc[6] = {'\\'};
        size_t len = 1, n = *s == '\\' ? 1 : mf_esc_char(s, esc, &len);
        fwrite(esc, 1, n, out);
        s += len;
    }
}

/* ---- JSON and HTML ----------------------------------------------------------------------- */

static void mf_json_escaped(FILE *out, const char *s, bool in_script)
{
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    const char *run = s; /* characters that need no escape go out together */
    while (*s) {
        uint32_t cp;
        size_t len = mf_utf8_decode(s, &cp);
        if (len != 0 && cp != '"' && cp != '\\' && !mf_is_control(cp) &&
            !(in_script && (cp == '<' || cp == '>' || cp == '&'))) {
            s += len;
            continue;
        }
        fwrite(run, 1, (size_t)(s - run), out);
        if (len == 0) {
            fputs(in_script ? "\\ufffd" : "\xef\xbf\xbd", out); /* U+FFFD REPLACEMENT CHARACTER */
            s++;
        } else {
            if (cp == '"' || cp == '\\')
                fprintf(out, "\\%c", (char)cp);
            else if (cp == '\n' && !in_script)
                fputs("\\n", out);
            else if (cp == '\t' && !in_script)
                fputs("\\t", out);
            else
                fprintf(out, "\\u%04x", (unsigned)cp);
            s += len;
        }
        run = s;
    }
    fwrite(run, 1, (size_t)(s - run), out);
    fputc('"', out);
}

void mf_json_str(FILE *out, const char *s)
{
    mf_json_escaped(out, s, false);
}

void mf_json_str_in_script(FILE *out, const char *s)
{
    mf_json_escaped(out, s, true);
}

void mf_html_text(FILE *out, const char *text)
{
    for (const char *s = text; *s;) {
        uint32_t cp;
        size_t n = mf_utf8_decode(s, &cp);
        if (n == 0) {
            fputs("\xef\xbf\xbd", out);
            s++;
            continue;
        }
        switch (cp) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default:
            if (mf_is_control(cp))
                fputc(' ', out);
            else
                fwrite(s, 1, n, out);
        }
        s += n;
    }
}

/* ---- CSV --------------------------------------------------------------------------------- */

void mf_text_add(struct mf_text *t, const char *s, size_t len)
{
    if (t->n + len + 1 > t->cap) {
        t->cap = (t->n + len + 1) * 2;
        t->s = mf_xrealloc(t->s, t->cap);
    }
    memcpy(t->s + t->n, s, len);
    t->n += len;
    t->s[t->n] = '\0';
}

void mf_csv_encode(struct mf_text *t, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *first = s;
    mf_text_add(t, "", 0);
    while (*s) {
        uint32_t cp;
        size_t len = mf_utf8_decode(s, &cp);
        if (len == 0 || mf_is_control(cp) || *s == '%' || *s == ';' ||
            (s == first && strchr("=+-@", *s))) {
            for (size_t i = 0; i < (len ? len : 1); i++, s++) {
                unsigned char c = (unsigned char)*s;
                char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
                mf_text_add(t, esc, 3);
            }
        } else {
            mf_text_add(t, s, len);
            s += len;
        }
    }
}

bool mf_csv_needs_quotes(const char *s)
{
    return strpbrk(s, ",\"\r\n") != NULL;
}

void mf_csv_quote(struct mf_text *t, const char *s)
{
    mf_text_add(t, "", 0);
    for (const char *q; (q = strchr(s, '"')); s = q + 1) {
        mf_text_add(t, s, (size_t)(q + 1 - s));
        mf_text_add(t, "\"", 1); /* doubled */
    }
    mf_text_add(t, s, strlen(s));
}

bool mf_locale_is_utf8(void)
{
    /* The user's locale, looked at without setlocale (see mf_char_width). */
    locale_t loc = newlocale(LC_CTYPE_MASK, "", (locale_t)0);
    if (!loc)
        return false;
    const char *cs = nl_langinfo_l(CODESET, loc);
    bool utf8 = cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
    freelocale(loc);
    return utf8;
}
