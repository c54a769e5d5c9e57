#include "driver/sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace pdc::driver {
namespace {

absl::StatusOr<std::string> CanonicalPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    return ErrnoStatus("realpath", path, errno);
  }
  return std::string(buf);
}

}  // namespace

absl::Status ValidateRelativePath(std::string_view path) {
  if (path.empty()) return absl::InvalidArgumentError("empty sysfs path");
  if (path == ".") return absl::OkStatus();  // The root itself.
  if (path.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("absolute path \"", Sv(path), "\" where a path below the root is required"));
  }
  for (absl::string_view part : absl::StrSplit(Sv(path), '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "path \"", Sv(path), "\" has an empty, \".\" or \"..\" component"));
    }
    if (part.find('\0') != absl::string_view::npos) {
      return absl::InvalidArgumentError("path contains a NUL byte");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LinkName(Sysfs& fs, std::string_view path) {
  auto resolved = fs.Resolve(path);
  if (!resolved.ok()) return resolved.status();
  const size_t slash = resolved->rfind('/');
  return slash == std::string::npos ? *resolved : resolved->substr(slash + 1);
}

absl::StatusOr<std::string> ReadTrimmed(Sysfs& fs, std::string_view path) {
  auto content = fs.Read(path);
  if (!content.ok()) return content.status();
  std::string s = std::move(*content);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' ||
                        s.back() == '\t' || s.back() == '\0')) {
    s.pop_back();
  }
  return s;
}

RealSysfs::RealSysfs(std::string root) : root_(std::move(root)) {}

RealSysfs::~RealSysfs() {
  absl::MutexLock lock(&mu_);
  if (root_fd_ >= 0) ::close(root_fd_);
}

absl::StatusOr<int> RealSysfs::RootFd() {
  absl::MutexLock lock(&mu_);
  if (root_fd_ >= 0) return root_fd_;
  auto canonical = CanonicalPath(root_);
  if (!canonical.ok()) return canonical.status();
  int fd = ::open(canonical->c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", *canonical, errno);
  root_fd_ = fd;
  canonical_root_ = std::move(*canonical);
  return root_fd_;
}

absl::StatusOr<int> RealSysfs::OpenBeneath(std::string_view path, int flags, int* err) {
  int ignored = 0;
  if (err == nullptr) err = &ignored;
  *err = 0;
  if (absl::Status s = ValidateRelativePath(path); !s.ok()) return s;
  if (!no_openat2_.load(std::memory_order_relaxed)) {
    auto root = RootFd();
    if (!root.ok()) return root.status();
    open_how how{};
    how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    const std::string p(path);
    long fd;
    do {
      fd = ::syscall(SYS_openat2, *root, p.c_str(), &how, sizeof(how));
    } while (fd < 0 && (errno == EINTR || errno == EAGAIN));
    if (fd >= 0) return static_cast<int>(fd);
    *err = errno;
    if (errno == EXDEV) {
      return absl::PermissionDeniedError(
          absl::StrCat("\"", Sv(path), "\" resolves outside ", root_));
    }
    if (errno != ENOSYS) return ErrnoStatus("open", absl::StrCat(root_, "/", Sv(path)), errno);
    no_openat2_.store(true, std::memory_order_relaxed);
  }
  auto real = RealPath(path);
  if (!real.ok()) return real.status();
  int fd = ::open(real->c_str(), flags | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return ErrnoStatus("open", *real, errno);
  }
  return fd;
}

absl::StatusOr<std::string> RealSysfs::RealPath(std::string_view path) {
  if (absl::Status s = ValidateRelativePath(path); !s.ok()) return s;
  auto root = CanonicalPath(root_);
  if (!root.ok()) return root.status();
  auto real = CanonicalPath(absl::StrCat(*root, "/", Sv(path)));
  if (!real.ok()) return real.status();
  const bool inside = *real == *root || (real->size() > root->size() &&
                                         real->compare(0, root->size(), *root) == 0 &&
                                         (*root == "/" || (*real)[root->size()] == '/'));
  if (!inside) {
    return absl::PermissionDeniedError(
        absl::StrCat("\"", Sv(path), "\" resolves to ", *real, ", outside ", *root));
  }
  return std::move(*real);
}

absl::StatusOr<std::string> RealSysfs::Read(std::string_view path) {
  auto fd = OpenBeneath(path, O_RDONLY);
  if (!fd.ok()) return fd.status();
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(*fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(*fd);
      return ErrnoStatus("read", absl::StrCat(root_, "/", Sv(path)), err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(*fd);
  return out;
}

absl::StatusOr<std::string> RealSysfs::ReadAt(std::string_view path, uint64_t offset,
                                              size_t length) {
  auto fd = OpenBeneath(path, O_RDONLY | O_NONBLOCK);
  if (!fd.ok()) return fd.status();
  std::string out(length, '\0');
  size_t got = 0;
  while (got < length) {
    ssize_t n = ::pread(*fd, out.data() + got, length - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(*fd);
      return ErrnoStatus("read", absl::StrCat(root_, "/", Sv(path)), err);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(*fd);
  out.resize(got);
  return out;
}

absl::Status RealSysfs::Write(std::string_view path, std::string_view data) {
  // O_TRUNC as a shell redirection does: harmless on sysfs, and makes a
  // plain-file tree behave like attributes.
  auto fd = OpenBeneath(path, O_WRONLY | O_TRUNC);
  if (!fd.ok()) return fd.status();
  // One write() call: the kernel handles an attribute write as one store.
  ssize_t n;
  do {
    n = ::write(*fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(*fd);
  const std::string where = absl::StrCat(root_, "/", Sv(path));
  if (n < 0) {
    return ErrnoStatus(absl::StrCat("write \"", absl::CEscape(Sv(data)), "\" to"), where, err);
  }
  if (static_cast<size_t>(n) != data.size()) {
    return absl::UnavailableError(absl::StrCat("short write to ", where));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> RealSysfs::List(std::string_view dir) {
  auto fd = OpenBeneath(dir, O_RDONLY | O_DIRECTORY);
  if (!fd.ok()) return fd.status();
  DIR* d = ::fdopendir(*fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(*fd);
    return ErrnoStatus("fdopendir", absl::StrCat(root_, "/", Sv(dir)), err);
  }
  return TakeSortedDirectoryNames(d);
}

absl::StatusOr<std::string> RealSysfs::Resolve(std::string_view path) {
  auto fd = OpenBeneath(path, O_PATH);
  if (!fd.ok()) return fd.status();
  // The kernel's name for the opened file; no second resolution, no race.
  char buf[PATH_MAX];
  const std::string proc_fd = absl::StrCat("/proc/self/fd/", *fd);
  ssize_t n = ::readlink(proc_fd.c_str(), buf, sizeof(buf) - 1);
  const int err = errno;
  ::close(*fd);
  std::string real;
  if (n > 0) {
    real.assign(buf, static_cast<size_t>(n));
  } else {
    // No /proc: resolve by path instead (still confined by RealPath).
    auto r = RealPath(path);
    if (!r.ok()) return r.status();
    real = std::move(*r);
    (void)err;
  }
  std::string root;
  {
    absl::MutexLock lock(&mu_);
    root = canonical_root_;
  }
  if (root.empty()) {
    auto c = CanonicalPath(root_);
    if (!c.ok()) return c.status();
    root = *c;
  }
  if (real == root) return std::string();
  if (root == "/") return real.substr(1);
  if (real.size() > root.size() && real.compare(0, root.size(), root) == 0 &&
      real[root.size()] == '/') {
    return real.substr(root.size() + 1);
  }
  return absl::PermissionDeniedError(
      absl::StrCat("\"", Sv(path), "\" resolves to ", real, ", outside ", root));
}

bool RealSysfs::Exists(std::string_view path) {
  auto fd = OpenBeneath(path, O_PATH);
  if (!fd.ok()) return false;
  ::close(*fd);
  return true;
}

absl::StatusOr<UniqueFd> RealSysfs::OpenExclusive(std::string_view path) {
  int err = 0;
  // O_NONBLOCK: a removable-media drive without a medium still opens.
  auto fd = OpenBeneath(path, O_RDONLY | O_EXCL | O_NONBLOCK, &err);
  if (fd.ok()) return UniqueFd(*fd);
  if (err == EBUSY) {
    return absl::FailedPreconditionError(absl::StrCat(
        root_, "/", Sv(path), " is busy: the kernel refuses an exclusive open"));
  }
  return fd.status();
}

absl::StatusOr<std::map<std::string, std::string>> RealSysfs::DeviceNumbersIn(
    std::string_view dir) {
  auto fd = OpenBeneath(dir, O_RDONLY | O_DIRECTORY);
  if (!fd.ok()) return fd.status();
  // fdopendir takes the descriptor; the listing closes it. A second one,
  // O_PATH, anchors the fstatat calls.
  auto anchor = OpenBeneath(dir, O_PATH | O_DIRECTORY);
  if (!anchor.ok()) {
    ::close(*fd);
    return anchor.status();
  }
  UniqueFd at(*anchor);
  DIR* d = ::fdopendir(*fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(*fd);
    return ErrnoStatus("fdopendir", absl::StrCat(root_, "/", Sv(dir)), err);
  }
  std::map<std::string, std::string> out;
  for (const std::string& name : TakeSortedDirectoryNames(d)) {
    struct stat st {};
    if (::fstatat(at.get(), name.c_str(), &st, 0) != 0) {
      if (errno == ENOENT) continue;  // Closed or removed meanwhile.
      return ErrnoStatus("stat", absl::StrCat(root_, "/", Sv(dir), "/", name), errno);
    }
    if (!S_ISBLK(st.st_mode) && !S_ISCHR(st.st_mode)) continue;
    out[name] = absl::StrCat(S_ISBLK(st.st_mode) ? "b" : "c", major(st.st_rdev), ":",
                             minor(st.st_rdev));
  }
  return out;
}

}  // namespace pdc::driver
