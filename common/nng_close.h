/* Closing an NNG socket without hanging the process.
 *
 * NNG 1.5.2 (Debian 12's) can deadlock inside nng_close() when pipes are
 * being torn down while it runs (nanomsg/nng#1543, #1813; fixed upstream
 * after 1.5.2). We saw it in about one SIGTERM in ten under load. Neither
 * a coordinator that is shutting down nor a training process closing its
 * store may hang on it, so the close runs on a helper thread and the
 * caller waits a bounded time. */
#ifndef C10D_COMMON_NNG_CLOSE_H
#define C10D_COMMON_NNG_CLOSE_H

#include <nng/nng.h>

/* Closes sock, waiting at most timeout_ms. Returns 0 when the close
 * finished; -1 when it did not, in which case the helper thread keeps
 * trying and the caller must not free anything NNG callbacks of this
 * socket may still touch. */
int c10dc_nng_close_bounded(nng_socket sock, int timeout_ms);

#endif
