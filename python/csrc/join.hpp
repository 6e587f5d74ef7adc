// Uneven inputs: c10d_coord.join() over the C library's join (c10d/join.h)
// on a coord process group, and the ranks still active in it. The Python
// side (python/c10d_coord) syncs DDP modules around these.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace c10d_coord {

// This rank enters a join region of pg (c10d_join_begin).
void join_begin(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, bool throw_early,
                bool divide_initial);
// This rank is out of inputs (c10d_join_end): returns once every rank
// is, with the rank that joined last.
int join_end(const c10::intrusive_ptr<c10d::ProcessGroup> &pg);
// How many ranks contributed data to this rank's last collective on pg.
int active_ranks(const c10::intrusive_ptr<c10d::ProcessGroup> &pg);

} // namespace c10d_coord
