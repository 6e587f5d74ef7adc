/* The socket beneath an NNG byte stream (tcp://, ipc://), so that a
 * thread waiting for its reply can sleep in poll(2) on it and be woken by
 * the kernel itself when the reply arrives. Waiting through NNG instead
 * means NNG's poller thread is woken, reads, and wakes the waiter: two
 * thread switches a reply where one does (issue 26; conn_stream.c).
 *
 * NNG 1.5 offers no way to get a stream's descriptor, so it is found by
 * its addresses: a TCP connection by its two ends, which no other socket
 * has; an ipc:// one by the path it is connected to, when exactly one
 * socket of this process not already claimed is. Polling a wrong socket
 * would cost speed, never correctness: conn_stream.c polls only for a
 * bounded slice and then waits through NNG as before, and reads only
 * through NNG. */
#ifndef C10DI_STREAM_FD_H
#define C10DI_STREAM_FD_H

#include <nng/nng.h>

/* s's socket, claimed until c10di_stream_fd_release; -1 when it cannot be
 * told apart (TLS, an address NNG does not give, ipc:// connections to
 * the same path made at the same time, no /proc). */
int c10di_stream_fd(nng_stream *s);
/* Gives up a claim (fd -1: nothing). Call it before the stream is freed:
 * then the descriptor number may be reused. */
void c10di_stream_fd_release(int fd);

#endif
