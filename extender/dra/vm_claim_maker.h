// VmClaimMaker: makes sure the VM-scoped claim of one template entry of a
// VM exists and is the VM's (vm_claims.h), for pdc-extender's admission
// webhook, with the calls StatefulSet's controller makes for a PVC: read
// the claim; when there is none, read the template and create the claim
// from it; when the create finds one (another replica's webhook came
// first), read it again. An existing claim is used only when
// JudgeVmClaim accepts it: never adopted by name.
// Thread-safety: thread-safe (KubeApi is).
#ifndef PDC_EXTENDER_DRA_VM_CLAIM_MAKER_H_
#define PDC_EXTENDER_DRA_VM_CLAIM_MAKER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kube/kube_http_client.h"

namespace pdc::extender::dra {

class VmClaimMaker {
 public:
  // `api` outlives the maker; `timeout` bounds each call.
  VmClaimMaker(kube::KubeApi* api, absl::Duration timeout) : api_(api), timeout_(timeout) {}

  // The name of the claim of entry `entry` (made from template
  // `template_name`) of VirtualMachine `vm` with `vm_uid` in `ns`, created
  // when missing (unless `dry_run`: then only what would be used is
  // checked). FailedPrecondition when a claim of that name is not this
  // VM's or is being deleted; NotFound when the template is missing;
  // InvalidArgument for a name too long or a template without a claim
  // spec; Unavailable and the apiserver's other answers as they come.
  // Each message names the object.
  absl::StatusOr<std::string> Ensure(std::string_view ns, std::string_view entry,
                                     std::string_view template_name, std::string_view vm,
                                     std::string_view vm_uid, bool dry_run);

 private:
  kube::KubeApi* const api_;
  const absl::Duration timeout_;
};

}  // namespace pdc::extender::dra

#endif  // PDC_EXTENDER_DRA_VM_CLAIM_MAKER_H_
