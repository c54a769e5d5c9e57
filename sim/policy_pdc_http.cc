// `pdc-http`: the pdc policy with the allocator behind a running pdc-extender,
// driven over HTTP the way kube-scheduler and pdc-node drive it:
//  - start: PUT /v1/nodes/{node}/inventory for every node (pdc-node's report;
//    sent again as a heartbeat every `heartbeat` of wall time);
//  - per scheduling attempt, the same kube-scheduler model as `pdc` picks the
//    candidate nodes, then POST <prefix>/filter, <prefix>/prioritize (only
//    the nodes that passed) and <prefix>/bind with kube-scheduler's request
//    bodies (kube_wire.h); every answer is checked (HttpStats counts the
//    malformed ones, and the attempt fails as kube-scheduler would fail it);
//  - node step after a bind, as pdc-node does it: GET the node's allocations,
//    take the devices reserved for the pod, POST /v1/nodes/{node}/handoffs
//    per resource (when the extender has the endpoint);
//  - VM stop: POST …/claims/{name}/release?podUid=…; VM delete: DELETE
//    …/claims/{name}?force=true; explicit claims: POST …/claims;
//  - node failure: an inventory with no devices (the REST API has no node
//    removal; in-process `pdc` calls RemoveNode; both turn the node's claims
//    Lost); repair and device health: the full inventory.
// One pod at a time: each attempt's filter, prioritize, bind and node step
// finish before the next simulated event, so the result can be compared
// with the in-process run decision by decision. (`pdc-sim sweep` runs binds
// concurrently.)
#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
#include "api/handoff_json.h"
#include "api/json_util.h"
#include "api/rest_json.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "net/pdc_client.h"
#include "sim/http_stats.h"
#include "sim/kube_scheduler.h"
#include "sim/kube_wire.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

class PdcHttpPolicy final : public Policy {
 public:
  explicit PdcHttpPolicy(const PolicyContext& ctx)
      : ctx_(ctx),
        opt_(*ctx.http),
        stats_(ctx.http_stats),
        rng_(ctx.seed),
        kube_(ctx.state, ctx.scenario->scheduler.pdc_percentage_of_nodes_to_score, &rng_),
        held_by_(ctx.cluster->devices.size(), -1) {}

  absl::Status Init() {
    HttpClientOptions o;
    o.base_url = opt_.url;
    o.user_agent = "pdc-sim";
    o.timeout = absl::Seconds(60);
    ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> http, HttpClient::Create(o));
    pdc_ = std::make_unique<PdcClient>(std::move(http));
    for (size_t n = 0; n < ctx_.cluster->nodes.size(); ++n) {
      node_index_[ctx_.cluster->nodes[n].name] = static_cast<int>(n);
      if (opt_.node_list) {
        const SimNode& sn = ctx_.cluster->nodes[n];
        NodeInfo info{sn.name, sn.cpu, sn.memory_gib, "", 0};
        if (!ctx_.cluster->class_names.empty()) {
          info.resource = ctx_.cluster->class_names[0];
          info.devices = static_cast<int>(sn.devices_by_class[0].size());
        }
        node_json_.push_back(NodeJson(info));
      }
    }
    // The comparison with the in-process run assumes an extender without
    // claims (they persist in its store).
    RETURN_IF_ERROR(CountLost());
    if (claims_seen_ > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pdc-extender at ", opt_.url, " already holds ", claims_seen_,
          " claims (from an earlier run?): start a fresh one, or use --spawn-extender"));
    }
    absl::StatusOr<std::vector<PendingHandoff>> probe =
        Rest("handoff-list", [&] { return pdc_->ListHandoffs(""); });
    if (!probe.ok() && !Refused(probe.status(), {404})) return Failed("handoff-list", probe.status());
    handoffs_ = probe.ok();
    return ReportAll();
  }

  std::string_view name() const override { return "pdc-http"; }

  absl::Status OnVmCreated(const VmInfo& vm) override {
    if (!vm.explicit_claims) return absl::OkStatus();
    api::ClaimCreate c;
    c.key = ClaimKey{ctx_.scenario->ns, ExplicitClaimName(vm)};
    c.spec.resource_name = ctx_.cluster->class_names[vm.shape.class_index];
    c.spec.count = vm.shape.device_count;
    absl::StatusOr<Claim> created = Rest("claim-create", [&] { return pdc_->CreateClaim(c); });
    return created.ok() ? absl::OkStatus() : Failed("claim-create", created.status());
  }

  absl::StatusOr<Placement> Place(const VmInfo& vm, const std::string& pod_name,
                                  const std::string& pod_uid) override {
    RETURN_IF_ERROR(MaybeHeartbeat());
    Placement p;
    RETURN_IF_ERROR(FindFeasibleNodes(vm, &p));
    if (feasible_.empty()) return p;
    names_.clear();
    for (int n : feasible_) names_.push_back(ctx_.cluster->nodes[n].name);
    const std::string pod = VirtLauncherPodJson(Pod(vm, pod_name, pod_uid));
    ASSIGN_OR_RETURN(const bool passed, FilterOverHttp(pod, &p));
    if (!passed) return p;
    ASSIGN_OR_RETURN(const std::optional<size_t> host, SelectHostOverHttp(pod, vm, &p));
    if (!host.has_value()) return p;
    const int node = fits_[*host];
    ASSIGN_OR_RETURN(const bool bound,
                     BindOverHttp(pod_name, pod_uid, ctx_.cluster->nodes[node].name, &p));
    if (!bound) return p;
    RETURN_IF_ERROR(NodeStep(vm, node, pod_uid, &p));
    p.node = node;
    p.placed = true;
    p.reason.clear();
    return p;
  }

  absl::Status OnVmStopped(const VmInfo& vm, const std::string& pod_uid) override {
    auto it = claims_of_.find(vm.id);
    if (it == claims_of_.end()) return absl::OkStatus();
    for (const ClaimKey& key : it->second) {
      absl::StatusOr<Claim> r = Rest("release", [&] { return pdc_->ReleaseClaim(key, pod_uid); });
      // As in-process: a claim whose node went away may refuse (409).
      if (!r.ok() && !Refused(r.status(), {404, 409})) return Failed("release", r.status());
    }
    return absl::OkStatus();
  }

  absl::Status OnVmDeleted(const VmInfo& vm) override {
    std::vector<ClaimKey> keys;
    if (auto it = claims_of_.find(vm.id); it != claims_of_.end()) {
      keys = std::move(it->second);
      claims_of_.erase(it);
    }
    if (vm.explicit_claims && keys.empty()) {
      keys.push_back(ClaimKey{ctx_.scenario->ns, ExplicitClaimName(vm)});
    }
    for (const ClaimKey& key : keys) {
      absl::StatusOr<Claim> r =
          Rest("claim-delete", [&] { return pdc_->DeleteClaim(key, /*force=*/true); });
      if (!r.ok() && !Refused(r.status(), {404})) return Failed("claim-delete", r.status());
    }
    // Their devices are Released (Retain); the administrator's release
    // (pdcctl release device) is modelled as done at once.
    if (auto it = devices_of_.find(vm.id); it != devices_of_.end()) {
      for (int d : it->second) {
        held_by_[d] = -1;
        const SimDevice& dev = ctx_.cluster->devices[d];
        absl::StatusOr<api::NodeDetail> r = Rest("device-release", [&] {
          return pdc_->ReleaseDevice(ctx_.cluster->nodes[dev.node].name, dev.address);
        });
        if (!r.ok() && !Refused(r.status(), {404, 409})) return Failed("device-release", r.status());
      }
      devices_of_.erase(it);
    }
    return absl::OkStatus();
  }

  absl::Status OnNodeDown(int node) override { return Report(node); }
  absl::Status OnNodeUp(int node) override { return Report(node); }
  absl::Status OnDeviceHealth(int device, bool healthy) override {
    const int node = ctx_.cluster->devices[device].node;
    if (!ctx_.state->node_up[node]) return absl::OkStatus();
    return Report(node);
  }

  bool HasPersistentClaims() const override { return true; }
  bool Holds(int device) const override { return held_by_[device] >= 0; }
  int LostClaims() const override { return lost_; }

 private:
  std::string ExplicitClaimName(const VmInfo& vm) const { return absl::StrCat(vm.name, "-data"); }

  PodInfo Pod(const VmInfo& vm, const std::string& pod_name, const std::string& pod_uid) const {
    PodInfo p;
    p.ns = ctx_.scenario->ns;
    p.name = pod_name;
    p.uid = pod_uid;
    p.vm = vm.name;
    p.vmi_uid = absl::StrCat("vmi-", vm.id, "-", vm.name);
    p.resource = ctx_.cluster->class_names[vm.shape.class_index];
    p.device_count = vm.shape.device_count;
    p.cpu = vm.shape.cpu;
    p.memory_gib = vm.shape.memory_gib;
    if (vm.explicit_claims) p.claims.push_back(ExplicitClaimName(vm));
    return p;
  }

  std::string Args(const std::string& pod, const std::vector<int>& nodes,
                   const std::vector<std::string_view>& names) const {
    if (!opt_.node_list) return ExtenderArgsJson(pod, names);
    std::vector<const std::string*> items;
    for (int n : nodes) items.push_back(&node_json_[n]);
    return ExtenderArgsNodeListJson(pod, items);
  }

  // kube-scheduler's own filter: the VM's bound node alone with node
  // affinity to its claims (asked of the extender), else a window of
  // nodes. Fills feasible_.
  absl::Status FindFeasibleNodes(const VmInfo& vm, Placement* p) {
    int pinned = -1;
    if (ctx_.scenario->scheduler.pdc_node_affinity) {
      ASSIGN_OR_RETURN(pinned, BoundNode(vm));
    }
    if (pinned >= 0) {
      p->nodes_scanned = 1;
      kube_.FeasiblePinned(pinned, vm.shape, &feasible_, &p->reason);
    } else {
      kube_.FindFeasible(vm.shape, &feasible_, &p->nodes_scanned, &p->reason);
    }
    return absl::OkStatus();
  }

  // POST filter with feasible_/names_: fills fits_ and fit_names_ in offer
  // order. False (the reason in `p`) when no node passed or the answer was
  // malformed.
  absl::StatusOr<bool> FilterOverHttp(const std::string& pod, Placement* p) {
    p->extender_nodes = static_cast<int>(names_.size());
    p->extender_calls = 1;
    ASSIGN_OR_RETURN(HttpResponse fr, Call("filter", "POST", opt_.scheduler_prefix + "/filter",
                                           Args(pod, feasible_, names_)));
    absl::StatusOr<FilterAnswer> fa =
        fr.status == 200 ? ParseFilterAnswer(fr.body, names_, opt_.node_list)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", fr.status));
    if (!fa.ok()) {
      stats_->Malformed("filter", StdSv(fa.status().message()));
      p->reason = "pdc-http: malformed filter answer";
      return false;
    }
    if (!fa->error.empty() || fa->passed.empty()) {
      p->reason = fa->error.empty() ? "pdc-http: no node passed filter" : "pdc-http: filter error";
      return false;
    }
    fits_.clear();
    fit_names_.clear();
    for (size_t i : fa->passed) {
      fits_.push_back(feasible_[i]);
      fit_names_.push_back(names_[i]);
    }
    // kube-scheduler keeps its own order of the feasible nodes; the answer's
    // order must not change which host wins ties.
    SortByOffer(fa->passed);
    return true;
  }

  // The index in fits_ of the host: kube-scheduler's scores plus the
  // extender's (POST prioritize), weighted. nullopt (the reason in `p`) when
  // the answer was malformed.
  absl::StatusOr<std::optional<size_t>> SelectHostOverHttp(const std::string& pod,
                                                           const VmInfo& vm, Placement* p) {
    // As kube-scheduler: no prioritize call when a single node passed.
    if (fits_.size() <= 1) return size_t{0};
    p->extender_nodes += static_cast<int>(fit_names_.size());
    ++p->extender_calls;
    ASSIGN_OR_RETURN(HttpResponse pr, Call("prioritize", "POST",
                                           opt_.scheduler_prefix + "/prioritize",
                                           Args(pod, fits_, fit_names_)));
    absl::StatusOr<std::vector<int>> ext =
        pr.status == 200 ? ParsePriorityAnswer(pr.body, fit_names_)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", pr.status));
    if (!ext.ok()) {
      stats_->Malformed("prioritize", StdSv(ext.status().message()));
      p->reason = "pdc-http: malformed prioritize answer";
      return std::nullopt;
    }
    scores_.clear();
    const int64_t weight = ctx_.scenario->scheduler.extender_weight;
    for (size_t i = 0; i < fits_.size(); ++i) {
      scores_.push_back(kube_.Score(fits_[i], vm.shape) + (*ext)[i] * weight * 10);
    }
    return kube_.SelectHost(scores_);
  }

  // POST bind. False (the reason in `p`) when the extender refused or the
  // answer was malformed.
  absl::StatusOr<bool> BindOverHttp(const std::string& pod_name, const std::string& pod_uid,
                                    const std::string& node_name, Placement* p) {
    ++p->extender_calls;
    ASSIGN_OR_RETURN(HttpResponse br,
                     Call("bind", "POST", opt_.scheduler_prefix + "/bind",
                          BindingArgsJson(pod_name, ctx_.scenario->ns, pod_uid, node_name)));
    absl::StatusOr<std::string> berr =
        br.status == 200 ? ParseBindAnswer(br.body)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", br.status));
    if (!berr.ok()) {
      stats_->Malformed("bind", StdSv(berr.status().message()));
      p->reason = "pdc-http: malformed bind answer";
      return false;
    }
    if (!berr->empty()) {
      p->reason = "pdc-http bind: refused";
      return false;
    }
    return true;
  }

  // fits_/fit_names_ in the order the nodes were offered.
  void SortByOffer(const std::vector<size_t>& passed) {
    std::vector<size_t> order(passed.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return passed[a] < passed[b]; });
    std::vector<int> f;
    std::vector<std::string_view> n;
    for (size_t i : order) {
      f.push_back(fits_[i]);
      n.push_back(fit_names_[i]);
    }
    fits_ = std::move(f);
    fit_names_ = std::move(n);
  }

  // pdc-node's part after a bind: read the node's allocations, find the
  // devices reserved for this pod, confirm the hand-off per resource.
  absl::Status NodeStep(const VmInfo& vm, int node, const std::string& pod_uid, Placement* p) {
    const std::string& node_name = ctx_.cluster->nodes[node].name;
    absl::StatusOr<NodeAllocations> a = Rest("allocations", [&] {
      return pdc_->GetNodeAllocations(node_name, 0, absl::ZeroDuration());
    });
    if (!a.ok()) return Failed("allocations", a.status());
    std::map<std::string, std::vector<PciAddress>> by_resource;
    std::vector<ClaimKey> keys;
    for (const NodeAllocation& e : a->claimed) {
      if (!e.reserved_for || e.reserved_for->pod_uid != pod_uid) continue;
      by_resource[e.resource_name].push_back(e.address);
      if (std::find(keys.begin(), keys.end(), e.claim) == keys.end()) keys.push_back(e.claim);
      const int d = ctx_.cluster->FindDevice(node, e.address);
      if (d < 0) {
        return absl::InternalError(absl::StrCat("pdc-http bound unknown device ",
                                                e.address.ToString(), " on ", node_name));
      }
      p->devices.push_back(d);
    }
    std::sort(p->devices.begin(), p->devices.end());
    std::sort(keys.begin(), keys.end(), [](const ClaimKey& x, const ClaimKey& y) {
      return std::tie(x.ns, x.name) < std::tie(y.ns, y.name);
    });
    if (handoffs_) {
      for (const auto& [resource, devices] : by_resource) {
        api::HandoffConfirm confirm{pod_uid, resource, devices};
        absl::StatusOr<std::vector<ClaimKey>> h =
            Rest("handoff", [&] { return pdc_->ConfirmHandoff(node_name, confirm); });
        if (!h.ok()) return Failed("handoff", h.status());
      }
    }
    for (int d : devices_of_[vm.id]) held_by_[d] = -1;
    for (int d : p->devices) held_by_[d] = vm.id;
    devices_of_[vm.id] = p->devices;
    claims_of_[vm.id] = std::move(keys);
    return absl::OkStatus();
  }

  // The node of the VM's claims, read over REST as a webhook adding node
  // affinity would (GET claim); -1 before the first bind.
  absl::StatusOr<int> BoundNode(const VmInfo& vm) {
    auto it = claims_of_.find(vm.id);
    if (it == claims_of_.end() || it->second.empty()) return -1;
    std::string node;
    for (const ClaimKey& key : it->second) {
      absl::StatusOr<Claim> c = Rest("claim-get", [&] { return pdc_->GetClaim(key); });
      if (!c.ok()) {
        if (Refused(c.status(), {404})) return -1;
        if (!RefusalOf(c.status()).has_value() && !absl::IsInvalidArgument(c.status())) {
          return c.status();  // No answer.
        }
        stats_->Malformed("claim-get", StdSv(c.status().message()));
        return -1;
      }
      if (c->status.node.empty()) return -1;
      if (!node.empty() && node != c->status.node) return -1;
      node = c->status.node;
    }
    auto n = node_index_.find(node);
    return n == node_index_.end() ? -1 : n->second;
  }

  absl::Status Report(int node) {
    NodeInventory inv = ctx_.cluster->Inventory(node, ctx_.state->device_healthy);
    const bool down = !ctx_.state->node_up[node];
    if (down) inv.devices.clear();
    absl::StatusOr<api::InventoryAccepted> accepted =
        Rest("inventory", [&] { return pdc_->PutInventory(inv); });
    if (!accepted.ok()) return Failed("inventory", accepted.status());
    // The answer says how many devices the extender accepted: fewer means
    // its device classes do not match the scenario's.
    if (accepted->devices != inv.devices.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pdc-extender accepted ", accepted->devices, " of ", inv.devices.size(),
          " devices of ", inv.node, ": configure its deviceClasses like the scenario's"));
    }
    if (down != node_down_reported_[node]) {
      // Lost claims follow the node: count them once per transition.
      RETURN_IF_ERROR(CountLost());
    }
    node_down_reported_[node] = down;
    return absl::OkStatus();
  }

  absl::Status ReportAll() {
    if (node_down_reported_.empty()) node_down_reported_.assign(ctx_.cluster->nodes.size(), false);
    for (size_t n = 0; n < ctx_.cluster->nodes.size(); ++n) {
      RETURN_IF_ERROR(Report(static_cast<int>(n)));
    }
    last_report_ = opt_.wall_clock->Now();
    return absl::OkStatus();
  }

  absl::Status MaybeHeartbeat() {
    if (opt_.wall_clock->Now() - last_report_ < opt_.heartbeat) {
      return absl::OkStatus();
    }
    return ReportAll();
  }

  absl::Status CountLost() {
    absl::StatusOr<std::vector<Claim>> claims =
        Rest("claims-list", [&] { return pdc_->ListClaims(""); });
    if (!claims.ok()) return Failed("claims-list", claims.status());
    claims_seen_ = static_cast<int>(claims->size());
    lost_ = static_cast<int>(std::count_if(claims->begin(), claims->end(), [](const Claim& c) {
      return c.status.phase == ClaimPhase::kLost;
    }));
    return absl::OkStatus();
  }

  // One kube-scheduler wire call, timed for the latency report.
  absl::StatusOr<HttpResponse> Call(std::string_view verb, std::string_view method,
                                    std::string_view target, std::string_view body) {
    const absl::Time t0 = opt_.wall_clock->Now();
    absl::StatusOr<HttpResponse> r = pdc_->http().Do(method, target, body);
    const absl::Time t1 = opt_.wall_clock->Now();
    if (!r.ok()) return r.status();
    stats_->Record(verb, absl::ToInt64Nanoseconds(t1 - t0));
    return r;
  }

  // One REST call through PdcClient, timed as Call() times: every answered
  // call counts, a transport error passes through.
  template <typename Fn>
  auto Rest(std::string_view verb, Fn call) -> decltype(call()) {
    const absl::Time t0 = opt_.wall_clock->Now();
    auto r = call();
    const absl::Time t1 = opt_.wall_clock->Now();
    if (r.ok() || RefusalOf(r.status()).has_value()) {
      stats_->Record(verb, absl::ToInt64Nanoseconds(t1 - t0));
    }
    return r;
  }

  // The server answered with one of `statuses`.
  static bool Refused(const absl::Status& s, std::initializer_list<int> statuses) {
    std::optional<Refusal> r = RefusalOf(s);
    return r.has_value() &&
           std::find(statuses.begin(), statuses.end(), r->http_status) != statuses.end();
  }

  // A REST call that failed: an answer the simulation did not expect (a
  // refusal, or one that does not decode) is counted as malformed and fails
  // the run; a transport error is returned as it is.
  absl::Status Failed(std::string_view verb, const absl::Status& s) {
    if (!RefusalOf(s).has_value() && !absl::IsInvalidArgument(s)) return s;
    stats_->Malformed(verb, StdSv(s.message()));
    return absl::InternalError(absl::StrCat("pdc-http: ", s.message()));
  }

  PolicyContext ctx_;
  HttpModeOptions opt_;
  HttpStats* stats_;
  Rng rng_;
  KubeSchedulerModel kube_;
  std::unique_ptr<PdcClient> pdc_;
  bool handoffs_ = false;
  int lost_ = 0;
  int claims_seen_ = 0;  // In the last GET /v1/claims.
  absl::Time last_report_ = absl::InfinitePast();
  std::vector<bool> node_down_reported_;
  std::vector<std::string> node_json_;
  std::vector<int> held_by_;
  std::map<std::string, int> node_index_;
  std::map<int, std::vector<ClaimKey>> claims_of_;
  std::map<int, std::vector<int>> devices_of_;
  std::vector<int> feasible_, fits_;
  std::vector<std::string_view> names_, fit_names_;
  std::vector<int64_t> scores_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> NewPdcHttpPolicy(const PolicyContext& ctx) {
  if (ctx.http == nullptr || ctx.http_stats == nullptr) {
    return absl::FailedPreconditionError(
        "policy pdc-http needs a pdc-extender (--extender URL or --spawn-extender PATH)");
  }
  auto p = std::make_unique<PdcHttpPolicy>(ctx);
  RETURN_IF_ERROR(p->Init());
  return p;
}

}  // namespace pdc::sim
