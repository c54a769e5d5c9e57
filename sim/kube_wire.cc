#include "sim/kube_wire.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_util.h"
#include "api/scheduler_wire.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::sim {
namespace {

namespace json = api::json;

void Kv(json::Writer& w, std::string_view k, std::string_view v) {
  json::Key(w, k);
  json::Str(w, v);
}

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed answer: ", what));
}

// A FailedNodes-style map: every key an offered node not yet seen.
absl::Status ReadFailedMap(const json::Value* map, std::string_view field,
                           const absl::flat_hash_map<std::string_view, size_t>& index,
                           std::vector<char>* seen, std::vector<size_t>* out,
                           std::vector<std::string>* reasons) {
  if (json::IsNullish(map)) return absl::OkStatus();
  if (!map->IsObject()) return Bad(absl::StrCat(Sv(field), " is not an object"));
  for (auto it = map->MemberBegin(); it != map->MemberEnd(); ++it) {
    const std::string_view node = json::StringOf(it->name);
    auto i = index.find(node);
    if (i == index.end()) {
      return Bad(absl::StrCat(Sv(field), " names node \"", Sv(node), "\" that was not offered"));
    }
    if ((*seen)[i->second]++) {
      return Bad(absl::StrCat("node \"", Sv(node), "\" is in more than one outcome"));
    }
    if (!it->value.IsString()) {
      return Bad(absl::StrCat(Sv(field), "[\"", Sv(node), "\"] is not a string"));
    }
    out->push_back(i->second);
    reasons->emplace_back(json::StringOf(it->value));
  }
  return absl::OkStatus();
}

// v1.Pod's metadata of a virt-launcher pod: the names, labels and
// annotations virt-controller gives it, owned by its VMI.
void WriteLauncherMetadata(json::Writer& w, const PodInfo& pod) {
  json::Key(w, "metadata");
  w.StartObject();
  Kv(w, "name", pod.name);
  Kv(w, "generateName", absl::StrCat("virt-launcher-", pod.vm, "-"));
  Kv(w, "namespace", pod.ns);
  Kv(w, "uid", pod.uid);
  Kv(w, "resourceVersion", "1");
  Kv(w, "creationTimestamp", "2026-01-01T00:00:00Z");
  json::Key(w, "labels");
  w.StartObject();
  Kv(w, "kubevirt.io", "virt-launcher");
  Kv(w, "kubevirt.io/created-by", pod.vmi_uid);
  Kv(w, "vm.kubevirt.io/name", pod.vm);
  w.EndObject();
  json::Key(w, "annotations");
  w.StartObject();
  Kv(w, "kubectl.kubernetes.io/default-container", "compute");
  Kv(w, "kubevirt.io/domain", pod.vm);
  if (!pod.claims.empty()) Kv(w, "pdc.kubevirt.io/claims", absl::StrJoin(pod.claims, ","));
  w.EndObject();
  json::Key(w, "ownerReferences");
  w.StartArray();
  w.StartObject();
  Kv(w, "apiVersion", "kubevirt.io/v1");
  Kv(w, "kind", "VirtualMachineInstance");
  Kv(w, "name", pod.vm);
  Kv(w, "uid", pod.vmi_uid);
  json::Key(w, "controller");
  w.Bool(true);
  json::Key(w, "blockOwnerDeletion");
  w.Bool(true);
  w.EndObject();
  w.EndArray();
  w.EndObject();  // metadata
}

// The compute container: KubeVirt's device resources, the VM's devices, its
// CPU and memory.
void WriteComputeContainer(json::Writer& w, const PodInfo& pod) {
  const std::string count = absl::StrCat(pod.device_count);
  w.StartObject();
  Kv(w, "name", "compute");
  Kv(w, "image", "quay.io/kubevirt/virt-launcher:v1.3.0");
  json::Key(w, "command");
  w.StartArray();
  json::Str(w, "/usr/bin/virt-launcher-monitor");
  w.EndArray();
  json::Key(w, "resources");
  w.StartObject();
  json::Key(w, "limits");
  w.StartObject();
  Kv(w, "devices.kubevirt.io/kvm", "1");
  Kv(w, "devices.kubevirt.io/tun", "1");
  Kv(w, "devices.kubevirt.io/vhost-net", "1");
  if (pod.device_count > 0) Kv(w, pod.resource, count);
  w.EndObject();
  json::Key(w, "requests");
  w.StartObject();
  Kv(w, "cpu", absl::StrCat(pod.cpu));
  Kv(w, "devices.kubevirt.io/kvm", "1");
  Kv(w, "devices.kubevirt.io/tun", "1");
  Kv(w, "devices.kubevirt.io/vhost-net", "1");
  if (pod.device_count > 0) Kv(w, pod.resource, count);
  Kv(w, "ephemeral-storage", "50M");
  Kv(w, "memory", absl::StrCat(pod.memory_gib, "Gi"));
  w.EndObject();
  w.EndObject();  // resources
  Kv(w, "terminationMessagePath", "/dev/termination-log");
  Kv(w, "terminationMessagePolicy", "File");
  Kv(w, "imagePullPolicy", "IfNotPresent");
  w.EndObject();
}

void WriteLauncherSpec(json::Writer& w, const PodInfo& pod) {
  json::Key(w, "spec");
  w.StartObject();
  json::Key(w, "containers");
  w.StartArray();
  WriteComputeContainer(w, pod);
  w.EndArray();
  Kv(w, "restartPolicy", "Never");
  json::Key(w, "terminationGracePeriodSeconds");
  w.Int(210);
  Kv(w, "dnsPolicy", "ClusterFirst");
  json::Key(w, "nodeSelector");
  w.StartObject();
  Kv(w, "kubernetes.io/arch", "amd64");
  Kv(w, "kubevirt.io/schedulable", "true");
  w.EndObject();
  Kv(w, "serviceAccountName", "default");
  Kv(w, "schedulerName", "default-scheduler");
  json::Key(w, "priority");
  w.Int(0);
  Kv(w, "preemptionPolicy", "PreemptLowerPriority");
  w.EndObject();  // spec
}

}  // namespace

std::string VirtLauncherPodJson(const PodInfo& pod) {
  // Keys in v1.Pod's struct order; map keys sorted, as encoding/json writes
  // them. No kind/apiVersion: objects from the scheduler's informer cache
  // carry an empty TypeMeta, which omitempty drops.
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  WriteLauncherMetadata(w, pod);
  WriteLauncherSpec(w, pod);
  json::Key(w, "status");
  w.StartObject();
  Kv(w, "phase", "Pending");
  Kv(w, "qosClass", "Burstable");
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string NodeJson(const NodeInfo& node) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  auto resources = [&](std::string_view key) {
    json::Key(w, key);
    w.StartObject();
    Kv(w, "cpu", absl::StrCat(node.cpu));
    if (!node.resource.empty()) Kv(w, node.resource, absl::StrCat(node.devices));
    Kv(w, "memory", absl::StrCat(node.memory_gib, "Gi"));
    Kv(w, "pods", "110");
    w.EndObject();
  };
  w.StartObject();
  json::Key(w, "metadata");
  w.StartObject();
  Kv(w, "name", node.name);
  Kv(w, "uid", absl::StrCat("node-uid-", node.name));
  Kv(w, "resourceVersion", "1");
  Kv(w, "creationTimestamp", "2026-01-01T00:00:00Z");
  json::Key(w, "labels");
  w.StartObject();
  Kv(w, "kubernetes.io/arch", "amd64");
  Kv(w, "kubernetes.io/hostname", node.name);
  Kv(w, "kubernetes.io/os", "linux");
  Kv(w, "kubevirt.io/schedulable", "true");
  w.EndObject();
  w.EndObject();
  json::Key(w, "spec");
  w.StartObject();
  w.EndObject();
  json::Key(w, "status");
  w.StartObject();
  resources("capacity");
  resources("allocatable");
  json::Key(w, "conditions");
  w.StartArray();
  w.StartObject();
  Kv(w, "type", "Ready");
  Kv(w, "status", "True");
  Kv(w, "lastHeartbeatTime", "2026-01-01T00:00:00Z");
  Kv(w, "lastTransitionTime", "2026-01-01T00:00:00Z");
  Kv(w, "reason", "KubeletReady");
  Kv(w, "message", "kubelet is posting ready status");
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string ExtenderArgsJson(std::string_view pod_json,
                             absl::Span<const std::string_view> node_names) {
  size_t size = pod_json.size() + 48;
  for (std::string_view n : node_names) size += n.size() + 3;
  std::string out;
  out.reserve(size);
  absl::StrAppend(&out, "{\"Pod\":", Sv(pod_json), ",\"Nodes\":null,\"NodeNames\":[");
  for (size_t i = 0; i < node_names.size(); ++i) {
    if (i) out.push_back(',');
    out += json::Quote(node_names[i]);
  }
  out += "]}";
  return out;
}

std::string ExtenderArgsNodeListJson(std::string_view pod_json,
                                     absl::Span<const std::string* const> node_jsons) {
  std::string out;
  absl::StrAppend(&out, "{\"Pod\":", Sv(pod_json), ",\"Nodes\":{\"metadata\":{},\"items\":[");
  for (size_t i = 0; i < node_jsons.size(); ++i) {
    if (i) out.push_back(',');
    out += *node_jsons[i];
  }
  out += "]},\"NodeNames\":null}";
  return out;
}

std::string BindingArgsJson(std::string_view pod_name, std::string_view ns,
                            std::string_view uid, std::string_view node) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  Kv(w, "PodName", pod_name);
  Kv(w, "PodNamespace", ns);
  Kv(w, "PodUID", uid);
  Kv(w, "Node", node);
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<FilterAnswer> ParseFilterAnswer(std::string_view body,
                                               absl::Span<const std::string_view> offered,
                                               bool node_list_mode) {
  rapidjson::Document doc;
  if (absl::Status s = json::Parse(body, &doc); !s.ok()) return Bad(s.message());
  if (!doc.IsObject()) return Bad("ExtenderFilterResult is not an object");
  absl::flat_hash_map<std::string_view, size_t> index;
  index.reserve(offered.size());
  for (size_t i = 0; i < offered.size(); ++i) index.emplace(offered[i], i);
  FilterAnswer a;
  std::vector<char> seen(offered.size(), 0);
  const json::Value* error = json::Find(doc, "Error");
  if (!json::IsNullish(error)) {
    if (!error->IsString()) return Bad("Error is not a string");
    a.error = std::string(json::StringOf(*error));
  }
  const json::Value* names = json::Find(doc, "NodeNames");
  const json::Value* nodes = json::Find(doc, "Nodes");
  if (!node_list_mode && !json::IsNullish(nodes)) {
    return Bad("Nodes is set in nodeCacheCapable mode (must be null)");
  }
  std::vector<std::string_view> passed;
  if (node_list_mode) {
    if (!json::IsNullish(nodes)) {
      const json::Value* items = nodes->IsObject() ? json::Find(*nodes, "items") : nullptr;
      if (!nodes->IsObject() || (items != nullptr && !items->IsNull() && !items->IsArray())) {
        return Bad("Nodes is not a NodeList");
      }
      for (rapidjson::SizeType i = 0; items != nullptr && items->IsArray() && i < items->Size(); ++i) {
        const json::Value* meta = json::Find((*items)[i], "metadata");
        const json::Value* name = meta ? json::Find(*meta, "name") : nullptr;
        if (json::IsNullish(name) || !name->IsString()) {
          return Bad(absl::StrCat("Nodes.items[", i, "].metadata.name is missing"));
        }
        passed.push_back(json::StringOf(*name));
      }
    }
  } else if (!json::IsNullish(names)) {
    if (!names->IsArray()) return Bad("NodeNames is not an array");
    for (rapidjson::SizeType i = 0; i < names->Size(); ++i) {
      if (!(*names)[i].IsString()) return Bad(absl::StrCat("NodeNames[", i, "] is not a string"));
      passed.push_back(json::StringOf((*names)[i]));
    }
  }
  for (std::string_view n : passed) {
    auto i = index.find(n);
    // kube-scheduler: "extender claims a filtered node which is not found in
    // the input node list".
    if (i == index.end()) return Bad(absl::StrCat("passed node \"", Sv(n), "\" was not offered"));
    if (seen[i->second]++) return Bad(absl::StrCat("node \"", Sv(n), "\" passed twice"));
    a.passed.push_back(i->second);
  }
  RETURN_IF_ERROR(ReadFailedMap(json::Find(doc, "FailedNodes"), "FailedNodes", index, &seen,
                                &a.failed, &a.reasons));
  RETURN_IF_ERROR(ReadFailedMap(json::Find(doc, "FailedAndUnresolvableNodes"),
                                "FailedAndUnresolvableNodes", index, &seen, &a.unresolvable,
                                &a.reasons));
  if (a.error.empty()) {
    for (size_t i = 0; i < offered.size(); ++i) {
      if (!seen[i]) {
        return Bad(absl::StrCat("offered node \"", Sv(offered[i]), "\" has no outcome"));
      }
    }
  }
  return a;
}

absl::StatusOr<std::vector<int>> ParsePriorityAnswer(
    std::string_view body, absl::Span<const std::string_view> offered) {
  absl::StatusOr<std::vector<std::pair<std::string, int64_t>>> list =
      api::ParseHostPriorityList(body);
  if (!list.ok()) return Bad(list.status().message());
  if (list->size() != offered.size()) {
    return Bad(absl::StrCat("HostPriorityList has ", list->size(), " hosts for ",
                            offered.size(), " offered"));
  }
  absl::flat_hash_map<std::string_view, size_t> index;
  for (size_t i = 0; i < offered.size(); ++i) index.emplace(offered[i], i);
  std::vector<int> scores(offered.size(), -1);
  for (const auto& [host, score] : *list) {
    auto i = index.find(host);
    if (i == index.end()) return Bad(absl::StrCat("scored host \"", host, "\" was not offered"));
    if (scores[i->second] >= 0) return Bad(absl::StrCat("host \"", host, "\" scored twice"));
    scores[i->second] = static_cast<int>(score);
  }
  return scores;
}

absl::StatusOr<std::string> ParseBindAnswer(std::string_view body) {
  rapidjson::Document doc;
  if (absl::Status s = json::Parse(body, &doc); !s.ok()) return Bad(s.message());
  if (!doc.IsObject()) return Bad("ExtenderBindingResult is not an object");
  const json::Value* error = json::Find(doc, "Error");
  if (json::IsNullish(error)) return std::string();
  if (!error->IsString()) return Bad("Error is not a string");
  return std::string(json::StringOf(*error));
}

}  // namespace pdc::sim
