// Any PCI function no other kind claims (a GPU, an FPGA, an accelerator):
//  - Identity: the PCIe Device Serial Number (PCIe Base Specification,
//    "Device Serial Number Extended Capability", ID 0003h) where the config
//    space has one, read from sysfs `config` (vfio-pci leaves it readable),
//    with the function number (every function of a multi-function device
//    reports the same number); otherwise none, and the function is known by
//    its address only.
//  - Host use: on a host driver the device class does not list in
//    hostDrivers (pdc-node cannot check what such a driver does with it).
//  - No scrub: whatever the previous VM left on the device stays there.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "driver/host_usage.h"
#include "driver/kinds/kinds.h"

namespace pdc::driver {
namespace {

constexpr size_t kExtendedConfigStart = 0x100;
constexpr size_t kExtendedConfigEnd = 0x1000;
constexpr uint16_t kDsnCapabilityId = 0x0003;

uint32_t Dword(const std::string& c, size_t at) {
  auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(c[at + i])); };
  return b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24;
}

class GenericPci final : public DeviceKind {
 public:
  std::string_view name() const override { return "pci"; }

  void ReadIdentity(Sysfs& sys, const std::string& dir, PciFunctionInfo* info) const override {
    info->serial = ReadDeviceSerialNumber(sys, dir, info->address.function());
  }

  absl::Status HostUses(HostUseProbe&, const PciFunctionInfo& info, const DeviceClass& c,
                        std::vector<std::string>* uses) const override {
    if (info.driver.empty()) return absl::OkStatus();
    if (std::find(c.host_drivers.begin(), c.host_drivers.end(), info.driver) ==
        c.host_drivers.end()) {
      uses->push_back(absl::StrCat("it is bound to the host driver ", info.driver,
                                   ", which device class ", c.resource_name,
                                   " does not list in hostDrivers"));
    }
    return absl::OkStatus();
  }

  bool ScrubsOnReclaim() const override { return false; }
};

}  // namespace

std::string ReadDeviceSerialNumber(Sysfs& sys, const std::string& dir, uint8_t function) {
  auto config = sys.Read(dir + "/config");
  if (!config.ok() || config->size() < kExtendedConfigStart + 4) return "";
  const std::string& c = *config;
  size_t at = kExtendedConfigStart;
  // Each capability header: ID (15:0), version (19:16), next offset (31:20).
  // The walk is bounded: a looping list in broken firmware ends it.
  for (int hops = 0; hops < 64 && at >= kExtendedConfigStart && at + 12 <= c.size() &&
                     at + 12 <= kExtendedConfigEnd;
       ++hops) {
    const uint32_t header = Dword(c, at);
    if (header == 0 || header == 0xffffffff) return "";
    if ((header & 0xffff) == kDsnCapabilityId) {
      const uint64_t dsn = static_cast<uint64_t>(Dword(c, at + 8)) << 32 | Dword(c, at + 4);
      if (dsn == 0 || dsn == ~uint64_t{0}) return "";
      return absl::StrFormat("dsn:%016x.%d", dsn, function);
    }
    const size_t next = (header >> 20) & 0xffc;
    if (next == 0 || next <= at) return "";
    at = next;
  }
  return "";
}

const DeviceKind& GenericPciKind() {
  static const GenericPci kind;
  return kind;
}

}  // namespace pdc::driver
