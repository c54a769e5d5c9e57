#include "api/admission_json.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "api/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model/names.h"

namespace pdc::api {

namespace {

using json::FieldOf;
using json::OptArray;
using json::OptObject;
using json::TypeError;
using json::Value;

// Every problem with the review itself is the caller's (HTTP 400), also a
// well-formed value pdc does not accept (a UID out of bounds).
absl::Status BadRequest(absl::Status s) {
  const std::string field = FieldOf(s);
  return json::WithField(std::move(s), field, 400);
}

// A short bounded token of the review (operation, group, version, kind).
absl::StatusOr<std::string> ReadToken(const Value& obj, std::string_view key,
                                      std::string_view field) {
  ASSIGN_OR_RETURN(std::string_view s, json::OptString(obj, key, field));
  if (s.size() > 253) {
    return TypeError(field, absl::StrCat("is longer than 253 bytes: ",
                                         model::QuoteForMessage(s)));
  }
  return std::string(s);
}

// Fills metadata.name (from generateName) and metadata.namespace (from the
// request) of a pod that kube-apiserver completes only after admission.
absl::Status CompletePod(Value& pod, std::string_view request_ns,
                         rapidjson::Document::AllocatorType& alloc) {
  if (!pod.IsObject()) return TypeError("request.object", "must be an object");
  Value* meta = const_cast<Value*>(json::Find(pod, "metadata"));
  if (meta == nullptr || meta->IsNull()) return absl::OkStatus();  // PodToRequest says why.
  if (!meta->IsObject()) return TypeError("request.object.metadata", "must be an object");
  ASSIGN_OR_RETURN(std::string_view name,
                   json::OptString(*meta, "name", "request.object.metadata.name"));
  if (name.empty()) {
    ASSIGN_OR_RETURN(std::string_view generate,
                     json::OptString(*meta, "generateName",
                                     "request.object.metadata.generateName"));
    while (!generate.empty() && generate.back() == '-') generate.remove_suffix(1);
    if (!generate.empty()) {
      meta->RemoveMember("name");
      meta->AddMember("name", Value(generate.data(), static_cast<rapidjson::SizeType>(generate.size()), alloc),
                      alloc);
    }
  }
  ASSIGN_OR_RETURN(std::string_view ns,
                   json::OptString(*meta, "namespace", "request.object.metadata.namespace"));
  if (ns.empty() && !request_ns.empty()) {
    meta->RemoveMember("namespace");
    meta->AddMember("namespace",
                    Value(request_ns.data(), static_cast<rapidjson::SizeType>(request_ns.size()),
                          alloc),
                    alloc);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AdmissionRequest> ParseAdmissionReview(std::string& body,
                                                      rapidjson::Document* doc) {
  RETURN_IF_ERROR(json::ParseInsitu(body, doc));
  if (!doc->IsObject()) return TypeError("", "the AdmissionReview must be a JSON object");
  ASSIGN_OR_RETURN(std::string_view api_version,
                   json::OptString(*doc, "apiVersion", "apiVersion"));
  if (api_version != kAdmissionApiVersion) {
    return TypeError("apiVersion",
                     absl::StrCat("must be ", Sv(kAdmissionApiVersion), ", got ",
                                  model::QuoteForMessage(api_version),
                                  " (the webhook configuration's admissionReviewVersions "
                                  "must be [v1])"));
  }
  ASSIGN_OR_RETURN(std::string_view kind, json::OptString(*doc, "kind", "kind"));
  if (kind != kAdmissionReviewKind) {
    return TypeError("kind", absl::StrCat("must be ", Sv(kAdmissionReviewKind), ", got ",
                                          model::QuoteForMessage(kind)));
  }
  ASSIGN_OR_RETURN(const Value* request, OptObject(*doc, "request", "request"));
  if (request == nullptr) return TypeError("request", "is required");
  AdmissionRequest out;
  ASSIGN_OR_RETURN(std::string_view uid, json::ReqString(*request, "uid", "request.uid"));
  if (absl::Status s = ValidateUid("request.uid", uid); !s.ok()) return BadRequest(s);
  out.uid = std::string(uid);
  ASSIGN_OR_RETURN(const Value* gvk, OptObject(*request, "kind", "request.kind"));
  if (gvk != nullptr) {
    ASSIGN_OR_RETURN(out.kind.group, ReadToken(*gvk, "group", "request.kind.group"));
    ASSIGN_OR_RETURN(out.kind.version, ReadToken(*gvk, "version", "request.kind.version"));
    ASSIGN_OR_RETURN(out.kind.kind, ReadToken(*gvk, "kind", "request.kind.kind"));
  }
  ASSIGN_OR_RETURN(out.operation, ReadToken(*request, "operation", "request.operation"));
  ASSIGN_OR_RETURN(std::string_view ns,
                   json::OptString(*request, "namespace", "request.namespace"));
  if (!ns.empty()) {
    if (absl::Status s = ValidateNamespace("request.namespace", ns); !s.ok()) {
      return BadRequest(s);
    }
  }
  out.ns = std::string(ns);
  ASSIGN_OR_RETURN(std::string_view name, json::OptString(*request, "name", "request.name"));
  if (name.size() > 253) {
    return TypeError("request.name", absl::StrCat("is longer than 253 bytes: ",
                                                  model::QuoteForMessage(name)));
  }
  out.name = std::string(name);
  ASSIGN_OR_RETURN(out.dry_run, json::OptBool(*request, "dryRun", "request.dryRun", false));
  Value* object = const_cast<Value*>(json::Find(*request, "object"));
  if (!json::IsNullish(object)) {
    if (out.kind.group.empty() && out.kind.kind == "Pod") {
      RETURN_IF_ERROR(CompletePod(*object, out.ns, doc->GetAllocator()));
    }
    out.object = object;
  }
  return out;
}

absl::StatusOr<AdmissionPod> ReadAdmissionPod(const Value& pod) {
  if (!pod.IsObject()) return TypeError("Pod", "must be an object");
  AdmissionPod out;
  ASSIGN_OR_RETURN(const Value* meta, OptObject(pod, "metadata", "Pod.metadata"));
  if (meta != nullptr) {
    ASSIGN_OR_RETURN(const Value* labels, OptObject(*meta, "labels", "Pod.metadata.labels"));
    if (labels != nullptr) {
      const Value* l = json::Find(*labels, "kubevirt.io");
      if (!json::IsNullish(l)) {
        if (!l->IsString()) return TypeError("Pod.metadata.labels[\"kubevirt.io\"]", "must be a string");
        out.launcher_label = std::string(json::StringOf(*l));
      }
    }
  }
  ASSIGN_OR_RETURN(const Value* spec, OptObject(pod, "spec", "Pod.spec"));
  if (spec == nullptr) return out;
  out.has_spec = true;
  ASSIGN_OR_RETURN(std::string_view scheduler,
                   json::OptString(*spec, "schedulerName", "Pod.spec.schedulerName"));
  out.scheduler_name = std::string(scheduler);
  ASSIGN_OR_RETURN(std::string_view node, json::OptString(*spec, "nodeName", "Pod.spec.nodeName"));
  out.node_name = std::string(node);
  RequiredNodeAffinity& a = out.affinity;
  ASSIGN_OR_RETURN(const Value* affinity, OptObject(*spec, "affinity", "Pod.spec.affinity"));
  if (affinity == nullptr) return out;
  a.affinity = true;
  ASSIGN_OR_RETURN(const Value* na, OptObject(*affinity, "nodeAffinity",
                                              "Pod.spec.affinity.nodeAffinity"));
  if (na == nullptr) return out;
  a.node_affinity = true;
  constexpr std::string_view kRequiredPath =
      "Pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
  ASSIGN_OR_RETURN(const Value* required,
                   OptObject(*na, "requiredDuringSchedulingIgnoredDuringExecution", kRequiredPath));
  if (required == nullptr) return out;
  a.required = true;
  const std::string terms_path = absl::StrCat(Sv(kRequiredPath), ".nodeSelectorTerms");
  ASSIGN_OR_RETURN(const Value* terms, OptArray(*required, "nodeSelectorTerms", terms_path));
  if (terms == nullptr) return out;
  a.terms_present = true;
  a.terms.reserve(terms->Size());
  for (rapidjson::SizeType i = 0; i < terms->Size(); ++i) {
    const Value& t = (*terms)[i];
    if (t.IsNull()) {
      a.terms.push_back(RequiredNodeAffinity::Term::kNull);
      continue;
    }
    const std::string tp = absl::StrCat(terms_path, "[", i, "]");
    if (!t.IsObject()) return TypeError(tp, "must be an object");
    ASSIGN_OR_RETURN(const Value* fields,
                     OptArray(t, "matchFields", absl::StrCat(tp, ".matchFields")));
    a.terms.push_back(fields == nullptr ? RequiredNodeAffinity::Term::kNoFields
                                        : RequiredNodeAffinity::Term::kFields);
  }
  return out;
}

std::string EscapeJsonPointer(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string WriteJsonPatch(const std::vector<JsonPatchOp>& ops) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartArray();
  for (const JsonPatchOp& op : ops) {
    w.StartObject();
    w.Text("op");
    w.Text(op.op);
    w.Text("path");
    w.Text(op.path);
    if (!op.value.empty()) {
      w.Text("value");
      w.RawValue(op.value.data(), op.value.size(), rapidjson::kObjectType);
    }
    w.EndObject();
  }
  w.EndArray();
  return std::string(json::Output(buf));
}

std::vector<JsonPatchOp> RequireNodeNamePatch(const RequiredNodeAffinity& shape,
                                              std::string_view node) {
  // {"key": "metadata.name", "operator": "In", "values": [node]}
  std::string expr;
  {
    rapidjson::StringBuffer buf;
    json::Writer w(buf);
    w.StartObject();
    w.Text("key");
    w.Text(kNodeNameField);
    w.Text("operator");
    w.Text("In");
    w.Text("values");
    w.StartArray();
    w.Text(node);
    w.EndArray();
    w.EndObject();
    expr = std::string(json::Output(buf));
  }
  const std::string exprs = absl::StrCat("[", expr, "]");
  const std::string term = absl::StrCat("{\"matchFields\":", exprs, "}");
  const std::string terms = absl::StrCat("[", term, "]");
  const std::string required = absl::StrCat("{\"nodeSelectorTerms\":", terms, "}");
  const std::string node_affinity =
      absl::StrCat("{\"requiredDuringSchedulingIgnoredDuringExecution\":", required, "}");
  std::string path = "/" + EscapeJsonPointer("spec") + "/" + EscapeJsonPointer("affinity");
  // "add" on an object member that exists (a null one here) replaces it
  // (RFC 6902 §4.1), so a null level is created like a missing one.
  if (!shape.affinity) {
    return {{"add", path, absl::StrCat("{\"nodeAffinity\":", node_affinity, "}")}};
  }
  absl::StrAppend(&path, "/", EscapeJsonPointer("nodeAffinity"));
  if (!shape.node_affinity) return {{"add", path, node_affinity}};
  absl::StrAppend(&path, "/", EscapeJsonPointer("requiredDuringSchedulingIgnoredDuringExecution"));
  if (!shape.required) return {{"add", path, required}};
  absl::StrAppend(&path, "/", EscapeJsonPointer("nodeSelectorTerms"));
  if (!shape.terms_present) return {{"add", path, terms}};
  std::vector<JsonPatchOp> ops;
  ops.reserve(shape.terms.size());
  for (size_t i = 0; i < shape.terms.size(); ++i) {
    const std::string tp = absl::StrCat(path, "/", i);
    switch (shape.terms[i]) {
      case RequiredNodeAffinity::Term::kNull:
        // "add" at an array index inserts; the null entry is replaced.
        ops.push_back({"replace", tp, term});
        break;
      case RequiredNodeAffinity::Term::kNoFields:
        ops.push_back({"add", absl::StrCat(tp, "/", EscapeJsonPointer("matchFields")), exprs});
        break;
      case RequiredNodeAffinity::Term::kFields:
        ops.push_back(
            {"add", absl::StrCat(tp, "/", EscapeJsonPointer("matchFields"), "/-"), expr});
        break;
    }
  }
  return ops;
}

std::string WriteAdmissionReview(const AdmissionResponse& response) {
  rapidjson::StringBuffer buf;
  json::Writer w(buf);
  w.StartObject();
  w.Text("apiVersion");
  w.Text(kAdmissionApiVersion);
  w.Text("kind");
  w.Text(kAdmissionReviewKind);
  w.Text("response");
  w.StartObject();
  w.Text("uid");
  w.Text(response.uid);
  w.Text("allowed");
  w.Bool(response.allowed);
  if (!response.allowed) {
    w.Text("status");
    w.StartObject();
    w.Text("code");
    w.Int(403);
    w.Text("message");
    w.Text(response.message);
    w.EndObject();
  } else if (!response.patch.empty()) {
    w.Text("patchType");
    w.Text("JSONPatch");
    w.Text("patch");
    w.Text(absl::Base64Escape(response.patch));
  }
  if (!response.warnings.empty()) {
    w.Text("warnings");
    w.StartArray();
    for (const std::string& s : response.warnings) w.Text(s);
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  return std::string(json::Output(buf));
}

}  // namespace pdc::api
