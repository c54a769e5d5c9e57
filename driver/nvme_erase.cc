#include "driver/nvme_erase.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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
#include "common/file_util.h"
#include "common/strings.h"
#include "driver/nvme_vfio_erase.h"
#include "driver/nvme_firmware.h"
#include "driver/pci_function.h"

namespace pdc::driver {
namespace {

constexpr size_t kIdentifySize = 4096;
constexpr uint32_t kCnsNamespace = 0x00;
constexpr uint32_t kCnsController = 0x01;
constexpr uint32_t kCnsActiveList = 0x02;
constexpr uint32_t kCnsAllocatedList = 0x10;
constexpr uint32_t kCnsAllocatedNamespace = 0x11;
constexpr size_t kSanitizeLogSize = 512;

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

// Lower-case hex of `n` bytes at `at`; "" when all zero (not reported).
std::string HexId(const std::vector<uint8_t>& b, size_t at, size_t n) {
  std::string out;
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    absl::StrAppendFormat(&out, "%02x", b[at + i]);
    any = any || b[at + i] != 0;
  }
  return any ? out : "";
}

// The Identify Controller SN field (bytes 23:04, ASCII, space padded).
std::string SerialOf(const std::vector<uint8_t>& ctrl) {
  std::string sn(reinterpret_cast<const char*>(&ctrl[4]), 20);
  return std::string(absl::StripAsciiWhitespace(sn.c_str()));
}

bool Uniform(const std::vector<uint8_t>& b) {
  return std::all_of(b.begin(), b.end(), [&](uint8_t x) { return x == b[0]; });
}

// One namespace as Identify Namespace describes it.
struct Namespace {
  uint32_t nsid = 0;
  bool active = false;
  uint64_t nsze = 0;
  uint32_t cdw10_format = 0;  // FLBAS/DPS bits of the Format NVM CDW10 (no SES).
  uint32_t block_bytes = 0;   // LBA data size, plus metadata when extended.
  bool write_protected = false;
  bool shared = false;
  std::string nguid, eui64;
};

// Admin commands on one channel; a non-zero NVMe status becomes an error.
class Session {
 public:
  Session(NvmeAdminChannel& channel, std::string_view controller, std::string_view device,
          const NvmeEraseOptions& options)
      : channel_(channel), controller_(controller), device_(device), options_(options) {}

  absl::Status Run(std::string_view what, const NvmeAdminCommand& cmd, std::span<uint8_t> data,
                   bool io = false) {
    if (options_.before_command) options_.before_command(cmd.timeout);
    auto status = io ? channel_.RunIo(cmd, data) : channel_.Run(cmd, data);
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

  // A namespace ID list (CNS 02h or 10h), 1024 NSIDs a page, each page
  // starting after the NSID given.
  absl::StatusOr<std::vector<uint32_t>> List(uint32_t cns, std::string_view name) {
    std::vector<uint32_t> nsids;
    for (uint32_t after = 0;;) {
      ASSIGN_OR_RETURN(std::vector<uint8_t> page,
                       Identify(cns, after, absl::StrFormat("Identify %s (CNS %02xh) after NSID %u",
                                                            name, cns, after)));
      size_t n = 0;
      for (; n < kIdentifySize / 4; ++n) {
        const uint32_t id = Le32(page, n * 4);
        if (id == 0) break;
        nsids.push_back(id);
      }
      if (n < kIdentifySize / 4 || nsids.back() >= kNvmeNsidAll - 1) break;
      after = nsids.back();
    }
    return nsids;
  }

  absl::Status Refuse(std::string_view reason, std::string why) {
    return WithFailureReason(absl::FailedPreconditionError(absl::StrCat(Where(), ": ", why)),
                             reason);
  }

  std::string Where() const {
    return absl::StrCat("erasing NVMe controller ", controller_, " (", device_, ")");
  }

 private:
  NvmeAdminChannel& channel_;
  const std::string controller_;
  const std::string device_;
  const NvmeEraseOptions& options_;
};

absl::StatusOr<Namespace> DescribeNamespace(Session& s, uint32_t id, bool active) {
  const uint32_t cns = active ? kCnsNamespace : kCnsAllocatedNamespace;
  ASSIGN_OR_RETURN(std::vector<uint8_t> ns,
                   s.Identify(cns, id, absl::StrFormat("Identify Namespace (CNS %02xh) of "
                                                       "namespace %u", cns, id)));
  Namespace n;
  n.nsid = id;
  n.active = active;
  n.nsze = Le64(ns, 0);
  const uint8_t nlbaf = ns[25];
  const uint8_t flbas = ns[26];
  const uint8_t index = static_cast<uint8_t>((flbas & 0xf) | (((flbas >> 5) & 0x3) << 4));
  if (index > nlbaf || index >= 64) {
    return WithFailureReason(
        absl::DataLossError(absl::StrFormat(
            "%s: namespace %u reports LBA format %u in use but only %u formats (NLBAF %u)",
            s.Where(), id, index, nlbaf + 1, nlbaf)),
        kReasonEraseStatus);
  }
  n.cdw10_format = FormatCdw10(flbas, ns[29], 0);
  // LBA Format n: MS bits 15:0, LBADS bits 23:16 (a power of two).
  const uint32_t lbaf = Le32(ns, 128 + 4 * index);
  const uint32_t lbads = (lbaf >> 16) & 0xff;
  const uint32_t ms = lbaf & 0xffff;
  if (lbads >= 9 && lbads <= 16) {
    n.block_bytes = (1u << lbads) + ((flbas & 0x10) != 0 ? ms : 0);
  }
  n.shared = (ns[30] & 0x1) != 0;           // NMIC bit 0.
  n.write_protected = (ns[99] & 0x1) != 0;  // NSATTR bit 0.
  n.nguid = HexId(ns, 104, 16);
  n.eui64 = HexId(ns, 120, 8);
  return n;
}

// Blocks read for the verification: the first and the last of a namespace.
std::vector<uint64_t> SampleLbas(const Namespace& n) {
  if (n.nsze == 0) return {};
  if (n.nsze == 1) return {0};
  return {0, n.nsze - 1};
}

absl::StatusOr<std::vector<uint8_t>> ReadBlock(Session& s, const Namespace& n, uint64_t lba) {
  std::vector<uint8_t> buf(n.block_bytes);
  NvmeAdminCommand cmd{.opcode = kNvmeIoRead, .nsid = n.nsid,
                       .cdw10 = static_cast<uint32_t>(lba),
                       .cdw11 = static_cast<uint32_t>(lba >> 32), .cdw12 = 0};
  RETURN_IF_ERROR(s.Run(absl::StrFormat("Read of LBA %u of namespace %u", lba, n.nsid), cmd, buf,
                        /*io=*/true));
  return buf;
}

}  // namespace

namespace {

class DevNvmeChannel : public NvmeAdminChannel {
 public:
  DevNvmeChannel(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  absl::StatusOr<uint16_t> Run(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override {
    return Submit(NVME_IOCTL_ADMIN_CMD, "NVME_IOCTL_ADMIN_CMD", cmd, data);
  }
  absl::StatusOr<uint16_t> RunIo(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override {
    // The kernel passes I/O commands through the controller's node only when
    // it has a single namespace (EINVAL otherwise): that is "cannot".
    auto st = Submit(NVME_IOCTL_IO_CMD, "NVME_IOCTL_IO_CMD", cmd, data);
    if (!st.ok() && (absl::IsInvalidArgument(st.status()) ||
                     st.status().code() == absl::StatusCode::kUnimplemented ||
                     st.status().message().find("Inappropriate ioctl") != std::string_view::npos)) {
      return absl::UnimplementedError(std::string(st.status().message()));
    }
    return st;
  }

 private:
  absl::StatusOr<uint16_t> Submit(unsigned long request, const char* name,
                                  const NvmeAdminCommand& cmd, std::span<uint8_t> data) {
    nvme_passthru_cmd c;
    std::memset(&c, 0, sizeof(c));
    c.opcode = cmd.opcode;
    c.nsid = cmd.nsid;
    c.cdw10 = cmd.cdw10;
    c.cdw11 = cmd.cdw11;
    c.cdw12 = cmd.cdw12;
    c.addr = reinterpret_cast<uintptr_t>(data.data());
    c.data_len = static_cast<uint32_t>(data.size());
    c.timeout_ms = static_cast<uint32_t>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(cmd.timeout), 1, UINT32_MAX));
    const int rc = ::ioctl(fd_.get(), request, &c);
    if (rc < 0) {
      const int e = errno;
      return absl::ErrnoToStatus(
          e, absl::StrFormat("ioctl %s (opcode %02xh) on %s", name, cmd.opcode, path_));
    }
    return static_cast<uint16_t>(rc);
  }

  UniqueFd fd_;
  const std::string path_;
};

}  // namespace

bool DevNvmeAdmin::Present(std::string_view controller) {
  if (!IsControllerName(controller)) return false;
  return ::access(absl::StrCat(dev_root_, "/", Sv(controller)).c_str(), F_OK) == 0;
}

absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> DevNvmeAdmin::Open(
    std::string_view controller, std::string_view device_number) {
  if (!IsControllerName(controller)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Sv(controller), "\" is not an NVMe controller name (nvme<N>)"));
  }
  const std::string path = absl::StrCat(dev_root_, "/", Sv(controller));
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (fd.get() < 0) {
    const int e = errno;
    return absl::ErrnoToStatus(e, absl::StrCat("open ", path));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    const int e = errno;
    return absl::ErrnoToStatus(e, absl::StrCat("fstat ", path));
  }
  const std::string got = absl::StrCat(major(st.st_rdev), ":", minor(st.st_rdev));
  if (!S_ISCHR(st.st_mode) || got != absl::StripAsciiWhitespace(Sv(device_number))) {
    return WithFailureReason(
        absl::FailedPreconditionError(absl::StrCat(
            path, " is character device ", got, ", not the controller's ",
            device_number.empty() ? std::string("(unknown)") : std::string(device_number),
            ": the name now belongs to another controller")),
        kReasonEraseNoController);
  }
  return std::unique_ptr<NvmeAdminChannel>(new DevNvmeChannel(std::move(fd), path));
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

uint32_t FormatCdw10(uint8_t flbas, uint8_t dps, uint32_t ses) {
  const uint32_t lbaf_low = flbas & 0xf;
  const uint32_t mset = (flbas >> 4) & 0x1;
  const uint32_t lbaf_high = (flbas >> 5) & 0x3;
  const uint32_t pi = dps & 0x7;
  const uint32_t pil = (dps >> 3) & 0x1;
  return lbaf_low | (mset << 4) | (pi << 5) | (pil << 8) | ((ses & 0x7) << 9) | (lbaf_high << 12);
}

absl::StatusOr<NvmeEraseReport> EraseNvmeController(NvmeAdminChannel& channel,
                                                    std::string_view controller,
                                                    std::string_view device,
                                                    std::string_view expected_identity,
                                                    const NvmeEraseOptions& options) {
  Session s(channel, controller, device, options);
  NvmeEraseReport report;
  report.controller = std::string(controller);
  report.method = "none";
  ASSIGN_OR_RETURN(std::vector<uint8_t> ctrl,
                   s.Identify(kCnsController, 0, "Identify Controller (CNS 01h)"));
  const uint16_t cntlid = Le16(ctrl, 78);
  const uint8_t cmic = ctrl[76];
  const uint16_t oacs = Le16(ctrl, 256);
  const uint32_t sanicap = Le32(ctrl, 328);
  const uint32_t nn = Le32(ctrl, 516);
  const uint8_t fna = ctrl[524];
  const bool ns_management = (oacs & 0x8) != 0;

  // Active namespaces (NVMe 1.0 controllers know no CNS 02h: every NSID up
  // to NN, inactive ones answering NSZE 0), then the allocated ones.
  std::vector<uint32_t> active;
  bool listed = true;
  if (auto list = s.List(kCnsActiveList, "Active Namespace List"); list.ok()) {
    active = std::move(*list);
  } else if (FailureReason(list.status()) == kReasonEraseStatus &&
             list.status().message().find("SC 02h") != std::string_view::npos) {
    listed = false;
    for (uint32_t id = 1; id <= std::min<uint32_t>(nn, 1024); ++id) active.push_back(id);
  } else {
    return list.status();
  }
  std::vector<Namespace> namespaces;
  for (uint32_t id : active) {
    ASSIGN_OR_RETURN(Namespace n, DescribeNamespace(s, id, /*active=*/true));
    if (!listed && n.nsze == 0) continue;  // Inactive.
    namespaces.push_back(std::move(n));
  }

  // Same drive: checked before anything is changed.
  std::string identity = SerialOf(ctrl);
  if (identity.empty()) {
    for (const Namespace& n : namespaces) {
      if (!n.nguid.empty()) identity = "nguid:" + n.nguid;
      if (identity.empty() && !n.eui64.empty()) identity = "eui64:" + n.eui64;
      if (!identity.empty()) break;
    }
  }
  report.identity = identity;
  if (expected_identity.empty()) {
    return s.Refuse(kReasonEraseNoIdentity,
                    absl::StrCat("pdc has no record of which drive was claimed at ", Sv(device),
                                 " (Identify says \"", identity, "\"); not erased, held until an "
                                 "administrator erases it"));
  }
  if (identity != expected_identity) {
    return s.Refuse(kReasonDriveChanged,
                    absl::StrCat("the controller is drive \"", identity, "\", not \"",
                                 Sv(expected_identity), "\" whose erase is pending: another "
                                 "drive took the address (a renumbering or a swap); not erased"));
  }

  // Firmware: what the controller says of it now against what it said at
  // bind, before anything is erased (firmware the guest installed would be
  // what runs the erase).
  NvmeFirmwareState firmware;
  firmware.revision = FirmwareRevisionOf(ctrl);
  if (options.before_command) options.before_command(options.identify_timeout);
  ReadFirmwareLogs(channel, options.identify_timeout, &firmware);
  report.firmware = EncodeFirmwareState(firmware);
  if (!options.bound_firmware.empty()) {
    absl::StatusOr<NvmeFirmwareState> bound = DecodeFirmwareState(options.bound_firmware);
    report.firmware_changes =
        bound.ok() ? FirmwareChanges(*bound, firmware)
                   : std::vector<std::string>{absl::StrCat(
                         "the firmware state journaled at bind does not read (",
                         bound.status().message(), ")")};
    if (!report.firmware_changes.empty() && options.hold_on_firmware_change) {
      return s.Refuse(
          kReasonFirmwareChanged,
          absl::StrCat("its firmware changed while it was claimed: ",
                       absl::StrJoin(report.firmware_changes, "; "),
                       ". The guest owned the whole controller and may have installed firmware "
                       "that would run this erase; not erased, held on vfio-pci for an "
                       "administrator (check the firmware with the vendor's tools; "
                       "node.firmwareChange: report erases and reports instead)"));
    }
  }

  if (ns_management) {
    ASSIGN_OR_RETURN(std::vector<uint32_t> allocated,
                     s.List(kCnsAllocatedList, "Allocated Namespace ID List"));
    for (uint32_t id : allocated) {
      if (std::binary_search(active.begin(), active.end(), id)) continue;
      ASSIGN_OR_RETURN(Namespace n, DescribeNamespace(s, id, /*active=*/false));
      namespaces.push_back(std::move(n));
    }
    std::sort(namespaces.begin(), namespaces.end(),
              [](const Namespace& a, const Namespace& b) { return a.nsid < b.nsid; });
  }
  for (const Namespace& n : namespaces) report.namespaces.push_back(n.nsid);
  if (namespaces.empty()) return report;

  // What cannot be erased, or not without erasing someone else's data.
  for (const Namespace& n : namespaces) {
    if (n.write_protected) {
      return s.Refuse(kReasonEraseRefused,
                      absl::StrCat("namespace ", n.nsid, " is write protected (NSATTR bit 0): "
                                   "its data cannot be erased; clear the protection (Set "
                                   "Features 84h) or erase it by hand"));
    }
    if (n.shared) {
      return s.Refuse(kReasonEraseRefused,
                      absl::StrCat("namespace ", n.nsid, " may be attached to other controllers "
                                   "(NMIC bit 0): erasing it could erase what another host "
                                   "uses; erase it by hand"));
    }
  }
  const bool multi_controller = (cmic & 0x2) != 0;
  const bool sanitize = (sanicap & 0x3) != 0;
  const uint32_t ses = (fna & 0x4) != 0 ? 2 : 1;
  const bool broadcast = (fna & 0x1) != 0 || (fna & 0x2) != 0;
  if (multi_controller && (sanitize || broadcast)) {
    return s.Refuse(kReasonEraseRefused,
                    absl::StrCat("the NVM subsystem may hold other controllers (CMIC bit 1) and ",
                                 sanitize ? "a sanitize" : "a format (FNA)",
                                 " reaches every namespace of the subsystem: refusing to erase "
                                 "what other controllers may use; erase it by hand"));
  }
  if (!sanitize && (oacs & 0x2) == 0) {
    return s.Refuse(kReasonEraseUnsupported,
                    "the controller supports neither Sanitize (SANICAP) nor Format NVM (OACS "
                    "bit 1); its data cannot be erased, so it is not offered again");
  }

  // Samples of what the namespaces hold now, to check the erase changed it.
  struct Sample {
    const Namespace* ns;
    uint64_t lba;
    std::vector<uint8_t> before;
  };
  std::vector<Sample> samples;
  for (const Namespace& n : namespaces) {
    if (!n.active || n.block_bytes == 0) continue;
    for (uint64_t lba : SampleLbas(n)) {
      auto b = ReadBlock(s, n, lba);
      if (!b.ok()) {
        if (b.status().code() != absl::StatusCode::kUnimplemented) return b.status();
        report.verify_note = std::string(b.status().message());
        samples.clear();
        break;
      }
      samples.push_back({&n, lba, std::move(*b)});
    }
    if (!report.verify_note.empty()) break;
  }

  if (sanitize) {
    const bool crypto = (sanicap & 0x1) != 0;
    report.method = crypto ? "sanitize (crypto erase)" : "sanitize (block erase)";
    // SANACT 100b crypto erase / 010b block erase, AUSE (bit 3).
    NvmeAdminCommand cmd{.opcode = kNvmeAdminSanitize,
                         .cdw10 = (crypto ? 0x4u : 0x2u) | 0x8u,
                         .timeout = options.identify_timeout};
    RETURN_IF_ERROR(s.Run(absl::StrCat("Sanitize (", crypto ? "Crypto Erase" : "Block Erase",
                                       ")"),
                          cmd, {}));
    const absl::Time deadline = options.clock->Now() + options.sanitize_timeout;
    for (;;) {
      std::vector<uint8_t> log(kSanitizeLogSize);
      NvmeAdminCommand get{.opcode = kNvmeAdminGetLogPage, .nsid = kNvmeNsidAll,
                           .cdw10 = kNvmeLogSanitizeStatus |
                                    (static_cast<uint32_t>(kSanitizeLogSize / 4 - 1) << 16),
                           .timeout = options.identify_timeout};
      RETURN_IF_ERROR(s.Run("Get Log Page (Sanitize Status, 81h)", get, log));
      const uint16_t sprog = Le16(log, 0);
      const uint16_t sstat = Le16(log, 2);
      const unsigned state = sstat & 0x7;
      if (state == 1 || state == 4) break;  // Completed (4: no-deallocate).
      if (state == 3) {
        return WithFailureReason(
            absl::FailedPreconditionError(absl::StrCat(
                s.Where(), ": the sanitize failed (Sanitize Status log: SSTAT ",
                absl::Hex(sstat), "); the controller is in a restricted state until a "
                "sanitize succeeds, retried")),
            kReasonEraseStatus);
      }
      if (state != 2) {
        return WithFailureReason(
            absl::InternalError(absl::StrCat(s.Where(), ": after the Sanitize command the "
                                             "Sanitize Status log says SSTAT ", absl::Hex(sstat),
                                             " (not in progress, not done)")),
            kReasonEraseStatus);
      }
      if (options.clock->Now() >= deadline) {
        return WithFailureReason(
            absl::DeadlineExceededError(absl::StrFormat(
                "%s: the sanitize is still running after %s (%.1f%% done); the next pass "
                "checks again",
                s.Where(), absl::FormatDuration(options.sanitize_timeout),
                100.0 * sprog / 65536)),
            kReasonEraseStatus);
      }
      if (options.before_command) options.before_command(options.sanitize_poll);
      options.clock->SleepFor(options.sanitize_poll);
    }
  } else {
    report.method = absl::StrCat("format (SES=", ses, ")");
    // A detached namespace keeps its data: attach it to this controller
    // for its format, detach it after.
    std::vector<uint8_t> ctrl_list(kIdentifySize);
    ctrl_list[0] = 1;
    ctrl_list[2] = static_cast<uint8_t>(cntlid & 0xff);
    ctrl_list[3] = static_cast<uint8_t>(cntlid >> 8);
    for (const Namespace& n : namespaces) {
      if (n.active) continue;
      NvmeAdminCommand attach{.opcode = kNvmeAdminNsAttachment, .nsid = n.nsid, .cdw10 = 0,
                              .timeout = options.identify_timeout};
      RETURN_IF_ERROR(s.Run(absl::StrFormat("Namespace Attachment (attach namespace %u to "
                                            "controller %u)", n.nsid, cntlid),
                            attach, ctrl_list));
      report.attached.push_back(n.nsid);
    }
    std::vector<std::pair<uint32_t, uint32_t>> formats;
    for (const Namespace& n : namespaces) formats.emplace_back(n.nsid, n.cdw10_format);
    if (broadcast) {
      // A format or secure erase applies to all namespaces: one command,
      // which must not change any namespace's format.
      for (const auto& [id, dw] : formats) {
        if (dw != formats[0].second) {
          return s.Refuse(kReasonEraseUnsupported,
                          absl::StrFormat("the controller formats all namespaces at once (FNA "
                                          "%02xh) but namespaces %u and %u use different LBA "
                                          "formats (CDW10 %08x and %08x); refusing to change a "
                                          "format, erase it by hand (nvme format --ses=1)",
                                          fna, formats[0].first, id, formats[0].second, dw));
        }
      }
      formats = {{kNvmeNsidAll, formats[0].second}};
    }
    for (const auto& [id, format] : formats) {
      const uint32_t dw = format | (ses << 9);
      NvmeAdminCommand cmd{.opcode = kNvmeAdminFormatNvm, .nsid = id, .cdw10 = dw,
                           .timeout = options.format_timeout};
      RETURN_IF_ERROR(s.Run(absl::StrFormat("Format NVM (SES=%u, CDW10 %08x) of %s", ses, dw,
                                            NsName(id)),
                            cmd, {}));
      report.formatted.push_back(id);
    }
    for (uint32_t id : report.attached) {
      NvmeAdminCommand detach{.opcode = kNvmeAdminNsAttachment, .nsid = id, .cdw10 = 1,
                              .timeout = options.identify_timeout};
      RETURN_IF_ERROR(s.Run(absl::StrFormat("Namespace Attachment (detach namespace %u from "
                                            "controller %u)", id, cntlid),
                            detach, ctrl_list));
    }
  }

  // The erase changed every sampled block, or left it a uniform fill.
  for (const Sample& sample : samples) {
    ASSIGN_OR_RETURN(std::vector<uint8_t> after, ReadBlock(s, *sample.ns, sample.lba));
    if (after == sample.before && !Uniform(after)) {
      return WithFailureReason(
          absl::DataLossError(absl::StrFormat(
              "%s: after the %s, LBA %u of namespace %u still holds what it held before: the "
              "erase did not erase it",
              s.Where(), report.method, sample.lba, sample.ns->nsid)),
          kReasonEraseUnverified);
    }
    ++report.verified_blocks;
  }
  if (samples.empty() && report.verify_note.empty()) {
    report.verify_note = "no active namespace to read back";
  }
  return report;
}

absl::StatusOr<NvmeEraseReport> FinishPendingErase(VfioBinder& binder, Sysfs& sys,
                                                   NvmeAdmin& admin, PciAddress address,
                                                   const EraseReturnOptions& options) {
  const std::string addr = address.ToString();
  std::optional<JournalEntry> entry = binder.ErasingEntry(address);
  if (!entry) {
    return absl::FailedPreconditionError(absl::StrCat("no erase is pending for ", addr));
  }
  auto before = ReadPciFunction(sys, address);
  const bool was_on_vfio = before.ok() && before->driver == kVfioPci;
  // Where it is, so the host's block layer never sees the guest's data;
  // through nvme only when VFIO cannot be used for it.
  std::string vfio_not_possible;
  if (was_on_vfio && options.vfio != nullptr) {
    absl::StatusOr<NvmeEraseReport> on_vfio =
        EraseOnVfio(binder, *options.vfio, address, *entry, options);
    if (on_vfio.ok() || FailureReason(on_vfio.status()) != kReasonVfioUnavailable) {
      return on_vfio;
    }
    vfio_not_possible = std::string(on_vfio.status().message());
  }
  // From here on, a failure puts the device back on vfio-pci, off the
  // host's block layer: always when this call took it off vfio-pci, and
  // when it was on nvme already unless it is not (or not known to be) the
  // journaled drive or the host uses it.
  absl::StatusOr<NvmeEraseReport> out = [&]() -> absl::StatusOr<NvmeEraseReport> {
    RETURN_IF_ERROR(binder.GiveBackForErase(address));
    const absl::Time deadline = options.clock->Now() + options.controller_wait;
    std::string controller;
    std::string dev_number;
    PciFunctionInfo function;
    for (;;) {
      auto info = ReadPciFunction(sys, address);
      if (!info.ok()) return WithFailureReason(info.status(), kReasonEraseNoController);
      // The character device exists before the controller is live, and
      // opening it fails (EWOULDBLOCK) until nvme's reset work made it so.
      std::string state;
      if (!info->nvme_controller.empty()) {
        const std::string cdir =
            absl::StrCat(DevicePath(address), "/nvme/", info->nvme_controller);
        auto st = ReadTrimmed(sys, cdir + "/state");
        state = st.ok() ? *st : "";
        auto dn = ReadTrimmed(sys, cdir + "/dev");
        dev_number = dn.ok() ? *dn : "";
      }
      if (info->driver == "nvme" && !info->nvme_controller.empty() && state == "live" &&
          admin.Present(info->nvme_controller)) {
        controller = info->nvme_controller;
        function = std::move(*info);
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
    // The host must not use it (a disk mounted by fstab or assembled by
    // udev meanwhile); its block devices stay held exclusively until the
    // erase is done.
    BlockDeviceHold hold;
    RETURN_IF_ERROR(binder.CheckUnusedForErase(function, &hold));
    auto channel = admin.Open(controller, dev_number);
    if (!channel.ok()) {
      return WithFailureReason(
          absl::Status(channel.status().code(),
                       absl::StrCat("erasing ", addr, ": ", channel.status().message())),
          kReasonEraseNoController);
    }
    NvmeEraseOptions eo = options.erase;
    eo.clock = options.clock;
    eo.bound_firmware = entry->firmware;
    return EraseNvmeController(**channel, controller, addr, entry->serial, eo);
  }();
  if (!out.ok()) {
    const std::string reason = FailureReason(out.status());
    // Something on the host took it in the window after the hand-back (a
    // mount): not torn away from under it; it stays held, unhealthy.
    const bool not_ours = reason == kReasonDriveChanged || reason == kReasonEraseNoIdentity;
    if (reason == kReasonVfioGroupInUse || reason == kReasonHostInUse ||
        (!was_on_vfio && not_ours) ||
        !binder.ErasingEntry(address)) {
      return out;
    }
    absl::Status held = binder.HoldForErase(address);
    if (!held.ok()) {
      return WithFailureReason(
          absl::Status(out.status().code(),
                       absl::StrCat(out.status().message(), "; putting it back on vfio-pci "
                                    "failed too: ", held.message())),
          reason);
    }
    return out;
  }
  RETURN_IF_ERROR(binder.CompleteErase(address, out->identity));
  out->path = vfio_not_possible.empty()
                  ? "nvme"
                  : absl::StrCat("nvme (VFIO not possible: ", vfio_not_possible, ")");
  return out;
}

}  // namespace pdc::driver
