// DraConsumers: the DRA claim keeper's questions about pods and VMs
// (dra::ConsumerDirectory), answered from what pdc-extender already follows:
//  - a pod's fate (deleted, replaced by another UID, ended) from a watch of
//    the virt-launcher pods (a PodDirectory with kVirtLauncherPods), else
//    one GET (AskPodFate);
//  - a living pod's VM from its owner chain, by UIDs (VmDirectory::Resolve,
//    the walk the scheduler verbs use): the pod's controller reference,
//    read with one GET the first time and remembered per pod UID;
//  - whether a VirtualMachine with a UID exists, and which claims its
//    spec names (VmDirectory, VmClaimNames).
// A VMI that is its own VM (no VirtualMachine) is not kept: nothing could
// ask for the same device again after it ends.
// Thread-safety: thread-safe.
#ifndef PDC_EXTENDER_DRA_CONSUMERS_H_
#define PDC_EXTENDER_DRA_CONSUMERS_H_

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "extender/dra/claim_keeper.h"
#include "extender/pod_directory.h"
#include "extender/vm_directory.h"
#include "kube/kube_client.h"

namespace pdc::extender {

// The selector of KubeVirt's virt-launcher pods (the label virt-controller
// puts on them), for the keeper's PodDirectory on kPodsPath.
inline constexpr std::string_view kVirtLauncherPods = "labelSelector=kubevirt.io%3Dvirt-launcher";

class DraConsumers final : public dra::ConsumerDirectory {
 public:
  // Everything must outlive this; `synced` says whether the VM, VMI and pod
  // watches hold a whole list.
  DraConsumers(const VmDirectory* vms, const PodDirectory* pods, kube::KubeClient* kube,
               std::function<bool()> synced, absl::Duration timeout = absl::Seconds(10))
      : vms_(vms), pods_(pods), kube_(kube), synced_(std::move(synced)), timeout_(timeout) {}

  bool Synced() const override { return synced_(); }
  dra::PodLook LookAtPod(std::string_view ns, std::string_view name,
                         std::string_view uid) override;
  std::set<std::string> LiveVms(const std::vector<std::string>& uids) const override;
  std::optional<bool> VmNamesClaim(std::string_view ns, std::string_view vm_uid,
                                   std::string_view claim) const override {
    return vms_->claim_names().Names(ns, vm_uid, claim);
  }
  std::vector<dra::VmIdentity> VmsNamingClaim(std::string_view ns,
                                              std::string_view claim) const override;

 private:
  // The VM of the pod (nullopt: not a VirtualMachine's pod); `why` says
  // why not, or what failed (then `failed`).
  std::optional<dra::VmIdentity> VmOf(std::string_view ns, std::string_view name,
                                      std::string_view uid, std::string* why, bool* failed);

  const VmDirectory* const vms_;
  const PodDirectory* const pods_;
  kube::KubeClient* const kube_;
  const std::function<bool()> synced_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  // Pod UID -> its VM (owner references of a pod do not change).
  absl::flat_hash_map<std::string, dra::VmIdentity> vm_of_pod_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_DRA_CONSUMERS_H_
