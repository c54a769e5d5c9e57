#include "tests/testing/kube_resource_claims.h"

#include <set>
#include <string>
#include <vector>

#include "tests/testing/sv_strings.h"

namespace pdc::testing::kube {
namespace {

absl::Status ClaimInvalid(const Value& obj, std::string_view why) {
  return Invalid("ResourceClaim", "resource.k8s.io",
                 GetString(obj, {"metadata", "name"}), why);
}

const Value* ReservedFor(const Value& obj) {
  const Value* r = Find(obj, {"status", "reservedFor"});
  return r != nullptr && !r->IsNull() ? r : nullptr;
}

bool Allocated(const Value& obj) {
  const Value* a = Find(obj, {"status", "allocation"});
  return a != nullptr && !a->IsNull();
}

// validateResourceClaimConsumers: each entry names resource, name and uid
// (apiGroup may be anything, "" the core group); the list is a set keyed
// by uid, of at most ResourceClaimReservedForMaxSize entries.
absl::Status ValidateConsumers(const Value& obj, const Value& list) {
  if (!list.IsArray()) {
    return ClaimInvalid(obj, "status.reservedFor: Invalid value: must be a list");
  }
  if (list.Size() > kResourceClaimReservedForMaxSize) {
    return ClaimInvalid(obj, Cat("status.reservedFor: Too many: ", list.Size(),
                                 ": must have at most ",
                                 kResourceClaimReservedForMaxSize, " items"));
  }
  std::set<std::string> uids;
  for (rapidjson::SizeType i = 0; i < list.Size(); ++i) {
    const Value& e = list[i];
    const std::string at = Cat("status.reservedFor[", i, "]");
    if (!e.IsObject()) {
      return ClaimInvalid(obj, Cat(at, ": Invalid value: must be an object"));
    }
    for (std::string_view f : {"resource", "name", "uid"}) {
      if (GetString(e, {f}).empty()) {
        return ClaimInvalid(obj, Cat(at, ".", f, ": Required value"));
      }
    }
    const std::string uid = GetString(e, {"uid"});
    if (!uids.insert(uid).second) {
      return ClaimInvalid(obj,
                          Cat(at, ".uid: Duplicate value: \"", uid, "\""));
    }
  }
  return absl::OkStatus();
}

std::set<std::string> ConsumerUids(const Value* list) {
  std::set<std::string> out;
  if (list == nullptr || !list->IsArray()) return out;
  for (const Value& e : list->GetArray()) out.insert(GetString(e, {"uid"}));
  return out;
}

// ValidateResourceClaimStatusUpdate.
absl::Status ValidateStatus(const Value* old, const Value& obj) {
  const Value* reserved = ReservedFor(obj);
  if (reserved != nullptr) {
    if (absl::Status s = ValidateConsumers(obj, *reserved); !s.ok()) return s;
    // "ReservedFor may only be set when Allocation is set."
    if (!reserved->Empty() && !Allocated(obj)) {
      return ClaimInvalid(obj,
                          "status.reservedFor: Forbidden: may not be specified "
                          "when `allocated` is not set");
    }
  }
  if (old == nullptr) return absl::OkStatus();
  // No new consumers once the claim is being deleted.
  if (Find(*old, {"metadata", "deletionTimestamp"}) != nullptr) {
    const std::set<std::string> before = ConsumerUids(ReservedFor(*old));
    for (const std::string& uid : ConsumerUids(reserved)) {
      if (!before.count(uid)) {
        return ClaimInvalid(
            obj,
            "status.reservedFor: Forbidden: new entries may not be added "
            "while `deallocationRequested` or `deletionTimestamp` are set");
      }
    }
  }
  // An allocation is immutable once set; it may only be cleared.
  if (Allocated(*old) && Allocated(obj) &&
      !(*Find(*old, {"status", "allocation"}) ==
        *Find(obj, {"status", "allocation"}))) {
    return ClaimInvalid(
        obj, "status.allocation: Invalid value: field is immutable");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateResourceClaim(const Value* old, const Value& obj,
                                   std::string_view subresource) {
  if (old == nullptr) {
    if (Find(obj, {"spec"}) == nullptr) {
      return ClaimInvalid(obj, "spec: Required value");
    }
    return absl::OkStatus();
  }
  if (subresource == "status") return ValidateStatus(old, obj);
  // ValidateResourceClaimUpdate: the whole spec is immutable.
  const Value* before = Find(*old, {"spec"});
  const Value* after = Find(obj, {"spec"});
  const bool same = (before == nullptr || after == nullptr)
                        ? before == after
                        : *before == *after;
  if (!same) {
    return ClaimInvalid(obj, "spec: Invalid value: field is immutable");
  }
  return absl::OkStatus();
}

}  // namespace pdc::testing::kube
