// `dra`: Dynamic Resource Allocation as of Kubernetes 1.31+. Each VM has a
// ResourceClaim that outlives its pods, but the resourceclaim controller
// clears `status.allocation` once no pod reserves it, so every start
// allocates afresh. The scheduler's DynamicResources plugin filters nodes
// that can satisfy the claim and, on the node kube-scheduler's scoring
// chose, allocates first-fit: the first free devices in ResourceSlice order
// (here PCI address order). Node choice is the shared kube-scheduler model.
#include "sim/kube_scheduler.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

class DraPolicy final : public Policy {
 public:
  explicit DraPolicy(const PolicyContext& ctx)
      : ctx_(ctx),
        rng_(ctx.seed),
        kube_(ctx.state, ctx.scenario->scheduler.percentage_of_nodes_to_score, &rng_) {}

  std::string_view name() const override { return "dra"; }
  StartStyle start_style() const override {
    return {HandoffKind::kDra, VfioBinding::kPrepare, false};
  }

  absl::StatusOr<Placement> Place(const VmInfo& vm, const std::string&,
                                  const std::string&) override {
    Placement p;
    kube_.FindFeasible(vm.shape, &feasible_, &p.nodes_scanned, &p.reason);
    if (feasible_.empty()) return p;
    scores_.clear();
    for (int node : feasible_) scores_.push_back(kube_.Score(node, vm.shape));
    p.node = feasible_[kube_.SelectHost(scores_)];
    for (int d : ctx_.cluster->nodes[p.node].devices_by_class[vm.shape.class_index]) {
      if (static_cast<int>(p.devices.size()) == vm.shape.device_count) break;
      if (ctx_.state->DeviceFree(d)) p.devices.push_back(d);
    }
    p.placed = true;
    p.reason.clear();
    return p;
  }

 private:
  PolicyContext ctx_;
  Rng rng_;
  KubeSchedulerModel kube_;
  std::vector<int> feasible_;
  std::vector<int64_t> scores_;
};

}  // namespace

std::unique_ptr<Policy> NewDraPolicy(const PolicyContext& ctx) {
  return std::make_unique<DraPolicy>(ctx);
}

}  // namespace pdc::sim
