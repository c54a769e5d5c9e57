// Device discovery for pdc-node: walks `bus/pci/devices`, keeps the functions
// a configured device class matches and turns them into the inventory the
// extender receives (model/types.h). Health: a device is healthy when it
// is in an IOMMU group (else NoIommuGroup), bound to the driver the node
// driver expects, for claimed devices vfio-pci (else UnexpectedDriver), and
// (RefuseSharedSerials) the only function reporting its serial (else
// AmbiguousIdentity); absent devices are simply not reported.
// Thread-safety: pure functions over a Sysfs.
#ifndef PDC_DRIVER_DISCOVERY_H_
#define PDC_DRIVER_DISCOVERY_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/types.h"
#include "driver/pci_function.h"
#include "driver/sysfs.h"

namespace pdc::driver {

struct DiscoveryOptions {
  std::vector<DeviceClass> classes;
  // Driver a device must be bound to in order to be healthy. Devices not
  // listed are healthy on any driver.
  std::map<PciAddress, std::string> expected_driver;
};

struct DiscoveryResult {
  NodeInventory inventory;  // Devices sorted by address.
  // Things worth a warning, sorted: directory names that are not PCI
  // addresses, devices whose files could not be read, functions sharing a
  // serial.
  std::vector<std::string> problems;
};

// The class that matches `device`, or nullptr.
const DeviceClass* MatchingClass(const std::vector<DeviceClass>& classes,
                                 const Device& device);

// The inventory view of one function (health left at kHealthy).
Device ToDevice(const PciFunctionInfo& info);

absl::StatusOr<DiscoveryResult> Discover(Sysfs& sysfs, std::string_view node,
                                         const DiscoveryOptions& options);

// Functions reporting one serial are one drive seen twice (the two ports of a
// dual-port NVMe drive) or firmware that does not tell drives apart: either
// way the serial cannot say which is which, and handing one to a VM while
// another stays with the host or another VM would share its data. Marks all
// of them unhealthy (never allocated) and adds a problem naming them. Run
// once every serial is known (after the journal filled in those of devices
// on vfio-pci, whose serial sysfs no longer shows).
void RefuseSharedSerials(DiscoveryResult* result);

}  // namespace pdc::driver

#endif  // PDC_DRIVER_DISCOVERY_H_
