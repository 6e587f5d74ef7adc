/* The coordinator's error carrier (failure.h). */
#include "failure.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char detail[C10DS_FAILURE_MAX];

static void record(const char *fmt, va_list ap, const char *tail)
{
    /* formatted aside first: an argument may be detail itself */
    char buf[C10DS_FAILURE_MAX];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) /* an encoding error: buf's content is not defined */
        n = snprintf(buf, sizeof buf, "(a detail that could not be formatted)");
    if (tail && (size_t)n < sizeof buf)
        snprintf(buf + n, sizeof buf - (size_t)n, ": %s", tail);
    memcpy(detail, buf, strlen(buf) + 1);
}

c10d_status c10ds_failed(c10d_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap, NULL);
    va_end(ap);
    return st;
}

c10d_status c10ds_failed_db(sqlite3 *h, c10d_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(fmt, ap, h ? sqlite3_errmsg(h) : "out of memory");
    va_end(ap);
    return st;
}

const char *c10ds_failure(void)
{
    return detail;
}
