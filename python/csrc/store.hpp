// StoreCoord: torch's c10d::Store on c10d-coord's (durable, on the
// coordinator): what coord:// rendezvous hands torch, so rank 0 hosts no
// TCPStore. Made from a URL it is the coordinator's whole store (for
// scripts); made for a run (run()) it is that run's store only
// (c10d_run_store: no other run or job sees its keys) and holds the run's
// world group until the backend's creator takes it as torch's default
// group (then destroy_process_group leaves the run, as with any backend);
// with another backend the store keeps it, so the ranks stay members of
// the run while torch uses it. What c10d-ctl shows of a store is in
// inspect.hpp.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <c10d/c10d.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace c10d_coord {

class ProcessGroupCoord; /* process_group.hpp */

class StoreCoord : public c10d::Store {
  public:
    // The coordinator's whole store, at url.
    StoreCoord(const std::string &url, std::chrono::milliseconds timeout);
    // Over a store handle of the library's (owned from here on).
    StoreCoord(c10d_store *s, std::chrono::milliseconds timeout);
    // The store of world's run, holding world until take_world.
    static c10::intrusive_ptr<StoreCoord> run(c10::intrusive_ptr<ProcessGroupCoord> world,
                                              std::chrono::milliseconds timeout);
    ~StoreCoord() override; /* after ProcessGroupCoord: it may drop the world */
    c10d_store *raw_store() const { return s_.get(); }
    // The run's world group, once: torch's default group is made from it.
    c10::intrusive_ptr<ProcessGroupCoord> take_world(int rank, int size);
    // The job whose run this store is ("" for a whole store).
    std::string job() const;

    void set(const std::string &key, const std::vector<uint8_t> &value) override;
    std::vector<uint8_t> get(const std::string &key) override;
    std::vector<uint8_t> compareSet(const std::string &key, const std::vector<uint8_t> &expected,
                                    const std::vector<uint8_t> &desired) override;
    int64_t add(const std::string &key, int64_t value) override;
    bool deleteKey(const std::string &key) override;
    bool check(const std::vector<std::string> &keys) override;
    int64_t getNumKeys() override;
    void wait(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &t) override;
#ifdef C10D_TORCH_STORE_CLONE
    // torch 2.x's: another StoreCoord on the same handle (the library's
    // handles are safe to share between threads); a run's world group
    // stays with the original.
    c10::intrusive_ptr<c10d::Store> clone() override;
#endif

  private:
    std::shared_ptr<c10d_store> s_; /* shared with clones; closed by the last */
    c10::intrusive_ptr<ProcessGroupCoord> world_; /* a run's world group, until taken */
    std::string job_;                             /* a run's job */
};

// For the backend's creator: the world group the rendezvous formed for
// this run, if `store` is a run's (once; null otherwise).
c10::intrusive_ptr<ProcessGroupCoord> formed_world(const c10::intrusive_ptr<c10d::Store> &store,
                                                   int rank, int size);

// The job of the run whose store `store` is ("" when it is not a run's).
std::string run_job(const c10::intrusive_ptr<c10d::Store> &store);

// The job name the library uses when none is given (C10D_JOB, torchrun's
// run id, ...).
std::string default_job();

} // namespace c10d_coord
