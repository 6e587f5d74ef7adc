// StoreCoord.jobs, .health and .trace (inspect.hpp): the library's blocks
// copied into Python objects, read without the GIL.
#include "inspect.hpp"

#include "errors.hpp"

#include <pybind11/stl.h>

#include <c10d/c10d.h>

#include <vector>

namespace py = pybind11;

namespace c10d_coord {
namespace {

const char *opt(const std::string &s)
{
    return s.empty() ? nullptr : s.c_str();
}

} // namespace

py::list jobs_of(c10d_store *st, const std::string &job)
{
    c10d_job_info *jobs = nullptr;
    size_t n = 0;
    c10d_status rc;
    {
        py::gil_scoped_release nogil;
        rc = c10d_store_jobs(st, opt(job), &jobs, &n);
    }
    check("jobs", rc);
    py::list out;
    for (size_t i = 0; i < n; i++) {
        const c10d_job_info &j = jobs[i];
        py::list members, groups;
        for (size_t k = 0; k < j.n_members; k++) {
            const c10d_member_info &m = j.members[k];
            py::dict d;
            d["rank"] = m.rank;
            d["state"] = c10d_member_state_name(m.state);
            d["host"] = m.host;
            d["pid"] = m.pid;
            d["reason"] = m.reason;
            d["activity"] = m.activity;
            members.append(d);
        }
        for (size_t k = 0; k < j.n_groups; k++) {
            const c10d_group_info &g = j.groups[k];
            py::dict d;
            d["name"] = g.name;
            d["size"] = g.size;
            d["ranks"] = std::vector<int>(g.ranks, g.ranks + g.size);
            d["formed"] = g.formed != 0;
            groups.append(d);
        }
        py::dict d;
        d["job"] = j.job;
        d["generation"] = j.generation;
        d["world_size"] = j.world_size;
        d["formed"] = j.formed != 0;
        d["members"] = members;
        d["groups"] = groups;
        out.append(d);
    }
    c10d_free(jobs);
    return out;
}

py::list health_of(c10d_store *st, const std::string &job, const std::string &group)
{
    c10d_group_health *gs = nullptr;
    size_t n = 0;
    c10d_status rc;
    {
        py::gil_scoped_release nogil;
        rc = c10d_store_health(st, opt(job), opt(group), &gs, &n);
    }
    check("health", rc);
    py::list out;
    for (size_t i = 0; i < n; i++) {
        const c10d_group_health &g = gs[i];
        py::list ranks;
        for (size_t k = 0; k < g.n_ranks; k++) {
            py::dict r;
            r["rank"] = g.ranks[k].rank;
            r["global_rank"] = g.ranks[k].global_rank;
            r["entered"] = g.ranks[k].entered;
            r["completed"] = g.ranks[k].completed;
            r["last"] = g.ranks[k].last;
            ranks.append(r);
        }
        py::dict d;
        d["job"] = g.job;
        d["generation"] = g.generation;
        d["group"] = g.group;
        d["size"] = g.size;
        d["status"] = c10d_status_name(g.status);
        d["report"] = g.report;
        d["ranks"] = ranks;
        out.append(d);
    }
    c10d_free(gs);
    return out;
}

py::list trace_of(c10d_store *st, const std::string &job, const std::string &group, int rank,
                  unsigned limit)
{
    c10d_trace_row *rows = nullptr;
    size_t n = 0;
    c10d_status rc;
    {
        py::gil_scoped_release nogil;
        rc = c10d_store_trace(st, opt(job), opt(group), rank, limit, &rows, &n);
    }
    check("trace", rc);
    py::list out;
    for (size_t i = 0; i < n; i++) {
        py::dict d;
        d["first_seq"] = rows[i].first_seq;
        d["last_seq"] = rows[i].last_seq;
        d["what"] = rows[i].what;
        d["state"] = rows[i].state;
        out.append(d);
    }
    c10d_free(rows);
    return out;
}

} // namespace c10d_coord
