#include "net/token_file.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

namespace pdc {

absl::StatusOr<std::string> TokenFile::Get() {
  absl::MutexLock lock(&mu_);
  struct stat st = {};
  const bool changed = ::stat(path_.c_str(), &st) != 0 || st.st_ino != inode_ ||
                       st.st_size != size_ || st.st_mtim.tv_sec != mtime_.tv_sec ||
                       st.st_mtim.tv_nsec != mtime_.tv_nsec;
  if (changed || token_.empty()) {
    absl::StatusOr<std::string> text = ReadFileToString(path_);
    ++reads_;
    std::string token =
        text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : std::string();
    if (!token.empty()) {
      token_ = std::move(token);
      inode_ = st.st_ino;
      size_ = st.st_size;
      mtime_ = st.st_mtim;
    } else if (token_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "bearer token file ", path_, ": ",
          text.ok() ? std::string("is empty") : std::string(text.status().message())));
    }
  }
  return token_;
}

int TokenFile::reads() const {
  absl::MutexLock lock(&mu_);
  return reads_;
}

}  // namespace pdc
