// The backend's error reports (errors.hpp). Kept apart from torch's
// tensor headers: this file compiles in a second.
#include "errors.hpp"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <stdexcept>

namespace c10d_coord {

std::exception_ptr backend_error(const std::string &msg)
{
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
    return std::make_exception_ptr(
        c10::DistBackendError(c10::SourceLocation{__func__, __FILE__, __LINE__}, msg));
#else
    return std::make_exception_ptr(std::runtime_error(msg));
#endif
}

std::string report(const std::string &what, c10d_status st, const char *msg)
{
    std::string name = c10d_status_name(st);
    if (st == C10D_ETIMEDOUT)
        name = "Timed out (" + name + ")";
    return "c10d_coord: " + what + ": " + name + ": " + msg;
}

std::string report(const char *what, c10d_status st)
{
    return report(what, st, c10d_errmsg());
}

[[noreturn]] void fail(const char *what, c10d_status st)
{
    std::rethrow_exception(backend_error(report(what, st)));
}

void check(const char *what, c10d_status st)
{
    if (st != C10D_OK)
        fail(what, st);
}

} // namespace c10d_coord
