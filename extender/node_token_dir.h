// NodeTokenDir: per-node bearer tokens from a directory, for clusters whose
// service-account tokens carry no node name (before Kubernetes 1.30): one
// file per node, named after the node, holding that node's token - a Secret
// mounted as a volume, one key per node (extender.nodeAuth.tokenDir).
//
// The directory is looked at (stat) on every lookup and read again when it
// changed - kubelet updates a mounted Secret by swapping its `..data` link,
// which changes the directory; by hand, replace a file by renaming a new one
// over it - and at least every `reread_every` (a change in the same clock
// tick of the file system as the last reading leaves the directory's
// modification time as it was). Names starting with '.' (`..data`, editors' files) are skipped,
// as are names that are not Kubernetes object names and empty files; a
// token found in two files belongs to neither (logged).
//
// Tokens are found by their SHA-256 digest, then compared byte for byte in
// constant time: how long a lookup takes says nothing about the bytes of
// any node's token.
// Thread-safety: thread-safe.
#ifndef PDC_EXTENDER_NODE_TOKEN_DIR_H_
#define PDC_EXTENDER_NODE_TOKEN_DIR_H_

#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace pdc::extender {

// True when `a` and `b` are equal; the time taken depends on their lengths
// only, not on where they differ.
bool SameSecret(std::string_view a, std::string_view b);

// The SHA-256 of `s`, 32 raw bytes.
std::string Sha256(std::string_view s);

class NodeTokenDir {
 public:
  static constexpr absl::Duration kRereadEvery = absl::Seconds(10);
  // `clock` outlives the reader.
  NodeTokenDir(std::string dir, const Clock* clock) : dir_(std::move(dir)), clock_(clock) {}

  // The node whose token `bearer` is, nullopt when none. An error when the
  // directory cannot be read (the last good reading is not used: a removed
  // Secret revokes its tokens).
  absl::StatusOr<std::optional<std::string>> NodeOf(std::string_view bearer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Nodes with a token, as of the last reading.
  size_t nodes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string node;
    std::string token;
  };
  absl::Status ReloadIfChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::Time loaded_at_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  ino_t inode_ ABSL_GUARDED_BY(mu_) = 0;
  timespec mtime_ ABSL_GUARDED_BY(mu_) = {};
  // SHA-256(token) -> its node and token.
  absl::flat_hash_map<std::string, Entry> by_digest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pdc::extender

#endif  // PDC_EXTENDER_NODE_TOKEN_DIR_H_
