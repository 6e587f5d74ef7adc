#include "run_scope.h"

#include <stdio.h>
#include <string.h>

size_t c10d_run_scope(char *buf, size_t len, const char *job, uint64_t generation)
{
    size_t n = strlen(C10D_RUN_SCOPE_ROOT);
    if (len <= n)
        return 0;
    memcpy(buf, C10D_RUN_SCOPE_ROOT, n);
    for (const char *c = job; *c; c++) {
        const char *esc = *c == '%' ? "%25" : *c == '/' ? "%2F" : NULL;
        size_t k = esc ? 3 : 1;
        if (n + k >= len)
            return 0;
        memcpy(buf + n, esc ? esc : c, k);
        n += k;
    }
    int w = snprintf(buf + n, len - n, "/%llu/", (unsigned long long)generation);
    if (w < 0 || (size_t)w >= len - n)
        return 0;
    return n + (size_t)w;
}

int c10d_run_scope_parse(const char *key, char *job, size_t cap, uint64_t *generation)
{
    size_t root = strlen(C10D_RUN_SCOPE_ROOT), n = 0;
    if (!key || strncmp(key, C10D_RUN_SCOPE_ROOT, root) != 0 || cap == 0)
        return 0;
    const char *c = key + root, *slash = strchr(c, '/');
    if (!slash || slash == c)
        return 0;
    /* the generation: decimal digits, then '/' */
    const char *g = slash + 1;
    uint64_t gen = 0;
    if (*g < '0' || *g > '9')
        return 0;
    for (; *g >= '0' && *g <= '9'; g++) {
        if (gen > (UINT64_MAX - 9) / 10)
            return 0;
        gen = gen * 10 + (uint64_t)(*g - '0');
    }
    if (*g != '/')
        return 0;
    for (; c < slash; c++) {
        char ch = *c;
        if (ch == '%' && c + 2 < slash && c[1] == '2' && (c[2] == '5' || c[2] == 'F')) {
            ch = c[2] == '5' ? '%' : '/';
            c += 2;
        }
        if (n + 1 < cap)
            job[n++] = ch;
    }
    job[n] = '\0';
    *generation = gen;
    return 1;
}
