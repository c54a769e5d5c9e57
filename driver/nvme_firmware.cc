#include "driver/nvme_firmware.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"

namespace pdc::driver {
namespace {

constexpr size_t kSlotLogSize = 512;
constexpr size_t kBootLogHeaderSize = 16;
constexpr size_t kSlots = 7;

bool Plain(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
         c == '_' || c == '+' || c == ':';
}

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (Plain(c)) {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(c));
    }
  }
  return out;
}

absl::StatusOr<std::string> Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    int v = 0;
    if (i + 2 >= s.size() || !absl::SimpleHexAtoi(Sv(s.substr(i + 1, 2)), &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad percent escape at offset ", i, " of \"", Sv(s), "\""));
    }
    out.push_back(static_cast<char>(v));
    i += 2;
  }
  return out;
}

// An ASCII field of `n` bytes at `at`, trimmed (NULs end it).
std::string AsciiField(std::span<const uint8_t> b, size_t at, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && b[at + i] != 0; ++i) s.push_back(static_cast<char>(b[at + i]));
  return std::string(absl::StripAsciiWhitespace(s));
}

std::string OrUnset(const std::string& s) { return s.empty() ? "(empty)" : "\"" + s + "\""; }

}  // namespace

std::string EncodeFirmwareState(const NvmeFirmwareState& st) {
  std::vector<std::string> parts;
  if (!st.revision.empty()) parts.push_back("fr=" + Escape(st.revision));
  if (!st.afi.empty()) parts.push_back("afi=" + Escape(st.afi));
  if (!st.slots.empty()) {
    std::vector<std::string> slots;
    for (const std::string& s : st.slots) slots.push_back(Escape(s));
    parts.push_back("fs=" + absl::StrJoin(slots, "/"));
  }
  if (!st.boot.empty()) parts.push_back("bp=" + Escape(st.boot));
  return absl::StrJoin(parts, ",");
}

absl::StatusOr<NvmeFirmwareState> DecodeFirmwareState(std::string_view word) {
  NvmeFirmwareState st;
  if (word.empty()) return st;
  for (absl::string_view part : absl::StrSplit(Sv(word), ',')) {
    const size_t eq = part.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("firmware state \"", Sv(word), "\": \"", part, "\" is not key=value"));
    }
    const absl::string_view key = part.substr(0, eq);
    const std::string_view value = StdSv(part.substr(eq + 1));
    auto one = [&](std::string* into) -> absl::Status {
      auto v = Unescape(value);
      if (!v.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "firmware state \"", Sv(word), "\", ", key, ": ", v.status().message()));
      }
      *into = std::move(*v);
      return absl::OkStatus();
    };
    absl::Status s;
    if (key == "fr") {
      s = one(&st.revision);
    } else if (key == "afi") {
      s = one(&st.afi);
    } else if (key == "bp") {
      s = one(&st.boot);
    } else if (key == "fs") {
      st.slots.clear();
      for (absl::string_view slot : absl::StrSplit(Sv(value), '/')) {
        auto v = Unescape(StdSv(slot));
        if (!v.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "firmware state \"", Sv(word), "\", fs: ", v.status().message()));
        }
        st.slots.push_back(std::move(*v));
      }
    }
    if (!s.ok()) return s;
  }
  return st;
}

std::string FirmwareRevisionOf(std::span<const uint8_t> identify_controller) {
  if (identify_controller.size() < 72) return "";
  return AsciiField(identify_controller, 64, 8);
}

void ReadFirmwareLogs(NvmeAdminChannel& channel, absl::Duration timeout,
                      NvmeFirmwareState* state) {
  {
    std::vector<uint8_t> log(kSlotLogSize);
    NvmeAdminCommand cmd{.opcode = kNvmeAdminGetLogPage, .nsid = kNvmeNsidAll,
                         .cdw10 = kNvmeLogFirmwareSlot |
                                  (static_cast<uint32_t>(kSlotLogSize / 4 - 1) << 16),
                         .timeout = timeout};
    auto status = channel.Run(cmd, log);
    if (status.ok() && *status == 0) {
      state->afi = absl::StrFormat("%02x", log[0]);
      state->slots.clear();
      for (size_t n = 0; n < kSlots; ++n) state->slots.push_back(AsciiField(log, 8 + 8 * n, 8));
    }
  }
  {
    // LSP bit 0 (BPID) 0: the header of boot partition 0 (BPINFO is the
    // controller's, the same in both).
    std::vector<uint8_t> log(kBootLogHeaderSize);
    NvmeAdminCommand cmd{.opcode = kNvmeAdminGetLogPage, .nsid = kNvmeNsidAll,
                         .cdw10 = kNvmeLogBootPartition |
                                  (static_cast<uint32_t>(kBootLogHeaderSize / 4 - 1) << 16),
                         .timeout = timeout};
    auto status = channel.Run(cmd, log);
    if (status.ok() && *status != 0) {
      state->boot = "none";
    } else if (status.ok()) {
      const uint32_t bpinfo = static_cast<uint32_t>(log[4]) | (static_cast<uint32_t>(log[5]) << 8) |
                              (static_cast<uint32_t>(log[6]) << 16) |
                              (static_cast<uint32_t>(log[7]) << 24);
      state->boot = absl::StrCat(bpinfo >> 31, ".", bpinfo & 0x7fff);
    }
  }
}

std::vector<std::string> FirmwareChanges(const NvmeFirmwareState& bound,
                                         const NvmeFirmwareState& now) {
  std::vector<std::string> out;
  // Read at bind and unreadable now: firmware that stopped answering is
  // not taken for unchanged.
  auto gone = [&](bool known_then, bool known_now, std::string_view what) {
    if (known_then && !known_now) {
      out.push_back(absl::StrCat(Sv(what), " was read at bind and cannot be read now"));
    }
  };
  gone(!bound.revision.empty(), !now.revision.empty(), "the firmware revision (FR)");
  gone(!bound.afi.empty(), !now.afi.empty(), "the Firmware Slot Information log");
  gone(!bound.boot.empty(), !now.boot.empty(), "the Boot Partition log");
  if (!bound.revision.empty() && !now.revision.empty() && bound.revision != now.revision) {
    out.push_back(absl::StrCat("firmware revision (FR) ", OrUnset(bound.revision), " -> ",
                               OrUnset(now.revision)));
  }
  if (!bound.afi.empty() && !now.afi.empty() && bound.afi != now.afi) {
    out.push_back(absl::StrCat("active firmware info (AFI) ", bound.afi, "h -> ", now.afi,
                               "h (bits 2:0 the running slot, 6:4 the slot activated at the "
                               "next reset)"));
  }
  if (!bound.slots.empty() && !now.slots.empty()) {
    for (size_t n = 0; n < std::max(bound.slots.size(), now.slots.size()); ++n) {
      const std::string was = n < bound.slots.size() ? bound.slots[n] : "";
      const std::string is = n < now.slots.size() ? now.slots[n] : "";
      if (was != is) {
        out.push_back(absl::StrCat("firmware slot ", n + 1, " (FRS", n + 1, ") ", OrUnset(was),
                                   " -> ", OrUnset(is)));
      }
    }
  }
  if (!bound.boot.empty() && !now.boot.empty() && bound.boot != now.boot) {
    out.push_back(absl::StrCat("boot partitions (BPINFO ABPID.BPSZ) ", bound.boot, " -> ",
                               now.boot));
  }
  return out;
}

}  // namespace pdc::driver
