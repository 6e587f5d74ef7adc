#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static c10ds_log_level g_level = C10DS_LOG_INFO;
static const char *const g_names[] = {"error", "warn", "info", "debug"};

void c10ds_log_set_level(c10ds_log_level lvl)
{
    g_level = lvl;
}

int c10ds_log_parse_level(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, g_names[i]) == 0)
            return i;
    return -1;
}

int c10ds_log_enabled(c10ds_log_level lvl)
{
    return lvl <= g_level;
}

void c10ds_log(c10ds_log_level lvl, const char *fmt, ...)
{
    if (lvl > g_level)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%d %H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03ld c10d-coord %s: ",
                  ts.tv_nsec / 1000000, g_names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fputs per line so concurrent threads never interleave mid-line. */
    size_t len = strlen(line);
    if (len < sizeof line - 1) {
        line[len] = '\n';
        line[len + 1] = '\0';
    }
    fputs(line, stderr);
}
