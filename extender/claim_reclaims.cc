#include "extender/claim_reclaims.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

void ClaimReclaims::Restore(absl::flat_hash_map<ClaimKey, Reclaim> reclaims) {
  absl::MutexLock lock(&mu_);
  reclaiming_ = std::move(reclaims);
}

absl::Status ClaimReclaims::Start(const ClaimKey& key, const ClaimObjectState& st,
                                  std::vector<PciAddress> devices) {
  const std::string what = absl::StrCat("write the Reclaiming condition of claim ", key.ToString());
  ASSIGN_OR_RETURN(bool written, objects_->WriteConditions(
                                     key, st.uid,
                                     [&](const ClaimObjectState& cur) {
                                       return api::ReclaimingConditions(
                                           cur.node, devices, cur.generation, cur.conditions,
                                           clock_->Now());
                                     },
                                     what));
  if (!written) return absl::OkStatus();
  const size_t count = devices.size();
  {
    absl::MutexLock lock(&mu_);
    reclaiming_[key] = Reclaim{st.uid, st.node, std::move(devices)};
  }
  spdlog::info(
      "claim {} deleted: its finalizer stays until pdc-node on node {} has "
      "returned "
      "{} device(s) to their host driver (erased first)",
      key.ToString(), st.node, count);
  return absl::OkStatus();
}

absl::Status ClaimReclaims::Settle(const std::vector<ClaimKey>& keys,
                                   const NodeHoldsObjects& holds) {
  for (const ClaimKey& key : keys) {
    std::optional<Reclaim> r = Of(key);
    if (!r.has_value()) continue;
    if (!NodeHoldsObjects::Returning(r->devices, holds.Persisted(r->node)).empty()) continue;
    RETURN_IF_ERROR(objects_->SetFinalizer(key, false, r->uid));
    spdlog::info(
        "claim {}: its device(s) on node {} are back on their host driver; the "
        "claim "
        "is gone",
        key.ToString(), r->node);
    Forgotten(key, r->uid);
  }
  return absl::OkStatus();
}

bool ClaimReclaims::Reclaiming(const ClaimKey& key) const {
  absl::MutexLock lock(&mu_);
  return reclaiming_.contains(key);
}

std::optional<ClaimReclaims::Reclaim> ClaimReclaims::Of(const ClaimKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = reclaiming_.find(key);
  if (it == reclaiming_.end()) return std::nullopt;
  return it->second;
}

std::vector<ClaimKey> ClaimReclaims::On(const std::set<std::string>& nodes) const {
  absl::MutexLock lock(&mu_);
  std::vector<ClaimKey> out;
  for (const auto& [key, r] : reclaiming_) {
    if (nodes.contains(r.node)) out.push_back(key);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ClaimReclaims::Forgotten(const ClaimKey& key, std::string_view uid) {
  absl::MutexLock lock(&mu_);
  if (auto it = reclaiming_.find(key); it != reclaiming_.end() && it->second.uid == uid) {
    reclaiming_.erase(it);
  }
}

}  // namespace pdc::extender
