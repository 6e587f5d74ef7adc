/* Parked requests: gets and waits for keys that do not exist yet.
 *
 * A parked request waits for one key (the first it found missing) and is
 * listed under that key and in a heap ordered by deadline. A write to the
 * key moves every request waiting for it to the ready list, where the engine
 * runs it again: it either completes or parks on its next missing key. So a
 * write costs one hash lookup, however many requests are parked. */
#ifndef C10DS_WAITERS_H
#define C10DS_WAITERS_H

#include <stddef.h>
#include <stdint.h>

typedef struct c10ds_request c10ds_request;
typedef struct c10ds_waiters c10ds_waiters;

c10ds_waiters *c10ds_waiters_new(void);
/* Frees the index; parked requests are handed to drop() first. */
void c10ds_waiters_free(c10ds_waiters *w, void (*drop)(c10ds_request *));

/* Parks r on key until r->deadline_ms. Returns -1 when out of memory. */
int c10ds_waiters_park(c10ds_waiters *w, c10ds_request *r, const char *key);
/* Moves the requests waiting on key to the ready list. */
void c10ds_waiters_touch(c10ds_waiters *w, const char *key);
/* Takes the ready list (linked through ->next), or NULL. */
c10ds_request *c10ds_waiters_take_ready(c10ds_waiters *w);
/* Unparks and returns one request whose deadline is <= now, or NULL. */
c10ds_request *c10ds_waiters_pop_expired(c10ds_waiters *w, int64_t now_ms);
/* Unparks the requests that came on connection pipe (it closed: nobody
 * will read their replies) and hands each to drop(). */
void c10ds_waiters_drop_pipe(c10ds_waiters *w, uint32_t pipe, void (*drop)(c10ds_request *));
/* Unparks every parked request for which pick(r, arg) is true; returns
 * them chained through ->next. */
c10ds_request *c10ds_waiters_take_if(c10ds_waiters *w, int (*pick)(const c10ds_request *, void *),
                                     void *arg);
/* Moves the deadline of every parked request for which keep(r, arg) is
 * false ms later: the coordinator stalled for ms, and a timeout counts
 * only the time it could hear (engine.c). */
void c10ds_waiters_postpone(c10ds_waiters *w, int64_t ms,
                            int (*keep)(const c10ds_request *, void *), void *arg);
/* The earliest deadline, or INT64_MAX when nothing is parked. */
int64_t c10ds_waiters_next_deadline(const c10ds_waiters *w);
size_t c10ds_waiters_count(const c10ds_waiters *w);

#endif
