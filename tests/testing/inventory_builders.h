// Builders for the model values tests feed the allocator, the extender and
// the node driver: NVMe devices as pdc-node reports them, node inventories,
// and the NVMe device class. The devices are QEMU's emulated NVMe controller
// (1b36:0010, class 010802), the device the QEMU real-kernel test binds.
// Tests using it link pdc_allocator (or a library that does).
// Thread-safety: pure functions.
#ifndef PDC_TESTS_TESTING_INVENTORY_BUILDERS_H_
#define PDC_TESTS_TESTING_INVENTORY_BUILDERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/types.h"
#include "model/pci_address.h"

namespace pdc::testing {

inline constexpr char kNvme[] = "devices.kubevirt.io/nvme";
inline constexpr uint16_t kQemuVendorId = 0x1b36;
inline constexpr uint16_t kQemuNvmeDeviceId = 0x0010;
inline constexpr uint32_t kNvmeClassCode = 0x010802;

// QEMU's NVMe controller, and the id it shows with use-intel-id=on.
inline PciSelector QemuNvmeSelector() {
  return PciSelector{kQemuVendorId, kQemuNvmeDeviceId, std::nullopt};
}
inline PciSelector QemuNvmeIntelIdSelector() {
  return PciSelector{0x8086, 0x5845, std::nullopt};
}

// devices.kubevirt.io/nvme as pdc's default configuration has it: both ids.
inline DeviceClass NvmeClass() {
  return DeviceClass{kNvme, {QemuNvmeSelector(), QemuNvmeIntelIdSelector()}};
}

// The address, which must be valid ("0000:3b:00.0").
inline PciAddress Addr(std::string_view address) {
  return *PciAddress::Parse(address);
}

// A healthy NVMe drive on the host's `nvme` driver, in `iommu_group` (-1:
// none) on `numa_node` (-1: unknown). Its serial is `serial`, or
// "SN-<address>" when that is empty.
inline Device NvmeDevice(PciAddress address, int iommu_group,
                         int numa_node = -1, std::string serial = "") {
  Device d;
  d.address = address;
  d.vendor_id = kQemuVendorId;
  d.device_id = kQemuNvmeDeviceId;
  d.class_code = kNvmeClassCode;
  d.iommu_group = iommu_group;
  d.numa_node = static_cast<int16_t>(numa_node);
  d.serial = serial.empty() ? "SN-" + address.ToString() : std::move(serial);
  d.driver = "nvme";
  return d;
}
inline Device NvmeDevice(std::string_view address, int iommu_group,
                         int numa_node = -1, std::string serial = "") {
  return NvmeDevice(Addr(address), iommu_group, numa_node, std::move(serial));
}

inline NodeInventory Inventory(std::string node, std::vector<Device> devices) {
  return NodeInventory{std::move(node), std::move(devices)};
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_INVENTORY_BUILDERS_H_
