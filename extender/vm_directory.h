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
// Without a Kubernetes API (standalone) there is no directory and the
// label rules of api/scheduler_wire.h decide, as documented there.
// Thread-safety: thread-safe; the sinks are called by the reflectors'
// threads, Resolve from any.
#ifndef PDC_EXTENDER_VM_DIRECTORY_H_
#define PDC_EXTENDER_VM_DIRECTORY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/kube_objects.h"
#include "api/scheduler_wire.h"
#include "extender/kube_reflector.h"

namespace pdc::extender {

// The collections the directory follows (all namespaces).
inline constexpr std::string_view kVmiPath =
    Reflected("/apis/kubevirt.io/v1/virtualmachineinstances");
inline constexpr std::string_view kVmPath = Reflected("/apis/kubevirt.io/v1/virtualmachines");

// A VM, as the chain found it.
struct VmRef {
  std::string name;
  std::string uid;
  // The VMI has no VirtualMachine owner: it is the VM.
  bool standalone_vmi = false;
};

// The metadata of one kind of object, by "<ns>/<name>". Objects whose
// metadata pdc cannot read are not kept (and logged).
class MetaCache final : public ReflectorSink {
 public:
  explicit MetaCache(std::string kind) : kind_(std::move(kind)) {}
  void Replace(const std::vector<const api::json::Value*>& items) override;
  void Upsert(const api::json::Value& object) override;
  void Remove(const api::json::Value& object) override;

  std::optional<api::ObjectMeta> Get(std::string_view ns, std::string_view name) const;
  size_t size() const;

 private:
  const std::string kind_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, api::ObjectMeta> objects_ ABSL_GUARDED_BY(mu_);
};

class VmDirectory {
 public:
  ReflectorSink* vmi_sink() { return &vmis_; }
  ReflectorSink* vm_sink() { return &vms_; }

  // The VM of a pod in `ns` whose controller owner reference is
  // `controller` (nullptr: none). FailedPrecondition, saying which link
  // broke, when the pod is not a VM pod.
  absl::StatusOr<VmRef> Resolve(std::string_view ns,
                                const api::OwnerReference* controller) const;

  // The object that is the VM `vm` with `uid` in `ns` (a VirtualMachine,
  // or a VirtualMachineInstance that is its own VM), as an owner reference
  // for what belongs to the VM; nullopt when neither is known.
  std::optional<api::OwnerReference> OwnerOf(std::string_view ns, std::string_view vm,
                                             std::string_view uid) const;

  size_t vmis() const { return vmis_.size(); }
  size_t vms() const { return vms_.size(); }

 private:
  MetaCache vmis_{"VirtualMachineInstance"};
  MetaCache vms_{"VirtualMachine"};
};

// What the verbs schedule: api::PodToRequest, and in Kubernetes mode
// (`directory` not null) the VM of a pod that needs managed devices from
// its owner chain, never from its labels (request.vm is set to it; a
// pass-through pod is left alone). A broken chain is the pod's problem
// (FieldError on Pod.metadata.ownerReferences), for filter's answer.
absl::StatusOr<api::PodRequest> PodForScheduling(const api::json::Value& pod,
                                                 const api::ManagedResources& managed,
                                                 const VmDirectory* directory);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_VM_DIRECTORY_H_
