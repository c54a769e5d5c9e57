#include "sim/cluster.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pdc::sim {

Cluster Cluster::Build(const Scenario& s) {
  Cluster c;
  for (const DeviceClassSpec& dc : s.device_classes) {
    c.class_names.push_back(dc.resource);
    size_t slash = dc.resource.rfind('/');
    c.class_short.push_back(slash == std::string::npos
                                ? dc.resource
                                : dc.resource.substr(slash + 1));
  }
  const int classes = static_cast<int>(s.device_classes.size());
  for (const NodeGroupSpec& g : s.node_groups) {
    int width = static_cast<int>(std::to_string(g.count - 1).size());
    if (width < 2) width = 2;
    for (int i = 0; i < g.count; ++i) {
      SimNode n;
      n.name = absl::StrFormat("%s%0*d", g.prefix, width, i);
      n.cpu = g.cpu;
      n.memory_gib = g.memory_gib;
      n.devices_by_class.resize(classes);
      n.first_device = static_cast<int>(c.devices.size());
      const int node_index = static_cast<int>(c.nodes.size());
      // One PCI bus per device entry, as on a server where each slot or
      // switch is its own bus; functions 0 only, so addresses sort by slot.
      int group = 10, ordinal = 0, total = 0;
      for (const NodeDevicesSpec& nd : g.devices) total += nd.count;
      for (size_t e = 0; e < g.devices.size(); ++e) {
        const NodeDevicesSpec& nd = g.devices[e];
        for (int k = 0; k < nd.count; ++k, ++ordinal) {
          SimDevice d;
          d.node = node_index;
          d.class_index = nd.class_index;
          d.address = PciAddress(0, static_cast<uint8_t>(0x3b + e * 0x20 + k / 32),
                                 static_cast<uint8_t>(k % 32), 0);
          // Spread devices over NUMA nodes in blocks, the way slots are wired
          // to sockets: the first half on NUMA 0, the second on NUMA 1.
          d.numa = static_cast<int>(static_cast<int64_t>(ordinal) * g.numa_nodes /
                                    total);
          d.vendor = nd.vendor;
          d.device_id = nd.device;
          d.iommu_group = group + k / nd.iommu_group_size;
          d.serial = absl::StrFormat("SIM%05d%04d", node_index, ordinal);
          n.devices_by_class[nd.class_index].push_back(static_cast<int>(c.devices.size()));
          c.devices.push_back(std::move(d));
        }
        group += (nd.count + nd.iommu_group_size - 1) / nd.iommu_group_size;
      }
      n.device_count = static_cast<int>(c.devices.size()) - n.first_device;
      c.nodes.push_back(std::move(n));
    }
  }
  return c;
}

NodeInventory Cluster::Inventory(int node, const std::vector<bool>& healthy) const {
  NodeInventory inv;
  const SimNode& n = nodes[node];
  inv.node = n.name;
  inv.devices.reserve(n.device_count);
  for (int i = n.first_device; i < n.first_device + n.device_count; ++i) {
    const SimDevice& d = devices[i];
    Device dev;
    dev.address = d.address;
    dev.vendor_id = d.vendor;
    dev.device_id = d.device_id;
    // NVMe's class code; selectors here match on vendor:device only.
    dev.class_code = 0x010802;
    dev.iommu_group = d.iommu_group;
    dev.numa_node = static_cast<int16_t>(d.numa);
    dev.serial = d.serial;
    dev.driver = "vfio-pci";
    if (!healthy[i]) MarkUnhealthy(dev, UnhealthyReason::kUnspecified);
    inv.devices.push_back(std::move(dev));
  }
  return inv;
}

int Cluster::FindDevice(int node, PciAddress address) const {
  const SimNode& n = nodes[node];
  for (int i = n.first_device; i < n.first_device + n.device_count; ++i) {
    if (devices[i].address == address) return i;
  }
  return -1;
}

std::vector<DeviceClass> Cluster::DeviceClasses(const Scenario& s) const {
  std::vector<DeviceClass> out;
  for (const DeviceClassSpec& spec : s.device_classes) {
    DeviceClass dc;
    dc.resource_name = spec.resource;
    for (const auto& [vendor, device] : spec.pci_ids) {
      dc.selectors.push_back(PciSelector{vendor, device, std::nullopt});
    }
    out.push_back(std::move(dc));
  }
  return out;
}

}  // namespace pdc::sim
