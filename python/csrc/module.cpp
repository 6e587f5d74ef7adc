// c10d_coord._C: a torch.distributed backend over libc10dclient
// (docs/pytorch.md): the Python bindings of the process group
// (process_group.hpp), the store (store.hpp) with what c10d-ctl shows
// (inspect.hpp), and join (join.hpp). The only file that includes
// torch's pybind11 glue (torch/csrc/utils/pybind.h, as torch's own c10d
// bindings do: intrusive_ptr as a holder), and not <torch/extension.h>,
// which would add all of torch's C++ API and double this file's compile
// time; the other files include only the parts of torch they use.
//
// One source for PyTorch 1.13 (Debian 12's) and 2.x: the differences are
// few and marked C10D_TORCH_BACKEND (process_group.hpp), C10D_TORCH_STORE_CLONE, and CUDA
// parts C10D_TORCH_CUDA (all set by python/setup.py, which lists this
// extension's files).
#include <torch/csrc/utils/pybind.h>

#include "checked.hpp"
#include "inspect.hpp"
#include "join.hpp"
#include "process_group.hpp"
#include "releases.hpp"
#include "store.hpp"

using namespace c10d_coord;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    m.doc() = "c10d-coord's torch.distributed backend (docs/pytorch.md)";
#ifdef C10D_TORCH_CUDA
    m.attr("has_cuda") = true;
#else
    m.attr("has_cuda") = false;
#endif
    py::class_<ProcessGroupCoord, TorchBase, c10::intrusive_ptr<ProcessGroupCoord>>(
        m, "ProcessGroupCoord")
        .def(py::init<int, int, const std::string &, const std::string &, int>(),
             py::arg("rank"), py::arg("size"), py::arg("url") = "", py::arg("job") = "",
             py::arg("timeout_ms") = 0)
        .def_property_readonly("job", &ProcessGroupCoord::job,
                               "The job this group is part of on the coordinator");
#ifdef C10D_TORCH_BACKEND
    m.attr("has_checked") = true;
    py::class_<ProcessGroupChecked, c10d::Backend, c10::intrusive_ptr<ProcessGroupChecked>>(
        m, "ProcessGroupChecked")
        .def(py::init<c10::intrusive_ptr<ProcessGroupCoord>, c10::intrusive_ptr<c10d::Backend>,
                      c10::intrusive_ptr<c10d::Backend>>(),
             py::arg("coord"), py::arg("cpu") = nullptr, py::arg("cuda") = nullptr,
             "torch's backends for cpu and cuda (None: the coord group's own) under the "
             "coordinator's checks")
        .def_property_readonly("data_plane", &ProcessGroupChecked::data_plane)
        .def_property_readonly("coord", [](ProcessGroupChecked &g) {
            return c10::intrusive_ptr<ProcessGroupCoord>::reclaim_copy(g.coord());
        });
    m.def("await_releases",
          [](int budget_ms) { return await_releases(std::chrono::milliseconds(budget_ms)); },
          py::arg("budget_ms") = (int)kReleaseBudget.count(),
          py::call_guard<py::gil_scoped_release>(),
          "Waits until finished checked calls are released by torch's backends' threads "
          "(at exit, before the interpreter goes): true if none is left");
#else
    m.attr("has_checked") = false;
#endif
    py::class_<StoreCoord, c10d::Store, c10::intrusive_ptr<StoreCoord>>(m, "StoreCoord")
        .def(py::init([](const std::string &url, int timeout_ms) {
                 return c10::make_intrusive<StoreCoord>(url,
                                                        std::chrono::milliseconds(timeout_ms));
             }),
             py::arg("url"), py::arg("timeout_ms") = 300000)
        .def_static("run", [](c10::intrusive_ptr<ProcessGroupCoord> world, int timeout_ms) {
                        return StoreCoord::run(std::move(world),
                                               std::chrono::milliseconds(timeout_ms));
                    },
                    py::arg("world"), py::arg("timeout_ms") = 300000,
                    "The store of world's run (its keys only; removed when the run is over)")
        .def("jobs",
             [](StoreCoord &s, const std::string &job) { return jobs_of(s.raw_store(), job); },
             py::arg("job") = "",
             "Jobs on the coordinator: members (state, host, pid, reason, activity) and groups")
        .def("health",
             [](StoreCoord &s, const std::string &job, const std::string &group) {
                 return health_of(s.raw_store(), job, group);
             },
             py::arg("job") = "", py::arg("group") = "",
             "Verification state per group: status, the finding's report, each rank's progress")
        .def("trace",
             [](StoreCoord &s, const std::string &job, const std::string &group, int rank,
                unsigned limit) { return trace_of(s.raw_store(), job, group, rank, limit); },
             py::arg("job"), py::arg("group"), py::arg("rank"),
             py::arg("limit") = 50, "A rank's recent collectives, as runs of the same call");
    // None where the store is not a run's, or its world was taken.
    m.def("formed_world",
          [](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size) -> py::object {
              auto w = formed_world(store, rank, size);
              return w ? py::cast(w) : py::none();
          },
          py::arg("store"), py::arg("rank"), py::arg("size"));
    m.def("run_job", &run_job, py::arg("store"));
    m.def("coord_of",
          [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg) {
              return c10::intrusive_ptr<ProcessGroupCoord>::reclaim_copy(coord_of(pg, "group"));
          },
          py::arg("pg"), "The coord group behind torch's group (on torch 2.x, its Backend)");
    m.def("default_job", &default_job,
          "The job name the library uses when none is given (C10D_JOB, torchrun's run id, ...)");
    m.def("join_begin", &join_begin, py::arg("pg"), py::arg("throw_on_early_termination"),
          py::arg("divide_by_initial_world_size"));
    m.def("join_end", &join_end, py::arg("pg"));
    m.def("active_ranks", &active_ranks, py::arg("pg"));
}
