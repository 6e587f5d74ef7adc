#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char tls_errmsg[2048];

const char *c10d_strerror(c10d_status status)
{
    /* A switch with no default: the compiler flags a code without a
     * message (-Wswitch). */
    switch (status) {
#define C10D_STRERROR_CASE(name, value, msg)                                                       \
    case C10D_##name:                                                                              \
        return msg;
        C10D_ERROR_LIST(C10D_STRERROR_CASE)
#undef C10D_STRERROR_CASE
    }
    return "unknown status";
}

const char *c10d_status_name(c10d_status status)
{
    switch (status) {
#define C10D_NAME_CASE(name, value, msg)                                                           \
    case C10D_##name:                                                                              \
        return #name;
        C10D_ERROR_LIST(C10D_NAME_CASE)
#undef C10D_NAME_CASE
    }
    return "UNKNOWN";
}

const char *c10d_errmsg(void)
{
    return tls_errmsg;
}

c10d_status c10di_opts_version(const char *fn, const char *type, unsigned int got,
                               unsigned int known)
{
    if (got >= 1 && got <= known)
        return C10D_OK;
    if (got == 0)
        return c10di_error(C10D_EINVAL, "%s: the %s has version 0: start it from its _INIT "
                           "macro (C10D_..._OPTS_INIT), which sets the version", fn, type);
    return c10di_error(C10D_EINVAL, "%s: %s version %u is newer than this library knows (%u): "
                       "the program was built against a newer c10d/ header than the "
                       "libc10dclient it runs with", fn, type, got, known);
}

const char *c10di_timeout_from(int api_timeout)
{
    const char *env = getenv("C10D_TIMEOUT_MS");
    if (api_timeout != C10D_TIMEOUT_DEFAULT)
        return "the timeout it was given: opts.timeout_ms, or under PyTorch "
               "init_process_group's timeout= (C10D_TIMEOUT_MS, set, replaces it there)";
    return env && *env ? "C10D_TIMEOUT_MS" : "the default; C10D_TIMEOUT_MS sets another";
}

c10d_status c10di_timeout(const char *fn, const char *what, int timeout_ms, c10d_ms def,
                          int no_wait_ok, c10d_ms *out)
{
    if (timeout_ms > 0 || timeout_ms == C10D_TIMEOUT_DEFAULT) {
        *out = timeout_ms > 0 ? (c10d_ms)timeout_ms : def;
        return C10D_OK;
    }
    if (timeout_ms == C10D_NO_WAIT && no_wait_ok) {
        *out = C10D_MS_NO_WAIT;
        return C10D_OK;
    }
    if (timeout_ms == C10D_NO_WAIT)
        return c10di_error(C10D_EINVAL, "%s: %s is C10D_NO_WAIT, which does not apply here "
                           "(it waits for its peers): give milliseconds, or "
                           "C10D_TIMEOUT_DEFAULT", fn, what);
    return c10di_error(C10D_EINVAL, "%s: %s is %d: a timeout is milliseconds (> 0), "
                       "C10D_TIMEOUT_DEFAULT (0) or C10D_NO_WAIT (-1)", fn, what, timeout_ms);
}

c10d_status c10di_error(c10d_status st, const char *fmt, ...)
{
    /* Formatted aside first: callers may wrap the previous detail,
     * c10di_error(st, "...: %s", c10d_errmsg()). */
    char msg[sizeof tls_errmsg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(tls_errmsg, msg, sizeof msg);
    return st;
}
