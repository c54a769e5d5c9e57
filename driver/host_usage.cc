#include "driver/host_usage.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace pdc::driver {
namespace {

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

// Unescapes mountinfo's octal escapes (\040 for a space).
std::string UnescapeMount(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    auto octal = [&](size_t k) { return s[k] >= '0' && s[k] <= '7'; };
    if (s[i] == '\\' && i + 3 < s.size() && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
                                      (s[i + 3] - '0')));
      i += 3;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> NvmeBlockDevices(Sysfs& sys,
                                                          const PciFunctionInfo& info) {
  std::vector<std::string> namespaces;
  if (info.nvme_controller.empty()) return namespaces;
  const std::string cdir = absl::StrCat(DevicePath(info.address), "/nvme/", info.nvme_controller);
  ASSIGN_OR_RETURN(std::vector<std::string> children, sys.List(cdir));
  bool multipath = false;
  for (const std::string& c : children) {
    if (IsNamespaceName(c)) namespaces.push_back(c);
    if (IsPathName(c)) multipath = true;
  }
  if (multipath) {
    // Heads live under the subsystem, which links to its controllers.
    auto subsystems = sys.List("class/nvme-subsystem");
    if (subsystems.ok()) {
      for (const std::string& s : *subsystems) {
        const std::string sdir = absl::StrCat("class/nvme-subsystem/", s);
        if (!sys.Exists(absl::StrCat(sdir, "/", info.nvme_controller))) continue;
        ASSIGN_OR_RETURN(std::vector<std::string> heads, sys.List(sdir));
        for (const std::string& h : heads) {
          if (IsNamespaceName(h)) namespaces.push_back(h);
        }
      }
    }
  }
  std::sort(namespaces.begin(), namespaces.end());
  namespaces.erase(std::unique(namespaces.begin(), namespaces.end()), namespaces.end());
  std::vector<std::string> out = namespaces;
  for (const std::string& ns : namespaces) {
    auto parts = sys.List(absl::StrCat("class/block/", ns));
    if (!parts.ok()) continue;
    for (const std::string& p : *parts) {
      if (absl::StartsWith(Sv(p), Sv(ns)) && p != ns &&
          sys.Exists(absl::StrCat("class/block/", ns, "/", p, "/partition"))) {
        out.push_back(p);
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> HostUsesOf(Sysfs& sys, Sysfs& proc,
                                                    std::string_view mountinfo_path,
                                                    const PciFunctionInfo& info) {
  ASSIGN_OR_RETURN(std::vector<std::string> blocks, NvmeBlockDevices(sys, info));
  std::vector<std::string> uses;
  if (blocks.empty()) return uses;

  // name -> major:minor; partitions live below their disk in sysfs.
  std::map<std::string, std::string> dev_of;
  std::map<std::string, std::string> dir_of;
  for (const std::string& b : blocks) {
    std::string dir = absl::StrCat("class/block/", b);
    if (!sys.Exists(dir)) {
      for (const std::string& ns : blocks) {
        if (absl::StartsWith(Sv(b), Sv(ns)) && b != ns) dir = absl::StrCat("class/block/", ns, "/", b);
      }
    }
    dir_of[b] = dir;
    if (auto dev = ReadTrimmed(sys, dir + "/dev"); dev.ok()) dev_of[b] = *dev;
  }

  for (const std::string& b : blocks) {
    if (auto holders = sys.List(dir_of[b] + "/holders"); holders.ok() && !holders->empty()) {
      uses.push_back(absl::StrCat(b, " is held by ", absl::StrJoin(*holders, ", "),
                                  " (md, dm or LVM)"));
    }
  }

  ASSIGN_OR_RETURN(std::string mountinfo, proc.Read(mountinfo_path));
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    // 36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 5) continue;
    const std::string majmin(f[2]);
    const std::string mount_point = UnescapeMount(f[4]);
    std::string source;
    for (size_t i = 5; i + 2 < f.size(); ++i) {
      if (f[i] == "-") {
        source = UnescapeMount(f[i + 2]);
        break;
      }
    }
    for (const std::string& b : blocks) {
      auto it = dev_of.find(b);
      const bool by_dev = it != dev_of.end() && it->second == majmin;
      const bool by_name = source == absl::StrCat("/dev/", b);
      if (by_dev || by_name) {
        uses.push_back(absl::StrCat(b, " (", it != dev_of.end() ? it->second : "?",
                                    ") is mounted at ", mount_point));
      }
    }
  }

  ASSIGN_OR_RETURN(std::string swaps, proc.Read("swaps"));
  for (absl::string_view line : absl::StrSplit(swaps, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.empty() || f[0] == "Filename") continue;
    const std::string file = UnescapeMount(f[0]);
    for (const std::string& b : blocks) {
      if (file == absl::StrCat("/dev/", b)) uses.push_back(absl::StrCat(b, " is used as swap"));
    }
  }
  std::sort(uses.begin(), uses.end());
  uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
  return uses;
}

}  // namespace pdc::driver
