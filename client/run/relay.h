/* c10d-run's output relay: one rank's stdout or stderr through a pipe,
 * out again on the launcher's own, each line whole and prefixed with the
 * rank ("[rank3]:", torchrun's --tee prefix), and copied as it came to a
 * log file (--log-dir). */
#ifndef C10D_RUN_RELAY_H
#define C10D_RUN_RELAY_H

#include <stddef.h>

/* A line longer than this goes out in pieces of this size, each ended. */
#define RELAY_LINE_MAX 8192

typedef struct relay {
    int fd;       /* the pipe's read end (non-blocking); -1 once closed */
    int child_fd; /* its write end, for the rank's dup2; -1 once closed here */
    int dst;      /* where lines go: STDOUT_FILENO or STDERR_FILENO */
    int log;      /* the log file, -1 for none */
    const char *prefix; /* "" for none; owned by the caller, outlives the relay */
    size_t len;   /* bytes of a line not yet ended */
    char line[RELAY_LINE_MAX];
} relay;

/* A pipe for the rank's dst (and log_path, truncated, when not NULL).
 * 0, or -1 after saying why. */
int relay_open(relay *r, int dst, const char *prefix, const char *log_path);

/* Reads what the pipe has now, passing on each ended line. 1 at end of
 * file (the relay is then closed), else 0. */
int relay_read(relay *r);

/* Passes on a line not yet ended, ending it, and closes the relay.
 * Safe on a closed relay. */
void relay_close(relay *r);

#endif
