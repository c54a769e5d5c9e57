// The coordination.k8s.io/v1 Lease as leader election reads and writes it
// (client-go tools/leaderelection/resourcelock/leaselock.go,
// LeaseSpecToLeaderElectionRecord / LeaderElectionRecordToLeaseSpec):
// spec.holderIdentity, leaseDurationSeconds, acquireTime, renewTime
// (metav1.MicroTime: RFC 3339 with microseconds) and leaseTransitions.
// Thread-safety: pure functions.
#ifndef PDC_API_LEASE_JSON_H_
#define PDC_API_LEASE_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/kube_objects.h"

namespace pdc::api {

// Longest holderIdentity read or written (a pod name plus a suffix; the API
// itself sets no bound, a hostile one must not make pdc keep megabytes).
inline constexpr size_t kMaxHolderIdentityLength = 512;

struct LeaderRecord {
  std::string holder;  // "" = nobody holds the lease (released).
  int64_t lease_duration_seconds = 0;
  absl::Time acquire_time = absl::InfinitePast();  // InfinitePast: absent.
  absl::Time renew_time = absl::InfinitePast();
  int64_t transitions = 0;

  bool operator==(const LeaderRecord&) const = default;
};

struct Lease {
  ObjectMeta meta;
  LeaderRecord record;
};

// A Lease object as the API answers GET/POST/PUT; every field checked, the
// error names it ("Lease.spec.renewTime").
absl::StatusOr<Lease> ReadLease(std::string_view json);

// The whole Lease object to create (`resource_version` "") or to replace
// with PUT (`resource_version` the one read: a stale one is 409 Conflict,
// which is what makes two replicas' updates exclusive).
std::string LeaseJson(std::string_view ns, std::string_view name,
                      std::string_view resource_version,
                      const LeaderRecord& record);

// metav1.MicroTime's wire form: "2006-01-02T15:04:05.000000Z".
std::string MicroTime(absl::Time t);

}  // namespace pdc::api

#endif  // PDC_API_LEASE_JSON_H_
