/* Coordinator logging: one line per event on stderr, with a timestamp and
 * level, so journald and plain terminals both read it. */
#ifndef C10DS_LOG_H
#define C10DS_LOG_H

#include <stdint.h>

typedef enum { C10DS_LOG_ERROR, C10DS_LOG_WARN, C10DS_LOG_INFO, C10DS_LOG_DEBUG } c10ds_log_level;

void c10ds_log_set_level(c10ds_log_level lvl);
/* Parses "error", "warn", "info" or "debug"; returns -1 if none. */
int c10ds_log_parse_level(const char *s);
int c10ds_log_enabled(c10ds_log_level lvl);
void c10ds_log(c10ds_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the log shows of a client: a short hash of its id ("client
 * #1a2b3c4d"), never the id, which is the credential a client speaks for
 * its ranks with (a log reader must not be able to pose as one). The same
 * client reads the same in every line and across restarts; its ranks are
 * named by job, rank, host and pid where the line knows them. */
uint32_t c10ds_client_tag(uint64_t client_id);

#define c10ds_error(...) c10ds_log(C10DS_LOG_ERROR, __VA_ARGS__)
#define c10ds_warn(...) c10ds_log(C10DS_LOG_WARN, __VA_ARGS__)
#define c10ds_info(...) c10ds_log(C10DS_LOG_INFO, __VA_ARGS__)
#define c10ds_debug(...)                                                                           \
    do {                                                                                           \
        if (c10ds_log_enabled(C10DS_LOG_DEBUG))                                                    \
            c10ds_log(C10DS_LOG_DEBUG, __VA_ARGS__);                                               \
    } while (0)

#endif
