// What kube-scheduler's HTTP extender client (pkg/scheduler/extender.go)
// sends, byte for byte in shape: Go's encoding/json of the extender/v1 types,
// which have no JSON tags, so the keys are the Go field names (Pod, Nodes,
// NodeNames; PodName, PodNamespace, PodUID, Node) in struct order, nil
// pointers as null. The Pod inside is a virt-launcher pod as KubeVirt makes
// it (labels, the domain annotation, an ownerReference to its
// VirtualMachineInstance, container "compute" asking for the device
// resource in requests and limits), written with v1.Pod's JSON tags.
//
// Answers are checked strictly: ParseFilterAnswer rejects anything
// kube-scheduler would reject (a passed node that was not offered, a NodeList
// in nodeCacheCapable mode) and anything pdc promises not to do (a node in
// two outcomes, an offered node in none).
// Thread-safety: pure functions.
#ifndef PDC_SIM_KUBE_WIRE_H_
#define PDC_SIM_KUBE_WIRE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace pdc::sim {

struct PodInfo {
  std::string ns;
  std::string name;       // virt-launcher-<vm>-<suffix>
  std::string uid;
  std::string vm;         // VirtualMachineInstance name
  std::string vmi_uid;
  std::string resource;   // devices.kubevirt.io/nvme
  int device_count = 0;
  int cpu = 0;
  int memory_gib = 0;
  std::vector<std::string> claims;  // pdc.kubevirt.io/claims, explicit claims
};

struct NodeInfo {
  std::string name;
  int cpu = 0;
  int memory_gib = 0;
  std::string resource;
  int devices = 0;
};

std::string VirtLauncherPodJson(const PodInfo& pod);
// A v1.Node as the scheduler's cache holds it (for NodeList mode).
std::string NodeJson(const NodeInfo& node);

// ExtenderArgs. nodeCacheCapable: {"Pod":…,"Nodes":null,"NodeNames":[…]};
// otherwise {"Pod":…,"Nodes":{"metadata":{},"items":[node_json…]},"NodeNames":null}.
std::string ExtenderArgsJson(std::string_view pod_json,
                             absl::Span<const std::string_view> node_names);
std::string ExtenderArgsNodeListJson(std::string_view pod_json,
                                     absl::Span<const std::string* const> node_jsons);
std::string BindingArgsJson(std::string_view pod_name, std::string_view ns,
                            std::string_view uid, std::string_view node);

struct FilterAnswer {
  std::vector<size_t> passed;        // Indexes into the offered nodes, answer order.
  std::vector<size_t> failed;        // FailedNodes (retryable).
  std::vector<size_t> unresolvable;  // FailedAndUnresolvableNodes.
  std::vector<std::string> reasons;  // Parallel to failed then unresolvable.
  std::string error;                 // The Error field.
};
// Parses an ExtenderFilterResult for `offered` nodes. A malformed or
// inconsistent answer is InvalidArgument saying what is wrong.
absl::StatusOr<FilterAnswer> ParseFilterAnswer(std::string_view body,
                                               absl::Span<const std::string_view> offered,
                                               bool node_list_mode);
// Scores (0..10) for `offered` from a HostPriorityList: every offered node
// exactly once, nothing else.
absl::StatusOr<std::vector<int>> ParsePriorityAnswer(
    std::string_view body, absl::Span<const std::string_view> offered);
// The Error of an ExtenderBindingResult ("" = bound).
absl::StatusOr<std::string> ParseBindAnswer(std::string_view body);

}  // namespace pdc::sim

#endif  // PDC_SIM_KUBE_WIRE_H_
