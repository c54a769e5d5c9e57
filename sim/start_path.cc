#include "sim/start_path.h"

#include <algorithm>

namespace pdc::sim {

StartPathModel::StartPathModel(const StartPathSpec& spec, const Cluster& cluster,
                               StartStyle style, uint64_t seed)
    : spec_(spec),
      cluster_(cluster),
      style_(style),
      rng_(seed),
      admit_free_(cluster.nodes.size(), 0),
      agent_free_(cluster.nodes.size(), 0),
      vfio_ready_(cluster.devices.size(),
                  style.binding == VfioBinding::kAtBoot ? SimTime{0} : SimTime{-1}) {}

void StartPathModel::NodeReady(int node, SimTime ready, const std::vector<int>& claimed) {
  const SimNode& n = cluster_.nodes[node];
  const bool at_boot = style_.binding == VfioBinding::kAtBoot;
  for (int d = n.first_device; d < n.first_device + n.device_count; ++d) {
    vfio_ready_[d] = at_boot ? ready : -1;
  }
  admit_free_[node] = ready;
  agent_free_[node] = ready;
  if (style_.binding == VfioBinding::kNodeAgent) DevicesClaimed(node, ready, claimed);
}

void StartPathModel::DevicesClaimed(int node, SimTime t, const std::vector<int>& devices) {
  if (style_.binding != VfioBinding::kNodeAgent) return;
  for (int d : devices) {
    if (vfio_ready_[d] >= 0) continue;
    agent_free_[node] = std::max(agent_free_[node], t) + Bind();
    vfio_ready_[d] = agent_free_[node];
  }
}

PodTimeline StartPathModel::Start(int node, SimTime arrive, const std::vector<int>& devices) {
  PodTimeline tl;
  const SimTime begin = std::max(arrive, admit_free_[node]);
  SimTime devices_done = 0;
  if (style_.handoff == HandoffKind::kDevicePlugin) {
    // Allocate inside admission: wait for vfio-pci, then answer.
    const SimTime asked = begin + spec_.admission;
    SimTime ready = asked;
    for (int d : devices) {
      // Not bound and nobody binding it (a device plugin that does not bind):
      // the wait runs out.
      ready = std::max(ready, vfio_ready_[d] < 0 ? asked + spec_.allocate_vfio_wait + 1
                                                 : vfio_ready_[d]);
    }
    if (ready - asked > spec_.allocate_vfio_wait) {
      tl.failed = true;
      tl.admitted = asked + spec_.allocate_vfio_wait;
      admit_free_[node] = tl.admitted;
      return tl;
    }
    tl.admitted = ready + spec_.allocate;
    admit_free_[node] = tl.admitted;
    tl.handoff = tl.admitted + (style_.confirms_handoff ? spec_.handoff_confirm : 0);
    devices_done = tl.admitted;
  } else {
    tl.admitted = begin + spec_.admission;
    admit_free_[node] = tl.admitted;
    // The claim's prepare: the driver binds its devices in turn; claims of
    // other pods are prepared at the same time.
    SimTime t = tl.admitted + spec_.prepare;
    for (int d : devices) {
      if (vfio_ready_[d] < 0) {
        t += Bind();
        vfio_ready_[d] = t;
      } else {
        t = std::max(t, vfio_ready_[d]);
      }
    }
    tl.handoff = t;
    devices_done = t;
  }
  tl.running = devices_done + spec_.qemu_start.Sample(rng_);
  return tl;
}

}  // namespace pdc::sim
