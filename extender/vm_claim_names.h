// VmClaimNames: the ResourceClaims each VirtualMachine's spec names, from
// the VirtualMachine watch (kubevirt.io/v1), for the DRA claim keeper: a
// VM names a claim through spec.template.spec.resourceClaims[] — its
// resourceClaimName, or, for a VM that opted in to VM-scoped claims
// (dra/vm_claims.h: the label in spec.template.metadata.labels), the claim
// "<vm>-<entry>" of each resourceClaimTemplateName entry. So the keeper can
// keep a stopped VM's claim it never saw a pod of, and drop the entry of a
// VM that no longer names the claim. A VirtualMachine without
// spec.template (not as KubeVirt writes one) names nothing known: the
// keeper then judges by its pods only.
// Thread-safety: thread-safe; the sink runs on the reflector's thread.
#ifndef PDC_EXTENDER_VM_CLAIM_NAMES_H_
#define PDC_EXTENDER_VM_CLAIM_NAMES_H_

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "kube/kube_reflector.h"

namespace pdc::extender {

class VmClaimNames final : public kube::ReflectorSink {
 public:
  // Told, outside the lock, the claims of `ns` a VM started or stopped
  // naming (or named when it was deleted).
  using ChangedFn = std::function<void(const std::string& ns, const std::set<std::string>& claims)>;
  explicit VmClaimNames(ChangedFn on_changed = nullptr) : on_changed_(std::move(on_changed)) {}

  void Replace(const std::vector<const api::json::Value*>& items) override;
  void Upsert(const api::json::Value& object) override;
  void Remove(const api::json::Value& object) override;

  // Whether the VirtualMachine with `vm_uid` in `ns` names `claim`; nullopt
  // when that VM is not held or its spec has no template.
  std::optional<bool> Names(std::string_view ns, std::string_view vm_uid,
                            std::string_view claim) const;
  // The VirtualMachines (name, uid) of `ns` whose spec names `claim`,
  // ordered by name.
  std::vector<std::pair<std::string, std::string>> NamingVms(std::string_view ns,
                                                             std::string_view claim) const;

 private:
  struct Vm {
    std::string ns;
    std::string name;
    std::optional<std::set<std::string>> claims;  // nullopt: no template.
  };
  // Sets (or with nullopt erases) the VM with `uid`; returns the claims
  // whose naming changed. REQUIRES: mu_ held.
  std::set<std::string> SetLocked(const std::string& uid, std::optional<Vm> vm)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Tell(const std::string& ns, const std::set<std::string>& claims) const;

  const ChangedFn on_changed_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Vm> by_uid_ ABSL_GUARDED_BY(mu_);
  // "<ns>/<claim>" -> UIDs of the VMs naming it.
  absl::flat_hash_map<std::string, std::set<std::string>> by_claim_ ABSL_GUARDED_BY(mu_);
};

// The VM of `object` (a VirtualMachine) as VmClaimNames holds it: its
// namespace, name, uid and named claims (nullopt: no spec.template).
// InvalidArgument naming the field when it cannot be read.
struct VmClaimSpec {
  std::string ns, name, uid;
  std::optional<std::set<std::string>> claims;
};
absl::StatusOr<VmClaimSpec> ReadVmClaimSpec(const api::json::Value& object);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_VM_CLAIM_NAMES_H_
