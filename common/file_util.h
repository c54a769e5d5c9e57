// Durable file primitives: the recipe every pdc component that must not lose
// an acknowledged write uses (the allocator's file store, the node driver's
// record of original drivers). All functions report errors as absl::Status
// naming the path and the failing system call.
// Thread-safety: functions are stateless; callers serialise writes to one path.
#ifndef PDC_COMMON_FILE_UTIL_H_
#define PDC_COMMON_FILE_UTIL_H_

#include <dirent.h>

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pdc {

// Owns a file descriptor and closes it when destroyed; move-only. -1 is
// "none".
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership without closing.
  int release();
  // Closes the descriptor held, if any.
  void reset();

 private:
  int fd_ = -1;
};

// An error status for the failed system call `op` on `path`, from errno.
absl::Status ErrnoStatus(std::string_view op, std::string_view path, int err);

// Reads the whole file. NotFound when it does not exist.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Replaces `path` with `data` so that after a crash the file holds either the
// old or the new content, never a mix: write `path.tmp`, fsync it, rename it
// over `path`, fsync the directory.
absl::Status WriteFileAtomically(const std::string& path, std::string_view data);

// fsyncs a directory so that creations, renames and unlinks in it are durable.
absl::Status FsyncDirectory(const std::string& dir);

// Creates `dir` and its parents (mode 0750) when missing.
absl::Status MakeDirectories(const std::string& dir);

// File names (not paths) in `dir`, sorted.
absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir);
// The entry names of an open directory stream, sorted, without "." and "..";
// closes `dir` (for callers that open it their own way, e.g. with openat2).
std::vector<std::string> TakeSortedDirectoryNames(DIR* dir);

// Writes all of data to fd, retrying short writes and EINTR.
absl::Status WriteAll(int fd, std::string_view data, std::string_view path);

}  // namespace pdc

#endif  // PDC_COMMON_FILE_UTIL_H_
