// NVMe controllers (PCI class 0108xx).
//  - Identity: the controller's serial (SN of Identify Controller, as sysfs
//    shows it under nvme/nvmeN/serial) or, for a controller reporting none,
//    its namespace's NGUID or EUI-64 (docs/design.md §4.1). sysfs shows
//    neither once the function is on vfio-pci: the bind journal keeps it.
//  - Host use: the block rule over the controller's namespaces and, with
//    native multipath, the namespace heads of its subsystem.
//  - Scrub on reclaim: the erase of nvme_erase.h, through the controller's
//    admin interface on the nvme driver.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/host_usage.h"
#include "driver/kinds/kinds.h"
#include "driver/nvme_erase.h"
#include "driver/vfio_binder.h"

namespace pdc::driver {
namespace {

constexpr std::string_view kNvmeDriver = "nvme";

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

// "nvme<digits>n<digits>": a namespace block device (or multipath head).
bool IsNamespaceName(std::string_view s) {
  if (!s.starts_with("nvme")) return false;
  s.remove_prefix(4);
  size_t i = 0;
  while (i < s.size() && absl::ascii_isdigit(s[i])) ++i;
  if (i == 0 || i >= s.size() || s[i] != 'n') return false;
  size_t j = i + 1;
  while (j < s.size() && absl::ascii_isdigit(s[j])) ++j;
  return j > i + 1 && j == s.size();
}

// "nvme<d>c<d>n<d>": a hidden multipath path device.
bool IsPathName(std::string_view s) {
  if (!s.starts_with("nvme")) return false;
  const size_t c = s.find('c');
  if (c == std::string_view::npos) return false;
  return IsNamespaceName(absl::StrCat("nvme", Sv(s.substr(c + 1))));
}

// "nguid:<uuid>" or "eui64:<16 hex digits>" of the controller's namespace
// with the lowest ID that has one (the kernel shows `nguid` and `eui` only
// when they are not zero), or "" when none has: the identity of a
// controller that reports no serial. Anything but hex digits (and the
// separators the kernel prints) is ignored rather than passed on.
std::string NamespaceIdentity(Sysfs& sysfs, const std::string& cdir, std::string_view ctrl) {
  auto entries = sysfs.List(cdir);
  if (!entries.ok()) return "";
  std::vector<std::pair<int, std::string>> namespaces;
  const std::string prefix = absl::StrCat(Sv(ctrl), "n");
  for (const std::string& e : *entries) {
    if (!absl::StartsWith(Sv(e), Sv(prefix))) continue;
    int id = 0;
    const char* first = e.data() + prefix.size();
    auto [end, ec] = std::from_chars(first, e.data() + e.size(), id);
    if (ec != std::errc() || end != e.data() + e.size() || id <= 0) continue;
    namespaces.emplace_back(id, e);
  }
  std::sort(namespaces.begin(), namespaces.end());
  auto hex_only = [](const std::string& text, size_t digits) -> std::string {
    std::string out;
    for (char c : text) {
      if (std::isxdigit(static_cast<unsigned char>(c))) {
        out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
      } else if (c != '-' && c != ' ' && c != ':' && c != '\n') {
        return "";
      }
    }
    return out.size() == digits && out != std::string(digits, '0') ? out : "";
  };
  for (const auto& [id, name] : namespaces) {
    const std::string nsdir = absl::StrCat(cdir, "/", name);
    if (auto g = sysfs.Read(nsdir + "/nguid"); g.ok()) {
      if (std::string h = hex_only(*g, 32); !h.empty()) return absl::StrCat("nguid:", h);
    }
    if (auto e = sysfs.Read(nsdir + "/eui"); e.ok()) {
      if (std::string h = hex_only(*e, 16); !h.empty()) return absl::StrCat("eui64:", h);
    }
  }
  return "";
}

// The namespace heads of the NVMe subsystem the controller belongs to (native
// multipath: the controller's own directory then holds only hidden paths).
absl::StatusOr<std::vector<std::string>> NvmeHeads(Sysfs& sys, const PciFunctionInfo& info) {
  std::vector<std::string> heads;
  const std::string cdir = absl::StrCat(DevicePath(info.address), "/nvme/", info.nvme_controller);
  ASSIGN_OR_RETURN(std::vector<std::string> children, sys.List(cdir));
  if (std::none_of(children.begin(), children.end(), [](const std::string& c) { return IsPathName(c); })) {
    return heads;
  }
  ASSIGN_OR_RETURN(std::vector<std::string> subsystems, sys.List("class/nvme-subsystem"));
  for (const std::string& s : subsystems) {
    const std::string sdir = absl::StrCat("class/nvme-subsystem/", s);
    if (!sys.Exists(absl::StrCat(sdir, "/", info.nvme_controller))) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> entries, sys.List(sdir));
    for (const std::string& h : entries) {
      if (IsNamespaceName(h)) heads.push_back(h);
    }
  }
  return heads;
}

class Nvme final : public DeviceKind {
 public:
  std::string_view name() const override { return "nvme"; }

  void ReadIdentity(Sysfs& sys, const std::string& dir, PciFunctionInfo* info) const override {
    auto ctrls = sys.List(dir + "/nvme");
    if (!ctrls.ok()) return;
    for (const std::string& c : *ctrls) {
      if (!absl::StartsWith(Sv(c), "nvme")) continue;
      info->nvme_controller = c;
      const std::string cdir = absl::StrCat(dir, "/nvme/", c);
      if (auto s = sys.Read(cdir + "/serial"); s.ok()) info->serial = Trim(*s);
      if (auto m = sys.Read(cdir + "/model"); m.ok()) info->model = Trim(*m);
      if (info->serial.empty()) info->serial = NamespaceIdentity(sys, cdir, c);
      break;
    }
  }

  absl::StatusOr<std::vector<std::string>> BlockDeviceDirs(
      Sysfs& sys, const PciFunctionInfo& info) const override {
    if (info.driver == kNvmeDriver && info.nvme_controller.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          info.address.ToString(), " is on nvme but sysfs shows no controller below it"));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> under, DeviceKind::BlockDeviceDirs(sys, info));
    if (info.nvme_controller.empty()) return under;
    ASSIGN_OR_RETURN(std::vector<std::string> heads, NvmeHeads(sys, info));
    for (const std::string& h : heads) {
      ASSIGN_OR_RETURN(std::string dir, sys.Resolve(absl::StrCat("class/block/", h)));
      under.push_back(dir);        // The head itself,
      under.push_back(dir + "/");  // and its partitions.
    }
    return under;
  }

  absl::Status HostUses(HostUseProbe& probe, const PciFunctionInfo& info, const DeviceClass&,
                        std::vector<std::string>* uses) const override {
    return probe.CheckBlockDevices(info, uses);
  }

  bool ScrubsOnReclaim() const override { return true; }
  std::string_view ScrubDriver() const override { return kNvmeDriver; }

  absl::StatusOr<ScrubReport> Scrub(const ScrubContext& context,
                                    PciAddress address) const override {
    if (context.nvme_admin == nullptr || context.erase == nullptr) {
      return WithFailureReason(
          absl::FailedPreconditionError(absl::StrCat(
              "erasing ", address.ToString(), ": pdc-node has no NVMe admin channel configured")),
          kReasonEraseUnsupported);
    }
    ASSIGN_OR_RETURN(NvmeEraseReport report,
                     FinishPendingErase(*context.binder, *context.sys, *context.nvme_admin,
                                        address, *context.erase));
    std::vector<std::string> formatted;
    for (uint32_t id : report.formatted) {
      formatted.push_back(id == kNvmeNsidAll ? "all" : absl::StrCat(id));
    }
    return ScrubReport{absl::StrCat(
        report.controller, ": Format NVM with user data erase of namespace(s) ",
        formatted.empty() ? "none" : absl::StrJoin(formatted, ", "))};
  }
};

}  // namespace

const DeviceKind& NvmeKind() {
  static const Nvme kind;
  return kind;
}

}  // namespace pdc::driver
