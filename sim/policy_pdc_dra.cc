// `pdc-dra`: pdc's DRA mode. kube-scheduler's DynamicResources plugin
// places the pod (the shared kube-scheduler model; a fresh claim is
// allocated first-fit in ResourceSlice order, here PCI address order, as the
// `dra` policy does); pdc's keeper then adds the VM to the claim's
// `status.reservedFor`, so the allocation outlives the pod; pdc-node, the
// DRA driver, prepares each claim on its own (the start path's DRA branch,
// start_path.h).
//
// What the upstream code does, as this model follows it:
// - An allocated claim is used again as it is: its node selector is a hard
//   constraint and no re-allocation happens (dynamicresources plugin,
//   pkg/scheduler/framework/plugins/dynamicresources/); PreBind appends the
//   pod to reservedFor. If a device of the allocation is taken or unhealthy
//   the pod waits Pending, like a pod of a local PersistentVolume.
// - The resourceclaim controller (pkg/controller/resourceclaim/controller.go,
//   syncClaim) removes pod entries of pods that are gone, and clears the
//   allocation only when its own pruning empties the list. On 1.34 and 1.35
//   a non-pod entry makes syncClaim fail ("unsupported ReservedFor entry")
//   before any write, so once the keeper's VM entry is there the controller
//   no longer prunes that claim's pods and the keeper does; from 1.36 the
//   controller keeps the VM entry and prunes pods itself.
// - Before the keeper's write lands (`dra.keeper_delay` after the pod was
//   reserved), a pod that goes away takes the allocation with it: the
//   controller prunes it and the list is empty.
// - The claim is owned by the VM (made from the VM's template by pdc) and
//   garbage-collected with it; its device is then free (the erase is not
//   modelled, as for `pdc`).
// Nothing here drives pdc's own keeper code: there is no DRA scheduling
// double usable outside tests yet, so this is a model, and the counters it
// reports (writes, prunes, refused syncs) are what the keeper and the
// controller would do under it.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "sim/kube_scheduler.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

class PdcDraPolicy final : public Policy {
 public:
  explicit PdcDraPolicy(const PolicyContext& ctx)
      : ctx_(ctx),
        rng_(ctx.seed),
        kube_(ctx.state, ctx.scenario->scheduler.percentage_of_nodes_to_score, &rng_),
        held_by_(ctx.cluster->devices.size(), -1),
        legacy_controller_(ctx.scenario->dra.kubernetes_minor < 36) {}

  std::string_view name() const override { return "pdc-dra"; }
  StartStyle start_style() const override {
    return {HandoffKind::kDra, VfioBinding::kPrepare, false};
  }

  absl::StatusOr<Placement> Place(const VmInfo& vm, const std::string&,
                                  const std::string& pod_uid) override {
    Claim& c = ClaimOf(vm.id);
    Prune(c);
    Placement p;
    if (c.allocated) {
      // The allocation's node selector: this node or none.
      p.nodes_scanned = 1;
      kube_.FeasiblePinned(c.node, vm.shape, &feasible_, &p.reason);
      if (feasible_.empty()) {
        p.reason = absl::StrCat("dra allocation: ", p.reason);
        return p;
      }
      for (int d : c.devices) {
        if (!ctx_.state->DeviceFree(d)) {
          p.reason = "dra allocation: allocated device in use or unhealthy";
          return p;
        }
      }
      p.node = c.node;
      p.devices = c.devices;
    } else {
      kube_.FindFeasible(vm.shape, &feasible_, &p.nodes_scanned, &p.reason);
      // Devices held by other VMs' allocations are not in the plugin's free
      // set; the kube-scheduler model counts only devices used by running
      // pods, so drop nodes where the allocations leave too few.
      feasible_.erase(std::remove_if(feasible_.begin(), feasible_.end(),
                                     [&](int n) { return FreeUnheld(n, vm.shape) <
                                                         vm.shape.device_count; }),
                      feasible_.end());
      if (feasible_.empty()) {
        if (p.reason.empty()) p.reason = "dra: cannot allocate all claims";
        return p;
      }
      scores_.clear();
      for (int node : feasible_) scores_.push_back(kube_.Score(node, vm.shape));
      p.node = feasible_[kube_.SelectHost(scores_)];
      for (int d : ctx_.cluster->nodes[p.node].devices_by_class[vm.shape.class_index]) {
        if (static_cast<int>(p.devices.size()) == vm.shape.device_count) break;
        if (ctx_.state->DeviceFree(d) && held_by_[d] < 0) p.devices.push_back(d);
      }
      c.allocated = true;
      c.node = p.node;
      c.devices = p.devices;
      for (int d : c.devices) held_by_[d] = vm.id;
      ++counters_["allocations"];
    }
    c.entries.push_back(Entry{pod_uid, -1});
    // The keeper adds the VM once the first pod is reserved.
    if (!c.vm_entry && c.keeper_at < 0) c.keeper_at = Now() + ctx_.scenario->dra.keeper_delay;
    max_reserved_for_ = std::max<uint64_t>(max_reserved_for_, Length(c));
    p.placed = true;
    p.reason.clear();
    return p;
  }

  absl::Status OnVmStopped(const VmInfo& vm, const std::string& pod_uid) override {
    if (static_cast<size_t>(vm.id) >= claims_.size()) return absl::OkStatus();
    Claim& c = claims_[vm.id];
    KeeperCatchUp(c);
    for (Entry& e : c.entries) {
      if (e.pod_uid == pod_uid && e.gone_at < 0) e.gone_at = Now();
    }
    Prune(c);
    return absl::OkStatus();
  }

  absl::Status OnVmDeleted(const VmInfo& vm) override {
    if (static_cast<size_t>(vm.id) >= claims_.size()) return absl::OkStatus();
    Claim& c = claims_[vm.id];
    if (c.vm_entry) ++counters_["keeper_vm_entries_removed"];
    for (int d : c.devices) held_by_[d] = -1;
    c = Claim{};
    return absl::OkStatus();
  }

  bool HasPersistentClaims() const override { return true; }
  bool Holds(int device) const override { return held_by_[device] >= 0; }

  std::map<std::string, uint64_t> Counters() const override {
    std::map<std::string, uint64_t> out = counters_;
    // Writes that have landed by now but that no later event has looked at.
    const SimTime now = Now();
    for (const Claim& c : claims_) {
      if (!c.vm_entry && c.keeper_at >= 0 && c.keeper_at <= now) {
        ++out["keeper_vm_entries_added"];
        if (legacy_controller_) ++out["controller_syncs_refused"];
      }
    }
    out["max_reserved_for"] = max_reserved_for_;
    out["kubernetes_minor"] = static_cast<uint64_t>(ctx_.scenario->dra.kubernetes_minor);
    return out;
  }

  absl::Status CheckConsistency() const override {
    std::vector<int> seen(held_by_.size(), -1);
    for (size_t vm = 0; vm < claims_.size(); ++vm) {
      const Claim& c = claims_[vm];
      if (!c.allocated) continue;
      for (int d : c.devices) {
        if (seen[d] >= 0 || held_by_[d] != static_cast<int>(vm)) {
          return absl::InternalError(absl::StrCat(
              "pdc-dra: device ", ctx_.cluster->devices[d].address.ToString(),
              " is in two allocations or untracked"));
        }
        seen[d] = static_cast<int>(vm);
      }
    }
    for (size_t d = 0; d < held_by_.size(); ++d) {
      if (held_by_[d] >= 0 && seen[d] < 0) {
        return absl::InternalError("pdc-dra: a held device has no allocation");
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Entry {
    std::string pod_uid;
    SimTime gone_at = -1;  // The pod ended then; -1: still there.
  };
  struct Claim {
    bool allocated = false;
    int node = -1;
    std::vector<int> devices;
    std::vector<Entry> entries;  // Pod entries of reservedFor.
    bool vm_entry = false;       // The keeper's VM entry.
    SimTime keeper_at = -1;      // When the keeper's add lands; -1: none due.
  };

  SimTime Now() const { return SimNow(ctx_.clock); }

  Claim& ClaimOf(int vm) {
    if (static_cast<size_t>(vm) >= claims_.size()) claims_.resize(vm + 1);
    return claims_[vm];
  }

  static uint64_t Length(const Claim& c) { return c.entries.size() + (c.vm_entry ? 1 : 0); }

  int FreeUnheld(int node, const VmShape& shape) const {
    int free = 0;
    for (int d : ctx_.cluster->nodes[node].devices_by_class[shape.class_index]) {
      free += ctx_.state->DeviceFree(d) && held_by_[d] < 0;
    }
    return free;
  }

  // The keeper's write lands once it is due, if the claim still has a pod.
  void KeeperCatchUp(Claim& c) {
    if (c.vm_entry || c.keeper_at < 0 || Now() < c.keeper_at) return;
    c.keeper_at = -1;
    c.vm_entry = true;
    ++counters_["keeper_vm_entries_added"];
    if (legacy_controller_) ++counters_["controller_syncs_refused"];
    max_reserved_for_ = std::max<uint64_t>(max_reserved_for_, Length(c));
  }

  // Drops the entries of pods that are gone, as whoever prunes them would
  // by now: the resourceclaim controller, or on 1.34/1.35 with the VM's
  // entry present the keeper (one status write per pod). The reaction time
  // of either is taken to be the keeper's delay.
  void Prune(Claim& c) {
    KeeperCatchUp(c);
    const SimTime now = Now();
    const SimTime delay = ctx_.scenario->dra.keeper_delay;
    size_t kept = 0;
    for (Entry& e : c.entries) {
      if (e.gone_at >= 0 && (now >= e.gone_at + delay || !c.vm_entry)) {
        ++counters_[c.vm_entry && legacy_controller_ ? "keeper_pod_entries_pruned"
                                                     : "controller_pod_entries_pruned"];
        continue;
      }
      c.entries[kept++] = std::move(e);
    }
    c.entries.resize(kept);
    if (c.allocated && c.entries.empty() && !c.vm_entry) {
      // The controller's own pruning emptied the list: it deallocates.
      ++counters_["allocations_lost_before_keeper"];
      for (int d : c.devices) held_by_[d] = -1;
      c.allocated = false;
      c.node = -1;
      c.devices.clear();
      c.keeper_at = -1;
    }
  }

  PolicyContext ctx_;
  Rng rng_;
  KubeSchedulerModel kube_;
  std::vector<int> held_by_;  // VM whose allocation has the device, -1 none.
  bool legacy_controller_;    // 1.34/1.35 resourceclaim controller.
  std::vector<Claim> claims_;  // By VM id.
  std::map<std::string, uint64_t> counters_;
  uint64_t max_reserved_for_ = 0;
  std::vector<int> feasible_;
  std::vector<int64_t> scores_;
};

}  // namespace

std::unique_ptr<Policy> NewPdcDraPolicy(const PolicyContext& ctx) {
  return std::make_unique<PdcDraPolicy>(ctx);
}

}  // namespace pdc::sim
