// StoreCoord and the run behind a rendezvous's store (store.hpp).
#include "store.hpp"

#include "errors.hpp"
#include "process_group.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <pybind11/gil.h>

#include <stdexcept>

namespace c10d_coord {
namespace {

/* Keys are C strings on c10d-coord: one with a NUL byte would be cut
 * at it (setting "a\0b" overwrote "a"), so it is refused. */
const char *k(const std::string &key)
{
    if (key.find('\0') != std::string::npos)
        throw std::invalid_argument("c10d_coord: store key contains a NUL byte (keys are C "
                                    "strings on c10d-coord; NUL is refused)");
    return key.c_str();
}

/* torch's 0 (kNoTimeout) and unset (negative) timeouts are the store's
 * own here (C10D_TIMEOUT_DEFAULT: c10d/common.h) */
int ms(std::chrono::milliseconds t)
{
    return t.count() <= 0 || t.count() > INT32_MAX ? C10D_TIMEOUT_DEFAULT : (int)t.count();
}

std::vector<const char *> cstrs(const std::vector<std::string> &keys)
{
    std::vector<const char *> out;
    for (const auto &x : keys)
        out.push_back(k(x));
    return out;
}

// The StoreCoord under torch's PrefixStores (torch wraps the rendezvous's
// store in one per group), or null when the store is not ours (file://,
// tcp:// rendezvous).
StoreCoord *run_store_under(const c10::intrusive_ptr<c10d::Store> &store)
{
    c10d::Store *s = store.get();
    while (auto *p = dynamic_cast<c10d::PrefixStore *>(s))
        s = p->getUnderlyingStore().get();
    return dynamic_cast<StoreCoord *>(s);
}

} // namespace

StoreCoord::StoreCoord(const std::string &url, std::chrono::milliseconds timeout)
    : c10d::Store(timeout)
{
    c10d_status st;
    c10d_store *s = nullptr;
    {
        pybind11::gil_scoped_release nogil;
        st = c10d_store_connect(&s, url.c_str(), nullptr);
    }
    c10d_coord::check("store", st);
    s_.reset(s, c10d_store_close);
}

StoreCoord::StoreCoord(c10d_store *s, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), s_(s, c10d_store_close)
{
}

c10::intrusive_ptr<StoreCoord> StoreCoord::run(c10::intrusive_ptr<ProcessGroupCoord> world,
                                               std::chrono::milliseconds timeout)
{
    c10d_store *s = nullptr;
    c10d_coord::check("store", c10d_run_store(&s, world->pg()));
    c10::intrusive_ptr<StoreCoord> st;
    try {
        st = c10::make_intrusive<StoreCoord>(s, timeout);
    } catch (...) {
        c10d_store_close(s);
        throw;
    }
    st->job_ = world->job();
    st->world_ = std::move(world);
    return st;
}

StoreCoord::~StoreCoord() = default;

#ifdef C10D_TORCH_STORE_CLONE
c10::intrusive_ptr<c10d::Store> StoreCoord::clone()
{
    auto c = c10::make_intrusive<StoreCoord>(*this);
    c->world_.reset();
    return c;
}
#endif

c10::intrusive_ptr<ProcessGroupCoord> StoreCoord::take_world(int rank, int size)
{
    if (!world_ || world_->getRank() != rank || world_->getSize() != size)
        return {};
    return std::move(world_);
}

std::string StoreCoord::job() const
{
    return job_;
}

void StoreCoord::set(const std::string &key, const std::vector<uint8_t> &value)
{
    c10d_coord::check("store set", c10d_store_set(s_.get(), k(key), value.data(), value.size()));
}

std::vector<uint8_t> StoreCoord::get(const std::string &key)
{
    void *v = nullptr;
    size_t len = 0;
    c10d_coord::check("store get", c10d_store_get(s_.get(), k(key), &v, &len, ms(timeout_)));
    std::vector<uint8_t> out((uint8_t *)v, (uint8_t *)v + len);
    c10d_free(v);
    return out;
}

std::vector<uint8_t> StoreCoord::compareSet(const std::string &key,
                                            const std::vector<uint8_t> &expected,
                                            const std::vector<uint8_t> &desired)
{
    void *cur = nullptr;
    size_t len = 0;
    c10d_status st = c10d_store_compare_set(s_.get(), k(key), expected.data(), expected.size(),
                                            desired.data(), desired.size(), &cur, &len);
    if (st == C10D_ENOTFOUND) /* as TCPStore: a missing key answers `expected` */
        return expected;
    c10d_coord::check("store compare_set", st);
    std::vector<uint8_t> out((uint8_t *)cur, (uint8_t *)cur + len);
    c10d_free(cur);
    return out;
}

int64_t StoreCoord::add(const std::string &key, int64_t value)
{
    int64_t r = 0;
    c10d_coord::check("store add", c10d_store_add(s_.get(), k(key), value, &r));
    return r;
}

bool StoreCoord::deleteKey(const std::string &key)
{
    int deleted = 0;
    c10d_coord::check("store delete_key", c10d_store_delete_key(s_.get(), k(key), &deleted));
    return deleted != 0;
}

bool StoreCoord::check(const std::vector<std::string> &keys)
{
    auto ks = cstrs(keys);
    int all = 0;
    c10d_coord::check("store check", c10d_store_check(s_.get(), ks.data(), ks.size(), &all));
    return all != 0;
}

int64_t StoreCoord::getNumKeys()
{
    int64_t n = 0;
    c10d_coord::check("store num_keys", c10d_store_num_keys(s_.get(), &n));
    return n;
}

void StoreCoord::wait(const std::vector<std::string> &keys)
{
    wait(keys, timeout_);
}

void StoreCoord::wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &t)
{
    auto ks = cstrs(keys);
    c10d_coord::check("store wait", c10d_store_wait(s_.get(), ks.data(), ks.size(), ms(t)));
}

c10::intrusive_ptr<ProcessGroupCoord> formed_world(const c10::intrusive_ptr<c10d::Store> &store,
                                                   int rank, int size)
{
    StoreCoord *s = run_store_under(store);
    return s ? s->take_world(rank, size) : c10::intrusive_ptr<ProcessGroupCoord>();
}

std::string run_job(const c10::intrusive_ptr<c10d::Store> &store)
{
    StoreCoord *s = run_store_under(store);
    return s ? s->job() : std::string();
}

std::string default_job()
{
    char job[C10D_MAX_JOB_BYTES + 2];
    check("default_job", c10d_default_job(job, sizeof job));
    return job;
}

} // namespace c10d_coord
