// What pdc reads of any Kubernetes object and of the API's list and watch
// answers, decoded from JSON (k8s.io/apimachinery/pkg/apis/meta/v1):
// ObjectMeta and its OwnerReferences, ListMeta, WatchEvent, and the v1
// Status an error answer carries. Every string is checked against the
// bounds of api/validation.h, so an answer pdc cannot trust (a faulty or
// hostile apiserver, a proxy) is refused with the field named, never kept.
// Thread-safety: pure functions.
#ifndef PDC_API_KUBE_OBJECTS_H_
#define PDC_API_KUBE_OBJECTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/json_util.h"

namespace pdc::api {

struct OwnerReference {
  std::string api_version;  // "kubevirt.io/v1"
  std::string kind;         // "VirtualMachineInstance"
  std::string name;
  std::string uid;
  bool controller = false;

  bool operator==(const OwnerReference&) const = default;
};

struct ObjectMeta {
  std::string ns;  // "" for cluster-scoped objects.
  std::string name;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  bool deleting = false;  // metadata.deletionTimestamp is set.
  std::vector<OwnerReference> owners;
  std::vector<std::string> finalizers;

  // The owner reference with controller: true (at most one, by the API's
  // validation), or nullptr.
  const OwnerReference* Controller() const;
  // "<ns>/<name>", or "<name>" when cluster-scoped.
  std::string Key() const;
};

// metadata.ownerReferences of an object's `metadata` (absent: none);
// `field` is the metadata's path in errors ("Pod.metadata").
absl::StatusOr<std::vector<OwnerReference>> ReadOwnerReferences(const json::Value& metadata,
                                                                std::string_view field);
// The one with controller: true, or nullptr.
const OwnerReference* ControllerOf(const std::vector<OwnerReference>& owners);

// metadata of `object`; `field` names the object in errors ("Pod").
// metadata.name, uid and resourceVersion are required.
absl::StatusOr<ObjectMeta> ReadObjectMeta(const json::Value& object, std::string_view field);

// The metadata of a list answer.
struct ListMeta {
  std::string resource_version;
  std::string continue_token;  // "" on the last page.
};
absl::StatusOr<ListMeta> ReadListMeta(const json::Value& list);

enum class WatchEventType : uint8_t { kAdded, kModified, kDeleted, kBookmark, kError };
std::string_view ToString(WatchEventType type);

// One event of a watch stream: {"type": "...", "object": {...}}. `object`
// points into the parsed event.
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  const json::Value* object = nullptr;
};
absl::StatusOr<WatchEvent> ReadWatchEvent(const json::Value& event);

// The v1 Status of an error answer, or of a watch's ERROR event.
struct ApiStatus {
  int code = 0;  // HTTP status: 410 when the resourceVersion is gone.
  std::string reason;  // "Expired", "Gone", "Conflict", ...
  std::string message;
};
absl::StatusOr<ApiStatus> ReadApiStatus(const json::Value& status);

}  // namespace pdc::api

#endif  // PDC_API_KUBE_OBJECTS_H_
