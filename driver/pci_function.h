// What sysfs says about one PCI function (`bus/pci/devices/<address>/`):
// ids, class, IOMMU group, NUMA node, bound driver and the identity its
// device kind reads (device_kind.h): for NVMe controllers the controller
// name, serial and model. The reader behind
// discovery, the binder's safety checks and the guest check.
// Thread-safety: pure functions over a Sysfs.
#ifndef PDC_DRIVER_PCI_FUNCTION_H_
#define PDC_DRIVER_PCI_FUNCTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/pci_address.h"
#include "driver/sysfs.h"

namespace pdc::driver {

inline constexpr std::string_view kVfioPci = "vfio-pci";

struct PciFunctionInfo {
  PciAddress address;
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t class_code = 0;
  int32_t iommu_group = -1;  // -1: not in an IOMMU group.
  int16_t numa_node = -1;
  std::string driver;           // Bound driver, "" when none.
  std::string driver_override;  // "" when unset ("(null)" in sysfs).
  std::string nvme_controller;  // "nvme0" for an NVMe controller, else "".
  // The stable identity its device kind reads: NVMe serial, trimmed; for a
  // controller reporting none, its namespace's "nguid:<32 hex>" or
  // "eui64:<16 hex>" (docs/design.md §4.1); for other kinds the PCIe Device
  // Serial Number "dsn:<16 hex>.<function>"; "" when none.
  std::string serial;
  std::string model;            // NVMe model, trimmed; "" otherwise.
  // The PCIe Device Serial Number capability (ID 0003h) of its config space,
  // "dsn:<16 hex>.<function>" (the `serial` of kinds known by it); "" when
  // it has none or the extended config space cannot be read. vfio-pci
  // leaves config space readable, so it names the drive on any driver.
  std::string dsn;
  // NVMe: the sum of the sizes of the namespaces the kernel shows below the
  // controller (block `size` attributes, 512-byte sectors), read only while
  // nvme has it; unset otherwise.
  std::optional<uint64_t> capacity_bytes;

  // PCI-to-PCI bridges (0x0604) and semi-transparent ones (0x0609): they
  // share an IOMMU group with what sits behind them, but are never handed
  // to a VM, so they do not make a group unsafe.
  bool IsPciBridge() const {
    return (class_code >> 8) == 0x0604 || (class_code >> 8) == 0x0609;
  }
};

// `bus/pci/devices/<address>` for sysfs.
std::string DevicePath(PciAddress address);

// Reads one function. NotFound when the device is absent; InvalidArgument
// when an id file holds something that is not hex.
absl::StatusOr<PciFunctionInfo> ReadPciFunction(Sysfs& sysfs, PciAddress address);

// Addresses in `bus/pci/devices`, sorted. Names that are not a valid PCI
// address are refused: they are returned in `rejected` and never used.
struct PciListing {
  std::vector<PciAddress> addresses;
  std::vector<std::string> rejected;
};
absl::StatusOr<PciListing> ListPciAddresses(Sysfs& sysfs);

// Members of IOMMU group `group` (`kernel/iommu_groups/<group>/devices`),
// sorted.
absl::StatusOr<std::vector<PciAddress>> IommuGroupMembers(Sysfs& sysfs, int32_t group);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_PCI_FUNCTION_H_
