// Sysfs: a rooted view of a kernel pseudo file system (/sys, and the same
// shape serves /proc and /dev), the only way pdc-node touches the kernel.
// Every path is relative to the root ("." is the root itself) and is refused
// (InvalidArgument) when it is absolute, empty, or has "", "." or ".."
// components; a path or link whose
// target lies outside the root is refused (PermissionDenied). Production uses
// RealSysfs("/sys"); tests point RealSysfs at a temporary tree, or use the
// fake kernel in tests/driver/ that applies the kernel's effects of writes.
// Thread-safety: implementations are safe to call from any thread; callers
// serialise writes that must happen in order (the VfioBinder does).
#ifndef PDC_DRIVER_SYSFS_H_
#define PDC_DRIVER_SYSFS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/file_util.h"

namespace pdc::driver {

class Sysfs {
 public:
  virtual ~Sysfs() = default;

  // Whole content of a file. NotFound when it does not exist.
  virtual absl::StatusOr<std::string> Read(std::string_view path) = 0;

  // Writes `data` with one write() call, the way sysfs attributes must be
  // written. The file must exist (sysfs never creates files).
  virtual absl::Status Write(std::string_view path, std::string_view data) = 0;

  // Names in a directory, sorted; NotFound when it does not exist.
  virtual absl::StatusOr<std::vector<std::string>> List(std::string_view dir) = 0;

  // The canonical path (relative to the root, links followed) of an existing
  // file or directory. NotFound when missing or dangling.
  virtual absl::StatusOr<std::string> Resolve(std::string_view path) = 0;

  // True when `path` is a valid path that exists (links followed).
  virtual bool Exists(std::string_view path) = 0;

  // Opens `path`, a block device node, with O_EXCL and keeps it open: the
  // kernel refuses that while anything holds the device exclusively (a
  // mounted file system, md/dm/LVM, swap, a ZFS pool, another exclusive
  // opener) and, once it succeeded, refuses them until the descriptor is
  // closed. FailedPrecondition ("busy") when refused; NotFound when absent.
  // Also serves a character device whose driver allows one opener at a
  // time, a VFIO group: its EBUSY is the same FailedPrecondition.
  virtual absl::StatusOr<UniqueFd> OpenExclusive(std::string_view path) = 0;

  // The devices the entries of directory `dir` lead to, by entry name:
  // "b<major>:<minor>" for a block device, "c<major>:<minor>" for a
  // character device; other entries are left out, and so are entries that
  // vanish while being read. Links are followed to the end, /proc's
  // descriptor links (<pid>/fd/<n>) included: only `dir` must lie beneath
  // the root, since this reads each inode's type and number and nothing of
  // its content. NotFound when `dir` does not exist.
  virtual absl::StatusOr<std::map<std::string, std::string>> DeviceNumbersIn(
      std::string_view dir) = 0;

  // Up to `length` bytes of `path` from byte `offset` (fewer at its end):
  // a signature on a block device, without reading the rest of it. NotFound
  // when it does not exist.
  virtual absl::StatusOr<std::string> ReadAt(std::string_view path, uint64_t offset,
                                             size_t length) = 0;
};

// Checks a relative path: "." (the root), or non-empty, not absolute, no
// empty, "." or ".." components. InvalidArgument naming the path otherwise.
absl::Status ValidateRelativePath(std::string_view path);

// Last component of Resolve(path): the name a link such as `driver` or
// `iommu_group` points to ("nvme", "12").
absl::StatusOr<std::string> LinkName(Sysfs& fs, std::string_view path);

// Read() with trailing whitespace and newlines removed.
absl::StatusOr<std::string> ReadTrimmed(Sysfs& fs, std::string_view path);

// A Sysfs over a real directory tree. Paths are opened with openat2(2)
// and RESOLVE_BENEATH relative to the root directory, so the kernel itself
// refuses any resolution, links included, that leaves the root (one system
// call per access). Kernels before 5.6 (no openat2) fall back to realpath(3)
// and a prefix check.
class RealSysfs : public Sysfs {
 public:
  // `root` is an absolute or relative directory; it is opened on first use.
  explicit RealSysfs(std::string root);
  ~RealSysfs() override;

  absl::StatusOr<std::string> Read(std::string_view path) override;
  absl::Status Write(std::string_view path, std::string_view data) override;
  absl::StatusOr<std::vector<std::string>> List(std::string_view dir) override;
  absl::StatusOr<std::string> Resolve(std::string_view path) override;
  bool Exists(std::string_view path) override;
  absl::StatusOr<UniqueFd> OpenExclusive(std::string_view path) override;
  absl::StatusOr<std::map<std::string, std::string>> DeviceNumbersIn(
      std::string_view dir) override;
  absl::StatusOr<std::string> ReadAt(std::string_view path, uint64_t offset,
                                     size_t length) override;

  const std::string& root() const { return root_; }

  // Tests: take the realpath fallback, as on kernels without openat2.
  void DisableOpenat2ForTesting() { no_openat2_.store(true); }

 protected:
  // The absolute real path of `path` after validation and link resolution,
  // refused when it leaves the root.
  absl::StatusOr<std::string> RealPath(std::string_view path);
  // An fd for `path` (validated) opened beneath the root with `flags`;
  // PermissionDenied when it would leave the root. `err`, when given, gets
  // the errno of a failed open (0 otherwise).
  absl::StatusOr<int> OpenBeneath(std::string_view path, int flags, int* err = nullptr);

 private:
  absl::StatusOr<int> RootFd();

  const std::string root_;
  absl::Mutex mu_;
  int root_fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::string canonical_root_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> no_openat2_{false};
};

}  // namespace pdc::driver

#endif  // PDC_DRIVER_SYSFS_H_
