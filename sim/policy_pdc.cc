// `pdc`: this project. kube-scheduler (the shared model, with the
// percentageOfNodesToScore pdc ships) finds the feasible nodes, then calls
// the pdc extender the way it calls any extender: Filter, then Score
// (weighted into the plugin scores as kube-scheduler does: score * weight *
// MaxNodeScore/MaxExtenderPriority), then Bind on the chosen host. All of it
// goes through the real allocator core (allocator/allocator.h) on a
// MemoryStore and the simulated clock; nothing here re-implements a pdc
// decision. Node failure is RemoveNode, recovery ReplaceInventory with the
// node's full inventory, device failure an inventory with that device
// unhealthy. Nodes never go stale on their own (no heartbeats are
// simulated), so `node_stale_after` is set beyond any run's length.
#include <algorithm>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "allocator/allocator.h"
#include "allocator/memory_store.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "sim/kube_scheduler.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

class PdcPolicy final : public Policy {
 public:
  explicit PdcPolicy(const PolicyContext& ctx)
      : ctx_(ctx),
        rng_(ctx.seed),
        kube_(ctx.state, ctx.scenario->scheduler.pdc_percentage_of_nodes_to_score, &rng_),
        held_by_(ctx.cluster->devices.size(), -1) {}

  absl::Status Init() {
    AllocatorOptions options;
    options.device_classes = ctx_.cluster->DeviceClasses(*ctx_.scenario);
    options.node_stale_after = absl::Hours(24 * 365 * 100);
    options.scoring = ctx_.scenario->scheduler.pdc_spread ? ScoringPolicy::kSpread
                                                          : ScoringPolicy::kBinPack;
    // As pdc-extender ships (extender.serializeHandoffs: true); the node step
    // below confirms every hand-off right after its bind, as pdc-node would
    // once kubelet's Allocate asked for the devices.
    options.serialize_handoffs = true;
    ASSIGN_OR_RETURN(allocator_, Allocator::Open(options, &store_, ctx_.clock));
    for (size_t n = 0; n < ctx_.cluster->nodes.size(); ++n) {
      node_index_[ctx_.cluster->nodes[n].name] = static_cast<int>(n);
      RETURN_IF_ERROR(allocator_->ReplaceInventory(
          ctx_.cluster->Inventory(static_cast<int>(n), ctx_.state->device_healthy)));
    }
    return absl::OkStatus();
  }

  std::string_view name() const override { return "pdc"; }
  StartStyle start_style() const override {
    return {HandoffKind::kDevicePlugin, VfioBinding::kNodeAgent, true};
  }

  absl::Status OnHandoff(const VmInfo& vm, const std::string& pod_uid) override {
    auto it = unconfirmed_.find(vm.id);
    if (it == unconfirmed_.end() || it->second.pod_uid != pod_uid) {
      return absl::InternalError(absl::StrCat("pdc: no pending hand-off for ", vm.name));
    }
    BindOutcome bound = std::move(it->second);
    unconfirmed_.erase(it);
    return ConfirmHandoffs(bound);
  }

  absl::Status OnVmCreated(const VmInfo& vm) override {
    if (!vm.explicit_claims) return absl::OkStatus();
    ClaimSpec spec;
    spec.resource_name = ctx_.cluster->class_names[vm.shape.class_index];
    spec.count = vm.shape.device_count;
    ClaimKey key{ctx_.scenario->ns, ExplicitClaimName(vm)};
    ASSIGN_OR_RETURN(Claim claim, allocator_->CreateClaim(key, spec));
    (void)claim;
    return absl::OkStatus();
  }

  absl::StatusOr<Placement> Place(const VmInfo& vm, const std::string& pod_name,
                                  const std::string& pod_uid) override {
    Placement p;
    SchedulingRequest req = Request(vm, pod_name, pod_uid);
    FindFeasibleNodes(vm, &p);
    if (feasible_.empty()) return p;
    FilterWithAllocator(req, &p);
    if (fits_.empty()) return p;
    const size_t host = SelectHostWithScores(req, vm, &p);
    p.node = fits_[host];
    ++p.extender_calls;
    absl::StatusOr<BindOutcome> bound = allocator_->Bind(req, fit_names_[host]);
    if (!bound.ok()) {
      p.node = -1;
      p.reason = absl::StrCat("pdc bind: ", absl::StatusCodeToString(bound.status().code()));
      return p;
    }
    if (ctx_.scenario->start_path.enabled) {
      // The start-path model confirms when kubelet's Allocate reaches
      // pdc-node (OnHandoff); until then the gate holds the node.
      unconfirmed_[vm.id] = *bound;
    } else {
      RETURN_IF_ERROR(ConfirmHandoffs(*bound));
    }
    RETURN_IF_ERROR(RecordBinding(vm, *bound, &p));
    p.placed = true;
    p.reason.clear();
    if (allocator_->CheckpointDue()) RETURN_IF_ERROR(allocator_->Checkpoint());
    return p;
  }

  absl::Status OnVmStopped(const VmInfo& vm, const std::string& pod_uid) override {
    // A pod gone before its hand-off: releasing its claims clears the
    // reservation and with it the pending hand-off.
    unconfirmed_.erase(vm.id);
    if (static_cast<size_t>(vm.id) >= claims_of_.size()) return absl::OkStatus();
    for (const ClaimKey& key : claims_of_[vm.id]) {
      absl::Status s = allocator_->Release(key, pod_uid);
      // A claim whose node was removed may refuse; the pod is gone anyway.
      if (!s.ok() && !absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) return s;
    }
    return absl::OkStatus();
  }

  absl::Status OnVmDeleted(const VmInfo& vm) override {
    std::vector<ClaimKey> keys;
    if (static_cast<size_t>(vm.id) < claims_of_.size()) {
      keys = std::move(claims_of_[vm.id]);
      claims_of_[vm.id].clear();
    }
    if (vm.explicit_claims && keys.empty()) {
      keys.push_back(ClaimKey{ctx_.scenario->ns, ExplicitClaimName(vm)});
    }
    // Template claims are owned by the VM and go with it; the explicit one is
    // deleted with it too. With reclaimPolicy Retain their devices are then
    // Released (they hold the VM's data) until an administrator releases
    // them: modelled here as done at once (pdcctl release device), so the
    // device returns to the pool.
    for (const ClaimKey& key : keys) {
      absl::Status s = allocator_->DeleteClaim(key, /*force=*/true);
      if (!s.ok() && !absl::IsNotFound(s)) return s;
    }
    if (static_cast<size_t>(vm.id) < devices_of_.size()) {
      for (int d : devices_of_[vm.id]) {
        held_by_[d] = -1;
        const SimDevice& dev = ctx_.cluster->devices[d];
        absl::Status s =
            allocator_->ReleaseDevice(ctx_.cluster->nodes[dev.node].name, dev.address);
        if (!s.ok() && !absl::IsNotFound(s) && !absl::IsFailedPrecondition(s)) return s;
      }
      devices_of_[vm.id].clear();
    }
    return absl::OkStatus();
  }

  absl::Status OnNodeDown(int node) override {
    return allocator_->RemoveNode(ctx_.cluster->nodes[node].name);
  }
  absl::Status OnNodeUp(int node) override {
    return allocator_->ReplaceInventory(
        ctx_.cluster->Inventory(node, ctx_.state->device_healthy));
  }
  absl::Status OnDeviceHealth(int device, bool healthy) override {
    const int node = ctx_.cluster->devices[device].node;
    if (!ctx_.state->node_up[node]) return absl::OkStatus();
    return allocator_->ReplaceInventory(
        ctx_.cluster->Inventory(node, ctx_.state->device_healthy));
  }

  bool HasPersistentClaims() const override { return true; }
  bool Holds(int device) const override { return held_by_[device] >= 0; }
  int LostClaims() const override {
    return static_cast<int>(allocator_->Stats().claims_lost);
  }

  absl::Status CheckConsistency() const override {
    RETURN_IF_ERROR(allocator_->Health());
    AllocatorStats stats = allocator_->Stats();
    if (stats.claims_lost != 0) return absl::OkStatus();
    size_t held = 0;
    for (int h : held_by_) held += h >= 0;
    if (held != stats.devices_allocated) {
      return absl::InternalError(absl::StrCat(
          "pdc: the simulator tracks ", held, " claimed devices, the allocator ",
          stats.devices_allocated));
    }
    return absl::OkStatus();
  }

 private:
  // kube-scheduler's own filter: the VM's bound node alone with node
  // affinity to its claims, else a window of nodes. Fills feasible_.
  void FindFeasibleNodes(const VmInfo& vm, Placement* p) {
    const int pinned =
        ctx_.scenario->scheduler.pdc_node_affinity ? BoundNode(vm) : -1;
    if (pinned >= 0) {
      p->nodes_scanned = 1;
      kube_.FeasiblePinned(pinned, vm.shape, &feasible_, &p->reason);
    } else {
      kube_.FindFeasible(vm.shape, &feasible_, &p->nodes_scanned, &p->reason);
    }
  }

  // The extender's filter over feasible_: fills fits_ and fit_names_; with
  // none, the reason is the one most nodes gave.
  void FilterWithAllocator(const SchedulingRequest& req, Placement* p) {
    names_.clear();
    for (int n : feasible_) names_.push_back(ctx_.cluster->nodes[n].name);
    p->extender_nodes = static_cast<int>(names_.size());
    p->extender_calls = 1;
    FilterResult filter = allocator_->Filter(req, names_);
    fits_.clear();
    fit_names_.clear();
    std::map<FilterReason, int> reasons;
    for (size_t i = 0; i < filter.nodes.size(); ++i) {
      if (filter.nodes[i].verdict == Verdict::kFits) {
        fits_.push_back(feasible_[i]);
        fit_names_.push_back(names_[i]);
      } else {
        ++reasons[filter.nodes[i].reason];
      }
    }
    if (!fits_.empty()) return;
    // The most common reason across candidate nodes; ties: enum order.
    auto top = std::max_element(reasons.begin(), reasons.end(),
                                [](const auto& a, const auto& b) {
                                  return a.second < b.second;
                                });
    p->reason = top == reasons.end()
                    ? "pdc: no verdict"
                    : absl::StrCat("pdc: ", Sv(ToString(top->first)));
  }

  // The index in fits_ of the host: kube-scheduler's scores plus the
  // extender's, weighted.
  size_t SelectHostWithScores(const SchedulingRequest& req, const VmInfo& vm, Placement* p) {
    // kube-scheduler skips scoring, extenders' prioritize included, when a
    // single node survives filtering (schedule_one.go: "When only one node
    // after predicate, just use it").
    if (fits_.size() <= 1) return 0;
    std::vector<int> ext = allocator_->Score(req, fit_names_);
    p->extender_nodes += static_cast<int>(fit_names_.size());
    ++p->extender_calls;
    scores_.clear();
    const int64_t weight = ctx_.scenario->scheduler.extender_weight;
    for (size_t i = 0; i < fits_.size(); ++i) {
      // MaxNodeScore (100) / MaxExtenderPriority (10) = 10.
      scores_.push_back(kube_.Score(fits_[i], vm.shape) + ext[i] * weight * 10);
    }
    return kube_.SelectHost(scores_);
  }

  // Remembers the VM's claims and devices (the ones it held before are let
  // go) and puts the devices, sorted, into the placement.
  absl::Status RecordBinding(const VmInfo& vm, const BindOutcome& bound, Placement* p) {
    if (static_cast<size_t>(vm.id) >= claims_of_.size()) {
      claims_of_.resize(vm.id + 1);
      devices_of_.resize(vm.id + 1);
    }
    for (int d : devices_of_[vm.id]) held_by_[d] = -1;
    std::vector<ClaimKey>& keys = claims_of_[vm.id];
    keys.clear();
    for (const BoundClaim& c : bound.claims) {
      keys.push_back(c.key);
      for (const PciAddress& a : c.devices) {
        const int d = ctx_.cluster->FindDevice(p->node, a);
        if (d < 0) {
          return absl::InternalError(absl::StrCat("pdc bound unknown device ",
                                                  a.ToString(), " on ", bound.node));
        }
        p->devices.push_back(d);
        held_by_[d] = vm.id;
      }
    }
    std::sort(p->devices.begin(), p->devices.end());
    devices_of_[vm.id] = p->devices;
    return absl::OkStatus();
  }

  std::string ExplicitClaimName(const VmInfo& vm) const {
    return absl::StrCat(vm.name, "-data");
  }

  // The node all of the VM's claims are bound to (a Lost claim keeps its
  // node), or -1 before its first bind. Reads the claims from the allocator
  // (GetClaim), as a webhook adding node affinity would; the claims are the
  // ones the VM's last bind returned.
  int BoundNode(const VmInfo& vm) const {
    if (static_cast<size_t>(vm.id) >= claims_of_.size() || claims_of_[vm.id].empty()) return -1;
    std::string node;
    for (const ClaimKey& key : claims_of_[vm.id]) {
      absl::StatusOr<Claim> c = allocator_->GetClaim(key);
      if (!c.ok() || c->status.node.empty()) return -1;
      if (!node.empty() && node != c->status.node) return -1;
      node = c->status.node;
    }
    auto n = node_index_.find(node);
    return n == node_index_.end() ? -1 : n->second;
  }

  // pdc-node's confirmation, per resource, of the devices just bound.
  absl::Status ConfirmHandoffs(const BindOutcome& bound) {
    std::map<std::string, std::vector<PciAddress>> by_resource;
    for (const BoundClaim& c : bound.claims) {
      auto& v = by_resource[c.resource_name];
      v.insert(v.end(), c.devices.begin(), c.devices.end());
    }
    for (auto& [resource, devices] : by_resource) {
      std::sort(devices.begin(), devices.end());
      absl::StatusOr<std::vector<ClaimKey>> confirmed =
          allocator_->ConfirmHandoff(bound.node, bound.pod_uid, resource, devices);
      // NotFound: nothing was pending (the claims were already handed to
      // this pod, e.g. a bind repeated after a lost answer).
      if (!confirmed.ok() && !absl::IsNotFound(confirmed.status())) return confirmed.status();
    }
    return absl::OkStatus();
  }

  SchedulingRequest Request(const VmInfo& vm, const std::string& pod_name,
                            const std::string& pod_uid) const {
    SchedulingRequest req;
    req.ns = ctx_.scenario->ns;
    req.vm = vm.name;
    req.pod_name = pod_name;
    req.pod_uid = pod_uid;
    if (vm.explicit_claims) req.claim_names.push_back(ExplicitClaimName(vm));
    req.resources.emplace_back(ctx_.cluster->class_names[vm.shape.class_index],
                               vm.shape.device_count);
    return req;
  }

  PolicyContext ctx_;
  Rng rng_;
  KubeSchedulerModel kube_;
  MemoryStore store_;
  std::unique_ptr<Allocator> allocator_;
  std::vector<int> held_by_;  // VM whose bound claim has the device, -1 none.
  absl::flat_hash_map<std::string, int> node_index_;
  std::vector<std::vector<ClaimKey>> claims_of_;  // By VM id: its claims.
  std::vector<std::vector<int>> devices_of_;      // By VM id: held devices.
  // Start-path model: binds whose hand-off kubelet has not asked for yet.
  std::map<int, BindOutcome> unconfirmed_;
  std::vector<int> feasible_, fits_;
  std::vector<std::string_view> names_, fit_names_;
  std::vector<int64_t> scores_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Policy>> NewPdcPolicy(const PolicyContext& ctx) {
  auto p = std::make_unique<PdcPolicy>(ctx);
  RETURN_IF_ERROR(p->Init());
  return p;
}

}  // namespace pdc::sim
