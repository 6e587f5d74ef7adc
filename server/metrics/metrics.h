/* The coordinator's Prometheus endpoint (--metrics-listen): GET /metrics
 * answers in the text exposition format 0.0.4, served by NNG's HTTP
 * server on its own threads. It reads the engine's atomics only
 * (counters.h, c10ds_engine.clients, the immutable ops table), never the
 * database: a scrape never waits for, or holds up, a batch.
 *
 * Above the engine, beside the network side: nothing beneath includes this. */
#ifndef C10DS_METRICS_H
#define C10DS_METRICS_H

#include <stddef.h>

typedef struct c10ds_engine c10ds_engine;
typedef struct c10ds_metrics c10ds_metrics;

/* Serves /metrics on url (http://HOST:PORT; port 0 picks one) for e,
 * whose replica role ("single", "leader" or "follower") is fixed for the
 * process. The URL actually bound goes into bound (n bytes). NULL on
 * failure, why in c10ds_failure(). e must outlive c10ds_metrics_stop. */
c10ds_metrics *c10ds_metrics_start(const char *url, c10ds_engine *e, const char *role,
                                   char *bound, size_t n);
/* Stops serving and frees m; NULL is fine. */
void c10ds_metrics_stop(c10ds_metrics *m);

/* The exposition text (malloc'd, *len bytes), or NULL when out of memory:
 * exposition.c, for the endpoint and the tests. */
char *c10ds_metrics_render(c10ds_engine *e, const char *role, size_t *len);

#endif
