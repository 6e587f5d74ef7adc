#include "json.h"

#include <stdint.h>

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    unsigned char c = u[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > n || (len == 2 && c < 0xc2))
        return 0;
    for (size_t j = 1; j < len; j++)
        if ((u[j] & 0xc0) != 0x80)
            return 0;
    return len;
}

void json_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (c < 0x20) {
                fprintf(f, "\\u%04x", c);
            } else if (c < 0x80) {
                fputc(c, f);
            } else {
                /* A whole UTF-8 sequence as it is; a byte that starts none
                 * (a key is bytes) as \u00XX, so the output is always
                 * valid JSON. Such a string reads back as the Latin-1 of
                 * its bytes: keys have key_base64 too where it matters. */
                size_t len = utf8_len(s + i, n - i);
                if (len) {
                    fwrite(s + i, 1, len, f);
                    i += len - 1;
                } else {
                    fprintf(f, "\\u%04x", c);
                }
            }
        }
    }
    fputc('"', f);
}

int json_is_text(const void *v, size_t n)
{
    const unsigned char *p = v;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + len > n || (c < 0x20 && c != '\n' && c != '\t' && c != '\r'))
            return 0;
        for (size_t j = 1; j < len; j++)
            if ((p[i + j] & 0xc0) != 0x80)
                return 0;
        i += len;
    }
    return 1;
}

void json_base64(FILE *f, const void *v, size_t n)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = v;
    fputc('"', f);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            x |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            x |= p[i + 2];
        fputc(tbl[(x >> 18) & 63], f);
        fputc(tbl[(x >> 12) & 63], f);
        fputc(i + 1 < n ? tbl[(x >> 6) & 63] : '=', f);
        fputc(i + 2 < n ? tbl[x & 63] : '=', f);
    }
    fputc('"', f);
}

void json_value_field(FILE *f, const char *name, const void *v, size_t n)
{
    if (json_is_text(v, n)) {
        fprintf(f, "\"%s\":", name);
        json_string(f, v, n);
    } else {
        fprintf(f, "\"%s_base64\":", name);
        json_base64(f, v, n);
    }
}
