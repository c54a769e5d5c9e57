#include "extender/pod_cache.h"

#include "common/strings.h"

namespace pdc::extender {

using api::PodRequest;

PodCache::PodCache(const Clock* clock, size_t capacity, absl::Duration ttl)
    : clock_(clock), capacity_(capacity < 1 ? 1 : capacity), ttl_(ttl) {}

void PodCache::Put(const PodRequest& pod) {
  const std::string& uid = pod.request.pod_uid;
  if (uid.empty()) return;
  absl::MutexLock lock(&mu_);
  const uint64_t seq = ++next_seq_;
  Entry& e = entries_[uid];
  e.pod = pod;
  e.expires = clock_->Now() + ttl_;
  e.seq = seq;
  order_.emplace_back(uid, seq);
  EvictLocked();
}

void PodCache::EvictLocked() {
  // Drop the oldest live entries beyond capacity, and stale order pairs so
  // that order_ stays within a constant factor of entries_.
  while (!order_.empty() &&
         (entries_.size() > capacity_ || order_.size() > 2 * capacity_ + 16)) {
    auto [uid, seq] = std::move(order_.front());
    order_.pop_front();
    auto it = entries_.find(uid);
    if (it != entries_.end() && it->second.seq == seq) entries_.erase(it);
  }
}

std::optional<PodRequest> PodCache::Get(std::string_view uid) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(Sv(uid));
  if (it == entries_.end() || clock_->Now() >= it->second.expires) {
    return std::nullopt;
  }
  return it->second.pod;
}

void PodCache::Erase(std::string_view uid) {
  absl::MutexLock lock(&mu_);
  entries_.erase(Sv(uid));
}

size_t PodCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace pdc::extender
