// ClaimIndex: the ResourceClaims that exist now, as pdc-node's DRA driver
// needs them to tell when a device it prepared is no longer held by any
// claim (device_reclaimer.h). ReflectedClaimIndex keeps a copy of every
// ResourceClaim (resource.k8s.io/v1, all namespaces) with a kube::Reflector
// and a kube::TypedCache, the way a client-go informer does; tests fake the
// interface.
// A claim the cache could not decode is named in the snapshot's
// `unreadable` (by "<namespace>/<name>"): whoever reads it must treat such a
// claim as still holding whatever it held, never as gone.
// Thread-safety: thread-safe.
#ifndef PDC_DRIVER_DRA_CLAIM_INDEX_H_
#define PDC_DRIVER_DRA_CLAIM_INDEX_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "driver/dra/claim_source.h"
#include "kube/kube_http_client.h"
#include "kube/kube_reflector.h"
#include "kube/typed_cache.h"

namespace pdc::driver::dra {

struct ClaimSnapshot {
  std::vector<ResourceClaimView> claims;  // Ordered by namespace/name.
  std::set<std::string> unreadable;       // "<namespace>/<name>".
};

class ClaimIndex {
 public:
  virtual ~ClaimIndex() = default;
  // Every claim now; nullopt until the first complete list arrived.
  virtual std::optional<ClaimSnapshot> Snapshot() const = 0;
};

// The collection the reflector lists and watches (RBAC: list, watch).
inline constexpr std::string_view kResourceClaimsPath =
    kube::Reflected("/apis/resource.k8s.io/v1/resourceclaims");

class ReflectedClaimIndex : public ClaimIndex {
 public:
  // `endpoint` must outlive the index.
  explicit ReflectedClaimIndex(const kube::KubeEndpoint* endpoint);
  ~ReflectedClaimIndex() override;
  void Start();
  void Stop();
  std::optional<ClaimSnapshot> Snapshot() const override;

  // The sink the reflector feeds (tests feed it directly).
  kube::ReflectorSink* sink() { return &cache_; }

 private:
  kube::TypedCache<ResourceClaimView> cache_;
  std::unique_ptr<kube::Reflector> reflector_;
};

}  // namespace pdc::driver::dra

#endif  // PDC_DRIVER_DRA_CLAIM_INDEX_H_
