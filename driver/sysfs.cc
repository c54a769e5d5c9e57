#include "driver/sysfs.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
  auto real = RealPath(path);
  if (!real.ok()) return real.status();
  return ReadFileToString(*real);
}

absl::Status RealSysfs::Write(std::string_view path, std::string_view data) {
  auto real = RealPath(path);
  if (!real.ok()) return real.status();
  // O_TRUNC as a shell redirection does: harmless on sysfs, and makes a
  // plain-file tree behave like attributes.
  int fd = ::open(real->c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", *real, errno);
  // One write() call: the kernel handles an attribute write as one store.
  ssize_t n;
  do {
    n = ::write(fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoStatus(absl::StrCat("write \"", absl::CEscape(Sv(data)), "\" to"), *real, err);
  if (static_cast<size_t>(n) != data.size()) {
    return absl::UnavailableError(absl::StrCat("short write to ", *real));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> RealSysfs::List(std::string_view dir) {
  auto real = RealPath(dir);
  if (!real.ok()) return real.status();
  return ListDirectory(*real);
}

absl::StatusOr<std::string> RealSysfs::Resolve(std::string_view path) {
  auto real = RealPath(path);
  if (!real.ok()) return real.status();
  auto root = CanonicalPath(root_);
  if (!root.ok()) return root.status();
  if (*real == *root) return std::string();
  return real->substr(*root == "/" ? 1 : root->size() + 1);
}

bool RealSysfs::Exists(std::string_view path) { return RealPath(path).ok(); }

}  // namespace pdc::driver
