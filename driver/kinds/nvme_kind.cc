// NVMe controllers (PCI class 0108xx).
//  - Identity: the controller's serial (SN of Identify Controller, as sysfs
//    shows it under nvme/nvmeN/serial) or, for a controller reporting none,
//    its namespace's NGUID or EUI-64 (docs/design.md §4.1). sysfs shows
//    neither once the function is on vfio-pci: the bind journal keeps it.
//  - Host use: on a driver other than nvme, in use unless the device class
//    lists that driver in hostDrivers (a userspace engine's users cannot be
//    seen). On nvme: the block rule over the controller's namespaces (with
//    native multipath, the namespace heads of its subsystem), processes
//    holding /dev/nvmeN or /dev/ngXnY open, and, unless node.allowSharedNvme,
//    a subsystem or namespaces shared with another controller (CMIC, NMIC).
//  - Scrub on reclaim: the erase of nvme_erase.h, through the controller's
//    admin interface: from userspace on vfio-pci (nvme_vfio_erase.h) when
//    pdc-node has a VFIO opener, else on the nvme driver.
//  - Firmware state at bind (nvme_firmware.h): Identify Controller FR, the
//    Firmware Slot Information and Boot Partition log headers through the
//    admin channel when there is one, else sysfs firmware_rev alone.
#include <algorithm>
#include <cctype>
#include <optional>
#include <charconv>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/host_usage.h"
#include "driver/kinds/kinds.h"
#include "driver/nvme_erase.h"
#include "driver/nvme_firmware.h"
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

// The bytes of every namespace below the controller directory `cdir`
// (nvmeXnY, or the hidden paths nvmeXcYnZ under native multipath), from the
// block layer's `size` in 512-byte sectors whatever the LBA size; unset when
// none shows one (no namespace, or a size that does not read).
std::optional<uint64_t> NamespaceBytes(Sysfs& sys, const std::string& cdir) {
  absl::StatusOr<std::vector<std::string>> children = sys.List(cdir);
  if (!children.ok()) return std::nullopt;
  std::optional<uint64_t> total;
  for (const std::string& c : *children) {
    if (!IsNamespaceName(c) && !IsPathName(c)) continue;
    absl::StatusOr<std::string> size = sys.Read(absl::StrCat(cdir, "/", c, "/size"));
    uint64_t sectors = 0;
    if (!size.ok() || !absl::SimpleAtoi(Sv(Trim(*size)), &sectors)) return std::nullopt;
    if (sectors > (uint64_t{1} << 54)) return std::nullopt;  // Beyond any drive: not a size.
    total = total.value_or(0) + sectors * 512;
  }
  return total;
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

// The controller's character device (/dev/nvmeN) and its namespaces'
// generic ones (/dev/ngXnY): admin and I/O passthrough need no block device.
absl::Status CheckCharacterDevices(HostUseProbe& probe, const PciFunctionInfo& info) {
  Sysfs& sys = *probe.host().sys;
  const std::string cdir = absl::StrCat(DevicePath(info.address), "/nvme/", info.nvme_controller);
  std::vector<std::pair<std::string, std::string>> devices;
  auto add = [&](const std::string& name, const std::string& dir) -> absl::Status {
    auto number = ReadTrimmed(sys, dir + "/dev");
    if (absl::IsNotFound(number.status())) return absl::OkStatus();
    if (!number.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot check /dev/", name, ": ", number.status().ToString()));
    }
    devices.emplace_back(name, *number);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(add(info.nvme_controller, cdir));
  ASSIGN_OR_RETURN(std::vector<std::string> children, sys.List(cdir));
  for (const std::string& c : children) {
    if (c.starts_with("ng")) RETURN_IF_ERROR(add(c, absl::StrCat(cdir, "/", c)));
  }
  probe.CheckCharDevices(devices);
  return absl::OkStatus();
}

bool HostDriverListed(const DeviceClass& c, const std::string& driver) {
  return std::find(c.host_drivers.begin(), c.host_drivers.end(), driver) != c.host_drivers.end();
}

// A controller another host or controller may share: more than one
// controller of its subsystem on this host (sysfs), the controller's CMIC
// (Identify Controller byte 76: bit 0 more than one port, bit 1 more than
// one controller, bit 2 an SR-IOV virtual function), a namespace's NMIC
// (Identify Namespace byte 30 bit 0: may be attached to more than one
// controller). Identify goes through the admin channel when there is one.
absl::Status SharedUses(const HostView& host, const PciFunctionInfo& info,
                        std::vector<std::string>* uses) {
  Sysfs& sys = *host.sys;
  if (auto subsystems = sys.List("class/nvme-subsystem"); subsystems.ok()) {
    for (const std::string& s : *subsystems) {
      const std::string sdir = absl::StrCat("class/nvme-subsystem/", s);
      if (!sys.Exists(absl::StrCat(sdir, "/", info.nvme_controller))) continue;
      ASSIGN_OR_RETURN(std::vector<std::string> entries, sys.List(sdir));
      std::vector<std::string> controllers;
      for (const std::string& e : entries) {
        if (e.size() > 4 && e.starts_with("nvme") &&
            std::all_of(e.begin() + 4, e.end(), [](char c) { return absl::ascii_isdigit(c); })) {
          controllers.push_back(e);
        }
      }
      if (controllers.size() > 1) {
        uses->push_back(absl::StrCat("its NVMe subsystem ", s, " has ", controllers.size(),
                                     " controllers on this host (", absl::StrJoin(controllers, ", "),
                                     "): they share its namespaces (set node.allowSharedNvme to "
                                     "offer it)"));
      }
    }
  }
  if (host.nvme_admin == nullptr) return absl::OkStatus();
  // One channel for the Identify commands, opened by the controller's
  // device number (a name the kernel gave another controller is refused).
  auto dev_number = ReadTrimmed(*host.sys, absl::StrCat(DevicePath(info.address), "/nvme/",
                                                        info.nvme_controller, "/dev"));
  auto channel = host.nvme_admin->Open(info.nvme_controller, dev_number.ok() ? *dev_number : "");
  if (!channel.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot check whether ", info.nvme_controller,
                     " is shared: ", channel.status().message()));
  }
  std::vector<uint8_t> data(4096);
  auto identify = [&](uint32_t nsid, uint32_t cns, std::string_view what) -> absl::Status {
    NvmeAdminCommand cmd;
    cmd.opcode = kNvmeAdminIdentify;
    cmd.nsid = nsid;
    cmd.cdw10 = cns;
    cmd.timeout = absl::Seconds(10);
    auto status = (*channel)->Run(cmd, std::span<uint8_t>(data));
    if (!status.ok() || *status != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot check whether ", info.nvme_controller, " is shared: ", Sv(what), " failed: ",
          status.ok() ? DescribeNvmeStatus(*status) : status.status().ToString()));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(identify(0, 1, "Identify Controller"));
  if (const uint8_t cmic = data[76]; (cmic & 0x7) != 0) {
    std::vector<std::string> why;
    if (cmic & 0x1) why.push_back("more than one port");
    if (cmic & 0x2) why.push_back("more than one controller");
    if (cmic & 0x4) why.push_back("it is an SR-IOV virtual function");
    uses->push_back(absl::StrCat(info.nvme_controller, " reports CMIC ", static_cast<int>(cmic), " (",
                                 absl::StrJoin(why, ", "), "): another host or controller may "
                                 "share its namespaces (set node.allowSharedNvme to offer it)"));
  }
  const std::string cdir = absl::StrCat(DevicePath(info.address), "/nvme/", info.nvme_controller);
  ASSIGN_OR_RETURN(std::vector<std::string> children, sys.List(cdir));
  for (const std::string& c : children) {
    if (!IsNamespaceName(c)) continue;
    uint32_t nsid = 0;
    auto text = ReadTrimmed(sys, absl::StrCat(cdir, "/", c, "/nsid"));
    if (!text.ok() || !absl::SimpleAtoi(*text, &nsid) || nsid == 0) {
      const std::string n = c.substr(c.rfind('n') + 1);  // nvme0n<nsid> without the attribute.
      if (!absl::SimpleAtoi(n, &nsid) || nsid == 0) continue;
    }
    RETURN_IF_ERROR(identify(nsid, 0, absl::StrCat("Identify Namespace ", nsid)));
    if (data[30] & 0x1) {
      uses->push_back(absl::StrCat("namespace ", nsid, " (", c, ") reports NMIC 1: it may be "
                                   "attached to another controller (set node.allowSharedNvme "
                                   "to offer it)"));
    }
  }
  return absl::OkStatus();
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
      info->capacity_bytes = NamespaceBytes(sys, cdir);
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

  absl::Status HostUses(HostUseProbe& probe, const PciFunctionInfo& info, const DeviceClass& c,
                        std::vector<std::string>* uses) const override {
    if (info.driver.empty()) return probe.CheckUserspaceHolders(info, uses);
    if (info.driver != kNvmeDriver) {
      // uio_pci_generic, pci-stub, a userspace engine (SPDK) under a storage
      // product: no block device tells what it does with the drive.
      if (!HostDriverListed(c, info.driver)) {
        uses->push_back(absl::StrCat(
            "it is bound to ", info.driver, ", not to nvme: a userspace storage engine or a "
            "stub driver may be using it, and pdc-node cannot see its users (list ", info.driver,
            " in device class ", c.resource_name, "'s hostDrivers if taking it is safe)"));
      }
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(probe.CheckBlockDevices(info, uses));
    RETURN_IF_ERROR(CheckCharacterDevices(probe, info));
    if (!probe.host().policy.allow_shared_nvme) RETURN_IF_ERROR(SharedUses(probe.host(), info, uses));
    return absl::OkStatus();
  }

  bool VirtualFunctionsShareData() const override { return true; }

  std::string FirmwareState(const HostView& host, const PciFunctionInfo& info) const override {
    if (info.driver != kNvmeDriver || info.nvme_controller.empty()) return "";
    const std::string cdir =
        absl::StrCat(DevicePath(info.address), "/nvme/", info.nvme_controller);
    NvmeFirmwareState state;
    if (auto fr = ReadTrimmed(*host.sys, cdir + "/firmware_rev"); fr.ok()) state.revision = *fr;
    if (host.nvme_admin != nullptr) {
      auto number = ReadTrimmed(*host.sys, cdir + "/dev");
      auto channel = host.nvme_admin->Open(info.nvme_controller, number.ok() ? *number : "");
      if (channel.ok()) {
        std::vector<uint8_t> data(4096);
        NvmeAdminCommand cmd{.opcode = kNvmeAdminIdentify, .nsid = 0, .cdw10 = 1,
                             .timeout = absl::Seconds(10)};
        if (auto st = (*channel)->Run(cmd, data); st.ok() && *st == 0) {
          const std::string fr = FirmwareRevisionOf(data);
          if (!fr.empty()) state.revision = fr;
        }
        ReadFirmwareLogs(**channel, absl::Seconds(10), &state);
      }
    }
    return EncodeFirmwareState(state);
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
    ScrubReport out{absl::StrCat(
        report.controller, ", drive ", report.identity, ": ", report.method, "; namespaces ",
        report.namespaces.empty() ? "none" : absl::StrJoin(report.namespaces, ","),
        ", formatted ", formatted.empty() ? "none" : absl::StrJoin(formatted, ", "), "; ",
        report.verified_blocks, " block(s) read back",
        report.verify_note.empty() ? "" : absl::StrCat(" (", report.verify_note, ")"),
        "; commands through ", report.path)};
    for (const std::string& change : report.firmware_changes) {
      out.warnings.push_back(absl::StrCat(
          "the firmware of ", address.ToString(), " (drive ", report.identity,
          ") changed while it was claimed: ", change,
          "; erased and handed back anyway (node.firmwareChange: report)"));
    }
    return out;
  }
};

}  // namespace

const DeviceKind& NvmeKind() {
  static const Nvme kind;
  return kind;
}

}  // namespace pdc::driver
