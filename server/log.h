/* Coordinator logging: one line per event on stderr, with a timestamp and
 * level, so journald and plain terminals both read it. */
#ifndef C10DS_LOG_H
#define C10DS_LOG_H

typedef enum { C10DS_LOG_ERROR, C10DS_LOG_WARN, C10DS_LOG_INFO, C10DS_LOG_DEBUG } c10ds_log_level;

void c10ds_log_set_level(c10ds_log_level lvl);
/* Parses "error", "warn", "info" or "debug"; returns -1 if none. */
int c10ds_log_parse_level(const char *s);
int c10ds_log_enabled(c10ds_log_level lvl);
void c10ds_log(c10ds_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define c10ds_error(...) c10ds_log(C10DS_LOG_ERROR, __VA_ARGS__)
#define c10ds_warn(...) c10ds_log(C10DS_LOG_WARN, __VA_ARGS__)
#define c10ds_info(...) c10ds_log(C10DS_LOG_INFO, __VA_ARGS__)
#define c10ds_debug(...)                                                                           \
    do {                                                                                           \
        if (c10ds_log_enabled(C10DS_LOG_DEBUG))                                                    \
            c10ds_log(C10DS_LOG_DEBUG, __VA_ARGS__);                                               \
    } while (0)

#endif
