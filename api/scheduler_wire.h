// The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1)
// <-> allocator types. The Go types have no JSON tags, so kube-scheduler
// writes the Go field names with capitals (Pod, Nodes, NodeNames, ...) and
// null for unused pointers; Go reads keys case-insensitively and old clients
// send lower case, so we read case-insensitively and always write the exact
// capitalised names (docs/rest-api.md §2.1).
//
// Also: a pod (v1.Pod JSON) -> SchedulingRequest: VM identity via
// pdc::VmIdentity (a name; request.vm_uid stays "", which only the owner
// chain of Kubernetes mode fills in: extender/vm_directory.h), explicit claims from the `pdc.kubevirt.io/claims`
// annotation, managed resources from container requests/limits including
// init containers (effective request = max(sum of containers, max of init
// containers), as the scheduler computes it).
// Thread-safety: pure functions; parsed values borrow from their input.
#ifndef PDC_API_SCHEDULER_WIRE_H_
#define PDC_API_SCHEDULER_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "api/json_util.h"
#include "api/kube_objects.h"
#include "model/allocations.h"
#include "rapidjson/document.h"

namespace pdc::api {

inline constexpr std::string_view kClaimsAnnotation = "pdc.kubevirt.io/claims";
inline constexpr std::string_view kDevicesAnnotation = "pdc.kubevirt.io/devices";
inline constexpr std::string_view kVmNameLabel = "vm.kubevirt.io/name";
// The UID of the VirtualMachineInstance a virt-launcher pod was made for
// (virt-controller's podLabels, pkg/virt-controller/services/template.go).
inline constexpr std::string_view kCreatedByLabel = "kubevirt.io/created-by";
inline constexpr std::string_view kDomainAnnotation = "kubevirt.io/domain";
inline constexpr int kMaxExtenderPriority = 10;

// Resource names the extender manages (configured device classes). Other
// extended resources are ignored, so their quantities need not parse.
using ManagedResources = absl::flat_hash_set<std::string>;

struct PodRequest {
  SchedulingRequest request;
  // True when the pod names no claim and requests no managed resource:
  // it passes every verb untouched.
  bool pass_through = true;
  // The pod's controller owner reference (a virt-launcher pod's is its
  // VirtualMachineInstance), when it has one: in Kubernetes mode, the
  // only thing that says which VM the pod belongs to.
  std::optional<OwnerReference> controller;
  // The label kubevirt.io/created-by ("" when absent): in Kubernetes mode it
  // must name the controller's UID.
  std::string created_by;
};

// Extracts what the allocator needs from a v1.Pod JSON object. Wrong JSON
// types are TypeError naming the path ("Pod.metadata.labels"). FieldError
// naming the path: a claim annotation with an invalid name; a name,
// namespace, UID or VM name out of Kubernetes' bounds (api/validation.h); a
// managed quantity that is not a whole number of devices in
// 0..kMaxNodeDevices (api/quantity.h), or a pod total per resource above it.
absl::StatusOr<PodRequest> PodToRequest(const json::Value& pod,
                                        const ManagedResources& managed);

// Where a pod stands, as the Kubernetes API says (a pod read back for a bind
// whose outcome the API did not tell, a pod of the scheduler's watch): its
// UID, spec.nodeName ("" = not bound) and status.phase ("" = none yet).
struct PodPlacement {
  std::string uid;
  std::string node_name;
  std::string phase;
  bool deleting = false;  // metadata.deletionTimestamp is set.

  // Failed or Succeeded: its containers will not run again (a pod's phase
  // never leaves these).
  bool Ended() const { return phase == "Failed" || phase == "Succeeded"; }
  // Ended, or being deleted and never scheduled: none of its containers
  // runs or ever will (kube-controller-manager's isPodDone,
  // pkg/controller/resourceclaim/controller.go).
  bool Done() const { return Ended() || (deleting && node_name.empty()); }
};
// TypeError naming the path for wrong JSON types; FieldError for a UID,
// node name or phase out of Kubernetes' bounds.
absl::StatusOr<PodPlacement> ReadPodPlacement(const json::Value& pod);

// ExtenderArgs for filter and prioritize.
struct ExtenderArgs {
  const json::Value* pod = nullptr;
  // Exactly one mode: NodeNames (nodeCacheCapable) or a full Nodes NodeList.
  bool node_list_mode = false;
  std::vector<std::string_view> node_names;  // Both modes, input order.
  const json::Value* node_list = nullptr;    // The Nodes object, list mode.
  std::vector<const json::Value*> node_items;  // List mode, input order.
  // True when no name in node_names needs a JSON escape (no quote,
  // backslash or control character): they are written back as they are.
  bool names_unescaped = false;
};

// Parses `doc` (already parsed, e.g. in situ) as ExtenderArgs. Missing Pod,
// both or neither of Nodes/NodeNames, or wrong types: TypeError.
absl::StatusOr<ExtenderArgs> ReadExtenderArgs(const json::Value& doc);
// Parses `body` in place into `doc` and reads it as ExtenderArgs, with the
// same answers as ParseInsitu + ReadExtenderArgs, but the strings of the
// NodeNames array (thousands of them) go straight to `node_names` as views
// into `body` instead of becoming DOM values first. `body` and `doc` must
// outlive the result.
absl::StatusOr<ExtenderArgs> ParseExtenderArgs(std::string& body,
                                               rapidjson::Document* doc);

struct FilterOutput {
  std::vector<size_t> passed;  // Indexes into the input, input order.
  // (input index, index into quoted_messages), input order.
  std::vector<std::pair<size_t, uint32_t>> failed;
  std::vector<std::pair<size_t, uint32_t>> unresolvable;
  // Each distinct reason once, as a JSON string literal (json::Quote).
  std::vector<std::string> quoted_messages;
  std::string error;
};

// ExtenderFilterResult, in the mode of `args`: names in -> NodeNames out and
// "Nodes": null; NodeList in -> Nodes out (the input node objects echoed)
// and "NodeNames": null. Only input nodes are ever written. Names mode is
// written straight into one reserved string (byte-identical to what
// json::Writer writes).
std::string WriteFilterResult(const ExtenderArgs& args,
                              const FilterOutput& out);
// Appends `s` as a JSON string literal, exactly as json::Writer writes it.
void AppendJsonString(std::string_view s, std::string* out);
// A filter answer carrying only Error (kube-scheduler fails the attempt and
// shows the message in the pod's events).
std::string WriteFilterError(std::string_view error);

// HostPriorityList: [{"Host": name, "Score": n}, ...] in input order.
std::string WriteHostPriorityList(absl::Span<const std::string_view> nodes,
                                  absl::Span<const int> scores);
// Reads a HostPriorityList (for clients: pdc-sim, tests). Wrong types are
// TypeError, scores outside 0..10 FieldError.
absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
ParseHostPriorityList(std::string_view body);

// Every field is validated (names, namespace, UID) before it is returned:
// the binder logs and records them.
struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};
absl::StatusOr<BindingArgs> ReadBindingArgs(const json::Value& doc);
// ExtenderBindingResult: {"Error": error}.
std::string WriteBindingResult(std::string_view error);

// ExtenderPreemptionArgs. Victims come either as NodeNameToVictims (full
// pods, the UID is read from each pod's metadata) or NodeNameToMetaVictims.
struct NodeVictims {
  std::string_view node;
  std::vector<std::string_view> pod_uids;
  int64_t num_pdb_violations = 0;
};
struct PreemptionArgs {
  const json::Value* pod = nullptr;
  std::vector<NodeVictims> nodes;  // Input order.
};
absl::StatusOr<PreemptionArgs> ReadPreemptionArgs(const json::Value& doc);
// ExtenderPreemptionResult: {"NodeNameToMetaVictims": {...}} for `keep`
// (indexes into args.nodes).
std::string WritePreemptionResult(const PreemptionArgs& args,
                                  absl::Span<const size_t> keep);

}  // namespace pdc::api

#endif  // PDC_API_SCHEDULER_WIRE_H_
