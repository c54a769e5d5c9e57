#include "driver/discovery.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::driver {

const DeviceClass* MatchingClass(const std::vector<DeviceClass>& classes,
                                 const Device& device) {
  for (const DeviceClass& c : classes) {
    if (c.Matches(device)) return &c;
  }
  return nullptr;
}

Device ToDevice(const PciFunctionInfo& info) {
  Device d;
  d.address = info.address;
  d.vendor_id = info.vendor_id;
  d.device_id = info.device_id;
  d.class_code = info.class_code;
  d.iommu_group = info.iommu_group;
  d.numa_node = info.numa_node;
  d.serial = info.serial;
  d.driver = info.driver;
  return d;
}

absl::StatusOr<DiscoveryResult> Discover(Sysfs& sysfs, std::string_view node,
                                         const DiscoveryOptions& options) {
  ASSIGN_OR_RETURN(PciListing listing, ListPciAddresses(sysfs));
  DiscoveryResult out;
  out.inventory.node = std::string(node);
  for (const std::string& name : listing.rejected) {
    out.problems.push_back(absl::StrCat("ignored bus/pci/devices/", name,
                                        ": not a PCI address"));
  }
  for (PciAddress a : listing.addresses) {
    auto info = ReadPciFunction(sysfs, a);
    if (!info.ok()) {
      // A device unplugged between the listing and the read is not a problem.
      if (!absl::IsNotFound(info.status())) {
        out.problems.push_back(absl::StrCat(a.ToString(), ": ", info.status().ToString()));
      }
      continue;
    }
    Device d = ToDevice(*info);
    if (MatchingClass(options.classes, d) == nullptr) continue;
    if (d.iommu_group < 0) MarkUnhealthy(d, UnhealthyReason::kNoIommuGroup);
    if (auto it = options.expected_driver.find(a);
        it != options.expected_driver.end() && it->second != d.driver) {
      MarkUnhealthy(d, UnhealthyReason::kUnexpectedDriver);
    }
    out.inventory.devices.push_back(std::move(d));
  }
  std::sort(out.problems.begin(), out.problems.end());
  return out;
}

void RefuseSharedSerials(DiscoveryResult* out) {
  std::map<std::string_view, std::vector<Device*>> by_serial;
  for (Device& d : out->inventory.devices) {
    if (!d.serial.empty()) by_serial[d.serial].push_back(&d);
  }
  for (const auto& [serial, devices] : by_serial) {
    if (devices.size() < 2) continue;
    std::vector<std::string> addresses;
    for (Device* d : devices) {
      MarkUnhealthy(*d, UnhealthyReason::kAmbiguousIdentity);
      addresses.push_back(d->address.ToString());
    }
    out->problems.push_back(absl::StrCat(
        absl::StrJoin(addresses, ", "), " report the same serial \"", Sv(serial),
        "\": which drive is which is ambiguous, so none of them is offered (unhealthy)"));
  }
}

}  // namespace pdc::driver
