/*
 * json.c - writing JSON strings (json.h).
 */
#include "json.h"

size_t ga_json_utf8_len(const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        if (s[0] == 0xe0)
            lo = 0xa0; /* overlong below */
        else if (s[0] == 0xed)
            hi = 0x9f; /* surrogates above */
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        if (s[0] == 0xf0)
            lo = 0x90; /* overlong below */
        else if (s[0] == 0xf4)
            hi = 0x8f; /* past U+10FFFF above */
    } else {
        return 0; /* ASCII, a continuation byte, C0, C1, F5-FF */
    }
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0; /* the string's end (0) included */
    return len;
}

void ga_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') {
            fprintf(out, "\\%c", *c);
        } else if (*c < 0x20 || *c == 0x7f) {
            fprintf(out, "\\u%04x", *c);
        } else if (*c >= 0x80) {
            /* JSON is UTF-8: a byte of another encoding (a file name in
             * Latin-1, say) made the whole document unreadable. */
            size_t len = ga_json_utf8_len((const char *)c);
            if (len) {
                fwrite(c, 1, len, out);
                c += len - 1;
            } else {
                fputs("\\ufffd", out);
            }
        } else {
            fputc(*c, out);
        }
    }
    fputc('"', out);
}
