// PodCache: what a pod asked for, remembered from its filter call and keyed
// by pod UID, because kube-scheduler's bind args carry only the pod's name,
// namespace, UID and node. Bounded (oldest entries go first) and entries
// expire after a TTL measured on the injected Clock.
// Thread-safety: all methods are thread-safe.
#ifndef PDC_EXTENDER_POD_CACHE_H_
#define PDC_EXTENDER_POD_CACHE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/scheduler_wire.h"
#include "common/clock.h"

namespace pdc::extender {

class PodCache {
 public:
  // REQUIRES: capacity >= 1; `clock` outlives the cache.
  PodCache(const Clock* clock, size_t capacity, absl::Duration ttl);

  // Remembers (or refreshes) the request of pod `uid`. Pods without a UID
  // are not cached.
  void Put(const api::PodRequest& pod);
  // The request of pod `uid`, unless unknown or expired.
  std::optional<api::PodRequest> Get(std::string_view uid) const;
  // Forgets pod `uid` (after a successful bind).
  void Erase(std::string_view uid);
  size_t size() const;

 private:
  struct Entry {
    api::PodRequest pod;
    absl::Time expires;
    uint64_t seq = 0;  // Matches the newest `order_` element for this uid.
  };
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  const size_t capacity_;
  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Insertion order (uid, seq); stale pairs are skipped when evicting.
  std::deque<std::pair<std::string, uint64_t>> order_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_POD_CACHE_H_
