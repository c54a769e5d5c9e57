#include "extender/node_token_dir.h"

#include <openssl/sha.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "model/names.h"
#include "spdlog/spdlog.h"

namespace pdc::extender {

bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string Sha256(std::string_view s) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  ::SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), out);
  return std::string(reinterpret_cast<const char*>(out), sizeof(out));
}

absl::StatusOr<std::optional<std::string>> NodeTokenDir::NodeOf(std::string_view bearer) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = ReloadIfChangedLocked(); !s.ok()) return s;
  auto it = by_digest_.find(Sha256(bearer));
  if (it == by_digest_.end() || !SameSecret(it->second.token, bearer)) return std::nullopt;
  return it->second.node;
}

size_t NodeTokenDir::nodes() const {
  absl::MutexLock lock(&mu_);
  return by_digest_.size();
}

absl::Status NodeTokenDir::ReloadIfChangedLocked() {
  struct stat st = {};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    loaded_ = false;
    by_digest_.clear();
    return absl::UnavailableError(absl::StrCat(
        "extender.nodeAuth.tokenDir: ", dir_, " is not a readable directory"));
  }
  const absl::Time now = clock_->Now();
  if (loaded_ && st.st_ino == inode_ && st.st_mtim.tv_sec == mtime_.tv_sec &&
      st.st_mtim.tv_nsec == mtime_.tv_nsec && now - loaded_at_ < kRereadEvery) {
    return absl::OkStatus();
  }
  absl::flat_hash_map<std::string, Entry> read;
  std::set<std::string> shared;  // Digests found in more than one file.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code fe;
    if (!std::filesystem::is_regular_file(e.path(), fe)) continue;  // Follows links.
    if (!model::ValidateObjectName("node name", name).ok()) {
      spdlog::warn("extender.nodeAuth.tokenDir: skipping {}: not a node name",
                   model::QuoteForMessage(name));
      continue;
    }
    absl::StatusOr<std::string> text = ReadFileToString(e.path().string());
    if (!text.ok()) {
      spdlog::warn("extender.nodeAuth.tokenDir: skipping {}: {}", name, text.status().ToString());
      continue;
    }
    std::string token(absl::StripAsciiWhitespace(*text));
    if (token.empty()) continue;
    std::string digest = Sha256(token);
    if (auto [it, fresh] = read.try_emplace(digest, Entry{name, std::move(token)}); !fresh) {
      spdlog::error("extender.nodeAuth.tokenDir: nodes {} and {} have the same token; it "
                    "authenticates neither",
                    it->second.node, name);
      shared.insert(digest);
    }
  }
  if (ec) {
    loaded_ = false;
    by_digest_.clear();
    return absl::UnavailableError(
        absl::StrCat("extender.nodeAuth.tokenDir: cannot read ", dir_, ": ", ec.message()));
  }
  for (const std::string& d : shared) read.erase(d);
  by_digest_ = std::move(read);
  const bool first = !loaded_;
  loaded_ = true;
  loaded_at_ = now;
  inode_ = st.st_ino;
  mtime_ = st.st_mtim;
  if (first) {
    spdlog::info("extender.nodeAuth.tokenDir: {} node tokens from {}", by_digest_.size(), dir_);
  }
  return absl::OkStatus();
}

}  // namespace pdc::extender
