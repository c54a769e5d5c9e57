// Mass storage other than NVMe (PCI class 01xxxx: AHCI, SAS, RAID):
//  - Identity: the PCIe Device Serial Number where present (the disks behind
//    the controller are not the function).
//  - Host use: the block rule over the disks below the function; on a
//    driver that creates no block devices (uio_*, igb_uio, pci-stub) in use
//    unless the device class lists that driver in hostDrivers.
//  - No scrub: pdc-node erases only NVMe controllers.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "driver/host_usage.h"
#include "driver/kinds/kinds.h"

namespace pdc::driver {
namespace {

// Host drivers that bind a PCI function without creating block devices:
// the generic userspace I/O drivers and the stub.
bool NotABlockDriver(std::string_view driver) {
  return driver.starts_with("uio") || driver == "igb_uio" || driver == "pci-stub";
}

class BlockStorage final : public DeviceKind {
 public:
  std::string_view name() const override { return "storage"; }

  void ReadIdentity(Sysfs& sys, const std::string& dir, PciFunctionInfo* info) const override {
    info->serial = ReadDeviceSerialNumber(sys, dir, info->address.function());
  }

  absl::Status HostUses(HostUseProbe& probe, const PciFunctionInfo& info, const DeviceClass& c,
                        std::vector<std::string>* uses) const override {
    if (info.driver.empty()) return probe.CheckUserspaceHolders(info, uses);
    // A driver that creates no block devices: whatever it does with the
    // controller (a userspace engine behind uio, a stub) cannot be seen.
    if (NotABlockDriver(info.driver) &&
        std::find(c.host_drivers.begin(), c.host_drivers.end(), info.driver) ==
            c.host_drivers.end()) {
      uses->push_back(absl::StrCat(
          "it is bound to ", info.driver, ", which is not a block driver: a userspace storage "
          "engine or a stub driver may be using it, and pdc-node cannot see its users (list ",
          info.driver, " in device class ", c.resource_name, "'s hostDrivers if taking it is "
          "safe)"));
      return absl::OkStatus();
    }
    return probe.CheckBlockDevices(info, uses);
  }

  bool VirtualFunctionsShareData() const override { return true; }

  bool ScrubsOnReclaim() const override { return false; }
};

}  // namespace

const DeviceKind& BlockStorageKind() {
  static const BlockStorage kind;
  return kind;
}

}  // namespace pdc::driver
