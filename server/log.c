#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
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

uint32_t c10ds_client_tag(uint64_t client_id)
{
    /* FNV-1a over the id's bytes: 32 bits of 64 leave 2^32 ids for each
     * tag, so the id cannot be read back from it. */
    uint32_t h = 2166136261u;
    for (int i = 0; i < 8; i++)
        h = (h ^ (uint8_t)(client_id >> (8 * i))) * 16777619u;
    return h;
}

int c10ds_log_enabled(c10ds_log_level lvl)
{
    return lvl <= g_level;
}

/* Warnings and errors are limited per call site (its format string): at
 * most BURST a second; the rest are counted and the count is said with the
 * next line of that site that gets through. 6,000 refused tokens once made
 * 6,084 lines; a client must not be able to flood the log. Info and debug
 * lines are the operator's choice and are not limited. */
#define BURST 10
#define SITES 64

static struct site {
    const char *fmt;
    time_t second;
    unsigned count, dropped;
} sites[SITES];
static pthread_mutex_t sites_mu = PTHREAD_MUTEX_INITIALIZER;

/* Whether this line may go out, and how many of its site's were dropped
 * since the last that did (*dropped). */
static int admit(const char *fmt, time_t now, unsigned *dropped)
{
    *dropped = 0;
    pthread_mutex_lock(&sites_mu);
    /* Open addressing: a site keeps its slot; a full table reuses the
     * slot of the site quiet longest. */
    struct site *x = NULL, *oldest = NULL;
    for (size_t i = 0, h = ((uintptr_t)fmt >> 4) % SITES; i < SITES && !x; i++) {
        struct site *y = &sites[(h + i) % SITES];
        if (y->fmt == fmt || !y->fmt)
            x = y;
        else if (!oldest || y->second < oldest->second)
            oldest = y;
    }
    if (!x)
        x = oldest;
    if (x->fmt != fmt) {
        x->fmt = fmt;
        x->second = now;
        x->count = x->dropped = 0;
    }
    if (x->second != now) {
        x->second = now;
        x->count = 0;
    }
    int ok = ++x->count <= BURST;
    if (ok) {
        *dropped = x->dropped;
        x->dropped = 0;
    } else {
        x->dropped++;
    }
    pthread_mutex_unlock(&sites_mu);
    return ok;
}

void c10ds_log(c10ds_log_level lvl, const char *fmt, ...)
{
    if (lvl > g_level)
        return;
    unsigned dropped = 0;
    if (lvl <= C10DS_LOG_WARN && !admit(fmt, time(NULL), &dropped))
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
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (dropped && m >= 0 && (size_t)(n + m) < sizeof line)
        snprintf(line + n + m, sizeof line - (size_t)(n + m),
                 " (and %u more like it, not logged: at most %d a second)", dropped, BURST);
    /* One fputs per line so concurrent threads never interleave mid-line. */
    size_t len = strlen(line);
    if (len < sizeof line - 1) {
        line[len] = '\n';
        line[len + 1] = '\0';
    }
    fputs(line, stderr);
}
