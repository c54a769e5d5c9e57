// FakeNvmeAdmin: NVMe controllers in memory that answer the admin commands
// nvme_erase.h sends (Identify CNS 0/1/2, Format NVM) the way the NVMe
// specification says, record every command, and let a test inject NVMe
// status codes or submission errors. Each namespace holds a "data" flag
// that a successful Format NVM with SES=1 clears, so a test sees what was
// erased. For tests only. Thread-safety: not thread-safe.
#ifndef PDC_TESTS_DRIVER_FAKE_NVME_ADMIN_H_
#define PDC_TESTS_DRIVER_FAKE_NVME_ADMIN_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "driver/nvme_erase.h"

namespace pdc::driver::testing {

struct FakeNamespace {
  uint8_t nlbaf = 1;  // Zero-based: two formats.
  uint8_t flbas = 0;
  uint8_t dps = 0;
  bool has_data = true;  // Cleared by a Format NVM with SES=1.
};

struct FakeController {
  bool present = true;      // /dev/nvmeN exists.
  bool format = true;       // OACS bit 1.
  uint8_t fna = 0;
  bool cns2 = true;         // Knows the active namespace list (NVMe 1.1+).
  std::map<uint32_t, FakeNamespace> namespaces;  // NSID -> namespace.
};

struct RecordedCommand {
  std::string controller;
  uint8_t opcode;
  uint32_t nsid;
  uint32_t cdw10;
  absl::Duration timeout;
};

class FakeNvmeAdmin : public NvmeAdmin {
 public:
  bool Present(std::string_view controller) override {
    auto it = controllers.find(std::string(controller));
    return it != controllers.end() && it->second.present;
  }

  absl::StatusOr<uint16_t> Run(std::string_view controller, const NvmeAdminCommand& cmd,
                               std::span<uint8_t> data) override {
    commands.push_back({std::string(controller), cmd.opcode, cmd.nsid, cmd.cdw10, cmd.timeout});
    if (on_command) on_command(commands.back());
    if (!submit_error.ok()) return submit_error;
    if (cmd.opcode == kNvmeAdminFormatNvm && format_status) return *format_status;
    auto it = controllers.find(std::string(controller));
    if (it == controllers.end()) return absl::NotFoundError("open /dev/" + std::string(controller));
    FakeController& c = it->second;
    std::fill(data.begin(), data.end(), 0);
    if (cmd.opcode == kNvmeAdminIdentify) {
      if (data.size() != 4096) return uint16_t{0x4002};  // Invalid Field, DNR.
      switch (cmd.cdw10 & 0xff) {
        case 1: {
          const uint16_t oacs = c.format ? 0x2 : 0x0;
          data[256] = oacs & 0xff;
          const uint32_t nn = c.namespaces.empty() ? 0 : c.namespaces.rbegin()->first;
          std::memcpy(&data[516], &nn, 4);
          data[524] = c.fna;
          return uint16_t{0};
        }
        case 2: {
          if (!c.cns2) return uint16_t{0x4002};
          size_t n = 0;
          for (const auto& [id, ns] : c.namespaces) {
            if (id <= cmd.nsid) continue;
            if (n == 1024) break;
            std::memcpy(&data[n * 4], &id, 4);
            ++n;
          }
          return uint16_t{0};
        }
        case 0: {
          auto ns = c.namespaces.find(cmd.nsid);
          if (ns == c.namespaces.end()) return uint16_t{0};  // Inactive: all zero.
          const uint64_t nsze = 1 << 20;
          std::memcpy(&data[0], &nsze, 8);
          data[25] = ns->second.nlbaf;
          data[26] = ns->second.flbas;
          data[29] = ns->second.dps;
          return uint16_t{0};
        }
      }
      return uint16_t{0x4002};
    }
    if (cmd.opcode == kNvmeAdminFormatNvm) {
      if (!c.format) return uint16_t{0x4001};  // Invalid Command Opcode.
      const uint32_t ses = (cmd.cdw10 >> 9) & 0x7;
      const uint32_t lbaf = (cmd.cdw10 & 0xf) | (((cmd.cdw10 >> 12) & 0x3) << 4);
      auto apply = [&](FakeNamespace& ns) -> uint16_t {
        if (lbaf > ns.nlbaf) return 0x410A;  // Invalid Format, DNR.
        ns.flbas = static_cast<uint8_t>((lbaf & 0xf) | (cmd.cdw10 & 0x10) | ((lbaf >> 4) << 5));
        ns.dps = static_cast<uint8_t>(((cmd.cdw10 >> 5) & 0x7) | (((cmd.cdw10 >> 8) & 1) << 3));
        if (ses == 1) ns.has_data = false;
        return 0;
      };
      if (cmd.nsid == kNvmeNsidAll || (c.fna & 1) != 0) {
        for (auto& [id, ns] : c.namespaces) {
          if (uint16_t st = apply(ns)) return st;
        }
        return uint16_t{0};
      }
      auto ns = c.namespaces.find(cmd.nsid);
      if (ns == c.namespaces.end()) return uint16_t{0x400B};  // Invalid Namespace or Format.
      return apply(ns->second);
    }
    return uint16_t{0x4001};
  }

  std::vector<RecordedCommand> Formats() const {
    std::vector<RecordedCommand> out;
    for (const auto& c : commands) {
      if (c.opcode == kNvmeAdminFormatNvm) out.push_back(c);
    }
    return out;
  }

  std::map<std::string, FakeController> controllers;  // "nvme0" -> controller.
  std::vector<RecordedCommand> commands;
  // Every Format NVM answers this status when set.
  std::optional<uint16_t> format_status;
  // Every command fails to be submitted with this when not OK.
  absl::Status submit_error;
  std::function<void(const RecordedCommand&)> on_command;
};

}  // namespace pdc::driver::testing

#endif  // PDC_TESTS_DRIVER_FAKE_NVME_ADMIN_H_
