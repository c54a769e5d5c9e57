// The leader's entry in its Service (extender.leaderElection.service): an
// EndpointSlice (discovery.k8s.io/v1) of a Service without a selector,
// naming only the leader's pod, written by the leader once it serves and
// emptied when it stops - as kube-apiserver keeps the `kubernetes` Service's
// endpoints with its lease endpoint reconciler. Pod readiness cannot do it:
// a Deployment's rolling update and a PodDisruptionBudget count Ready pods,
// and they must count the followers too.
// Thread-safety: pure function plus blocking calls; thread-safe.
#ifndef PDC_KUBE_LEADER_ENDPOINT_H_
#define PDC_KUBE_LEADER_ENDPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/kube_http_client.h"

namespace pdc::kube {

struct LeaderEndpoint {
  std::string ns;       // The Service's namespace.
  std::string service;  // The Service's name; the slice is "<service>-leader".
  std::string pod;      // The leader's pod name (targetRef).
  std::string ip;       // Its IP ($POD_IP): IPv4, or IPv6 when it has a ':'.
  // Port name (as the Service names it) -> port.
  std::vector<std::pair<std::string, uint16_t>> ports;
};

// The EndpointSlice naming `e` (no endpoint when `withdrawn`), with
// `resource_version` ("" for a create).
std::string EndpointSliceJson(const LeaderEndpoint& e, bool withdrawn,
                              std::string_view resource_version);

// Creates or replaces the slice (GET, then POST or PUT with the read
// resourceVersion). `withdrawn`: with no endpoint.
absl::Status WriteLeaderEndpoint(KubeApi* api, const LeaderEndpoint& e,
                                 bool withdrawn, absl::Duration timeout,
                                 const Clock* clock);

}  // namespace pdc::kube

#endif  // PDC_KUBE_LEADER_ENDPOINT_H_
