// The AdmissionReview wire format (admission.k8s.io/v1) of a mutating
// admission webhook, as kube-apiserver speaks it, and the JSON Patch
// (RFC 6902) that pins a pod to a node.
//
// What kube-apiserver sends and checks (k8s.io/api admission/v1 types.go;
// k8s.io/apiserver pkg/admission/plugin/webhook/request/admissionreview.go,
// CreateV1AdmissionReview and VerifyAdmissionResponse):
//  - the request is {"apiVersion": "admission.k8s.io/v1", "kind":
//    "AdmissionReview", "request": {...}} with request.uid, kind {group,
//    version, kind}, resource, name (empty on a CREATE whose object has only
//    metadata.generateName), namespace, operation (CREATE, UPDATE, DELETE,
//    CONNECT), userInfo, object, oldObject, dryRun, options; Go reads keys
//    case-insensitively, and so do we (json::Find);
//  - the answer must carry apiVersion admission.k8s.io/v1 and kind
//    AdmissionReview, response.uid equal to request.uid, and patch and
//    patchType together or not at all ("webhook returned response.patchType
//    but not response.patch" is an error); patch is the base64 of the JSON
//    Patch (a Go []byte), patchType "JSONPatch"; warnings are shown to the
//    client (kube-apiserver truncates long ones: keep them short).
// Thread-safety: pure functions; parsed values borrow from their input.
#ifndef PDC_API_ADMISSION_JSON_H_
#define PDC_API_ADMISSION_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/json_util.h"
#include "rapidjson/document.h"

namespace pdc::api {

inline constexpr std::string_view kAdmissionApiVersion = "admission.k8s.io/v1";
inline constexpr std::string_view kAdmissionReviewKind = "AdmissionReview";
// The one field a node selector term's matchFields may name: the node's
// name (the kubernetes.io/hostname label is not it on every distribution).
inline constexpr std::string_view kNodeNameField = "metadata.name";

struct GroupVersionKind {
  std::string group;  // "" for the core group (Pod).
  std::string version;
  std::string kind;
};

struct AdmissionRequest {
  std::string uid;  // Echoed in the answer; bounded like any UID.
  GroupVersionKind kind;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT.
  std::string ns;         // request.namespace.
  std::string name;       // request.name; "" when the server generates it.
  bool dry_run = false;
  // request.object; nullptr when absent or null (DELETE).
  const json::Value* object = nullptr;
};

// Parses `body` in place into `doc` (at most json::kMaxDepth deep) and reads
// the AdmissionReview. Errors are TypeError/FieldError naming the path
// ("request.uid", "kind"): not JSON, not an object, apiVersion or kind not
// admission.k8s.io/v1 AdmissionReview, no request, a request.uid that is
// missing or not a bounded UID, an operation or kind of the wrong type.
// A Pod object is completed as kube-apiserver will complete it after
// admission, so that it reads like a pod of the scheduler wire: with no
// metadata.name, the name becomes metadata.generateName without its trailing
// '-' (the pod's real name is generated later); with no
// metadata.namespace, request.namespace.
absl::StatusOr<AdmissionRequest> ParseAdmissionReview(std::string& body,
                                                      rapidjson::Document* doc);

// The shape of a pod's spec.affinity.nodeAffinity.
// requiredDuringSchedulingIgnoredDuringExecution, which decides the JSON
// Patch that adds a required node affinity expression.
struct RequiredNodeAffinity {
  enum class Term : uint8_t {
    kNull,            // A null entry (the API reads it as an empty term).
    kNoFields,        // An object without matchFields (or null ones).
    kFields,          // An object with a matchFields array.
  };
  bool affinity = false;       // spec.affinity is an object.
  bool node_affinity = false;  // ...nodeAffinity is an object.
  bool required = false;       // ...requiredDuringScheduling... is an object.
  bool terms_present = false;  // ...nodeSelectorTerms is an array.
  std::vector<Term> terms;
};

// What the webhook reads of a Pod beyond the scheduler wire's PodRequest.
struct AdmissionPod {
  bool has_spec = false;
  std::string scheduler_name;  // spec.schedulerName; "" when unset.
  std::string node_name;       // spec.nodeName; "" when unset.
  std::string launcher_label;  // metadata.labels["kubevirt.io"].
  RequiredNodeAffinity affinity;
};
// TypeError naming the path ("Pod.spec.affinity.nodeAffinity") when a
// member has the wrong JSON type.
absl::StatusOr<AdmissionPod> ReadAdmissionPod(const json::Value& pod);

// One RFC 6902 operation; `value` is a complete JSON text ("" = none).
struct JsonPatchOp {
  std::string op;  // "add" or "replace".
  std::string path;
  std::string value;

  bool operator==(const JsonPatchOp&) const = default;
};
// RFC 6901: '~' as "~0" and '/' as "~1", in that order.
std::string EscapeJsonPointer(std::string_view token);
// The JSON Patch document (a JSON array of operations).
std::string WriteJsonPatch(const std::vector<JsonPatchOp>& ops);

// The operations that require the pod's node to be `node` by name
// (matchFields metadata.name In [node], as the DaemonSet controller pins its
// pods), given its current required node affinity: the requirement is ANDed
// into every existing node selector term's matchFields (terms are ORed, so
// each must carry it; its matchExpressions are kept as they are), and
// whatever of spec.affinity/nodeAffinity/required/nodeSelectorTerms is
// missing (or null) is created. REQUIRES: `shape` has terms, or no
// nodeSelectorTerms array at all (an empty array matches no node; the
// caller leaves such a pod alone).
std::vector<JsonPatchOp> RequireNodeNamePatch(const RequiredNodeAffinity& shape,
                                              std::string_view node);

struct AdmissionResponse {
  std::string uid;
  // The JSON Patch text; "" = no patch (and no patchType).
  std::string patch;
  std::vector<std::string> warnings;
  // false: the request is refused with `message` (status.code 403,
  // kube-apiserver shows "admission webhook ... denied the request:
  // <message>"); no patch then.
  bool allowed = true;
  std::string message;
};
// The answer.
std::string WriteAdmissionReview(const AdmissionResponse& response);

}  // namespace pdc::api

#endif  // PDC_API_ADMISSION_JSON_H_
