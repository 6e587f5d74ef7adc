/* The socket beneath an NNG byte stream (tcp://, ipc://), so that a
 * thread can sleep in poll(2) or epoll on it and be woken by the kernel
 * itself when bytes arrive, then read them through NNG on its own thread.
 * Waiting through NNG instead means NNG's poller thread is woken, reads,
 * and hands the bytes to a waiter or to a task thread for a callback: a
 * second thread switch for every message. The client's reader
 * waits so (client/src/conn/conn_reader.c), and so does the coordinator's
 * readiness loop (server/net/readiness.c).
 *
 * NNG 1.5 offers no way to get a stream's descriptor, so it is found by
 * its addresses among this process's descriptors not yet claimed: a TCP
 * connection by its two ends, which no other socket has; an ipc:// one by
 * its path, when exactly one connected unclaimed socket not shut down has
 * it as its own name or its peer's (the client dials ipc:// one at a time,
 * so that two of its own are never both new). A new socket takes the
 * lowest free number, so the numbers up to a little past the highest
 * claimed are looked at first, claimed ones without a system call;
 * /proc/self/fd is listed only when nothing was found there. */
#ifndef C10DC_STREAM_FD_H
#define C10DC_STREAM_FD_H

#include <nng/nng.h>

/* s's socket, claimed until c10dc_stream_fd_release; -1 when it cannot be
 * told apart (TLS, an address NNG does not give, ipc:// connections to
 * the same path made at the same time, no /proc). */
int c10dc_stream_fd(nng_stream *s);
/* Gives up a claim (fd -1: nothing). Call it before the stream is freed:
 * then the descriptor's number may be reused. */
void c10dc_stream_fd_release(int fd);

#endif
