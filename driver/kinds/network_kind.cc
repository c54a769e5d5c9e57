// Network controllers (PCI class 02xxxx):
//  - Identity: the PCIe Device Serial Number where present.
//  - Host use: an interface of the function that is up or part of an upper
//    device (host_usage.h's network rule).
//  - No scrub.
#include <string>
#include <vector>

#include "driver/host_usage.h"
#include "driver/kinds/kinds.h"

namespace pdc::driver {
namespace {

class Network final : public DeviceKind {
 public:
  std::string_view name() const override { return "network"; }

  void ReadIdentity(Sysfs& sys, const std::string& dir, PciFunctionInfo* info) const override {
    info->serial = ReadDeviceSerialNumber(sys, dir, info->address.function());
  }

  absl::Status HostUses(HostUseProbe& probe, const PciFunctionInfo& info, const DeviceClass&,
                        std::vector<std::string>* uses) const override {
    if (info.driver.empty()) return absl::OkStatus();  // No interface without a driver.
    return NetworkInterfaceUses(*probe.host().sys, info, uses);
  }

  bool ScrubsOnReclaim() const override { return false; }
};

}  // namespace

const DeviceKind& NetworkKind() {
  static const Network kind;
  return kind;
}

}  // namespace pdc::driver
