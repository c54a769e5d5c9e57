#include "driver/device_kind.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/kinds/kinds.h"

namespace pdc::driver {
namespace {

// The registry: the first row whose class bits match wins. A new kind adds
// its row here (and its file in driver/kinds/).
struct KindRow {
  uint32_t class_code;
  uint32_t mask;  // Which bits of the 24-bit class code must match.
  const DeviceKind& (*kind)();
};

constexpr std::array<KindRow, 4> kKinds = {{
    {0x010800, 0xffff00, &NvmeKind},          // Mass storage / NVM controller.
    {0x010000, 0xff0000, &BlockStorageKind},  // Other mass storage (AHCI, SAS, RAID).
    {0x020000, 0xff0000, &NetworkKind},       // Network controllers.
    {0x000000, 0x000000, &GenericPciKind},    // Everything else.
}};

}  // namespace

absl::StatusOr<std::vector<std::string>> DeviceKind::BlockDeviceDirs(
    Sysfs& sys, const PciFunctionInfo& info) const {
  ASSIGN_OR_RETURN(std::string self, sys.Resolve(DevicePath(info.address)));
  return std::vector<std::string>{self + "/"};
}

absl::StatusOr<ScrubReport> DeviceKind::Scrub(const ScrubContext&, PciAddress address) const {
  return absl::UnimplementedError(
      absl::StrCat("device kind ", Sv(name()), " has no scrub (", address.ToString(), ")"));
}

const DeviceKind& KindForClass(uint32_t class_code) {
  for (const KindRow& row : kKinds) {
    if ((class_code & row.mask) == row.class_code) return row.kind();
  }
  return GenericPciKind();
}

const DeviceKind* KindScrubbingOn(std::string_view driver) {
  if (driver.empty()) return nullptr;
  for (const KindRow& row : kKinds) {
    const DeviceKind& k = row.kind();
    if (k.ScrubsOnReclaim() && k.ScrubDriver() == driver) return &k;
  }
  return nullptr;
}

}  // namespace pdc::driver
