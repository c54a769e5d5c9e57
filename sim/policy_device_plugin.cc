// `device-plugin`: KubeVirt today. kube-scheduler picks the node (see
// kube_scheduler.h) among nodes with a free device of the resource; kubelet's
// device manager then picks which free device of the resource the pod gets.
// KubeVirt's PCI device plugin offers no GetPreferredAllocation, so kubelet
// takes devices from an unordered Go set (map iteration order): effectively
// arbitrary, modelled as uniformly random with the run's seeded Rng. The
// allocation dies with the pod: a stopped VM remembers nothing.
#include <algorithm>

#include "sim/kube_scheduler.h"
#include "sim/policy.h"

namespace pdc::sim {
namespace {

class DevicePluginPolicy final : public Policy {
 public:
  explicit DevicePluginPolicy(const PolicyContext& ctx)
      : ctx_(ctx),
        rng_(ctx.seed),
        kube_(ctx.state, ctx.scenario->scheduler.percentage_of_nodes_to_score, &rng_) {}

  std::string_view name() const override { return "device-plugin"; }
  // KubeVirt's PCI device plugin serves only devices already on vfio-pci
  // (bound at boot by the administrator's tooling).
  StartStyle start_style() const override {
    return {HandoffKind::kDevicePlugin, VfioBinding::kAtBoot, false};
  }

  absl::StatusOr<Placement> Place(const VmInfo& vm, const std::string&,
                                  const std::string&) override {
    Placement p;
    kube_.FindFeasible(vm.shape, &feasible_, &p.nodes_scanned, &p.reason);
    if (feasible_.empty()) return p;
    scores_.clear();
    for (int node : feasible_) scores_.push_back(kube_.Score(node, vm.shape));
    p.node = feasible_[kube_.SelectHost(scores_)];
    // kubelet: `count` distinct free devices, uniformly at random.
    free_.clear();
    for (int d : ctx_.cluster->nodes[p.node].devices_by_class[vm.shape.class_index]) {
      if (ctx_.state->DeviceFree(d)) free_.push_back(d);
    }
    for (int k = 0; k < vm.shape.device_count; ++k) {
      size_t pick = k + rng_.Below(free_.size() - k);
      std::swap(free_[k], free_[pick]);
      p.devices.push_back(free_[k]);
    }
    std::sort(p.devices.begin(), p.devices.end());
    p.placed = true;
    p.reason.clear();
    return p;
  }

 private:
  PolicyContext ctx_;
  Rng rng_;
  KubeSchedulerModel kube_;
  std::vector<int> feasible_, free_;
  std::vector<int64_t> scores_;
};

}  // namespace

std::unique_ptr<Policy> NewDevicePluginPolicy(const PolicyContext& ctx) {
  return std::make_unique<DevicePluginPolicy>(ctx);
}

}  // namespace pdc::sim
