#include "driver/pci_function.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/device_kind.h"
#include "driver/kinds/kinds.h"

namespace pdc::driver {
namespace {

// Parses "0x1b36" / "1b36" (hex) into at most `max`.
absl::StatusOr<uint32_t> ParseHexFile(Sysfs& sysfs, const std::string& path,
                                      uint32_t max) {
  ASSIGN_OR_RETURN(std::string text, ReadTrimmed(sysfs, path));
  std::string_view v = text;
  if (v.starts_with("0x") || v.starts_with("0X")) v.remove_prefix(2);
  uint32_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out, 16);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || out > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": \"", text, "\" is not a hex number up to ", max));
  }
  return out;
}

}  // namespace

std::string DevicePath(PciAddress address) {
  return absl::StrCat("bus/pci/devices/", address.ToString());
}

absl::StatusOr<PciFunctionInfo> ReadPciFunction(Sysfs& sysfs, PciAddress address) {
  const std::string dir = DevicePath(address);
  if (!sysfs.Exists(dir)) {
    return absl::NotFoundError(absl::StrCat("PCI device ", address.ToString(), " not present"));
  }
  PciFunctionInfo info;
  info.address = address;
  ASSIGN_OR_RETURN(uint32_t vendor, ParseHexFile(sysfs, dir + "/vendor", 0xffff));
  ASSIGN_OR_RETURN(uint32_t device, ParseHexFile(sysfs, dir + "/device", 0xffff));
  ASSIGN_OR_RETURN(info.class_code, ParseHexFile(sysfs, dir + "/class", 0xffffff));
  info.vendor_id = static_cast<uint16_t>(vendor);
  info.device_id = static_cast<uint16_t>(device);

  if (auto group = LinkName(sysfs, dir + "/iommu_group"); group.ok()) {
    int32_t g = -1;
    auto [end, ec] = std::from_chars(group->data(), group->data() + group->size(), g);
    if (ec == std::errc() && end == group->data() + group->size() && g >= 0) {
      info.iommu_group = g;
    }
  }
  if (auto numa = ReadTrimmed(sysfs, dir + "/numa_node"); numa.ok()) {
    int n = -1;
    auto [end, ec] = std::from_chars(numa->data(), numa->data() + numa->size(), n);
    if (ec == std::errc() && n >= -1 && n < 32768) info.numa_node = static_cast<int16_t>(n);
  }
  if (auto drv = LinkName(sysfs, dir + "/driver"); drv.ok()) {
    info.driver = std::move(*drv);
  } else if (!absl::IsNotFound(drv.status())) {
    return drv.status();  // A driver link leaving the root, for instance.
  }
  if (auto ov = ReadTrimmed(sysfs, dir + "/driver_override"); ov.ok() && *ov != "(null)") {
    info.driver_override = std::move(*ov);
  }
  KindOf(info).ReadIdentity(sysfs, dir, &info);
  info.dsn = info.serial.starts_with("dsn:")
                 ? info.serial
                 : ReadDeviceSerialNumber(sysfs, dir, info.address.function());
  return info;
}

absl::StatusOr<PciListing> ListPciAddresses(Sysfs& sysfs) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, sysfs.List("bus/pci/devices"));
  PciListing out;
  for (const std::string& name : names) {
    auto a = PciAddress::Parse(name);
    if (!a.ok()) {
      out.rejected.push_back(name);
      continue;
    }
    out.addresses.push_back(*a);
  }
  std::sort(out.addresses.begin(), out.addresses.end());
  return out;
}

absl::StatusOr<std::vector<PciAddress>> IommuGroupMembers(Sysfs& sysfs, int32_t group) {
  if (group < 0) return absl::InvalidArgumentError("device has no IOMMU group");
  const std::string dir = absl::StrCat("kernel/iommu_groups/", group, "/devices");
  ASSIGN_OR_RETURN(std::vector<std::string> names, sysfs.List(dir));
  std::vector<PciAddress> out;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(PciAddress a, PciAddress::Parse(name));
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace pdc::driver
