// The mutating admission webhook of pdc-extender: it pins a restarting VM's
// virt-launcher pod to the node that holds the VM's devices, with a required
// node affinity on the node's name (matchFields metadata.name, as the
// DaemonSet controller pins its pods), so kube-scheduler (which samples
// a share of the nodes in large clusters, percentageOfNodesToScore) offers
// the extender's filter that node and no other.
//
// Decision (Decide, over memory: the allocator's state and the VM
// directory, never the Kubernetes API; a pin waits until the state it read
// is durable, Allocator::AwaitReadsDurable):
//  - only a Pod CREATE of a virt-launcher pod (label kubevirt.io:
//    virt-launcher) without spec.nodeName is considered; every other request
//    is allowed untouched;
//  - the pod's VM and claims are those filter sees (PodForScheduling, then
//    Allocator::Resolve: its named claims, its template claims, through the
//    VM's UID from the owner chain pod -> VMI -> VM in Kubernetes mode);
//  - every claim Bound on one node: the pod is pinned there (the expression
//    is ANDed into each existing node selector term);
//  - a claim Lost, claims on different nodes, claims partly Pending, a
//    claim problem (a named claim that does not exist), a VM the directory
//    does not know yet, or a pod whose required node affinity has an empty
//    term list: no patch, and a warning saying why;
//  - nothing bound yet (a VM's first start) or no claims: no patch, no
//    warning.
// The webhook never denies: a broken review is HTTP 400 (kube-apiserver
// applies the configuration's failurePolicy: Ignore), anything else 200
// with allowed: true.
// Thread-safety: thread-safe; Handle runs on the webhook server's threads.
#ifndef PDC_EXTENDER_ADMISSION_WEBHOOK_H_
#define PDC_EXTENDER_ADMISSION_WEBHOOK_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "allocator/allocator.h"
#include "api/admission_json.h"
#include "api/scheduler_wire.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "extender/vm_claim_webhook.h"
#include "extender/vm_directory.h"
#include "net/http_server.h"
#include "net/http_types.h"

namespace pdc::extender {

// What the webhook decided; the `outcome` label of
// pdc_webhook_decisions_total.
enum class WebhookOutcome : uint8_t {
  kPinned = 0,
  kNotApplicable,  // Not a Pod CREATE, not a virt-launcher, nodeName set.
  kNoClaims,       // The pod needs no managed device.
  kNothingBound,   // No claim is Bound yet (a first start).
  kPartlyBound,    // Some claims Bound on one node, others Pending.
  kLost,           // A claim is Lost.
  kSplit,          // Bound claims sit on more than one node.
  kUnresolved,     // The VM or a claim cannot be resolved; the pod's problem.
  kAffinityConflict,  // The pod's required node affinity has no term.
  kBadRequest,     // The review could not be read (HTTP 400).
  kCount,
};
std::string_view ToString(WebhookOutcome outcome);

struct WebhookDecision {
  WebhookOutcome outcome = WebhookOutcome::kNotApplicable;
  std::string node;  // kPinned: where.
  std::vector<api::JsonPatchOp> patch;
  std::vector<std::string> warnings;
};

class AdmissionWebhook {
 public:
  // `allocator` and `clock` are required; `directory` null means standalone
  // (the VM from the pod's labels, as filter does); `registry` null means
  // no metrics. All must outlive the webhook.
  AdmissionWebhook(const Allocator* allocator, const VmDirectory* directory,
                   api::ManagedResources managed, const Clock* clock,
                   MetricsRegistry* registry);

  // The decision for a review already read (no I/O but the wait for the
  // allocator's store).
  WebhookDecision Decide(const api::AdmissionRequest& request) const;

  // POST <any path>: the AdmissionReview in, the AdmissionReview out.
  // GET /healthz: 200. Counts and times every review.
  net::HttpResponse Handle(net::HttpRequest request) const;

 private:
  // The VM's claims one by one, by key (named, or its template claims):
  // only when Resolve refused them together, to say why.
  std::vector<Claim> ClaimsOfVm(const SchedulingRequest& request) const;

  const Allocator* const allocator_;
  const VmDirectory* const directory_;
  const api::ManagedResources managed_;
  const Clock* const clock_;
  Histogram* latency_ = nullptr;
  std::array<Counter*, static_cast<size_t>(WebhookOutcome::kCount)> decisions_{};
};

struct WebhookServerOptions {
  std::string listen;  // host:port.
  std::string cert_file;
  std::string key_file;
  // The webhook's own threads: a busy extender (its HTTP workers all taken
  // by filter calls) never delays admission.
  int threads = 2;
};

// Starts the webhook's HTTPS listener (plain HTTP when no certificate is
// given: tests). Reviews posted to kVmClaimsWebhookPath go to `vm_claims`,
// all others to `webhook`; without `vm_claims`, those are refused (an
// opted-in pod never goes through unchanged). Both outlive the server.
absl::StatusOr<std::unique_ptr<net::HttpServer>> StartWebhookServer(
    const WebhookServerOptions& options, const AdmissionWebhook* webhook,
    const VmClaimWebhook* vm_claims = nullptr);

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_ADMISSION_WEBHOOK_H_
