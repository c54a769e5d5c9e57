#include "extender/vm_claim_webhook.h"

#include "absl/strings/str_cat.h"
#include "api/kube_objects.h"
#include "common/strings.h"
#include "extender/dra/vm_claims.h"
#include "extender/json_response.h"
#include "rapidjson/document.h"
#include "rapidjson/stringbuffer.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {
namespace {

VmClaimDecision Refuse(std::string why) {
  VmClaimDecision d;
  d.outcome = VmClaimOutcome::kRefused;
  d.refusal = absl::StrCat("pdc: ", why);
  return d;
}

// {"name": entry, "resourceClaimName": claim}
std::string NamedEntryJson(std::string_view entry, std::string_view claim) {
  rapidjson::StringBuffer buf;
  api::json::Writer w(buf);
  w.StartObject();
  w.Text("name");
  w.Text(entry);
  w.Text("resourceClaimName");
  w.Text(claim);
  w.EndObject();
  return std::string(api::json::Output(buf));
}

}  // namespace

std::string_view ToString(VmClaimOutcome outcome) {
  switch (outcome) {
    case VmClaimOutcome::kRewritten: return "rewritten";
    case VmClaimOutcome::kNotApplicable: return "not_applicable";
    case VmClaimOutcome::kNoTemplates: return "no_templates";
    case VmClaimOutcome::kRefused: return "refused";
    case VmClaimOutcome::kBadRequest: return "bad_request";
    case VmClaimOutcome::kCount: break;
  }
  return "unknown";
}

VmClaimWebhook::VmClaimWebhook(const VmDirectory* directory, dra::VmClaimMaker* maker,
                               MetricsRegistry* registry)
    : directory_(directory), maker_(maker) {
  if (registry == nullptr) return;
  CounterFamily* family = registry->AddCounterFamily(
      "pdc_webhook_vm_claims_total",
      "AdmissionReviews of opted-in virt-launcher pods answered by pdc-extender's VM-scoped "
      "DRA claim webhook, by outcome (rewritten: template entries now name the VM's claims; "
      "refused: the pod was denied, with the reason).",
      {"outcome"});
  for (size_t i = 0; i < decisions_.size(); ++i) {
    decisions_[i] = family->WithLabels({std::string(ToString(static_cast<VmClaimOutcome>(i)))});
  }
}

VmClaimDecision VmClaimWebhook::Decide(const api::AdmissionRequest& request) const {
  VmClaimDecision none;
  if (request.kind.group != "" || request.kind.kind != "Pod" || request.operation != "CREATE" ||
      request.object == nullptr) {
    return none;
  }
  const api::json::Value& pod = *request.object;
  const api::json::Value* meta = api::json::Find(pod, "metadata");
  const api::json::Value* labels = meta == nullptr ? nullptr : api::json::Find(*meta, "labels");
  const api::json::Value* launcher = labels == nullptr ? nullptr : api::json::Find(*labels, "kubevirt.io");
  if (launcher == nullptr || !launcher->IsString() ||
      api::json::StringOf(*launcher) != "virt-launcher" || !dra::OptedIn(pod)) {
    return none;
  }
  absl::StatusOr<std::vector<dra::PodClaimEntry>> entries = dra::ReadPodClaimEntries(pod);
  if (!entries.ok()) return Refuse(std::string(entries.status().message()));
  bool templates = false;
  for (const dra::PodClaimEntry& e : *entries) templates = templates || !e.template_name.empty();
  if (!templates) {
    none.outcome = VmClaimOutcome::kNoTemplates;
    return none;
  }
  if (directory_ == nullptr || maker_ == nullptr) {
    return Refuse(absl::StrCat(
        "the pod asks for VM-scoped claims (label ", Sv(dra::kPersistentClaimsLabel),
        ") but pdc-extender does not make them: set extender.dra.keeper.enabled (with a "
        "Kubernetes API), or remove the label from the VM's spec.template.metadata.labels"));
  }
  absl::StatusOr<std::vector<api::OwnerReference>> owners =
      api::ReadOwnerReferences(*meta, "Pod.metadata");
  if (!owners.ok()) return Refuse(std::string(owners.status().message()));
  absl::StatusOr<VmRef> vm = directory_->Resolve(request.ns, api::ControllerOf(*owners));
  if (!vm.ok()) {
    return Refuse(absl::StrCat(
        "cannot tell which VirtualMachine the pod is for (",
        vm.status().message(), ")",
        absl::IsNotFound(vm.status()) ? "; it is tried again when virt-controller retries" : ""));
  }
  if (vm->standalone_vmi) {
    return Refuse(absl::StrCat("VirtualMachineInstance ", vm->name,
                               " has no VirtualMachine to own its claims; remove the label ",
                               Sv(dra::kPersistentClaimsLabel), " or run it from a VirtualMachine"));
  }
  VmClaimDecision d;
  d.outcome = VmClaimOutcome::kRewritten;
  for (const dra::PodClaimEntry& e : *entries) {
    if (e.template_name.empty()) continue;
    absl::StatusOr<std::string> claim =
        maker_->Ensure(request.ns, e.name, e.template_name, vm->name, vm->uid, request.dry_run);
    if (!claim.ok()) {
      return Refuse(absl::StrCat("claim entry ", e.name, " of VirtualMachine ", vm->name, ": ",
                                 claim.status().message()));
    }
    d.patch.push_back({"replace", absl::StrCat("/spec/resourceClaims/", e.index),
                       NamedEntryJson(e.name, *claim)});
    d.claims.push_back(*std::move(claim));
  }
  return d;
}

net::HttpResponse VmClaimWebhook::Handle(net::HttpRequest request) const {
  if (request.method != "POST") {
    return JsonResponse(405, json::ErrorBody("the admission webhook takes POST", ""));
  }
  rapidjson::Document doc;
  absl::StatusOr<api::AdmissionRequest> review = api::ParseAdmissionReview(request.body, &doc);
  VmClaimDecision d;
  net::HttpResponse out;
  if (!review.ok()) {
    d.outcome = VmClaimOutcome::kBadRequest;
    spdlog::debug("VM claim webhook: bad AdmissionReview: {}", StdSv(review.status().message()));
    out = ErrorResponse(review.status());
  } else {
    d = Decide(*review);
    api::AdmissionResponse r;
    r.uid = review->uid;
    if (d.outcome == VmClaimOutcome::kRefused) {
      r.allowed = false;
      r.message = d.refusal;
      spdlog::info("VM claim webhook: pod of {} refused: {}", review->ns, d.refusal);
    } else if (!d.patch.empty()) {
      r.patch = api::WriteJsonPatch(d.patch);
    }
    out = JsonResponse(200, api::WriteAdmissionReview(r));
  }
  if (Counter* c = decisions_[static_cast<size_t>(d.outcome)]) c->Increment();
  return out;
}

}  // namespace pdc::extender
