/* The readiness loop: one thread per listener that tcp:// and ipc://
 * connections' read loops wait on between requests.
 *
 * Read through NNG, a request costs the coordinator two thread wake-ups
 * before any of our code runs: NNG's poller thread, which reads it, and
 * one of NNG's task threads, handed the receive's callback under NNG's one
 * task-queue lock. Here the kernel wakes this thread itself (epoll on the
 * connections' sockets, found by common/stream_fd.h), which reads the
 * request through NNG on its own thread (an aio with no callback, on a
 * socket with bytes waiting, completes inside nng_stream_recv) and goes
 * on with the connection's read loop. And the requests of every
 * connection that woke it together are handed to the engine as one batch
 * (c10ds_engine_gather_begin): one commit for all of them.
 *
 * Only a connection between requests waits here; one with part of a
 * request read waits through NNG, whose receive carries --frame-timeout.
 * Each registration is one-shot, and carries the read loop's reference:
 * the loop is only ever in one place. Closing a connection shuts its
 * socket down, which wakes this thread, whose read then fails and ends
 * the read loop as a receive's callback would. */
#include "net/listener_internal.h"

#include "busy_poll.h"
#include "config.h"

#include "engine/engine.h"
#include "log.h"
#include "stream_fd.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define EVENTS_AT_ONCE 64
/* Requests one connection hands on in one round. Those gathered run only
 * at the round's end, before any of their replies could pause the
 * connection for unread replies. A client pipelining gets of 1 MiB
 * without reading put 128 (its in-flight limit) in each batch, past
 * --max-reply-bytes; then every other such client's gets were refused
 * small, which left their sockets room for tens of thousands more, each
 * run (test_flood: 7,000-40,000 gets run instead of 52; a normal client's
 * 200 gets took 20 s behind them). 16 a turn still let four such clients
 * fill --max-reply-bytes. A rank has a handful in flight; group commit
 * comes from many connections, not from one's pipeline. */
#define C10DS_TURN_REQUESTS 4

struct c10ds_readiness {
    c10ds_listener *l;
    const c10ds_ready_ops *ops;
    c10dc_busy_poll bp; /* the loop's thread's own */
    int epfd;
    int stop_fd; /* an eventfd: written to stop the thread */
    nng_thread *thread;
    atomic_int stopping;
    c10ds_conn *turns, **turns_tail; /* connections with frames left for the next round */
};

/* Set on the loop's thread while it runs a round. */
static __thread int on_loop;

int c10ds_readiness_turn_over(const c10ds_conn *c)
{
    return on_loop && c->turn_requests >= C10DS_TURN_REQUESTS;
}

void c10ds_readiness_defer(c10ds_conn *c)
{
    c10ds_readiness *r = c->l->ready;
    c->next_turn = NULL;
    *r->turns_tail = c;
    r->turns_tail = &c->next_turn;
}

/* The next events: at once when connections have a turn waiting; else
 * after looking for up to the busy-poll window (common/busy_poll.h),
 * yielding the CPU between looks, and then asleep. */
static int next_events(c10ds_readiness *r, struct epoll_event *ev)
{
    if (r->turns)
        return epoll_wait(r->epfd, ev, EVENTS_AT_ONCE, 0);
    int64_t idle_from = 0;
    if (r->bp.max_ns) {
        idle_from = c10dc_busy_poll_now_ns();
        if (r->bp.window_ns) {
            int64_t until = idle_from + r->bp.window_ns;
            do {
                int n = epoll_wait(r->epfd, ev, EVENTS_AT_ONCE, 0);
                if (n != 0) {
                    if (n > 0) {
                        atomic_fetch_add(&r->l->engine->polled, 1);
                        c10dc_busy_poll_caught(&r->bp);
                    }
                    return n;
                }
                sched_yield();
            } while (c10dc_busy_poll_now_ns() < until);
            c10dc_busy_poll_missed(&r->bp);
        }
    }
    int n = epoll_wait(r->epfd, ev, EVENTS_AT_ONCE, -1);
    if (n > 0 && r->bp.max_ns)
        c10dc_busy_poll_slept(&r->bp, c10dc_busy_poll_now_ns() - idle_from);
    return n;
}

static void loop(void *arg)
{
    c10ds_readiness *r = arg;
    struct epoll_event ev[EVENTS_AT_ONCE];
    for (;;) {
        int n = next_events(r, ev);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            /* Not expected (a bad descriptor or argument); returning would
             * strand every connection waiting here, so try again. */
            if (atomic_load(&r->stopping))
                return;
            c10ds_error("the readiness loop's epoll_wait failed: %s; trying again",
                        strerror(errno));
            struct timespec pause = {0, 100 * 1000 * 1000};
            nanosleep(&pause, NULL);
            continue;
        }
        c10ds_engine_gather_begin(r->l->engine);
        on_loop = 1;
        c10ds_conn *turns = r->turns;
        r->turns = NULL;
        r->turns_tail = &r->turns;
        for (c10ds_conn *c = turns, *next; c; c = next) {
            next = c->next_turn;
            c->turn_requests = 0;
            r->ops->turn(c);
        }
        int stop = 0;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr)
                r->ops->readable(ev[i].data.ptr);
            else
                stop = 1;
        }
        on_loop = 0;
        c10ds_engine_gather_end(r->l->engine);
        if (stop && !r->turns)
            return;
    }
}

c10ds_readiness *c10ds_readiness_start(c10ds_listener *l, const c10ds_ready_ops *ops)
{
    c10ds_readiness *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->l = l;
    r->ops = ops;
    c10dc_busy_poll_init(&r->bp, l->cfg->busy_poll_us);
    r->turns_tail = &r->turns;
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    r->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (r->epfd < 0 || r->stop_fd < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->stop_fd, &ev) != 0 ||
        nng_thread_create(&r->thread, loop, r) != 0) {
        c10ds_warn("no readiness loop (%s): connections are read through NNG's threads",
                   strerror(errno));
        if (r->epfd >= 0)
            close(r->epfd);
        if (r->stop_fd >= 0)
            close(r->stop_fd);
        free(r);
        return NULL;
    }
    nng_thread_set_name(r->thread, "c10d:ready");
    return r;
}

void c10ds_readiness_stop(c10ds_readiness *r)
{
    if (!r)
        return;
    uint64_t one = 1;
    atomic_store(&r->stopping, 1);
    (void)!write(r->stop_fd, &one, sizeof one);
    nng_thread_destroy(r->thread); /* joins it */
    close(r->epfd);
    close(r->stop_fd);
    free(r);
}

int c10ds_readiness_arm(c10ds_conn *c)
{
    c10ds_readiness *r = c->l->ready;
    if (!r || c->fd < 0)
        return -1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
    if (epoll_ctl(r->epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        c10ds_debug("connection %u: epoll_ctl: %s; read through NNG from now on", c->id,
                    strerror(errno));
        c10ds_readiness_forget(c);
        return -1;
    }
    c->in_epoll = 1;
    return 0;
}

void c10ds_readiness_forget(c10ds_conn *c)
{
    if (c->in_epoll && c->l->ready)
        epoll_ctl(c->l->ready->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->in_epoll = 0;
    c10dc_stream_fd_release(c->fd);
    c->fd = -1;
}
