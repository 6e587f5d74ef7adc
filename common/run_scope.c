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
