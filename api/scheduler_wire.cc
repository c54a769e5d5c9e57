#include "api/scheduler_wire.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/quantity.h"
#include "api/validation.h"
#include "model/names.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::api {
namespace {

using json::Find;
using json::IsNullish;
using json::OptArray;
using json::OptObject;
using json::StringOf;
using json::TypeError;
using json::Value;

// A string member of a string map, looked up exactly (label and annotation
// keys are case-sensitive).
absl::StatusOr<std::string_view> MapValue(const Value* map,
                                          std::string_view key,
                                          std::string_view field) {
  if (map == nullptr) return std::string_view();
  auto it = map->FindMember(
      Value(rapidjson::StringRef(key.data(),
                                 static_cast<rapidjson::SizeType>(key.size()))));
  if (it == map->MemberEnd() || it->value.IsNull()) return std::string_view();
  if (!it->value.IsString()) {
    return TypeError(absl::StrCat(Sv(field), "[\"", Sv(key), "\"]"),
                     "must be a string");
  }
  return StringOf(it->value);
}

// A resource.Quantity of a device resource, read as Kubernetes reads it
// (api/quantity.h): a whole number of devices, 0..kMaxNodeDevices. Go writes
// a quantity as a string ("1", "2k"); hand-written clients may send a JSON
// number, which Go would read as the same text.
absl::StatusOr<int64_t> DeviceQuantity(const Value& v, std::string_view field) {
  if (v.IsString()) {
    return ParseWholeQuantityField(StringOf(v), kMaxNodeDevices, field, "devices");
  }
  if (v.IsInt64() || v.IsUint64() || v.IsDouble()) {
    // A JSON number has already been read by RapidJSON; write it back as
    // text (the shortest form that reads back the same) and read that.
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    v.Accept(w);
    return ParseWholeQuantityField(std::string_view(buf.GetString(), buf.GetSize()),
                                   kMaxNodeDevices, field, "devices");
  }
  return TypeError(field, "must be a quantity string such as \"1\"");
}

// Managed resources of one container: request, else limit (Kubernetes
// defaults an extended resource's request to its limit).
absl::Status ContainerResources(const Value& c, std::string_view field,
                                const ManagedResources& managed,
                                std::map<std::string, int64_t>* out) {
  if (!c.IsObject()) return TypeError(field, "must be an object");
  const std::string rfield = absl::StrCat(Sv(field), ".resources");
  ASSIGN_OR_RETURN(const Value* res, OptObject(c, "resources", rfield));
  if (res == nullptr) return absl::OkStatus();
  for (std::string_view kind : {"limits", "requests"}) {
    const std::string kfield = absl::StrCat(rfield, ".", Sv(kind));
    ASSIGN_OR_RETURN(const Value* m, OptObject(*res, kind, kfield));
    if (m == nullptr) continue;
    for (auto it = m->MemberBegin(); it != m->MemberEnd(); ++it) {
      std::string name(StringOf(it->name));
      if (!managed.contains(name)) continue;
      ASSIGN_OR_RETURN(
          int64_t n,
          DeviceQuantity(it->value,
                         absl::StrCat(kfield, "[\"", name, "\"]")));
      (*out)[name] = n;  // requests (read second) win over limits.
    }
  }
  return absl::OkStatus();
}

absl::Status SumContainers(const Value& spec, std::string_view key,
                           std::string_view field, bool init,
                           const ManagedResources& managed,
                           std::map<std::string, int64_t>* total) {
  ASSIGN_OR_RETURN(const Value* list, OptArray(spec, key, field));
  if (list == nullptr) return absl::OkStatus();
  for (rapidjson::SizeType i = 0; i < list->Size(); ++i) {
    std::map<std::string, int64_t> one;
    RETURN_IF_ERROR(ContainerResources((*list)[i],
                                       absl::StrCat(Sv(field), "[", i, "]"),
                                       managed, &one));
    for (const auto& [name, n] : one) {
      int64_t& t = (*total)[name];
      t = init ? std::max(t, n) : t + n;
    }
  }
  return absl::OkStatus();
}

void WriteFailedMap(json::Writer& w, const ExtenderArgs& args,
                    const FilterOutput& out,
                    const std::vector<std::pair<size_t, uint32_t>>& m) {
  w.StartObject();
  for (const auto& [i, why] : m) {
    json::Key(w, args.node_names[i]);
    w.Quoted(out.quoted_messages[why]);
  }
  w.EndObject();
}

}  // namespace

absl::StatusOr<PodPlacement> ReadPodPlacement(const Value& pod) {
  if (!pod.IsObject()) return TypeError("Pod", "must be an object");
  ASSIGN_OR_RETURN(const Value* meta, OptObject(pod, "metadata", "Pod.metadata"));
  if (meta == nullptr) return TypeError("Pod.metadata", "is required");
  ASSIGN_OR_RETURN(const Value* spec, OptObject(pod, "spec", "Pod.spec"));
  PodPlacement out;
  ASSIGN_OR_RETURN(std::string_view uid, json::ReqString(*meta, "uid", "Pod.metadata.uid"));
  RETURN_IF_ERROR(ValidateUid("Pod.metadata.uid", uid));
  out.uid = std::string(uid);
  out.deleting = !json::IsNullish(json::Find(*meta, "deletionTimestamp"));
  if (spec != nullptr) {
    ASSIGN_OR_RETURN(std::string_view node,
                     json::OptString(*spec, "nodeName", "Pod.spec.nodeName"));
    if (!node.empty()) RETURN_IF_ERROR(ValidateObjectName("Pod.spec.nodeName", node));
    out.node_name = std::string(node);
  }
  ASSIGN_OR_RETURN(const Value* status, OptObject(pod, "status", "Pod.status"));
  if (status != nullptr) {
    ASSIGN_OR_RETURN(std::string_view phase,
                     json::OptString(*status, "phase", "Pod.status.phase"));
    // PodPhase is one word of the API's enumeration (Pending, Running,
    // Succeeded, Failed, Unknown); a newer one is kept, a non-word is not.
    constexpr size_t kMaxPhaseLength = 32;
    if (phase.size() > kMaxPhaseLength ||
        !std::all_of(phase.begin(), phase.end(), absl::ascii_isalpha)) {
      return json::FieldError("Pod.status.phase",
                        absl::StrCat("must be one word of at most ", kMaxPhaseLength,
                                     " letters: ", model::QuoteForMessage(phase)));
    }
    out.phase = std::string(phase);
  }
  return out;
}

absl::StatusOr<PodRequest> PodToRequest(const Value& pod,
                                        const ManagedResources& managed) {
  if (!pod.IsObject()) return TypeError("Pod", "must be an object");
  ASSIGN_OR_RETURN(const Value* meta,
                   OptObject(pod, "metadata", "Pod.metadata"));
  if (meta == nullptr) return TypeError("Pod.metadata", "is required");
  PodRequest out;
  SchedulingRequest& r = out.request;
  ASSIGN_OR_RETURN(std::string_view name,
                   json::ReqString(*meta, "name", "Pod.metadata.name"));
  ASSIGN_OR_RETURN(std::string_view ns,
                   json::OptString(*meta, "namespace", "Pod.metadata.namespace",
                                   "default"));
  ASSIGN_OR_RETURN(std::string_view uid,
                   json::OptString(*meta, "uid", "Pod.metadata.uid"));
  // Checked before anything is kept, cached or logged.
  RETURN_IF_ERROR(ValidateObjectName("Pod.metadata.name", name));
  if (!ns.empty()) RETURN_IF_ERROR(ValidateNamespace("Pod.metadata.namespace", ns));
  if (!uid.empty()) RETURN_IF_ERROR(ValidateUid("Pod.metadata.uid", uid));
  r.pod_name = std::string(name);
  r.ns = ns.empty() ? "default" : std::string(ns);
  r.pod_uid = std::string(uid);

  ASSIGN_OR_RETURN(const Value* labels,
                   OptObject(*meta, "labels", "Pod.metadata.labels"));
  ASSIGN_OR_RETURN(const Value* annotations,
                   OptObject(*meta, "annotations", "Pod.metadata.annotations"));
  ASSIGN_OR_RETURN(std::string_view vm_label,
                   MapValue(labels, kVmNameLabel, "Pod.metadata.labels"));
  ASSIGN_OR_RETURN(
      std::string_view domain,
      MapValue(annotations, kDomainAnnotation, "Pod.metadata.annotations"));
  // The VM's name, whichever carries it, becomes part of claim names.
  if (!vm_label.empty()) {
    RETURN_IF_ERROR(ValidateObjectName(
        absl::StrCat("Pod.metadata.labels[\"", Sv(kVmNameLabel), "\"]"), vm_label));
  } else if (!domain.empty()) {
    RETURN_IF_ERROR(ValidateObjectName(
        absl::StrCat("Pod.metadata.annotations[\"", Sv(kDomainAnnotation), "\"]"), domain));
  }
  r.vm = VmIdentity(vm_label, domain, name);
  ASSIGN_OR_RETURN(std::string_view created_by,
                   MapValue(labels, kCreatedByLabel, "Pod.metadata.labels"));
  out.created_by = std::string(created_by);
  ASSIGN_OR_RETURN(std::vector<OwnerReference> owners,
                   ReadOwnerReferences(*meta, "Pod.metadata"));
  if (const OwnerReference* c = ControllerOf(owners)) out.controller = *c;

  ASSIGN_OR_RETURN(
      std::string_view claims,
      MapValue(annotations, kClaimsAnnotation, "Pod.metadata.annotations"));
  const std::string claims_field =
      absl::StrCat("Pod.metadata.annotations[\"", Sv(kClaimsAnnotation), "\"]");
  for (absl::string_view part : absl::StrSplit(Sv(claims), ',')) {
    absl::string_view c = absl::StripAsciiWhitespace(part);
    if (c.empty()) continue;
    RETURN_IF_ERROR(ValidateObjectName(claims_field, StdSv(c)));
    if (std::find(r.claim_names.begin(), r.claim_names.end(), c) ==
        r.claim_names.end()) {
      r.claim_names.emplace_back(c);
    }
  }

  ASSIGN_OR_RETURN(const Value* spec, OptObject(pod, "spec", "Pod.spec"));
  if (spec != nullptr) {
    std::map<std::string, int64_t> sum, init;
    RETURN_IF_ERROR(SumContainers(*spec, "containers", "Pod.spec.containers",
                                  false, managed, &sum));
    RETURN_IF_ERROR(SumContainers(*spec, "initContainers",
                                  "Pod.spec.initContainers", true, managed,
                                  &init));
    for (const auto& [res, n] : init) sum[res] = std::max(sum[res], n);
    for (const auto& [res, n] : sum) {
      // Each quantity is at most kMaxNodeDevices; their sum over the
      // containers is held to the same bound (one node must hold it all).
      if (n > kMaxNodeDevices) {
        return json::FieldError(
            "Pod.spec.containers",
            absl::StrCat("the containers request ", n, " ", res, " in all, more than ",
                         kMaxNodeDevices, ", the most one node may hold"));
      }
      if (n > 0) r.resources.emplace_back(res, n);
    }
  }
  out.pass_through = r.claim_names.empty() && r.resources.empty();
  return out;
}

void AppendJsonString(std::string_view s, std::string* out) {
  // Node names are DNS-1123 names: nothing to escape, copied as they are.
  // Anything else goes through the Writer so the bytes stay identical.
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == '"' || c == '\\') {
      out->append(json::Quote(s));
      return;
    }
  }
  out->push_back('"');
  out->append(s);
  out->push_back('"');
}

namespace {

void AppendFailedMap(const ExtenderArgs& args, const FilterOutput& out,
                     const std::vector<std::pair<size_t, uint32_t>>& m,
                     std::string* body) {
  body->push_back('{');
  bool first = true;
  for (const auto& [i, why] : m) {
    if (!first) body->push_back(',');
    first = false;
    AppendJsonString(args.node_names[i], body);
    body->push_back(':');
    body->append(out.quoted_messages[why]);
  }
  body->push_back('}');
}

// Names mode, straight into one string sized up front. Names read without
// escapes (the normal case) are copied as they are; others are checked.
std::string WriteFilterResultNames(const ExtenderArgs& args,
                                   const FilterOutput& out) {
  if (!args.names_unescaped) {
    std::string body;
    body.reserve(256);
    body.append(R"({"Nodes":null,"NodeNames":[)");
    bool first = true;
    for (size_t i : out.passed) {
      if (!first) body.push_back(',');
      first = false;
      AppendJsonString(args.node_names[i], &body);
    }
    body.append(R"(],"FailedNodes":)");
    AppendFailedMap(args, out, out.failed, &body);
    body.append(R"(,"FailedAndUnresolvableNodes":)");
    AppendFailedMap(args, out, out.unresolvable, &body);
    body.append(R"(,"Error":)");
    AppendJsonString(out.error, &body);
    body.push_back('}');
    return body;
  }
  constexpr std::string_view kHead = R"({"Nodes":null,"NodeNames":[)";
  constexpr std::string_view kFailed = R"(],"FailedNodes":{)";
  constexpr std::string_view kUnresolvable = R"(},"FailedAndUnresolvableNodes":{)";
  constexpr std::string_view kError = R"(},"Error":)";
  const std::string error = json::Quote(out.error);
  size_t size = kHead.size() + kFailed.size() + kUnresolvable.size() +
                kError.size() + error.size() + 1;
  for (size_t i : out.passed) size += args.node_names[i].size() + 3;
  for (const auto* m : {&out.failed, &out.unresolvable}) {
    for (const auto& [i, why] : *m) {
      size += args.node_names[i].size() + 4 + out.quoted_messages[why].size();
    }
  }
  std::string body(size, '\0');
  char* p = body.data();
  auto put = [&p](std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(kHead);
  for (size_t i : out.passed) {
    *p++ = '"';
    put(args.node_names[i]);
    *p++ = '"';
    *p++ = ',';
  }
  if (!out.passed.empty()) --p;  // The last comma.
  put(kFailed);
  for (const auto* m : {&out.failed, &out.unresolvable}) {
    if (m == &out.unresolvable) put(kUnresolvable);
    for (const auto& [i, why] : *m) {
      *p++ = '"';
      put(args.node_names[i]);
      *p++ = '"';
      *p++ = ':';
      put(out.quoted_messages[why]);
      *p++ = ',';
    }
    if (!m->empty()) --p;
  }
  put(kError);
  put(error);
  *p++ = '}';
  body.resize(static_cast<size_t>(p - body.data()));
  return body;
}

}  // namespace

std::string WriteFilterResult(const ExtenderArgs& args,
                              const FilterOutput& out) {
  if (!args.node_list_mode) return WriteFilterResultNames(args, out);
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Key(w, "Nodes");
  if (args.node_list_mode) {
    w.StartObject();
    // Keep the list's own members (kind, apiVersion, metadata) as sent.
    bool wrote_meta = false;
    for (auto it = args.node_list->MemberBegin();
         it != args.node_list->MemberEnd(); ++it) {
      std::string_view k = StringOf(it->name);
      if (k == "items" || k == "Items") continue;
      if (k == "metadata") wrote_meta = true;
      json::Key(w, k);
      it->value.Accept(w);
    }
    if (!wrote_meta) {
      json::Key(w, "metadata");
      w.StartObject();
      w.EndObject();
    }
    json::Key(w, "items");
    w.StartArray();
    for (size_t i : out.passed) args.node_items[i]->Accept(w);
    w.EndArray();
    w.EndObject();
  } else {
    w.Null();
  }
  json::Key(w, "NodeNames");
  if (args.node_list_mode) {
    w.Null();
  } else {
    w.StartArray();
    for (size_t i : out.passed) json::Str(w, args.node_names[i]);
    w.EndArray();
  }
  json::Key(w, "FailedNodes");
  WriteFailedMap(w, args, out, out.failed);
  json::Key(w, "FailedAndUnresolvableNodes");
  WriteFailedMap(w, args, out, out.unresolvable);
  json::Key(w, "Error");
  json::Str(w, out.error);
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteFilterError(std::string_view error) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Key(w, "Nodes");
  w.Null();
  json::Key(w, "NodeNames");
  w.Null();
  json::Key(w, "FailedNodes");
  w.Null();
  json::Key(w, "FailedAndUnresolvableNodes");
  w.Null();
  json::Key(w, "Error");
  json::Str(w, error);
  w.EndObject();
  return std::string(json::Output(buf));
}

std::string WriteHostPriorityList(absl::Span<const std::string_view> nodes,
                                  absl::Span<const int> scores) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartArray();
  for (size_t i = 0; i < nodes.size(); ++i) {
    w.StartObject();
    json::Key(w, "Host");
    json::Str(w, nodes[i]);
    json::Key(w, "Score");
    int s = i < scores.size() ? scores[i] : 0;
    w.Int(std::clamp(s, 0, kMaxExtenderPriority));
    w.EndObject();
  }
  w.EndArray();
  return std::string(json::Output(buf));
}

absl::StatusOr<std::vector<std::pair<std::string, int64_t>>>
ParseHostPriorityList(std::string_view body) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::Parse(body, &doc));
  if (doc.IsNull()) return std::vector<std::pair<std::string, int64_t>>();
  if (!doc.IsArray()) return TypeError("", "HostPriorityList must be an array");
  std::vector<std::pair<std::string, int64_t>> out;
  for (rapidjson::SizeType i = 0; i < doc.Size(); ++i) {
    const std::string at = absl::StrCat("[", i, "]");
    if (!doc[i].IsObject()) return TypeError(at, "must be an object");
    ASSIGN_OR_RETURN(std::string_view host,
                     json::ReqString(doc[i], "Host", absl::StrCat(at, ".Host")));
    ASSIGN_OR_RETURN(int64_t score,
                     json::ReqInt(doc[i], "Score", absl::StrCat(at, ".Score")));
    if (score < 0 || score > kMaxExtenderPriority) {
      return json::FieldError(absl::StrCat(at, ".Score"), "must be 0..10");
    }
    out.emplace_back(std::string(host), score);
  }
  return out;
}

absl::StatusOr<BindingArgs> ReadBindingArgs(const Value& doc) {
  if (!doc.IsObject()) {
    return TypeError("", "ExtenderBindingArgs must be an object");
  }
  BindingArgs b;
  ASSIGN_OR_RETURN(std::string_view name, json::ReqString(doc, "PodName", "PodName"));
  ASSIGN_OR_RETURN(std::string_view ns,
                   json::ReqString(doc, "PodNamespace", "PodNamespace"));
  ASSIGN_OR_RETURN(std::string_view uid, json::ReqString(doc, "PodUID", "PodUID"));
  ASSIGN_OR_RETURN(std::string_view node, json::ReqString(doc, "Node", "Node"));
  // Checked before the binder logs or records any of them.
  RETURN_IF_ERROR(ValidateObjectName("PodName", name));
  if (!ns.empty()) RETURN_IF_ERROR(ValidateNamespace("PodNamespace", ns));
  RETURN_IF_ERROR(ValidateUid("PodUID", uid));
  RETURN_IF_ERROR(ValidateObjectName("Node", node));
  b.pod_name = std::string(name);
  b.pod_namespace = ns.empty() ? "default" : std::string(ns);
  b.pod_uid = std::string(uid);
  b.node = std::string(node);
  return b;
}

std::string WriteBindingResult(std::string_view error) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Key(w, "Error");
  json::Str(w, error);
  w.EndObject();
  return std::string(json::Output(buf));
}

absl::StatusOr<PreemptionArgs> ReadPreemptionArgs(const Value& doc) {
  if (!doc.IsObject()) {
    return TypeError("", "ExtenderPreemptionArgs must be an object");
  }
  PreemptionArgs args;
  args.pod = Find(doc, "Pod");
  if (IsNullish(args.pod)) return TypeError("Pod", "is required");
  if (!args.pod->IsObject()) return TypeError("Pod", "must be an object");
  const Value* meta = Find(doc, "NodeNameToMetaVictims");
  const Value* full = Find(doc, "NodeNameToVictims");
  const bool use_meta = !IsNullish(meta);
  const Value* map = use_meta ? meta : full;
  const std::string_view field =
      use_meta ? "NodeNameToMetaVictims" : "NodeNameToVictims";
  if (IsNullish(map)) return args;
  if (!map->IsObject()) return TypeError(field, "must be an object");
  for (auto it = map->MemberBegin(); it != map->MemberEnd(); ++it) {
    NodeVictims nv;
    nv.node = StringOf(it->name);
    RETURN_IF_ERROR(ValidateObjectName(field, nv.node));
    const std::string at = absl::StrCat(Sv(field), "[\"", Sv(nv.node), "\"]");
    const Value& v = it->value;
    if (!v.IsNull()) {
      if (!v.IsObject()) return TypeError(at, "must be an object");
      ASSIGN_OR_RETURN(nv.num_pdb_violations,
                       json::OptInt(v, "NumPDBViolations",
                                    absl::StrCat(at, ".NumPDBViolations"), 0));
      ASSIGN_OR_RETURN(const Value* pods,
                       OptArray(v, "Pods", absl::StrCat(at, ".Pods")));
      for (rapidjson::SizeType i = 0; pods != nullptr && i < pods->Size(); ++i) {
        const std::string pat = absl::StrCat(at, ".Pods[", i, "]");
        const Value& p = (*pods)[i];
        if (!p.IsObject()) return TypeError(pat, "must be an object");
        if (use_meta) {
          ASSIGN_OR_RETURN(std::string_view uid,
                           json::ReqString(p, "UID", absl::StrCat(pat, ".UID")));
          RETURN_IF_ERROR(ValidateUid(absl::StrCat(pat, ".UID"), uid));
          nv.pod_uids.push_back(uid);
        } else {
          const Value* pm = Find(p, "metadata");
          if (IsNullish(pm) || !pm->IsObject()) {
            return TypeError(absl::StrCat(pat, ".metadata"), "is required");
          }
          ASSIGN_OR_RETURN(
              std::string_view uid,
              json::ReqString(*pm, "uid", absl::StrCat(pat, ".metadata.uid")));
          RETURN_IF_ERROR(ValidateUid(absl::StrCat(pat, ".metadata.uid"), uid));
          nv.pod_uids.push_back(uid);
        }
      }
    }
    args.nodes.push_back(std::move(nv));
  }
  return args;
}

std::string WritePreemptionResult(const PreemptionArgs& args,
                                  absl::Span<const size_t> keep) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  json::Key(w, "NodeNameToMetaVictims");
  w.StartObject();
  for (size_t i : keep) {
    const NodeVictims& nv = args.nodes[i];
    json::Key(w, nv.node);
    w.StartObject();
    json::Key(w, "Pods");
    w.StartArray();
    for (std::string_view uid : nv.pod_uids) {
      w.StartObject();
      json::Key(w, "UID");
      json::Str(w, uid);
      w.EndObject();
    }
    w.EndArray();
    json::Key(w, "NumPDBViolations");
    w.Int64(nv.num_pdb_violations);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

}  // namespace pdc::api
