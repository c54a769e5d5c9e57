// The simulated cluster's fixed topology, built from a Scenario: nodes with
// CPU/memory capacity and PCI devices (addresses, NUMA node, IOMMU group,
// serial), plus the NodeInventory a pdc-node driver would report for each.
// Plain data indexed by dense integers so that the simulation loop does no
// string hashing; names exist for the allocator and the reports.
// Thread-safety: immutable after Build().
#ifndef PDC_SIM_CLUSTER_H_
#define PDC_SIM_CLUSTER_H_

#include <string>
#include <vector>

#include "allocator/allocator.h"
#include "model/types.h"
#include "sim/scenario.h"

namespace pdc::sim {

struct SimDevice {
  int node = 0;
  int class_index = 0;
  PciAddress address;
  uint16_t vendor = 0, device_id = 0;
  int numa = 0;
  int iommu_group = 0;
  std::string serial;
};

struct SimNode {
  std::string name;
  int cpu = 0;
  int memory_gib = 0;
  // Indices into Cluster::devices, per device class, in PCI address order
  // (the order a ResourceSlice lists them and first-fit scans them).
  std::vector<std::vector<int>> devices_by_class;
  int first_device = 0;  // Devices of a node are contiguous.
  int device_count = 0;
};

struct Cluster {
  std::vector<SimNode> nodes;
  std::vector<SimDevice> devices;
  std::vector<std::string> class_names;  // resource names
  std::vector<std::string> class_short;  // "nvme" from devices.kubevirt.io/nvme

  static Cluster Build(const Scenario& s);

  // The pdc-node report for `node`: every device, `healthy[d]` per device.
  NodeInventory Inventory(int node, const std::vector<bool>& healthy) const;
  // Device classes for AllocatorOptions.
  std::vector<DeviceClass> DeviceClasses(const Scenario& s) const;
  // Index of a device of `node` with the given address, or -1.
  int FindDevice(int node, PciAddress address) const;
};

}  // namespace pdc::sim

#endif  // PDC_SIM_CLUSTER_H_
