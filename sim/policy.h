// A device-placement policy under comparison. The engine (simulation.h) owns
// simulated time, the workload and Kubernetes' view of the cluster
// (ClusterState); a policy only decides where a VM's pod goes and which
// devices it gets, and hears about stops, deletions and failures.
//   device-plugin  KubeVirt today (policy_device_plugin.cc)
//   dra            Kubernetes >= 1.31 DRA (policy_dra.cc)
//   pdc            this project, through the real allocator (policy_pdc.cc)
//   pdc-dra        pdc's DRA mode: keeper + DRA driver (policy_pdc_dra.cc)
// Thread-safety: not synchronised; a policy lives in one simulation run.
#ifndef PDC_SIM_POLICY_H_
#define PDC_SIM_POLICY_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "sim/cluster.h"
#include "sim/cluster_state.h"
#include "sim/rng.h"
#include "sim/scenario.h"

namespace pdc::sim {

// Simulated time as the engine's clock tells it to a policy: microseconds
// since the start of the run, which the clock shows as kSimEpoch + t.
inline const absl::Time kSimEpoch = absl::FromUnixSeconds(1'700'000'000);
inline SimTime SimNow(const Clock* clock) {
  return absl::ToInt64Microseconds(clock->Now() - kSimEpoch);
}

// How a policy's devices reach the VM on its node: the part of the start
// path (start_path.h) where the modes differ.
enum class HandoffKind : uint8_t {
  // kubelet's device manager calls the device plugin's Allocate inside
  // admission, one pod at a time per node.
  kDevicePlugin,
  // kubelet asks the DRA driver to prepare the pod's claims after
  // admission, each claim on its own, concurrently.
  kDra,
};
enum class VfioBinding : uint8_t {
  kAtBoot,     // Devices are on vfio-pci from boot (KubeVirt's PCI device plugin).
  kNodeAgent,  // pdc-node binds claimed devices, one at a time, in its loop.
  kPrepare,    // The DRA driver binds a claim's devices in its prepare.
};
struct StartStyle {
  HandoffKind handoff = HandoffKind::kDevicePlugin;
  VfioBinding binding = VfioBinding::kAtBoot;
  // pdc's gate (serializeHandoffs): the placement's hand-off must be
  // confirmed (Policy::OnHandoff) before another pod of the resource can be
  // bound to the node.
  bool confirms_handoff = false;
};

struct VmInfo {
  int id = 0;
  std::string name;
  int group = 0;
  VmShape shape;
  bool explicit_claims = false;
};

struct Placement {
  bool placed = false;
  int node = -1;
  std::vector<int> devices;  // Device indices, ascending.
  // Why not placed: a short, low-cardinality phrase for the report.
  std::string reason;
  // For the simulated latency: nodes kube-scheduler looked at, nodes an
  // extender had to judge, extender round trips.
  int nodes_scanned = 0;
  int extender_nodes = 0;
  int extender_calls = 0;
};

// HTTP mode: where the pdc-extender is and how to talk to it.
struct HttpModeOptions {
  std::string url;                          // http://127.0.0.1:8888
  std::string scheduler_prefix = "/scheduler";
  bool node_list = false;  // Full NodeList instead of NodeNames (nodeCacheCapable: false).
  // Inventories are reported again this often (pdc-node's heartbeat), in
  // wall time.
  absl::Duration heartbeat = absl::Seconds(20);
  // Wall time, for the heartbeat and request latencies.
  const Clock* wall_clock = RealClock();
};
class HttpStats;

struct PolicyContext {
  const Scenario* scenario = nullptr;
  const Cluster* cluster = nullptr;
  const ClusterState* state = nullptr;
  const Clock* clock = nullptr;  // Simulated time, for the allocator.
  uint64_t seed = 0;             // Of this policy's own random stream.
  const HttpModeOptions* http = nullptr;  // pdc-http only.
  HttpStats* http_stats = nullptr;        // pdc-http only.
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;

  virtual absl::Status OnVmCreated(const VmInfo& vm) { return absl::OkStatus(); }
  // One scheduling attempt for the VM's pod `pod_uid` (one pod per start
  // request; retries reuse it). A placement must use devices that are free
  // in ClusterState; the engine checks that and applies it.
  virtual absl::StatusOr<Placement> Place(const VmInfo& vm,
                                          const std::string& pod_name,
                                          const std::string& pod_uid) = 0;
  // The VM's pod is gone (stopped, killed by a failure, or deleted).
  virtual absl::Status OnVmStopped(const VmInfo& vm, const std::string& pod_uid) {
    return absl::OkStatus();
  }
  virtual absl::Status OnVmDeleted(const VmInfo& vm) { return absl::OkStatus(); }
  // With the start-path model only, for StartStyle::confirms_handoff: the
  // node's agent answered kubelet's Allocate for the pod and confirmed the
  // hand-off (the gate opens).
  virtual absl::Status OnHandoff(const VmInfo& vm, const std::string& pod_uid) {
    return absl::OkStatus();
  }
  virtual StartStyle start_style() const { return {}; }
  virtual absl::Status OnNodeDown(int node) { return absl::OkStatus(); }
  virtual absl::Status OnNodeUp(int node) { return absl::OkStatus(); }
  virtual absl::Status OnDeviceHealth(int device, bool healthy) {
    return absl::OkStatus();
  }

  // Devices kept for a VM that is not running (pdc's bound claims of stopped
  // VMs); they are free for Kubernetes but not for other VMs.
  virtual bool Holds(int device) const { return false; }
  // True when VM-device associations outlive pods (pdc's claims).
  virtual bool HasPersistentClaims() const { return false; }
  // Claims currently Lost (pdc); 0 for policies without persistent claims.
  virtual int LostClaims() const { return 0; }
  // Policy-specific counters for the report (e.g. pdc-dra's keeper writes);
  // empty for most.
  virtual std::map<std::string, uint64_t> Counters() const { return {}; }
  // Cross-checks the policy's own state against its engine, once per
  // sample; a mismatch is an Internal error.
  virtual absl::Status CheckConsistency() const { return absl::OkStatus(); }
};

std::unique_ptr<Policy> NewDevicePluginPolicy(const PolicyContext& ctx);
std::unique_ptr<Policy> NewDraPolicy(const PolicyContext& ctx);
absl::StatusOr<std::unique_ptr<Policy>> NewPdcPolicy(const PolicyContext& ctx);
std::unique_ptr<Policy> NewPdcDraPolicy(const PolicyContext& ctx);
// pdc through a running pdc-extender over HTTP (policy_pdc_http.cc).
absl::StatusOr<std::unique_ptr<Policy>> NewPdcHttpPolicy(const PolicyContext& ctx);

// The in-process policies run by default, in report order (pdc-http is
// added by --extender / --spawn-extender).
const std::vector<std::string>& AllPolicyNames();
absl::StatusOr<std::unique_ptr<Policy>> NewPolicy(std::string_view name,
                                                  const PolicyContext& ctx);

}  // namespace pdc::sim

#endif  // PDC_SIM_POLICY_H_
