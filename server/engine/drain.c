/* The bounded drain on SIGTERM (drain.h). */
#include "engine/drain.h"

#include "c10d_time.h"
#include "log.h"

#include <stdio.h>

void c10ds_drain_begin(c10ds_drain *d, c10d_ms timeout_ms)
{
    /* Never 0: 0 means "still serving". */
    long long at = (long long)c10d_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    atomic_store(&d->deadline_ms, at > 0 ? at : 1);
}

int c10ds_drain_over(c10ds_drain *d)
{
    long long at = atomic_load_explicit(&d->deadline_ms, memory_order_relaxed);
    return at != 0 && c10d_now_ms() >= at;
}

void c10ds_drain_count(c10ds_drain *d, int op_case)
{
    int i = op_case > 0 && op_case < C10DS_DRAIN_OPS ? op_case : 0;
    atomic_fetch_add_explicit(&d->dropped[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->total, 1, memory_order_relaxed);
}

void c10ds_drain_report(c10ds_drain *d, const char *const *names, c10d_ms timeout_ms)
{
    unsigned long long total = atomic_load(&d->total);
    if (!total)
        return;
    char by_op[1024];
    size_t len = 0;
    by_op[0] = '\0';
    for (int i = 0; i < C10DS_DRAIN_OPS && len < sizeof by_op; i++) {
        unsigned long long n_op = atomic_load(&d->dropped[i]);
        if (!n_op)
            continue;
        const char *name = i && names[i] ? names[i] : "of other operations";
        int n = snprintf(by_op + len, sizeof by_op - len, "%s%llu %s", len ? ", " : "",
                         n_op, name);
        len += n > 0 ? (size_t)n : 0;
    }
    c10ds_warn("stopping, dropped %llu request(s) unanswered, queued past the --drain-timeout "
               "(%d ms) or come since: %s; their clients resend them to the next coordinator",
               total, timeout_ms, by_op);
}
