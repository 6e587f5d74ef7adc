// What c10d-ctl shows (c10d/jobs.h), read through a store's handle as
// Python lists of dicts, for scripts: StoreCoord.jobs, .health and .trace
// (module.cpp binds them to StoreCoord, store.hpp). Only reads, and needs
// nothing of torch.
#pragma once

#include <pybind11/pybind11.h>

#include <c10d/c10d.h>

#include <string>

namespace c10d_coord {

// Jobs on the coordinator (one, or all for ""): members and groups.
pybind11::list jobs_of(c10d_store *st, const std::string &job);
// Verification state per group: status, the finding's report, each rank's progress.
pybind11::list health_of(c10d_store *st, const std::string &job, const std::string &group);
// A rank's recent collectives, as runs of the same call.
pybind11::list trace_of(c10d_store *st, const std::string &job, const std::string &group, int rank,
                        unsigned limit);

} // namespace c10d_coord
