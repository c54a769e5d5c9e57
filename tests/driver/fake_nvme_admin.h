// FakeNvmeAdmin: NVMe controllers in memory that answer the commands
// nvme_erase.h sends the way the NVM Express Base Specification 2.0 says,
// record every command, and let a test inject NVMe status codes or
// submission errors. What it models, by the specification's command and
// field names:
//  - Identify: CNS 01h (SN, CMIC, CNTLID, OACS with Format NVM and Namespace
//    Management, SANICAP, NN, FNA), CNS 02h the active namespace list (the
//    namespaces attached to this controller), CNS 10h the allocated list
//    (attached or not; Invalid Field without Namespace Management), CNS 00h
//    (all zero for an NSID that is not active) and CNS 11h (any allocated
//    namespace): NSZE, NLBAF, FLBAS, LBA formats, DPS, NMIC, NSATTR, NGUID.
//  - Namespace Attachment (15h, SEL 0 attach / 1 detach).
//  - Format NVM (80h): only attached namespaces; with FNA bit 0 (format) or
//    bit 1 (with a secure erase) a format applies to every namespace of the
//    subsystem, attached or not; SES 1 or 2 erases, SES 0 does not.
//  - Sanitize (84h): reaches every namespace, attached or not; the Sanitize
//    Status log page (81h) says "in progress" for `sanitize_polls` reads,
//    then the outcome (SSTAT 1 completed, or 3 failed).
//  - Read (02h, I/O) of one block: a pattern while the namespace holds
//    data, zeros after an erase.
//  - Firmware: Identify Controller FR, the Firmware Slot Information log
//    page (03h: AFI, FRS1..FRS7) and the Boot Partition log page (15h:
//    BPINFO in its header; Invalid Field when the controller has none).
// Each namespace holds a "data" flag that an erase clears, so a test sees
// what was erased. For tests only. Thread-safety: not thread-safe.
#ifndef PDC_TESTS_DRIVER_FAKE_NVME_ADMIN_H_
#define PDC_TESTS_DRIVER_FAKE_NVME_ADMIN_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "driver/nvme_erase.h"

namespace pdc::driver::testing {

struct FakeNamespace {
  uint8_t nlbaf = 1;  // Zero-based: two formats (LBAF 0: 512 B, LBAF 1: 4 KiB).
  uint8_t flbas = 0;
  uint8_t dps = 0;
  bool has_data = true;  // Cleared by an erase.
  bool attached = true;  // Active on this controller (else only allocated).
  bool write_protected = false;  // NSATTR bit 0.
  bool shared = false;           // NMIC bit 0.
  uint64_t nsze = 1 << 20;
};

struct FakeController {
  bool present = true;  // /dev/nvmeN exists.
  std::string serial;   // SN; "" for a blank one.
  std::string dev_number;  // Checked by Open when both are set.
  uint16_t cntlid = 1;
  uint8_t cmic = 0;
  bool format = true;         // OACS bit 1.
  bool ns_management = true;  // OACS bit 3.
  uint32_t sanicap = 0;       // Bit 0 crypto erase, bit 1 block erase.
  uint8_t fna = 0;
  bool cns2 = true;  // Knows the active namespace list (NVMe 1.1+).
  bool io = true;    // The channel can submit reads.
  bool format_erases = true;  // False: formats report success, erase nothing.
  int sanitize_polls = 1;     // Log reads answering "in progress".
  uint16_t sanitize_outcome = 1;  // SSTAT status after the polls.
  std::string firmware_rev = "1.0";           // FR.
  uint8_t afi = 0x01;                         // Slot 1 running.
  std::vector<std::string> slots = {"1.0"};  // FRS1.., the rest empty.
  std::optional<uint32_t> bpinfo;             // Boot partitions (BPINFO); none.
  std::map<uint32_t, FakeNamespace> namespaces;  // NSID -> namespace.
  // State of the last sanitize (Sanitize Status log).
  int sanitize_left = -1;
};

struct RecordedCommand {
  std::string controller;
  uint8_t opcode;
  uint32_t nsid;
  uint32_t cdw10;
  absl::Duration timeout;
  bool io = false;
};

class FakeNvmeAdmin : public NvmeAdmin {
 public:
  bool Present(std::string_view controller) override {
    auto it = controllers.find(std::string(controller));
    return it != controllers.end() && it->second.present;
  }

  absl::StatusOr<std::unique_ptr<NvmeAdminChannel>> Open(std::string_view controller,
                                                         std::string_view dev_number) override {
    ++opens;
    if (!open_error.ok()) return open_error;
    auto it = controllers.find(std::string(controller));
    if (it == controllers.end() || !it->second.present) {
      return absl::NotFoundError("open /dev/" + std::string(controller));
    }
    if (!it->second.dev_number.empty() && !dev_number.empty() &&
        it->second.dev_number != dev_number) {
      return absl::FailedPreconditionError("/dev/" + std::string(controller) +
                                           " is another controller's node");
    }
    // Bound to the controller at open, as a descriptor is to a device.
    return std::unique_ptr<NvmeAdminChannel>(new Channel(this, it->first, &it->second));
  }

  std::vector<RecordedCommand> Formats() const { return Of(kNvmeAdminFormatNvm); }
  std::vector<RecordedCommand> Of(uint8_t opcode, bool io = false) const {
    std::vector<RecordedCommand> out;
    for (const auto& c : commands) {
      if (c.opcode == opcode && c.io == io) out.push_back(c);
    }
    return out;
  }
  // True when no namespace of any controller holds data.
  bool AllErased(const std::string& controller) {
    for (const auto& [id, ns] : controllers[controller].namespaces) {
      if (ns.has_data) return false;
    }
    return true;
  }

  std::map<std::string, FakeController> controllers;  // "nvme0" -> controller.
  std::vector<RecordedCommand> commands;
  int opens = 0;
  absl::Status open_error;
  // Every Format NVM answers this status when set.
  std::optional<uint16_t> format_status;
  // Every command fails to be submitted with this when not OK.
  absl::Status submit_error;
  std::function<void(const RecordedCommand&)> on_command;

 private:
  class Channel : public NvmeAdminChannel {
   public:
    Channel(FakeNvmeAdmin* admin, std::string name, FakeController* c)
        : admin_(admin), name_(std::move(name)), c_(c) {}
    absl::StatusOr<uint16_t> Run(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override {
      return admin_->Execute(name_, *c_, cmd, data, false);
    }
    absl::StatusOr<uint16_t> RunIo(const NvmeAdminCommand& cmd, std::span<uint8_t> data) override {
      return admin_->Execute(name_, *c_, cmd, data, true);
    }

   private:
    FakeNvmeAdmin* admin_;
    std::string name_;
    FakeController* c_;
  };

  static void Put32(std::span<uint8_t> d, size_t at, uint32_t v) { std::memcpy(&d[at], &v, 4); }

  static uint32_t LbaBytes(const FakeNamespace& ns) {
    const uint32_t index = (ns.flbas & 0xf) | (((ns.flbas >> 5) & 0x3) << 4);
    return index == 0 ? 512 : 4096;
  }

  absl::StatusOr<uint16_t> Execute(const std::string& name, FakeController& c,
                                   const NvmeAdminCommand& cmd, std::span<uint8_t> data, bool io) {
    commands.push_back({name, cmd.opcode, cmd.nsid, cmd.cdw10, cmd.timeout, io});
    if (on_command) on_command(commands.back());
    if (!submit_error.ok()) return submit_error;
    if (io) {
      // The kernel passes I/O through the controller's node only with a
      // single namespace: a channel that cannot read.
      if (!c.io) return absl::UnimplementedError("NVME_IOCTL_IO_CMD: Invalid argument");
      return Read(c, cmd, data);
    }
    if (cmd.opcode == kNvmeAdminFormatNvm && format_status) return *format_status;
    if (cmd.opcode != kNvmeAdminNsAttachment) std::fill(data.begin(), data.end(), 0);
    switch (cmd.opcode) {
      case kNvmeAdminIdentify:
        return Identify(c, cmd, data);
      case kNvmeAdminNsAttachment: {
        if (!c.ns_management) return uint16_t{0x4001};
        auto ns = c.namespaces.find(cmd.nsid);
        if (ns == c.namespaces.end()) return uint16_t{0x400B};
        uint16_t count = 0, id = 0;
        std::memcpy(&count, &data[0], 2);
        std::memcpy(&id, &data[2], 2);
        if (count != 1 || id != c.cntlid) return uint16_t{0x411C};  // Controller List Invalid.
        const bool attach = (cmd.cdw10 & 0xf) == 0;
        if (attach == ns->second.attached) return static_cast<uint16_t>(attach ? 0x4118 : 0x411A);
        ns->second.attached = attach;
        return uint16_t{0};
      }
      case kNvmeAdminFormatNvm:
        return Format(c, cmd);
      case kNvmeAdminSanitize: {
        const uint32_t sanact = cmd.cdw10 & 0x7;
        const bool ok = (sanact == 4 && (c.sanicap & 1)) || (sanact == 2 && (c.sanicap & 2));
        if (!ok) return uint16_t{0x4002};
        if (c.sanitize_outcome == 1) {
          for (auto& [id, ns] : c.namespaces) ns.has_data = false;
        }
        c.sanitize_left = c.sanitize_polls;
        return uint16_t{0};
      }
      case kNvmeAdminGetLogPage: {
        const uint32_t numd = (cmd.cdw10 >> 16) + 1;  // NUMDL, dwords.
        if ((cmd.cdw10 & 0xff) == 0x03) {  // Firmware Slot Information.
          if (data.size() < 512 || numd * 4 != data.size()) return uint16_t{0x4002};
          data[0] = c.afi;
          for (size_t n = 0; n < c.slots.size() && n < 7; ++n) {
            std::memset(&data[8 + 8 * n], ' ', 8);
            std::memcpy(&data[8 + 8 * n], c.slots[n].data(), std::min<size_t>(c.slots[n].size(), 8));
          }
          return uint16_t{0};
        }
        if ((cmd.cdw10 & 0xff) == 0x15) {  // Boot Partition.
          if (!c.bpinfo || data.size() < 16 || numd * 4 != data.size()) return uint16_t{0x4002};
          data[0] = 0x15;
          Put32(data, 4, *c.bpinfo);
          return uint16_t{0};
        }
        if ((cmd.cdw10 & 0xff) != kNvmeLogSanitizeStatus || data.size() < 512) {
          return uint16_t{0x4002};
        }
        uint16_t sstat = 0;  // Never sanitized.
        uint16_t sprog = 0xffff;
        if (c.sanitize_left > 0) {
          --c.sanitize_left;
          sstat = 2;
          sprog = 0x8000;
        } else if (c.sanitize_left == 0) {
          sstat = c.sanitize_outcome;
        }
        std::memcpy(&data[0], &sprog, 2);
        std::memcpy(&data[2], &sstat, 2);
        return uint16_t{0};
      }
    }
    return uint16_t{0x4001};
  }

  uint16_t Identify(FakeController& c, const NvmeAdminCommand& cmd, std::span<uint8_t> data) {
    if (data.size() != 4096) return 0x4002;  // Invalid Field, DNR.
    switch (cmd.cdw10 & 0xff) {
      case 0x01: {
        std::memset(&data[4], ' ', 20);
        std::memcpy(&data[4], c.serial.data(), std::min<size_t>(c.serial.size(), 20));
        std::memset(&data[64], ' ', 8);
        std::memcpy(&data[64], c.firmware_rev.data(), std::min<size_t>(c.firmware_rev.size(), 8));
        data[76] = c.cmic;
        std::memcpy(&data[78], &c.cntlid, 2);
        const uint16_t oacs = (c.format ? 0x2 : 0) | (c.ns_management ? 0x8 : 0);
        std::memcpy(&data[256], &oacs, 2);
        Put32(data, 328, c.sanicap);
        Put32(data, 516, c.namespaces.empty() ? 0 : c.namespaces.rbegin()->first);
        data[524] = c.fna;
        return 0;
      }
      case 0x02:
      case 0x10: {
        const bool active = (cmd.cdw10 & 0xff) == 0x02;
        if (active && !c.cns2) return 0x4002;
        if (!active && !c.ns_management) return 0x4002;
        size_t n = 0;
        for (const auto& [id, ns] : c.namespaces) {
          if (id <= cmd.nsid || (active && !ns.attached)) continue;
          if (n == 1024) break;
          Put32(data, n * 4, id);
          ++n;
        }
        return 0;
      }
      case 0x00:
      case 0x11: {
        auto ns = c.namespaces.find(cmd.nsid);
        if (ns == c.namespaces.end()) return (cmd.cdw10 & 0xff) == 0 ? 0 : 0x400B;
        if ((cmd.cdw10 & 0xff) == 0 && !ns->second.attached) return 0;  // Inactive: zeros.
        const FakeNamespace& n = ns->second;
        std::memcpy(&data[0], &n.nsze, 8);
        data[25] = n.nlbaf;
        data[26] = n.flbas;
        data[29] = n.dps;
        data[30] = n.shared ? 1 : 0;
        data[99] = n.write_protected ? 1 : 0;
        for (uint32_t f = 0; f <= n.nlbaf && f < 64; ++f) {
          Put32(data, 128 + 4 * f, (f == 0 ? 9u : 12u) << 16);  // LBADS; no metadata.
        }
        return 0;
      }
    }
    return 0x4002;
  }

  uint16_t Format(FakeController& c, const NvmeAdminCommand& cmd) {
    if (!c.format) return 0x4001;  // Invalid Command Opcode.
    const uint32_t ses = (cmd.cdw10 >> 9) & 0x7;
    const uint32_t lbaf = (cmd.cdw10 & 0xf) | (((cmd.cdw10 >> 12) & 0x3) << 4);
    auto apply = [&](FakeNamespace& ns) -> uint16_t {
      if (lbaf > ns.nlbaf) return 0x410A;  // Invalid Format, DNR.
      ns.flbas = static_cast<uint8_t>((lbaf & 0xf) | (cmd.cdw10 & 0x10) | ((lbaf >> 4) << 5));
      ns.dps = static_cast<uint8_t>(((cmd.cdw10 >> 5) & 0x7) | (((cmd.cdw10 >> 8) & 1) << 3));
      if ((ses == 1 || ses == 2) && c.format_erases) ns.has_data = false;
      return 0;
    };
    // FNA bit 0, or bit 1 with a secure erase: the whole subsystem.
    const bool all = (c.fna & 0x1) != 0 || ((c.fna & 0x2) != 0 && ses != 0);
    if (cmd.nsid == kNvmeNsidAll || all) {
      for (auto& [id, ns] : c.namespaces) {
        if (!all && !ns.attached) continue;
        if (uint16_t st = apply(ns)) return st;
      }
      return 0;
    }
    auto ns = c.namespaces.find(cmd.nsid);
    if (ns == c.namespaces.end() || !ns->second.attached) {
      return 0x400B;  // Invalid Namespace or Format.
    }
    return apply(ns->second);
  }

  uint16_t Read(FakeController& c, const NvmeAdminCommand& cmd, std::span<uint8_t> data) {
    if (cmd.opcode != kNvmeIoRead) return 0x4001;
    auto ns = c.namespaces.find(cmd.nsid);
    if (ns == c.namespaces.end() || !ns->second.attached) return 0x400B;
    const uint64_t lba = cmd.cdw10 | (static_cast<uint64_t>(cmd.cdw11) << 32);
    if (lba >= ns->second.nsze || (cmd.cdw12 & 0xffff) != 0 ||
        data.size() != LbaBytes(ns->second)) {
      return 0x4002;
    }
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = ns->second.has_data ? static_cast<uint8_t>(cmd.nsid * 31 + lba + i) : 0;
    }
    return 0;
  }
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_NVME_ADMIN_H_
