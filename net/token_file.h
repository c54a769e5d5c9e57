// TokenFile: a bearer token kept in a file that is replaced while the
// program runs - kubelet rotates a projected service-account token (it
// writes the new one well before the old one expires, through an atomic
// swap of the volume's `..data` link), and an administrator may replace a
// token file by renaming a new one over it. The file is looked at (stat,
// following links) on every Get and read again when its inode, size or
// modification time changed; surrounding whitespace is dropped.
// Thread-safety: thread-safe.
#ifndef PDC_NET_TOKEN_FILE_H_
#define PDC_NET_TOKEN_FILE_H_

#include <sys/types.h>

#include <ctime>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace pdc {

class TokenFile {
 public:
  explicit TokenFile(std::string path) : path_(std::move(path)) {}

  // The token as the file holds it now. When the file cannot be read (or
  // is empty) the token read last is kept; an error only when there never
  // was one (naming the file).
  absl::StatusOr<std::string> Get() ABSL_LOCKS_EXCLUDED(mu_);
  // Times the file was read (tests).
  int reads() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string path_;
  mutable absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  ino_t inode_ ABSL_GUARDED_BY(mu_) = 0;
  off_t size_ ABSL_GUARDED_BY(mu_) = -1;
  timespec mtime_ ABSL_GUARDED_BY(mu_) = {};
  int reads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pdc

#endif  // PDC_NET_TOKEN_FILE_H_
