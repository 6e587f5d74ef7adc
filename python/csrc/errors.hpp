// How the backend reports the C library's errors to torch: one message
// format ("c10d_coord: WHAT: STATUS: the library's report") and one
// exception type for every file of the extension, so a user's script and
// torch's tests see the same words whichever part of the backend failed.
#pragma once

#include <c10d/c10d.h>

#include <exception>
#include <string>

namespace c10d_coord {

// Our report, as torch users see it: torch.distributed.DistBackendError
// (a RuntimeError) where torch has it (2.1+), else a RuntimeError, with
// c10d's message.
std::exception_ptr backend_error(const std::string &msg);

// "c10d_coord: allreduce: EDESYNC: <the library's report>". A timeout
// says "Timed out" first, as gloo's do ("Timed out waiting 1000ms for
// recv operation"), which torch's tests and users' scripts look for.
std::string report(const std::string &what, c10d_status st, const char *msg);
// The same with the calling thread's c10d_errmsg().
std::string report(const char *what, c10d_status st);

// Throws backend_error(report(what, st)).
[[noreturn]] void fail(const char *what, c10d_status st);
// fail() unless st is C10D_OK.
void check(const char *what, c10d_status st);

} // namespace c10d_coord
