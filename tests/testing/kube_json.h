// JSON pieces of the kube-apiserver double (kube_apiserver_double.h): errors
// as v1 Status objects, RFC 7386 merge patches, label selectors, field
// access on RapidJSON objects, UUIDs and RFC 3339 times.
// Thread-safety: pure functions, except RandomUuid/RandomSuffix (thread-safe).
#ifndef PDC_TESTS_TESTING_KUBE_JSON_H_
#define PDC_TESTS_TESTING_KUBE_JSON_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rapidjson/document.h"

namespace pdc::testing::kube {

using Value = rapidjson::Value;
using Document = rapidjson::Document;
using Allocator = rapidjson::Document::AllocatorType;

// --- Errors -------------------------------------------------------------
// An API error: the HTTP code, the StatusReason and what the v1 Status's
// details name. Carried in an absl::Status (as payloads) so that the
// double's code returns absl::Status like the rest of pdc.
struct ApiErrorInfo {
  ApiErrorInfo() = default;
  ApiErrorInfo(int c, std::string r, std::string n = "")
      : code(c), reason(std::move(r)), name(std::move(n)) {}
  int code = 500;
  std::string reason = "InternalError";
  std::string name;   // details.name
  std::string group;  // details.group
  std::string kind;   // details.kind (the resource, as the apiserver says)
};
absl::Status ApiError(const ApiErrorInfo& info, std::string_view message);
// The info attached by ApiError; other errors map to 500 InternalError
// (Unavailable from etcd: 503 ServiceUnavailable, DeadlineExceeded: 504
// Timeout).
ApiErrorInfo ApiErrorOf(const absl::Status& s);
// The v1 Status object for `s` (k8s.io/apimachinery/pkg/apis/meta/v1
// types.go, Status; apimachinery/pkg/api/errors/errors.go builds them):
// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
//  "message":...,"reason":...,"details":{...},"code":...}.
std::string StatusJson(const absl::Status& s);
// The success Status some calls answer with (pods/binding: code 201).
std::string SuccessStatusJson(int code);

// Shorthands for the errors of k8s.io/apimachinery/pkg/api/errors/errors.go
// (`resource` is the qualified resource: "pods",
// "persistentdeviceclaims.pdc.kubevirt.io").
absl::Status NotFound(std::string_view resource, std::string_view name);
absl::Status AlreadyExists(std::string_view resource, std::string_view name);
// "Operation cannot be fulfilled on <resource> \"<name>\": <why>".
absl::Status Conflict(std::string_view resource, std::string_view name,
                      std::string_view why);
absl::Status BadRequest(std::string_view message);
// 422, reason Invalid: "<Kind>[.<group>] \"<name>\" is invalid: <why>"
// (errors.NewInvalid names the GroupKind).
absl::Status Invalid(std::string_view kind, std::string_view group,
                     std::string_view name, std::string_view why);
// 410, reason Expired.
absl::Status Expired(std::string_view message);

// The message of an optimistic-lock conflict (OptimisticLockErrorMsg,
// k8s.io/apiserver/pkg/registry/generic/registry/store.go).
inline constexpr std::string_view kOptimisticLockMessage =
    "the object has been modified; please apply your changes to the latest "
    "version and try "
    "again";

// --- JSON ---------------------------------------------------------------
absl::StatusOr<Document> ParseObject(std::string_view text,
                                     std::string_view what);
std::string ToJson(const Value& v);
// The member at `path` ({"metadata", "name"}), nullptr when any step is
// missing or not an object.
const Value* Find(const Value& obj,
                  std::initializer_list<std::string_view> path);
Value* FindMutable(Value& obj, std::initializer_list<std::string_view> path);
// The string at `path`, "" when absent or not a string.
std::string GetString(const Value& obj,
                      std::initializer_list<std::string_view> path);
int64_t GetInt(const Value& obj, std::initializer_list<std::string_view> path);
// Sets `path` (creating objects on the way; a non-object on the way is
// replaced) to `v`.
void Set(Value& obj, std::initializer_list<std::string_view> path, Value v,
         Allocator& a);
void SetString(Value& obj, std::initializer_list<std::string_view> path,
               std::string_view s, Allocator& a);
// Removes the member at `path` if present.
void Remove(Value& obj, std::initializer_list<std::string_view> path);
// The strings of the array at `path` (non-strings skipped).
std::vector<std::string> GetStrings(
    const Value& obj, std::initializer_list<std::string_view> path);

// RFC 7386 JSON Merge Patch: `patch` applied to `target` in place. A
// non-object patch replaces the target.
void ApplyMergePatch(Value& target, const Value& patch, Allocator& a);

// --- Label selectors ----------------------------------------------------
// k8s.io/apimachinery/pkg/labels/selector.go: requirements separated by
// commas: k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k.
class LabelSelector {
 public:
  static absl::StatusOr<LabelSelector> Parse(std::string_view text);
  // `labels`: the object's metadata.labels (may be null).
  bool Matches(const Value* labels) const;
  bool empty() const { return requirements_.empty(); }

 private:
  struct Requirement {
    enum class Op { kIn, kNotIn, kExists, kNotExists };
    std::string key;
    Op op = Op::kExists;
    std::vector<std::string> values;
  };
  std::vector<Requirement> requirements_;
};

// --- Identity and time --------------------------------------------------
// A random RFC 4122 version 4 UUID.
std::string RandomUuid();
// `n` random characters from the alphabet of generated names
// (k8s.io/apimachinery/pkg/util/rand: "bcdfghjklmnpqrstvwxz2456789").
std::string RandomSuffix(int n);
// RFC 3339 in UTC to the second, as metav1.Time marshals.
std::string Rfc3339(absl::Time t);

}  // namespace pdc::testing::kube

#endif  // PDC_TESTS_TESTING_KUBE_JSON_H_
