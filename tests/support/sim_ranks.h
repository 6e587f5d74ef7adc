/* Many simulated ranks against a real coordinator from one thread: plain
 * TCP connections to a tcp:// coordinator speaking the control plane's
 * framing (common/frame.h), all driven by one epoll loop. A thread per
 * simulated rank costs the load generator more CPU than the coordinator
 * spends (16,384 threads on 2 cores), which would measure the generator;
 * this keeps the generator's cost to packing and unpacking messages.
 *
 * A connection stands for a host: its ranks share it, as they share the
 * coordinator's view of their liveness (closing it is the host dying). */
#ifndef C10D_TEST_SIM_RANKS_H
#define C10D_TEST_SIM_RANKS_H

#include "c10d.pb-c.h"

#include <stdint.h>

typedef struct sim_loop sim_loop;
typedef struct sim_conn sim_conn;

/* Called once per reply, with the tag given to sim_send; rep is freed by
 * the loop after the call. rep is NULL when the connection broke. */
typedef void (*sim_on_reply)(sim_conn *c, void *tag, C10dpb__Reply *rep, void *arg);

sim_loop *sim_loop_new(sim_on_reply cb, void *arg);
void sim_loop_free(sim_loop *L); /* closes every connection still open */
/* A connection to url (tcp://host:port); NULL on failure. */
sim_conn *sim_connect(sim_loop *L, const char *url);
/* Queues req (its request id and client identity are filled in). 0 or -1. */
int sim_send(sim_conn *c, C10dpb__Request *req, void *tag);
/* The same with a chosen client id and request id (a client resending);
 * its reply comes with a NULL tag, or another request's if the id is one
 * sim_send gave out on this connection. */
int sim_send_as(sim_conn *c, C10dpb__Request *req, void *tag, uint64_t client_id,
                uint64_t request_id);
/* Closes the connection at once: to the coordinator, its ranks died. */
void sim_close(sim_conn *c);
/* Runs until done(arg) says 1 or deadline (monotonic ms) passes; returns
 * 0, or -1 at the deadline. */
int sim_run(sim_loop *L, int (*done)(void *arg), void *arg, int64_t deadline_ms);
/* Monotonic milliseconds (fractions kept). */
double sim_now_ms(void);

/* Requests parked on the coordinator at url (its status: watches, joins
 * and gets waiting), asked over a connection of its own; -1 on failure. */
long sim_parked(const char *url);

/* A scale benchmark's arguments: `[FLAG] [N...]`. *flag_on says whether
 * FLAG came first; sizes (at most 16) keep their defaults unless sizes are
 * given. Returns how many sizes. */
int sim_sizes(int argc, char **argv, const char *flag, int *flag_on, int *sizes, int n_default);

struct coord_proc;
/* Starts a coordinator for simulated worlds (--max-world-size 65536);
 * 0, or -1 after saying why. */
int sim_coord_start(struct coord_proc *c);

#endif
