// What Kubernetes itself knows about the simulated cluster at one instant:
// which nodes are Ready, CPU/memory requested by running VM pods, which
// device each running VM pod holds, device health. The engine owns and
// updates it; policies read it to make their decisions (kube-scheduler's
// view). Claims and "held for a stopped VM" are policy business, not here.
// Thread-safety: not synchronised; one per simulation run.
#ifndef PDC_SIM_CLUSTER_STATE_H_
#define PDC_SIM_CLUSTER_STATE_H_

#include <cstdint>
#include <vector>

#include "sim/cluster.h"

namespace pdc::sim {

// The scheduling-relevant shape of a VM's pod.
struct VmShape {
  int cpu = 0;
  int memory_gib = 0;
  int class_index = 0;
  int device_count = 1;
};

struct ClusterState {
  explicit ClusterState(const Cluster& c)
      : cluster(&c),
        classes(static_cast<int>(c.class_names.size())),
        node_up(c.nodes.size(), 1),
        cpu_used(c.nodes.size(), 0),
        mem_used(c.nodes.size(), 0),
        free_count(c.nodes.size() * c.class_names.size(), 0),
        device_user(c.devices.size(), -1),
        device_healthy(c.devices.size(), true),
        version(c.nodes.size(), 0),
        words((c.nodes.size() + 63) / 64),
        has_free(classes * words, 0) {
    for (const SimDevice& d : c.devices) ++free_count[d.node * classes + d.class_index];
    for (size_t n = 0; n < c.nodes.size(); ++n) {
      cpu_cap.push_back(c.nodes[n].cpu);
      mem_cap.push_back(c.nodes[n].memory_gib);
      Refresh(static_cast<int>(n));
    }
  }

  // Healthy devices of `cls` on `node` no running pod uses (kubelet's
  // allocatable minus allocated for the extended resource).
  int Free(int node, int cls) const { return free_count[node * classes + cls]; }
  bool Fits(int node, const VmShape& s) const {
    return node_up[node] && cpu_used[node] + s.cpu <= cpu_cap[node] &&
           mem_used[node] + s.memory_gib <= mem_cap[node] &&
           Free(node, s.class_index) >= s.device_count;
  }
  bool DeviceFree(int d) const { return device_user[d] < 0 && device_healthy[d]; }

  // First node at or after `from` (no wrap) that is Ready with at least one
  // free device of `cls`; -1 if none. Lets kube-scheduler's scan skip full
  // nodes a word (64 nodes) at a time.
  int NextWithFree(int cls, int from) const {
    const int n = static_cast<int>(node_up.size());
    if (from >= n) return -1;
    const uint64_t* w = &has_free[static_cast<size_t>(cls) * words];
    size_t i = static_cast<size_t>(from) / 64;
    uint64_t bits = w[i] & (~uint64_t{0} << (from % 64));
    while (true) {
      if (bits) {
        const int node = static_cast<int>(i * 64 + __builtin_ctzll(bits));
        return node < n ? node : -1;
      }
      if (++i >= words) return -1;
      bits = w[i];
    }
  }

  void SetNodeUp(int node, bool up) {
    node_up[node] = up;
    Refresh(node);
  }

  void Occupy(int vm, int node, const VmShape& s, const std::vector<int>& devices) {
    cpu_used[node] += s.cpu;
    mem_used[node] += s.memory_gib;
    for (int d : devices) {
      device_user[d] = vm;
      --free_count[node * classes + cluster->devices[d].class_index];
    }
    Refresh(node);
  }
  void Vacate(int node, const VmShape& s, const std::vector<int>& devices) {
    cpu_used[node] -= s.cpu;
    mem_used[node] -= s.memory_gib;
    for (int d : devices) {
      device_user[d] = -1;
      if (device_healthy[d]) ++free_count[node * classes + cluster->devices[d].class_index];
    }
    Refresh(node);
  }
  void SetHealthy(int d, bool healthy) {
    if (device_healthy[d] == healthy) return;
    device_healthy[d] = healthy;
    if (device_user[d] >= 0) return;
    const SimDevice& dev = cluster->devices[d];
    free_count[dev.node * classes + dev.class_index] += healthy ? 1 : -1;
    Refresh(dev.node);
  }

  // Recomputes the node's bits and bumps its version (score caches key on it).
  void Refresh(int node) {
    ++version[node];
    for (int c = 0; c < classes; ++c) {
      uint64_t& w = has_free[static_cast<size_t>(c) * words + node / 64];
      const uint64_t bit = uint64_t{1} << (node % 64);
      if (node_up[node] && Free(node, c) > 0) {
        w |= bit;
      } else {
        w &= ~bit;
      }
    }
  }

  const Cluster* cluster;
  int classes;
  std::vector<uint8_t> node_up;  // Write through SetNodeUp().
  std::vector<int> cpu_used;
  std::vector<int> mem_used;
  std::vector<int> free_count;
  std::vector<int> device_user;  // VM running on the device, -1 none.
  std::vector<bool> device_healthy;
  std::vector<uint32_t> version;   // Bumped whenever the node changes.
  size_t words;                    // 64-bit words per class bitset.
  std::vector<uint64_t> has_free;  // [class][node]: Ready with a free device.
  // Copies of the nodes' capacity, flat for the scheduler's hot loop.
  std::vector<int> cpu_cap, mem_cap;
};

}  // namespace pdc::sim

#endif  // PDC_SIM_CLUSTER_STATE_H_
