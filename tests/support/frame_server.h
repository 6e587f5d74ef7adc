/* The server side of a fake coordinator connection: reads frames from a
 * client's socket as they come, whole or cut anywhere, and hands each
 * one's request id to the test's answer. */
#ifndef C10D_TEST_FRAME_SERVER_H
#define C10D_TEST_FRAME_SERVER_H

#include <stdatomic.h>
#include <stdint.h>

/* Writes the answer to request id on fd; non-zero ends the connection. */
typedef int (*frame_answer_fn)(int fd, uint64_t id, void *arg);

/* Serves fd until the client closes it, answer fails, or *stop is set
 * (looked at every 20 ms). Does not close fd. */
void frame_server_serve(int fd, atomic_int *stop, frame_answer_fn answer, void *arg);

#endif
