// VmDirectory: which VM a pod belongs to, in Kubernetes mode, decided by
// UIDs and never by names or labels. It keeps the metadata of every
// VirtualMachineInstance and VirtualMachine (kubevirt.io/v1), fed by their
// reflectors (kube_reflector.h), and follows the chain KubeVirt builds
// (virt-controller sets these owner references):
//   virt-launcher pod --controller--> VirtualMachineInstance (same UID)
//                     --controller--> VirtualMachine (same UID)
// Every link must match by UID. A VMI with no VirtualMachine owner (a VMI
// created on its own) is its own VM. A pod whose chain does not resolve is
// not a VM pod: it takes over no claim, and filter says why. So a VM
// deleted and re-created under the same name is a different VM (another
// UID), and a pod that only carries the label vm.kubevirt.io/name of some
// VM is nobody's.
// It also says when a VM is gone (a VirtualMachine, or a VirtualMachineInstance
// that is its own VM, was deleted), so that pdc-extender releases what the
// VM held.
// Without a Kubernetes API (standalone) there is no directory and the
// label rules of api/scheduler_wire.h decide, as documented there.
// Thread-safety: thread-safe; the sinks are called by the reflectors'
// threads, Resolve from any.
#ifndef PDC_EXTENDER_VM_DIRECTORY_H_
#define PDC_EXTENDER_VM_DIRECTORY_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "allocator/allocator.h"
#include "api/kube_objects.h"
#include "api/scheduler_wire.h"
#include "extender/vm_claim_names.h"
#include "kube/kube_reflector.h"

namespace pdc::extender {

// The collections the directory follows (all namespaces).
inline constexpr std::string_view kVmiPath =
    kube::Reflected("/apis/kubevirt.io/v1/virtualmachineinstances");
inline constexpr std::string_view kVmPath = kube::Reflected("/apis/kubevirt.io/v1/virtualmachines");

// A VM, as the chain found it.
struct VmRef {
  std::string name;
  std::string uid;
  // The VMI has no VirtualMachine owner: it is the VM.
  bool standalone_vmi = false;
};

// The metadata of one kind of object, by "<ns>/<name>". Objects whose
// metadata pdc cannot read are not kept (and logged).
class MetaCache final : public kube::ReflectorSink {
 public:
  // Called, outside the cache's lock, with each object that left the cache
  // because it was deleted: a watch's DELETED, an object a relist no longer
  // holds, or one replaced by a newer object (another UID) of the same name.
  using RemovedFn = std::function<void(const api::ObjectMeta& removed)>;

  explicit MetaCache(std::string kind, RemovedFn on_removed = nullptr)
      : kind_(std::move(kind)), on_removed_(std::move(on_removed)) {}
  void Replace(const std::vector<const api::json::Value*>& items) override;
  void Upsert(const api::json::Value& object) override;
  void Remove(const api::json::Value& object) override;

  std::optional<api::ObjectMeta> Get(std::string_view ns, std::string_view name) const;
  size_t size() const;
  // The UIDs of every object held.
  absl::flat_hash_set<std::string> Uids() const;

 private:
  void Report(const std::vector<api::ObjectMeta>& removed) const;

  const std::string kind_;
  const RemovedFn on_removed_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, api::ObjectMeta> objects_ ABSL_GUARDED_BY(mu_);
};

// Feeds every event of one watch to two sinks.
class TeeSink final : public kube::ReflectorSink {
 public:
  TeeSink(kube::ReflectorSink* a, kube::ReflectorSink* b) : a_(a), b_(b) {}
  void Replace(const std::vector<const api::json::Value*>& items) override {
    a_->Replace(items);
    b_->Replace(items);
  }
  void Upsert(const api::json::Value& object) override {
    a_->Upsert(object);
    b_->Upsert(object);
  }
  void Remove(const api::json::Value& object) override {
    a_->Remove(object);
    b_->Remove(object);
  }

 private:
  kube::ReflectorSink* const a_;
  kube::ReflectorSink* const b_;
};

class VmDirectory {
 public:
  // A VM is gone: its namespace and UID.
  using VmGoneFn = std::function<void(std::string ns, std::string uid)>;

  // `on_vm_gone` is told, on a reflector's thread and outside the
  // directory's locks, when a VirtualMachine is deleted, and when a
  // VirtualMachineInstance without a controller (a standalone VMI: its own
  // VM) is. A VMI of a VirtualMachine going away (the VM stopped) is not a
  // VM gone. Not told: what was deleted before the first list.
  // `on_claims_named` is told (VmClaimNames::ChangedFn) when a VM starts
  // or stops naming claims.
  explicit VmDirectory(VmGoneFn on_vm_gone = nullptr,
                       VmClaimNames::ChangedFn on_claims_named = nullptr);

  kube::ReflectorSink* vmi_sink() { return &vmis_; }
  kube::ReflectorSink* vm_sink() { return &vm_tee_; }
  // The ResourceClaims each VirtualMachine's spec names.
  const VmClaimNames& claim_names() const { return claim_names_; }

  // The VM of a pod in `ns` whose controller owner reference is
  // `controller` (nullptr: none). FailedPrecondition, saying which link
  // broke, when the pod is not a VM pod; NotFound when the VMI or VM it
  // names is not held (deleted, or not seen yet: the caller cannot tell).
  absl::StatusOr<VmRef> Resolve(std::string_view ns,
                                const api::OwnerReference* controller) const;

  // The object that is the VM `vm` with `uid` in `ns` (a VirtualMachine,
  // or a VirtualMachineInstance that is its own VM), as an owner reference
  // for what belongs to the VM; nullopt when neither is known.
  std::optional<api::OwnerReference> OwnerOf(std::string_view ns, std::string_view vm,
                                             std::string_view uid) const;

  size_t vmis() const { return vmis_.size(); }
  size_t vms() const { return vms_.size(); }
  // Whether a VirtualMachine or a VirtualMachineInstance with `uid` is held.
  // Answers for many UIDs at once: one pass over each cache.
  std::vector<bool> HasUids(const std::vector<std::string>& uids) const;

 private:
  const VmGoneFn on_vm_gone_;
  MetaCache vmis_;
  MetaCache vms_;
  VmClaimNames claim_names_;
  TeeSink vm_tee_{&vms_, &claim_names_};
};

// Releases the reservations of the VM with `uid` in `ns`, which is gone
// (what pdc-extender does with VmDirectory's VmGoneFn), and logs what it
// released. Returns the claims released.
absl::StatusOr<std::vector<ClaimKey>> ReleaseGoneVm(Allocator& allocator, std::string_view ns,
                                                    std::string_view uid);

// Releases the reservations of every VM with a known UID that `directory`
// holds neither as a VirtualMachine nor as a VirtualMachineInstance: VMs
// deleted while pdc-extender was not watching. REQUIRES: both of the
// directory's caches hold a whole list. Returns the claims released,
// sorted; the first failure of the allocator, if any.
absl::StatusOr<std::vector<ClaimKey>> ReleaseVmsNotInDirectory(const VmDirectory& directory,
                                                               Allocator& allocator);

// What the verbs schedule: api::PodToRequest, and in Kubernetes mode
// (`directory` not null) the VM of a pod that needs managed devices from
// its owner chain, never from its labels (request.vm and request.vm_uid are
// set to it, request.vmi_uid to its VMI; a pass-through pod is left alone).
// A broken chain is the pod's problem (FieldError on
// Pod.metadata.ownerReferences), for filter's answer; so is a label
// kubevirt.io/created-by that does not name the controller VMI's UID (every
// pod virt-controller makes carries it). Owner references and labels can be
// copied by anyone who may create pods in the namespace: the allocator also
// refuses a second pod of a VMI whose launcher pod holds the claim
// (Reservation::vmi_uid).
absl::StatusOr<api::PodRequest> PodForScheduling(const api::json::Value& pod,
                                                 const api::ManagedResources& managed,
                                                 const VmDirectory* directory);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_VM_DIRECTORY_H_
