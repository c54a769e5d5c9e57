// The admission webhook of VM-scoped DRA claims (extender/dra/vm_claims.h):
// at the CREATE of a virt-launcher pod that opted in (label
// pdc.kubevirt.io/persistent-claims: "true"), each entry of the pod's
// spec.resourceClaims that names a resourceClaimTemplateName is rewritten
// to name the VM's own claim "<vm>-<entry>" (resourceClaimName), which
// VmClaimMaker creates from the template when it is missing. The
// VirtualMachine and its VMI are left as they are.
//
// Unlike the pinning webhook (admission_webhook.h), this one refuses: an
// opted-in pod must never silently get a claim of its own, which would die
// with it. Its configuration (deploy/webhook) sends it only the opted-in
// pods (objectSelector) with failurePolicy: Fail, so a pod of an opted-in
// VM is not created while pdc-extender cannot answer; virt-controller
// retries the create. It refuses, saying why:
//  - the VM is not known (its VMI or VirtualMachine not in pdc-extender's
//    watches yet, or not a VirtualMachine's pod at all);
//  - a claim of that name exists and is not this VM's (another VM's UID:
//    a VM made again under an old name waits until the old claim is
//    gone; or another owner), or is being deleted;
//  - the template is missing, or an API call failed;
//  - pdc-extender does not make such claims (extender.dra.keeper.enabled
//    off, or no Kubernetes API).
// A pod without the label or without template entries is admitted as it
// is. On a dry run nothing is created.
// Thread-safety: thread-safe; Handle runs on the webhook server's threads.
#ifndef PDC_EXTENDER_VM_CLAIM_WEBHOOK_H_
#define PDC_EXTENDER_VM_CLAIM_WEBHOOK_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/admission_json.h"
#include "common/metrics.h"
#include "extender/dra/vm_claim_maker.h"
#include "extender/vm_directory.h"
#include "net/http_types.h"

namespace pdc::extender {

// The path kube-apiserver posts the opted-in pods' reviews to.
inline constexpr std::string_view kVmClaimsWebhookPath = "/persistent-claims";

// The `outcome` label of pdc_webhook_vm_claims_total.
enum class VmClaimOutcome : uint8_t {
  kRewritten = 0,  // At least one entry now names the VM's claim.
  kNotApplicable,  // Not a Pod CREATE, not an opted-in virt-launcher pod.
  kNoTemplates,    // Opted in, but no entry names a template.
  kRefused,        // Denied, with the reason.
  kBadRequest,     // The review could not be read (HTTP 400).
  kCount,
};
std::string_view ToString(VmClaimOutcome outcome);

struct VmClaimDecision {
  VmClaimOutcome outcome = VmClaimOutcome::kNotApplicable;
  std::string refusal;  // kRefused: why.
  std::vector<api::JsonPatchOp> patch;
  std::vector<std::string> claims;  // The claims the pod now names.
};

class VmClaimWebhook {
 public:
  // `directory` and `maker` may be null (standalone, or the feature off):
  // every opted-in pod is then refused. `registry` null: no metrics.
  VmClaimWebhook(const VmDirectory* directory, dra::VmClaimMaker* maker,
                 MetricsRegistry* registry);

  VmClaimDecision Decide(const api::AdmissionRequest& request) const;
  // POST: the AdmissionReview in, the AdmissionReview out.
  net::HttpResponse Handle(net::HttpRequest request) const;

 private:
  const VmDirectory* const directory_;
  dra::VmClaimMaker* const maker_;
  std::array<Counter*, static_cast<size_t>(VmClaimOutcome::kCount)> decisions_{};
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_VM_CLAIM_WEBHOOK_H_
