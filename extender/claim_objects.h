// ClaimObjects: the store protocol of PersistentDeviceClaim objects, what
// KubeApiStore (kube_api_store.h) records a claim with:
//  - what this process knows of each object (UID, resourceVersion,
//    generation, finalizers, the status it last wrote or read), kept
//    current by the claim watch (Observe/Forget) and by every answer of a
//    write, never going back to an older resourceVersion;
//  - writes that carry the object's UID and resourceVersion as
//    preconditions: a claim's status (creating the object of a template
//    claim first), conditions, pdc's finalizer, a delete. A stale
//    resourceVersion (409) reads the object again and repeats the write
//    while it is still the same object; an object that is gone, or that is
//    another object under the name now, is not written;
//  - which claims' last record could not be written (another object under
//    the name, none) and Recorded(), what a bind checks before it is
//    acknowledged.
// It does not decide what to write: KubeApiStore does (which claims, in
// which order), and the reclaim of a deleted claim is ClaimReclaims'.
// Thread-safety: thread-safe; the writes are made by KubeApiStore's one
// writer at a time, Observe/Forget/Object/Recorded come from any thread.
#ifndef PDC_EXTENDER_CLAIM_OBJECTS_H_
#define PDC_EXTENDER_CLAIM_OBJECTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/claim_object.h"
#include "api/kube_objects.h"
#include "extender/kube_store_calls.h"
#include "kube/kube_reflector.h"
#include "model/types.h"

namespace pdc::extender {

// The claims pdc-extender lists and watches (all namespaces).
inline constexpr std::string_view kClaimsPath =
    kube::Reflected("/apis/pdc.kubevirt.io/v1alpha1/persistentdeviceclaims");

// What the store knows of a claim object.
struct ClaimObjectState {
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::vector<std::string> finalizers;
  bool deleting = false;
  // The allocator's UID for the claim this object records: the object's
  // UID, except for a template claim this process created (the allocator
  // named it before the object existed).
  std::string claim_uid;
  // The phase its status last had, as far as this process knows.
  std::optional<ClaimPhase> phase;
  // The conditions its status last had (for their transition times).
  std::vector<api::ClaimCondition> conditions = {};
  // Its controller is a VM: a claim pdc generated from the VM's template.
  bool generated = false;
  // The node and devices its status last named (Bound or Lost), as far
  // as this process knows.
  std::string node = {};
  std::vector<PciAddress> devices = {};
  // The pod its status last reserved it for ("" none), as far as this
  // process knows.
  std::string reserved_pod_uid = {};
};

// Devices of a claim that holds some (Bound or Lost).
bool HoldsDevices(const Claim& c);

// kube-apiserver refused a write of one object (403 from an authorizer or
// an admission plugin: RBAC, a policy engine, a quota, a namespace being
// deleted, OwnerReferencesPermissionEnforcement; 400/422 from validation):
// that object's write fails, not the store.
bool IsObjectRefusal(const absl::Status& s);

class ClaimObjects {
 public:
  // The controlling owner of a template claim: the VM (or standalone VMI)
  // `vm` with `uid` in `ns`; nullopt when it is not known any more.
  using OwnerOf = std::function<std::optional<api::OwnerReference>(
      std::string_view ns, std::string_view vm, std::string_view uid)>;
  struct Options {
    OwnerOf owner_of;
    // Called after a claim's status was recorded, with the object's UID and
    // the phase before; may be empty.
    std::function<void(const Claim&, std::string_view uid, std::optional<ClaimPhase> before)>
        on_status;
    // Called after an object was forgotten (Forget: it is gone), outside
    // the lock; may be empty.
    std::function<void(const ClaimKey&, std::string_view uid)> on_forget;
  };

  // `calls` must outlive this.
  ClaimObjects(const StoreCalls* calls, Options options)
      : calls_(calls), options_(std::move(options)) {}

  // Lists every claim object. One whose spec cannot be read but whose
  // status names devices is listed status-only (spec_problem says why);
  // one whose status does not read either is DataLoss; others that do not
  // read are logged and left out.
  absl::Status List(std::vector<api::ClaimObject>* out) const;

  // The object as recovery read it, replacing what was known of its key.
  void Restore(const api::ClaimObject& o);

  // News from the claim watch: a newer resourceVersion of an object (an
  // older one is kept only when nothing newer is known).
  void Observe(const api::ObjectMeta& meta);
  // The object is gone (only if it still has `uid`).
  void Forget(const ClaimKey& key, std::string_view uid);
  // The object of the allocator's claim `claim_uid` was deleted while the
  // allocator keeps the claim (its finalizer taken off by hand while a pod
  // of its VM runs): a status write does not create it again, the claim is
  // on its way out. Until Dropped(claim_uid).
  void ObjectDeleted(std::string_view claim_uid);
  // The allocator let the claim `claim_uid` go.
  void Dropped(std::string_view claim_uid);
  std::optional<ClaimObjectState> Object(const ClaimKey& key) const;
  // Reads the object again (NotFound, and forgotten, when it is gone).
  absl::StatusOr<ClaimObjectState> Reread(const ClaimKey& key, absl::Time deadline);

  // Writes `claim`'s status, with `facts` (one per device) and, when
  // `conflict` is not empty, a DeviceConflict condition with that message.
  // A template claim without an object gets one created. A claim whose
  // object is gone or is another object now is not written: OK, and
  // Recorded() says why from then on. A write the apiserver refuses
  // (IsObjectRefusal) is that refusal, and Recorded() says it too.
  absl::Status WriteStatus(const Claim& claim, const std::vector<api::DeviceFacts>& facts,
                           std::string_view conflict = {});
  // Writes the conditions `make` computes from the object's state into the
  // status of `key`'s object with `uid`. True when written; false when
  // that object is gone or another object holds the name.
  using MakeConditions = std::function<std::vector<api::ClaimCondition>(const ClaimObjectState&)>;
  absl::StatusOr<bool> WriteConditions(const ClaimKey& key, std::string_view uid,
                                       const MakeConditions& make, std::string_view what);
  // Sets pdc's finalizer on the object (`present`) or takes it off; OK when
  // it already is so or the object is gone (or, with `uid`, is another
  // object now).
  absl::Status SetFinalizer(const ClaimKey& key, bool present, std::string_view uid = {});
  // Deletes `key`'s object with `uid` (a precondition). True when the API
  // took the delete; false when that object is gone already or another
  // holds the name.
  absl::StatusOr<bool> Delete(const ClaimKey& key, std::string_view uid);

  // A claim's record that could not be written, and why; kept until a
  // write records it or Recorded(key) is cleared.
  void Unrecorded(const ClaimKey& key, std::string why);
  void ClearUnrecorded(const ClaimKey& key);
  // Whether the API holds the claim `key` with allocator UID `claim_uid`
  // as Bound on `node` and reserved for pod `pod_uid`, as this process last
  // wrote or read it: OK, else FailedPrecondition saying what it holds.
  absl::Status Recorded(const ClaimKey& key, std::string_view claim_uid, std::string_view node,
                        std::string_view pod_uid) const;

 private:
  absl::Status Create(const Claim& claim);
  void Remember(const ClaimKey& key, ClaimObjectState state);
  // Observe()s the claim object an apiserver answer holds.
  absl::Status ObserveAnswer(std::string_view body);

  const StoreCalls* const calls_;
  const Options options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<ClaimKey, ClaimObjectState> objects_ ABSL_GUARDED_BY(mu_);
  // Template claims being created: key -> the allocator's UID, for an
  // object the watch shows before the create's answer arrives.
  absl::flat_hash_map<ClaimKey, std::string> creating_ ABSL_GUARDED_BY(mu_);
  // Claims (their UIDs) whose object was deleted while the allocator kept
  // them: a status write does not create their object again.
  absl::flat_hash_set<std::string> deleted_ ABSL_GUARDED_BY(mu_);
  // Claims whose last record could not be written, and why.
  absl::flat_hash_map<ClaimKey, std::string> unrecorded_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_CLAIM_OBJECTS_H_
