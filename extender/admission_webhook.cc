#include "extender/admission_webhook.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "allocator/validation.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "extender/json_response.h"
#include "rapidjson/document.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

namespace {

constexpr std::string_view kLauncherLabelValue = "virt-launcher";
// Warnings are shown to whoever created the pod (virt-controller logs them);
// kube-apiserver truncates long ones, so a list of claims is cut short.
constexpr size_t kMaxClaimsNamed = 3;

std::string NameSome(const std::vector<std::string>& names) {
  if (names.size() <= kMaxClaimsNamed) return absl::StrJoin(names, ", ");
  return absl::StrCat(
      absl::StrJoin(names.begin(), names.begin() + kMaxClaimsNamed, ", "), " and ",
      names.size() - kMaxClaimsNamed, " more");
}

WebhookDecision NoPin(WebhookOutcome outcome, std::string warning = "") {
  WebhookDecision d;
  d.outcome = outcome;
  if (!warning.empty()) d.warnings.push_back(absl::StrCat("pdc: ", warning));
  return d;
}

}  // namespace

std::string_view ToString(WebhookOutcome outcome) {
  switch (outcome) {
    case WebhookOutcome::kPinned: return "pinned";
    case WebhookOutcome::kNotApplicable: return "not_applicable";
    case WebhookOutcome::kNoClaims: return "no_claims";
    case WebhookOutcome::kNothingBound: return "nothing_bound";
    case WebhookOutcome::kPartlyBound: return "partly_bound";
    case WebhookOutcome::kLost: return "lost";
    case WebhookOutcome::kSplit: return "split";
    case WebhookOutcome::kUnresolved: return "unresolved";
    case WebhookOutcome::kAffinityConflict: return "affinity_conflict";
    case WebhookOutcome::kBadRequest: return "bad_request";
    case WebhookOutcome::kCount: break;
  }
  return "unknown";
}

AdmissionWebhook::AdmissionWebhook(const Allocator* allocator, const VmDirectory* directory,
                                   api::ManagedResources managed, const Clock* clock,
                                   MetricsRegistry* registry)
    : allocator_(allocator), directory_(directory), managed_(std::move(managed)), clock_(clock) {
  if (registry == nullptr) return;
  latency_ = registry->AddHistogram(
      "pdc_webhook_request_duration_seconds",
      "Time pdc-extender's admission webhook took to answer one AdmissionReview.",
      {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2});
  CounterFamily* family = registry->AddCounterFamily(
      "pdc_webhook_decisions_total",
      "AdmissionReviews answered by pdc-extender's admission webhook, by outcome (pinned: a "
      "required node affinity was added).",
      {"outcome"});
  for (size_t i = 0; i < decisions_.size(); ++i) {
    decisions_[i] = family->WithLabels({std::string(ToString(static_cast<WebhookOutcome>(i)))});
  }
}

std::vector<Claim> AdmissionWebhook::ClaimsOfVm(const SchedulingRequest& req) const {
  // By key, never by a scan of the namespace (40,000 claims would hold the
  // allocator's lock shared for a quarter of a second): the named claims,
  // and the template claim of each requested resource "<vm>-<short name>"
  // (the allocator's naming) when it is the VM's own.
  std::vector<Claim> out;
  std::vector<std::string> names = req.claim_names;
  for (const auto& [resource, count] : req.resources) {
    if (count > 0 && managed_.contains(resource)) {
      names.push_back(absl::StrCat(req.vm, "-", ResourceShortName(resource)));
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i) continue;
    absl::StatusOr<Claim> c = allocator_->GetClaim({req.ns, names[i]});
    if (!c.ok()) continue;
    if (i >= req.claim_names.size()) {
      const ClaimSpec& s = c->spec;
      const bool template_of_vm =
          s.owner_vm == req.vm &&
          (req.vm_uid.empty() || s.owner_vm_uid.empty() || s.owner_vm_uid == req.vm_uid);
      if (!template_of_vm) continue;
    }
    out.push_back(*std::move(c));
  }
  return out;
}

WebhookDecision AdmissionWebhook::Decide(const api::AdmissionRequest& request) const {
  if (request.kind.group != "" || request.kind.kind != "Pod" || request.operation != "CREATE" ||
      request.object == nullptr) {
    return NoPin(WebhookOutcome::kNotApplicable);
  }
  absl::StatusOr<api::AdmissionPod> pod = api::ReadAdmissionPod(*request.object);
  if (!pod.ok()) {
    return NoPin(WebhookOutcome::kUnresolved,
                 absl::StrCat("not pinned: ", pod.status().message()));
  }
  if (pod->launcher_label != kLauncherLabelValue || !pod->node_name.empty() || !pod->has_spec) {
    return NoPin(WebhookOutcome::kNotApplicable);
  }
  absl::StatusOr<api::PodRequest> pr = PodForScheduling(*request.object, managed_, directory_);
  if (!pr.ok()) {
    return NoPin(WebhookOutcome::kUnresolved,
                 absl::StrCat("not pinned: ", pr.status().message()));
  }
  if (pr->pass_through) return NoPin(WebhookOutcome::kNoClaims);
  // The claims filter would see. When they cannot all be used together
  // (one Lost, two nodes, ...) Resolve says why without the claims, so the
  // VM's claims are gathered one by one to tell which case it is.
  const SchedulingRequest& req = pr->request;
  absl::StatusOr<std::vector<ResolvedClaim>> resolved = allocator_->Resolve(req);
  std::vector<Claim> claims;
  std::vector<std::string> pending;
  if (resolved.ok()) {
    for (ResolvedClaim& rc : *resolved) {
      if (rc.exists) {
        claims.push_back(std::move(rc.claim));
      } else {
        pending.push_back(rc.key.name);  // A template claim made at bind time.
      }
    }
  } else {
    claims = ClaimsOfVm(req);
  }
  if (resolved.ok() && claims.empty() && pending.empty()) return NoPin(WebhookOutcome::kNoClaims);
  std::vector<std::string> lost;
  std::map<std::string, std::vector<std::string>> by_node;  // Ordered: stable warnings.
  for (const Claim& c : claims) {
    const ClaimStatus& st = c.status;
    if (st.phase == ClaimPhase::kPending) {
      pending.push_back(c.key.name);
    } else if (st.phase == ClaimPhase::kLost) {
      lost.push_back(c.key.name);
    } else {
      by_node[st.node].push_back(c.key.name);
    }
  }
  if (!lost.empty()) {
    return NoPin(WebhookOutcome::kLost,
                 absl::StrCat("not pinned to a node: claim ", NameSome(lost),
                              lost.size() == 1 ? " is" : " are", " Lost"));
  }
  if (by_node.size() > 1) {
    std::vector<std::string> where;
    for (const auto& [node, names] : by_node) {
      where.push_back(absl::StrCat(NameSome(names), " on ", node));
    }
    return NoPin(WebhookOutcome::kSplit,
                 absl::StrCat("not pinned: the claims are bound on different nodes (",
                              absl::StrJoin(where, "; "), ")"));
  }
  if (!resolved.ok()) {
    return NoPin(WebhookOutcome::kUnresolved,
                 absl::StrCat("not pinned: ", resolved.status().message()));
  }
  if (by_node.empty()) return NoPin(WebhookOutcome::kNothingBound);
  const std::string& node = by_node.begin()->first;
  if (!pending.empty()) {
    return NoPin(WebhookOutcome::kPartlyBound,
                 absl::StrCat("not pinned to ", node, ": claim ", NameSome(pending),
                              pending.size() == 1 ? " is" : " are",
                              " not bound yet; the scheduler places the pod"));
  }
  const api::RequiredNodeAffinity& shape = pod->affinity;
  if (shape.terms_present && shape.terms.empty()) {
    return NoPin(WebhookOutcome::kAffinityConflict,
                 absl::StrCat("not pinned to ", node,
                              ": the pod's required node affinity has no node selector term"));
  }
  // A pin is an answer from the allocator's state: only once what it read
  // is durable (never a bind whose claims are still on their way to the
  // Kubernetes API, which may yet be refused and undone).
  if (absl::Status s = allocator_->AwaitReadsDurable(); !s.ok()) {
    return NoPin(WebhookOutcome::kUnresolved,
                 absl::StrCat("not pinned to ", node, ": the claims' state is not durable (",
                              s.message(), "); the scheduler places the pod"));
  }
  WebhookDecision d;
  d.outcome = WebhookOutcome::kPinned;
  d.node = node;
  d.patch = api::RequireNodeNamePatch(shape, node);
  return d;
}

net::HttpResponse AdmissionWebhook::Handle(net::HttpRequest request) const {
  const std::string_view path =
      std::string_view(request.target).substr(0, request.target.find('?'));
  if (request.method == "GET" && (path == "/healthz" || path == "/readyz")) {
    return net::HttpResponse{200, "text/plain", "ok\n", std::nullopt};
  }
  if (request.method != "POST") {
    return JsonResponse(405, json::ErrorBody("the admission webhook takes POST", ""));
  }
  const absl::Time start = clock_->Now();
  rapidjson::Document doc;
  absl::StatusOr<api::AdmissionRequest> review = api::ParseAdmissionReview(request.body, &doc);
  WebhookDecision d;
  net::HttpResponse out;
  if (!review.ok()) {
    d.outcome = WebhookOutcome::kBadRequest;
    // Counted (outcome bad_request); logged at debug only, since anything
    // that reaches the port can send one.
    spdlog::debug("admission webhook: bad AdmissionReview: {}",
                  StdSv(review.status().message()));
    out = ErrorResponse(review.status());
  } else {
    d = Decide(*review);
    api::AdmissionResponse r;
    r.uid = review->uid;
    if (!d.patch.empty()) r.patch = api::WriteJsonPatch(d.patch);
    r.warnings = d.warnings;
    out = JsonResponse(200, api::WriteAdmissionReview(r));
    if (d.outcome == WebhookOutcome::kPinned) {
      spdlog::debug("admission webhook: pod {}/{} pinned to node {}", review->ns,
                    review->name, d.node);
    }
  }
  if (latency_ != nullptr) latency_->ObserveDuration(clock_->Now() - start);
  if (Counter* c = decisions_[static_cast<size_t>(d.outcome)]) c->Increment();
  return out;
}

absl::StatusOr<std::unique_ptr<net::HttpServer>> StartWebhookServer(
    const WebhookServerOptions& options, const AdmissionWebhook* webhook,
    const VmClaimWebhook* vm_claims) {
  static const VmClaimWebhook kRefuseAll(nullptr, nullptr, nullptr);
  if (vm_claims == nullptr) vm_claims = &kRefuseAll;
  net::HttpServerOptions so;
  RETURN_IF_ERROR(net::SplitListenAddress(options.listen, "extender.webhook.listen", &so));
  so.threads = std::max(1, options.threads);
  // One pod of at most 3 MiB (kube-apiserver's request limit) in the review.
  so.max_body_bytes = uint64_t{8} << 20;
  so.max_connections = 1024;
  // kube-apiserver gives the webhook timeoutSeconds (2 s) for the whole call.
  so.read_timeout = absl::Seconds(10);
  so.idle_timeout = absl::Seconds(120);
  so.shutdown_grace = absl::Seconds(5);
  so.cert_file = options.cert_file;
  so.key_file = options.key_file;
  so.server_name = "pdc-extender-webhook";
  so.body_spare_bytes = api::json::kInsituPadding;
  return net::HttpServer::Start(
      std::move(so), [webhook, vm_claims](net::HttpRequest r) {
        const std::string_view path = std::string_view(r.target).substr(0, r.target.find('?'));
        if (path == kVmClaimsWebhookPath) return vm_claims->Handle(std::move(r));
        return webhook->Handle(std::move(r));
      });
}

}  // namespace pdc::extender
