// join_begin, join_end and active_ranks (join.hpp): each refuses a group
// that is not a coord one.
#include "join.hpp"

#include "errors.hpp"
#include "process_group.hpp"

#include <pybind11/gil.h>

namespace c10d_coord {

void join_begin(const c10::intrusive_ptr<c10d::ProcessGroup> &pg, bool throw_early,
                bool divide_initial)
{
    auto *p = coord_of(pg, "join");
    p->in_order(); /* the calls before the region reach the library before it */
    c10d_join_opts o = C10D_JOIN_OPTS_INIT;
    o.throw_on_early_termination = throw_early;
    o.divide_by_initial_world_size = divide_initial;
    c10d_status st;
    {
        pybind11::gil_scoped_release nogil;
        st = c10d_join_begin(p->pg(), &o);
    }
    check("join_begin", st);
}

int join_end(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    auto *p = coord_of(pg, "join");
    p->in_order();
    int last = -1;
    c10d_status st;
    {
        pybind11::gil_scoped_release nogil;
        st = c10d_join_end(p->pg(), &last);
    }
    check("join_end", st);
    return last;
}

int active_ranks(const c10::intrusive_ptr<c10d::ProcessGroup> &pg)
{
    auto *p = coord_of(pg, "active_ranks");
    p->in_order(); /* "this rank's last collective" is the last one made */
    return c10d_active_ranks(p->pg());
}

} // namespace c10d_coord
