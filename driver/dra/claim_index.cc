#include "driver/dra/claim_index.h"

namespace pdc::driver::dra {

ReflectedClaimIndex::ReflectedClaimIndex(const kube::KubeEndpoint* endpoint)
    : cache_("ResourceClaim",
             [](const api::json::Value& object, const api::ObjectMeta&) {
               return ResourceClaimFromJson(object);
             },
             nullptr) {
  if (endpoint != nullptr) {
    kube::ReflectorOptions o;
    o.path = std::string(kResourceClaimsPath);
    reflector_ = std::make_unique<kube::Reflector>(endpoint, o, &cache_);
  }
}

ReflectedClaimIndex::~ReflectedClaimIndex() { Stop(); }

void ReflectedClaimIndex::Start() {
  if (reflector_) reflector_->Start();
}

void ReflectedClaimIndex::Stop() {
  if (reflector_) reflector_->Stop();
}

std::optional<ClaimSnapshot> ReflectedClaimIndex::Snapshot() const {
  if (!cache_.synced()) return std::nullopt;
  ClaimSnapshot out;
  for (auto& entry : cache_.List()) out.claims.push_back(std::move(entry.value));
  for (const auto& [key, status] : cache_.errors()) out.unreadable.insert(key);
  return out;
}

}  // namespace pdc::driver::dra
