// Mass storage other than NVMe (PCI class 01xxxx: AHCI, SAS, RAID):
//  - Identity: the PCIe Device Serial Number where present (the disks behind
//    the controller are not the function).
//  - Host use: the block rule over the disks below the function.
//  - No scrub: pdc-node erases only NVMe controllers.
#include <string>
#include <vector>

#include "driver/host_usage.h"
#include "driver/kinds/kinds.h"

namespace pdc::driver {
namespace {

class BlockStorage final : public DeviceKind {
 public:
  std::string_view name() const override { return "storage"; }

  void ReadIdentity(Sysfs& sys, const std::string& dir, PciFunctionInfo* info) const override {
    info->serial = ReadDeviceSerialNumber(sys, dir, info->address.function());
  }

  absl::Status HostUses(HostUseProbe& probe, const PciFunctionInfo& info, const DeviceClass&,
                        std::vector<std::string>* uses) const override {
    return probe.CheckBlockDevices(info, uses);
  }

  bool ScrubsOnReclaim() const override { return false; }
};

}  // namespace

const DeviceKind& BlockStorageKind() {
  static const BlockStorage kind;
  return kind;
}

}  // namespace pdc::driver
