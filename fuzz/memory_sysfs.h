// MemorySysfs: a Sysfs held in maps, for the harnesses that feed kernel
// attribute files to pdc-node's readers without touching a disk.
// Thread-safety: not thread-safe (one harness call at a time).
#ifndef PDC_FUZZ_MEMORY_SYSFS_H_
#define PDC_FUZZ_MEMORY_SYSFS_H_

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "driver/sysfs.h"

namespace pdc::fuzz {

class MemorySysfs : public driver::Sysfs {
 public:
  // A file with `content`; its parent directories exist implicitly.
  void File(const std::string& path, std::string content) { files_[path] = std::move(content); }
  // A link at `path` that resolves to `target` (a path of this tree).
  void Link(const std::string& path, const std::string& target) { links_[path] = target; }
  // A device node answer for DeviceNumbersIn.
  void Node(const std::string& dir, const std::string& name, const std::string& number) {
    numbers_[dir][name] = number;
  }
  void Busy(const std::string& path) { busy_.insert(path); }

  absl::StatusOr<std::string> Read(std::string_view path) override {
    auto it = files_.find(Canonical(path));
    if (it == files_.end()) return absl::NotFoundError(std::string(path));
    return it->second;
  }
  absl::StatusOr<std::string> ReadAt(std::string_view path, uint64_t offset,
                                     size_t length) override {
    auto it = files_.find(Canonical(path));
    if (it == files_.end()) return absl::NotFoundError(std::string(path));
    if (offset >= it->second.size()) return std::string();
    return it->second.substr(offset, length);
  }
  absl::Status Write(std::string_view, std::string_view) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<std::string>> List(std::string_view dir) override {
    const std::string d = dir == "." ? "" : Canonical(dir) + "/";
    std::set<std::string> names;
    auto add = [&](const std::string& p) {
      if (p.size() <= d.size() || p.compare(0, d.size(), d) != 0) return;
      names.insert(p.substr(d.size(), p.find('/', d.size()) - d.size()));
    };
    for (const auto& [p, c] : files_) add(p);
    for (const auto& [p, t] : links_) add(p);
    if (names.empty()) return absl::NotFoundError(std::string(dir));
    return std::vector<std::string>(names.begin(), names.end());
  }
  absl::StatusOr<std::string> Resolve(std::string_view path) override {
    const std::string c = Canonical(path);
    if (!Exists(c)) return absl::NotFoundError(std::string(path));
    return c;
  }
  bool Exists(std::string_view path) override {
    const std::string c = Canonical(path);
    if (files_.contains(c)) return true;
    const std::string d = c + "/";
    auto it = files_.lower_bound(d);
    if (it != files_.end() && it->first.compare(0, d.size(), d) == 0) return true;
    auto lt = links_.lower_bound(d);
    return lt != links_.end() && lt->first.compare(0, d.size(), d) == 0;
  }
  absl::StatusOr<UniqueFd> OpenExclusive(std::string_view path) override {
    if (busy_.contains(std::string(path))) return absl::FailedPreconditionError("busy");
    return UniqueFd();
  }
  absl::StatusOr<std::map<std::string, std::string>> DeviceNumbersIn(
      std::string_view dir) override {
    auto it = numbers_.find(std::string(dir));
    if (it == numbers_.end()) return absl::NotFoundError(std::string(dir));
    return it->second;
  }

 private:
  // Follows links on every prefix of `path` (at most 16 hops).
  std::string Canonical(std::string_view path) const {
    std::string p(path);
    for (int hop = 0; hop < 16; ++hop) {
      bool changed = false;
      for (size_t end = p.size(); end > 0;) {
        auto it = links_.find(p.substr(0, end));
        if (it != links_.end()) {
          p = it->second + p.substr(end);
          changed = true;
          break;
        }
        const size_t slash = p.rfind('/', end - 1);
        if (slash == std::string::npos) break;
        end = slash;
      }
      if (!changed) break;
    }
    return p;
  }

  std::map<std::string, std::string> files_;
  std::map<std::string, std::string> links_;
  std::map<std::string, std::map<std::string, std::string>> numbers_;
  std::set<std::string> busy_;
};

}  // namespace pdc::fuzz

#endif  // PDC_FUZZ_MEMORY_SYSFS_H_
