/* UTF-8 as every part shows a name to a person: the one decoder, the characters no output
 * shows as they are, and a character's escape for a terminal. The recorder's warnings, the
 * launcher's lines and mf_print's text share it, so that a name (a path, an environment
 * variable's value, a function's) reads the same in each and none can move a terminal's
 * cursor, write its clipboard (OSC 52) or hide a link (OSC 8). Header-only, and nothing
 * allocated: the recorder escapes its warnings with it. */
#ifndef MF_UTF8_H
#define MF_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The length (1..4) of the valid UTF-8 character s starts with, its code point in *cp; 1 for
 * the terminating NUL; 0 if the bytes there are not one: a stray continuation byte, an
 * overlong form, a surrogate, past U+10FFFF, or cut short (by the NUL too: nothing past a
 * byte that does not continue the character is read). Inline: every escaper calls it for
 * each character. */
static inline size_t mf_utf8_decode(const char *str, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xc2) /* a continuation byte, or the start of an overlong form */
        return 0;
    if (s[0] < 0xe0) {
        if ((s[1] & 0xc0) != 0x80)
            return 0;
        *cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
        return 2;
    }
    if (s[0] < 0xf0) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))
            return 0; /* overlong, or a surrogate */
        *cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
        return 3;
    }
    if (s[0] < 0xf5) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
            return 0; /* overlong, or past U+10FFFF */
        *cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
              (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
        return 4;
    }
    return 0;
}

/* The characters no output shows as they are: C0, DEL, C1, and U+2028 and U+2029, which
 * JavaScript and some readers take for line breaks. */
static inline bool mf_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x2028 || cp == 0x2029;
}

/* The character at s (NUL-terminated, s[0] not NUL) as a terminal may show it, into out (at
 * most 6 bytes, no NUL): a byte that is not UTF-8 and a C0 control or DEL as \xNN, a C1
 * control, U+2028 and U+2029 as \uNNNN, a backslash as \\, anything else as it is. Returns
 * the length written; *len, the bytes of s it stands for. */
static inline size_t mf_esc_char(const char *s, char out[6], size_t *len)
{
    static const char hex[] = "0123456789abcdef";
    uint32_t cp;
    size_t n = mf_utf8_decode(s, &cp);
    if (n == 0 || (n == 1 && mf_is_control(cp))) {
        unsigned char b = (unsigned char)s[0];
        memcpy(out, "\\x", 2);
        out[2] = hex[b >> 4];
        out[3] = hex[b & 15];
        *len = 1;
        return 4;
    }
    *len = n;
    if (mf_is_control(cp)) {
        memcpy(out, "\\u", 2);
        for (int i = 0; i < 4; i++)
            out[2 + i] = hex[(cp >> (12 - 4 * i)) & 15];
        return 6;
    }
    if (cp == '\\') {
        memcpy(out, "\\\\", 2);
        return 2;
    }
    memcpy(out, s, n);
    return n;
}

/* s (NUL-terminated) into o as mf_esc_char shows each character, with no NUL after it; o has
 * room for 4 bytes a byte of s. Returns where it ends. */
static inline char *mf_esc_to(char *o, const char *s)
{
    while (*s) {
        if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f && *s != '\\') {
            *o++ = *s++; /* the common case */
            continue;
        }
        size_t len;
        o += mf_esc_char(s, o, &len);
        s += len;
    }
    return o;
}

#endif
