#include "driver/nvme_erase.h"

#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "driver/pci_function.h"

namespace pdc::driver {
namespace {

constexpr size_t kIdentifySize = 4096;
constexpr uint32_t kCnsNamespace = 0;
constexpr uint32_t kCnsController = 1;
constexpr uint32_t kCnsActiveList = 2;
constexpr uint32_t kSesUserDataErase = 1;

uint16_t Le16(const std::vector<uint8_t>& b, size_t at) {
  return static_cast<uint16_t>(b[at] | (b[at + 1] << 8));
}
uint32_t Le32(const std::vector<uint8_t>& b, size_t at) {
  return static_cast<uint32_t>(b[at]) | (static_cast<uint32_t>(b[at + 1]) << 8) |
         (static_cast<uint32_t>(b[at + 2]) << 16) | (static_cast<uint32_t>(b[at + 3]) << 24);
}
uint64_t Le64(const std::vector<uint8_t>& b, size_t at) {
  return static_cast<uint64_t>(Le32(b, at)) | (static_cast<uint64_t>(Le32(b, at + 4)) << 32);
}

bool IsControllerName(std::string_view name) {
  if (!name.starts_with("nvme") || name.size() == 4 || name.size() > 14) return false;
  return std::all_of(name.begin() + 4, name.end(),
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); });
}

std::string NsName(uint32_t nsid) {
  return nsid == kNvmeNsidAll ? "all namespaces (NSID FFFFFFFFh)" : absl::StrCat("namespace ", nsid);
}

// One admin command; a non-zero NVMe status becomes an error.
class Session {
 public:
  Session(NvmeAdmin& admin, std::string_view controller, std::string_view device,
          const NvmeEraseOptions& options)
      : admin_(admin), controller_(controller), device_(device), options_(options) {}

  absl::Status Run(std::string_view what, const NvmeAdminCommand& cmd, std::span<uint8_t> data) {
    if (options_.before_command) options_.before_command(cmd.timeout);
    auto status = admin_.Run(controller_, cmd, data);
    if (!status.ok()) {
      return WithFailureReason(
          absl::Status(status.status().code(),
                       absl::StrCat(Where(), ": ", Sv(what), ": ", status.status().message())),
          kReasonEraseIo);
    }
    if (*status != 0) {
      return WithFailureReason(
          absl::FailedPreconditionError(absl::StrCat(Where(), ": ", Sv(what), " failed: NVMe status ",
                                                     DescribeNvmeStatus(*status))),
          kReasonEraseStatus);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<uint8_t>> Identify(uint32_t cns, uint32_t nsid, std::string_view what) {
    std::vector<uint8_t> buf(kIdentifySize);
    NvmeAdminCommand cmd{.opcode = kNvmeAdminIdentify, .nsid = nsid, .cdw10 = cns,
                         .timeout = options_.identify_timeout};
    RETURN_IF_ERROR(Run(what, cmd, buf));
    return buf;
  }

  std::string Where() const {
    return absl::StrCat("erasing NVMe controller ", controller_, " (", device_, ")");
  }

 private:
  NvmeAdmin& admin_;
  const std::string controller_;
  const std::string device_;
  const NvmeEraseOptions& options_;
};

}  // namespace

bool DevNvmeAdmin::Present(std::string_view controller) {
  if (!IsControllerName(controller)) return false;
  return ::access(absl::StrCat(dev_root_, "/", Sv(controller)).c_str(), F_OK) == 0;
}

absl::StatusOr<uint16_t> DevNvmeAdmin::Run(std::string_view controller, const NvmeAdminCommand& cmd,
                                           std::span<uint8_t> data) {
  if (!IsControllerName(controller)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Sv(controller), "\" is not an NVMe controller name (nvme<N>)"));
  }
  const std::string path = absl::StrCat(dev_root_, "/", Sv(controller));
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    return absl::ErrnoToStatus(e, absl::StrCat("open ", path));
  }
  nvme_admin_cmd c;
  std::memset(&c, 0, sizeof(c));
  c.opcode = cmd.opcode;
  c.nsid = cmd.nsid;
  c.cdw10 = cmd.cdw10;
  c.cdw11 = cmd.cdw11;
  c.addr = reinterpret_cast<uintptr_t>(data.data());
  c.data_len = static_cast<uint32_t>(data.size());
  c.timeout_ms = static_cast<uint32_t>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(cmd.timeout), 1, UINT32_MAX));
  const int rc = ::ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);
  const int e = errno;
  ::close(fd);
  if (rc < 0) {
    return absl::ErrnoToStatus(
        e, absl::StrFormat("ioctl NVME_IOCTL_ADMIN_CMD (opcode %02xh) on %s", cmd.opcode, path));
  }
  return static_cast<uint16_t>(rc);
}

std::string DescribeNvmeStatus(uint16_t status) {
  const unsigned sc = status & 0xff;
  const unsigned sct = (status >> 8) & 0x7;
  static const std::map<std::pair<unsigned, unsigned>, std::string_view> kNames = {
      {{0, 0x01}, "Invalid Command Opcode"},
      {{0, 0x02}, "Invalid Field in Command"},
      {{0, 0x04}, "Data Transfer Error"},
      {{0, 0x05}, "Commands Aborted due to Power Loss Notification"},
      {{0, 0x06}, "Internal Error"},
      {{0, 0x07}, "Command Abort Requested"},
      {{0, 0x0B}, "Invalid Namespace or Format"},
      {{0, 0x0C}, "Command Sequence Error"},
      {{0, 0x1D}, "Sanitize In Progress"},
      {{0, 0x20}, "Namespace is Write Protected"},
      {{0, 0x21}, "Command Interrupted"},
      {{0, 0x82}, "Namespace Not Ready"},
      {{0, 0x84}, "Format In Progress"},
      {{1, 0x0A}, "Invalid Format"},
      {{1, 0x0B}, "Firmware Activation Requires Conventional Reset"},
      {{1, 0x1D}, "Device Self-test In Progress"},
      {{2, 0x80}, "Write Fault"},
      {{2, 0x81}, "Unrecovered Read Error"},
      {{2, 0x86}, "Access Denied"},
      {{3, 0x71}, "Command Aborted By Host"},
  };
  auto it = kNames.find({sct, sc});
  const std::string name =
      it != kNames.end() ? std::string(it->second)
                         : (sct == 7 ? std::string("Vendor Specific") : std::string("status"));
  return absl::StrFormat("%s (SCT %xh SC %02Xh%s)", name, sct, sc,
                         (status & 0x4000) != 0 ? ", do not retry" : "");
}

uint32_t FormatCdw10(uint8_t flbas, uint8_t dps) {
  const uint32_t lbaf_low = flbas & 0xf;
  const uint32_t mset = (flbas >> 4) & 0x1;
  const uint32_t lbaf_high = (flbas >> 5) & 0x3;
  const uint32_t pi = dps & 0x7;
  const uint32_t pil = (dps >> 3) & 0x1;
  return lbaf_low | (mset << 4) | (pi << 5) | (pil << 8) | (kSesUserDataErase << 9) |
         (lbaf_high << 12);
}

absl::StatusOr<NvmeEraseReport> EraseNvmeController(NvmeAdmin& admin, std::string_view controller,
                                                    std::string_view device,
                                                    const NvmeEraseOptions& options) {
  Session s(admin, controller, device, options);
  NvmeEraseReport report;
  report.controller = std::string(controller);
  ASSIGN_OR_RETURN(std::vector<uint8_t> ctrl,
                   s.Identify(kCnsController, 0, "Identify Controller (CNS 1)"));
  const uint16_t oacs = Le16(ctrl, 256);
  const uint32_t nn = Le32(ctrl, 516);
  const uint8_t fna = ctrl[524];
  if ((oacs & 0x2) == 0) {
    return WithFailureReason(
        absl::FailedPreconditionError(absl::StrCat(
            s.Where(), ": the controller does not support Format NVM (OACS bit 1 clear); "
                       "its data cannot be erased, so it is not offered again")),
        kReasonEraseUnsupported);
  }

  // Active namespaces: CNS 2, 1024 NSIDs a page, each list starting after
  // the NSID given.
  std::vector<uint32_t> nsids;
  bool listed = true;
  for (uint32_t after = 0;;) {
    auto page = s.Identify(kCnsActiveList, after,
                           absl::StrCat("Identify Active Namespace List (CNS 2) after NSID ", after));
    if (!page.ok()) {
      // NVMe 1.0 controllers know no CNS 2: try every NSID up to NN.
      if (after == 0 && FailureReason(page.status()) == kReasonEraseStatus &&
          page.status().message().find("SC 02h") != std::string_view::npos) {
        listed = false;
        break;
      }
      return page.status();
    }
    size_t n = 0;
    for (; n < kIdentifySize / 4; ++n) {
      const uint32_t id = Le32(*page, n * 4);
      if (id == 0) break;
      nsids.push_back(id);
    }
    if (n < kIdentifySize / 4 || nsids.back() >= kNvmeNsidAll - 1) break;
    after = nsids.back();
  }
  if (!listed) {
    for (uint32_t id = 1; id <= std::min<uint32_t>(nn, 1024); ++id) nsids.push_back(id);
  }

  // Each namespace's current format.
  std::map<uint32_t, uint32_t> cdw10;
  for (uint32_t id : nsids) {
    ASSIGN_OR_RETURN(std::vector<uint8_t> ns,
                     s.Identify(kCnsNamespace, id,
                                absl::StrCat("Identify Namespace (CNS 0) of namespace ", id)));
    if (!listed && Le64(ns, 0) == 0) continue;  // Inactive (NSZE 0).
    const uint8_t nlbaf = ns[25];
    const uint8_t flbas = ns[26];
    const uint8_t index = static_cast<uint8_t>((flbas & 0xf) | (((flbas >> 5) & 0x3) << 4));
    if (index > nlbaf) {
      return WithFailureReason(
          absl::DataLossError(absl::StrFormat(
              "%s: namespace %u reports LBA format %u in use but only %u formats (NLBAF %u)",
              s.Where(), id, index, nlbaf + 1, nlbaf)),
          kReasonEraseStatus);
    }
    cdw10[id] = FormatCdw10(flbas, ns[29]);
    report.namespaces.push_back(id);
  }
  if (cdw10.empty()) return report;

  std::vector<std::pair<uint32_t, uint32_t>> formats(cdw10.begin(), cdw10.end());
  if ((fna & 0x1) != 0) {
    // A format applies to all namespaces: one command, which must not
    // change any namespace's format.
    for (const auto& [id, dw] : formats) {
      if (dw != formats[0].second) {
        return WithFailureReason(
            absl::FailedPreconditionError(absl::StrFormat(
                "%s: the controller formats all namespaces at once (FNA bit 0) but namespaces "
                "%u and %u use different LBA formats (CDW10 %08x and %08x); refusing to change "
                "a format, erase it by hand (nvme format --ses=1)",
                s.Where(), formats[0].first, id, formats[0].second, dw)),
            kReasonEraseUnsupported);
      }
    }
    formats = {{kNvmeNsidAll, formats[0].second}};
  }
  for (const auto& [id, dw] : formats) {
    NvmeAdminCommand cmd{.opcode = kNvmeAdminFormatNvm, .nsid = id, .cdw10 = dw,
                         .timeout = options.format_timeout};
    RETURN_IF_ERROR(
        s.Run(absl::StrFormat("Format NVM (SES=1, CDW10 %08x) of %s", dw, NsName(id)), cmd, {}));
    report.formatted.push_back(id);
  }
  return report;
}

absl::StatusOr<NvmeEraseReport> FinishPendingErase(VfioBinder& binder, Sysfs& sys,
                                                   NvmeAdmin& admin, PciAddress address,
                                                   const EraseReturnOptions& options) {
  RETURN_IF_ERROR(binder.GiveBackForErase(address));
  const std::string addr = address.ToString();
  const absl::Time deadline = options.clock->Now() + options.controller_wait;
  std::string controller;
  for (;;) {
    auto info = ReadPciFunction(sys, address);
    if (!info.ok()) return WithFailureReason(info.status(), kReasonEraseNoController);
    // The character device exists before the controller is live, and
    // opening it fails (EWOULDBLOCK) until nvme's reset work made it so.
    std::string state;
    if (!info->nvme_controller.empty()) {
      auto st = ReadTrimmed(sys, absl::StrCat(DevicePath(address), "/nvme/",
                                              info->nvme_controller, "/state"));
      state = st.ok() ? *st : "";
    }
    if (info->driver == "nvme" && !info->nvme_controller.empty() && state == "live" &&
        admin.Present(info->nvme_controller)) {
      controller = info->nvme_controller;
      break;
    }
    if (options.clock->Now() >= deadline) {
      return WithFailureReason(
          absl::UnavailableError(absl::StrCat(
              "erasing ", addr, ": its NVMe controller did not come up within ",
              absl::FormatDuration(options.controller_wait), " (driver \"", info->driver,
              "\", controller \"", info->nvme_controller, "\", state \"", state,
              "\"); see the kernel log")),
          kReasonEraseNoController);
    }
    options.clock->SleepFor(options.poll_interval);
  }
  ASSIGN_OR_RETURN(NvmeEraseReport report,
                   EraseNvmeController(admin, controller, addr, options.erase));
  RETURN_IF_ERROR(binder.CompleteErase(address));
  return report;
}

}  // namespace pdc::driver
