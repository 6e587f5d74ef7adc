// The last references of finished calls (releases.hpp).
#include "releases.hpp"

#ifdef C10D_TORCH_BACKEND

#include <mutex>
#include <thread>
#include <vector>

namespace c10d_coord {
namespace {

std::mutex mu;
// Never destroyed: an exit's static destructors must not free works whose
// backend is already gone.
auto *tracked = new std::vector<std::shared_ptr<Release>>();
size_t prune_at = 64;

// Whether r still holds references the exit must wait for.
bool pending(const Release &r)
{
    int stage = r.stage.load(std::memory_order_acquire);
    if (stage == 0) /* in flight: it ends on the backend's thread, which frees it then */
        return !r.inner.expired() && !(r.given_up && r.given_up());
    if (stage == 1)
        return true;
    /* The inner work's holders, once its backend has let go: the checked
     * work, while its caller keeps it. */
    size_t mine = r.outer.use_count() > 0 ? 1 : 0;
    return r.inner.use_count() > mine;
}

bool done_with(const Release &r)
{
    return r.inner.expired() || (r.stage.load(std::memory_order_acquire) == 2 && !pending(r));
}

void prune_locked()
{
    std::vector<std::shared_ptr<Release>> kept;
    for (auto &r : *tracked)
        if (!done_with(*r))
            kept.push_back(std::move(r));
    tracked->swap(kept);
    prune_at = std::max<size_t>(64, 2 * tracked->size());
}

} // namespace

std::shared_ptr<Release> track_release(const c10::intrusive_ptr<c10d::Work> &inner,
                                       const c10::intrusive_ptr<c10d::Work> &outer)
{
    auto r = std::make_shared<Release>(inner, outer);
    std::lock_guard<std::mutex> g(mu);
    if (tracked->size() >= prune_at)
        prune_locked();
    tracked->push_back(r);
    return r;
}

bool await_releases(std::chrono::milliseconds budget)
{
    auto until = std::chrono::steady_clock::now() + budget;
    for (;;) {
        bool left = false;
        {
            std::lock_guard<std::mutex> g(mu);
            for (auto &r : *tracked)
                if (pending(*r)) {
                    left = true;
                    break;
                }
            if (!left)
                prune_locked();
        }
        if (!left)
            return true;
        if (std::chrono::steady_clock::now() >= until)
            return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

} // namespace c10d_coord

#endif
