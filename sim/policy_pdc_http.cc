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
#include <map>

#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
#include "api/handoff_json.h"
#include "api/json_util.h"
#include "api/rest_json.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "sim/http_stats.h"
#include "sim/kube_scheduler.h"
#include "sim/kube_wire.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

namespace json = api::json;

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
    ASSIGN_OR_RETURN(client_, HttpClient::Create(o));
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
    ASSIGN_OR_RETURN(HttpResponse probe, Call("handoff-list", "GET", "/v1/handoffs", ""));
    handoffs_ = probe.status == 200;
    return ReportAll();
  }

  std::string_view name() const override { return "pdc-http"; }

  absl::Status OnVmCreated(const VmInfo& vm) override {
    if (!vm.explicit_claims) return absl::OkStatus();
    api::ClaimCreate c;
    c.key = ClaimKey{ctx_.scenario->ns, ExplicitClaimName(vm)};
    c.spec.resource_name = ctx_.cluster->class_names[vm.shape.class_index];
    c.spec.count = vm.shape.device_count;
    ASSIGN_OR_RETURN(HttpResponse r,
                     Call("claim-create", "POST",
                          absl::StrCat("/v1/namespaces/", c.key.ns, "/claims"),
                          api::WriteClaimCreate(c)));
    if (r.status != 201) return Unexpected("claim-create", r);
    return absl::OkStatus();
  }

  absl::StatusOr<Placement> Place(const VmInfo& vm, const std::string& pod_name,
                                  const std::string& pod_uid) override {
    RETURN_IF_ERROR(MaybeHeartbeat());
    Placement p;
    int pinned = -1;
    if (ctx_.scenario->scheduler.pdc_node_affinity) {
      ASSIGN_OR_RETURN(pinned, BoundNode(vm));
    }
    if (pinned >= 0) {
      p.nodes_scanned = 1;
      kube_.FeasiblePinned(pinned, vm.shape, &feasible_, &p.reason);
    } else {
      kube_.FindFeasible(vm.shape, &feasible_, &p.nodes_scanned, &p.reason);
    }
    if (feasible_.empty()) return p;
    names_.clear();
    for (int n : feasible_) names_.push_back(ctx_.cluster->nodes[n].name);
    const std::string pod = VirtLauncherPodJson(Pod(vm, pod_name, pod_uid));

    p.extender_nodes = static_cast<int>(names_.size());
    p.extender_calls = 1;
    ASSIGN_OR_RETURN(HttpResponse fr, Call("filter", "POST", opt_.scheduler_prefix + "/filter",
                                           Args(pod, feasible_, names_)));
    absl::StatusOr<FilterAnswer> fa =
        fr.status == 200 ? ParseFilterAnswer(fr.body, names_, opt_.node_list)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", fr.status));
    if (!fa.ok()) {
      stats_->Malformed("filter", StdSv(fa.status().message()));
      p.reason = "pdc-http: malformed filter answer";
      return p;
    }
    if (!fa->error.empty() || fa->passed.empty()) {
      p.reason = fa->error.empty() ? "pdc-http: no node passed filter" : "pdc-http: filter error";
      return p;
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
    size_t host = 0;
    // As kube-scheduler: no prioritize call when a single node passed.
    if (fits_.size() > 1) {
      p.extender_nodes += static_cast<int>(fit_names_.size());
      ++p.extender_calls;
      ASSIGN_OR_RETURN(HttpResponse pr, Call("prioritize", "POST",
                                             opt_.scheduler_prefix + "/prioritize",
                                             Args(pod, fits_, fit_names_)));
      absl::StatusOr<std::vector<int>> ext =
          pr.status == 200 ? ParsePriorityAnswer(pr.body, fit_names_)
                           : absl::InvalidArgumentError(absl::StrCat("HTTP ", pr.status));
      if (!ext.ok()) {
        stats_->Malformed("prioritize", StdSv(ext.status().message()));
        p.reason = "pdc-http: malformed prioritize answer";
        return p;
      }
      scores_.clear();
      const int64_t weight = ctx_.scenario->scheduler.extender_weight;
      for (size_t i = 0; i < fits_.size(); ++i) {
        scores_.push_back(kube_.Score(fits_[i], vm.shape) + (*ext)[i] * weight * 10);
      }
      host = kube_.SelectHost(scores_);
    }
    const int node = fits_[host];
    const std::string& node_name = ctx_.cluster->nodes[node].name;
    ++p.extender_calls;
    ASSIGN_OR_RETURN(HttpResponse br,
                     Call("bind", "POST", opt_.scheduler_prefix + "/bind",
                          BindingArgsJson(pod_name, ctx_.scenario->ns, pod_uid, node_name)));
    absl::StatusOr<std::string> berr =
        br.status == 200 ? ParseBindAnswer(br.body)
                         : absl::InvalidArgumentError(absl::StrCat("HTTP ", br.status));
    if (!berr.ok()) {
      stats_->Malformed("bind", StdSv(berr.status().message()));
      p.reason = "pdc-http: malformed bind answer";
      return p;
    }
    if (!berr->empty()) {
      p.reason = "pdc-http bind: refused";
      return p;
    }
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
      ASSIGN_OR_RETURN(HttpResponse r,
                       Call("release", "POST",
                            absl::StrCat("/v1/namespaces/", key.ns, "/claims/", key.name,
                                         "/release?podUid=", pod_uid),
                            ""));
      // As in-process: a claim whose node went away may refuse (409).
      if (r.status != 200 && r.status != 404 && r.status != 409) {
        return Unexpected("release", r);
      }
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
      ASSIGN_OR_RETURN(HttpResponse r,
                       Call("claim-delete", "DELETE",
                            absl::StrCat("/v1/namespaces/", key.ns, "/claims/", key.name,
                                         "?force=true"),
                            ""));
      if (r.status != 200 && r.status != 404) return Unexpected("claim-delete", r);
    }
    if (auto it = devices_of_.find(vm.id); it != devices_of_.end()) {
      for (int d : it->second) held_by_[d] = -1;
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
    ASSIGN_OR_RETURN(HttpResponse r, Call("allocations", "GET",
                                          absl::StrCat("/v1/nodes/", node_name, "/allocations"),
                                          ""));
    absl::StatusOr<api::NodeAllocationsReply> a =
        r.status == 200 ? api::ParseNodeAllocations(r.body)
                        : absl::InvalidArgumentError(absl::StrCat("HTTP ", r.status));
    if (!a.ok()) {
      stats_->Malformed("allocations", StdSv(a.status().message()));
      return absl::InternalError(absl::StrCat("pdc-http: allocations of ", node_name, ": ",
                                              a.status().message()));
    }
    std::map<std::string, std::vector<PciAddress>> by_resource;
    std::vector<ClaimKey> keys;
    for (const NodeAllocation& e : a->allocations.claimed) {
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
        ASSIGN_OR_RETURN(HttpResponse h,
                         Call("handoff", "POST", absl::StrCat("/v1/nodes/", node_name, "/handoffs"),
                              api::WriteHandoffConfirm(confirm)));
        if (h.status != 200) return Unexpected("handoff", h);
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
      ASSIGN_OR_RETURN(HttpResponse r,
                       Call("claim-get", "GET",
                            absl::StrCat("/v1/namespaces/", key.ns, "/claims/", key.name), ""));
      if (r.status == 404) return -1;
      rapidjson::Document doc;
      absl::Status s = r.status == 200 ? json::Parse(r.body, &doc)
                                       : absl::InvalidArgumentError(absl::StrCat("HTTP ", r.status));
      absl::StatusOr<Claim> c = s.ok() ? api::ParseClaim(doc) : absl::StatusOr<Claim>(s);
      if (!c.ok()) {
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
    ASSIGN_OR_RETURN(HttpResponse r,
                     Call("inventory", "PUT",
                          absl::StrCat("/v1/nodes/", inv.node, "/inventory"),
                          api::WriteInventory(inv)));
    if (r.status != 200) return Unexpected("inventory", r);
    // The answer says how many devices the extender accepted: fewer means
    // its device classes do not match the scenario's.
    rapidjson::Document doc;
    RETURN_IF_ERROR(json::Parse(r.body, &doc));
    absl::StatusOr<int64_t> accepted = json::ReqInt(doc, "devices", "devices");
    if (!accepted.ok() || *accepted != static_cast<int64_t>(inv.devices.size())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "pdc-extender accepted ", accepted.ok() ? *accepted : -1, " of ", inv.devices.size(),
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
    ASSIGN_OR_RETURN(HttpResponse r, Call("claims-list", "GET", "/v1/claims", ""));
    if (r.status != 200) return Unexpected("claims-list", r);
    rapidjson::Document doc;
    RETURN_IF_ERROR(json::Parse(r.body, &doc));
    const json::Value* items = json::Find(doc, "items");
    int lost = 0;
    claims_seen_ = items && items->IsArray() ? static_cast<int>(items->Size()) : 0;
    for (rapidjson::SizeType i = 0; items && items->IsArray() && i < items->Size(); ++i) {
      absl::StatusOr<Claim> c = api::ParseClaim((*items)[i]);
      if (!c.ok()) {
        stats_->Malformed("claims-list", StdSv(c.status().message()));
        continue;
      }
      lost += c->status.phase == ClaimPhase::kLost;
    }
    lost_ = lost;
    return absl::OkStatus();
  }

  absl::StatusOr<HttpResponse> Call(std::string_view verb, std::string_view method,
                                    std::string_view target, std::string_view body) {
    const absl::Time t0 = opt_.wall_clock->Now();
    absl::StatusOr<HttpResponse> r = client_->Do(method, target, body);
    const absl::Time t1 = opt_.wall_clock->Now();
    if (!r.ok()) return r.status();
    stats_->Record(verb, absl::ToInt64Nanoseconds(t1 - t0));
    return r;
  }

  absl::Status Unexpected(std::string_view verb, const HttpResponse& r) {
    stats_->Malformed(verb, absl::StrCat("HTTP ", r.status, ": ", r.body.substr(0, 200)));
    return absl::InternalError(absl::StrCat("pdc-http: ", Sv(verb), " answered HTTP ", r.status,
                                            ": ", r.body.substr(0, 300)));
  }

  PolicyContext ctx_;
  HttpModeOptions opt_;
  HttpStats* stats_;
  Rng rng_;
  KubeSchedulerModel kube_;
  std::unique_ptr<HttpClient> client_;
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
